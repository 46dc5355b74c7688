"""SIMULATED trainer: counts what a real training job would process and publishes tiny weights.

THIS TRAINS NOTHING. `train.backend = "simulated"` (set by `launch --rehearse`) reads the
examples the round really built (phases/train.py writes them first), plans the optimizer steps
exactly as the real trainer does (`batches.plan_steps`: same batch size, seed, objective) and
counts sequences and completion tokens. It then publishes a checkpoint with the real protocol
(run/checkpoint.py: staging directory, `train_result.json`, completion marker last) holding a few
bytes of SIMULATED weights; the marker records `simulated: true` and `simulated_bytes`, the size a
real bf16 checkpoint of `train.simulated_param_count` parameters would have. Retention, the next
round's weight hand-over and status then run as for real. No torch, no DeepSpeed. Each planned
step is reported to `on_step` as the real trainer reports it (its sequences, completion tokens and LR,
the warm-up included), so `status` and TensorBoard's `train_step/` curves of a rehearsal have its points.
Not covered: losses (0.0), entropy, gradient norms, clip fractions; an export of these weights is not a model.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from sgsbatch.backends.batches import Example, TrainResult, TrainSettings, plan_steps, step_lr
from sgsbatch.backends.train_steps import TrainStep
from sgsbatch.backends.weights import RESULT
from sgsbatch.config.simulated_time import SimulatedTime, sleep
from sgsbatch.run.checkpoint import publish_dir, staging_dir

log = logging.getLogger(__name__)
WEIGHTS_FILE = "SIMULATED_WEIGHTS.json"
BYTES_PER_PARAM = 2  # bf16


def simulated_train(model: Path | str, out_dir: Path, examples: Sequence[Example], settings: TrainSettings,
                    *, param_count: int, clock: SimulatedTime | None = None, gpus: int = 0,
                    on_step: Callable[[TrainStep], None] | None = None) -> TrainResult:
    """Plan the steps over `examples`, publish tiny SIMULATED weights at `out_dir`; the would-be result.
    With a `clock`: sleep the model load, the training of every token (prompt + completion) on
    `gpus` GPUs in all, and the checkpoint write (config/simulated_time.py). `on_step`: each planned step's
    SIMULATED record (loss 0, no gradient statistics)."""
    log.warning("SIMULATED trainer (REHEARSAL or test): no training; tiny weights published at %s", out_dir)
    steps = plan_steps(examples, settings) if examples else []
    tokens = sum(len(ex.completion_ids) for ex in examples)
    if clock is not None:
        sleep(clock.load_s(), "model load")
        sleep(clock.train_s(sum(len(ex.prompt_ids) + len(ex.completion_ids) for ex in examples), gpus), "training")
        sleep(clock.checkpoint_s(), "checkpoint write")
    for k, step in enumerate(steps, start=1):
        if on_step is not None:
            on_step(TrainStep(step=k, steps=len(steps), loss=0.0, step_s=0.0, sequences=len(step),
                              tokens=sum(len(examples[i].completion_ids) for i in step), lr=step_lr(settings, k),
                              simulated=True))
    result = TrainResult(steps=len(steps), sequences=len(examples), target_tokens=tokens, mean_loss=0.0,
                         tokens=tokens, objective=settings.objective)
    tmp = staging_dir(out_dir)
    (tmp / WEIGHTS_FILE).write_text(json.dumps({"SIMULATED": "not a model", "trained_from": str(model),
                                                "param_count": param_count}) + "\n")
    (tmp / RESULT).write_text(json.dumps(asdict(result)) + "\n")
    publish_dir(tmp, out_dir, {"kind": "simulated", "simulated": True, "source": str(model),
                               "simulated_bytes": param_count * BYTES_PER_PARAM, "result": asdict(result)})
    return result
