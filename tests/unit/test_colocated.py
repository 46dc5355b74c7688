"""The colocated rollout job's round loop (scheduling/colocated.rollout_job) without its steps: which rounds one
job runs (solver.colocated_steps of them from its first, fewer at run.rounds, none past a change of method that
turns the job off), what it records (a rollout shard item a round, the shard finished with them) and the round
it hands on from. Each step itself (solve on the resident engine, verify, train, the round's end) is run for
real by tests/integration/test_colocated_run.py and tests/slurm/test_colocated_slurm.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sgsbatch.ops.amend import amend
from sgsbatch.phases.task import Task
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling import colocated
from tests.runlib import recorded_run

COLOCATED = ("conjecturer.enabled=false", "solver.objective=grpo", "solver.rollout_prompts=2", "run.rounds=5")


class _Executor:
    def __init__(self) -> None:
        self.handed_on: list[int] = []

    def continue_chain(self, h: Any, r: int) -> None:
        self.handed_on.append(r)


def _job(tmp_path: Path, name: str, steps: int, first: int, monkeypatch: pytest.MonkeyPatch,
         off_after: int | None = None) -> tuple[list[int], _Executor, Shard]:
    """The job from round `first` with its steps faked; `off_after`: `resume --set solver.colocated_steps=0` (an
    operational key) applied while the job runs that round."""
    h = recorded_run(tmp_path, name, sets=[*COLOCATED, f"solver.colocated_steps={steps}"])
    ran: list[int] = []
    executor = _Executor()

    def step(h: Any, k: int, job: Task, engine: Any) -> None:
        ran.append(k)
        if k == off_after:
            amend(h, ["solver.colocated_steps=0"])

    monkeypatch.setattr(colocated, "_step", step)
    monkeypatch.setattr(colocated, "executor_for", lambda h: executor)
    shard = Shard(h.paths.phase_dir(first, "rollout"), 0)
    colocated.rollout_job(Task(h.at(first), h.paths, first, "rollout", shard, lambda: False))
    return ran, executor, shard


def test_a_job_runs_its_steps_then_hands_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran, executor, shard = _job(tmp_path, "two", 2, 0, monkeypatch)
    assert ran == [0, 1] and executor.handed_on == [1]
    assert [rec["round"] for rec in shard.read()] == [0, 1] and shard.meta()["rounds"] == 2


def test_the_last_job_stops_at_the_run_s_last_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran, executor, _ = _job(tmp_path, "last", 3, 3, monkeypatch)
    assert ran == [3, 4] and executor.handed_on == [4]  # run.rounds = 5: the chain's hand-on submits nothing


def test_turned_off_on_a_live_run_the_job_ends_before_its_next_round(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ran, executor, shard = _job(tmp_path, "amended", 4, 0, monkeypatch, off_after=1)
    assert ran == [0, 1] and executor.handed_on == [1]  # round 2 is the chain's, submitted by this hand-on
    assert [rec["round"] for rec in shard.read()] == [0, 1]


def test_a_requeued_job_skips_the_rounds_it_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = recorded_run(tmp_path, "again", sets=[*COLOCATED, "solver.colocated_steps=3"])
    shard = Shard(h.paths.phase_dir(0, "rollout"), 0)
    shard.append_item({"key": "r0", "round": 0, "weight_updates_s": []})  # the first attempt's round 0
    ran: list[int] = []
    monkeypatch.setattr(colocated, "round_completed", lambda h, k: k == 0)
    monkeypatch.setattr(colocated, "_step", lambda h, k, job, engine: ran.append(k))
    monkeypatch.setattr(colocated, "executor_for", lambda h: _Executor())
    colocated.rollout_job(Task(h.at(0), h.paths, 0, "rollout", shard, lambda: False))
    assert ran == [1, 2] and [rec["round"] for rec in shard.read()] == [0, 1, 2]
