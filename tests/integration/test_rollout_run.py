"""The GRPO family's rollout regime on the local executor (the local Slurm: tests/slurm/
test_experiments_slurm.py's dapo run): a round is one rollout step of `solver.rollout_prompts` targets,
the next of a seeded shuffle, trained in prompts x samples / batch_size updates; a run whose every
round's solve and train tasks are killed once (SIGKILL) and resumed ends exactly as an unkilled one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import launch_args, outcome, sgsbatch, status  # noqa: E402

pytestmark = pytest.mark.slow
# 12 tiny targets, 4 a rollout step x 4 samples = 16 sequences in updates of 8: 3 rounds are one pass
ROLLOUT = ("run.executor=local", "run.rounds=3", "conjecturer.enabled=false", "solver.objective=grpo",
           "solver.rollout_prompts=4", "solver.samples=4", "solver.batch_size=8", "train.old_logprobs=recompute")


def test_rollout_steps_cover_a_pass_and_a_run_killed_at_every_step_ends_the_same(tmp_path: Path,
                                                                                  cli_env: dict[str, str]) -> None:
    plain = sgsbatch(*launch_args(tmp_path, "ro", *ROLLOUT), "--wait", env=cli_env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert status(tmp_path, "ro")["state"] == "completed"
    assert "look at it:" in plain.stdout and f"sgsbatch report ro --runs-dir {tmp_path} --out ro.html" in plain.stdout
    out = outcome(tmp_path / "ro")
    drawn = {r: {pid for rr, pid, *_ in out["attempts"] if rr == r} for r in range(3)}
    assert all(len(d) == 4 for d in drawn.values()), drawn
    assert len(drawn[0] | drawn[1] | drawn[2]) == 12  # one pass over the targets, each once
    assert [(r, steps, seqs) for r, role, steps, seqs in out["steps"] if role == "solver"] == [
        (0, 2, 16), (1, 2, 16), (2, 2, 16)]  # every group trained, 16 / 8 = 2 updates a rollout step

    env = {**cli_env, "SGSBATCH_FAULT_INJECT": "solve:0:kill9:1,train:0:kill9:1"}  # each round's, once
    killed = sgsbatch(*launch_args(tmp_path, "rok", *ROLLOUT), "--wait", env=env)
    assert killed.returncode == 0, killed.stdout + killed.stderr
    assert status(tmp_path, "rok")["state"] == "completed"
    for r in range(3):
        log = tmp_path / "rok" / "rounds" / f"r{r:04d}" / "train" / "shard_00000.attempts.jsonl"
        assert log.read_text().count('"start"') == 2, (r, log.read_text())  # killed once, resumed once
    assert outcome(tmp_path / "rok") == out
