"""Forking a run on the real local Slurm (issue 41, ops/fork.py): `launch --from RUN --round 1` while the
parent is still running its round 1.

A 2-round tiny parent on Slurm; as soon as its round 0 is completed, a 3-round child forks from its round 1
with another solver.lr. Covered: both complete on Slurm; the child's round 0 rows are the parent's; its
rounds 1 and 2 trained with the new LR (the train jobs' step records); the child's Slurm job records are
its own (no job id of the parent's, none for round 0), so its `resume`/`cancel` never touch the parent's
jobs; the parent's round-0 files are the child's by hard link; `status --json` names the parent.
Not covered: a parent on another file system (copies; tests/integration/test_fork.py has the local case).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest
from runlib import launch_args, outcome, sgsbatch, status

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _solver_lrs(run: Path, r: int) -> set[float]:
    lines = (run / "rounds" / f"r{r:04d}" / "train" / "steps.jsonl").read_text().splitlines()
    return {json.loads(x)["lr"] for x in lines if json.loads(x)["role"] == "solver"}


def _jobs(run: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(run / "state.db") as con:
        return [(r, j) for r, j in con.execute("SELECT round, job_id FROM slurm_jobs")]


def test_fork_of_a_running_parent_on_slurm(slurm_cluster: object, tmp_path: Path) -> None:
    proc = sgsbatch(*launch_args(tmp_path, "trunk", "run.executor=slurm", "run.rounds=2"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    deadline = time.monotonic() + 900  # a safety limit, not a measurement
    while status(tmp_path, "trunk")["rounds_completed"] < 1:
        assert status(tmp_path, "trunk")["state"] in ("pending", "running"), status(tmp_path, "trunk")
        assert time.monotonic() < deadline, "the parent's round 0 did not complete within 15 min"
        time.sleep(3)
    fork = sgsbatch(*launch_args(tmp_path, "branch", "run.executor=slurm", "run.rounds=3", "solver.lr=0.002"),
                    "--from", "trunk", "--round", "1", "--wait")
    assert fork.returncode == 0, fork.stdout + fork.stderr
    while status(tmp_path, "trunk")["state"] not in ("completed", "failed", "stalled", "cancelled"):
        assert time.monotonic() < deadline + 900, "the parent did not complete"
        time.sleep(3)
    parent, child = tmp_path / "trunk", tmp_path / "branch"
    pst, cst = status(tmp_path, "trunk"), status(tmp_path, "branch")
    assert pst["state"] == "completed" and pst["rounds_completed"] == 2, pst
    assert cst["state"] == "completed" and cst["rounds_completed"] == 3 and cst["executor"] == "slurm", cst
    assert cst["forked_from"]["parent"] == "trunk" and cst["forked_from"]["round"] == 1
    want, got = outcome(parent), outcome(child)
    for key in ("attempts", "conjectures", "reviews", "steps"):
        assert [x for x in got[key] if x[0] == 0] == [x for x in want[key] if x[0] == 0], key
    assert [x for x in got["store"] if x[2] == 0] == [x for x in want["store"] if x[2] == 0]
    assert _solver_lrs(child, 1) == _solver_lrs(child, 2) == {0.002} and _solver_lrs(parent, 1) == {0.001}
    parent_jobs = {j for _, j in _jobs(parent)}
    child_jobs = _jobs(child)
    assert child_jobs and all(r >= 1 for r, _ in child_jobs) and not parent_jobs & {j for _, j in child_jobs}
    rel = "rounds/r0000/inputs.json"  # (the child's retention has deleted its name of round 0's weights by now)
    assert os.lstat(parent / rel).st_ino == os.lstat(child / rel).st_ino and os.lstat(child / rel).st_nlink >= 2
