"""Train phase (one job): ingest the round, train the Solver then the Conjecturer, end the round.

The train job is the round's single database writer: it ingests the round's shards (idempotent),
trains each trainable role from its last weights with a fresh optimizer for one epoch over this
round's data only, records checkpoints and metrics (advance.finish_round) and, on Slurm, submits
the next round (self-chaining) before its completion marker is written. On SIGUSR2 the trainer
saves a resumable checkpoint after the current optimizer step; a requeued job continues from it,
and a role whose weights are complete is not trained again.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict
from typing import Any

from sqlmodel import select

from sgsbatch.backends.trainer import Example, TrainingInterrupted, TrainSettings, train
from sgsbatch.phases.task import Interrupted, Task
from sgsbatch.round.checkpoints import weights_for
from sgsbatch.round.examples import conjecturer_examples, solver_examples
from sgsbatch.round.lifecycle import finish_round
from sgsbatch.round.results import round_results
from sgsbatch.run.handle import RunHandle, open_run_dir
from sgsbatch.state.ingest import ingest_round
from sgsbatch.state.schema import StoredProof


def settings_for(task: Task, role: str) -> TrainSettings:
    cfg = task.cfg
    sec = cfg.solver if role == "solver" else cfg.conjecturer
    seed = int(hashlib.sha256(f"{cfg.run.seed}:{task.round}:train:{role}".encode()).hexdigest()[:8], 16)
    objective = "cispo" if role == "solver" and cfg.solver.objective == "cispo" else "reinforce"
    return TrainSettings(lr=sec.lr, betas=cfg.train.betas, weight_decay=cfg.train.weight_decay,
                         grad_clip=cfg.train.grad_clip, batch_size=sec.batch_size,
                         micro_batch_size=cfg.train.micro_batch_size, zero_stage=cfg.train.zero_stage,
                         bf16=cfg.train.bf16, gradient_checkpointing=cfg.train.gradient_checkpointing, seed=seed,
                         objective=objective, cispo_clip_max=cfg.solver.cispo_clip_max, threads=task.threads())


def train_role(task: Task, role: str, examples: list[Example]) -> dict[str, Any]:
    from pathlib import Path

    try:
        res = train(Path(weights_for(task.cfg, task.paths, role, task.round)), task.paths.checkpoint(task.round, role),
                    examples, settings_for(task, role), state_dir=task.paths.phase_dir(task.round, "train") / role,
                    should_stop=task.should_stop)
    except TrainingInterrupted as e:
        raise Interrupted(str(e)) from e
    return asdict(res)


def _stored(h: RunHandle, r: int) -> list[tuple[int, str, int]]:
    with h.db.read() as s:
        rows = s.exec(select(StoredProof).where(StoredProof.run_id == h.run_id,
                                                StoredProof.round > r - h.cfg.solver.ei_rounds)).all()
        return [(p.round, p.problem_id, p.sample) for p in rows]


def run(task: Task) -> None:
    if task.shard.is_done():
        return
    cfg, r = task.cfg, task.round
    h = open_run_dir(task.paths, cfg)
    rank = int(os.environ.get("RANK", "0"))
    results = round_results(cfg, task.paths, r)  # read once: ingestion and training both need it
    if rank == 0:
        ingest_round(h.db, h.run_id, cfg, task.paths, r, results)
    trained: dict[str, dict[str, Any]] = {}
    if cfg.solver.train:
        stored = _stored(h, r) if cfg.solver.objective == "ei" else []
        trained["solver"] = train_role(task, "solver", solver_examples(cfg, task.paths, results, stored))
    if cfg.conjecturer.enabled and cfg.conjecturer.train:
        examples, rewards = conjecturer_examples(cfg, task.paths, r, results)
        trained["conjecturer"] = train_role(task, "conjecturer", examples)
        if rewards:
            trained["conjecturer"]["reward_mean"] = sum(rewards.values()) / len(rewards)
    if rank != 0:
        return
    finish_round(h, r, trained)
    if r + 1 < cfg.run.rounds and h.row().executor == "slurm" and cfg.run.submit_from_jobs:
        from sgsbatch.scheduling.slurm import submit_round

        submit_round(h, r + 1)
    task.shard.finish([{"key": role, "role": role, **res} for role, res in trained.items()])
