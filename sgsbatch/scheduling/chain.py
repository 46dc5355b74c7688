"""The chain: the train job, and ending a round and handing on to the next, in one place.

A round's last job is its train job (`train_job`): it ingests the round (the run's single
database writer), lets the train phase train, then `end_round` ends the round and hands on.
`end_round` is the only code that ends a round: ingestion (a no-op when done before), the
executor's records of the round's jobs, `round/lifecycle.finish_round` (checkpoints, metrics,
TensorBoard, retention, the next round's inputs) and, from a train job, the executor's
`continue_chain` (Slurm submits round r + 1; the local driver goes on by itself). The train
shard's completion marker is written last, after all of that.

Its users: the train job (Slurm and local alike), `resume` and `rebuild` (both through
`end_round_from_marker`, for a round whose training finished but whose ending was lost).
"""

from __future__ import annotations

import os
from typing import Any

from sgsbatch.phases import train as train_phase
from sgsbatch.phases.task import Task
from sgsbatch.round.examples import ei_stored_proofs
from sgsbatch.round.lifecycle import finish_round, ingest_round
from sgsbatch.round.results import round_results
from sgsbatch.run.handle import RunHandle, open_run_dir
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling.executor import executor_for


def train_job(task: Task) -> None:
    """Round r's train job: ingest, train (phases/train.py), end the round, hand on, marker last."""
    if task.shard.is_done():
        return
    cfg, r = task.cfg, task.round
    h = open_run_dir(task.paths, cfg)
    rank = int(os.environ.get("RANK", "0"))
    results = round_results(cfg, task.paths, r)  # read once: ingestion and training both need it
    if rank == 0:
        ingest_round(h, r, results)
    ei_stored = ei_stored_proofs(h, r) if cfg.solver.train and cfg.solver.objective == "ei" else []
    trained = train_phase.run(task, results, ei_stored)
    if rank != 0:
        return
    end_round(h, r, trained, continue_chain=True)
    task.shard.finish([{"key": role, "role": role, **res} for role, res in trained.items()])


def end_round(h: RunHandle, r: int, trained: dict[str, dict[str, Any]], *, continue_chain: bool = False) -> None:
    """End round r with the train results per role; `continue_chain` only from the train job itself."""
    ingest_round(h, r)
    executor = executor_for(h)
    executor.record_round(h, r)
    finish_round(h, r, trained)
    if continue_chain:
        executor.continue_chain(h, r)


def trained_roles(h: RunHandle, r: int) -> dict[str, dict[str, Any]] | None:
    """The train results per role recorded by round r's finished train job, or None if it has not finished."""
    marker = Shard(h.paths.phase_dir(r, "train"), 0)
    if not marker.is_done():
        return None
    return {x["role"]: x for x in marker.read()}


def end_round_from_marker(h: RunHandle, r: int) -> bool:
    """End round r again from its finished train job's records (resume, rebuild); False if it has none."""
    trained = trained_roles(h, r)
    if trained is None:
        return False
    end_round(h, r, trained)
    return True
