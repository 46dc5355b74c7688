"""The DeepSpeed trainer: objectives against hand computations, step packing, resume, edge cases."""

from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path
from typing import Any

import pytest

from sgsbatch.backends.trainer import (
    Example,
    TrainingInterrupted,
    TrainSettings,
    batch_loss,
    plan_steps,
    train,
)


def _model(tiny_dir: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32)


def _hand_nll(model: Any, prompt: list[int], completion: list[int]) -> Any:
    """Per-token NLL of `completion`, written out independently of the trainer."""
    import torch

    ids = torch.tensor([prompt + completion])
    logits = model(input_ids=ids).logits[0]
    out = []
    for t, tok in enumerate(completion):
        row = logits[len(prompt) - 1 + t]
        out.append(-(row[tok] - torch.logsumexp(row, dim=0)))
    return torch.stack(out)


def _grads(model: Any, loss: Any) -> list[Any]:
    model.zero_grad()
    loss.backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def _examples(k: int, seed: int = 0) -> list[Example]:
    rng = random.Random(seed)
    return [
        Example([0, 4, *[rng.randrange(10, 400) for _ in range(rng.randrange(2, 6))], 5, 77],
                [rng.randrange(10, 400) for _ in range(rng.randrange(2, 7))] + [1], 1.0)
        for _ in range(k)
    ]


def test_reinforce_gradient_matches_hand(tiny_dir: Path) -> None:
    import torch

    model = _model(tiny_dir)
    ex = _examples(2)
    ex[0].weight, ex[1].weight = 1.0, -0.4
    n0, n1 = _hand_nll(model, ex[0].prompt_ids, ex[0].completion_ids), _hand_nll(model, ex[1].prompt_ids, ex[1].completion_ids)
    hand = (1.0 * n0.sum() - 0.4 * n1.sum()) / (len(n0) + len(n1))
    ours = batch_loss(model, ex, "reinforce")
    assert torch.allclose(ours, hand, atol=1e-5)
    for g1, g2 in zip(_grads(model, ours), _grads(model, hand), strict=True):
        assert torch.allclose(g1, g2, atol=1e-6)


def test_cispo_gradient_matches_hand(tiny_dir: Path) -> None:
    import torch

    model = _model(tiny_dir)
    ex = _examples(4, seed=1)
    rewards = {0: [1.0, 0.0], 1: [0.0, 1.0]}
    offsets = [-3.0, 0.5, 0.0, -0.2]  # logp_train - logp_sampler: w = e^3 is clamped to 4
    nlls = [_hand_nll(model, e.prompt_ids, e.completion_ids) for e in ex]
    hand_groups = []
    for g in (0, 1):
        r = rewards[g]
        mean = sum(r) / 2
        std = math.sqrt(sum((x - mean) ** 2 for x in r) / 2)
        num: Any = 0.0
        tokens = 0
        for j in (0, 1):
            i = 2 * g + j
            ex[i].group = 10 + g
            ex[i].weight = (r[j] - mean) / (std + 1e-6)
            ex[i].sampler_logprobs = [float(-v) - offsets[i] for v in nlls[i].detach()]
            w = min(math.exp(offsets[i]), 4.0)
            num = num + ex[i].weight * w * nlls[i].sum()
            tokens += len(nlls[i])
        hand_groups.append(num / tokens)
    hand = (hand_groups[0] + hand_groups[1]) / 2
    ours = batch_loss(model, ex, "cispo", settings=TrainSettings(objective="cispo", cispo_clip_max=4.0, batch_size=4))
    assert torch.allclose(ours, hand, rtol=1e-4, atol=1e-5)
    # a short last step (2 groups where batch_size 8 holds 4): divided by the reference's fixed
    # groups_per_batch = batch_size // G = 4, not by its own 2 groups (sgs/training/custom_trainers.py)
    short = batch_loss(model, ex, "cispo", settings=TrainSettings(objective="cispo", cispo_clip_max=4.0, batch_size=8))
    assert torch.allclose(short, hand * 2 / 4, rtol=1e-4, atol=1e-5)
    for g1, g2 in zip(_grads(model, ours), _grads(model, hand), strict=True):
        assert torch.allclose(g1, g2, rtol=1e-3, atol=1e-6)


