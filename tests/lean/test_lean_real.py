"""Real Lean: a few proofs through the real REPL pool (skipped where `lake` or the built REPL is absent)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sgsbatch.config.schema import VerificationConfig
from sgsbatch.verification.lean import LeanVerifier, resolve_project_dir
from sgsbatch.verification.pool import PoolSettings, ReplPool
from sgsbatch.verification.recheck import KernelChecker
from sgsbatch.verification.repl import ReplProcess
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
    assert any("kernel re-check: ok" in m for m in got["pass"].messages)  # on by default
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


# ------------------------------------------------------------------ the kernel re-check, for real
CHECKER = PROJECT / CFG.checker_command[-1]


def _need_checker() -> None:
    if shutil.which("lake") is None or not REPL.exists():
        pytest.skip("real Lean tests need `lake` and the built REPL: run ./setup.sh --lean")
    if not CHECKER.exists():
        pytest.skip(f"the kernel re-check is not built at {CHECKER}: run ./setup.sh --lean")


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
