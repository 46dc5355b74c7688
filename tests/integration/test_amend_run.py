"""Amending a live local run with real processes (`resume --set`, ops/amend.py): while round 0's
init task runs, resources are amended (plain `--set`), the verification timeout changes from the
current round (its verify phase has not started) and the solve shards from round 1 (a change of
method); the run then completes, round 0 with the shard counts it was created with and round 1
with the new ones, and the history is in `status`. Unit-level cases are in tests/unit/test_amend.py."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import launch_args, sgsbatch, status  # noqa: E402

from sgsbatch.run.paths import RunPaths  # noqa: E402
from sgsbatch.run.shards import Shard  # noqa: E402

DEADLINE_S = 300.0


def test_a_live_run_amended_mid_round_completes_with_each_round_as_amended(tmp_path: Path,
                                                                          cli_env: dict[str, str]) -> None:
    name = "am"
    env = {**cli_env, "SGSBATCH_FAULT_INJECT": "init:0:hang:1"}  # round 0 stays mid-init until cancelled
    proc = sgsbatch(*launch_args(tmp_path, name, "run.executor=local", "run.rounds=2", "run.poll_interval_s=1"),
                    env=env)
    assert proc.returncode == 0, proc.stderr
    paths = RunPaths(tmp_path / name)
    shard = Shard(paths.phase_dir(0, "init"), 0)
    end = time.monotonic() + DEADLINE_S
    while not shard.pid_file.exists():
        assert time.monotonic() < end, "the init worker never started"
        time.sleep(0.2)
    common = ["--runs-dir", str(tmp_path)]
    refused = sgsbatch("resume", name, *common, "--set", "shards.solve=3", "--method-change", "--from-round", "0",
                       env=cli_env)
    assert refused.returncode == 2 and "the earliest round it can apply to is 1" in refused.stderr, refused.stderr
    for args in (["--set", "slurm.solve.time_min=45", "--set", "alerts.stuck_floor_s=900"],
                 ["--set", "verification.timeout_s=300", "--method-change", "--from-round", "0"],
                 ["--set", "shards.solve=3", "--method-change", "--from-round", "1"]):
        proc = sgsbatch("resume", name, *common, *args, env=cli_env)
        assert proc.returncode == 0, proc.stderr
        assert "nothing to repair" in proc.stdout  # the driver is alive: amended, nothing resubmitted
    assert sgsbatch("cancel", name, *common, env=cli_env).returncode == 0
    proc = sgsbatch("resume", name, *common, "--wait", env=cli_env)  # a new driver, without the fault
    assert proc.returncode == 0, proc.stdout + proc.stderr
    st = status(tmp_path, name)
    assert st["state"] == "completed", st
    assert (st["amendments"]["count"], st["amendments"]["method"]) == (4, 2)
    records = [json.loads(line) for line in (paths.root / "amendments.jsonl").read_text().splitlines()]
    assert [(r["key"], r["from_round"]) for r in records] == [
        ("alerts.stuck_floor_s", None), ("slurm.solve.time_min", None), ("verification.timeout_s", 0),
        ("shards.solve", 1)]

    def shard_files(r: int, phase: str) -> list[str]:
        return sorted(p.name for p in paths.phase_dir(r, phase).iterdir()
                      if p.name.startswith("shard_") and p.name.endswith(".done"))

    assert len(shard_files(0, "solve")) == 2 and len(shard_files(0, "verify")) == 2
    assert len(shard_files(1, "solve")) == 3 and len(shard_files(1, "verify")) == 3
    assert os.path.getsize(paths.config) and "time_min = 45" in paths.config.read_text()
