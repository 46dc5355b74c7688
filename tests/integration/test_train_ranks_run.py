"""A tiny run whose train job starts 2 CPU ranks (gloo) on the local executor: Expert Iteration,
where the examples include the round's stored proofs, read by every rank from one file."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import launch_args, outcome, sgsbatch, status  # noqa: E402

pytestmark = pytest.mark.slow
LINE = re.compile(r"rank (\d) INFO .*train (\w+): rank (\d) of (\d), (\d+) examples \(fingerprint (\w+)\)")


def test_expert_iteration_on_two_cpu_ranks(tmp_path: Path, cli_env: dict[str, str]) -> None:
    proc = sgsbatch(*launch_args(tmp_path, "ei2", "run.executor=local", "run.rounds=2", "solver.objective=ei",
                                 "conjecturer.enabled=false", "train.cpu_ranks=2", "slurm.train.cpus=2"),
                    "--wait", env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    st = status(tmp_path, "ei2")
    assert st["state"] == "completed" and st["rounds_completed"] == 2, st
    assert outcome(tmp_path / "ei2")["store"], "nothing was stored: EI would train on nothing"
    trained_rounds = 0
    for r in range(2):
        log = (tmp_path / "ei2" / "rounds" / f"r{r:04d}" / "train" / "shard_00000.attempt.log").read_text()
        seen = {int(m[2]): (m[1], int(m[3]), int(m[4]), m[5]) for m in LINE.findall(log)}
        if not seen:  # nothing to train this round: the weights were carried, no rank started training
            continue
        trained_rounds += 1
        assert set(seen) == {0, 1}, f"round {r}: ranks that trained: {sorted(seen)}"
        assert seen[0] == seen[1], f"round {r}: the ranks trained on different examples: {seen}"
        assert seen[0][0] == "solver" and seen[0][1] == 2
    assert trained_rounds >= 1
    assert not list((tmp_path / "ei2").glob("rounds/*/train/solver/step*")), "training state left behind"
