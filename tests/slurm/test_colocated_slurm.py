"""The colocated rollout job (solver.colocated_steps = 2) on the real local Slurm, 3 rounds: the first job runs
rounds 0 and 1 and submits the second, which runs round 2; each round's verify array is submitted by the job
(CPU tasks streaming behind the solve shards the job samples in its own process). Slurm's warning signal
(SIGUSR2, as a preemption or the time limit sends it) reaches the first job while it samples round 1: it stops
after its current item and requeues itself, and the run then ends exactly as the chain of phase jobs does on
the same config (run here on the local executor). Covered too: the job is recorded as each round's job, and
each round's cost counts only its own part of the job's time. The SIMULATED verifier: no Lean here."""

from __future__ import annotations

import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest
from runlib import finished_job, launch_args, outcome, sgsbatch, status

from sgsbatch.run.attempts import STOPPED, attempts
from sgsbatch.run.shards import Shard

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
ROLLOUT = ("run.rounds=3", "conjecturer.enabled=false", "solver.objective=grpo", "solver.rollout_prompts=4",
           "solver.samples=4", "solver.batch_size=8", "train.old_logprobs=recompute", "run.poll_interval_s=2")


class SignalInRound(threading.Thread):
    """SIGUSR2 to the rollout job once round `r`'s solve shard 0 has logged an item and its training has not ended."""

    def __init__(self, run: Path, r: int) -> None:
        super().__init__(daemon=True)
        self.run_dir, self.r, self.stop, self.sent = run, r, threading.Event(), ""

    def run(self) -> None:
        solve = Shard(self.run_dir / "rounds" / f"r{self.r:04d}" / "solve", 0)
        train = Shard(self.run_dir / "rounds" / f"r{self.r:04d}" / "train", 0)
        while not self.stop.wait(0.1):
            if not self.run_dir.joinpath("state.db").exists() or solve.items_logged() == 0 or train.is_done():
                continue
            con = sqlite3.connect(self.run_dir / "state.db")
            try:
                row = con.execute("SELECT job_id FROM slurm_jobs WHERE phase = 'rollout' AND round = 0").fetchone()
            finally:
                con.close()
            if row:
                subprocess.run(["scancel", "--signal=USR2", row[0]], capture_output=True)
                self.sent = row[0]
                return


def test_colocated_rollout_jobs_run_the_chain_s_rounds_on_slurm_through_a_warning_signal(
        slurm_cluster: object, tmp_path: Path, cli_env: dict[str, str]) -> None:
    chain = sgsbatch(*launch_args(tmp_path, "chain", "run.executor=local", *ROLLOUT), "--wait", env=cli_env)
    assert chain.returncode == 0, chain.stdout + chain.stderr

    signaller = SignalInRound(tmp_path / "colo", 1)
    signaller.start()
    try:
        colo = sgsbatch(*launch_args(tmp_path, "colo", "run.executor=slurm", *ROLLOUT, "solver.colocated_steps=2"),
                        "--wait", env=cli_env)
    finally:
        signaller.stop.set()
        signaller.join()
    assert colo.returncode == 0, colo.stdout + colo.stderr
    st = status(tmp_path, "colo")
    assert st["state"] == "completed" and st["executor"] == "slurm", st
    assert signaller.sent, "the rollout job was never caught in round 1"
    run = tmp_path / "colo"
    assert outcome(run) == outcome(tmp_path / "chain")

    finished_job(run / "rounds" / "r0002" / "rollout")  # the second job, which ended the run
    tried = attempts(Shard(run / "rounds" / "r0000" / "rollout", 0))
    assert [a.outcome for a in tried] == [STOPPED, "done"], tried  # stopped on the signal, requeued, finished
    assert "exiting for requeue" in (run / "rounds" / "r0000" / "rollout" / "shard_00000.attempt-1.log").read_text()
    con = sqlite3.connect(run / "state.db")
    rows = con.execute("SELECT round, phase, job_id FROM slurm_jobs ORDER BY round, phase").fetchall()
    costs = dict(con.execute("SELECT round, value FROM metrics WHERE name = 'cost/rollout/cpu_hours'").fetchall())
    con.close()
    jobs = {(r, p): j for r, p, j in rows}
    assert jobs[(0, "rollout")] == jobs[(1, "rollout")] == signaller.sent  # one job, both rounds
    assert jobs[(2, "rollout")] != signaller.sent  # handed on to a second job
    assert {r for r, p, _ in rows if p == "verify"} == {0, 1, 2}  # each round's CPU array
    # each round counts the job's time since the round before: rounds 0 and 1 together are at most the job's
    # whole time (counting the time so far at each round's end, round 1 alone would be about all of it)
    from sgsbatch.scheduling.slurm import sacct_usage

    total = (sacct_usage([signaller.sent]) or {}).get(signaller.sent)
    assert total is not None and costs[0] > 0, (total, costs)
    assert costs[0] + costs[1] <= total[0] + 1e-6, (costs, total)
