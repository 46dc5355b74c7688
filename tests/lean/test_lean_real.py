"""Real Lean: a few proofs through the real REPL pool (skipped where `lake` or the built REPL is absent)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from sgsbatch.config.schema import VerificationConfig
from sgsbatch.verification.lean import LeanVerifier, resolve_project_dir
from sgsbatch.verification.verdict import FAILED, TIMEOUT, VERIFIED, ProofJob

pytestmark = pytest.mark.lean
CFG = VerificationConfig()
PROJECT = resolve_project_dir(CFG.project_dir)
REPL = PROJECT / CFG.repl_command[-1]


@pytest.fixture(scope="module")
def verifier() -> Iterator[LeanVerifier]:
    if shutil.which("lake") is None:
        pytest.skip("real Lean tests need `lake` on PATH: install with ./setup.sh --lean")
    if not REPL.exists():
        pytest.skip(f"real Lean tests need the REPL built at {REPL}: run ./setup.sh --lean")
    v = LeanVerifier(VerificationConfig(timeout_s=60.0), processes=2)
    yield v
    v.close()


def _job(key: str, theorem: str, proof: str, header: str = "import Mathlib") -> ProofJob:
    return ProofJob(key, header, theorem, proof)


def test_real_proofs(verifier: LeanVerifier) -> None:
    jobs = [
        _job("pass", "theorem sq_nonneg' (x : ℝ) : 0 ≤ x ^ 2 := by", "\n  positivity"),
        _job("pass_core", "theorem add_comm' (a b : ℕ) : a + b = b + a := by", "\n  omega"),
        _job("fail", "theorem wrong (x : ℕ) : x + 1 = x := by", "\n  simp"),
        _job("sorry", "theorem s (x : ℕ) : x = x := by", "\n  exact (sorry : x = x)"),
        _job("classical", "theorem em' (p : Prop) : p ∨ ¬p := by", "\n  exact Classical.em p"),
    ]
    got = {j.key: v for j, v, _ in verifier.verify_stream(jobs)}
    assert got["pass"].verdict == VERIFIED, got["pass"]
    assert got["pass_core"].verdict == VERIFIED, got["pass_core"]
    assert got["classical"].verdict == VERIFIED, got["classical"]
    assert (got["fail"].verdict, got["fail"].reason) == (FAILED, "lean_error")
    assert got["sorry"].verdict == FAILED  # static check: `sorry`


def test_real_timeout() -> None:
    if shutil.which("lake") is None or not REPL.exists():
        pytest.skip("real Lean tests need `lake` and the built REPL: run ./setup.sh --lean")
    v = LeanVerifier(VerificationConfig(timeout_s=2.0), processes=1)
    try:
        slow = "\n  nlinarith [sq_nonneg (x - y), sq_nonneg (x + y), sq_nonneg (x * y - 1), sq_nonneg (x * y + 1)]"
        theorem = "theorem hard (x y : ℝ) (h : x ^ 4 + y ^ 4 = 1) : x ^ 3 * y ^ 5 ≤ 1000 := by"
        (_, verdict, _), = list(v.verify_stream([_job("slow2", theorem, slow)]))
        assert verdict.verdict in (TIMEOUT, FAILED)  # nlinarith on this either runs out of time or gives up
    finally:
        v.close()
