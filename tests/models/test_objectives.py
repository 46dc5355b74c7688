"""The GRPO family's losses (backends/objectives.py) against worked cases written out from the papers.

One optimizer step of 2 groups x 2 samples: a (2 tokens, A = +1) and b (3 tokens, A = -1), c (2
tokens, A = +0.5) and d (1 token, A = -0.5), N = 4 sequences, 8 tokens. Token ratios r = pi / pi_old
are set through the logprobs: logp = old + log r. Per token l = -min(r A, clip(r, 1 - eps_low,
1 + eps_high) A). Each loss value and its gradient d loss / d logp are written out by hand; the
trainer's path (`example_loss` on logits) gives the same loss and the statistics (clip sides, KL,
sequence ratio) counted by hand.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from sgsbatch.backends.batches import Example, TrainSettings, loss_scales
from sgsbatch.backends.objectives import STATS, example_loss, result_stats, step_loss

OLD = -1.0  # the sampler's logprob of every token
RATIOS = [[1.1, 1.3], [0.9, 0.7, 1.0], [1.25, 0.95], [0.6]]
ADV = [1.0, -1.0, 0.5, -0.5]
# GSPO: token log-ratios whose means are 3e-4 (s inside [1 - 3e-4, 1 + 4e-4]), -1e-3 (below), 1e-3 (above), 0
GSPO_LOGR = [[2e-4, 4e-4], [-1e-3, 0.0, -2e-3], [1e-3, 1e-3], [0.0]]


def _case(logr: list[list[float]]) -> tuple[list[Any], list[Example]]:
    import torch

    logps = [torch.tensor([OLD + x for x in row], dtype=torch.float64, requires_grad=True) for row in logr]
    examples = [Example([1], [5] * len(row), a, group=i // 2, sampler_logprobs=[OLD] * len(row))
                for i, (row, a) in enumerate(zip(logr, ADV, strict=True))]
    return logps, examples


def _logr(ratios: list[list[float]]) -> list[list[float]]:
    return [[math.log(r) for r in row] for row in ratios]


def _grads(loss: Any, logps: list[Any]) -> list[list[float]]:
    loss.backward()
    return [[float(g) for g in x.grad] for x in logps]


# (objective, clip range, loss, d loss / d logp per sequence); a clipped token has gradient 0,
# any other -A r times the step's factor (grpo 1/(N T_i), dr_grpo 1/(N L) with L = 4, dapo 1/8)
CASES = [
    # a: l = -1.1, -1.2 (1.3 clipped high); b: 0.9, 0.8 (0.7 clipped low), 1.0; c: -0.6 (1.25 clipped high),
    # -0.475; d: 0.4 (0.6 clipped low). GRPO = 1/N sum_i mean_t l = (-1.15 + 0.9 - 0.5375 + 0.4) / 4
    ("grpo", (0.2, 0.2), -0.096875, [[-1.1 / 8, 0.0], [0.9 / 12, 0.0, 1.0 / 12], [0.0, -0.475 / 8], [0.0]]),
    # Dr. GRPO = 1/(N L) sum_i sum_t l = (-2.3 + 2.7 - 1.075 + 0.4) / (4 * 4)
    ("dr_grpo", (0.2, 0.2), -0.275 / 16, [[-1.1 / 16, 0.0], [0.9 / 16, 0.0, 1.0 / 16], [0.0, -0.475 / 16], [0.0]]),
    # DAPO, clip-higher 0.28: a's 1.3 still clipped (-1.28), c's 1.25 no longer (-0.625);
    # token-level = (-2.38 + 2.7 - 1.1 + 0.4) / 8 tokens
    ("dapo", (0.2, 0.28), -0.38 / 8,
     [[-1.1 / 8, 0.0], [0.9 / 8, 0.0, 1.0 / 8], [-0.625 / 8, -0.475 / 8], [0.0]]),
]


@pytest.mark.parametrize(("objective", "clip", "loss", "grads"), CASES)
def test_token_ratio_losses_match_the_worked_case(objective: str, clip: tuple[float, float], loss: float,
                                                  grads: list[list[float]]) -> None:
    logps, examples = _case(_logr(RATIOS))
    settings = TrainSettings(objective=objective, clip_low=clip[0], clip_high=clip[1], max_tokens=4)
    got = step_loss(logps, examples, settings)
    assert float(got.detach()) == pytest.approx(loss, rel=1e-12)
    for g, want in zip(_grads(got, logps), grads, strict=True):
        assert g == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_gspo_clips_the_length_normalised_sequence_ratio() -> None:
    """s_i = exp(mean_t log r) (the geometric mean of the token ratios); clip 3e-4 / 4e-4 (GSPO §5.1).
    a: s = e^3e-4 inside, l = -s; b: s = e^-1e-3 < 1 - 3e-4, A < 0: l = 1 - 3e-4 (clipped, no gradient);
    c: s = e^1e-3 > 1 + 4e-4, A > 0: l = -0.5 (1 + 4e-4) (clipped); d: s = 1, l = 0.5. Loss = mean over
    sequences; the gradient of an unclipped one is -A s / (N T_i) on each of its tokens."""
    logps, examples = _case(GSPO_LOGR)
    settings = TrainSettings(objective="gspo", clip_low=3e-4, clip_high=4e-4)
    got = step_loss(logps, examples, settings)
    s_a = math.exp(3e-4)
    assert float(got.detach()) == pytest.approx((-s_a + (1 - 3e-4) - 0.5 * (1 + 4e-4) + 0.5) / 4, rel=1e-12)
    assert _grads(got, logps) == [pytest.approx([-s_a / 8] * 2, rel=1e-12), [0.0] * 3, [0.0] * 2,
                                  pytest.approx([0.5 / 4], rel=1e-12)]


def test_step_factors_normalise_over_sequences_or_tokens() -> None:
    """grpo, dr_grpo, gspo: 1/N per sequence (A sits inside the term); dapo: 1 / the step's tokens."""
    _, examples = _case(_logr(RATIOS))
    for objective in ("grpo", "dr_grpo", "gspo"):
        assert loss_scales(examples, [0, 1, 2, 3], objective) == dict.fromkeys(range(4), 0.25)
    assert loss_scales(examples, [0, 1, 2, 3], "dapo") == dict.fromkeys(range(4), 1 / 8)


