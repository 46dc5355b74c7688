"""Static checks (checks.py) on every cheat and unsafe form, honest look-alikes, and the verdict rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sgsbatch.verification import checks as C
from sgsbatch.verification import rules as V
from sgsbatch.verification.lean import static_verdict
from sgsbatch.verification.lexer import lex
from sgsbatch.verification.verdict import FAILED, VERIFIED, ProofJob

CHEATS: list[tuple[str, str]] = [
    ("\n  #eval IO.println \"hi\"\n  simp", C.EVAL),
    ("\n  simp\n#eval (IO.Process.run {cmd := \"sh\"})", C.EVAL),
    ("\n  simp\n#exit", C.EXIT),
    ("\n  simp\n#print axioms foo", C.HASH_COMMAND),
    ("\n  simp\nrun_cmd Lean.logInfo \"x\"", C.RUN_CMD),
    ("\n  run_tac Lean.Elab.Tactic.evalTactic (← `(tactic| simp))", C.RUN_TAC),
    ("\n  simp\nrun_elab pure ()", C.RUN_ELAB),
    ("\n  simp\nrun_meta pure ()", C.RUN_ELAB),
    ("\n  exact by_elab pure (Lean.mkConst ``True.intro)", C.RUN_ELAB),
    ("\n  simp\nelab \"cheat\" : tactic => pure ()", C.ELAB),
    ("\n  simp\nsimproc_decl foo (_) := fun _ => pure .continue", C.ELAB),
    ("\n  simp\nmacro \"cheat\" : tactic => `(tactic| sorry)", C.MACRO),
    ("\n  simp\nmacro_rules | `(tactic| trivial) => `(tactic| sorry)", C.MACRO),
    ("\n  simp\nsyntax \"cheat\" : tactic", C.SYNTAX),
    ("\n  simp\nnotation \"⊤⊤\" => True", C.NOTATION),
    ("\n  simp\ninfixl:65 \" +++ \" => HAdd.hAdd", C.NOTATION),
    ("\n  simp\nprefix:max \"√√\" => id", C.NOTATION),
    ("\n  simp\npostfix:max \"!!\" => id", C.NOTATION),
    ("\n  simp\ninitialize pure ()", C.INITIALIZE),
    ("\n  simp\n@[extern \"evil\"] def g : Nat := 0", C.EXTERN),
    ("\n  simp\n@[implemented_by g] def h : Nat := 0", C.IMPLEMENTED_BY),
    ("\n  simp\nunsafe def u : Nat := 0", C.UNSAFE),
    ("\n  exact cheat\naxiom cheat : False", C.AXIOM),
    ("\n  simp\nopaque o : Nat", C.OPAQUE),
    ("\n  set_option maxRecDepth 100001 in\n  norm_num", C.SET_OPTION),  # over the default bound (issue 38)
    ("\n  set_option maxHeartbeats x in\n  norm_num", C.SET_OPTION),  # a resource option takes a number
    ("\n  simp\nset_option debug.skipKernelTC true", C.SET_OPTION),
    ("\n  set_option compiler.extract_closed false in simp", C.SET_OPTION),
    ("\n  simp\nattribute [local instance] Classical.propDecidable", C.LOCAL_INSTANCE),
    ("\n  simp\nlocal instance : Decidable False := .isTrue sorry", C.LOCAL_INSTANCE),
    ("\n  simp\nscoped instance : Decidable False := .isTrue sorry", C.LOCAL_INSTANCE),
    ("\n  simp\nimport Mathlib.Tactic", C.IMPORT),
    ("\n  simp\nopen Lean in\n#eval 1", C.OPEN_IN_COMMAND),
    ("\n  simp\nopen Lean Elab in\nelab \"x\" : tactic => pure ()", C.OPEN_IN_COMMAND),
    ("\n  simp\nopen Nat", C.COMMAND),
    ("\n  exact helper\ntheorem helper : 1 + 1 = 2 := rfl", C.DECLARATION),
    ("\n  simp\nlemma helper : True := trivial", C.DECLARATION),
    ("\n  simp\ndef helper : Nat := 0", C.DECLARATION),
    ("\n  simp\ninstance : Inhabited Nat := ⟨0⟩", C.DECLARATION),
    ("\n  simp\nexample : True := trivial", C.DECLARATION),
    ("\n  simp\nnamespace X", C.COMMAND),
    ("\n  simp\nend", C.COMMAND),
    ("\n  native_decide", C.NATIVE_DECIDE),
    ("\n  exact Lean.ofReduceBool _ _ rfl", C.NATIVE_DECIDE),
    ("\n  decide +native", C.NATIVE_DECIDE),
    ("\n  decide (config := { native := true })", C.NATIVE_DECIDE),
    ("\n  sorry", C.SORRY),
    ("\n  admit", C.SORRY),
]

HONEST: list[str] = [
    "\n  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]",
    "\n  -- we could #eval this, or run_cmd, or use an axiom; we do not\n  norm_num",
    "\n  /- nested /- comment with #exit and theorem -/ still comment: sorry -/\n  simp",
    "\n  have h_axiom : 0 < 2 := by norm_num\n  have syntax_tree := h_axiom\n  linarith",
    "\n  exact my_elab_lemma x",
    "\n  have macro_step : x = x := rfl\n  exact Nat.le_of_lt_succ (by omega)",
    "\n  simp [Foo.def, Nat.succ_le_iff, elab_helper, h_notation, unsafe_bound]",
    "\n  have := show \"#eval sorry\" = \"#eval sorry\" from rfl\n  simp",
    "\n  open Real in\n  nlinarith [Real.sq_sqrt (le_of_lt hx)]",
    "\n  set_option linter.unusedVariables false in\n  omega",
    "\n  haveI : Decidable (x = 1) := Classical.dec _\n  classical\n  decide",
    "\n  rcases h with ⟨x, hx'⟩\n  exact ⟨x, hx', by positivity⟩",
    "\n  norm_num [Finset.sum_range_succ, show (4 : ℝ) = 2 * 2 by norm_num]",
    "\n  exact ⟨'a', rfl⟩",
    "\n  intro x₁ x₂ hαβ\n  simp_all [import_lemma, theorem_1]",
]


@pytest.mark.parametrize(("proof", "reason"), CHEATS)
def test_each_cheat_is_rejected_with_its_reason(proof: str, reason: str) -> None:
    rejection = C.check_proof(proof)
    assert rejection is not None and rejection.reason == reason, (proof, rejection)
    assert reason in C.REASONS
    verdict = static_verdict(ProofJob("k", "import Mathlib", "theorem t (x : ℕ) : x = x := by", proof))
    assert verdict is not None and verdict.verdict == FAILED and verdict.reason == reason


@pytest.mark.parametrize("proof", HONEST)
def test_honest_proofs_that_mention_the_words_pass(proof: str) -> None:
    assert C.check_proof(proof) is None


def test_tokens_read_whole_identifiers_and_drop_comments_and_strings() -> None:
    toks = [t.text for t in lex('h_axiom.foo x₁ «weird name» -- #eval\n"#exit" /- a /- b -/ c -/ #check')]
    assert toks == ["h_axiom.foo", "x₁", "«weird name»", '"#exit"', "#", "check"]


def test_statements() -> None:
    assert C.statement_name("/-- doc -/\ntheorem mathd_algebra_1 (x : ℝ) : x = x := by") == "mathd_algebra_1"
    assert C.statement_name("lemma foo.bar : True := by") == "foo.bar"
    assert C.statement_name("example : True := by") is None
    assert C.check_statement("theorem t (x : ℕ) (h_axiom : x = 1) : x = 1 := by") is None
    assert C.check_statement("example : True := by").reason == C.BAD_STATEMENT  # type: ignore[union-attr]
    bad = C.check_statement("theorem t : (by run_tac pure () ; exact True) := by")
    assert bad is not None and bad.reason == C.RUN_TAC
    two = C.check_statement("def helper := 1\ntheorem t : helper = 1 := by")
    assert two is not None and two.reason == C.BAD_STATEMENT


def _msg(severity: str, data: str) -> dict[str, object]:
    return {"severity": severity, "pos": {"line": 1, "column": 0}, "endPos": {"line": 1, "column": 1}, "data": data}


GOOD_AUDIT = {"env": 3, "messages": [_msg("info", "'t' depends on axioms: [propext, Classical.choice, Quot.sound]"),
                                     _msg("info", "t : 1 = 1")]}


def test_verdict_rules() -> None:
    clean = {"env": 2}
    assert V.judge(clean, GOOD_AUDIT, "t : 1 = 1").verdict == VERIFIED
    for data in ("declaration uses 'sorry'", "declaration uses `sorry`"):
        v = V.judge({"env": 2, "messages": [_msg("warning", data)]}, None, None)
        assert (v.verdict, v.reason) == (FAILED, V.SORRY)
    v = V.judge({"env": 2, "sorries": [{"goal": "⊢ False"}]}, None, None)
    assert v.reason == V.SORRY
    v = V.judge({"env": 2, "messages": [_msg("warning", "linarith failed to find a contradiction")]}, None, None)
    assert v.reason == V.FAILED_WARNING
    v = V.judge({"env": 2, "messages": [_msg("warning", "unused variable `h`")]}, GOOD_AUDIT, "t : 1 = 1")
    assert v.verdict == VERIFIED and v.messages[0].startswith("warning 1:0: unused variable")
    v = V.judge({"env": 2, "messages": [_msg("error", "unsolved goals")]}, None, None)
    assert v.reason == V.LEAN_ERROR and "unsolved goals" in v.messages[0]
    no_axioms = {"env": 3, "messages": [_msg("info", "'t' does not depend on any axioms"), _msg("info", "t : 1 = 1")]}
    assert V.judge(clean, no_axioms, "t : 1 = 1").verdict == VERIFIED
    for axioms in ("propext, sorryAx", "Lean.ofReduceBool", "cheat, propext"):
        audit = {"env": 3, "messages": [_msg("info", f"'t' depends on axioms: [{axioms}]"), _msg("info", "t : 1 = 1")]}
        assert V.judge(clean, audit, "t : 1 = 1").reason == V.AXIOMS
    assert V.judge(clean, GOOD_AUDIT, "t : 2 = 2").reason == V.STATEMENT_CHANGED
    missing = {"env": 3, "messages": [_msg("error", "unknown constant 't'")]}
    assert V.judge(clean, missing, None).reason == V.STATEMENT_MISSING
    assert V.judge(clean, {"env": 3}, None).reason == V.AUDIT_UNREADABLE


def test_messages_are_truncated() -> None:
    v = V.judge({"env": 1, "messages": [_msg("error", "x" * 10_000)] * 50}, None, None)
    assert len(v.messages) == V.MAX_MESSAGES and len(v.messages[0]) < V.MESSAGE_CHARS + 100


def test_rules_on_recorded_replies(transcripts: Path) -> None:
    def replies(name: str) -> list[dict[str, object]]:
        text = (transcripts / f"{name}.expected.out").read_text()
        return [json.loads(b) for b in text.split("\n\n") if b.strip()]

    assert V.proof_failure(replies("tactic_sorry")[0]) == V.SORRY
    assert V.proof_failure(replies("term_sorry")[0]) == V.SORRY
    assert V.proof_failure(replies("incomplete")[0]) == V.LEAN_ERROR
    assert [V.proof_failure(r) for r in replies("have_by_sorry")[:2]] == [V.LEAN_ERROR, V.SORRY]
    assert V.proof_failure(replies("dup_msg")[0]) is None
