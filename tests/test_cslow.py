# amaranth: UnusedElaboratable=no
"""The C-slow transformation (:mod:`hdl.common.cslow`), the C-slow FPRaker tile and the
retiming synthesis that makes it fast (:func:`flows.eda.synth.retime_scripts`), with the
co-simulation that checks a retimed netlist (:mod:`flows.eda.cosim`).

The C-slow design is checked against its definition, not against itself: ``C`` one-context
simulations, each with its own random inputs, give every context's outputs cycle by cycle; the
C-slow design, fed the contexts' inputs in rotation, must show the same outputs in the same
order.  A small accumulator's outputs are also derived by hand, and a design C-slowed with one
context too few must fail the same check.
"""

import random
import re
import shutil

import pytest
from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal, Value
from amaranth.lib.memory import Memory
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from flows import FlowError, registry
from flows.eda.synth import aiger_body, port_symbols
from golden import ConfigError
from golden.fpraker.tile import TileConfig
from hdl.common.cslow import MAX_CONTEXTS, c_slow
from hdl.fpraker.tile import Tile


class Acc(wiring.Component):
    """acc += x when en; n counts every cycle; out shows acc (combinational from the state)."""

    def __init__(self):
        super().__init__({"en": In(1), "x": In(8), "acc": Out(16), "n": Out(8)})

    def elaborate(self, platform):
        m = Module()
        acc, n = Signal(16), Signal(8)
        with m.If(self.en):
            m.d.sync += acc.eq(acc + self.x)
        m.d.sync += n.eq(n + 1)
        m.d.comb += [self.acc.eq(acc), self.n.eq(n)]
        return m


class CSlow(Elaboratable):
    def __init__(self, design, contexts):
        self.design, self.contexts = design, contexts

    def elaborate(self, platform):
        return c_slow(self.design, self.contexts, platform)


def ports(design):
    ins, outs = [], []
    for _path, member, value in design.signature.flatten(design):
        (ins if member.flow == wiring.In else outs).append(Value.cast(value))
    return ins, outs


def stimulus(seed, ins, cycles, p_one=0.7):
    rng = random.Random(seed)
    return [[int(rng.random() < p_one) if len(s) == 1 else rng.getrandbits(len(s)) for s in ins]
            for _ in range(cycles)]


def simulate(top, ins, outs, sequence):
    """Outputs before every clock edge, with ``sequence[t]`` on the inputs in cycle ``t``."""
    seen = []
    sim = Simulator(top)
    sim.add_clock(1e-6)

    async def bench(ctx):
        for values in sequence:
            for s, v in zip(ins, values):
                ctx.set(s, v)
            seen.append([ctx.get(o) for o in outs])
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    return seen


