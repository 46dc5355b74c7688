"""TransformersGenerator determinism, batch independence, logprobs; lazy vllm import; factory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sgsbatch.backends.generation import (
    Generation,
    Request,
    completion_budget,
    derive_seed,
)
from sgsbatch.backends.transformers_engine import TransformersGenerator
from sgsbatch.phases.sampling import make_generator

M1 = [{"role": "user", "content": "Prove: theorem t (x : ℝ) : x ^ 2 ≥ 0 := by"}]
M2 = [{"role": "user", "content": "Propose a lemma about ℕ."}]
M3 = [{"role": "user", "content": "Rate the conjecture."}]


@pytest.fixture(scope="module")
def gen(tiny_dir: Path) -> TransformersGenerator:
    return TransformersGenerator(tiny_dir, threads=1)


def test_deterministic_and_batch_independent(gen: TransformersGenerator) -> None:
    a = gen.generate([M1, M2], 3, seed=5, max_tokens=40, temperature=1.0)
    gen.generate([M3], 2, seed=9, max_tokens=10, temperature=0.5)  # unrelated call in between
    b = gen.generate([M1, M3], 3, seed=5, max_tokens=40, temperature=1.0)
    assert a[0] == b[0]  # prompt 0 does not depend on the other prompts of the call
    assert a[1].prompt_ids != b[1].prompt_ids
    c = gen.generate([M1, M2], 3, seed=6, max_tokens=40, temperature=1.0)
    assert [s.token_ids for s in c[0].samples] != [s.token_ids for s in a[0].samples]
    texts = {s.text for s in a[0].samples}
    assert len(texts) > 1  # the n samples differ


def test_sample_shapes(gen: TransformersGenerator) -> None:
    out = gen.generate([M1], 4, seed=1, max_tokens=30, temperature=1.0, top_p=0.9)
    assert len(out) == 1 and len(out[0].samples) == 4
    tok = gen.tokenizer
    prompt_text = tok.decode(out[0].prompt_ids)
    assert prompt_text.startswith("<|bos|><|user|>\n") and prompt_text.endswith("<|assistant|>\n")
    for s in out[0].samples:
        assert len(s.token_ids) == len(s.logprobs) >= 1
        assert all(lp <= 0.0 for lp in s.logprobs)
        if s.finish_reason == "stop":
            assert s.token_ids[-1] == tok.eos_token_id and tok.eos_token_id not in s.token_ids[:-1]
        else:
            assert s.finish_reason == "length" and len(s.token_ids) == 30
            assert tok.eos_token_id not in s.token_ids
        assert s.text == tok.decode([t for t in s.token_ids if t != tok.eos_token_id], skip_special_tokens=True)


@pytest.mark.parametrize("mode", ["raw", "processed"])
def test_logprobs_match_the_model(gen: TransformersGenerator, mode: str) -> None:
    """raw (the default, vLLM's and the reference's): plain log-softmax whatever the temperature;
    processed: under logits / T (the same tokens are sampled either way)."""
    import torch

    gen.processed_logprobs = mode == "processed"
    try:
        out = gen.generate([M2], 1, seed=3, max_tokens=12, temperature=0.7)
    finally:
        gen.processed_logprobs = False
    s = out[0].samples[0]
    ids = torch.tensor([out[0].prompt_ids + s.token_ids])
    with torch.no_grad():
        logits = gen.model(input_ids=ids).logits[0, len(out[0].prompt_ids) - 1 : -1]
    scaled = logits / 0.7 if mode == "processed" else logits
    expect = torch.log_softmax(scaled, -1).gather(1, ids[0, len(out[0].prompt_ids) :, None])[:, 0]
    assert torch.allclose(expect, torch.tensor(s.logprobs), atol=1e-4)
    other = torch.log_softmax(logits if mode == "processed" else logits / 0.7, -1)
    assert not torch.allclose(other.gather(1, ids[0, len(out[0].prompt_ids) :, None])[:, 0],
                              torch.tensor(s.logprobs), atol=1e-3)


def test_greedy_is_seed_independent(gen: TransformersGenerator) -> None:
    a = gen.generate([M1], 2, seed=1, max_tokens=15, temperature=0.0)
    b = gen.generate([M1], 2, seed=2, max_tokens=15, temperature=0.0)
    assert a[0].samples[0].token_ids == b[0].samples[1].token_ids


def test_derive_seed() -> None:
    assert derive_seed(1, 0) == derive_seed(1, 0)
    assert len({derive_seed(s, i) for s in range(5) for i in range(5)}) == 25
    assert 0 <= derive_seed(123, 456) < 2**31


def test_make_generator_rejects_unknown(tiny_dir: Path) -> None:
    with pytest.raises(ValueError, match="transformers, vllm"):
        make_generator("tgi", tiny_dir)


def test_imports_are_lazy() -> None:
    code = (
        "import sys; import sgsbatch.backends.generation, sgsbatch.backends.trainer, "
        "sgsbatch.models.tiny, sgsbatch.models.warmup; "
        "heavy = [m for m in ('torch', 'transformers', 'deepspeed', 'vllm') if m in sys.modules]; "
        "print(heavy); assert not heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_vllm_backend_needs_vllm(tiny_dir: Path) -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            make_generator("vllm", tiny_dir)
    else:
        pytest.skip("vllm is installed: the vllm backend is exercised by the gpu tier")


def _window(gen: TransformersGenerator, requests: list[Request], width: int) -> dict[str, Generation]:
    """Feed `requests` through the engine keeping at most `width` in flight (the phases' way)."""
    out: dict[str, Generation] = {}
    todo = list(requests)
    while todo or gen.in_flight():
        while todo and gen.in_flight() < width:
            gen.add(todo.pop(0))
        out.update((req.key, g) for req, g in gen.step())
    return out


def _tokens(out: dict[str, Generation]) -> dict[str, list[tuple[list[int], str, str]]]:
    return {k: [(s.token_ids, s.finish_reason, s.text) for s in g.samples] for k, g in out.items()}


def test_samples_do_not_depend_on_the_window(gen: TransformersGenerator, targets: list[tuple[str, str, str]]) -> None:
    """Windows of 1, 3 and 16 requests (and another order) give every request the same samples.

    Tokens, texts and finish reasons are compared exactly; logprobs to 1e-5: float32 kernels give
    a row numbers that differ by ~1e-7 between batch shapes (left padding, batch size).
    """
    msgs = [[{"role": "user", "content": f"Complete the following Lean 4 code:\n{h}{t}"}] for _, h, t in targets[:16]]
    reqs = [Request(f"r{i}", m, 3, derive_seed(11, i), 24, 1.0, 0.95 if i % 2 else 1.0) for i, m in enumerate(msgs)]
    one = _window(gen, reqs, 1)
    three = _window(gen, reqs, 3)
    sixteen = _window(gen, list(reversed(reqs)), 16)
    assert _tokens(three) == _tokens(one) and _tokens(sixteen) == _tokens(one)
    for k, g in one.items():
        assert g.prompt_ids == sixteen[k].prompt_ids
        for a, b in zip(g.samples, sixteen[k].samples, strict=True):
            assert max((abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)), default=0.0) < 1e-5
    assert all(len(g.samples) == 3 for g in one.values()) and len({tuple(g.samples[0].token_ids) for g in one.values()}) > 1
    assert gen.in_flight() == 0


