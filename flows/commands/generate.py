"""``trainfab generate UNIT``: the Verilog of one unit and its JSON manifest."""

from pathlib import Path

from .. import registry
from ..options import UNIT_HELP
from .common import config_args, output_arg


def add_arguments(p) -> None:
    p.add_argument("unit", help=UNIT_HELP)
    config_args(p)
    output_arg(p, "build/generate/UNIT")


def run(args) -> int:
    from ..config import load_config
    from ..eda.generate import generate

    unit = registry.get(args.unit)
    cfg = load_config(unit, args.config, args.sets)
    man = generate(unit, cfg, Path(args.output) if args.output else None)
    print(f"{unit.name}: {man['verilog']} ({len(man['ports'])} ports, sha256 "
          f"{man['verilog_sha256'][:16]}…); manifest {Path(man['verilog']).with_suffix('.json')}")
    return 0
