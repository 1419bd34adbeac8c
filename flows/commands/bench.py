"""``trainfab bench``: the speed of the golden models and cycle statistics."""


def add_arguments(p) -> None:
    p.add_argument("--quick", action="store_true", help="smaller sizes")


def run(args) -> int:
    from ..bench import main

    return main(["--quick"] if args.quick else [])
