"""Runs ``trainfab`` for the data-safety suite where a plain command line cannot.

``python tests/safety_driver.py small-demo ARGS…``
    ``trainfab demo`` with one unit (common.fp_add) instead of one per family.
``python tests/safety_driver.py small-paper ARGS…``
    ``trainfab paper`` with one unit, without its studies and sweep: the run's own output
    handling (lock, private folder, step times, summary, results page) on a small job.

Both report their quick regressions as passed without running them: a regression writes into
its own run folder under ``build/sim`` (never into the output folder), and the suite is about
the output folder.
``python tests/safety_driver.py full-disk SIZE_KB SRC DEST -- ARGS…`` (as root, inside
    ``unshare -m``): mounts a tmpfs of SIZE_KB at DEST, copies SRC's tree into it, fills the
    file system to the last byte, runs ``trainfab ARGS…`` (``--driver NAME ARGS…``: one of
    the drivers above) and prints ``{"rc", "out", "err", "snapshot"}`` as
    JSON (the tmpfs disappears with the mount namespace).

The first two run the CLI exactly as the console script does (signal handlers, fault points).
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def _cli(args: list[str]) -> int:
    import flows.eda.simulate
    from flows.cli import main

    class Passed:
        passed, tests, failed = True, 1, 0

        def summary(self):
            return "PASS (not run: the data-safety suite's small job)"

    flows.eda.simulate.run_testbench = lambda unit, cfg, **kwargs: Passed()
    sys.argv = ["trainfab", *args]
    return main()


def small_demo(args: list[str]) -> int:
    import flows.report.demo_run
    import flows.report.paper_run
    from flows import registry

    flows.report.demo_run.demo_units = lambda: [registry.get("common.fp_add")]
    return _cli(args)


def small_paper(args: list[str]) -> int:
    import flows.report.demo_run
    import flows.report.paper_run
    from flows import registry

    one = registry.get("common.round")
    registry.UNITS = {one.name: one}
    flows.report.paper_run._fpraker_studies = lambda out, results: ("", {}, {})
    flows.report.paper_run._own_clock_power = lambda out: ("", {})
    flows.report.paper_run._paper_sweep = lambda out, jobs: 0
    return _cli(args)


def full_disk(size_kb: str, src: str, dest: str, args: list[str]) -> int:
    from snapshot import snapshot

    dest_p = Path(dest)
    dest_p.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", dest],
                   check=True)
    for entry in Path(src).iterdir():
        target = dest_p / entry.name
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target, symlinks=True)
        else:
            shutil.copy2(entry, target, follow_symlinks=False)
    filler = dest_p / "filler.bin"
    try:  # fill the file system: the run's first write fails
        with open(filler, "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError:
        pass
    if args[:1] == ["--driver"]:  # demo and paper at their small size
        command = [sys.executable, str(HERE / "safety_driver.py"), *args[1:]]
    else:
        command = [sys.executable, "-m", "flows.cli", *args]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=HERE.parent)
    print(json.dumps({"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr,
                      "snapshot": {k: list(v) for k, v in snapshot(dest_p).items()}}))
    return 0


if __name__ == "__main__":
    what, rest = sys.argv[1], sys.argv[2:]
    if what == "small-demo":
        sys.exit(small_demo(rest))
    if what == "small-paper":
        sys.exit(small_paper(rest))
    if what == "full-disk":
        sep = rest.index("--")
        sys.exit(full_disk(*rest[:3], rest[sep + 1:]))
    sys.exit(f"unknown driver {what!r}")
