"""Running a sweep: ``cmd_sweep``, the points not done yet on this process, local worker
processes or a Dask cluster, the progress lines and the store's checks."""

import contextlib
import os
import signal
from pathlib import Path

from golden import config_dict

from .. import FlowError, progress
from . import points  # compute_point is looked up at call time: tests substitute it
from .outputs import REPORT_FILES, write_outputs
from .plan import JOBS_RANGE, RESULTS, Plan, Point, plan_sweep
from .points import ResultLog, read_results


def _default_outdir(plan: Plan) -> Path:
    from .. import build_dir

    return build_dir() / "sweep" / f"{plan.unit.name}-{plan.spec_hash}"


def _task(plan: Plan, p: Point, out: Path) -> dict:
    return {"unit": plan.unit.name, "config": config_dict(p.cfg), "clock_ns": p.clock_ns,
            "liberty": plan.liberty, "measures": list(plan.measures), "seed": plan.seed,
            "effort": plan.effort, "outdir": str(out / "points" / p.hash), "hash": p.hash}


def _run_serial(tasks, done):
    for task in tasks:
        done(task, points.compute_point(task))


def _run_local(tasks, jobs: int, done):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init)
    try:
        futures = {pool.submit(points.compute_point, t): t for t in tasks}
        for fut in as_completed(futures):
            done(futures[fut], _result(fut))
    except BaseException:
        # Ctrl-C (or a failure here): stop every worker with its tools at once; a worker left
        # alone would go on with the calls already queued to it
        procs = list((getattr(pool, "_processes", None) or {}).values())
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _worker_init() -> None:
    """A local worker leads a process group of its own, with the tools it starts: Ctrl-C in a
    terminal reaches only the sweep's process, which then ends each worker's group."""
    os.setpgid(0, 0)


def _result(fut) -> dict | None:
    """A future's record; when the worker itself died (a crash, a lost machine), a record
    holding only the error."""
    try:
        return fut.result()
    except Exception as e:
        return {"error": f"worker failed: {type(e).__name__}: {e}"}


