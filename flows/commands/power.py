"""``trainfab power UNIT``: power from a gate-level simulation's activity (yosys + cocotb +
OpenSTA, :mod:`flows.eda.power`)."""

import time
from pathlib import Path

from .. import registry
from ..options import SEED_RANGE, SIMULATORS, UNIT_HELP, bounded
from .common import clock_arg, config_args, liberty_arg, output_arg


def add_arguments(p) -> None:
    from ..eda.power import DEFAULT_GROUPS, GROUPS_RANGE

    p.add_argument("unit", help=UNIT_HELP)
    config_args(p)
    clock_arg(p, help_text="clock period in ns for synthesis and power, 0.01 to 100000 "
                           "(default 10)")
    liberty_arg(p)
    output_arg(p, "build/power/UNIT")
    p.add_argument("--operands", metavar="FILE.npz|MODEL",
                   help="operand groups: arrays a and b of bf16 bit patterns (see the module "
                        "docstring of flows.eda.power), or a model name (minilm, minilm-l3) for "
                        "real activations and weights of its first FFN output layer; "
                        "default: synthetic N(0,1), ReLU on a")
    p.add_argument("--groups", type=bounded(int, *GROUPS_RANGE), default=DEFAULT_GROUPS,
                   help="synthetic operand groups when no --operands is given, "
                        f"{GROUPS_RANGE[0]} to {GROUPS_RANGE[1]:,} (default %(default)s)")
    p.add_argument("--sim", choices=SIMULATORS, default=None,
                   help="simulator of the gate-level run (default icarus; see flows.eda.power)")
    p.add_argument("--seed", type=bounded(int, *SEED_RANGE), default=1,
                   help="seed of the synthetic operands and the run, 0 to 2**32-1 (default 1)")


def run(args) -> int:
    from ..config import load_config
    from ..eda.power import power
    from ..progress import echo

    unit = registry.get(args.unit)
    clock_ns = args.clock_ns
    cfg = load_config(unit, args.config, args.sets)
    t0 = time.monotonic()
    r = power(unit, cfg, liberty=args.liberty, clock_ns=clock_ns,
              outdir=Path(args.output) if args.output else None, operands=args.operands,
              groups=args.groups, sim=args.sim, seed=args.seed,
              progress=echo)
    src = r["activity_source"]
    ops = src["operands"]
    ann = r["annotation"]
    what = (f"synthetic operands (seed {ops['seed']}, N(0,1) bf16, ReLU on a)"
            if ops["kind"] == "synthetic" else
            f"operands from {ops['model']} ({ops['layer']})" if ops["kind"] == "model"
            else f"operands from {ops['path']}")
    print(f"{unit.name}: {r['total_mw']:.4f} mW at {r['clock_ns']:g} ns (internal "
          f"{r['internal_mw']:.4f}, switching {r['switching_mw']:.4f}, leakage "
          f"{r['leakage_mw']:.6f} mW), {r['energy_per_group_pj']:.3f} pJ per group; activity "
          f"from a {src['simulator']} gate-level simulation of {src['cycles']:g} cycles "
          f"({ops['groups']} groups of {what}); {100 * ann['pin_fraction']:.1f} % of "
          f"{ann['pins']} cell pins annotated; OpenSTA's port-only propagated estimate "
          f"{r['propagated_estimate_mw']['total']:.4f} mW ({time.monotonic() - t0:.0f} s)")
    print(f"report: {r['outdir']}/power.json, {r['outdir']}/power.md")
    return 0
