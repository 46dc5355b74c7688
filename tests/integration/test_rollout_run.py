"""The GRPO family's rollout regime on the local executor (the local Slurm: tests/slurm/
test_experiments_slurm.py's dapo run): a round is one rollout step of `solver.rollout_prompts` targets,
the next of a seeded shuffle, trained in prompts x samples / batch_size updates; a run whose every
round's solve and train tasks are killed once (SIGKILL) and resumed ends exactly as an unkilled one."""

from __future__ import annotations

import json
import sqlite3
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


def test_dapo_re_samples_a_short_rollout_step_in_the_next_round_with_the_same_weights(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    """DAPO's dynamic sampling filling its batch (solver.rollout_max_gen_batches): a round whose kept groups
    fall short trains nothing and publishes its weights unchanged; the next round adds its kept groups to the
    carried ones (rollout_kept) and trains the first rollout_prompts, or at the cap what it has. Each round's
    train task is killed once (SIGKILL) and resumed: the carried groups survive it."""
    sets = ("run.executor=local", "run.rounds=3", "conjecturer.enabled=false", "solver.objective=dapo",
            "solver.rollout_prompts=4", "solver.samples=4", "solver.batch_size=8", "solver.rollout_max_gen_batches=2")
    env = {**cli_env, "SGSBATCH_FAULT_INJECT": "train:0:kill9:1"}
    proc = sgsbatch(*launch_args(tmp_path, "dr", *sets), "--wait", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    con = sqlite3.connect(tmp_path / "dr" / "state.db")
    m: dict[int, dict[str, float]] = {}
    for r, name, value in con.execute("SELECT round, name, value FROM metrics WHERE name LIKE 'solver/%'"):
        m.setdefault(r, {})[name] = value
    steps = dict(con.execute("SELECT round, steps FROM checkpoints WHERE role = 'solver'").fetchall())
    con.close()
    gen, resampled = 0, []
    for r in range(3):
        x = m[r]
        gen = gen + 1
        assert x["solver/rollout_gen_batches"] == gen, (r, x)
        if x["solver/rollout_resampled"]:  # short of 4 before the cap: nothing trained, groups carried
            assert gen < 2 and x["solver/rollout_kept"] < 4 and x["solver/groups"] == 0 and steps[r] == 0, (r, x)
            resampled.append(r)
            continue
        kept = x["solver/rollout_kept"]
        assert x["solver/groups"] == min(4, kept) and x["solver/rollout_short"] == max(0, 4 - kept), (r, x)
        assert x["solver/rollout_unused"] == max(0, kept - 4), (r, x)
        assert steps[r] == -(-int(x["solver/groups"]) * 4 // 8), (r, x, steps)  # its groups' updates
        if r - 1 in resampled:  # the carried groups count in this step
            assert kept >= m[r - 1]["solver/rollout_kept"], (r, x, m[r - 1])
        gen = 0
    assert resampled, m  # the tiny model rarely fills 4 of 4 groups: a round re-sampled (deterministic, seeded)
    for r in resampled:
        pending = json.loads((tmp_path / "dr" / "rounds" / f"r{r:04d}" / "train" / "rollout.json").read_text())
        assert pending["gen_batches"] == 1 and len(pending["pending"]) == m[r]["solver/rollout_kept"]