def test_cispo_steps_hold_whole_groups() -> None:
    rng = random.Random(3)
    ex: list[Example] = []
    for g in range(30):
        ex += [Example([1], [2], 0.5, group=g) for _ in range(rng.choice([1, 3, 8, 9]))]
    ex += [Example([1], [2], 0.5) for _ in range(4)]  # no group: each is its own group
    settings = TrainSettings(batch_size=16, objective="cispo", seed=7)
    steps = plan_steps(ex, settings)
    flat = [i for s in steps for i in s]
    assert sorted(flat) == list(range(len(ex)))
    for s in steps:
        groups = {ex[i].group for i in s if ex[i].group is not None}
        for g in groups:
            assert {i for i, e in enumerate(ex) if e.group == g} <= set(s)
        assert len(s) <= 16
    assert steps == plan_steps(ex, settings)
    assert steps != plan_steps(ex, TrainSettings(batch_size=16, objective="cispo", seed=8))
    big = [Example([1], [2], 1.0, group=0) for _ in range(20)]
    assert plan_steps(big, settings) == [list(range(20))]  # an oversized group is a step on its own


def test_reinforce_steps_are_chunks() -> None:
    steps = plan_steps(_examples(10), TrainSettings(batch_size=4, seed=1))
    assert [len(s) for s in steps] == [4, 4, 2]
    assert sorted(i for s in steps for i in s) == list(range(10))
    with pytest.raises(ValueError):
        plan_steps(_examples(2), TrainSettings(objective="ppo"))


def test_first_step_is_adam_on_the_hand_gradient(tiny_dir: Path, tmp_path: Path) -> None:
    """Adam's first update is -lr * g / (|g| + eps): the trainer used the hand gradient."""
    import torch
    from transformers import AutoModelForCausalLM

    ex = _examples(2, seed=4)
    ex[1].weight = 0.5
    model = _model(tiny_dir)
    n0, n1 = (_hand_nll(model, e.prompt_ids, e.completion_ids) for e in ex)
    grads = _grads(model, (n0.sum() + 0.5 * n1.sum()) / (len(n0) + len(n1)))
    lr = 1e-3
    settings = TrainSettings(lr=lr, batch_size=2, grad_clip=1e9, threads=1)
    res = train(tiny_dir, tmp_path / "out", ex, settings, state_dir=tmp_path / "state")
    assert res.steps == 1 and res.sequences == 2 and res.target_tokens == len(n0) + len(n1)
    after = AutoModelForCausalLM.from_pretrained(str(tmp_path / "out"), dtype=torch.float32)
    for p0, p1, g in zip(model.parameters(), after.parameters(), grads, strict=True):
        expect = -lr * g / (g.abs() + 1e-8)
        assert torch.allclose(p1.detach() - p0.detach(), expect, atol=lr * 0.02)


def _digest(d: Path) -> str:
    return hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest()


@pytest.mark.parametrize("objective", ["reinforce", "cispo"])
def test_interrupted_resume_is_bitwise_identical(tiny_dir: Path, tmp_path: Path, objective: str) -> None:
    ex = _examples(7, seed=5)
    for i, e in enumerate(ex):
        e.group, e.weight = i // 2, (-1.0) ** i
        e.sampler_logprobs = [-5.0 - 0.1 * t for t in range(len(e.completion_ids))]
    settings = TrainSettings(lr=1e-3, batch_size=2, objective=objective, threads=1, seed=3)
    plain = train(tiny_dir, tmp_path / "a", ex, settings, state_dir=tmp_path / "sa")
    assert plain.steps >= 3
    interruptions = 0
    while True:
        try:
            resumed = train(tiny_dir, tmp_path / "b", ex, settings, state_dir=tmp_path / "sb",
                            should_stop=lambda: True)
            break
        except TrainingInterrupted:
            interruptions += 1
            assert interruptions < 10
    assert interruptions == plain.steps - 1
    assert resumed == plain
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b") != _digest(tiny_dir)
    assert not any((tmp_path / "sb").glob("step*"))  # checkpoints are cleared at the end
    # a finished out_dir is not trained again
    assert train(tiny_dir, tmp_path / "b", ex, settings, state_dir=tmp_path / "sb") == plain


def test_zero_examples_copies_weights(tiny_dir: Path, tmp_path: Path) -> None:
    res = train(tiny_dir, tmp_path / "out", [], TrainSettings(), state_dir=tmp_path / "state")
    assert res.steps == 0 and res.sequences == 0
    assert _digest(tmp_path / "out") == _digest(tiny_dir)
    assert (tmp_path / "out" / "tokenizer.json").read_bytes() == (tiny_dir / "tokenizer.json").read_bytes()


