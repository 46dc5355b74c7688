"""The canary's proofs: honest ones real Lean accepted, cheats it must refuse, one that must time out.

Honest: three theorems of the REPL v4.15.0 test `Mathlib/test/H20231020.in` (leanprover-community/
repl at tag v4.15.0), with that file's header; Lean v4.15.0 + Mathlib answered each with no
message at all (`H20231020.expected.out`), so a verifier that does not call them `verified`
refuses honest proofs. Cheats: one per way a proof can claim what it did not prove, each
stopped by some layer (static checks, the REPL's sorry report, the axiom audit, the kernel
re-check); the canary requires only that none is `verified` and reports which layer said no.
The looping proof is an `nlinarith` over many products on a false goal: it keeps Lean busy far
past `canary.loop_timeout_s` (chosen by reasoning about Lean's search, never measured here: there
is no Lean on this project's machines; a real Lean that fails it fast shows as a failed row with
its verdict). Its comment carries the marker the recorded-Lean stand-in (tests/lean/fake_repl.py)
hangs on; a comment changes nothing for real Lean.
"""

from __future__ import annotations

from dataclasses import dataclass

from sgsbatch.verification.verdict import ProofJob

HEADER = ("import Mathlib.Algebra.BigOperators.Group.Finset\nimport Mathlib.Data.Real.Basic\n"
          "import Mathlib.Data.Complex.Basic\nimport Mathlib.Data.Nat.Log\nimport Mathlib.Data.Complex.Exponential\n"
          "import Mathlib.NumberTheory.Divisors\nimport Mathlib.Data.ZMod.Defs\nimport Mathlib.Data.ZMod.Basic\n"
          "import Mathlib.Topology.Basic\nimport Mathlib.Data.Nat.Digits\nimport Mathlib.Tactic.NormNum.GCD\n"
          "open BigOperators\nopen Real\nopen Nat\nopen Topology\n")

GCD = "theorem mathd_numbertheory_188 : Nat.gcd 180 168 = 12 := by"


@dataclass(frozen=True)
class Case:
    key: str
    theorem: str  # the statement, as a dataset row gives it (ends in `:= by`)
    proof: str  # what the Solver writes after it (the tactic block)
    honest: bool
    what: str  # in words: what it is (cheats: what it tries)

    def job(self) -> ProofJob:
        return ProofJob(f"canary:{self.key}", HEADER, self.theorem, self.proof)


HONEST: tuple[Case, ...] = (
    Case("gcd", GCD, "\n  norm_num", True, "norm_num (H20231020.in)"),
    Case("divisors", "theorem mathd_numbertheory_403 : ∑ k in (Nat.properDivisors 198), k = 270 := by",
         "\n  simp (config := {decide := true})", True, "simp with a literal config (H20231020.in)"),
    Case("sum_mod", "theorem mathd_numbertheory_109 (v : ℕ → ℕ) (h₀ : ∀ n, v n = 2 * n - 1) : "
         "(∑ k in Finset.Icc 1 100, v k) % 7 = 4 := by", "\n  simp_rw (config := {decide := true}) [h₀]", True,
         "simp_rw with a literal config (H20231020.in)"),
)

CHEATS: tuple[Case, ...] = (
    Case("sorry", GCD, "\n  sorry", False, "sorry"),
    Case("new_axiom", GCD, "\n  exact canary_ax.elim\n\naxiom canary_ax : False", False, "a new axiom"),
    Case("native_decide", GCD, "\n  native_decide", False, "native_decide (trusts the compiler)"),
    Case("skip_kernel", GCD, "\n  set_option debug.skipKernelTC true in\n  norm_num", False,
         "a kernel-skipping option"),
    Case("changed_statement", GCD, "\n  norm_num\n\ntheorem mathd_numbertheory_188' : True := trivial", False,
         "a second theorem after the proof"),
    Case("runs_code", GCD, "\n  run_tac (do IO.println \"canary\"; Lean.Elab.Tactic.evalTactic (← `(tactic| norm_num)))",
         False, "a tactic that runs code"),
    Case("unknown_tactic", GCD, "\n  conv => run_conv pure ()\n  norm_num", False,
         "a tactic off the allow-list (Mathlib's conv macro over run_tac)"),
    Case("false_claim", "theorem mathd_numbertheory_188 : Nat.gcd 180 168 = 13 := by",
         "\n  -- FAKE_ERROR (the stand-in's marker; real Lean: norm_num proves the negation)\n  norm_num", False,
         "a proof of a false statement (Lean reports an error)"),
    Case("eval_config", GCD, "\n  simp (config := (fun _ => {decide := true}) (IO.println \"canary\"))", False,
         "a tactic config that is not a literal (evaluated as code)"),
)

LOOP = Case(
    "loop",
    "theorem canary_loop (a b c d e : ℝ) (h : a * b * c * d * e > 1) : a ^ 4 + b ^ 4 + c ^ 4 + d ^ 4 + e ^ 4 ≥ 6 := by",
    "\n  -- FAKE_HANG (the stand-in's marker): a long search that must run into the timeout\n"
    "  nlinarith [sq_nonneg (a - b), sq_nonneg (b - c), sq_nonneg (c - d), sq_nonneg (d - e), sq_nonneg (e - a),\n"
    "    sq_nonneg (a + b), sq_nonneg (b + c), sq_nonneg (c + d), sq_nonneg (d + e), sq_nonneg (e + a),\n"
    "    sq_nonneg (a * b - 1), sq_nonneg (c * d - 1), sq_nonneg (a * b * c - 1), mul_pos, h]",
    False, "a proof search that does not end within the timeout")

# The checker is also asked directly about an honest proof's environment against this statement:
# it must refuse (the statement changed), or a kernel checker that accepts anything goes unseen.
CHANGED_THEOREM = "theorem mathd_numbertheory_188 : Nat.gcd 180 168 = 13 := by"


@dataclass(frozen=True)
class SearchCase:
    """A known proof as tactics, replayed one by one through a search's tactic environment."""

    key: str
    header: str
    theorem: str  # ends in `:= by`, as a dataset row gives it
    tactics: tuple[str, ...]
    what: str


# The GCD theorem H20231020 proves by `norm_num` (Lean v4.15.0 answered with no message), split in two
# steps the REPL's recorded proof_step test takes (`have t : Nat := 42` then `exact t`): `norm_num`
# on the same goal inside a `have`, then `exact` of that hypothesis. Not recorded as tactic mode here
# (no Lean on this project's machines): a real Lean that refuses it shows as a failed row.
SEARCH_PROOF = SearchCase("gcd_steps", HEADER, GCD, ("have h : Nat.gcd 180 168 = 12 := by norm_num", "exact h"),
                          "norm_num inside a have, then exact (H20231020.in's proof in two tactics)")
