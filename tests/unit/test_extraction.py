"""Extraction: a table of real-looking Solver and Conjecturer replies, worked out by hand."""

from __future__ import annotations

import pytest

from sgsbatch.logic.extraction import (
    REASONS,
    Extraction,
    count_declarations,
    count_sorry,
    extract_conjecture,
    extract_proof,
    normalise_newlines,
    solver_file,
    strip_lean_comments,
)

HEADER = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"
)
STATEMENT = "theorem t1 (x y : ℝ) (h₀ : 0 < x ∧ 0 < y) : 0 < x * y := by"
GOOD = f"```lean4\n{HEADER}{STATEMENT}\n  nlinarith [h₀.1, h₀.2]\n```"

PROOF_CASES: list[tuple[str, str, str | None, str | None]] = [
    ("well_formed", GOOD, "\n  nlinarith [h₀.1, h₀.2]", None),
    ("surrounding_whitespace", "\n\n  " + GOOD + "\n\n", "\n  nlinarith [h₀.1, h₀.2]", None),
    ("proof_on_same_line", f"```lean4\n{STATEMENT} positivity\n```", " positivity", None),
    ("crlf", GOOD.replace("\n", "\r\n"), "\n  nlinarith [h₀.1, h₀.2]", None),
    (
        "identifier_containing_theorem",
        "```lean4\ntheorem my_theorem_1 (a : ℕ) : a + 0 = a := by\n  simp [Nat.add_zero, lemma_x]\n```",
        "\n  simp [Nat.add_zero, lemma_x]",
        None,
    ),
    (
        "keyword_in_comment",
        "```lean4\ntheorem t (a : ℕ) : a = a := by\n  -- this theorem is rfl\n  rfl\n```",
        "\n  -- this theorem is rfl\n  rfl",
        None,
    ),
    ("empty_reply", "   \n ", None, "empty_reply"),
    ("no_fence", f"{STATEMENT}\n  nlinarith", None, "no_fence"),
    ("reasoning_before", "Let me think: x*y > 0.\n" + GOOD, None, "text_outside_fence"),
    ("reasoning_after", GOOD + "\nThis works because both are positive.", None, "text_outside_fence"),
    ("lean_not_lean4", GOOD.replace("```lean4", "```lean", 1), None, "wrong_language"),
    ("two_blocks", GOOD + "\n" + GOOD, None, "fence_count"),
    ("cut_off_mid_fence", f"```lean4\n{STATEMENT}\n  nlinarith [sq_nonneg (x -", None, "unclosed_fence"),
    (
        "second_theorem",
        f"```lean4\nlemma aux (x : ℝ) : 0 ≤ x ^ 2 := by positivity\n{STATEMENT}\n  nlinarith\n```",
        None,
        "several_declarations",
    ),
    ("no_declaration", "```lean4\nexample : 1 = 1 := by\n  rfl\n```", None, "no_declaration"),
    ("missing_by", "```lean4\ntheorem t : 1 = 1 := rfl\n```", None, "no_by"),
    ("empty_proof", f"```lean4\n{STATEMENT}\n   \n```", None, "empty_proof"),
]


@pytest.mark.parametrize(("name", "reply", "proof", "reason"), PROOF_CASES, ids=[c[0] for c in PROOF_CASES])
def test_extract_proof_table(name: str, reply: str, proof: str | None, reason: str | None) -> None:
    """The table under `extraction.declarations = "code_only"`; the default ("reference") differs
    only where a keyword sits in a comment (tests/unit/test_reference_rewards.py)."""
    got = extract_proof(reply, "code_only")
    assert got == Extraction(ok=reason is None, value=proof, reason=reason), name
    if reason is not None:
        assert reason in REASONS
    if name != "keyword_in_comment":
        assert extract_proof(reply) == got, name


def test_proof_is_text_after_the_first_by() -> None:
    reply = "```lean4\ntheorem t (x : ℝ) : x = x := by\n  have h : x = x := by rfl\n  exact h\n```"
    assert extract_proof(reply).value == "\n  have h : x = x := by rfl\n  exact h"


