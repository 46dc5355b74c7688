"""Real Lean, issue 38 on the re-check's side (skipped where `lake` or the built checker is absent).

Class 6: the kernel's budget in the re-check is the one the REPL's `addDecl` had, the statement's
own `set_option maxHeartbeats N in` included (recheck.kernel_heartbeats, `kernelOptions` in
lean/SgsKernelCheck.lean). Class 2: a proof whose constants resolve to `System.FilePath.readDir`
or `Task.spawn`, in the theorem or in another constant the command added, is `forbidden_constant`.
The stand-in versions: tests/lean/test_lean_recheck.py. The size of HEAVY was chosen without Lean
at hand: the test first asserts that the default budget refuses it, so a size too small fails
with a message instead of passing vacuously.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from leanlib import need_real_lean

from sgsbatch.config.schema import VerificationConfig
from sgsbatch.verification.lean import resolve_project_dir
from sgsbatch.verification.pool import PoolSettings, ReplPool
from sgsbatch.verification.recheck import KernelChecker
from sgsbatch.verification.repl import ReplProcess
from sgsbatch.verification.verdict import VERIFIED, ProofJob

pytestmark = pytest.mark.lean
CFG = VerificationConfig()
PROJECT = resolve_project_dir(CFG.project_dir)

# A `decide` the kernel checks (`kernel := true`: the elaborator leaves the work to `addDecl`).
HEAVY = "theorem heavy38_{key} : (List.range 20000).foldl (· + ·) 0 = 199990000 := by"
HEAVY_PROOF = "\n  decide (config := { kernel := true })"


def _need_checker() -> None:
    need_real_lean(checker=True)


def test_real_class6_the_recheck_uses_the_statement_heartbeat_budget() -> None:
    _need_checker()
    settings = PoolSettings(command=CFG.repl_command, project_dir=PROJECT, processes=1, timeout_s=300.0,
                            kernel_recheck=True, checker_command=CFG.checker_command)
    pool = ReplPool(settings)
    jobs = [ProofJob("default", "import Mathlib", HEAVY.format(key="default"), HEAVY_PROOF),
            ProofJob("zero", "import Mathlib", "set_option maxHeartbeats 0 in\n" + HEAVY.format(key="zero"),
                     HEAVY_PROOF),
            ProofJob("header", "import Mathlib\nset_option maxHeartbeats 0", HEAVY.format(key="header"), HEAVY_PROOF)]
    try:
        got = {j.key: v for j, v, _ in pool.run(jobs)}
    finally:
        pool.close()
    assert got["default"].verdict != VERIFIED, ("HEAVY is not kernel-heavy enough: raise its size", got["default"])
    for key in ("zero", "header"):
        assert got[key].verdict == VERIFIED, got[key]  # on main: recheck_kernel_rejected for "zero"
        assert any("kernel re-check: ok" in m for m in got[key].messages), got[key]


def _pickled(repl: ReplProcess, cmd: str, path: Path) -> Path:
    header = repl.command("import Mathlib", None, 600.0)
    reply = repl.command(cmd, header["env"], 120.0)
    assert not any(m.get("severity") == "error" for m in reply.get("messages", [])), reply
    repl.pickle(reply["env"], path, 120.0)
    return path


# Sent to the REPL by hand: the allow-list refuses most of these before Lean would see them.
FORBIDDEN = {
    "readdir": ("theorem r38_readdir : True := by\n  open System in\n"
                "  have _h : (FilePath.mk \"/\").readDir = (FilePath.mk \"/\").readDir := rfl\n  trivial",
                "theorem r38_readdir : True := by", "r38_readdir", "System.FilePath.readDir"),
    "spawn": ("theorem r38_spawn : True := by\n  have _t : Task ℕ := Task.spawn (prio := .dedicated) fun _ => 1\n"
              "  trivial", "theorem r38_spawn : True := by", "r38_spawn", "Task"),
    # another constant of the command, which the theorem does not reach: still judged
    "aux": ("theorem r38_aux_helper : (Task.spawn fun _ => 1).get = 1 := rfl\n"
            "theorem r38_aux : True := trivial", "theorem r38_aux : True := by", "r38_aux", "Task.spawn"),
}


@pytest.mark.parametrize("case", sorted(FORBIDDEN))
def test_real_class2_resolved_names_of_the_outside_world_are_refused(tmp_path: Path, case: str) -> None:
    _need_checker()
    cmd, theorem, name, mentioned = FORBIDDEN[case]
    repl = ReplProcess(CFG.repl_command, PROJECT)
    checker = KernelChecker(CFG.checker_command, PROJECT)
    try:
        pickle = _pickled(repl, cmd, tmp_path / f"{case}.olean")
        got = checker.check(header="import Mathlib", theorem=theorem, name=name, pickle=pickle, timeout_s=600.0)
    finally:
        repl.close()
        checker.close()
    assert (got.ok, got.reason) == (False, "forbidden_constant"), got
    assert mentioned in got.detail, got


def test_real_class2_honest_lean_namespaces_pass(tmp_path: Path) -> None:
    """`omega` proofs hold `Lean.Omega` lemmas: the whole `Lean` root is not forbidden."""
    _need_checker()
    repl = ReplProcess(CFG.repl_command, PROJECT)
    checker = KernelChecker(CFG.checker_command, PROJECT)
    try:
        pickle = _pickled(repl, "theorem r38_omega (a b : ℕ) (h : a < b) : a + 1 ≤ b := by\n  omega",
                          tmp_path / "omega.olean")
        got = checker.check(header="import Mathlib", theorem="theorem r38_omega (a b : ℕ) (h : a < b) : a + 1 ≤ b := by",
                            name="r38_omega", pickle=pickle, timeout_s=600.0)
    finally:
        repl.close()
        checker.close()
    assert got.ok, got


def test_real_class6_a_proofs_own_budget_reaches_the_replay(tmp_path: Path) -> None:
    """`decide (config := { kernel := true })` under a tactic-level `set_option maxHeartbeats 0 in`:
    the REPL's kernel checks its auxiliary lemma under that budget; the replay gets it when the
    client passes the proof (`KernelChecker.check(proof=...)`), and not otherwise."""
    _need_checker()
    theorem = HEAVY.format(key="tac")
    proof = "\n  set_option maxHeartbeats 0 in" + HEAVY_PROOF
    repl = ReplProcess(CFG.repl_command, PROJECT)
    checker = KernelChecker(CFG.checker_command, PROJECT)
    try:
        pickle = _pickled(repl, theorem + proof, tmp_path / "tac.olean")
        with_proof = checker.check(header="import Mathlib", theorem=theorem, name="heavy38_tac", pickle=pickle,
                                   timeout_s=600.0, proof=proof)
        without = checker.check(header="import Mathlib", theorem=theorem, name="heavy38_tac", pickle=pickle,
                                timeout_s=600.0)
    finally:
        repl.close()
        checker.close()
    assert with_proof.ok, with_proof
    assert (without.ok, without.reason) == (False, "kernel_rejected"), ("HEAVY is not heavy enough", without)
