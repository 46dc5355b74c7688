"""Issue 38: the verifier judges proofs by what they may do. The tactic allow-list (tactics.py) as
skeleton.py applies it, class by class: a tactic nobody listed is refused wherever Lean would run
it (class 1), names reach no IO or meta namespace through `open` (class 2), named arguments are
judged by what they belong to (class 4), resource options within bounds (class 5), and Lean-only
roots as dotted heads are honest (class 7). Every case here that is refused passed the static checks
before issue 38 (a deny-list of names), and every honest one was refused by them."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgsbatch.verification import checks as C
from sgsbatch.verification.lean import static_verdict
from sgsbatch.verification.tactics import SHAPES, TABLE, lookup
from sgsbatch.verification.verdict import FAILED, ProofJob

HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n"
THEOREM = "theorem t (x y : ℝ) (h : 0 < x) : 0 < x * y := by"

# Class 1: a tactic that is not on the allow-list, in every place Lean starts a tactic. `evil_tac` stands for
# any tactic nobody listed (Mathlib's `run_conv`, `success_if_fail_with_msg`, one a future Mathlib adds).
PLACES: list[str] = [
    "\n  evil_tac",
    "\n  simp\n  evil_tac foo",
    "\n  simp; evil_tac",
    "\n  constructor <;> evil_tac",
    "\n  constructor\n  <;> evil_tac",
    "\n  simp <|> evil_tac",
    "\n  · evil_tac",
    "\n  . evil_tac",
    "\n  (simp; evil_tac)",
    "\n  { simp\n    evil_tac }",
    "\n  try evil_tac",
    "\n  all_goals\n    evil_tac",
    "\n  iterate 3 evil_tac",
    "\n  first | simp | evil_tac",
    "\n  first\n  | simp\n  | evil_tac",
    "\n  case inl h => evil_tac",
    "\n  next =>\n    evil_tac",
    "\n  on_goal 2 => evil_tac",
    "\n  cases h with\n  | inl h => simp\n  | inr h => evil_tac",
    "\n  induction n with\n  | zero => simp\n  | succ n ih =>\n    rw [ih]\n    evil_tac",
    "\n  match h with\n  | .inl h => evil_tac\n  | .inr h => simp",
    "\n  if hx : x = 1 then simp else evil_tac",
    "\n  if hx : x = 1 then evil_tac else simp",
    "\n  set_option maxHeartbeats 400000 in\n  evil_tac",
    "\n  open Real in evil_tac",
    "\n  have h2 : 0 < x := by evil_tac\n  simp",
    "\n  have h2 : 0 < x := by\n    simp\n    evil_tac\n  simp",
    "\n  exact ⟨by norm_num, by evil_tac⟩",
    "\n  exact mul_pos h (by\n    evil_tac)",
    "\n  refine fun z => ?_\n  exact (show 0 < z from by evil_tac)",
    "\n  rw [show (2 : ℝ) = 1 + 1 by evil_tac]",
    "\n  calc x * y = y * x := by ring\n  _ = 0 := by evil_tac",
    "\n  calc x * y\n      = y * x := by ring\n    _ = 0 := by\n      evil_tac",
    "\n  field_simp (disch := evil_tac)",
    "\n  simp (disch := simp; evil_tac) [h]",
    "\n  linear_combination (norm := evil_tac) h",
    "\n  conv => evil_tac",
    "\n  conv_lhs => rw [h]; evil_tac",
    "\n  conv at h =>\n    lhs\n    evil_tac",
    "\n  conv => tactic => evil_tac",
    "\n  simp? says evil_tac",
    "\n  obtain ⟨z, hz⟩ : ∃ z, z = x := ⟨x, rfl⟩\n  · evil_tac",
    "\n  suffices hs : 0 < y by evil_tac\n  simp",
    "\n  have := fun (n : ℕ) => (by evil_tac : n = n)\n  simp",
    # Lean's reading, not a pretty printer's: glued bars and dots, `↦` for `=>`, `decreasing_by`
    "\n  first |simp |evil_tac",
    "\n  first | exact h |evil_tac",
    "\n  .evil_tac",
    "\n  ·evil_tac",
    "\n  induction n with\n  | zero ↦ evil_tac\n  | succ n ih ↦ simp",
    "\n  cases h with | inl h => simp | inr h => evil_tac",
    "\n  exact let rec f : ℕ → ℕ := fun n => f n\n    decreasing_by evil_tac\n  f 0",
    "\n  if hx : x = 1 then\n    simp\n  else\n    evil_tac",
]


@pytest.mark.parametrize("proof", PLACES)
def test_a_tactic_off_the_list_is_refused_wherever_lean_would_run_it(proof: str) -> None:
    rejection = C.check_proof(proof)
    assert rejection is not None and rejection.reason == C.UNKNOWN_TACTIC, (proof, rejection)
    assert "evil_tac" in rejection.detail  # the refusal names the tactic: a researcher can add it


# Class 1, the published examples: Mathlib's conv-mode macro over `run_tac`, and a tactic that evaluates
# its message term as a `String`; neither is a name the deny-list knew.
@pytest.mark.parametrize(("proof", "tactic"), [
    ("\n  conv => run_conv (do pure ())", "run_conv"),
    ("\n  conv_lhs => run_conv pure ()", "run_conv"),
    ("\n  success_if_fail_with_msg (toString (Task.spawn fun _ => 0).get) simp", "success_if_fail_with_msg"),
    ("\n  guard_msgs in simp", "guard_msgs"),
    ("\n  fail_if_no_progress simp", "fail_if_no_progress"),
    ("\n  show_term simp", "show_term"),
    ("\n  rw? ", "rw?"),
    ("\n  decide!", "decide!"),
])
def test_evaluating_tactics_are_refused_as_unknown(proof: str, tactic: str) -> None:
    rejection = C.check_proof(proof)
    assert rejection is not None and rejection.reason == C.UNKNOWN_TACTIC, rejection
    assert f"`{tactic}`" in rejection.detail


def test_lean_unsafe_term_stays_refused_after_aesop_is_allowed() -> None:
    for proof in ("\n  exact unsafe (ptrAddr h)", "\n  exact ⟨h, unsafe foo⟩", "\n  aesop (add safe h, unsafe g)"):
        rejection = C.check_proof(proof)
        assert rejection is not None and rejection.reason == C.UNSAFE, (proof, rejection)


def test_a_symbol_where_a_tactic_starts_is_refused() -> None:
    rejection = C.check_proof("\n  simp\n  ⟨x, rfl⟩")
    assert rejection is not None and rejection.reason == C.UNKNOWN_TACTIC


# Honest layouts of the shapes the walk reads (each as provers write them).
HONEST_SHAPES: list[str] = [
    "\n  if hx : x = 1 then\n    simp [hx]\n  else\n    nlinarith [sq_nonneg x]",
    "\n  first\n  | linarith\n  | nlinarith [sq_nonneg (x - 1)]",
    "\n  rcases h with ⟨a, ha⟩ | ⟨b, hb⟩ | hc\n  all_goals simp_all",
    "\n  obtain rfl | rfl := h\n  · norm_num\n  · norm_num",
    "\n  cases h with\n  | inl h => nlinarith [abs_nonneg x, h]\n  | inr h =>\n    rw [abs_of_neg h]\n    linarith",
    "\n  have h2 : |x - 1| ≤ 2 := by\n    rw [abs_le]\n    constructor <;> linarith\n  linarith [abs_nonneg (x - 1)]",
    "\n  calc\n    x * y = y * x := by ring\n    _ ≤ y * x := le_refl _",
    "\n  refine ⟨fun h => ?_, fun h => ?_⟩\n  · simpa using h\n  · exact h.le",
    "\n  conv_lhs => rw [← Nat.mod_add_div n 2]\n  ring_nf",
    "\n  conv in x * y => rw [mul_comm]",
    "\n  intro n\n  induction n using Nat.strong_induction_on with n ih\n  simp",
    "\n  match n with\n  | 0 => simp\n  | n + 1 =>\n    simp [Finset.sum_range_succ]\n    ring",
    "\n  norm_num [Nat.factorial] at h ⊢ <;> omega",
    "\n  exact fun x hx => by\n    nlinarith [hx.1, hx.2]",
    "\n  simp only [Finset.sum_range_succ, Finset.sum_range_zero]\n  norm_num\n  decide",
    # layouts the published-proof corpus showed (Lean's `withPosition(colGe ...)` and `checkColEq`)
    "\n  repeat' first\n  | constructor\n  | assumption\n  simp",
    "\n  if hm : m > 41 then\n  have : n < 50 := by nlinarith\n  interval_cases n <;> omega\n  else\n  omega",
    "\n  classical exact\n    ⟨by nlinarith [h₀.left, h₁], by nlinarith, by positivity⟩",
    "\n  all_goals induction n with\n  | zero => simp\n  | succ n ih => omega",
    "\n  simp (config := {decide := Bool.true}) only [h₁, h₂] at h₃ ⊢",
    "\n  replace h₁ : (b - 8) * (b ^ 2 - 8) = 0 := by linear_combination h₁\n  inhabit ℤ\n  nontriviality ℝ",
    "\n  unhygienic aesop\n  solve\n  | simp\n  | omega",
    "\n  aesop (add safe 1 (by positivity)) (simp_config := { decide := true }) (config := { terminal := true })",
    "\n  aesop (add unsafe 50% apply mul_pos) (rule_sets := [-builtin])",
]


@pytest.mark.parametrize("proof", HONEST_SHAPES)
def test_honest_shapes_pass(proof: str) -> None:
    assert C.check_proof(proof) is None, (proof, C.check_proof(proof))


def test_tactic_names_are_the_walk_of_the_skeleton() -> None:
    proof = ("\n  induction n with\n  | zero => simp\n  | succ n ih =>\n    rw [ih]; nlinarith [sq_nonneg (n - 1)]"
             "\n  all_goals try norm_num\n  conv => lhs; rw [h]\n  exact ⟨by positivity, fun k => by omega⟩")
    assert C.check_proof(proof) is None
    assert [name for _, name in C.tactic_names(proof)] == [
        "induction", "simp", "rw", "nlinarith", "all_goals", "try", "norm_num", "conv", "lhs", "rw", "exact",
        "positivity", "omega"]
    assert ("conv", "lhs") in C.tactic_names(proof) and ("tactic", "omega") in C.tactic_names(proof)


# Class 4: named arguments are judged by what they belong to. Lean elaborates these as terms or tactic
# syntax and never evaluates them; before issue 38 each was refused as a configuration.
HONEST_NAMED: list[str] = [
    "\n  nlinarith [mul_pos (b := y - 1) h, sq_nonneg (x - y)]",
    "\n  exact mul_pos (a := x) h (by positivity)",
    "\n  rw [Finset.sum_range_succ (f := fun i => (i : ℝ) ^ 2) n]",
    "\n  field_simp (disch := simp [h.ne'])",
    "\n  simp (disch := positivity) only [div_le_iff]",
    "\n  have := Nat.le_induction (m := 2) (P := fun n _ => 2 ≤ n) le_rfl (fun n _ h => by omega)\n  simp",
    "\n  linear_combination (norm := ring_nf) (exp := 2) h",
    "\n  simp (config := { decide := true }) [h]",
    "\n  norm_num (config := {zeta := false}) at h ⊢",
    "\n  simp +arith -zeta [h]",
    "\n  omega (config := { splitDisjunctions := true })",
]


@pytest.mark.parametrize("proof", HONEST_NAMED)
def test_named_arguments_in_terms_and_tactic_options_pass(proof: str) -> None:
    assert C.check_proof(proof) is None, (proof, C.check_proof(proof))


# ... and a configuration, which `declare_config_elab` evaluates, must still be a literal.
@pytest.mark.parametrize("proof", [
    "\n  simp (config := { zeta := (Task.spawn fun _ => true).get })",
    "\n  norm_num (config := cfgOf x) [h]",
    "\n  omega (splitDisjunctions := (fun _ => true) 0)",
    "\n  nlinarith (config := { maxSteps := 2 ^ 30 }) [h]",
    "\n  have := by\n    aesop (config := { maxRuleApplications := f 3 })\n  simp",
    "\n  aesop (add safe h) (simp_config := (fun _ => {}) 0)",
    "\n  aesop (rule_sets := [Foo]) (add unsafe 50% apply h) (config := { terminal := g 1 })",
])
def test_a_configuration_that_is_no_literal_is_refused(proof: str) -> None:
    rejection = C.check_proof(proof)
    assert rejection is not None and rejection.reason == C.CONFIG, (proof, rejection)


# Class 5: resource options, as provers write them, within the bounds of the config.
@pytest.mark.parametrize("proof", [
    "\n  set_option maxHeartbeats 400000 in\n  nlinarith [sq_nonneg (x - y)]",
    "\n  set_option maxHeartbeats 0 in\n  nlinarith [sq_nonneg (x - y)]",
    "\n  set_option maxRecDepth 10000 in\n  norm_num",
    "\n  set_option synthInstance.maxHeartbeats 100000 in simp",
    "\n  have h2 : 0 < x := by\n    set_option maxRecDepth 2000 in\n    positivity\n  nlinarith",
])
def test_resource_options_are_accepted(proof: str) -> None:
    assert C.check_proof(proof) is None, C.check_proof(proof)


def test_resource_options_are_bounded_by_the_config() -> None:
    bounds = C.OptionBounds(max_heartbeats=400000, max_rec_depth=5000)
    assert C.check_proof("\n  set_option maxHeartbeats 400000 in\n  simp", bounds) is None
    for proof in ("\n  set_option maxHeartbeats 400001 in\n  simp", "\n  set_option maxHeartbeats 0 in\n  simp",
                  "\n  set_option maxRecDepth 5001 in\n  simp", "\n  set_option synthInstance.maxHeartbeats 0 in simp"):
        rejection = C.check_proof(proof, bounds)
        assert rejection is not None and rejection.reason == C.SET_OPTION and "bound" in rejection.detail, proof
    statement = "set_option maxHeartbeats 800000 in\ntheorem t : True := by"
    assert C.check_statement(statement) is None
    refused = C.check_statement(statement, bounds)
    assert refused is not None and refused.reason == C.SET_OPTION
    assert static_verdict(ProofJob("k", HEADER, statement, "\n  trivial"), bounds) is not None
    assert static_verdict(ProofJob("k", HEADER, statement, "\n  trivial")) is None


JOBS = Path(__file__).resolve().parents[2] / "jobs" / "sgs.toml"


def test_the_bounds_are_config_keys() -> None:
    from sgsbatch.config.loading import load_config

    cfg = load_config(JOBS, overrides=["verification.max_heartbeats_option=400000"])
    assert cfg.verification.max_heartbeats_option == 400000
    assert cfg.verification.max_rec_depth_option == C.DEFAULT_BOUNDS.max_rec_depth
    with pytest.raises(ValueError, match="verification.max_rec_depth_option"):
        load_config(JOBS, overrides=["verification.max_rec_depth_option=-1"])


# Class 2: no namespace of the IO world or of Lean's meta-programming may be opened, anywhere: its names
# would resolve from single words (`FilePath`, then `.readDir` by field notation).
@pytest.mark.parametrize(("header", "theorem", "proof", "reason"), [
    (HEADER, "open System in\n" + THEOREM, "\n  simp", C.IO),
    (HEADER, THEOREM, "\n  open System in\n  have := (⟨\"/\"⟩ : FilePath).pathExists\n  simp", C.IO),
    (HEADER, THEOREM, "\n  open IO.FS in simp", C.IO),
    (HEADER, THEOREM, "\n  open ST in simp", C.IO),
    (HEADER, THEOREM, "\n  open Lean Elab Tactic in simp", C.META),
    (HEADER, THEOREM, "\n  open Meta in simp", C.META),
    (HEADER + "open System\n", THEOREM, "\n  simp", C.IO),
    (HEADER + "open Lean\n", THEOREM, "\n  simp", C.META),
    (HEADER, THEOREM, "\n  have := fun (p : FilePath) => p.readDir\n  simp", C.IO),
])
def test_io_and_meta_namespaces_cannot_be_opened(header: str, theorem: str, proof: str, reason: str) -> None:
    verdict = static_verdict(ProofJob("k", header, theorem, proof))
    assert verdict is not None and (verdict.verdict, verdict.reason) == (FAILED, reason), verdict


# Class 7: a dotted name whose head is a namespace under `Lean` (`Kernel`, `Meta`, `Environment`) cannot reach
# Lean's own unless `Lean` is open, which is refused: honest names like ProbabilityTheory.Kernel pass.
@pytest.mark.parametrize(("theorem", "proof"), [
    ("open ProbabilityTheory in\ntheorem t (κ : Kernel ℕ ℕ) : Kernel.comp κ (Kernel.id) = κ := by", "\n  simp"),
    (THEOREM, "\n  open ProbabilityTheory in\n  have := Kernel.comp_id\n  simp"),
    (THEOREM, "\n  have := Environment.foo\n  simp [Compiler.bar]"),
])
def test_lean_only_roots_are_honest_as_dotted_heads(theorem: str, proof: str) -> None:
    assert static_verdict(ProofJob("k", HEADER, theorem, proof)) is None


def test_the_table_is_well_formed() -> None:
    assert TABLE and all(t.shape in SHAPES and t.source.endswith(".lean") for t in TABLE.values())
    for refused in ("run_tac", "run_conv", "native_decide", "bv_decide", "plausible", "slim_check", "polyrith",
                    "sorry", "admit", "trace", "success_if_fail_with_msg", "rw?"):
        assert lookup(refused) is None and lookup(refused, "conv") is None, refused
    assert lookup("nlinarith") is not None and lookup("ring_nf", "conv") is not None
