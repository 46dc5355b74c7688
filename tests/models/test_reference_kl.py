"""The trainer's KL to a reference policy and its recomputed old log-probs (backends/reference.py), on the
tiny model: the loss against the formula written out here, the statistics of a one-step call against
values computed by hand from the two models, pi_old recomputed = pi_old given exactly, and resume."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import pytest

from sgsbatch.backends.trainer import (
    Example,
    TrainingInterrupted,
    TrainSettings,
    TrainStep,
    batch_loss,
    completion_logprobs,
    train,
)


def _model(d: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32)


def _logp(model: Any, ex: Example) -> Any:
    """log p(completion token | prefix), written out independently of the trainer."""
    import torch

    ids = torch.tensor([list(ex.prompt_ids) + list(ex.completion_ids)])
    logits = model(input_ids=ids).logits[0]
    n = len(ex.prompt_ids)
    return torch.stack([logits[n - 1 + t, tok] - torch.logsumexp(logits[n - 1 + t], 0)
                        for t, tok in enumerate(ex.completion_ids)])


def _examples() -> list[Example]:
    """2 groups of 2, advantages +-1 and +-0.5; the sampler's logprobs far from the policy's (ratios >> 1)."""
    rows = [([0, 4, 17, 33, 5, 77], [120, 55, 1]), ([0, 4, 9, 5, 77], [300, 12, 88, 1]),
            ([0, 4, 250, 251, 5, 77], [40, 1]), ([0, 4, 61, 5, 77], [7, 7, 90, 1])]
    return [Example(p, c, a, group=i // 2, sampler_logprobs=[-9.0 + 0.3 * (t % 2) for t in range(len(c))])
            for i, ((p, c), a) in enumerate(zip(rows, [1.0, -1.0, 0.5, -0.5], strict=True))]


@pytest.fixture(scope="module")
def ref_dir(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reference policy that differs from the tiny model: its weights plus seeded noise."""
    import torch

    model = _model(tiny_dir)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    out = tmp_path_factory.mktemp("ref") / "model"
    model.save_pretrained(out)
    return out


def _digest(d: Path) -> str:
    return hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest()


def test_grpo_loss_with_kl_through_the_model_matches_the_formula(tiny_dir: Path, ref_dir: Path) -> None:
    """DeepSeekMath eq. (3): 1/N sum_i 1/T_i sum_t [-min(r A, clip(r) A) + beta (exp(ref - logp) - (ref -
    logp) - 1)], computed here from the two models' logprobs; value and gradient."""
    import torch

    model, ref = _model(tiny_dir), _model(ref_dir)
    ex = _examples()
    with torch.no_grad():
        for e in ex:
            e.ref_logprobs = _logp(ref, e).numpy()
    beta = 0.3
    settings = TrainSettings(objective="grpo", kl_beta=beta)
    ours = batch_loss(model, ex, "grpo", settings=settings)
    hand: Any = 0.0
    for e in ex:
        logp = _logp(model, e)
        r = torch.exp(logp - torch.tensor(e.sampler_logprobs))
        surrogate = -torch.minimum(r * e.weight, r.clamp(0.8, 1.2) * e.weight)
        d = torch.tensor(e.ref_logprobs) - logp
        hand = hand + (surrogate + beta * (torch.exp(d) - d - 1)).mean() / len(ex)
    assert torch.allclose(ours, hand, rtol=1e-5, atol=1e-7)
    model.zero_grad()
    ours.backward()
    g1 = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    hand.backward()
    for a, b in zip(g1, [p.grad for p in model.parameters()], strict=True):
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-6)


