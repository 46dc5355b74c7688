"""Train phase: train the Solver, then the Conjecturer, on this round's examples; nothing else.

Each trainable role trains from its last weights with a fresh optimizer for one epoch over this
round's data only (round/examples.py builds the examples per objective). On SIGUSR2 the trainer
saves a resumable checkpoint after the current optimizer step and this phase raises
`Interrupted`; a requeued job continues from it, and a role whose weights are complete is not
trained again (the trainer returns the result stored with them). Not covered: ingesting the
round before training, ending it afterwards and submitting the next round: the train job does
those around this phase (scheduling/chain.py), so a phase never writes the database.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sgsbatch.backends.trainer import Example, TrainingInterrupted, TrainSettings, train
from sgsbatch.phases.task import Interrupted, Task
from sgsbatch.round.checkpoints import weights_for
from sgsbatch.round.examples import conjecturer_examples, solver_examples
from sgsbatch.round.results import ProblemResult


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
    try:
        res = train(Path(weights_for(task.cfg, task.paths, role, task.round)), task.paths.checkpoint(task.round, role),
                    examples, settings_for(task, role), state_dir=task.paths.phase_dir(task.round, "train") / role,
                    should_stop=task.should_stop)
    except TrainingInterrupted as e:
        raise Interrupted(str(e)) from e
    return asdict(res)


def run(task: Task, results: dict[str, ProblemResult],
        ei_stored: Iterable[tuple[int, str, int]] = ()) -> dict[str, dict[str, Any]]:
    """Train every trainable role; returns each role's result (steps, sequences, mean loss, ...).

    `results` is the round's `round_results`; `ei_stored` the stored proofs Expert Iteration
    trains on (round, problem id, sample), used only with `solver.objective = "ei"`.
    """
    cfg, r = task.cfg, task.round
    trained: dict[str, dict[str, Any]] = {}
    if cfg.solver.train:
        trained["solver"] = train_role(task, "solver", solver_examples(cfg, task.paths, results, ei_stored))
    if cfg.conjecturer.enabled and cfg.conjecturer.train:
        examples, rewards = conjecturer_examples(cfg, task.paths, r, results)
        trained["conjecturer"] = train_role(task, "conjecturer", examples)
        if rewards:
            trained["conjecturer"]["reward_mean"] = sum(rewards.values()) / len(rewards)
    return trained
