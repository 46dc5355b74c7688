"""checks.py on the lexer: escaped options, IO and meta names, evaluating elaborators, `#` commands
versus Mathlib's `#s`, commands after the proof, headers, `open ... in` statements, the real data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sgsbatch.verification import checks as C
from sgsbatch.verification.lean import static_verdict
from sgsbatch.verification.verdict import FAILED, ProofJob

D3K = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "d3k"

CHEATS: list[tuple[str, str]] = [
    # options compared on unescaped names, against the allow-list
    ("\n  set_option «debug».«skipKernelTC» true in\n  simp", C.SET_OPTION),
    ("\n  set_option debug.«skipKernelTC» true in simp", C.SET_OPTION),
    ("\n  set_option «maxRecDepth» 999999 in simp", C.SET_OPTION),  # over the bound, compared unescaped
    ("\n  set_option trust 0 in simp", C.SET_OPTION),
    ("\n  set_option trace.Meta.Tactic.simp true in simp", C.SET_OPTION),
    ("\n  set_option interpreter.prefer_native true in simp", C.SET_OPTION),
    ("\n  set_option pp.kernel true in simp", C.SET_OPTION),
    ("\n  set_option diagnostics true in simp", C.SET_OPTION),
    # the IO world, by name component
    ("\n  have := (IO.println \"x\").run\n  simp", C.IO),
    ("\n  exact (EStateM.run (IO.FS.readFile \"/etc/passwd\") ()).casesOn (fun _ _ => rfl) (fun _ _ => rfl)", C.IO),
    ("\n  have := BaseIO.toIO (pure ())\n  simp", C.IO),
    ("\n  have := System.FilePath.mk \"x\"\n  simp", C.IO),
    ("\n  have := «IO».«Process».spawn\n  simp", C.IO),
    ("\n  have := ST.Ref.get\n  simp", C.IO),
    ("\n  polyrith", C.IO),
    ("\n  have := include_str \"/etc/passwd\"\n  simp", C.IO),
    ("\n  have := unsafeBaseIO (pure 1)\n  simp", C.UNSAFE),
    ("\n  have := unsafeIO (pure 1)\n  simp", C.UNSAFE),
    ("\n  have := ptrAddrUnsafe 1\n  simp", C.UNSAFE),
    ("\n  have := unsafeCast (α := Nat) 1\n  simp", C.UNSAFE),
    # meta-programming names, quotations, name literals
    ("\n  exact Lean.Elab.Term.elabTerm", C.META),
    ("\n  have := Lean.Meta.whnf\n  simp", C.META),
    ("\n  have := Lean.Core.getEnv\n  simp", C.META),
    ("\n  have := Lean.Environment.empty\n  simp", C.META),
    ("\n  have := Elab.Tactic.evalTactic\n  simp", C.META),
    ("\n  have := `(tactic| simp)\n  simp", C.META),
    ("\n  have := `Lean.Kernel\n  simp", C.META),
    ("\n  exact throwError s!\"{1}\"", C.META),
    # evaluating elaborators and tactics
    ("\n  exact (eval% (2 + 2 : Nat))", C.EVAL),
    ("\n  trace \"hello\"\n  simp", C.TRACE),
    ("\n  have := dbg_trace \"x\"; 1\n  simp", C.TRACE),
    ("\n  have := dbgTrace \"x\" fun _ => 1\n  simp", C.TRACE),
    ("\n  run_tac pure ()", C.RUN_TAC),
    ("\n  exact by_elab pure (Lean.mkConst ``True.intro)", C.RUN_ELAB),
    ("\n  bv_decide", C.NATIVE_DECIDE),
    # `#` commands, glued anywhere
    ("\n  norm_num\n  1#eval IO.println \"x\"", C.EVAL),
    ("\n  simp\n#eval! 1", C.EVAL),
    ("\n  simp [show (1:ℕ) = 1 from rfl]\n  #check_failure x", C.HASH_COMMAND),
    ("\n  simp\n  #reduce 1", C.HASH_COMMAND),
    ("\n  simp\n  #synth Inhabited Nat", C.HASH_COMMAND),
    ("\n  simp\n  #guard_msgs in\n  #eval 1", C.HASH_COMMAND),
    ("\n  simp\n  #print axioms t", C.HASH_COMMAND),
    ("\n  simp\n  #exit", C.EXIT),
    # code inside interpolated strings
    ("\n  have := s!\"{ (run_cmd pure ()) }\"\n  simp", C.RUN_CMD),
    ("\n  have := s!\"a{ s!\"{#eval 1}\" }\"\n  simp", C.EVAL),
    ("\n  have := m!\"{ IO.println 1 }\"\n  simp", C.IO),
    # a plain string ends where Lean ends it: the code after is read
    ("\n  have := \"a\\\"b\"; exact IO.foo", C.IO),
    ("\n  have := ('\"', 1)\n  run_tac pure ()", C.RUN_TAC),
    ("\n  have := r#\"x\"y\"#\n#eval 1", C.EVAL),
    # postfix symbols glued to keywords
    ("\n  simp [x⁻¹axiom]", C.AXIOM),
    ("\n  simp [sᶜsorry]", C.SORRY),
    # deny-list additions
    ("\n  simp\nbinder_predicate x \" > \" y:term => `($x > $y)", C.MACRO),
    ("\n  simp\nproof_wanted foo : True", C.DECLARATION),
    ("\n  simp\n/-- doc -/\nlemma h : True := trivial", C.COMMAND),
    ("\n  simp\n/-! module doc -/", C.COMMAND),
    ("\n  simp\nbuiltin_initialize pure ()", C.ELAB),
    ("\n  simp\nregister_simp_attr foo", C.INITIALIZE),
    # a new command after the proof, of a word no table knows
    ("\n  simp\nsome_future_command foo", C.TOP_LEVEL),
    ("\n    simp\n  unknown_cmd", C.TOP_LEVEL),
    ("\n  simp\n@[simp] foo", C.TOP_LEVEL),
    ("\n  simp\n#s", C.TOP_LEVEL),
    # text Lean cannot read
    ("\n  simp\n  \"never closed #eval", C.LEX_ERROR),
    ("\n  simp (\n  unknown_cmd", C.LEX_ERROR),
    ("\n  simp )\nfoo (", C.LEX_ERROR),
    ("\n\tsimp", C.LEX_ERROR),
    ("\n  exact '\\q'", C.LEX_ERROR),
]

HONEST: list[str] = [
    # Mathlib's Finset.card notation
    "\n  open Finset in\n  have : #s = 3 := hs\n  omega",
    "\n  rw [show #(s ∩ t) = 2 from h]",
    "\n  have h : #{x ∈ s | p x} ≤ #s := card_filter_le _ _\n  exact h",
    "\n  simp [#s.filter p]",
    # ordinary math whose names look like the forbidden ones
    "\n  have hIO : 0 < 1 := one_pos\n  have h_io := hIO\n  have hST := h_io\n  exact hST",
    "\n  simp [Set.Ioo, Set.Icc, Finset.sum_range_succ, Real.sqrt_nonneg, Nat.sub_le]",
    "\n  exact ⟨Real.sqrt 2, Real.sqrt_nonneg 2⟩",
    "\n  rw [Matrix.trace_fin_two, A.trace]",
    "\n  simp [unsafe_bound, h_unsafe, evaluation, evalf]",
    "\n  simp only [Finset.card_eq_three] at hs ⊢\n  trace_state\n  aesop",
    # options on the allow-list
    "\n  set_option linter.unusedVariables false in\n  omega",
    "\n  set_option pp.all true in\n  simp",
    "\n  set_option push_neg.use_distrib true in\n  push_neg at h\n  exact h",
    "\n  set_option «linter».unusedTactic false in\n  simp",
    # postfix symbols, quotes, unicode
    "\n  simp [mul_inv_cancel₀ hx, hsᶜ, f ⁻¹' t, f '' s]",
    "\n  have : ∑' i : ℕ, (0:ℝ) = 0 := tsum_zero\n  simp [Set.compl_def, x⁻¹]",
    "\n  intro α β hαβ x₁ aᵢ\n  exact hαβ x₁ aᵢ",
    "\n  exact ⟨'a', '\\n', '\\'', '\\\\', '\\x41', \"s\\\"q\\u03B1\"⟩",
    # comments and strings mentioning everything
    "\n  -- #eval, run_cmd, theorem, IO.FS, set_option maxHeartbeats 0 in\n  norm_num",
    "\n  /- nested /- #exit -/ axiom -/\n  simp",
    "\n  have := \"theorem foo : False := by sorry\"\n  simp",
    "\n  have := \"{#eval 1}\"\n  simp",
    # layout: continuation lines, brackets, calc, nested blocks, one-line proofs
    " simp",
    " nlinarith [sq_nonneg (a - b),\n  sq_nonneg (a + b)]",
    "\n  nlinarith [sq_nonneg (a - b),\nsq_nonneg (a + b), mul_pos ha hb]",
    "\n  calc a = b := by simp\n    _ = c := by ring",
    "\n  constructor\n  · intro h\n    linarith\n  · intro h\n    nlinarith [h]",
    "\n  have h : a = b := by\n    simp\n  exact h\n  <;> simp",
    "\nsimp\nring_nf",  # a block at column 0
    "\n  rcases h with ⟨x, hx⟩\n  exact ⟨x, by positivity⟩",
    "\n  open Real in\n  nlinarith [Real.sq_sqrt (le_of_lt hx)]",
    "\n  decide",
]


@pytest.mark.parametrize(("proof", "reason"), CHEATS)
def test_each_cheat_is_refused_with_its_reason(proof: str, reason: str) -> None:
    rejection = C.check_proof(proof)
    assert rejection is not None and rejection.reason == reason, (proof, rejection)
    assert reason in C.REASONS


@pytest.mark.parametrize("proof", HONEST)
def test_honest_look_alikes_pass(proof: str) -> None:
    assert C.check_proof(proof) is None


HEADERS_OK = [
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n",
    "import Mathlib\n-- a comment\n/- a block -/\nopen Finset (card filter)\nnamespace Foo\nsection\n"
    "noncomputable section\nuniverse u v\nset_option linter.unusedVariables false\nend\nend Foo\n",
    "",
]
HEADERS_BAD = [
    ("import Mathlib\nset_option debug.skipKernelTC true\n", C.SET_OPTION),
    ("import Mathlib\nset_option «maxRecDepth» (by exact 1)\n", C.BAD_HEADER),
    ("import Mathlib\nopen Real in\n", C.BAD_HEADER),
    ("import Mathlib\nset_option maxHeartbeats 0 in\n", C.BAD_HEADER),
    ("import Mathlib\n#eval 1\n", C.BAD_HEADER),
    ("import Mathlib\naxiom cheat : False\n", C.BAD_HEADER),
    ("import Mathlib\nopen Lean Elab\n", C.META),
    ("import Mathlib\nopen IO\n", C.IO),
    ("import Mathlib\ndef x := 1\n", C.BAD_HEADER),
    ("import Mathlib\n\"unterminated\n", C.BAD_HEADER),
]


@pytest.mark.parametrize("header", HEADERS_OK)
def test_headers_that_pass(header: str) -> None:
    assert C.check_header(header) is None


@pytest.mark.parametrize(("header", "reason"), HEADERS_BAD)
def test_headers_refused(header: str, reason: str) -> None:
    rejection = C.check_header(header)
    assert rejection is not None and rejection.reason == reason, (header, rejection)
    verdict = static_verdict(ProofJob("k", header, "theorem t : True := by", "\n  trivial"))
    assert verdict is not None and (verdict.verdict, verdict.reason) == (FAILED, reason)


def test_statements_with_open_in_and_finset_card() -> None:
    for text, name in [("open Real in theorem foo (x : ℝ) : Real.sqrt (x ^ 2) = |x| := by", "foo"),
                       ("open Nat Real in\ntheorem bar : (2 : ℝ) ≤ 3 := by", "bar"),
                       ("open Finset in\n/-- doc -/ theorem baz (s : Finset ℕ) (h : #s = 3) : #s ≠ 0 := by", "baz"),
                       ("/-- doc -/\nopen Finset in\nlemma qux (s : Finset ℕ) : #(s ∩ s) = #s := by", "qux")]:
        assert C.statement_name(text) == name, text
        if name is not None:
            assert C.check_statement(text) is None, text
    for text, reason in [("open Lean Elab in theorem t : True := by", C.META),
                         ("open Real\ntheorem t : True := by", C.BAD_STATEMENT),
                         ("@[implemented_by f] theorem t : True := by", C.BAD_STATEMENT),
                         ("theorem t : (#eval 1) = 1 := by", C.EVAL),
                         ("theorem t : (IO.FS.readFile \"x\").run = 1 := by", C.IO),
                         ("open Real in #eval 1\ntheorem t : True := by", C.BAD_STATEMENT)]:
        rejection = C.check_statement(text)
        assert rejection is not None and rejection.reason == reason, (text, rejection)


# A conjecture's `set_option NAME VALUE in` prefix (DeepSeek-Prover-V2 writes `maxHeartbeats 400000`): NAME on
# the header's allow-list, VALUE one literal token, checked like any token.
OPTION_PREFIXES_OK = [
    "set_option maxHeartbeats 400000 in\ntheorem t : True := by",
    "set_option maxHeartbeats 400000 in\nopen BigOperators Real in\n/-- doc -/\ntheorem t : True := by",
    "open Real in set_option linter.unusedVariables false in theorem t : True := by",
    "set_option pp.all true in\nset_option autoImplicit false in\nlemma t : True := by",
]
OPTION_PREFIXES_BAD = [
    ("set_option maxRecDepth 1000000 in\ntheorem t : True := by", C.SET_OPTION),  # over the default bound
    ("set_option debug.skipKernelTC true in\ntheorem t : True := by", C.SET_OPTION),
    ("set_option «debug».«skipKernelTC» true in\ntheorem t : True := by", C.SET_OPTION),
    ("set_option trace.Meta.synthInstance true in theorem t : True := by", C.SET_OPTION),
    ("set_option pp.all IO.println in theorem t : True := by", C.IO),
    # no `in`: a command that would outlive the theorem in the REPL's environment
    ("set_option maxHeartbeats 400000\ntheorem t : True := by", C.BAD_STATEMENT),
    # the value is one literal: a term (and so a `by` block) cannot be one
    ("set_option maxHeartbeats (by exact 0) in theorem t : True := by", C.BAD_STATEMENT),
    ("set_option maxHeartbeats in theorem t : True := by", C.BAD_STATEMENT),
    ("set_option maxHeartbeats 0 in\n#eval 1\ntheorem t : True := by", C.BAD_STATEMENT),
    ("import Mathlib\ntheorem t : True := by", C.BAD_STATEMENT),
]


@pytest.mark.parametrize("text", OPTION_PREFIXES_OK)
def test_statements_with_set_option_in(text: str) -> None:
    assert C.check_statement(text) is None and C.statement_name(text) == "t"


@pytest.mark.parametrize(("text", "reason"), OPTION_PREFIXES_BAD)
def test_statements_with_set_option_refused(text: str, reason: str) -> None:
    verdict = static_verdict(ProofJob("k", "import Mathlib\n", text, "\n  trivial"))
    assert verdict is not None and (verdict.verdict, verdict.reason) == (FAILED, reason), (text, verdict)


@pytest.mark.skipif(not D3K.is_dir(), reason="the shared D_3k data is not next to this checkout")
def test_every_header_and_statement_of_the_real_data_passes() -> None:
    rows = 0
    for path in sorted(D3K.glob("*.json")):
        for row in json.loads(path.read_text(encoding="utf-8"))["target_statements"].values():
            rows += 1
            assert C.check_header(row["header"]) is None, (row["id"], C.check_header(row["header"]))
            assert C.check_statement(row["theorem"]) is None, (row["id"], C.check_statement(row["theorem"]))
            assert C.statement_name(row["theorem"]) is not None, row["id"]
    assert rows > 3000