def check_interleaved(make, contexts, cycles, chain=None, p_one=0.7):
    """Mismatches of ``make()`` C-slowed (with ``chain`` registers per state register, default
    ``contexts``) against ``contexts`` one-context runs, and those runs' outputs."""
    references, sequences = [], []
    for k in range(contexts):
        design = make()
        ins, outs = ports(design)
        sequences.append(stimulus(k + 1, ins, cycles, p_one))
        references.append(simulate(design, ins, outs, sequences[-1]))
    design = make()
    ins, outs = ports(design)
    merged = [sequences[t % contexts][t // contexts] for t in range(contexts * cycles)]
    got = simulate(CSlow(design, chain or contexts), ins, outs, merged)
    bad = [t for t in range(contexts * cycles)
           if got[t] != references[t % contexts][t // contexts]]
    return bad, references


def test_accumulator_contexts_match_sums_derived_by_hand():
    C, cycles = 3, 40
    design = Acc()
    ins, outs = ports(design)
    sequences = [stimulus(k + 1, ins, cycles) for k in range(C)]
    merged = [sequences[t % C][t // C] for t in range(C * cycles)]
    got = simulate(CSlow(design, C), ins, outs, merged)
    for t in range(C * cycles):
        k, i = t % C, t // C
        acc = sum(x for en, x in sequences[k][:i] if en) % (1 << 16)
        assert got[t] == [acc, i % 256], (t, k, i)


def test_one_context_too_few_is_caught():
    bad, _ = check_interleaved(Acc, 3, 30, chain=2)
    assert bad


def test_one_context_is_the_design_itself():
    design = Acc()
    ins, outs = ports(design)
    seq = stimulus(5, ins, 30)
    plain = Acc()
    expected = simulate(plain, *ports(plain), seq)
    assert simulate(CSlow(design, 1), ins, outs, seq) == expected
    assert expected[-1][1] == 29


class Resettable(Elaboratable):
    """A C-slowed design with its ``sync`` domain's reset as a signal the bench can drive."""

    def __init__(self, design, contexts):
        self.design, self.contexts = design, contexts
        self.cd = ClockDomain("sync")

    def elaborate(self, platform):
        fragment = c_slow(self.design, self.contexts, platform)
        fragment.add_domains(self.cd)
        return fragment


def after_reset(contexts, reset_cycles):
    """The accumulator's outputs over ``2 * contexts`` cycles after 12 cycles of counting,
    then ``reset_cycles`` of reset."""
    design = Acc()
    ins, outs = ports(design)
    top = Resettable(design, contexts)
    seen = []
    sim = Simulator(top)
    sim.add_clock(1e-6)

    async def bench(ctx):
        ctx.set(ins[0], 1)
        ctx.set(ins[1], 5)
        for _ in range(12):
            await ctx.tick()
        ctx.set(top.cd.rst, 1)
        for _ in range(reset_cycles):
            await ctx.tick()
        ctx.set(top.cd.rst, 0)
        for _ in range(2 * contexts):
            seen.append([ctx.get(o) for o in outs])
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    return seen


def test_a_reset_of_contexts_cycles_restarts_every_context():
    C = 3
    # every context from the reset state, then one step each
    assert after_reset(C, C) == [[0, 0]] * C + [[5, 1]] * C
    # one cycle of reset reaches only the chains' first registers
    assert after_reset(C, 1) != [[0, 0]] * C + [[5, 1]] * C


@pytest.mark.parametrize("overrides,contexts", [
    ({"pipeline": 1}, 3),
    ({"sync": "independent"}, 2),
])
def test_cslow_tile_matches_one_context_tiles(overrides, contexts):
    cfg = TileConfig(rows=2, cols=2, **overrides)
    bad, refs = check_interleaved(lambda: Tile(cfg), contexts, 80, p_one=0.8)
    assert not bad, f"first mismatching cycles {bad[:5]}"
    # the random streams kept every context's tile busy and changing its read-outs
    design = Tile(cfg)
    _ins, outs = ports(design)
    names = [path for path, _m, _v in design.signature.flatten(design)
             if _m.flow == wiring.Out]
    busy = names.index(("busy",))
    out00 = names.index(("out", 0, 0))
    for ref in refs:
        assert sum(row[busy] for row in ref) > 15
        assert len({row[out00] for row in ref}) > 3


def test_cslow_tile_slot_counts_contexts():
    cfg = TileConfig(rows=1, cols=1, lanes=2, contexts=3)
    tile = Tile(cfg)
    seen = []
    sim = Simulator(tile)
    sim.add_clock(1e-6)

    async def bench(ctx):
        for _ in range(8):
            seen.append(ctx.get(tile.slot))
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    assert seen == [0, 1, 2, 0, 1, 2, 0, 1]
    assert not hasattr(Tile(TileConfig(rows=1, cols=1, lanes=2)), "slot")


@pytest.mark.parametrize("bad", [0, MAX_CONTEXTS + 1, "2", 2.0, True])
def test_contexts_out_of_range_are_refused(bad):
    with pytest.raises(ValueError, match="contexts must be an integer"):
        c_slow(Acc(), bad)


def test_other_domains_and_memories_are_refused():
    class Fast(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            s = Signal()
            m.d.fast += s.eq(~s)
            return m

    class Mem(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            m.submodules.mem = Memory(shape=4, depth=4, init=[])
            return m

    with pytest.raises(ValueError, match="clock domains"):
        c_slow(Fast(), 2)
    with pytest.raises(ValueError, match="memory"):
        c_slow(Mem(), 2)


def test_tile_contexts_field():
    assert TileConfig().contexts == 1
    with pytest.raises(ConfigError, match="contexts"):
        TileConfig(contexts=9)
    unit = registry.get("fpraker.tile")
    assert unit.retimes(TileConfig(contexts=2)) and not unit.retimes(TileConfig())
    array = registry.get("fast.array")
    assert not array.retimes(array.config_class()(contexts=2))


# ---------------------------------------------------------------------------------------------
# the retiming recipe


def test_aiger_body_cuts_symbols_comments_and_extensions():
    # M I L O A = 3 2 0 1 1: output 6, one and-gate 6 = 4 & 2 (deltas 2 and 2)
    body = b"aig 3 2 0 1 1\n6\n" + bytes([2, 2])
    assert aiger_body(body + b"i0 a\nc\nn\x00\x00\x00\x03c4\x00\nmade by ABC\n") == body
    with pytest.raises(FlowError, match="binary AIGER"):
        aiger_body(b"aag 3 2 0 1 1\n")


def test_port_symbols_keep_ports_and_restore_merged_outputs():
    text = ("input 0 0 clk\ninput 1 0 x\ninput 2 1 x\nlatch 0 0 r\noutput 0 0 y\n"
            "output 1 0 busy\noutput 1 0 working\noutput 2 1 v\noutput 2 0 v\n"
            "output 3 0 z\n")
    kept, commands = port_symbols(text)
    assert kept == ("input 0 0 clk\ninput 1 0 x\ninput 2 1 x\noutput 0 0 y\n"
                    "output 1 0 busy\noutput 2 1 v\noutput 3 0 z\n")
    assert commands == ["add -output working 1", "connect -set working[0] busy[0]",
                        "connect -set v[0] v[1]"]
    # a merged bit beyond the bits kept for its port: the reader cannot give it back
    with pytest.raises(FlowError, match=r"z\[1\]"):
        port_symbols(text + "output 3 1 z\n")


tools = pytest.mark.skipif(not all(shutil.which(t) for t in ("yosys", "berkeley-abc", "sta",
                                                              "iverilog", "vvp")),
                           reason="needs yosys, berkeley-abc, OpenSTA and Icarus")


@tools
def test_retimed_tile_netlist_matches_its_verilog(tmp_path):
    from flows.config import load_config
    from flows.eda.cosim import cosim
    from flows.eda.synth import area
    from flows.eda.tools import OSU018

    unit = registry.get("fpraker.tile")
    cfg = load_config(unit, None, ["rows=1", "cols=1", "lanes=2", "contexts=2"])
    r = area(unit, cfg, outdir=tmp_path / "a", progress=False)
    assert r["retimed"] and r["retime_check"]["mismatches"] == 0
    assert r["retime_check"]["changes"] > 100
    assert "Retimed" in (tmp_path / "a" / "area.md").read_text()
    # the check can fail: the same netlist with every XOR cell turned into an XNOR
    verilog = (tmp_path / "a" / "fpraker_tile.v").read_text()
    netlist = (tmp_path / "a" / "fpraker_tile.mapped.v").read_text()
    assert re.search(r"^\s*XOR2X1\s", netlist, re.M)
    broken = re.sub(r"^(\s*)XOR2X1(\s)", r"\1XNOR2X1\2", netlist, flags=re.M)
    assert cosim(verilog, broken, "fpraker_tile", OSU018, cycles=120)["mismatches"] > 0
