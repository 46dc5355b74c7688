"""Held-out evaluation as a Slurm job beside the chain (issue 41, scheduling/eval_jobs.py): a 2-round tiny
run on the real local Slurm with `eval.every_rounds = 1`.

Covered: each round's end submits an evaluation job (its Slurm id in eval/r000N/job.json, a job name with
the letter `e`), the run completes without waiting for them, each job writes its set's files and the
metrics `eval/<set>/pass@<k>` land in the run's database for both rounds. Not covered: Lean, GPUs (the
SIMULATED verifier, tiny-random weights), retention deleting weights a queued evaluation still needs.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from runlib import REPO, launch_args, sgsbatch, status

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _eval_metrics(run: Path, r: int) -> dict[str, float]:
    with sqlite3.connect(run / "state.db") as con:
        return dict(con.execute("SELECT name, value FROM metrics WHERE round = ? AND name LIKE 'eval/%'", (r,)))


def test_every_round_is_evaluated_by_a_slurm_job_beside_the_chain(slurm_cluster: object, tmp_path: Path) -> None:
    held = tmp_path / "heldout.jsonl"
    held.write_text("\n".join((REPO / "sgsbatch" / "embedded" / "tiny_targets.jsonl").read_text().splitlines()[:3])
                    + "\n")
    proc = sgsbatch(*launch_args(tmp_path, "ev", "run.executor=slurm", "run.rounds=2", f"eval.sets.mini={held}",
                                 "eval.samples=2", "eval.pass_k=[1, 2]", "eval.every_rounds=1"), "--wait")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = tmp_path / "ev"
    assert status(tmp_path, "ev")["state"] == "completed"
    deadline = time.monotonic() + 600  # a safety limit, not a measurement
    for r in (0, 1):
        record = json.loads((run / "eval" / f"r{r:04d}" / "job.json").read_text())
        assert record["executor"] == "slurm" and record["job_id"].isdigit(), record
        while not (run / "eval" / f"r{r:04d}" / "mini" / "DONE").exists():
            assert time.monotonic() < deadline, f"round {r}'s evaluation job did not finish"
            time.sleep(3)
        name = ""
        while not name.endswith(".eval"):  # accounting catches up with a job's name after it starts
            assert time.monotonic() < deadline, f"job {record['job_id']} not in sacct as a named job: {name!r}"
            name = subprocess.run(["sacct", "-n", "-X", "-j", record["job_id"], "--format=JobName%80"],
                                  capture_output=True, text=True, check=True).stdout.strip()
            time.sleep(1)
        assert name.endswith(f"e{r}.sgs.ev.r{r:04d}.eval"), name
        summary = json.loads((run / "eval" / f"r{r:04d}" / "mini" / "summary.json").read_text())
        while len(_eval_metrics(run, r)) < 2:  # the metrics land just after the marker
            assert time.monotonic() < deadline, f"round {r}'s evaluation metrics did not land"
            time.sleep(1)
        assert _eval_metrics(run, r) == pytest.approx({f"eval/mini/pass@{k}": v
                                                       for k, v in summary["pass_at_k"].items()})
