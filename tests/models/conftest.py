"""Fixtures for the model/backend tests: a tiny random model built once per session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SMALL_D3K = SHARED / "data" / "d3k" / "D_3k_small_prover_dataset.json"
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n"

OWN_TARGETS: list[tuple[str, str, str]] = [
    ("t0000001", HEADER, "theorem own_1 (x y : ℝ) (h₀ : 0 < x ∧ 0 < y) : x * y ≤ (x ^ 2 + y ^ 2) / 2 := by"),
    ("t0000002", HEADER, "theorem own_2 (n : ℕ) (h : 3 ≤ n) : 2 * n + 1 ≤ n ^ 2 := by"),
    ("t0000003", HEADER, "theorem own_3 (a b : ℝ) (ha : 0 ≤ a) (hb : 0 ≤ b) : Real.sqrt (a * b) ≤ (a + b) / 2 := by"),
    ("t0000004", HEADER, "theorem own_4 (x : ℝ) (hx : 2 < x) : x ^ 2 - 4 > 0 := by"),
    ("t0000005", HEADER, "theorem own_5 : (123 : ℤ) % 7 = 4 := by"),
    ("t0000006", HEADER, "theorem own_6 (f : ℕ → ℕ) (h : ∀ n, f n = 2 * n) : f 3 = 6 := by"),
]


def load_targets() -> list[tuple[str, str, str]]:
    """The small D_3k subset when ../shared is present, else a few statements of our own."""
    if not SMALL_D3K.is_file():
        return list(OWN_TARGETS)
    rows = json.loads(SMALL_D3K.read_text())["target_statements"].values()
    return [(r["id"], r["header"], r["theorem"]) for r in rows]


@pytest.fixture(scope="session")
def targets() -> list[tuple[str, str, str]]:
    return load_targets()


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory, targets: list[tuple[str, str, str]]) -> Path:
    from sgsbatch.models.tiny import build_tiny_random
    from sgsbatch.models.warmup import corpus_for_tokenizer

    out = tmp_path_factory.mktemp("tiny") / "model"
    build_tiny_random(out, seed=0, corpus=corpus_for_tokenizer(targets[:80]))
    return out


@pytest.fixture(scope="session")
def rank_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model of the multi-rank trainer tests (tests/gpu/gpulib.build_model, unsharpened)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
    from gpulib import build_model

    return build_model(tmp_path_factory.mktemp("cpu-ranks"), sharpen=False)