def test_one_step_records_the_reference_kl_of_the_starting_policy(tiny_dir: Path, ref_dir: Path,
                                                                   tmp_path: Path) -> None:
    """One optimizer step: ref_kl (TrainResult and the step's TrainStep) = the mean over tokens of k3 between
    the starting policy and the reference, computed by hand; an advantage-0 sample now runs (its KL term)."""
    import torch

    ex = _examples() + [Example([0, 4, 12, 5, 77], [31, 1], 0.0, group=9, sampler_logprobs=[-9.0, -9.0])]
    model, ref = _model(tiny_dir), _model(ref_dir)
    with torch.no_grad():
        d = torch.cat([_logp(ref, e) - _logp(model, e) for e in ex])
    want = float((torch.exp(d) - d - 1).mean())
    steps: list[TrainStep] = []
    settings = TrainSettings(lr=1e-3, batch_size=8, objective="grpo", threads=1, kl_beta=0.04,
                             kl_reference=str(ref_dir))
    res = train(tiny_dir, tmp_path / "o", ex, settings, state_dir=tmp_path / "s", on_step=steps.append)
    assert res.steps == 1 and res.tokens == sum(len(e.completion_ids) for e in ex)
    assert res.ref_kl == pytest.approx(want, rel=1e-4) and want > 1e-4
    assert steps[0].ref_kl == pytest.approx(res.ref_kl, rel=1e-9)
    with pytest.raises(ValueError, match="kl_reference"):
        train(tiny_dir, tmp_path / "o2", ex, TrainSettings(objective="grpo", kl_beta=0.04, threads=1),
              state_dir=tmp_path / "s2")


def test_recomputed_old_logprobs_are_the_starting_policys(tiny_dir: Path, tmp_path: Path) -> None:
    """old_logprobs = "recompute": the ratio is exactly 1 at the first step (no clipping, s = 1, sampler KL 0),
    and training ends bitwise where training on the starting policy's logprobs (the trainer's
    completion_logprobs: the same arithmetic) given as the sampler's ends; the sampler's logprobs are not
    needed. With the reference = the starting weights (round 0) one pass gives
    both: the KL is 0 at the first step."""
    import torch

    model = _model(tiny_dir)
    ex = _examples()
    settings = TrainSettings(lr=1e-3, batch_size=8, objective="dapo", threads=1, clip_high=0.28,
                             old_logprobs="recompute")
    no_lp = [Example(e.prompt_ids, e.completion_ids, e.weight, e.group) for e in ex]
    res = train(tiny_dir, tmp_path / "r", no_lp, settings, state_dir=tmp_path / "sr")
    assert (res.clip_fraction, res.sampler_kl) == (0.0, 0.0)
    assert res.seq_ratio_mean == pytest.approx(1.0, abs=1e-7) and res.seq_ratio_std == pytest.approx(0.0, abs=1e-7)
    with torch.no_grad():
        given = [Example(e.prompt_ids, e.completion_ids, e.weight, e.group,
                         completion_logprobs(model, e.prompt_ids, e.completion_ids).numpy()) for e in ex]
    plain = train(tiny_dir, tmp_path / "g", given, TrainSettings(**{**settings.__dict__, "old_logprobs": "sampler"}),
                  state_dir=tmp_path / "sg")
    assert plain == res
    assert _digest(tmp_path / "r") == _digest(tmp_path / "g") != _digest(tiny_dir)
    shared = TrainSettings(**{**settings.__dict__, "kl_beta": 0.04, "kl_reference": str(tiny_dir)})
    res0 = train(tiny_dir, tmp_path / "k", ex, shared, state_dir=tmp_path / "sk")
    assert res0.ref_kl == pytest.approx(0.0, abs=1e-9)


def test_resume_with_kl_and_recomputed_old_logprobs_is_bitwise_identical(tiny_dir: Path, ref_dir: Path,
                                                                          tmp_path: Path) -> None:
    """Interrupted after every optimizer step and resumed: the old log-probs are recomputed from the starting
    weights on disk (not the checkpoint's) and the reference's again, so the weights end identical."""
    ex = _examples() + [Example([0, 4, 19, 5, 77], [64, 65, 1], 0.25, group=2, sampler_logprobs=[-9.0] * 3),
                        Example([0, 4, 21, 5, 77], [66, 1], -0.25, group=2, sampler_logprobs=[-9.0] * 2)]
    settings = TrainSettings(lr=1e-3, batch_size=2, objective="grpo", threads=1, seed=3, kl_beta=0.1,
                             kl_reference=str(ref_dir), old_logprobs="recompute")
    plain = train(tiny_dir, tmp_path / "a", ex, settings, state_dir=tmp_path / "sa")
    assert plain.steps == 3 and plain.ref_kl > 0
    interruptions = 0
    while True:
        try:
            resumed = train(tiny_dir, tmp_path / "b", ex, settings, state_dir=tmp_path / "sb", should_stop=lambda: True)
            break
        except TrainingInterrupted:
            interruptions += 1
            assert interruptions < 10
    assert interruptions == plain.steps - 1
    assert resumed == plain
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b") != _digest(tiny_dir)
    assert math.isfinite(plain.mean_loss)
