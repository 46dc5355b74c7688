r"""The Solver's training objectives: one pure torch function per objective, and their statistics.

Each function gives one sequence's loss term from its per-token log-probabilities under the
current policy (`logp`, with gradient) and under the old policy (`old`: `Example.sampler_logprobs`,
the logprobs the sampler recorded with the sample, or with `train.old_logprobs = "recompute"` the
trainer's own under the weights it starts the round from, filled in by backends/reference.py);
`batches.loss_scales` gives the factor c_x of each term, so an optimizer step's loss is
sum_x c_x * term_x over the step's sequences (whole groups; a step is the "batch" that TRL and verl
normalise over). Notation: a group is the G samples y_i of one problem, T_i = |y_i|,
A_i the sample's advantage (round/examples.py), r_{i,t} = exp(logp - old) the token ratio,
clip(r) = clamp(r, 1 - eps_low, 1 + eps_high) (`solver.clip_low`, `solver.clip_high`),
l_{i,t} = -min(r_{i,t} A_i, clip(r_{i,t}) A_i), N the step's sequences, L = `solver.max_tokens`.

- reinforce (REINFORCE-1/2, the reference's): sum_x weight_x sum_t NLL_{x,t} / sum_x T_x.
- cispo: mean over groups of A_g sum_{x,t} w_{x,t} NLL_{x,t} / T_g, w = clamp(r, 0, cispo_clip_max)
  detached (MiniMax-M1, arXiv 2506.13585; TRL loss_type="cispo").
- grpo: 1/N sum_i 1/T_i sum_t l_{i,t}. DeepSeekMath arXiv 2402.03300 §4.1 (its KL below); TRL
  grpo_trainer.py `_compute_loss` loss_type="grpo"; verl core_algos.py compute_policy_loss_vanilla
  with agg_loss "seq-mean-token-mean".
- dr_grpo: 1/(N L) sum_i sum_t l_{i,t} (no 1/T_i; no std in A). Dr. GRPO arXiv 2503.20783 §3.2;
  TRL loss_type="dr_grpo" (/ (B * max_completion_length)); verl "seq-mean-token-sum-norm".
- dapo: 1/(sum_i T_i) sum_i sum_t l_{i,t} (token-level), eps_high > eps_low (clip-higher). DAPO
  arXiv 2503.14476 §3.1 and §3.3; TRL loss_type="dapo"; verl "token-mean" with clip_ratio_low/high.
- gspo: s_i = exp(1/T_i sum_t (logp - old)) = (pi(y_i) / pi_old(y_i))^(1/T_i), the length-normalised
  sequence ratio (the geometric mean of the token ratios); 1/N sum_i -min(s_i A_i, clip(s_i) A_i).
  GSPO arXiv 2507.18071 eq. (5) and its s_i; verl compute_policy_loss_gspo ("seq-mean-token-mean"); TRL
  importance_sampling_level="sequence" with loss_type="grpo".

The KL to a reference policy (the GRPO family, `solver.kl_beta` > 0; DeepSeekMath arXiv 2402.03300
eq. (3)-(4)): per token k_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1 ("k3", Schulman's unbiased
estimator, DeepSeekMath eq. (4), TRL GRPOTrainer, verl kl_penalty "low_var_kl") or k_t = logp_t - ref_t
("k1", verl "kl"), added to each token's loss inside the objective's own token aggregate, as TRL does
(`per_token_loss = per_token_loss + beta * per_token_kl`): grpo and gspo 1/T_i sum_t (l + beta k),
dr_grpo sum_t (l + beta k) / L, dapo sum_t (l + beta k) over the step's tokens. `ref` are the reference
policy's logprobs (`Example.ref_logprobs`, backends/reference.py), under the same sampling distribution
as the ratio; verl's clamp of low_var_kl to [-10, 10] is not applied (TRL does not).

Not covered: the KL for reinforce and cispo (refused by the config), verl's dual-clip (clip_ratio_c; not in the papers or TRL), more
than one pass over a round's samples (TRL num_iterations; the ratio moves off 1 as the epoch's
optimizer steps update the policy, from vLLM's numerics at the first step).

Statistics per example (`STATS`, summed over the ranks and steps; `result_stats` turns them into
TrainResult fields): completion tokens, entropy sum, clipped tokens (CISPO: w clamped; GRPO family:
low + high), tokens clipped low (r < 1 - eps_low with A < 0) and high (r > 1 + eps_high with A > 0)
as TRL counts them (GSPO: its sequence ratio, counted for each of its tokens), the sampler KL
sum_t (r - 1 - log r) (Schulman's k3 estimate of KL(sampler || policy) on the sampler's tokens),
sequences, the sums of s and s^2, and the reference KL sum_t k_t (0 without a KL term).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from sgsbatch.backends.batches import GRPO_FAMILY, RATIO_OBJECTIVES, Example, TrainSettings, loss_scales

STATS = ("tokens", "entropy", "clipped", "clipped_low", "clipped_high", "sampler_kl", "sequences", "seq_ratio",
         "seq_ratio_sq", "ref_kl")
KL_ESTIMATORS = ("k3", "k1")


def _old(example: Example, logp: Any) -> Any:
    """The sampler's logprobs of `example` as a tensor like `logp`."""
    import torch

    if example.sampler_logprobs is None or len(example.sampler_logprobs) != len(example.completion_ids):
        raise ValueError("this objective needs sampler_logprobs, one per completion token")
    return torch.tensor(example.sampler_logprobs, dtype=logp.dtype, device=logp.device)


