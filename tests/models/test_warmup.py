"""Warm-up: project-made examples pass the real parsers, and a warmed-up tiny model emits
replies that extract for a fair share of samples at temperature 1.0."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgsbatch.models.warmup import ROLES, corpus_for_tokenizer, reply_ok, warm_up, warmup_examples


@pytest.mark.parametrize("role", ROLES)
def test_examples_pass_the_parsers(role: str, targets: list[tuple[str, str, str]]) -> None:
    pairs = warmup_examples(role, targets, 60, seed=1)
    assert len(pairs) == 60
    assert all(reply_ok(role, reply) for _, reply in pairs)
    assert all(m[0]["role"] == "user" for m, _ in pairs)
    assert pairs == warmup_examples(role, targets, 60, seed=1)
    if role == "conjecturer":
        assert len({reply for _, reply in pairs}) >= 55  # duplicates are rare


def test_unknown_role() -> None:
    with pytest.raises(ValueError):
        warmup_examples("critic", [("a", "", "theorem a : True := by")], 1, 0)


def test_corpus_is_deterministic(targets: list[tuple[str, str, str]]) -> None:
    assert corpus_for_tokenizer(targets[:5]) == corpus_for_tokenizer(targets[:5])


def test_warm_up_makes_extraction_succeed(tiny_dir: Path, tmp_path: Path,
                                          targets: list[tuple[str, str, str]]) -> None:
    from sgsbatch.backends.transformers_engine import TransformersGenerator

    train_targets, held_out = targets[: max(1, len(targets) - 10)], targets[-10:]
    pairs = warmup_examples("solver", train_targets, 128, seed=0)
    res = warm_up(tiny_dir, tmp_path / "solver", pairs, state_dir=tmp_path / "state", epochs=8, lr=3e-3,
                  batch_size=8, seed=0, threads=1)
    assert res.steps == 128 and res.mean_loss > 0
    gen = TransformersGenerator(tmp_path / "solver", threads=1)
    prompts = [m for m, _ in warmup_examples("solver", held_out, 10, seed=1)]
    out = gen.generate(prompts, 4, seed=0, max_tokens=120, temperature=1.0)
    samples = [s for g in out for s in g.samples]
    rate = sum(reply_ok("solver", s.text) for s in samples) / len(samples)
    assert rate >= 0.2, rate
