"""Real Lean: a few proofs through the real REPL pool (skipped where `lake` or the built REPL is absent)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from leanlib import need_real_lean

from sgsbatch.config.schema import VerificationConfig
from sgsbatch.verification.lean import LeanVerifier, resolve_project_dir
from sgsbatch.verification.pool import PoolSettings, ReplPool
from sgsbatch.verification.recheck import KernelChecker
from sgsbatch.verification.repl import ReplProcess
from sgsbatch.verification.verdict import FAILED, TIMEOUT, VERIFIED, ProofJob

pytestmark = pytest.mark.lean
CFG = VerificationConfig()
PROJECT = resolve_project_dir(CFG.project_dir)


@pytest.fixture(scope="module")
def verifier() -> Iterator[LeanVerifier]:
    need_real_lean()
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
    assert any("kernel re-check: ok" in m for m in got["pass"].messages)  # on by default
    assert got["pass_core"].verdict == VERIFIED, got["pass_core"]
    assert got["classical"].verdict == VERIFIED, got["classical"]
    assert (got["fail"].verdict, got["fail"].reason) == (FAILED, "lean_error")
    assert got["sorry"].verdict == FAILED  # static check: `sorry`
    assert not verifier.pool.leftover_restarts, "honest proofs leave no work behind (issue 38)"


SPIN = """
  run_tac (do
    let _ ← (IO.asTask (prio := .dedicated) (do
      let mut i : Nat := 0
      while true do
        i := i + 1
      pure ()) : IO (Task (Except IO.Error Unit)))
    pure ())
  simp"""


def test_real_a_thread_left_spinning_costs_the_next_proof_nothing() -> None:
    """Issue 38, nothing outlives its proof: a proof that leaves a dedicated task looping (through the
    pool directly: the tactic allow-list would refuse `run_tac`) gets its REPL restarted; the next
    proof runs on a fresh process and is verified. Not yet run against real Lean when written."""
    need_real_lean()
    v = LeanVerifier(VerificationConfig(timeout_s=60.0), processes=1)
    try:
        jobs = [_job("spin", "theorem spin_left (x : ℕ) : x + 0 = x := by", SPIN),
                _job("next", "theorem next_one (x : ℕ) : 0 + x = x := by", "\n  simp")]
        got = {j.key: verdict for j, verdict, _ in v.pool.run(jobs)}
        assert got["next"].verdict == VERIFIED, got["next"]
        assert sum(v.pool.leftover_restarts.values()) >= 1, (got["spin"], v.pool.leftover_restarts)
        assert len(set(v.pool.started_pids)) == 2
    finally:
        v.close()


def test_real_timeout() -> None:
    need_real_lean()
    v = LeanVerifier(VerificationConfig(timeout_s=2.0), processes=1)
    try:
        slow = "\n  nlinarith [sq_nonneg (x - y), sq_nonneg (x + y), sq_nonneg (x * y - 1), sq_nonneg (x * y + 1)]"
        theorem = "theorem hard (x y : ℝ) (h : x ^ 4 + y ^ 4 = 1) : x ^ 3 * y ^ 5 ≤ 1000 := by"
        (_, verdict, _), = list(v.verify_stream([_job("slow2", theorem, slow)]))
        assert verdict.verdict in (TIMEOUT, FAILED)  # nlinarith on this either runs out of time or gives up
    finally:
        v.close()


# ------------------------------------------------------------------ the kernel re-check, for real


def _need_checker() -> None:
    need_real_lean(checker=True)


def test_real_recheck_through_the_pool(tmp_path: Path) -> None:
    _need_checker()
    settings = PoolSettings(command=CFG.repl_command, project_dir=PROJECT, processes=1, timeout_s=120.0,
                            kernel_recheck=True, checker_command=CFG.checker_command)
    pool = ReplPool(settings)
    try:
        ((_, verdict, _),) = list(pool.run([_job("true", "theorem sq_nonneg'' (x : ℝ) : 0 ≤ x ^ 2 := by",
                                                 "\n  positivity")]))
    finally:
        pool.close()
    assert verdict.verdict == VERIFIED and any("kernel re-check: ok" in m for m in verdict.messages), verdict


SKIP_KERNEL = """set_option debug.skipKernelTC true in
theorem bad_false : False := by
  run_tac do
    let g ← Lean.Elab.Tactic.getMainGoal
    g.assign (Lean.mkConst ``True.intro)"""


def _pickled(repl: ReplProcess, cmd: str, path: Path) -> Path:
    header = repl.command("import Mathlib", None, 600.0)
    reply = repl.command(cmd, header["env"], 120.0)
    repl.pickle(reply["env"], path, 120.0)
    return path


def test_real_recheck_rejects_what_the_kernel_never_saw(tmp_path: Path) -> None:
    """A false theorem accepted under the kernel-skipping option (sent to the REPL by hand: the
    static checks refuse the option before Lean would see it) is rejected by the replay."""
    _need_checker()
    repl = ReplProcess(CFG.repl_command, PROJECT)
    checker = KernelChecker(CFG.checker_command, PROJECT)
    try:
        pickle = _pickled(repl, SKIP_KERNEL, tmp_path / "skip.olean")
        got = checker.check(header="import Mathlib", theorem="theorem bad_false : False := by", name="bad_false",
                            pickle=pickle, timeout_s=600.0)
    finally:
        repl.close()
        checker.close()
    assert (got.ok, got.reason) == (False, "kernel_rejected"), got


def test_real_recheck_changed_statement(tmp_path: Path) -> None:
    _need_checker()
    repl = ReplProcess(CFG.repl_command, PROJECT)
    checker = KernelChecker(CFG.checker_command, PROJECT)
    try:
        pickle = _pickled(repl, "theorem chg (x : ℕ) : x = x := by\n  rfl", tmp_path / "env.olean")
        same = checker.check(header="import Mathlib", theorem="theorem chg (x : ℕ) : x = x := by", name="chg",
                             pickle=pickle, timeout_s=600.0)
        other = checker.check(header="import Mathlib", theorem="theorem chg (x : ℕ) : x = x + 0 := by",
                              name="chg", pickle=pickle, timeout_s=600.0)
    finally:
        repl.close()
        checker.close()
    assert same.ok and set(same.axioms) <= {"propext", "Classical.choice", "Quot.sound"}, same
    assert (other.ok, other.reason) == (False, "statement_changed"), other


# ------------------------------------------------------------------ issue 26, each class, for real
D3K_HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"


def test_real_issue26_honest_rows_pass_under_the_filter_and_the_recheck() -> None:
    """7a (a data-valued match's compiler artefacts), 7b (a header namespace), 7c (`ST` a variable),
    7d (the header's heartbeat budget), classes 1/4 (a literal config, a statement matcher), all with
    the process filter on (classes 3/6: Lean needs threads only)."""
    _need_checker()
    v = LeanVerifier(VerificationConfig(timeout_s=120.0), processes=1)
    assert v.settings.process_filter and v.settings.kernel_recheck
    jobs = [
        _job("7a", "theorem m7a (n : ℕ) : (match n with | 0 => 1 | _ => 2) ≥ 1 := by", "\n  cases n <;> simp",
             D3K_HEADER),
        _job("7b", "theorem ns7b : (2 : ℕ) + 2 = 4 := by", "\n  norm_num", "import Mathlib\nnamespace Geometry\n"),
        _job("7c", "theorem st7c (RS ST EST : ℝ) (h : RS = ST) (h' : ST = EST) : RS = EST := by",
             "\n  rw [h, h']", D3K_HEADER),
        _job("c1", "theorem c1 (x : ℕ) : x + 0 = x := by", "\n  simp (config := { decide := true })", D3K_HEADER),
        _job("c4", "theorem c4 : ∀ p : ℕ × ℕ, (fun (a, b) => a + b) p = p.1 + p.2 := by",
             "\n  intro p\n  rfl", D3K_HEADER),
    ]
    try:
        got = {j.key: vd for j, vd, _ in v.verify_stream(jobs)}
    finally:
        v.close()
    for key, verdict in got.items():
        assert verdict.verdict == VERIFIED and any("kernel re-check: ok" in m for m in verdict.messages), (key, verdict)


def test_real_issue26_the_checker_refuses_code_in_statements_and_io_names(tmp_path: Path) -> None:
    """Class 5 (a statement's tactic block is refused before it is elaborated) and class 2 (a
    resolved IO name in a proof's constants), sent to the REPL and the checker by hand."""
    _need_checker()
    repl = ReplProcess(CFG.repl_command, PROJECT)
    checker = KernelChecker(CFG.checker_command, PROJECT)
    try:
        code = checker.check(header="import Mathlib", theorem="theorem c5 (h : (by exact 1 : ℕ) = 1) : True := by",
                             name="c5", pickle=tmp_path / "none.olean", timeout_s=600.0)
        io_cmd = "theorem c2 : (fun (_ : Unit) => (IO.println \"x\" : IO Unit)) = fun _ => IO.println \"x\" := by\n  rfl"
        pickle = _pickled(repl, io_cmd, tmp_path / "io.olean")
        io = checker.check(header="import Mathlib",
                           theorem="theorem c2 : (fun (_ : Unit) => (IO.println \"x\" : IO Unit)) = "
                                   "fun _ => IO.println \"x\" := by", name="c2", pickle=pickle, timeout_s=600.0)
    finally:
        repl.close()
        checker.close()
    assert (code.ok, code.reason) == (False, "statement_code"), code
    assert (io.ok, io.reason) == (False, "forbidden_constant"), io