def _logits(logp: list[float]) -> tuple[Any, Any]:
    """Two-token vocabulary rows whose log-softmax at token 0 is `logp` (x - log(e^x + 1) = p)."""
    import torch

    rows = [[p - math.log1p(-math.exp(p)), 0.0] for p in logp]
    return torch.tensor(rows, dtype=torch.float64, requires_grad=True), torch.zeros(len(logp), 1, dtype=torch.long)


@pytest.mark.parametrize(("objective", "clip", "logr", "sides"), [
    # GRPO tokens clipped low: b's 0.7 and d's 0.6 (A < 0); high: a's 1.3 and c's 1.25 (A > 0)
    ("grpo", (0.2, 0.2), None, (2, 2)),
    # DAPO's 1 + 0.28: only a's 1.3 is clipped high
    ("dapo", (0.2, 0.28), None, (2, 1)),
    # GSPO: a clipped sequence counts all its tokens: b (3) low, c (2) high
    ("gspo", (3e-4, 4e-4), GSPO_LOGR, (3, 2)),
])
def test_trainer_path_gives_the_loss_and_counts_the_clip_sides(objective: str, clip: tuple[float, float],
                                                              logr: list[list[float]] | None,
                                                              sides: tuple[int, int]) -> None:
    import torch

    logr = logr or _logr(RATIOS)
    logps, examples = _case(logr)
    settings = TrainSettings(objective=objective, clip_low=clip[0], clip_high=clip[1])
    scales = loss_scales(examples, [0, 1, 2, 3], objective)
    total: Any = 0.0
    stats = [0.0] * len(STATS)
    for i, (row, ex) in enumerate(zip(logr, examples, strict=True)):
        logits, target = _logits([OLD + x for x in row])
        term, st = example_loss(logits, target, ex, scales[i], settings)
        total = total + term
        stats = [a + b for a, b in zip(stats, st, strict=True)]
    assert float(total.detach()) == pytest.approx(float(step_loss(logps, examples, settings).detach()), rel=1e-9)
    res = result_stats(stats)
    flat = [x for row in logr for x in row]
    assert res["tokens"] == 8
    assert (res["clip_low_fraction"], res["clip_high_fraction"]) == (sides[0] / 8, sides[1] / 8)
    assert res["clip_fraction"] == (sides[0] + sides[1]) / 8
    # KL(sampler || policy) per token: mean of r - 1 - log r (k3); s per sequence: exp(mean_t log r)
    assert res["sampler_kl"] == pytest.approx(sum(math.exp(x) - 1 - x for x in flat) / 8, rel=1e-6)
    seq = [math.exp(sum(row) / len(row)) for row in logr]
    mean = sum(seq) / 4
    assert res["seq_ratio_mean"] == pytest.approx(mean, rel=1e-9)
    assert res["seq_ratio_std"] == pytest.approx(math.sqrt(sum((s - mean) ** 2 for s in seq) / 4), rel=1e-4)
    assert isinstance(total, torch.Tensor)


