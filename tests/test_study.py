"""``trainfab study dispatch`` (flows.studies.dispatch): its numbers against direct golden runs, its
summary logic, its outputs, and its one-line errors."""

import json
import math
import re

import numpy as np
import pytest

from flows import FlowError
from flows.cli import main
from flows.studies.dispatch import dispatch_study, markdown, max_load, p99, parse_loads
from golden.equinox import DispatchConfig, dispatch_trace, poisson_arrivals

SMALL = DispatchConfig(b_inf=4, inf_len=8, trn_len=16)


def _direct(cfg, policy, load, cycles, seed, index):
    """p99 latency and training instructions per cycle of one study point, recomputed from
    the per-cycle records of dispatch_trace (completion events, issue column)."""
    cfg = DispatchConfig(**{**cfg.__dict__, "policy": policy})
    warm, drain = cycles // 10, 20 * cfg.service_time + cfg.timeout
    total = warm + cycles + drain
    gen = np.random.default_rng([seed, index])
    inf = poisson_arrivals(load * cfg.b_inf / (cfg.inf_len + cfg.done_lag + 1), warm + cycles,
                           gen)
    trace = dispatch_trace(cfg, inf, [0] * (total // cfg.trn_len + 10), total)
    done = {}
    for r in trace:
        for ev in r.events:
            if ev.startswith("done I["):
                for name in ev[7:-1].split(","):
                    if name != "null":
                        done[int(name[1:])] = r.cycle
    lat = sorted(done[k] - int(a) if k in done else math.inf
                 for k, a in enumerate(np.sort(inf)) if warm <= a < warm + cycles)
    trn = sum(1 for r in trace if warm <= r.cycle < warm + cycles and r.issue
              and r.issue.startswith("T"))
    return lat[math.ceil(0.99 * len(lat)) - 1], trn / cycles


def test_study_numbers_match_direct_runs():
    res = dispatch_study(SMALL, [0.3, 0.9, 1.3], cycles=4000, seed=5)
    assert len(res["points"]) == 9
    for p in res["points"]:
        index = [0.3, 0.9, 1.3].index(p["load"])
        want_p99, want_trn = _direct(SMALL, p["policy"], p["load"], 4000, 5, index)
        assert p["p99"] == want_p99, p
        assert p["trn_ipc"] == pytest.approx(want_trn, abs=1e-12), p
    # the markdown table shows the same numbers
    text = markdown(res)
    S = SMALL.service_time
    for p in res["points"]:
        row = next(line for line in text.splitlines() if line.startswith(f"| {p['load']:g} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        col = 2 + ["priority", "fair", "inf_only"].index(p["policy"])
        want = ("never (>1 % unfinished)" if math.isinf(p["p99"])
                else f"{p['p99']:.0f} ({p['p99'] / S:.1f} S)")
        assert cells[col] == want
        if p["policy"] != "inf_only":
            assert cells[5 + ["priority", "fair"].index(p["policy"])] == f"{p['trn_ipc']:.3f}"


def test_study_shows_the_policies_apart():
    """At 0.9 of capacity with training always there, round robin (fair) cannot keep up while
    priority does, and priority trains less than fair; inference-only never trains."""
    res = dispatch_study(SMALL, [0.3, 0.9], cycles=20000, seed=2)
    pts = {(p["policy"], p["load"]): p for p in res["points"]}
    target = 10 * SMALL.service_time
    assert pts[("priority", 0.9)]["p99"] <= target < pts[("fair", 0.9)]["p99"]
    assert pts[("priority", 0.9)]["trn_ipc"] < pts[("fair", 0.9)]["trn_ipc"]
    assert pts[("inf_only", 0.3)]["trn_ipc"] == pts[("inf_only", 0.9)]["trn_ipc"] == 0
    assert res["max_load"] == {"priority": 0.9, "fair": 0.3, "inf_only": 0.9}
    assert res["ratio_priority_fair"] == pytest.approx(3.0)
    assert res["ratio_priority_inf_only"] == pytest.approx(1.0)


def test_p99_and_max_load():
    assert p99(range(1, 101)) == 99 and p99(range(1, 201)) == 198
    assert p99([5] * 98 + [math.inf] * 2) == math.inf and p99([5] * 99 + [math.inf]) == 5

    class P:
        def __init__(self, load, v):
            self.load, self.p99 = load, v
    pts = [P(0.2, 10), P(0.4, 50), P(0.6, 20), P(0.8, 10)]
    assert max_load(pts, 30) == 0.2 and max_load(pts, 60) == 0.8 and max_load(pts, 5) == 0.0
    assert max_load([P(0.5, math.inf), P(0.1, 1)], 10) == 0.1


def test_parse_loads():
    assert parse_loads("0.1,0.5") == [0.1, 0.5]
    assert parse_loads("0.2:1:0.2") == [0.2, 0.4, 0.6, 0.8, 1.0]


def test_cli_writes_table_plot_and_json(tmp_path, capsys):
    code = main(["study", "dispatch", "-o", str(tmp_path), "--loads", "0.5,1.1", "--cycles",
                 "2000", "--seed", "3", "--set", "b_inf=4", "--set", "inf_len=8",
                 "--set", "trn_len=16"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert re.search(r"^priority/fair: ", out.out, re.MULTILINE)
    md = (tmp_path / "dispatch.md").read_text()
    res = json.loads((tmp_path / "dispatch.json").read_text())
    assert res["loads"] == [0.5, 1.1] and res["config"]["b_inf"] == 4 and res["seed"] == 3
    assert "| 0.5 |" in md and "| 1.1 |" in md and "1.3x" in md
    assert (tmp_path / "dispatch.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "study dispatch: 6/6 runs" in out.err
    # the same seed gives the same numbers
    again = dispatch_study(DispatchConfig(b_inf=4, inf_len=8, trn_len=16), [0.5, 1.1], 2000, 3)
    assert [p["p99"] for p in again["points"]] == [p["p99"] for p in res["points"]]


@pytest.mark.parametrize("args", [
    ["study", "dispatch", "--loads", "abc"],
    ["study", "dispatch", "--loads", "0.5,-1"],
    ["study", "dispatch", "--loads", "1:0.5:0"],
    ["study", "dispatch", "--cycles", "10"],
    ["study", "dispatch", "--cycles", "many"],
    ["study", "dispatch", "--set", "nosuch=1"],
    ["study", "dispatch", "--set", "b_inf=0"],
    ["study", "dispatch", "--set", "q_inf=6", "--set", "b_inf=4"],
    ["study", "dispatch", "--set", "policy=fair"],
    ["study", "latency"],
    ["study"],
])
def test_cli_bad_options_exit_2_with_one_line(args, capsys, tmp_path):
    code = main(args + ["-o", str(tmp_path)] if len(args) > 1 and args[1] == "dispatch"
                else args)
    out = capsys.readouterr()
    assert code == 2
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainfab: error: "), out.err
    assert not list(tmp_path.iterdir())


def test_the_output_folder_is_checked_before_the_study_runs(tmp_path, capsys, monkeypatch):
    """-o FILE, or a build folder that is a file, is refused before any cycle is simulated."""
    import flows
    import flows.studies.dispatch as dispatch

    def never(*args, **kwargs):
        raise AssertionError("the study ran")

    monkeypatch.setattr(dispatch, "dispatch_study", never)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    code = main(["study", "dispatch", "-o", str(a_file)])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == (f"trainfab: error: output folder {a_file} cannot be "
                                         "created: it is a file, not a folder"), err
    monkeypatch.setattr(flows, "BUILD", a_file)
    code = main(["study", "dispatch"])
    err = capsys.readouterr().err
    assert code == 2 and f"{a_file} is a file, not a folder" in err, err


@pytest.mark.parametrize("text, needle", [
    ("1:0:0.1", "the start 1 is after the stop 0"),
    ("0.1:1:1e-9", "900,000,001 load points; at most 1,000"),
    ("0.1:1:0", "the step must be positive"),
    ("0.1:inf:0.1", "finite"),
    (",".join(["0.5"] * 1001), "1,001 load points"),
])
def test_load_grids_are_checked_before_they_are_listed(text, needle):
    with pytest.raises(FlowError, match=re.escape(needle)):
        parse_loads(text)
    assert parse_loads("0.1:0.3:0.1") == [0.1, 0.2, 0.3]


def test_cycles_and_seed_are_bounded_for_callers_too(tmp_path):
    from flows.studies.dispatch import main_dispatch

    for cycles, seed, needle in ((10**14, 1, "--cycles"), (2000, -1, "--seed")):
        with pytest.raises(FlowError, match=needle):
            main_dispatch(SMALL, [0.5], cycles, seed, tmp_path / "out", quiet=True)
    assert not (tmp_path / "out").exists()