def test_max_model_len_caps_the_completion(tiny_dir: Path) -> None:
    gen = TransformersGenerator(tiny_dir, threads=1, max_model_len=40)
    (out,) = gen.generate([M1], 2, seed=1, max_tokens=1000, temperature=1.0)
    for s in out.samples:
        assert len(out.prompt_ids) + len(s.token_ids) <= 40
        assert s.finish_reason == "stop" or len(out.prompt_ids) + len(s.token_ids) == 40
    assert completion_budget(8192, 100, 8192) == 8092 and completion_budget(500, 100, 8192) == 500
    assert completion_budget(500, 9000, 8192) == 0 and completion_budget(500, 9000, None) == 500


def test_abort_drops_the_requests_in_flight(gen: TransformersGenerator) -> None:
    gen.add(Request("a", M1, 2, 1, 30, 1.0))
    gen.add(Request("b", M2, 2, 2, 30, 1.0))
    assert gen.in_flight() == 2
    gen.abort()
    assert gen.in_flight() == 0 and gen.step() == []
    assert gen.stats.prompts >= 2 and gen.stats.generate_s >= 0.0


def test_weights_updated_in_place_sample_as_a_fresh_generator_on_them(tiny_dir: Path, tmp_path: Path) -> None:
    """A colocated rollout job's engine (phases/sampling.ResidentEngine) takes each step's weights in place:
    it then samples, seeded, exactly as a new generator on those weights; lent again on the same weights
    it is not updated."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sgsbatch.config.schema import Config
    from sgsbatch.phases.sampling import ResidentEngine

    other = tmp_path / "other"
    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(other)
    AutoTokenizer.from_pretrained(str(tiny_dir)).save_pretrained(other)

    import dataclasses

    cfg = dataclasses.replace(Config(), generation=dataclasses.replace(Config().generation, backend="transformers"))
    engine = ResidentEngine()
    try:
        first = engine.lend(cfg, "solver", 0, "solve", lambda: tiny_dir, 1)
        before = first.generate([M1], 3, seed=5, max_tokens=30, temperature=1.0)
        first.close()  # lent: the engine stays
        again = engine.lend(cfg, "solver", 1, "solve", lambda: other, 1)
        after = again.generate([M1], 3, seed=5, max_tokens=30, temperature=1.0)
        assert len(engine.updates) == 1
        engine.lend(cfg, "solver", 1, "solve", lambda: other, 1)
        assert len(engine.updates) == 1  # the same weights: nothing to load
    finally:
        engine.close()
    fresh = TransformersGenerator(other, threads=1).generate([M1], 3, seed=5, max_tokens=30, temperature=1.0)
    assert after == fresh
    assert after != before
