"""Random co-simulation of a mapped netlist against the Verilog it was synthesized from.

A retiming synthesis (:func:`flows.eda.synth.retime_scripts`) moves registers through the
logic, so the netlist's registers no longer match the design's and no combinational
equivalence check applies.  :func:`cosim` checks the netlist the way that still works: both
designs in one Icarus simulation, the same random inputs every cycle, ``rst`` held for the
first ``reset_cycles`` cycles, and every output compared in every cycle after that.  The cells
are the liberty's own logic (:func:`flows.eda.power_cells.cell_models`, zero delay), so the
check covers the netlist as timed.

The design runs as yosys' ``proc`` writes it (its processes as continuous assignments and
flip-flops), the same logic, without ``always @*`` blocks that Icarus may leave unevaluated
until an input changes.

Retiming keeps a design's behaviour from a reset onwards, not its power-up state: the netlist's
registers start unknown (``x``) and the reset must have reached all of them, which takes as
many cycles as registers were moved in a row; ``reset_cycles`` defaults to 16.  A netlist
output still ``x`` after the reset where the design's is known counts as a mismatch.
"""

import re
import subprocess
import tempfile
from pathlib import Path

from .. import FlowError
from .tools import require

_PORT = re.compile(r"^\s*(input|output)\s+(?:\[(\d+):(\d+)\]\s+)?(\\\S+|[A-Za-z_][\w$]*)\s*;",
                   re.M)


def ports(verilog: str, top: str) -> list[tuple[str, str, int]]:
    """``(direction, name, width)`` of module ``top``'s ports in ``verilog``."""
    m = re.search(rf"^module\s+{re.escape(top)}\s*\(", verilog, re.M)
    if m is None:
        raise FlowError(f"cosim: no module {top} in the Verilog")
    end = verilog.index("endmodule", m.end())
    found = []
    for d, hi, lo, name in _PORT.findall(verilog[m.end():end]):
        width = int(hi) - int(lo) + 1 if hi else 1
        found.append((d, name, width))
    return found


def harness(top: str, netlist_top: str, port_list, cycles: int, reset_cycles: int,
            seed: int) -> str:
    """The Verilog test bench: ``top`` (the design) and ``netlist_top`` (the netlist) on the
    same random inputs; one line ``MISMATCH cycle port design netlist`` per differing output
    (at most 20) and a last line ``COSIM cycles=N mismatches=M changes=K`` (``K``: outputs of
    the design that changed from one cycle to the next)."""
    ins = [(n, w) for d, n, w in port_list if d == "input" and n not in ("clk", "rst")]
    outs = [(n, w) for d, n, w in port_list if d == "output"]
    # rst rises after time 0, so that every combinational block sees an event on it
    lines = ["`timescale 1ns/1ps", "module cosim_tb;", "  reg clk = 0, rst = 0;",
             "  integer cycle, bad, seed;"]
    for n, w in ins:
        lines.append(f"  reg [{w - 1}:0] i_{n};")
    for n, w in outs:
        lines += [f"  wire [{w - 1}:0] d_{n};", f"  wire [{w - 1}:0] n_{n};",
                  f"  reg [{w - 1}:0] p_{n};"]
    conn = ", ".join([".clk(clk)", ".rst(rst)"] + [f".{n}(i_{n})" for n, _ in ins])
    lines.append(f"  {top} rtl({conn}, " + ", ".join(f".{n}(d_{n})" for n, _ in outs) + ");")
    lines.append(f"  {netlist_top} netlist({conn}, "
                 + ", ".join(f".{n}(n_{n})" for n, _ in outs) + ");")
    lines += ["  integer changes;",
              "  initial begin", f"    seed = {seed}; bad = 0; changes = 0;", "    #1;",
              f"    for (cycle = 0; cycle < {cycles}; cycle = cycle + 1) begin",
              f"      rst = cycle < {reset_cycles};"]
    for n, w in ins:
        words = (w + 31) // 32
        parts = ", ".join("$random(seed)" for _ in range(words))
        lines.append(f"      i_{n} = {{{parts}}};" if words > 1 else f"      i_{n} = $random(seed);")
    lines.append("      #1;")
    for n, _ in outs:
        lines += [f"      if (cycle >= {reset_cycles} && d_{n} !== n_{n}) begin",
                  "        bad = bad + 1;",
                  f'        if (bad <= 20) $display("MISMATCH %0d {n} %b %b", cycle, d_{n}, n_{n});',
                  "      end",
                  f"      if (cycle > {reset_cycles} && d_{n} !== p_{n}) changes = changes + 1;",
                  f"      p_{n} = d_{n};"]
    lines += ["      clk = 1; #1; clk = 0; #1;", "    end",
              f'    $display("COSIM cycles=%0d mismatches=%0d changes=%0d", {cycles - reset_cycles},'
              ' bad, changes);',
              "    $finish;", "  end", "endmodule", ""]
    return "\n".join(lines)


