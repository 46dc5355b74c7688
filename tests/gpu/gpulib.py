"""Helpers of the gpu tier: skip reasons (what is missing and how to get it) and its tiny models.

There is no tests/gpu/conftest.py on purpose: tests/lean imports its own as `conftest`, and a second
one loaded in the same session (`pytest tests/lean tests/gpu`) would shadow it.

Nothing here initialises CUDA: devices are counted through NVML (PYTORCH_NVML_BASED_CUDA_CHECK), so a
later fork (vLLM's workers) is not poisoned.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n"
TARGETS: list[tuple[str, str, str]] = [
    ("g1", HEADER, "theorem own_1 (x y : ℝ) (h₀ : 0 < x ∧ 0 < y) : x * y ≤ (x ^ 2 + y ^ 2) / 2 := by"),
    ("g2", HEADER, "theorem own_2 (n : ℕ) (h : 3 ≤ n) : 2 * n + 1 ≤ n ^ 2 := by"),
    ("g3", HEADER, "theorem own_4 (x : ℝ) (hx : 2 < x) : x ^ 2 - 4 > 0 := by"),
    ("g4", HEADER, "theorem own_5 : (123 : ℤ) % 7 = 4 := by"),
    ("g5", HEADER, "theorem own_6 (f : ℕ → ℕ) (h : ∀ n, f n = 2 * n) : f 3 = 6 := by"),
]
GET_GPU = "run on a GPU node with a CUDA build of torch (`pip install -e .[gpu]` there)"
# The vLLM test model: hidden 128 with 2 heads (head size 64, which every vLLM attention backend
# supports; the default tiny-random's head size 16 is not), lm_head scaled by LM_HEAD_SCALE so that
# the next-token distributions are peaked rather than near-uniform (logprobs of a few nats, not ~6.2).
LM_HEAD_SCALE = 10.0


def cuda_devices() -> int:
    try:
        import torch
    except ImportError:
        return 0
    old = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    finally:
        if old is None:
            del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = old


def no_cuda_reason() -> str:
    try:
        import torch
    except ImportError:
        return f"needs CUDA: torch is not installed; {GET_GPU}"
    build = torch.version.cuda
    why = "a CPU-only torch build" if build is None else f"torch {torch.__version__} (CUDA {build}) sees no GPU"
    return f"needs CUDA: torch.cuda.is_available() is False ({why}); {GET_GPU}"


def vllm_missing_reason() -> str | None:
    if cuda_devices() == 0:
        return no_cuda_reason()
    if importlib.util.find_spec("vllm") is None:
        return "needs vLLM: `import vllm` fails (not installed); `pip install -e .[gpu]` on a GPU node"
    return None


def multi_gpu_missing_reason(n: int = 2) -> str | None:
    found = cuda_devices()
    if found == 0:
        return no_cuda_reason()
    if found < n:
        return (f"needs >= {n} CUDA devices, found {found}: run on a node with {n}+ GPUs "
                f"(e.g. `srun --gpus={n} .venv/bin/pytest tests/gpu`)")
    return None


def build_model(out: Path, *, sharpen: bool, hidden_size: int = 64, num_heads: int = 4,
                targets: list[tuple[str, str, str]] | None = None) -> Path:
    """A tiny-random model (sgsbatch.models.tiny) for `targets` (default TARGETS); `sharpen` scales
    its lm_head and saves the result (with the tokenizer) beside it. tests/vllm builds its model here too."""
    from sgsbatch.models.tiny import build_tiny_random
    from sgsbatch.models.warmup import corpus_for_tokenizer

    base = out / "base"
    build_tiny_random(base, seed=0, corpus=corpus_for_tokenizer(targets or TARGETS), hidden_size=hidden_size,
                      num_heads=num_heads)
    if not sharpen:
        return base
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    with torch.no_grad():
        model.lm_head.weight.mul_(LM_HEAD_SCALE)
    sharp = out / "sharp"
    model.save_pretrained(sharp)
    AutoTokenizer.from_pretrained(str(base)).save_pretrained(sharp)
    return sharp