def _connect(address: str):
    try:
        from dask.distributed import Client
    except ImportError:
        raise FlowError("--scheduler needs dask[distributed] in this environment; run "
                        "'make setup' (or: pip install 'dask[distributed]')") from None

    class _Client(Client):
        """A client that, when it cannot connect, stops its event loop at once: otherwise the
        half-made client's destructor tries to close the connection it never had, waits 20 s
        and prints a traceback after the one-line error."""

        def __init__(self, *args, **kwargs):
            try:
                super().__init__(*args, **kwargs)
            except BaseException:
                with contextlib.suppress(Exception):
                    self.status = "closed"        # nothing for close() (and __del__) to do
                with contextlib.suppress(Exception):
                    self._loop_runner.stop()
                raise

    try:
        return _Client(address, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise FlowError(f"--scheduler {address}: cannot connect to a Dask scheduler "
                        f"({type(e).__name__}: {e})") from None


def _run_dask(client, tasks, done):
    from dask.distributed import as_completed

    futures = {}
    try:
        for t in tasks:
            futures[client.submit(points.compute_point, t, pure=False)] = t
        for fut in as_completed(list(futures), loop=client.loop):
            done(futures[fut], _result(fut))
    except BaseException:
        client.cancel(list(futures))
        raise


def _summary(rec: dict) -> str:
    if rec.get("error"):
        return "ERROR " + rec["error"].strip().splitlines()[0]
    m, parts = rec["measures"], []
    if "area_um2" in m:
        parts.append(f"{m['area_um2']:.1f} µm²")
    if "fmax_mhz" in m:
        parts.append(f"fmax {m['fmax_mhz']:.1f} MHz" if m["fmax_mhz"] else "fmax n/a")
    if "passed" in m:
        parts.append(f"regress {'PASS' if m['passed'] else 'FAIL'} "
                     f"{m['tests'] - m['failed']}/{m['tests']}")
    return ", ".join(parts)


def cmd_sweep(args) -> int:
    """``trainfab sweep``: plan, run the points not done yet, write the table, plots and
    summary.  Exit 0, or 1 when a point failed or a regression failed."""
    from ..runs import ensure_dir, locked, precheck
    from ..eda.tools import require

    if args.jobs is not None and args.scheduler:
        raise FlowError("-j/--jobs sets local processes; with --scheduler the cluster's workers "
                        "run the points")
    if args.jobs is not None and not JOBS_RANGE[0] <= args.jobs <= JOBS_RANGE[1]:
        raise FlowError(f"-j {args.jobs}: give {JOBS_RANGE[0]} to {JOBS_RANGE[1]} processes")
    plan = plan_sweep(args)
    jobs = args.jobs or _cpus()
    out = precheck(Path(args.output) if args.output else _default_outdir(plan), REPORT_FILES)
    _check_store(out)
    existed = out.exists()
    ensure_dir(out)
    try:
        with locked(out / ".sweep.lock", busy=f"another sweep is running in {out}"):
            return _sweep(plan, args, out, jobs, require)
    finally:
        if not existed:  # a sweep that stopped before writing anything leaves no folder
            with contextlib.suppress(OSError):
                out.rmdir()


def _own_results(out: Path) -> bool:
    """Whether ``out/results.jsonl`` is a sweep's results file: a regular file the folder's
    manifest lists.  Its hash is not compared: the file grows a record at a time, a killed
    sweep can leave a last line cut short, and the sweep reads it record by record."""
    from ..runs import load_manifest

    path = out / RESULTS
    return (path.is_file() and not path.is_symlink()
            and RESULTS in load_manifest(out).files)


def _check_store(out: Path) -> None:
    """The sweep's resumable store in ``out`` (``results.jsonl``, ``points/``) is trainfab's, or
    absent: a file of the user's of that name, a link or a folder in the way stops the sweep
    before it runs."""
    results, points = out / RESULTS, out / "points"
    if os.path.lexists(results) and not _own_results(out):
        raise FlowError(f"{results} is not the results file of a sweep trainfab ran (a file of "
                        "yours, a link or one changed since): move it away or give another "
                        "output folder")
    if os.path.lexists(points) and (points.is_symlink() or not points.is_dir()):
        raise FlowError(f"{points} is {'a symbolic link' if points.is_symlink() else 'a file'}, "
                        "where a sweep keeps its points: move it away or give another output "
                        "folder")


def _cpus() -> int:
    """CPUs this process may use (its affinity mask where the system has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover (macOS)
        return os.cpu_count() or 1


def _sweep(plan: Plan, args, out: Path, jobs: int, require) -> int:
    if args.fresh:
        _forget(out)
    records = read_results(out / RESULTS)
    todo = [p for p in plan.points
            if p.hash not in records or records[p.hash].get("error")]
    total, ndone = len(plan.points), len(plan.points) - len(todo)
    client, jobs, where = _where(plan, args, todo, jobs, require)
    print(f"{plan.unit.name}: {total} points, {ndone} already done, {len(todo)} to run{where}; "
          f"output {out}", flush=True)
    tasks = [_task(plan, p, out) for p in todo]
    by_hash = {p.hash: p for p in plan.points}
    count = [ndone]
    log = ResultLog(out / RESULTS) if todo else None
    # a bar with the time left on a terminal (standard error); the [i/n] lines stay for logs
    bar = progress.bar(len(todo), plan.unit.name, "points", enabled=bool(todo))

    def done(task, rec):
        from ..runs import record

        p = by_hash[task["hash"]]
        rec = {"hash": p.hash, "measures": {}, **rec}
        rec["point"] = p.values
        rec["config"] = config_dict(p.cfg)
        log.append(rec)
        record(out, [RESULTS])  # the store is trainfab's: --fresh may remove it
        records[p.hash] = rec
        count[0] += 1
        progress.echo(f"[{count[0]}/{total}] {p.label}: {_summary(rec)} "
                      f"({rec.get('seconds', 0):.1f} s)")
        bar.update()

    try:
        if client is not None:
            _run_dask(client, tasks, done)
        elif todo and jobs == 1:
            _run_serial(tasks, done)
        elif todo:
            _run_local(tasks, jobs, done)
    finally:
        bar.close()
        if log:
            log.close()
        if client is not None:
            client.close()
    return _finish(plan, records, out)


def _forget(out: Path) -> None:
    """``--fresh``: remove only what an earlier sweep wrote (the folder's manifests prove it)."""
    from ..runs import remove_owned

    if _own_results(out):
        (out / RESULTS).unlink()
    if (out / "points").is_dir():
        for point in sorted((out / "points").iterdir()):
            if point.is_dir() and not point.is_symlink():
                remove_owned(point)
        with contextlib.suppress(OSError):
            (out / "points").rmdir()


def _where(plan: Plan, args, todo: list, jobs: int, require) -> tuple:
    """``(client, jobs, where)``: the Dask client (None for local runs), the local processes
    to use and the start line's words for where the points run, after checking that the tools
    they need are here."""
    client = None
    if not todo:
        where = ""
    elif args.scheduler:
        client = _connect(args.scheduler)
        threads = client.nthreads()
        where = (f"on the Dask cluster at {args.scheduler} ({len(threads)} workers, "
                 f"{sum(threads.values())} threads"
                 f"{'; waiting for workers to join' if not threads else ''})")
    else:
        if plan.synth:
            require("yosys")
            require("sta")
        if "regress" in plan.measures and plan.unit.tests.sim == "icarus":
            require("iverilog")
        jobs = min(jobs, len(todo))
        where = "in this process" if jobs == 1 else f"on {jobs} local processes"
    return client, jobs, f" {where}" if where else ""


def _finish(plan: Plan, records: dict, out: Path) -> int:
    """Write the sweep's outputs, say which points failed and where the outputs are; the exit
    status."""
    total = len(plan.points)
    paths = write_outputs(plan, records, out)
    errors = [p for p in plan.points if records[p.hash].get("error")]
    failed = [p for p in plan.points if records[p.hash]["measures"].get("passed") is False]
    if errors:
        print(f"{len(errors)} of {total} points failed (error column; rerun to retry them): "
              + "; ".join(p.label for p in errors[:5]) + (" …" if len(errors) > 5 else ""))
    if failed:
        print(f"{len(failed)} of {total} points failed their regression: "
              + "; ".join(p.label for p in failed[:5]) + (" …" if len(failed) > 5 else ""))
    plots = paths["plots"]
    print(f"written: {paths['markdown']}, {paths['csv']}, {paths['json']}"
          + (f", {len(plots)} plots {out}/*_vs_*.png" if plots else ""))
    return 1 if errors or failed else 0
