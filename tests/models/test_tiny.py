"""build_tiny_random: deterministic bytes, unicode round-trip, chat template, idempotence."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgsbatch.models.tiny import build_tiny_random
from sgsbatch.run.checkpoint import MARKER, is_complete

CORPUS = ["theorem foo (x : ℝ) (h : 0 < x ∧ x ≤ 1) : x ^ 2 ≤ 1 := by", "nlinarith [sq_nonneg (x - 1)]"] * 5


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    build_tiny_random(tmp_path / "a", 7, CORPUS, vocab_size=300, hidden_size=32)
    build_tiny_random(tmp_path / "b", 7, CORPUS, vocab_size=300, hidden_size=32)
    build_tiny_random(tmp_path / "c", 8, CORPUS, vocab_size=300, hidden_size=32)
    a, b, c = _files(tmp_path / "a"), _files(tmp_path / "b"), _files(tmp_path / "c")
    assert a == b
    assert a["model.safetensors"] != c["model.safetensors"]
    assert a["tokenizer.json"] == c["tokenizer.json"]
    assert MARKER in a and "config.json" in a
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging leftovers


def test_rebuild_is_noop_and_mismatch_raises(tmp_path: Path) -> None:
    out = tmp_path / "m"
    build_tiny_random(out, 1, CORPUS, vocab_size=300, hidden_size=32)
    before = _files(out)
    build_tiny_random(out, 1, CORPUS, vocab_size=300, hidden_size=32)
    assert _files(out) == before and is_complete(out)
    with pytest.raises(ValueError):
        build_tiny_random(out, 2, CORPUS, vocab_size=300, hidden_size=32)


def test_tokenizer_round_trip_and_template(tiny_dir: Path, targets: list[tuple[str, str, str]]) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    texts = [h + t for _, h, t in targets[:20]] + ["ℝ ∧ ≤ ∀ ∃ ε₀ ⌊x⌋ 😀 \t\n  x"]
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    msgs = [{"role": "user", "content": "hi ℝ"}]
    prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert prompt == "<|bos|><|user|>\nhi ℝ\n<|assistant|>\n"
    full = tok.apply_chat_template([*msgs, {"role": "assistant", "content": "ok"}], tokenize=False)
    assert full.endswith("<|assistant|>\nok<|eos|>\n")
    assert tok.eos_token == "<|eos|>" and tok.pad_token == "<|pad|>" and tok.bos_token == "<|bos|>"
    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    assert model.config.vocab_size == len(tok)
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 64


def test_the_tiny_cache_key_names_where_the_model_was_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU-built tiny model is never reused by a CPU run (or another GPU kind), nor the other way."""
    import torch

    from sgsbatch.config.loading import load_config
    from sgsbatch.phases.init import cache_key

    cfg = load_config(Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml")
    targets = [("a", "", "theorem a : True := by")]
    cpu = cache_key(cfg, targets)
    assert cache_key(cfg, targets) == cpu
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA H100 80GB HBM3")
    h100 = cache_key(cfg, targets)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA H200")
    assert len({cpu, h100, cache_key(cfg, targets)}) == 3