def test_a_family_objective_needs_the_sampler_logprobs() -> None:
    logps, examples = _case(_logr(RATIOS))
    examples[1].sampler_logprobs = None
    with pytest.raises(ValueError, match="sampler_logprobs"):
        step_loss(logps, examples, TrainSettings(objective="grpo"))


# --- the KL to a reference policy (DeepSeekMath arXiv 2402.03300 eq. (3)-(4); TRL GRPOTrainer)

def test_k3_and_k1_values_and_gradients_match_the_formula() -> None:
    """k3 = exp(ref - logp) - (ref - logp) - 1 >= 0, d k3 / d logp = 1 - exp(ref - logp); k1 = logp - ref,
    d k1 / d logp = 1 (hand-made logprobs; values from math.exp, not torch)."""
    import torch

    from sgsbatch.backends.objectives import kl_per_token

    logp_v, ref_v = [-1.0, -2.0, -0.5, -3.0], [-1.2, -1.5, -0.5, -0.1]
    logp = torch.tensor(logp_v, dtype=torch.float64, requires_grad=True)
    ref = torch.tensor(ref_v, dtype=torch.float64)
    k3 = kl_per_token(logp, ref, "k3")
    want = [math.exp(r - p) - (r - p) - 1 for p, r in zip(logp_v, ref_v, strict=True)]
    assert [float(x) for x in k3.detach()] == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert want[2] == 0.0 and min(want) >= 0.0
    assert want[0] == pytest.approx(0.01873075307798185, rel=1e-12)  # e^-0.2 + 0.2 - 1
    k3.sum().backward()
    assert logp.grad is not None
    assert [float(g) for g in logp.grad] == pytest.approx([1 - math.exp(r - p) for p, r in zip(logp_v, ref_v, strict=True)],
                                                          rel=1e-12, abs=1e-15)
    logp.grad = None
    k1 = kl_per_token(logp, ref, "k1")
    assert [float(x) for x in k1.detach()] == pytest.approx([p - r for p, r in zip(logp_v, ref_v, strict=True)], rel=1e-12)
    k1.sum().backward()
    assert [float(g) for g in logp.grad] == [1.0] * 4
    with pytest.raises(ValueError, match="k3, k1"):
        kl_per_token(logp, ref, "k2")
    # solver.kl_clamp (verl's low_var_kl clamp of 10): e^3 - 3 - 1 = 16.09 is clamped, its gradient 0
    far = torch.tensor([0.0, -1.0], dtype=torch.float64, requires_grad=True)
    clamped = kl_per_token(far, torch.tensor([3.0, -1.2], dtype=torch.float64), "k3", clamp=10.0)
    assert [float(x) for x in clamped.detach()] == pytest.approx([10.0, math.exp(-0.2) + 0.2 - 1], rel=1e-12)
    clamped.sum().backward()
    assert far.grad is not None and [float(g) for g in far.grad] == pytest.approx([0.0, 1 - math.exp(-0.2)], rel=1e-12)


REF_SHIFT = [[0.3, -0.2], [0.1, 0.0, -0.4], [0.25, 0.05], [-0.6]]  # ref - old per token (policy = old + log r)
BETA = 0.04