def test_solver_file_uses_dataset_statement_not_model_statement() -> None:
    reply = "```lean4\ntheorem t1 (x y : ℝ) : True := by\n  trivial\n```"
    proof = extract_proof(reply).value
    assert proof is not None
    assert solver_file(HEADER, STATEMENT, proof) == HEADER + STATEMENT + "\n  trivial"
    assert solver_file("import Mathlib", "theorem a : True := by", " trivial") == (
        "import Mathlib\ntheorem a : True := by trivial"
    )


CONJ = "theorem c1 (x : ℝ) (hx : 0 < x) : 0 < x ^ 3 := by"
CONJECTURE_CASES: list[tuple[str, str, str | None, str | None]] = [
    ("well_formed", f"Idea: cubes of positives.\n```lean4\n{CONJ}\n  sorry\n```", CONJ, None),
    ("ends_in_by", f"```lean4\n{CONJ}\n```\nDone.", CONJ, None),
    (
        "last_block_wins",
        f"Draft:\n```lean4\ntheorem d : 1 = 1 := by\n  sorry\n```\nBetter:\n```lean4\n{CONJ} sorry\n```",
        CONJ,
        None,
    ),
    ("imports_dropped", f"```lean4\nimport Mathlib\nimport Aesop\n\n{CONJ}\n  sorry\n```", CONJ, None),
    ("crlf", f"```lean4\r\n{CONJ}\r\n  sorry\r\n```", CONJ, None),
    (
        "unicode",
        "```lean4\ntheorem c₂ (s : Finset ℕ) : ∑ i ∈ s, 0 = 0 := by\n  sorry\n```",
        "theorem c₂ (s : Finset ℕ) : ∑ i ∈ s, 0 = 0 := by",
        None,
    ),
    ("python_block_only", "```python\nprint(1)\n```", None, "no_fence"),
    ("no_block", f"{CONJ}\n  sorry", None, "no_fence"),
    ("cut_off", f"```lean4\n{CONJ}\n  sor", None, "unclosed_fence"),
    (
        "cut_off_after_a_full_block",
        f"```lean4\n{CONJ}\n  sorry\n```\nAlso:\n```lean4\ntheorem",
        None,
        "unclosed_fence",
    ),
    ("no_by", "```lean4\ntheorem c : 1 = 1 := sorry\n```", None, "no_by"),
    ("two_by", f"```lean4\n{CONJ}\n  have h : 0 < x := by sorry\n  sorry\n```", None, "several_by"),
    ("two_sorry", f"```lean4\n{CONJ}\n  sorry\n  sorry\n```", None, "several_sorry"),
    ("real_proof", f"```lean4\n{CONJ}\n  positivity\n```", None, "bad_ending"),
    ("no_declaration", "```lean4\nexample (x : ℝ) : 0 ≤ x ^ 2 := by\n  sorry\n```", None, "no_declaration"),
    (
        "two_declarations",
        "```lean4\ndef f (n : ℕ) : ℕ := n\ntheorem c (n : ℕ) : f n = n := by\n  sorry\n```",
        None,
        "several_declarations",
    ),
]


@pytest.mark.parametrize(
    ("name", "reply", "statement", "reason"), CONJECTURE_CASES, ids=[c[0] for c in CONJECTURE_CASES]
)
def test_extract_conjecture_table(name: str, reply: str, statement: str | None, reason: str | None) -> None:
    """Both rules (`extraction.conjecture`) agree on these replies; where they differ:
    tests/unit/test_reference_conjectures.py."""
    dropped = ("import Mathlib", "import Aesop") if name == "imports_dropped" else ()
    expected = Extraction(ok=reason is None, value=statement, reason=reason, dropped=dropped)
    assert extract_conjecture(reply) == expected, name  # the default: "reference"
    assert extract_conjecture(reply, "code_only") == expected, name


def test_word_helpers() -> None:
    assert count_declarations("theorem a : True := by\n-- lemma b\n/- def c /- nested -/ -/ trivial") == 1
    assert count_declarations("my_theorem_1 Foo.lemma def_x theorem\tx") == 1
    assert count_sorry("sorry sorry_lemma h.sorry -- sorry") == 1
    assert strip_lean_comments("a -- b\nc /- d -/ e") == "a  \nc   e"
    assert normalise_newlines("\ufeffa\r\nb\rc") == "a\nb\nc"
