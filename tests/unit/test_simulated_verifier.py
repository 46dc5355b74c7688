"""The simulated verifier: deterministic, labelled as not Lean, refuses unsafe proofs, gives signal."""

from __future__ import annotations

import pytest

from sgsbatch.verification.simulated import (
    NOT_LEAN,
    closing_tactics,
    favoured_family,
    proof_strength,
    simulated_verify,
    theorem_difficulty,
)
from sgsbatch.verification.verdict import VERDICTS, Verdict

HEADER = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"
)
THEOREMS = [f"theorem t{i} (x y : ℝ) (h : 0 < x + {i}) : 0 < x ^ 2 + {i} := by" for i in range(400)]
PROOFS = [
    "\n  simp",
    "\n  norm_num",
    "\n  linarith",
    "\n  positivity",
    "\n  nlinarith [sq_nonneg (x - y), sq_nonneg (x + y)]",
    "\n  field_simp\n  ring_nf",
    "\n  intro h\n  omega",
    "\n  aesop",
]


def _labelled(v: Verdict) -> None:
    assert v.reason is not None and v.reason.startswith("simulated verifier:")
    assert v.messages[0] == NOT_LEAN
    assert v.verdict in VERDICTS


@pytest.mark.parametrize(
    ("proof", "needle"),
    [
        ("\n  sorry", "sorry"),
        ("\n  nlinarith [sq_nonneg x]\n  admit", "admit"),
        ('\n  #eval IO.println "hi"\n  simp', "#eval"),
        ("\n  run_cmd pure ()\n  simp", "run_cmd"),
        ("\n  native_decide", "native_decide"),
        ("\n  simp\naxiom cheat : False", "axiom"),
        ("\n  ", "empty"),
        ("\n  nlinarith [sq_nonneg (x - y]", "unbalanced"),
        ("\n  intro h\n  exact h", "no closing tactic"),
        ("\n  simp\n  norm_num\n  linarith\n  nlinarith", "more than 3"),
    ],
)
def test_failures(proof: str, needle: str) -> None:
    v = simulated_verify(HEADER, THEOREMS[0], proof)
    assert v.verdict == "failed"
    _labelled(v)
    assert v.reason is not None and needle in v.reason


def test_comments_do_not_count() -> None:
    assert closing_tactics("\n  -- nlinarith\n  exact h") == set()
    v = simulated_verify(HEADER, THEOREMS[0], "\n  -- sorry, no idea\n  exact h")
    assert v.reason is not None and "no closing tactic" in v.reason


def test_long_proof_is_a_timeout() -> None:
    v = simulated_verify(
        HEADER, THEOREMS[0], "\n  nlinarith [" + "sq_nonneg x, " * 10 + "sq_nonneg y]", timeout_chars=50
    )
    assert v.verdict == "timeout"
    _labelled(v)


def test_deterministic() -> None:
    for theorem in THEOREMS[:50]:
        for proof in PROOFS:
            assert simulated_verify(HEADER, theorem, proof) == simulated_verify(HEADER, theorem, proof)


def test_strength_rules() -> None:
    theorem = THEOREMS[0]
    bonus = 1.0 if "nlinarith" in favoured_family(theorem) else 0.0
    assert proof_strength(theorem, "\n  nlinarith [sq_nonneg x]") == 3.0 + bonus
    assert proof_strength(theorem, "\n  exact h") == 0.0
    assert closing_tactics("\n  nlinarith [h]\n  <;> simp_all") == {"nlinarith", "simp_all"}
    assert 1 <= theorem_difficulty(theorem) <= 5
    assert theorem_difficulty(theorem) == theorem_difficulty(theorem.replace(" ", "  "))


def test_verified_share_gives_learning_signal() -> None:
    verdicts = [simulated_verify(HEADER, t, p) for t in THEOREMS for p in PROOFS]
    for v in verdicts:
        _labelled(v)
    share = sum(v.ok for v in verdicts) / len(verdicts)
    assert 0.2 <= share <= 0.6
    # stronger tactics verify more often than weak ones
    weak = sum(simulated_verify(HEADER, t, "\n  simp").ok for t in THEOREMS)
    strong = sum(simulated_verify(HEADER, t, PROOFS[4]).ok for t in THEOREMS)
    assert strong > weak
    # difficulties spread over all levels
    assert {theorem_difficulty(t) for t in THEOREMS} == {1, 2, 3, 4, 5}


def test_bad_parameters_and_verdict_values() -> None:
    with pytest.raises(ValueError):
        simulated_verify(HEADER, THEOREMS[0], "\n  simp", pass_probability=1.5)
    with pytest.raises(ValueError):
        theorem_difficulty(THEOREMS[0], difficulty_levels=0)
    with pytest.raises(ValueError):
        Verdict(verdict="maybe")
    assert Verdict("verified").ok and not Verdict("timeout").ok
