"""Design-space sweeps: ``trainfab sweep UNIT --grid FIELD=V1,V2,… [--grid …]``.

A sweep measures one unit at every point of a grid, the cross product of the ``--grid`` fields,
on local processes or on a Dask distributed cluster, and writes one table and a plot of each
measure against each swept field.

Usage::

    trainfab sweep UNIT --grid FIELD=V1,V2,… [--grid …] [--config/-c FILE|PRESET]
                   [--set/-s FIELD=VALUE …] [--measure area,timing,regress] [-j N]
                   [--scheduler ADDRESS] [--liberty osu018|PATH.lib] [--seed 1]
                   [--effort quick|standard|full] [--output/-o DIR] [--fresh]

Grid
----
* ``--grid FIELD=V1,V2,…`` (repeatable, one field per option) sweeps a configuration field of the
  unit over the listed values, parsed like ``--set`` values (TOML scalars: ``4``, ``2.5``,
  ``true``; a bare word is a string: ``csd``; quote a value that holds a comma).  The grid is the
  cross product of every ``--grid`` field, in the order the options are given, the last field
  varying fastest; ``--config``/``--set`` give the base configuration the other fields take.
* ``clock_ns`` is a grid field of its own: the synthesis clock constraint (ns, default 10), not a
  configuration field; it needs the ``area`` or ``timing`` measure.
* Errors (one line, exit status 2), all found before anything runs: no ``--grid``; a field that
  is neither the unit's nor ``clock_ns`` (the message lists the unit's fields); a field given in
  two ``--grid`` options or also in ``--set``; an empty value list; a value listed twice (an
  error, never silently deduplicated); two points that are the same configuration; a point the
  configuration class rejects (the message names the point); a ``clock_ns`` outside the range
  ``trainfab area --clock-ns`` accepts (0.01 to 100000 ns).
* Run-time fields are refused: a field that the hardware does not depend on (Gecko's
  ``man_width``, ``sign_en``, ``fixed_width``: side-band inputs whose configuration value is only
  the testbench's default) would give the same area and timing at every value.  Fields the unit
  declares as run-time inputs (:attr:`flows.declare.Unit.runtime_fields`) are refused at once;
  for every other swept configuration field the Verilog (:func:`flows.eda.generate.to_verilog`) is
  generated at the first grid point with that field set to each of its values, and again around
  each one-field change of that point; if every value gives the same Verilog everywhere, the
  sweep stops with ``field man_width does not change the hardware of gecko.compressor: …``.
  Conversions are cached, so each configuration is converted once.  The check is skipped when
  ``regress`` is the only measure: a run-time field does change what the testbench exercises.
  Likewise ``--set`` of a declared run-time field is refused unless ``regress`` is measured
  (as ``trainfab area`` refuses it).

Measures (``--measure``, comma-separated, default ``area,timing``)
----------------------------------------------------------------
* ``area``: ``area_um2``, ``area_ge``, ``cells``, ``flip_flops``, ``transistors_estimate``;
  ``timing``: ``critical_path_ns``, ``fmax_mhz``.  Both come from one :func:`flows.eda.synth.area`
  call per point (yosys + OpenSTA onto ``--liberty`` at the point's ``clock_ns``), run in the
  point's own folder ``<out>/points/<hash>/`` (netlists, logs, ``area.json``, ``area.md``).
* ``regress``: ``passed``, ``tests``, ``failed`` of the unit's cocotb testbench
  (:func:`flows.eda.simulate.run_testbench`) at ``--seed`` and ``--effort`` (default
  ``quick``), with its simulator build and run folders inside the point's folder
  (``<out>/points/<hash>/sim/``).
* A point's hash is the sha256 of its canonical JSON: unit, full configuration
  (``golden.config_dict``), ``clock_ns``, the resolved liberty path, the measures, and the seed and
  effort when ``regress`` is measured.

Parallel runs
-------------
* Local: ``-j N`` worker processes (:class:`concurrent.futures.ProcessPoolExecutor`, spawned
  fresh), default the number of CPUs this process may use (``os.sched_getaffinity``, else
  ``os.cpu_count()``): yosys, OpenSTA and the simulators are single-threaded, so one point per
  core; never more processes than points to run.  ``-j 1`` runs the points one after another in
  this process.
* Dask: ``--scheduler ADDRESS`` sends every point to the Dask distributed cluster whose
  scheduler listens at ``ADDRESS`` (``dask.distributed.Client``, ``client.submit(...,
  pure=False)``, ``dask.distributed.as_completed``); ``-j`` does not apply.  Workers run the same
  function as local processes (:func:`compute_point`, which gets the unit's name and the
  configuration as a plain dict) and return the point's record; only this process writes the
  sweep's files.  Point folders are written by the worker, at the same path on the worker's
  machine (share the output folder, e.g. over NFS, to keep the netlists in one place), and the
  liberty is passed as this machine's resolved path, which must exist on every worker (the
  default ``osu018`` does after ``make setup``).

  Setting up a cluster: on one machine start the scheduler with ``dask scheduler`` (it listens
  on ``tcp://HOST:8786``); on each machine that computes, ``dask worker tcp://HOST:8786
  --nthreads 1`` (one worker process per core: ``--nworkers N --nthreads 1``; one thread per
  process, because a point runs single-threaded tools and the testbench runner is not
  thread-safe).  Every worker machine needs trainfab installed the same way (``make setup`` in
  a checkout of the same commit, which also installs yosys, OpenSTA, Icarus and the liberty)
  and the worker started from that virtual environment (``.venv/bin/dask worker …``).  Then
  run ``trainfab sweep … --scheduler tcp://HOST:8786``.  Points a worker loses (a crash, a
  machine gone) are rescheduled by Dask.

Progress, resume and interruption
---------------------------------
* A start line says how many points the grid has, how many are already done and where they
  run; then one line per finished point, e.g. ``[7/24] lanes=4,encoding=csd,clock_ns=5: 12345.0
  µm², fmax 210.0 MHz (3.2 s)``.
* Each finished point is appended at once to ``<out>/results.jsonl`` (one JSON object a line,
  flushed and fsynced) with its hash, grid values, configuration, measures, error, Verilog
  sha256, tool versions, host and seconds.  A rerun with the same output folder skips every
  point whose hash is there without an error (a truncated last line, from a killed run, is
  ignored); points that ended in an error are run again.  ``--fresh`` deletes
  ``results.jsonl`` and ``points/`` first.  The hash does not cover the generator's code or the
  tools' versions: use ``--fresh`` after changing either.
* Ctrl-C stops the sweep (the CLI exits 130); finished points stay in ``results.jsonl``.
  Local workers are stopped with the tools they run; on a Dask cluster the queued points are
  cancelled, and points already running on a worker finish there unrecorded.
* One sweep at a time per output folder (a lock file, ``.sweep.lock``, there while a sweep
  runs).

Outputs (default folder ``build/sweep/<unit>-<10 hex digits of the sweep's hash>``, ``-o DIR``)
--------------------------------------------------------------------------------------------
* ``sweep.csv`` and ``sweep.json``: one row per point in grid order; columns: the grid fields,
  then the measures' columns, then ``error`` (empty when the point succeeded).  Wall-clock times
  and host names are kept out of both (they are in ``results.jsonl``), so a serial and a
  parallel run of the same sweep give byte-identical tables.  ``sweep.json`` also has the unit,
  the base configuration, the grid, the measures, the liberty, and per row the point's hash, full
  configuration and Verilog sha256.
* ``<measure>_vs_<field>.png``: each numeric area/timing measure against each swept field with
  two or more values, one line per combination of the other fields (matplotlib, Agg);
  ``area_um2_vs_fmax_mhz.png``: every measured point's area against its fmax, with the front of
  the points no other point beats in both (e.g. a ``pipeline`` grid's area-fmax trade-off).
* ``sweep.md``: the set-up, the table, the smallest-area and highest-fmax points, the errors and
  the plots.

Exit status: 0 when every point succeeded and every regression passed; 1 when a regression
failed or a point ended in an error (its row has the error; the sweep goes on with the other
points); 2 for a usage, configuration or environment error found before anything ran.
"""

from .outputs import FRONT_PLOT, front_points, table, write_outputs
from .plan import (CLOCK, MEASURES, add_arguments, check_hardware_fields, parse_grid, plan_sweep,
                   split_values)
from .points import compute_point, read_results
from .running import cmd_sweep

__all__ = ["CLOCK", "MEASURES", "FRONT_PLOT", "add_arguments", "check_hardware_fields",
           "cmd_sweep", "compute_point", "front_points", "parse_grid", "plan_sweep",
           "read_results", "split_values", "table", "write_outputs"]

