"""One optimizer step's report (`TrainStep`): what the trainer measured in the step, as every rank sees it.

The trainer (backends/trainer.py) builds it after each optimizer step from the step's summed
objectives.STATS (already all-reduced over the ranks, so every value is the step's global one), the
gradient norm and the learning rate; rank 0 appends it to the round's `steps.jsonl`
(phases/train.step_recorder) and the round's end writes it to TensorBoard under `train_step/`
(round/step_metrics.py). Values that do not apply to the objective are None and are not written:
the ratio statistics exist for CISPO and the GRPO family (the clip sides for the GRPO family only),
`ref_kl` (the `ref_kl` entry of `objectives.result_stats`: the KL estimate to the reference, per
token) only when the objective has that term (solver.kl_beta > 0, backends/reference.needs_ref).

The gradient norm is the global L2 norm of the step's gradient before clipping: DeepSpeed's
(`engine.get_global_grad_norm()`, set by its ZeRO and bf16 optimizers) or, where DeepSpeed computes
none (ZeRO stage 0 without bf16: its clip discards the norm), the norm of the module's gradients
taken just before `engine.step()` applies the step (in that mode every rank holds the averaged
gradient). Not covered: per-layer norms, the norm after clipping.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sgsbatch.backends.batches import GRPO_FAMILY, RATIO_OBJECTIVES
from sgsbatch.backends.objectives import result_stats


@dataclass(frozen=True)
class TrainStep:
    """One finished optimizer step, as every rank sees it (every value but `step_s` is global)."""

    step: int  # 1-based
    steps: int  # in this call's epoch
    loss: float
    tokens: int  # completion tokens trained on in this step, over all ranks
    step_s: float  # this rank's wall time for the step, its collectives included
    sequences: int = 0  # sequences (examples) in the step
    entropy: float = 0.0  # mean entropy of the policy's next-token distribution over the step's tokens
    lr: float = 0.0  # the optimizer's learning rate of the step
    grad_norm: float | None = None  # global L2 norm of the gradient before clipping (see the module docs)
    clip_fraction: float | None = None  # CISPO and the GRPO family: share of the step's tokens clipped
    clip_fraction_low: float | None = None  # the GRPO family: r < 1 - clip_low with A < 0
    clip_fraction_high: float | None = None  # the GRPO family: r > 1 + clip_high with A > 0
    ratio_mean: float | None = None  # mean over the step's sequences of s = exp(mean_t log r)
    ratio_std: float | None = None  # their standard deviation (the spread of the importance ratio)
    sampler_kl: float | None = None  # per token, sum_t (r - 1 - log r) / tokens: KL(sampler || policy)
    ref_kl: float | None = None  # the reference-policy KL per token, when the objective has one
    simulated: bool = False  # reported by the SIMULATED trainer (backends/simulated_trainer.py): nothing trained


def step_report(step: int, steps: int, loss: float, stats: Sequence[float], sequences: int, step_s: float,
                objective: str, grad_norm: float | None, lr: float, *, ref_kl: bool = False) -> TrainStep:
    """The TrainStep of one optimizer step from its summed objectives.STATS (`stats`, global); `ref_kl`:
    the objective has a KL term to the reference (solver.kl_beta > 0)."""
    v = result_stats(stats)
    ratio = objective in RATIO_OBJECTIVES
    sides = objective in GRPO_FAMILY

    def kept(key: str, on: bool) -> float | None:
        return float(v[key]) if on and key in v else None

    return TrainStep(step, steps, loss, int(v["tokens"]), step_s, sequences=sequences, entropy=float(v["entropy"]),
                     lr=lr, grad_norm=grad_norm, clip_fraction=kept("clip_fraction", ratio),
                     clip_fraction_low=kept("clip_low_fraction", sides),
                     clip_fraction_high=kept("clip_high_fraction", sides), ratio_mean=kept("seq_ratio_mean", ratio),
                     ratio_std=kept("seq_ratio_std", ratio), sampler_kl=kept("sampler_kl", ratio),
                     ref_kl=kept("ref_kl", ref_kl))


def deepspeed_grad_norm(engine: Any) -> float | None:
    """DeepSpeed's global gradient norm of the last step (None where its optimizer computes none)."""
    norm = engine.get_global_grad_norm()
    if norm is None:
        return None
    value = float(norm)
    return value if math.isfinite(value) else None


def module_grad_norm(module: Any) -> float:
    """The L2 norm of `module`'s gradients (parameters without one count 0)."""
    import torch

    sq = [p.grad.detach().float().pow(2).sum() for p in module.parameters() if p.grad is not None]
    return float(torch.stack(sq).sum().sqrt()) if sq else 0.0


def computes_grad_norm(engine: Any) -> bool:
    """True when DeepSpeed's optimizer records the global gradient norm itself (ZeRO >= 1, bf16, fp16)."""
    return bool(engine.zero_optimization() or engine.bfloat16_enabled() or engine.fp16_enabled())