def _ref(example: Example, logp: Any) -> Any:
    """The reference policy's logprobs of `example` as a tensor like `logp`."""
    import torch

    if example.ref_logprobs is None or len(example.ref_logprobs) != len(example.completion_ids):
        raise ValueError("a KL term (kl_beta > 0) needs ref_logprobs, one per completion token")
    return torch.tensor(example.ref_logprobs, dtype=logp.dtype, device=logp.device)


def kl_per_token(logp: Any, ref: Any, estimator: str, clamp: float = 0.0) -> Any:
    """k3: exp(ref - logp) - (ref - logp) - 1 (DeepSeekMath eq. (4); TRL); k1: logp - ref (verl "kl").
    Gradient through `logp`. `clamp` > 0: each token's estimate clamped to [-clamp, clamp], no gradient
    outside it (verl's `kl_penalty` clamps "low_var_kl" to [-10, 10]); 0: none (DeepSeekMath, TRL)."""
    import torch

    if estimator == "k3":
        d = ref - logp
        k = torch.exp(d) - d - 1.0
    elif estimator == "k1":
        k = logp - ref
    else:
        raise ValueError(f"unknown KL estimator {estimator!r}; valid: {', '.join(KL_ESTIMATORS)}")
    return torch.clamp(k, min=-clamp, max=clamp) if clamp > 0 else k


def kl_term(kl: Any, objective: str, max_tokens: int) -> Any:
    """The per-token KL aggregated as `objective` aggregates its token losses (the step's factor
    `loss_scales` is applied outside): mean over the sequence (grpo, gspo), sum / L (dr_grpo), sum (dapo)."""
    if objective in ("grpo", "gspo"):
        return kl.mean()
    if objective == "dr_grpo":
        return kl.sum() / max_tokens
    if objective == "dapo":
        return kl.sum()
    raise ValueError(f"a KL term is for the GRPO family only ({', '.join(GRPO_FAMILY)}), not {objective!r}")


def importance_ratio(current: Any, example: Example) -> Any:
    """p_current / p_sampler per completion token, detached and not clamped (CISPO's weight)."""
    import torch

    return torch.exp(current.detach() - _old(example, current))


def reinforce_loss(logp: Any) -> Any:
    """sum_t NLL_t (the example's weight is in its scale)."""
    return -logp.sum()


def cispo_loss(logp: Any, ratio: Any, clip_max: float) -> Any:
    """sum_t w_t NLL_t with w = clamp(ratio, 0, clip_max), `ratio` detached (A is in the scale)."""
    return (ratio.clamp(0.0, clip_max) * -logp).sum()


def clipped_token_losses(ratio: Any, adv: float, clip_low: float, clip_high: float) -> Any:
    """l_t = -min(r_t A, clamp(r_t, 1 - clip_low, 1 + clip_high) A) (PPO's surrogate, arXiv 1707.06347)."""
    import torch

    return -torch.minimum(ratio * adv, ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv)


