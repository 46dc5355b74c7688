"""The GRPO family's rollout regime projected two ways (`solver.rollout_prompts` > 0): the chain and the
colocated job (`solver.colocated_steps`), both built. Pure arithmetic over a round's projection
(views/projection.py), which calls it; `plan` prints both (views/plan.py).

A rollout step is `rollout_prompts` prompts (DAPO: ceil(rollout_prompts x `rollout_oversample`) drawn) x
`solver.samples`, then ceil(trained sequences / `solver.batch_size`) optimizer updates; every step samples
with the weights its previous updates made (docs/objectives.md, "Rollout steps").

* **chain** (built): a rollout step is one round of today's chain of Slurm jobs, so every step pays each
  phase's queue wait and start-up (engine load, trainer and reference load, checkpoint writes): the round's
  projection as is. `fixed_s`: those start-ups and hand-overs on the critical path.
* **colocated** (scheduling/colocated.py): one job on the train job's GPUs (`slurm.train.gpus`, one node)
  alternates generation and training, keeping the engine loaded and pushing each step's weights into it in
  place (`weight_update_s`); verification streams to the CPU array as today. A step: generation on all the
  job's GPUs, verification's tail after it (the last problem's proofs, or the verify array's excess when it
  cannot keep pace), the trainer's load of the step's weights (and the reference's: as built, the trainer is
  started again each step in the job), the scoring passes and the updates, the same checkpoint writes as the
  chain's train job (weights, and the optimizer state with `train.optimizer = "carry"`: resumable at any
  step), the weight update. Once per job (`solver.colocated_steps` steps, or fewer if the steps outlast
  `slurm.train.time_min`): its queue wait and the engine's load. Its GPUs are held through verification's
  tail and the checkpoint writes.

Not modelled: the colocated job's one engine spans its GPUs by tensor parallelism
(generation.tensor_parallel_size = slurm.train.gpus), where the chain's solve tasks are engines side by side;
its generation is counted at the GPUs' full rate, so its side is a lower bound; prefill, a rollout batch too
small to fill the engine's batch (decoding is then slower than the rate), ZeRO-3 gathers for the weight update, and overlapping a step's generation with the previous
step's training (one step off-policy: not what the papers do).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from sgsbatch.config.schema import Config


@dataclass(frozen=True)
class RolloutPlan:
    """A run's rollout steps, each way (module docstring); seconds per step, hours for the run."""

    steps: int
    prompts: int  # trained a step (rollout_prompts)
    drawn: int  # sampled a step (DAPO: over-sampled)
    samples: float  # generated a step
    updates: int  # optimizer steps a rollout step
    max_gen_batches: int  # DAPO's re-sampling: generation batches (rounds) that may fill one step; 1 = off
    chain_step_s: float
    chain_fixed_s: float  # queue waits, start-ups and checkpoint writes on the critical path, a step
    chain_gpu_hours: float  # the run
    colocated_gpus: int
    colocated_step_s: float
    colocated_startup_s: float  # once per job
    colocated_jobs: int
    colocated_gpu_hours: float  # the run

    @property
    def chain_days(self) -> float:
        return self.steps * self.chain_step_s / 86400

    @property
    def colocated_days(self) -> float:
        return (self.steps * self.colocated_step_s + self.colocated_jobs * self.colocated_startup_s) / 86400

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "chain_days": self.chain_days, "colocated_days": self.colocated_days}


def rollout_plan(cfg: Config, proj: Any, figures: Any, decode: float) -> RolloutPlan | None:
    """Both ways of running the rollout steps of `proj` (a round/projection.Projection of `cfg`; `decode`: a
    GPU's tokens/s at its context), or None without a rollout batch or when a phase the comparison needs is
    not projected (no GPU figures)."""
    s, f = cfg.solver, figures
    solve, verify, train = proj.phase("solve"), proj.phase("verify"), proj.phase("train")
    if not s.rollout_prompts or solve is None or train is None or None in (solve.wall_s, train.wall_s):
        return None
    fixed = sum(f["queue_wait_s"] + p.startup_s for p in proj.projected if p.path_s is None)
    res = cfg.slurm.train
    gpus = res.gpus * res.nodes
    gen_s = solve.tokens / (gpus * decode)
    tail = 0.0
    if verify is not None and verify.rate:
        cores = verify.shards * verify.cpus
        own = verify.items / (cores * f["lean_proofs_per_s"])
        last = math.ceil(s.samples / max(1, verify.cpus)) / f["lean_proofs_per_s"]
        tail = max(last, own - gen_s) if cfg.verification.streaming else own
    assert train.task_s is not None
    train_work = train.task_s - train.startup_s
    roles = 1 + int(cfg.conjecturer.enabled and cfg.conjecturer.train)
    ref_load = f["model_load_s"] if s.kl_beta > 0 else 0.0
    ckpt = train.startup_s - roles * f["model_load_s"] - ref_load  # the weights' (and carried optimizer's) writes
    step = gen_s + tail + f["model_load_s"] + ref_load + train_work + ckpt + f["weight_update_s"]
    startup = f["queue_wait_s"] + f["model_load_s"]  # the job's queue wait and its engine's load
    per_job = max(step, res.time_min * 60 - startup)
    steps = proj.rounds
    jobs = max(1, math.ceil(steps * step / per_job), math.ceil(steps / s.colocated_steps) if s.colocated_steps else 0)
    trained = s.rollout_prompts * s.samples
    return RolloutPlan(
        steps=steps, prompts=s.rollout_prompts, drawn=s.rollout_draw(), samples=solve.items,
        updates=max(1, math.ceil(trained / s.batch_size)),
        max_gen_batches=s.rollout_max_gen_batches if s.resamples() else 1, chain_step_s=proj.round_s, chain_fixed_s=fixed,
        chain_gpu_hours=steps * proj.hours("gpu"), colocated_gpus=gpus, colocated_step_s=step,
        colocated_startup_s=startup, colocated_jobs=jobs,
        colocated_gpu_hours=gpus * (steps * step + jobs * startup) / 3600)
