"""Train phase: write each trainable role's examples once, then train the Solver and the Conjecturer.

`prepare` (the train job's first task, once per round) builds the examples per objective
(round/examples.py; the GRPO family's group counts go into `prepared.json` and on to the round's
metrics) and writes them to `rounds/rNNNN/train/examples/<role>.npz`, the round's
Conjecturer rewards to `conjecturer_rewards.json` (read back by `conjecturer_rewards`, so lineage
and export never re-read the round's shard files), `prepared.json` last: every rank then reads the same list (Expert Iteration's stored proofs included), and the
ranks start only after the round is ingested, so no GPU waits on the database. `run` (every rank)
trains each role from its last weights for one epoch over this round's data, with a fresh AdamW
(`train.optimizer = "fresh"`, the reference's) or the one its last trained round ended with ("carry":
backends/optimizer_state.py, saved under checkpoints/optimizer/<role>/); a role with no examples carries its weights over unchanged. On a stop request the trainer
saves a resumable checkpoint after the current optimizer step and this phase raises
`Interrupted`; a role whose weights are complete is not trained again (its stored result is
returned), so calling `run` after the ranks finished reads the results without loading anything.
Rank 0 records each optimizer step in `steps.jsonl` (run/progress.py: what `status` and the stuck
alarm read, and what the round's end writes to TensorBoard under `train_step/`: round/step_metrics.py,
which says why there and not here); collectives time out after `train.collective_timeout_s`.
Not covered: ingesting, ending the round, launching ranks (scheduling/chain.py).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sgsbatch.backends.batches import (
    GRPO_FAMILY,
    OBJECTIVES,
    Example,
    TrainSettings,
    load_examples,
    save_examples,
)
from sgsbatch.backends.trainer import TrainingInterrupted, TrainStep, train
from sgsbatch.backends.weights import stored_result
from sgsbatch.config.schema import Config
from sgsbatch.phases.task import Interrupted, Task
from sgsbatch.round import metrics as M
from sgsbatch.round.checkpoints import optimizer_state_for, weights_for
from sgsbatch.round.examples import Carry, conjecturer_examples, family_groups, solver_examples
from sgsbatch.round.results import ProblemResult, round_inputs, round_results
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.progress import record_train_step, train_steps_file
from sgsbatch.run.shards import atomic_write_json, atomic_write_text, read_json

PREPARED = "prepared.json"
REWARDS = "conjecturer_rewards.json"
ROLLOUT = "rollout.json"
STEPS_BEFORE = "steps_before"  # prepared.json, per role: its optimizer steps in the rounds before this one


def settings_for(task: Task, role: str) -> TrainSettings:
    """`train_settings`, with the KL's reference policy (the run's initial Solver weights, round 0's) and the
    role's optimizer steps in earlier rounds (the LR warm-up's position; `prepare` records them)."""
    kl = role == "solver" and task.cfg.solver.kl_beta > 0 and task.cfg.solver.objective in GRPO_FAMILY
    meta = prepared(task) or {}
    return train_settings(task.cfg, role, task.round,
                          reference=weights_for(task.cfg, task.paths, "solver", 0) if kl else "",
                          steps_before=int(meta.get(role, {}).get(STEPS_BEFORE, 0)))


def train_settings(cfg: Config, role: str, r: int, reference: str = "", steps_before: int = 0) -> TrainSettings:
    """How round r trains `role` (the train phase and the canary's training check); `reference` is the
    KL's reference policy (the Solver under the GRPO family with solver.kl_beta > 0; "" = no KL term)."""
    sec = cfg.solver if role == "solver" else cfg.conjecturer
    seed = int(hashlib.sha256(f"{cfg.run.seed}:{r}:train:{role}".encode()).hexdigest()[:8], 16)
    # the Solver trains with its objective (Expert Iteration's proofs as REINFORCE-1/2); the Conjecturer with REINFORCE-1/2
    objective = cfg.solver.objective if role == "solver" and cfg.solver.objective in OBJECTIVES else "reinforce"
    clip_low, clip_high = cfg.solver.clip_range() if objective in GRPO_FAMILY else (0.2, 0.2)
    processed = cfg.generation.logprobs == "processed"
    return TrainSettings(lr=sec.lr, betas=cfg.train.betas, weight_decay=cfg.train.weight_decay,
                         grad_clip=cfg.train.grad_clip, batch_size=sec.batch_size,
                         micro_batch_size=cfg.train.micro_batch_size, zero_stage=cfg.train.zero_stage,
                         bf16=cfg.train.bf16, gradient_checkpointing=cfg.train.gradient_checkpointing, seed=seed,
                         objective=objective, cispo_clip_max=cfg.solver.cispo_clip_max, clip_low=clip_low,
                         clip_high=clip_high, max_tokens=cfg.solver.max_tokens,
                         threads=cfg.train_threads_per_rank(),
                         sampling_temperature=cfg.solver.temperature if processed else 1.0,
                         sampling_top_p=cfg.generation.top_p if processed else 1.0,
                         keep_fp32_master=cfg.train.keep_fp32_master,
                         kl_beta=cfg.solver.kl_beta if reference else 0.0, kl_estimator=cfg.solver.kl_estimator,
                         kl_clamp=cfg.solver.kl_clamp,
                         kl_reference=reference, old_logprobs=cfg.train.old_logprobs,
                         warmup_steps=cfg.solver.lr_warmup_steps if role == "solver" else 0,
                         steps_before=steps_before)


def train_dir(task: Task) -> Path:
    return task.paths.phase_dir(task.round, "train")


def examples_file(task: Task, role: str) -> Path:
    return train_dir(task) / "examples" / f"{role}.npz"


def rewards_file(paths: RunPaths, r: int) -> Path:
    """Where `prepare` writes round r's Conjecturer rewards (the one home of this path)."""
    return paths.phase_dir(r, "train") / REWARDS


def conjecturer_rewards(paths: RunPaths, r: int) -> dict[str, float] | None:
    """Round r's Conjecturer reward (= training weight) per in-band conjecture id, as `prepare`
    wrote it ({} when the Conjecturer did not train that round); None when the file is absent
    (before `prepare`, or a run prepared before this file existed)."""
    path = rewards_file(paths, r)
    if not path.is_file():
        return None
    return {str(k): float(v) for k, v in read_json(path).items()}


def rollout_file(paths: RunPaths, r: int) -> Path:
    """DAPO's re-sampling: round r's rollout step so far ({"gen_batches", "pending": [[round, key], ...]}, the
    groups carried to round r + 1 when round r trained nothing; [] when it trained)."""
    return paths.phase_dir(r, "train") / ROLLOUT


def carried(cfg: Config, paths: RunPaths, r: int) -> Carry:
    """The groups round r's rollout step carries from the rounds before it (DAPO's re-sampling: round r - 1's
    `rollout_file` with groups pending), with their results read from those rounds' files (compaction keeps
    them: `solver.window_rounds`). Nothing in round 0, or after a round that trained or did not re-sample.

    Read whatever the config says now: a change of method that turns re-sampling off (`resume --set
    solver.rollout_max_gen_batches=1`) still finds the groups its last generation batch left pending, so the
    step they belong to trains them (the cap is then 1: that round trains what it has), or, when the objective
    is no longer one of the GRPO family's rollout steps, `prepare` counts them dropped."""
    if r == 0 or not rollout_file(paths, r - 1).is_file():
        return Carry()
    state = read_json(rollout_file(paths, r - 1))
    if not state["pending"]:
        return Carry()
    rounds: dict[int, dict[str, ProblemResult]] = {}
    groups = []
    for rnd, key in state["pending"]:
        if rnd not in rounds:
            rounds[rnd] = round_results(cfg, paths, int(rnd))
        groups.append(((int(rnd), str(key)), rounds[rnd][key]))
    return Carry(tuple(groups), int(state["gen_batches"]))


def _carry_dropped(cfg: Config, r: int, carry: Carry) -> int:
    """Groups an earlier round left pending that round r cannot train (its objective is no longer a GRPO family
    rollout step: a change of method mid-step), said in its log and counted (`solver/rollout_dropped`); 0 when
    there are none or round r trains them."""
    if not carry.groups or (cfg.solver.objective in GRPO_FAMILY and cfg.solver.rollout_prompts > 0):
        return 0
    print(f"round {r}: {len(carry.groups)} groups left pending by DAPO's re-sampling are dropped: solver.objective "
          f"{cfg.solver.objective!r} with solver.rollout_prompts {cfg.solver.rollout_prompts} trains no rollout "
          f"step (solver/rollout_dropped)", flush=True)
    return len(carry.groups)


def prepared(task: Task) -> dict[str, dict[str, Any]] | None:
    """Per trainable role: its number of examples (and the Conjecturer's mean reward); None before `prepare`."""
    path = train_dir(task) / PREPARED
    if not path.is_file():
        return None
    data: dict[str, dict[str, Any]] = json.loads(path.read_text())
    return data


def prepare(task: Task, results: dict[str, ProblemResult], ei_stored: Iterable[tuple[int, str, int]] = (),
            steps_before: dict[str, int] | None = None) -> None:
    """Write every trainable role's examples and the Conjecturer's rewards, then `prepared.json`
    (the commit point); once per round.

    `results` is the round's `round_results`; `ei_stored` the proofs Expert Iteration trains on
    (round, problem id, sample; round/examples.ei_stored_proofs), used only by its selections;
    `steps_before` each role's optimizer steps in earlier rounds (round/lifecycle.steps_before_round).
    """
    if prepared(task) is not None:
        return
    cfg, r = task.cfg, task.round
    meta: dict[str, dict[str, Any]] = {}
    rewards: dict[str, float] = {}
    if cfg.solver.train:
        meta["solver"] = _prepare_solver(task, results, ei_stored, (steps_before or {}).get("solver", 0))
    if cfg.conjecturer.enabled and cfg.conjecturer.train:
        examples, rewards = conjecturer_examples(cfg, task.paths, r, results)
        save_examples(examples_file(task, "conjecturer"), examples)
        meta["conjecturer"] = {"examples": len(examples), STEPS_BEFORE: (steps_before or {}).get("conjecturer", 0)}
        if rewards:
            meta["conjecturer"]["reward_mean"] = sum(rewards.values()) / len(rewards)
    atomic_write_json(rewards_file(task.paths, r), rewards)  # not in prepared.json: `run` passes its keys on
    atomic_write_text(train_dir(task) / PREPARED, json.dumps(meta) + "\n")  # role order kept: Solver first


def _prepare_solver(task: Task, results: dict[str, ProblemResult], ei_stored: Iterable[tuple[int, str, int]],
                    steps_before: int) -> dict[str, Any]:
    """The Solver's part of `prepare`: its examples written (with DAPO's carried groups, or those dropped
    counted), the GRPO family's group counts as the round's metrics, the rollout state of DAPO's re-sampling."""
    cfg, r = task.cfg, task.round
    inputs = round_inputs(task.paths, r)
    unsolved = inputs["unsolved"] if cfg.solver.selection_mode() == "unsolved" else []
    draw, carry = inputs["solve_targets"], carried(cfg, task.paths, r)
    dropped = _carry_dropped(cfg, r, carry)
    if dropped:
        carry = Carry()
    examples = solver_examples(cfg, task.paths, results, ei_stored, unsolved, draw, r, carry)
    save_examples(examples_file(task, "solver"), examples)
    metrics: dict[str, float] = {M.SOLVER_ROLLOUT_DROPPED: float(dropped)} if dropped else {}
    if cfg.solver.objective in GRPO_FAMILY:  # the group counts, recorded with the round's metrics
        family = family_groups(cfg, results, draw, r, carry)
        metrics = family.metrics | metrics
        if cfg.solver.resamples():
            atomic_write_json(rollout_file(task.paths, r), {"gen_batches": carry.gen_batches + 1,
                                                            "pending": family.pending})
    return {"examples": len(examples), STEPS_BEFORE: steps_before} | ({"metrics": metrics} if metrics else {})


def step_recorder(task: Task, role: str) -> Callable[[TrainStep], None]:
    """What each rank does after an optimizer step: rank 0 records it for `status`; then the task's hook."""
    path = train_steps_file(task.paths, task.round)
    first = os.environ.get("RANK", "0") == "0"

    def on_step(step: TrainStep) -> None:
        if first:
            record_train_step(path, {"role": role, **asdict(step)})
        if task.after_step is not None:
            task.after_step(step.step)

    return on_step


def train_role(task: Task, role: str, examples: list[Example]) -> dict[str, Any]:
    if task.cfg.train.backend == "simulated":  # SIMULATED: counts steps, publishes tiny weights
        from sgsbatch.backends.simulated_trainer import simulated_train
        from sgsbatch.config.simulated_time import simulated_time

        job = task.cfg.slurm.train
        return asdict(simulated_train(weights_for(task.cfg, task.paths, role, task.round),
                                      task.paths.checkpoint(task.round, role), examples, settings_for(task, role),
                                      param_count=task.cfg.train.simulated_param_count,
                                      clock=simulated_time(task.cfg), gpus=job.gpus * job.nodes,
                                      on_step=step_recorder(task, role)))
    carry = task.cfg.train.optimizer == "carry"  # one AdamW across rounds (backends/optimizer_state.py)
    try:
        res = train(weights_for(task.cfg, task.paths, role, task.round), task.paths.checkpoint(task.round, role),
                    examples, settings_for(task, role), state_dir=train_dir(task) / role,
                    should_stop=task.should_stop, on_step=step_recorder(task, role),
                    collective_timeout_s=task.cfg.train.collective_timeout_s,
                    optimizer_in=optimizer_state_for(task.paths, role, task.round) if carry else None,
                    optimizer_out=task.paths.optimizer_state(task.round, role) if carry else None)
    except TrainingInterrupted as e:
        raise Interrupted(str(e)) from e
    return asdict(res)


def run(task: Task) -> dict[str, dict[str, Any]]:
    """Train every trainable role (after `prepare`); returns each role's result (steps, sequences, mean loss, ...)."""
    meta = prepared(task)
    assert meta is not None, f"round {task.round}: the train phase runs only after prepare()"
    trained: dict[str, dict[str, Any]] = {}
    for role, info in meta.items():  # the Solver first, then the Conjecturer (insertion order)
        extra = {k: v for k, v in info.items() if k not in ("examples", STEPS_BEFORE)}
        stored = stored_result(task.paths.checkpoint(task.round, role))
        if stored is not None:
            trained[role] = {**asdict(stored), **extra}
            continue
        trained[role] = {**train_role(task, role, load_examples(examples_file(task, role))), **extra}
    return trained
