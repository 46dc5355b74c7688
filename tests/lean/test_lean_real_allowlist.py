"""Real Lean, issue 38: the honest styles the allow-list now accepts verify in the real REPL and the
kernel re-check, and the evaluating tactics it refuses never reach Lean (skipped where `lake` or the
built REPL is absent; here only the refusals' static half runs, in test_tactic_allowlist.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from leanlib import need_real_lean

from sgsbatch.config.schema import VerificationConfig
from sgsbatch.verification.lean import LeanVerifier
from sgsbatch.verification.verdict import FAILED, VERIFIED, ProofJob

pytestmark = pytest.mark.lean
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n"


@pytest.fixture(scope="module")
def verifier() -> Iterator[LeanVerifier]:
    need_real_lean()
    v = LeanVerifier(VerificationConfig(timeout_s=120.0), processes=2)
    yield v
    v.close()


HONEST = {  # key: (statement, proof); each refused by the static checks before issue 38
    "named_term_argument": ("theorem named_arg (x y : ℝ) (hy : 1 < y) (h : 0 < x) : 0 < x * (y - 1) := by",
                            "\n  exact mul_pos (b := y - 1) h (by linarith)"),
    "named_argument_in_rw": ("theorem named_rw (n : ℕ) : ∑ i in Finset.range (n + 1), i = "
                             "(∑ i in Finset.range n, i) + n := by",
                             "\n  rw [Finset.sum_range_succ (f := fun i => i) n]"),
    "tactic_option": ("theorem disch_option (x : ℝ) (hx : x ≠ 0) : x / x = 1 := by",
                      "\n  simp (disch := exact hx) [div_self]"),
    "resource_options": ("theorem heavy (a b : ℝ) : 0 ≤ (a - b) ^ 2 + (a + b) ^ 2 := by",
                         "\n  set_option maxHeartbeats 800000 in\n  set_option maxRecDepth 10000 in\n"
                         "  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]"),
    "statement_option": ("set_option maxRecDepth 10000 in\ntheorem deep (n : ℕ) (h : n % 4 = 3) : n % 2 = 1 := by",
                         "\n  omega"),
    "kernel_root_after_open": ("open ProbabilityTheory in\ntheorem kernel_name (κ : Kernel ℕ ℕ) : "
                               "Kernel.comp κ Kernel.id = Kernel.comp κ Kernel.id := by", "\n  rfl"),
}


def test_real_honest_styles_verify(verifier: LeanVerifier) -> None:
    jobs = [ProofJob(key, HEADER, theorem, proof) for key, (theorem, proof) in HONEST.items()]
    got = {j.key: v for j, v, _ in verifier.verify_stream(jobs)}
    for key in HONEST:
        assert got[key].verdict == VERIFIED, (key, got[key])


def test_real_evaluating_tactics_never_reach_lean(verifier: LeanVerifier) -> None:
    theorem = "theorem t : (1 : ℕ) + 1 = 2 := by"
    jobs = [ProofJob("run_conv", HEADER, theorem, "\n  conv => run_conv pure ()\n  rfl"),
            ProofJob("msg", HEADER, theorem, "\n  success_if_fail_with_msg \"x\" fail\n  rfl"),
            ProofJob("glued", HEADER, theorem, "\n  first |fail |run_conv pure ()\n  rfl")]
    for job, verdict, _ in verifier.verify_stream(jobs):
        assert (verdict.verdict, verdict.reason) == (FAILED, "unknown_tactic"), (job.key, verdict)
        assert verdict.messages and verdict.messages[0].startswith("static check (not sent to Lean)")
