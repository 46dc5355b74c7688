"""A shard whose worker stops making progress (SGSBATCH_FAULT_INJECT `hang`) on the local
executor: `status` reports it stuck, `logs` shows its log, `resume` stops it, counts the hang as a
failure and resubmits it, and the run completes."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import launch_args, sgsbatch, status  # noqa: E402

pytestmark = pytest.mark.slow


def test_stuck_shard_reported_and_resubmitted(tmp_path: Path, cli_env: dict[str, str]) -> None:
    env = {**cli_env, "SGSBATCH_FAULT_INJECT": "solve:0:hang:1"}
    proc = sgsbatch(*launch_args(tmp_path, "hang", "run.executor=local", "run.rounds=1", "alerts.stuck_after_s=20"),
                    env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stuck: list[dict[str, object]] = []
    st: dict[str, object] = {}
    for _ in range(600):  # polls, not a time limit: the run's own pace decides
        st = status(tmp_path, "hang")
        stuck = [a for a in st["alerts"] if a["metric"] == "alerts/stuck_shards"  # type: ignore[attr-defined]
                 and st["phase"] == "solve" and a["shard"] == 0]
        if stuck or st["state"] not in ("running", "pending"):
            break
        time.sleep(1)
    assert stuck and st["phase"] == "solve", st
    assert any(a["shard"] == 0 for a in stuck)
    human = sgsbatch("status", "hang", "--runs-dir", str(tmp_path), env=cli_env)
    assert "ALERT alerts/stuck_shards" in human.stdout and "solve shard 0" in human.stdout
    logs = sgsbatch("logs", "hang", "--runs-dir", str(tmp_path), "--phase", "solve", "--shard", "0", env=cli_env)
    assert logs.returncode == 0 and "attempt 1/1" in logs.stderr, logs.stderr
    res = sgsbatch("resume", "hang", "--runs-dir", str(tmp_path), "--wait", env=cli_env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert status(tmp_path, "hang")["state"] == "completed"
    failures = (tmp_path / "hang" / "rounds" / "r0000" / "solve" / "shard_00000.failures").read_text()
    assert "no item progress" in failures
    solve_log = (tmp_path / "hang" / "rounds" / "r0000" / "solve" / "shard_00000.attempt.log").read_text()
    verify_log = (tmp_path / "hang" / "rounds" / "r0000" / "verify" / "shard_00000.attempt.log").read_text()
    assert "progress r0 solve shard 0: " in solve_log and "\r" not in solve_log
    assert "progress r0 verify shard 0: " in verify_log