def clip_sides(ratio: Any, adv: float, clip_low: float, clip_high: float) -> tuple[Any, Any]:
    """Where the clipped side of `clipped_token_losses` is taken (its gradient is 0), as TRL counts it:
    (r < 1 - clip_low and A < 0, r > 1 + clip_high and A > 0)."""
    return (ratio < 1.0 - clip_low) & (adv < 0), (ratio > 1.0 + clip_high) & (adv > 0)


def grpo_loss(logp: Any, old: Any, adv: float, clip_low: float, clip_high: float) -> Any:
    """GRPO's sequence term 1/T sum_t l_t (the step averages the terms over its sequences)."""
    import torch

    return clipped_token_losses(torch.exp(logp - old), adv, clip_low, clip_high).mean()


def dr_grpo_loss(logp: Any, old: Any, adv: float, clip_low: float, clip_high: float, max_tokens: int) -> Any:
    """Dr. GRPO's sequence term sum_t l_t / L, L the generation budget (the step averages over sequences)."""
    import torch

    return clipped_token_losses(torch.exp(logp - old), adv, clip_low, clip_high).sum() / max_tokens


def dapo_loss(logp: Any, old: Any, adv: float, clip_low: float, clip_high: float) -> Any:
    """DAPO's sequence term sum_t l_t (the step divides by all its completion tokens)."""
    import torch

    return clipped_token_losses(torch.exp(logp - old), adv, clip_low, clip_high).sum()


def sequence_ratio(logp: Any, old: Any) -> Any:
    """GSPO's s = exp(mean_t (logp - old)), with gradient s * mean_t grad logp."""
    import torch

    return torch.exp((logp - old).mean())


def gspo_loss(logp: Any, old: Any, adv: float, clip_low: float, clip_high: float) -> Any:
    """GSPO's sequence term -min(s A, clip(s) A) (the step averages the terms over its sequences)."""
    return clipped_token_losses(sequence_ratio(logp, old), adv, clip_low, clip_high)


def family_loss(objective: str, logp: Any, old: Any, adv: float, settings: TrainSettings) -> Any:
    """The GRPO family's sequence term for `objective` under `settings`' clip range."""
    low, high = settings.clip_low, settings.clip_high
    if objective == "grpo":
        return grpo_loss(logp, old, adv, low, high)
    if objective == "dr_grpo":
        return dr_grpo_loss(logp, old, adv, low, high, settings.max_tokens)
    if objective == "dapo":
        return dapo_loss(logp, old, adv, low, high)
    if objective == "gspo":
        return gspo_loss(logp, old, adv, low, high)
    raise ValueError(f"not an objective of the GRPO family: {objective!r}; valid: {', '.join(GRPO_FAMILY)}")


def sequence_term(logp: Any, logp_ratio: Any, ex: Example, settings: TrainSettings) -> Any:
    """The example's unscaled term under `settings.objective`: `logp` are the policy's plain logprobs
    (the NLL of reinforce and cispo), `logp_ratio` those under the sampling distribution (the ratio)."""
    if settings.objective == "reinforce":
        return reinforce_loss(logp)
    if settings.objective == "cispo":
        return cispo_loss(logp, importance_ratio(logp_ratio, ex), settings.cispo_clip_max)
    term = family_loss(settings.objective, logp_ratio, _old(ex, logp_ratio), ex.weight, settings)
    if settings.kl_beta > 0:
        kl = kl_per_token(logp_ratio, _ref(ex, logp_ratio), settings.kl_estimator, settings.kl_clamp)
        term = term + settings.kl_beta * kl_term(kl, settings.objective, settings.max_tokens)
    return term


def _ratio_stats(objective: str, logp_ratio: Any, ex: Example, settings: TrainSettings) -> list[float]:
    """[clipped, clipped low, clipped high, sampler KL sum, 1, s, s^2] of one example (no gradient; one
    device sync)."""
    import torch

    logr = logp_ratio.detach() - _old(ex, logp_ratio)
    r = torch.exp(logr)
    s = torch.exp(logr.mean())
    zero = torch.zeros((), dtype=r.dtype, device=r.device)
    if objective == "cispo":
        low = high = zero
        clipped = (r > settings.cispo_clip_max).sum().to(r.dtype)
    else:
        # GSPO clips its sequence ratio: a clipped sequence counts all its tokens
        ratio = s.expand_as(r) if objective == "gspo" else r
        lo, hi = clip_sides(ratio, ex.weight, settings.clip_low, settings.clip_high)
        low, high = lo.sum().to(r.dtype), hi.sum().to(r.dtype)
        clipped = low + high
    kl = (r - 1.0 - logr).sum()
    out: list[float] = torch.stack([clipped, low, high, kl, zero + 1.0, s, s * s]).tolist()
    return out