def cosim(verilog: str, netlist: str, top: str, lib: Path, *, cycles: int = 400,
          reset_cycles: int = 16, seed: int = 1, workdir: Path | None = None) -> dict:
    """Co-simulate ``netlist`` (mapped on ``lib``) against ``verilog`` (module ``top`` in both;
    see the module docstring).  Returns ``cycles`` (compared), ``mismatches``, ``first`` (up
    to 20 lines ``cycle port design netlist``) and ``changes``, how many times an output of
    the design changed from one cycle to the next after the reset (how much the random inputs
    exercised it).  :class:`FlowError` if the two have
    different ports, the design has no ``clk``/``rst`` or Icarus fails."""
    from .power_cells import cell_models, power_netlist

    if cycles <= reset_cycles:
        raise FlowError(f"cosim: {cycles} cycles leave none after {reset_cycles} of reset")
    design_ports, netlist_ports = ports(verilog, top), ports(netlist, top)
    if sorted(design_ports) != sorted(netlist_ports):
        raise FlowError(f"cosim: the netlist's ports differ from the design's "
                        f"({sorted(set(design_ports) ^ set(netlist_ports))[:4]})")
    names = {n for _, n, _ in design_ports}
    if not {"clk", "rst"} <= names:
        raise FlowError("cosim: the design needs clk and rst ports")
    net_text, instances = power_netlist(netlist)
    net_top = f"{top}__netlist"
    net_text = re.sub(rf"^module\s+{re.escape(top)}\s*\(", f"module {net_top}(", net_text,
                      count=1, flags=re.M)
    models, _ = cell_models(lib, {i["cell"] for i in instances})
    iverilog, vvp = require("iverilog"), require("vvp")
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp = Path(tmp)
        (tmp / "rtl.v").write_text(verilog)
        # the design through yosys' proc: continuous assignments instead of the always @*
        # blocks that Icarus may leave unevaluated (x) until one of their inputs changes
        proc = subprocess.run([require("yosys"), "-q", "-p",
                               f"read_verilog rtl.v; hierarchy -top {top}; proc; opt_clean; "
                               "write_verilog -noattr design.v"], cwd=tmp, capture_output=True,
                              text=True)
        if proc.returncode:
            raise FlowError(f"cosim: yosys could not read the design: "
                            f"{(proc.stderr or proc.stdout)[-400:]}")
        (tmp / "netlist.v").write_text(net_text)
        (tmp / "cells.v").write_text(models)
        (tmp / "tb.v").write_text(harness(top, net_top, design_ports, cycles, reset_cycles, seed))
        build = subprocess.run([iverilog, "-g2012", "-o", "sim.vvp", "-s", "cosim_tb", "tb.v",
                                "design.v", "netlist.v", "cells.v"], cwd=tmp,
                               capture_output=True, text=True)
        if build.returncode:
            raise FlowError(f"cosim: iverilog failed: {(build.stderr or build.stdout)[:400]}")
        run = subprocess.run([vvp, "-n", "sim.vvp"], cwd=tmp, capture_output=True, text=True)
    done = re.search(r"COSIM cycles=(\d+) mismatches=(\d+) changes=(\d+)", run.stdout)
    if run.returncode or done is None:
        raise FlowError(f"cosim: the simulation did not finish: {(run.stderr or run.stdout)[-400:]}")
    first = [line[len("MISMATCH "):] for line in run.stdout.splitlines()
             if line.startswith("MISMATCH ")]
    return {"cycles": int(done.group(1)), "mismatches": int(done.group(2)),
            "changes": int(done.group(3)), "first": first}


__all__ = ["cosim", "harness", "ports"]
