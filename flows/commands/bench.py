"""``trainfab bench``: the speed of the golden models, cycle statistics and the training
GEMMs."""


def add_arguments(p) -> None:
    p.add_argument("--quick", action="store_true", help="smaller sizes")
    p.add_argument("--gemms", action="store_true",
                   help="only the training GEMMs: every number format beside NumPy's float32 "
                        "matmul, with one thread and with two")


def run(args) -> int:
    from ..bench import main

    return main(["--quick"] * args.quick + ["--gemms"] * args.gemms)
