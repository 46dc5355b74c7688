"""Issue 26: no model text reaches Lean's evaluator, the re-check binds meanings, honest proofs pass.

One test (or table) per class of the issue; each fails on the code before issue 26:
class 1 (tactic configs are evaluated), class 2 (names a token filter never sees), class 4 (the
re-check binds names, not meanings), class 5 (the checker elaborates model text), 7a-7d (honest
proofs always rejected). The pool runs the stand-in REPL (fake_repl.py) and the faithful checker
model (fake_checker.py), which applies lean/SgsKernelCheck.lean's rules. Classes 3 and 6 (the
REPL's process tree): test_lean_process_filter.py. Real Lean: test_lean_real.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from leanlib import run_pool

from sgsbatch.verification import checks as C
from sgsbatch.verification.verdict import FAILED, VERIFIED, ProofJob

HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n"
D3K_HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"

# ------------------------------------------------------------------ class 1: configs are literals
CONFIG_CHEATS = [
    "\n  simp (config := { decide := (fun _ => true) () })",
    "\n  omega (config := { splitDisjunctions := Nat.succ 0 = 1 })",
    "\n  decide (config := default)\n  simp (config := Id.run (pure {}))",
    "\n  aesop (config := { maxRuleApplications := (fun _ => 5) () })",
    "\n  linarith (config := { discharger := by simp })",
    "\n  rw (config := { occs := .pos (List.range 3) }) [h]",
    "\n  nlinarith (maxDegree := Nat.succ 1) [sq_nonneg x]",
]
CONFIG_HONEST = [
    "\n  simp (config := { decide := true })",
    "\n  simp (config := {})\n  omega",
    "\n  rw (config := { occs := .pos [1, 2] }) [h]",
    "\n  decide (config := { kernel := true })",
    "\n  aesop (config := { maxRuleApplications := 500, terminal := true })",
    "\n  simp +contextual -zeta\n  linarith (config := { splitNe := true })",
    "\n  simp (config := { Simp.neutralConfig with arith := true, maxSteps := 100000 })",
    "\n  exact foo (h := hx) (n := 3)",
]


@pytest.mark.parametrize("proof", CONFIG_CHEATS)
def test_class1_a_config_that_is_not_a_literal_is_refused(proof: str) -> None:
    rejection = C.check_proof(proof)
    assert rejection is not None and rejection.reason == C.CONFIG, (proof, rejection)
    assert "evaluated as code" in rejection.detail


@pytest.mark.parametrize("proof", CONFIG_HONEST)
def test_class1_literal_configs_pass(proof: str) -> None:
    assert C.check_proof(proof) is None


# ------------------------------------------------------------------ class 2: names after resolution
@pytest.mark.parametrize(("proof", "reason"), [
    ("\n  have := (.FS.writeFile \"/tmp/x\" \"y\" : IO Unit)\n  simp", C.LEADING_DOT),
    ("\n  exact absurd (.Process.spawn {cmd := \"sh\"}) id", C.LEADING_DOT),
    ("\n  have := timeit \"\" (.println \"x\")\n  simp", C.IO),
    ("\n  plausible", C.EVAL),
    ("\n  slim_check", C.EVAL),
])
def test_class2_names_a_filter_cannot_resolve_are_refused(proof: str, reason: str) -> None:
    rejection = C.check_proof(proof)
    assert rejection is not None and rejection.reason == reason, (proof, rejection)


def test_class2_leading_dot_and_field_notation_that_stay_honest() -> None:
    for proof in ("\n  exact .inl rfl", "\n  exact ⟨.refl _, (h x).le.trans (le_of_eq rfl)⟩",
                  "\n  exact (foo x).symm.trans h"):
        assert C.check_proof(proof) is None, proof


def _job(key: str, proof: str, theorem: str = "theorem t_{key} (x : ℕ) : x + 0 = x := by",
         header: str = HEADER) -> ProofJob:
    return ProofJob(key, header, theorem.format(key=key), f"\n  {proof}")


_run = run_pool


def test_class2_a_resolved_io_name_fails_the_recheck(tmp_path: Path) -> None:
    # `simp -- FAKE_RESOLVES_IO` stands for a proof whose names pass the filter (generalized field
    # notation, `.println` against an expected `IO _`) and resolve to IO.FS.writeFile.
    got = _run(tmp_path, [_job("io", "simp -- FAKE_RESOLVES_IO"), _job("ok", "simp")])
    assert got["io"][:2] == (FAILED, "recheck_forbidden_constant"), got["io"]
    assert any("IO.FS.writeFile" in m for m in got["io"][2])
    assert got["ok"][:2] == (VERIFIED, None)


# ------------------------------------------------------------------ class 4: meanings, not names
MATCH_THEOREM = "theorem t_{key} : ∀ p : ℕ × ℕ, (fun (a, b) => a + b) p = p.1 + p.2 := by"


def test_class4_a_redefined_statement_matcher_is_refused(tmp_path: Path) -> None:
    got = _run(tmp_path, [_job("redef", "simp -- FAKE_REDEFINE_MATCHER", MATCH_THEOREM),
                          _job("honest", "simp", MATCH_THEOREM)])
    assert got["redef"][:2] == (FAILED, "recheck_meaning_changed"), got["redef"]
    assert got["honest"][:2] == (VERIFIED, None), got["honest"]


# ------------------------------------------------------------------ class 5: statements hold no code
@pytest.mark.parametrize("theorem", [
    "theorem t (h : (by simp (config := { decide := true }); exact 1) = 1) : True := by",
    "theorem t (x : ℕ) (h : x = (show ℕ by exact 2)) : x = 2 := by",
    "theorem t : (Id.run do return 1) = 1 := by",
    "theorem t (f : ℕ → ℕ := by exact id) : f 0 = 0 := by",
])
def test_class5_a_statement_with_a_tactic_or_do_block_is_refused(theorem: str) -> None:
    rejection = C.check_statement(theorem)
    assert rejection is not None and rejection.reason == C.STATEMENT_CODE, (theorem, rejection)


def test_class5_the_checker_gets_the_statement_without_its_tactic_block(tmp_path: Path, fake_env: Path) -> None:
    assert C.reference_statement("theorem t : 1 = 1 := by") == "theorem t : 1 = 1 :="
    assert C.reference_statement("theorem t : 1 = 1 :=") == "theorem t : 1 = 1 :="
    # The pool sends exactly that: the faithful checker model refuses any `by` left in it.
    got = _run(tmp_path, [_job("ok", "simp")])
    assert got["ok"][:2] == (VERIFIED, None), got["ok"]


# ------------------------------------------------------------------ 7: honest proofs pass
def test_7a_compiler_artefacts_of_a_data_valued_match_are_skipped(tmp_path: Path) -> None:
    theorem = "theorem t_{key} (n : ℕ) : (match n with | 0 => 1 | _ => 2) ≥ 1 := by"
    got = _run(tmp_path, [_job("match", "split <;> simp", theorem), _job("unsafe", "simp -- FAKE_USES_UNSAFE")])
    assert got["match"][:2] == (VERIFIED, None), got["match"]  # its `_cstage1` artefact is skipped
    assert got["unsafe"][:2] == (FAILED, "recheck_unsafe_constant"), got["unsafe"]  # one the theorem uses is not


def test_7b_a_header_namespace_names_the_theorem(tmp_path: Path) -> None:
    header = "import Mathlib\nnamespace Geometry\nsection\nend\n"
    assert C.declared_name(header, "theorem t : True := by") == "Geometry.t"
    assert C.declared_name(header + "end Geometry\n", "theorem t : True := by") == "t"
    assert C.declared_name(header, "theorem _root_.t : True := by") == "t"
    got = _run(tmp_path, [_job("ns", "simp", header=header)])
    assert got["ns"][:2] == (VERIFIED, None), got["ns"]


@pytest.mark.parametrize("theorem", [
    "theorem t (RS ST EST : ℝ) (h₀ : RS = 2 * ST) (h₁ : ST = EST) : RS = 2 * EST := by",
    "theorem t {α β : Type*} [MeasurableSpace α] [MeasurableSpace β] (κ : ProbabilityTheory.Kernel α β) : "
    "κ = κ := by",
    "open Matrix in theorem t (A : Matrix (Fin 2) (Fin 2) ℝ) : trace A = A 0 0 + A 1 1 := by",
])
def test_7c_honest_names_pass(theorem: str) -> None:
    assert C.check_statement(theorem) is None, C.check_statement(theorem)
    assert C.check_proof("\n  rw [trace_fin_two]\n  have hST : ST = EST := h₁\n  simp [hST]") is None


def test_7c_what_stays_refused() -> None:
    for proof, reason in [("\n  have := ST.Ref.get\n  simp", C.IO), ("\n  trace \"x\"\n  simp", C.TRACE),
                          ("\n  exact Lean.Kernel.whnf", C.META), ("\n  open Lean in exact Kernel.whnf", C.META),
                          ("\n  have := IO\n  simp", C.IO)]:
        rejection = C.check_proof(proof)
        assert rejection is not None and rejection.reason == reason, (proof, rejection)


def test_7d_the_kernel_gets_the_header_heartbeat_budget(tmp_path: Path) -> None:
    heavy = "decide -- FAKE_KERNEL_HEAVY"
    got = _run(tmp_path, [_job("d3k", heavy, header=D3K_HEADER), _job("default", heavy, header="import Mathlib\n")])
    assert got["d3k"][:2] == (VERIFIED, None), got["d3k"]  # maxHeartbeats 0: no budget, as in the REPL
    assert got["default"][:2] == (FAILED, "recheck_kernel_rejected"), got["default"]