def test_a_role_with_nothing_to_train_carries_hub_weights(tiny_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 0 of a role without examples starts from a hub id: its cached snapshot is published
    (hard links, no bytes copied) and the next round trains from it; a missing id says what to do."""
    import shutil

    import huggingface_hub.constants as hub

    cache = tmp_path / "hub"
    snap = cache / "models--org--prover" / "snapshots" / ("a" * 40)
    shutil.copytree(tiny_dir, snap)
    (cache / "models--org--prover" / "refs").mkdir()
    (cache / "models--org--prover" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    res = train("org/prover", tmp_path / "r0", [], TrainSettings(), state_dir=tmp_path / "s0")
    assert res.steps == 0 and _digest(tmp_path / "r0") == _digest(tiny_dir)
    assert (tmp_path / "r0" / "model.safetensors").stat().st_ino == (snap / "model.safetensors").resolve().stat().st_ino
    ex = _examples(3)
    trained = train(tmp_path / "r0", tmp_path / "r1", ex, TrainSettings(lr=1e-3, batch_size=4, threads=1),
                    state_dir=tmp_path / "s1")
    assert trained.steps == 1 and _digest(tmp_path / "r1") != _digest(tiny_dir)
    assert _digest(tmp_path / "r0") == _digest(tiny_dir)  # training the next round did not write through a link
    with pytest.raises(FileNotFoundError, match="hf download org/missing"):
        train("org/missing", tmp_path / "r2", [], TrainSettings(), state_dir=tmp_path / "s2")


def test_keep_fp32_master_keeps_fp32_weights_and_exports_bf16(tiny_dir: Path, tmp_path: Path) -> None:
    """train.keep_fp32_master: fp32 weights beside a bf16 export; the next round trains from the fp32 ones."""
    import torch
    from safetensors.torch import load_file

    settings = TrainSettings(lr=1e-3, batch_size=4, threads=1, bf16=True, keep_fp32_master=True)
    train(tiny_dir, tmp_path / "r0", _examples(4), settings, state_dir=tmp_path / "s0")
    bf16 = load_file(str(tmp_path / "r0" / "model.safetensors"))
    fp32 = load_file(str(tmp_path / "r0" / "fp32" / "model.safetensors"))
    assert {t.dtype for t in bf16.values()} == {torch.bfloat16} and {t.dtype for t in fp32.values()} == {torch.float32}
    assert all(torch.equal(bf16[k], fp32[k].to(torch.bfloat16)) for k in bf16)
    assert any(not torch.equal(fp32[k], fp32[k].to(torch.bfloat16).float()) for k in fp32)  # more than bf16 holds
    train(tmp_path / "r0", tmp_path / "r1", _examples(4, seed=1), settings, state_dir=tmp_path / "s1")
    assert (tmp_path / "r1" / "fp32" / "model.safetensors").is_file()


@pytest.mark.parametrize(("old_logprob", "clipped"), [(-50.0, 1.0), (0.0, 0.0)])
def test_result_reports_policy_entropy_and_cispo_clip_fraction(tiny_dir: Path, tmp_path: Path, old_logprob: float,
                                                               clipped: float) -> None:
    """entropy: the mean over trained completion tokens of the policy's full next-token entropy
    before the (single) step, computed here by hand; clip fraction: w = p/p_old > 4 on every token
    when the sampler's logprobs are -50, on none when they are 0 (w = p <= 1)."""
    import torch

    ex = _examples(3, seed=2)
    for e in ex:
        e.group, e.sampler_logprobs = 0, [old_logprob] * len(e.completion_ids)
    res = train(tiny_dir, tmp_path / "o", ex, TrainSettings(lr=1e-3, batch_size=8, objective="cispo", threads=1),
                state_dir=tmp_path / "s")
    model = _model(tiny_dir)
    total, tokens = 0.0, 0
    with torch.no_grad():
        for e in ex:
            logits = model(input_ids=torch.tensor([e.prompt_ids + e.completion_ids])).logits[0]
            rows = torch.log_softmax(logits[len(e.prompt_ids) - 1 : -1], -1)
            total += float(-(rows.exp() * rows).sum())
            tokens += len(e.completion_ids)
    assert res.tokens == tokens and res.objective == "cispo"
    assert math.isclose(res.entropy, total / tokens, rel_tol=1e-5)
    assert res.clip_fraction == clipped


FAMILY = ("grpo", "dr_grpo", "dapo", "gspo")


def _family_examples(seed: int) -> list[Example]:
    """2 groups of 2 with advantages +-1, +-0.5 and sampler logprobs that put the ratios off 1."""
    ex = _examples(4, seed=seed)
    for i, e in enumerate(ex):
        e.group, e.weight = i // 2, [1.0, -1.0, 0.5, -0.5][i]
        e.sampler_logprobs = [-9.0 + 0.3 * (t % 2) for t in range(len(e.completion_ids))]
    return ex


@pytest.mark.parametrize("objective", FAMILY)
def test_family_loss_through_the_model_matches_the_pure_loss(tiny_dir: Path, objective: str) -> None:
    """batch_loss (the trainer's forward and example_loss) = objectives.step_loss on hand-computed logprobs."""
    import torch

    from sgsbatch.backends.objectives import step_loss

    model = _model(tiny_dir)
    ex = _family_examples(6)
    settings = TrainSettings(objective=objective, clip_low=0.2, clip_high=0.28, max_tokens=16)
    ours = batch_loss(model, ex, objective, settings=settings)
    hand = step_loss([-_hand_nll(model, e.prompt_ids, e.completion_ids) for e in ex], ex, settings)
    assert torch.allclose(ours, hand, rtol=1e-4, atol=1e-6)
    for g1, g2 in zip(_grads(model, ours), _grads(model, hand), strict=True):
        assert torch.allclose(g1, g2, rtol=1e-3, atol=1e-6)


def test_family_ratio_is_taken_under_the_sampling_temperature(tiny_dir: Path) -> None:
    """generation.logprobs = "processed": the ratio (and its gradient) uses log softmax(logits / T)."""
    import torch

    from sgsbatch.backends.objectives import step_loss

    model = _model(tiny_dir)
    ex = _family_examples(8)
    settings = TrainSettings(objective="dapo", clip_low=0.2, clip_high=0.28, sampling_temperature=0.5)
    logps = []
    for e in ex:
        logits = model(input_ids=torch.tensor([e.prompt_ids + e.completion_ids])).logits[0]
        rows = torch.log_softmax(logits[len(e.prompt_ids) - 1 : -1] / 0.5, -1)
        logps.append(rows.gather(1, torch.tensor(e.completion_ids)[:, None])[:, 0])
    ours, hand = batch_loss(model, ex, "dapo", settings=settings), step_loss(logps, ex, settings)
    assert torch.allclose(ours, hand, rtol=1e-4, atol=1e-6)
    for g1, g2 in zip(_grads(model, ours), _grads(model, hand), strict=True):
        assert torch.allclose(g1, g2, rtol=1e-3, atol=1e-6)


def test_each_family_objective_trains_one_step(tiny_dir: Path, tmp_path: Path) -> None:
    """One optimizer step per objective: the weights move, the result carries its statistics."""
    for objective in FAMILY:
        settings = TrainSettings(lr=1e-3, batch_size=8, objective=objective, threads=1, clip_low=0.2, clip_high=0.28,
                                 max_tokens=16)
        res = train(tiny_dir, tmp_path / objective, _family_examples(7), settings, state_dir=tmp_path / f"s-{objective}")
        assert (res.steps, res.sequences, res.objective) == (1, 4, objective)
        assert _digest(tmp_path / objective) != _digest(tiny_dir)
        # the sampler's logprobs (-9, -8.7) are far below the random policy's (~ log 1/512 = -6.2): every ratio
        # is far above 1 + 0.28, clipped high where A > 0 (half the samples); the sequence ratios are large
        assert 0.0 < res.clip_high_fraction < 1.0 and res.clip_low_fraction == 0.0
        assert res.clip_fraction == res.clip_high_fraction
        assert res.seq_ratio_mean > 1.0 and res.sampler_kl > 0.0


def test_a_step_of_zero_advantage_samples_runs_a_dummy_micro_batch(tiny_dir: Path, tmp_path: Path) -> None:
    """GRPO keeps uniform groups (advantage 0): no forward for them; a step holding only them still steps."""
    ex = _family_examples(9)
    zero = [Example(e.prompt_ids, e.completion_ids, 0.0, group=5, sampler_logprobs=e.sampler_logprobs) for e in ex[:2]]
    settings = TrainSettings(lr=1e-3, batch_size=2, objective="grpo", threads=1)
    res = train(tiny_dir, tmp_path / "o", ex + zero, settings, state_dir=tmp_path / "s")
    assert (res.steps, res.sequences) == (3, 6)
    assert res.tokens == sum(len(e.completion_ids) for e in ex)  # the zero group's tokens were not run
