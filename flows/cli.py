"""The ``trainfab`` command line.

Each command is a module of :mod:`flows.commands` (its ``add_arguments`` and ``run``); the parser
lists every command with its help and imports only the module of the command that runs.

Exit status: 0 success, 1 a failing check (a regression failed), 2 a usage, configuration or
environment error.  Errors are one line; set ``TRAINFAB_DEBUG=1`` for a traceback.
"""

import argparse
import os
import sys

from . import FlowError
from .commands import COMMANDS, load


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise FlowError(f"{message} (see '{self.prog} --help')")


def build_parser(argv=None) -> argparse.ArgumentParser:
    """The parser: every command with its help; the arguments of the command ``argv`` names
    (its first word), or of every command when ``argv`` is ``None``."""
    p = _Parser(prog="trainfab", description="Generate, verify and measure low-precision "
                "DNN-training arithmetic units (FPRaker, FAST, Equinox/HBFP, Gecko).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    chosen = next((a for a in (argv or []) if not a.startswith("-")), None)
    for name, (_, text) in COMMANDS.items():
        s = sub.add_parser(name, help=text, description=text)
        if argv is None or name == chosen:
            module = load(name)
            module.add_arguments(s)
            s.set_defaults(func=module.run)
    return p


def _terminate(signum, frame):
    raise KeyboardInterrupt  # a killed run cleans up like an interrupted one


def _silence_unused_elaboratables() -> None:
    """A run stopped part-way through building a design (Ctrl-C, an error) leaves Amaranth
    elaboratables it never used, and Amaranth warns about each when it is collected: thousands
    of lines after the one-line message for a large tile.  Amaranth itself keeps quiet when
    the interpreter ends in an exception; so does a run of the command that ends in an error
    (only the command's own process: the silence is for the rest of the process)."""
    unused = sys.modules.get("amaranth._unused")
    if unused is not None:
        unused.MustUse._MustUse__silence = True


def main(argv=None) -> int:
    try:
        try:
            code = _main(argv)
        finally:
            if argv is None:
                _ignore_signals()
    except KeyboardInterrupt:  # a Ctrl-C that came as the run ended
        code = _interrupted(argv)
    return code


def _ignore_signals() -> None:
    """The run's outcome is decided: a late Ctrl-C or SIGTERM must not turn it into a
    traceback as the interpreter shuts down (its threads, its worker processes)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


#: whether this process has said that its run was interrupted (once)
_TOLD: list = []


def _interrupted(argv) -> int:
    """Exit status 130, said once per process of the console script."""
    if argv is None:
        _ignore_signals()
        if _TOLD:
            return 130
        _TOLD.append(True)
    print("trainfab: interrupted", file=sys.stderr)
    return 130


def _main(argv=None) -> int:
    import signal

    if argv is None:  # the console script (or python -m), not a caller's process
        from .runs import arm_faults

        signal.signal(signal.SIGTERM, _terminate)
        arm_faults()
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(words).parse_args(words)
        try:
            return args.func(args)
        except BaseException:
            if argv is None:
                _silence_unused_elaboratables()
            raise
    except FlowError as e:
        print(f"trainfab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _interrupted(argv)
    except RecursionError:
        print("trainfab: error: input nested too deeply to read", file=sys.stderr)
        return 2
    except OSError as e:  # a file system problem outside the checked paths: still one line
        if os.environ.get("TRAINFAB_DEBUG"):
            raise
        where = f": {e.filename}" if e.filename else ""
        print(f"trainfab: error: {e.strerror or e}{where}", file=sys.stderr)
        return 2
    except Exception as e:  # one line for users; the traceback on request
        if os.environ.get("TRAINFAB_DEBUG"):
            raise
        print(f"trainfab: internal error: {type(e).__name__}: {e} "
              f"(set TRAINFAB_DEBUG=1 for a traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
