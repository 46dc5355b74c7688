"""Round times and the projected finish (round/timing.py) as `status`, `--wait` lines and `metrics` show them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlmodel import select

from sgsbatch.cli import console, main
from sgsbatch.round.timing import run_timing
from sgsbatch.run.shards import Shard, atomic_write_json
from sgsbatch.state.schema import Metric, Round, Run, RunState
from tests.runlib import recorded_run

NOW = 9600.0


def _timed_run(tmp_path: Path, state: RunState = RunState.running) -> Any:
    """Five planned rounds: round 0 took 3600 s, round 1 1800 s; round 2 started 600 s before NOW."""
    h = recorded_run(tmp_path, "t")
    with h.db.write() as s:
        run = s.get(Run, h.run_id)
        assert run is not None
        run.rounds, run.created_at, run.state, run.updated_at = 5, 900.0, state, 9000.0
        s.add(run)
        r0 = s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == 0)).one()
        r0.state, r0.started_at, r0.completed_at = "completed", 1000.0, 4600.0
        s.add(r0)
        s.add(Round(run_id=h.run_id, index=1, state="completed", started_at=5000.0, completed_at=6800.0))
        s.add(Round(run_id=h.run_id, index=2, state="pending"))
        for r, v in ((0, 0.25), (1, 0.5)):
            s.add(Metric(run_id=h.run_id, round=r, name="cumulative_solve_rate", value=v))
            s.add(Metric(run_id=h.run_id, round=r, name="pass@8", value=v / 2))
    atomic_write_json(Shard(h.paths.phase_dir(2, "conjecture"), 1).started_file, {"time": NOW - 600.0})
    return h


def test_elapsed_round_durations_and_projected_finish(tmp_path: Path) -> None:
    h = _timed_run(tmp_path)
    t = run_timing(h, now=NOW)
    assert t["started_at"] == 900.0 and t["elapsed_s"] == NOW - 900.0
    assert t["round_s"] == {0: 3600.0, 1: 1800.0} and t["mean_round_s"] == 2700.0
    assert (t["current_round"], t["current_started_at"], t["current_s"]) == (2, NOW - 600.0, 600.0)
    assert t["eta_s"] == (2700.0 - 600.0) + 2 * 2700.0  # the running round's rest, then two more rounds
    assert t["finish_at"] == NOW + t["eta_s"]
    line = console.status_line({"name": "t", "state": "running", "round": 2, "rounds": 5, "rounds_completed": 2,
                                "metrics": {}, "timing": t})
    assert "elapsed 2h25m, 45m00s a round, ETA 2h05m" in line
    text = console.timing_text(t, "running")
    assert "rounds take 45m00s on average (2 timed; last 30m00s)" in text and "round 2 running for 10m00s" in text
    assert "projected finish in 2h05m (about 1970-01-01 04:45 UTC)" in text


def test_status_shows_the_times_and_an_ended_run_has_no_projection(tmp_path: Path) -> None:
    h = _timed_run(tmp_path)
    res = CliRunner().invoke(main, ["status", "t", "--runs-dir", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    t = json.loads(res.stdout)["timing"]
    assert t["mean_round_s"] == 2700.0 and t["round_s"] == {"0": 3600.0, "1": 1800.0} and t["eta_s"] is not None
    res = CliRunner().invoke(main, ["status", "t", "--runs-dir", str(tmp_path)])
    assert "  time: launched 1970-01-01 00:15 UTC, elapsed" in res.stdout
    # its driver is not alive, so status calls it stalled: a stalled run finishes only once resumed
    assert "stalled: no projected finish" in res.stdout and "projected finish in" not in res.stdout
    from sgsbatch.cli.console import timing_text

    assert "projected finish in" in timing_text(t, "running")  # a going run: its finish from the mean
    h.set_state(RunState.cancelled)
    t = run_timing(h, now=NOW)
    assert t["eta_s"] is None and t["current_s"] is None and t["elapsed_s"] > 0  # up to its last update


def test_metrics_rows_from_the_database_as_csv_and_json(tmp_path: Path) -> None:
    _timed_run(tmp_path)
    res = CliRunner().invoke(main, ["metrics", "t", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [(r["run"], r["round"], r["metric"], float(r["value"])) for r in rows] == [
        ("t", "0", "cumulative_solve_rate", 0.25), ("t", "0", "pass@8", 0.125),
        ("t", "1", "cumulative_solve_rate", 0.5), ("t", "1", "pass@8", 0.25)]
    assert (rows[0]["round_started_at"], rows[0]["round_completed_at"]) == ("1000.0", "4600.0")
    res = CliRunner().invoke(main, ["metrics", "t", "t", "--runs-dir", str(tmp_path), "--json", "--metric", "pass@?",
                                    "--round", "1"])
    got = [json.loads(x) for x in res.stdout.splitlines()]
    assert got == [{"run": "t", "round": 1, "metric": "pass@8", "value": 0.25, "round_started_at": 5000.0,
                    "round_completed_at": 6800.0}] * 2  # RUN... as given
    res = CliRunner().invoke(main, ["metrics", "t", "--runs-dir", str(tmp_path), "--metric", "nope/*"])
    assert res.exit_code == 2 and "no metric of t matches --metric nope/*" in res.stderr
    out = tmp_path / "m.csv"
    res = CliRunner().invoke(main, ["metrics", "t", "--runs-dir", str(tmp_path), "--out", str(out)])
    assert res.exit_code == 0 and out.read_text().startswith("run,round,metric,value,")

