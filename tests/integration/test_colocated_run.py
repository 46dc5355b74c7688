"""The colocated rollout job (solver.colocated_steps) on the local executor: one job runs the rollout steps,
its engine kept and given each step's weights in place, and samples and trains exactly as the chain of phase
jobs does on the same config, through a SIGKILL of the job mid-step (its second attempt resumes the round it
was in). The local Slurm's twin (with a warning signal and the hand-over to a second job):
tests/slurm/test_colocated_slurm.py."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import finished_job, launch_args, outcome, sgsbatch, status  # noqa: E402

from sgsbatch.run.shards import Shard  # noqa: E402

pytestmark = pytest.mark.slow
# as test_rollout_run.py: 12 tiny targets, 4 a rollout step x 4 samples, updates of 8
ROLLOUT = ("run.executor=local", "run.rounds=3", "conjecturer.enabled=false", "solver.objective=grpo",
           "solver.rollout_prompts=4", "solver.samples=4", "solver.batch_size=8", "train.old_logprobs=recompute")


class KillMidStep(threading.Thread):
    """SIGKILLs the rollout job's worker once round `r`'s solve shard 0 has logged an item (in the job's
    process) and the round's training has not finished."""

    def __init__(self, run: Path, r: int) -> None:
        super().__init__(daemon=True)
        self.run_dir, self.r, self.stop, self.killed = run, r, threading.Event(), False

    def run(self) -> None:
        job = Shard(self.run_dir / "rounds" / "r0000" / "rollout", 0)
        solve = Shard(self.run_dir / "rounds" / f"r{self.r:04d}" / "solve", 0)
        train = Shard(self.run_dir / "rounds" / f"r{self.r:04d}" / "train", 0)
        while not self.stop.wait(0.05):
            if solve.items_logged() > 0 and not train.is_done() and job.pid_file.exists():
                os.kill(int(job.pid_file.read_text()), signal.SIGKILL)
                self.killed = True
                return


def test_a_colocated_job_samples_and_trains_as_the_chain_through_a_kill(tmp_path: Path,
                                                                        cli_env: dict[str, str]) -> None:
    chain = sgsbatch(*launch_args(tmp_path, "chain", *ROLLOUT), "--wait", env=cli_env)
    assert chain.returncode == 0, chain.stdout + chain.stderr

    killer = KillMidStep(tmp_path / "colo", 1)
    killer.start()
    try:
        colo = sgsbatch(*launch_args(tmp_path, "colo", *ROLLOUT, "solver.colocated_steps=3"), "--wait", env=cli_env)
    finally:
        killer.stop.set()
        killer.join()
    assert colo.returncode == 0, colo.stdout + colo.stderr
    assert killer.killed, "the job was never caught in round 1"
    assert status(tmp_path, "colo")["state"] == "completed"
    assert outcome(tmp_path / "colo") == outcome(tmp_path / "chain")  # the same samples, verdicts and steps

    con = sqlite3.connect(tmp_path / "colo" / "state.db")
    walls = {(r, n) for r, n in con.execute("SELECT round, name FROM metrics WHERE name LIKE 'wall_s/%'")}
    con.close()
    for r in range(3):  # the phases the job ran in its own process are timed as tasks are
        assert {(r, "wall_s/solve"), (r, "wall_s/verify"), (r, "wall_s/train"), (r, "wall_s/round")} <= walls, walls
    rounds = tmp_path / "colo" / "rounds"
    assert sorted(p.parent.name for p in rounds.glob("r*/rollout")) == ["r0000"]  # one job ran all three
    job = finished_job(rounds / "r0000" / "rollout")
    assert job.attempts_file.read_text().count('"start"') == 2  # killed once, resumed at round 1
    records = {rec["round"]: rec for rec in job.read()}
    assert sorted(records) == [0, 1, 2]
    assert len(records[2]["weight_updates_s"]) == 1  # the resumed attempt's engine took round 2's weights in place
    for r in range(3):  # the solve shards ran in the job (no task of their own), verify as tasks
        assert not Shard(rounds / f"r{r:04d}" / "solve", 0).attempts_file.exists()
        assert Shard(rounds / f"r{r:04d}" / "verify", 0).attempts_file.exists()