def example_loss(logits: Any, target: Any, ex: Example, scale: float, settings: TrainSettings) -> tuple[Any, list[float]]:
    """`scale` * the example's term under `settings.objective`, and its STATS (no gradient).

    `logits` (float32, one row per completion token) and `target` (the completion ids as a column)
    come from the trainer's forward pass. The ratio compares the sampler's logprobs with the current
    policy's under the same sampling distribution (temperature and top-p when they are not 1, i.e.
    `generation.logprobs = "processed"`; the plain log-softmax otherwise).
    """
    import torch

    from sgsbatch.backends.distribution import sampling_logprobs

    objective = settings.objective
    full = torch.log_softmax(logits, dim=-1)
    logp = full.gather(1, target)[:, 0]
    sampling = (settings.sampling_temperature, settings.sampling_top_p)
    with torch.no_grad():
        entropy = float(-(full.exp() * full).sum(-1).sum())
    logp_ratio = logp
    if objective in RATIO_OBJECTIVES and sampling != (1.0, 1.0):
        if objective == "cispo":  # CISPO's weight is detached: no graph needed
            with torch.no_grad():
                logp_ratio = sampling_logprobs(logits.detach(), *sampling).gather(1, target)[:, 0]
        else:
            logp_ratio = sampling_logprobs(logits, *sampling).gather(1, target)[:, 0]
    term = sequence_term(logp, logp_ratio, ex, settings)
    ratio_stats = [0.0] * 7
    ref_kl = 0.0
    if objective in RATIO_OBJECTIVES:
        with torch.no_grad():
            ratio_stats = _ratio_stats(objective, logp_ratio, ex, settings)
            if settings.kl_beta > 0:
                ref_kl = float(kl_per_token(logp_ratio, _ref(ex, logp_ratio), settings.kl_estimator, settings.kl_clamp).sum())
    return scale * term, [float(len(ex.completion_ids)), entropy, *ratio_stats, ref_kl]


def step_loss(logps: Sequence[Any], examples: Sequence[Example], settings: TrainSettings) -> Any:
    """One optimizer step's loss from each example's current per-token logprobs (pure torch: the
    trainer's arithmetic without a model; tests and checks). Plain log-softmax logprobs only."""
    return scaled_sum(examples, settings, lambda i: sequence_term(logps[i], logps[i], examples[i], settings))


def scaled_sum(examples: Sequence[Example], settings: TrainSettings, term: Callable[[int], Any]) -> Any:
    """The loss of one optimizer step holding all of `examples`: sum_i scale_i x term(i), with the
    trainer's per-step scales (batches.loss_scales); tests and checks."""
    step = list(range(len(examples)))
    scales = loss_scales(examples, step, settings.objective, settings.batch_size)
    total: Any = 0.0
    for i in step:
        total = total + scales[i] * term(i)
    return total


def result_stats(stats: Sequence[float]) -> dict[str, Any]:
    """TrainResult's statistics fields from the summed STATS of a training call."""
    v = dict(zip(STATS, stats, strict=True))
    tokens, seqs = int(v["tokens"]), v["sequences"]
    per_token = max(tokens, 1)
    mean = v["seq_ratio"] / seqs if seqs else 0.0
    var = max(v["seq_ratio_sq"] / seqs - mean * mean, 0.0) if seqs else 0.0
    return {"tokens": tokens, "entropy": v["entropy"] / per_token, "clip_fraction": v["clipped"] / per_token,
            "clip_low_fraction": v["clipped_low"] / per_token, "clip_high_fraction": v["clipped_high"] / per_token,
            "sampler_kl": v["sampler_kl"] / per_token, "seq_ratio_mean": mean, "seq_ratio_std": math.sqrt(var),
            "ref_kl": v["ref_kl"] / per_token}