@pytest.mark.parametrize(("objective", "clip", "loss", "grads"), CASES)
def test_the_kl_term_sits_inside_each_objectives_token_aggregate(objective: str, clip: tuple[float, float],
                                                                  loss: float, grads: list[list[float]]) -> None:
    """Loss = the worked case above + beta * the KL aggregated as the objective aggregates its token losses
    (TRL: per_token_loss + beta * per_token_kl): grpo 1/N sum_i mean_t k, dr_grpo 1/(N L) sum k, dapo 1/8
    sum k; gradient + beta * factor * (1 - exp(ref - logp)) on every token (clipped or not)."""
    logr = _logr(RATIOS)
    logps, examples = _case(logr)
    for ex, shift in zip(examples, REF_SHIFT, strict=True):
        ex.ref_logprobs = [OLD + s for s in shift]
    lengths = [len(row) for row in logr]
    factor = {"grpo": [1 / (4 * n) for n in lengths], "dr_grpo": [1 / 16] * 4, "dapo": [1 / 8] * 4}[objective]
    d = [[s - x for s, x in zip(shift, row, strict=True)] for shift, row in zip(REF_SHIFT, logr, strict=True)]
    kl = sum(f * sum(math.exp(v) - v - 1 for v in row) for f, row in zip(factor, d, strict=True))
    settings = TrainSettings(objective=objective, clip_low=clip[0], clip_high=clip[1], max_tokens=4, kl_beta=BETA)
    got = step_loss(logps, examples, settings)
    assert float(got.detach()) == pytest.approx(loss + BETA * kl, rel=1e-12)
    want = [[g + BETA * f * (1 - math.exp(v)) for g, v in zip(grow, drow, strict=True)]
            for grow, drow, f in zip(grads, d, factor, strict=True)]
    for g, w in zip(_grads(got, logps), want, strict=True):
        assert g == pytest.approx(w, rel=1e-12, abs=1e-15)


def test_gspo_adds_the_token_mean_kl_to_its_sequence_term() -> None:
    """GSPO (TRL importance_sampling_level="sequence", loss_type="grpo"): the sequence term is broadcast to
    its tokens, beta * k added per token, then the token mean: -min(s A, clip(s) A) + beta mean_t k."""
    logps, examples = _case(GSPO_LOGR)
    for ex, shift in zip(examples, REF_SHIFT, strict=True):
        ex.ref_logprobs = [OLD + s for s in shift]
    plain = float(step_loss(logps, examples, TrainSettings(objective="gspo", clip_low=3e-4, clip_high=4e-4)).detach())
    settings = TrainSettings(objective="gspo", clip_low=3e-4, clip_high=4e-4, kl_beta=BETA, kl_estimator="k1")
    k1 = sum(sum(x - s for s, x in zip(shift, row, strict=True)) / len(row)
             for shift, row in zip(REF_SHIFT, GSPO_LOGR, strict=True)) / 4
    assert float(step_loss(logps, examples, settings).detach()) == pytest.approx(plain + BETA * k1, rel=1e-12)


def test_the_trainer_path_counts_the_reference_kl_per_token() -> None:
    """example_loss' statistic ref_kl = sum_t k3; result_stats divides by the tokens; a KL term needs
    ref_logprobs."""
    logr = _logr(RATIOS)
    _, examples = _case(logr)
    for ex, shift in zip(examples, REF_SHIFT, strict=True):
        ex.ref_logprobs = [OLD + s for s in shift]
    settings = TrainSettings(objective="dapo", clip_low=0.2, clip_high=0.28, kl_beta=BETA)
    stats = [0.0] * len(STATS)
    for row, ex in zip(logr, examples, strict=True):
        logits, target = _logits([OLD + x for x in row])
        stats = [a + b for a, b in zip(stats, example_loss(logits, target, ex, 1.0, settings)[1], strict=True)]
    flat = [s - x for shift, row in zip(REF_SHIFT, logr, strict=True) for s, x in zip(shift, row, strict=True)]
    assert result_stats(stats)["ref_kl"] == pytest.approx(sum(math.exp(v) - v - 1 for v in flat) / 8, rel=1e-6)
    logps, _ = _case(logr)
    examples[0].ref_logprobs = None
    with pytest.raises(ValueError, match="ref_logprobs"):
        step_loss(logps[:1], examples[:1], settings)
