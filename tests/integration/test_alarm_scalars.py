"""Alarms as TensorBoard `alerts/*` scalars at each round's end (round/alarms.py, round/lifecycle.py).

The run: a 2-round local rehearsal of jobs/sgs.toml (SIMULATED compute, 24 D_3k targets) with
thresholds that fire: `alerts.disk_budget_gb` tiny, `alerts.slow_phase_factor` 0 (every phase
with a previous round is "slow"), `alerts.max_error_rate` 0. Its event files are read with
TensorBoard's EventAccumulator. Round 1 is then ended again in-process (what `resume` and
`rebuild` do) with the default thresholds, and with a verify marker reporting timeouts: its
points are replaced, not duplicated. Not covered: `watch`'s live alarms (tests/unit/test_status_watch.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import REPO, sgsbatch  # noqa: E402

pytestmark = pytest.mark.slow
D3K = REPO.parent / "shared" / "data" / "d3k" / "D_3k_small_prover_dataset.json"
NAME = "sgs-rehearsal"
ALERTS = ("alerts/verify_error_rate", "alerts/slow_phase", "alerts/disk_over_budget")


def _scalars(tb: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


END_AGAIN = """
import dataclasses, json, sys
from pathlib import Path
from sgsbatch.config.schema import AlertsConfig
from sgsbatch.run.handle import open_run_dir
from sgsbatch.run.paths import RunPaths
from sgsbatch.scheduling.chain import end_round_from_marker
paths = RunPaths(Path(sys.argv[1]))
cfg = open_run_dir(paths).cfg
cfg = dataclasses.replace(cfg, alerts=dataclasses.replace(AlertsConfig(), **json.loads(sys.argv[2])))
assert end_round_from_marker(open_run_dir(paths, cfg=cfg), 1)
"""


def _end_round_again(run: Path, **alerts: Any) -> None:
    """End round 1 again (what `resume` and `rebuild` do) with `alerts` over the defaults. In a
    process of its own, in a later second than the last event file: TensorBoard reads a
    directory's event files in name order (time in seconds, host, pid, a per-process counter)."""
    time.sleep(1.05 - time.time() % 1)
    proc = subprocess.run([sys.executable, "-c", END_AGAIN, str(run), json.dumps(alerts)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


def test_round_end_writes_alarm_scalars(tmp_path: Path, cli_env: dict[str, str]) -> None:
    if not D3K.is_file():
        pytest.skip(f"{D3K} is missing")
    args = ["launch", str(REPO / "jobs" / "sgs.toml"), "--rehearse"]
    for o in (f"run.runs_dir={tmp_path}", "run.executor=local", "run.rounds=2", f"data.source={D3K}",
              "data.limit=24", "run.poll_interval_s=1", "alerts.disk_budget_gb=0.000001",
              "alerts.slow_phase_factor=0", "alerts.max_error_rate=0",
              # a small shape: the alarms do not depend on it, and 150 tasks a round cost minutes of CI
              "shards.conjecture=2", "shards.solve=2", "shards.guide=1", "shards.verify=0"):
        args += ["--set", o]
    proc = sgsbatch(*args, "--wait", env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = tmp_path / NAME
    from sgsbatch.run.paths import RunPaths
    from sgsbatch.scheduling.local import driver_alive

    while driver_alive(RunPaths(run)) is not None:  # `--wait` returns once the database says completed;
        time.sleep(0.2)  # the last round's TensorBoard points follow, from the train task the driver waits for
    got = _scalars(run / "tb")
    walls = {t[len("wall_s/"):]: dict(v) for t, v in got.items() if t.startswith("wall_s/") and t != "wall_s/round"}
    with_past = [p for p, w in walls.items() if 0 in w and 1 in w]  # every phase of round 1 but none of round 0
    assert len(with_past) == 5, walls
    verify = [json.loads(p.read_text()) for p in sorted((run / "rounds").glob("r000*/verify/shard_*.done"))]
    assert verify and all(m["timeout"] == m["error"] == 0 for m in verify)  # the SIMULATED verifier: none
    assert got["alerts/disk_over_budget"] == [(0, 1.0), (1, 1.0)]
    assert got["alerts/slow_phase"] == [(0, 0.0), (1, float(len(with_past)))]
    assert got["alerts/verify_error_rate"] == [(0, 0.0), (1, 0.0)]
    assert "alerts/stuck_shards" not in got  # a finished round has no running shard
    assert not any(t.startswith("alerts/") for t in _scalars(run / "tb" / "by_generations"))

    _end_round_again(run)  # the defaults: no budget (not judged), factor 3 on this quick run's phases
    again = _scalars(run / "tb")
    assert again["alerts/disk_over_budget"] == [(0, 1.0)]  # round 1's point purged, none written
    assert again["alerts/verify_error_rate"] == [(0, 0.0), (1, 0.0)]
    # the alarm's past is each phase's wall from its shard files (round/alarms.slow_phase_alarm); round 0's train
    # marker is written after its metric is (a loaded machine puts seconds between them): judge as the alarm does
    from sgsbatch.run.shards import phase_wall_s

    def past(p: str) -> float:
        phase = RunPaths(run).phase_dir(0, p)
        wall = phase_wall_s(phase, len(list(phase.glob("shard_*.done"))))
        assert wall is not None, p
        return wall

    slow = sum(walls[p][1] > 3.0 * past(p) for p in with_past)
    assert again["alerts/slow_phase"] == [(0, 0.0), (1, float(slow))]
    assert again["cumulative_solve_rate"] == got["cumulative_solve_rate"]  # not duplicated

    marker = sorted((run / "rounds" / "r0001" / "verify").glob("shard_*.done"))[0]
    m = json.loads(marker.read_text())
    marker.write_text(json.dumps({**m, "timeout": 1}) + "\n")  # one timeout: over a max_error_rate of 0
    _end_round_again(run, max_error_rate=0.0)
    assert _scalars(run / "tb")["alerts/verify_error_rate"] == [(0, 0.0), (1, 1.0)]
    _end_round_again(run, max_error_rate=1.0)
    assert _scalars(run / "tb")["alerts/verify_error_rate"] == [(0, 0.0), (1, 0.0)]
