"""Reply integrity (repl.py) and the kernel re-check (recheck.py) against forging stand-ins.

The stand-in REPL (fake_repl.py) plays a proof whose code prints replies of its own on the REPL's
stdout, reads the next command from stdin, or exits after answering; the stand-in checker
(fake_checker.py) plays what the kernel replay finds (a proof closed under a kernel-skipping
option, a swapped theorem, a forbidden axiom). Whatever they do, no proof may come back
`verified` unless it is honest. Real Lean: test_lean_real.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fake_checker import forbidden_roots
from fake_repl import constants_of
from leanlib import FAKE_CHECKER_COMMAND, run_pool, settings

from sgsbatch.verification.pool import ReplPool
from sgsbatch.verification.recheck import KernelChecker, RecheckResult, kernel_heartbeats, parse_reply
from sgsbatch.verification.repl import EXITED, MISMATCH, SURPLUS, ReplSystemError, reply_problem
from sgsbatch.verification.verdict import ERROR, FAILED, VERIFIED, ProofJob

HEADER = "import Mathlib"
INTEGRITY = (SURPLUS, MISMATCH, EXITED)


def _job(key: str, proof: str) -> ProofJob:
    return ProofJob(key, HEADER, f"theorem t_{key} (x : ℕ) : x + 0 = x := by", f"\n  {proof}")


_run = run_pool


# ----------------------------------------------------------------------------- forged replies
FORGERS = [
    ("two", "simp -- FAKE_FORGE_TWO"),  # a clean proof reply and a clean audit of its own, then the real one
    ("stdin", "simp -- FAKE_FORGE_STDIN"),  # answers the audit itself by reading it from stdin
    ("exit", "simp -- FAKE_FORGE_EXIT"),  # a clean reply, then the process exits
]


@pytest.mark.parametrize("recheck", [True, False])
def test_forged_replies_are_never_verified(tmp_path: Path, recheck: bool) -> None:
    jobs = [_job(k, p) for k, p in FORGERS] + [_job("honest", "simp")]
    # settle_s: the grace in which the real reply, printed right after the forgery, must show up
    got = _run(tmp_path, jobs, kernel_recheck=recheck, retries=1, settle_s=0.05 if recheck else 2.0)
    assert got["honest"][:2] == (VERIFIED, None), got["honest"]
    for key, _ in FORGERS:
        verdict, reason, messages = got[key]
        assert verdict == ERROR and reason in INTEGRITY + ("crash",), (key, got[key])
        if key != "exit":  # an exit is seen as the end of output: `crash` or `exited_after_reply`
            assert any(r in " ".join(messages) for r in INTEGRITY), (key, messages)


def test_the_integrity_layer_is_what_catches_the_forgery(tmp_path: Path) -> None:
    # Without the settle check and the re-check, the stdin forger's clean replies are all the
    # client reads for that proof: the layers above are needed, not decoration.
    pool = ReplPool(settings(tmp_path, kernel_recheck=False, settle_s=0.0, processes=1))
    try:
        slot = pool._slots[0]  # noqa: SLF001 (white box: drive one proof by hand)
        (job,) = [_job("stdin", "simp -- FAKE_FORGE_STDIN")]
        assert pool._start(slot, job.header) is None  # noqa: SLF001
        assert slot.repl is not None and slot.header_env is not None
        reply = slot.repl.command(job.theorem + job.proof, slot.header_env, 5.0)
        assert "messages" not in reply  # the forged, clean proof reply
        with pytest.raises(ReplSystemError) as e:
            # the forged audit is read; the real reply comes right behind it: caught with the
            # forged audit (in the same read) or by the settle check
            audit = slot.repl.command("#print axioms _root_.t_stdin\n#check @_root_.t_stdin", reply["env"], 5.0)
            assert "depends on axioms" in audit["messages"][0]["data"]  # the forged audit
            slot.repl.settle(2.0)
        assert e.value.kind == SURPLUS
    finally:
        pool.close()


# ----------------------------------------------------------------------------- kernel re-check
RECHECK_CASES = [
    ("skipkernel", "decide -- FAKE_SKIP_KERNEL", (FAILED, "recheck_kernel_rejected")),
    ("swap", "simp -- FAKE_SWAP_PICKLE", (FAILED, "recheck_statement_changed")),
    ("axiom", "simp -- FAKE_CHECKER_AXIOM", (FAILED, "recheck_axioms")),
    ("wrongid", "simp -- FAKE_CHECKER_WRONG_ID", (ERROR, MISMATCH)),
    ("crash", "simp -- FAKE_CHECKER_CRASH", (ERROR, "crash")),
    ("honest", "simp", (VERIFIED, None)),
]


def test_kernel_recheck_has_the_last_word(tmp_path: Path, fake_env: Path) -> None:
    got = _run(tmp_path, [_job(k, p) for k, p, _ in RECHECK_CASES])
    for key, _, want in RECHECK_CASES:
        assert got[key][:2] == want, (key, got[key])
    assert any(m.startswith("kernel re-check: ok, axioms propext") for m in got["honest"][2])
    # Without the re-check, the REPL's word stands: the kernel-skipping proof would be verified.
    off = _run(tmp_path, [_job("skipkernel", "decide -- FAKE_SKIP_KERNEL")], kernel_recheck=False)
    assert off["skipkernel"][:2] == (VERIFIED, None)


def test_checkers_and_scratch_live_and_die_with_their_repl(tmp_path: Path, fake_env: Path) -> None:
    pool = ReplPool(settings(tmp_path, processes=1, max_proofs=2))
    jobs = [_job(f"p{i}", "simp") for i in range(5)]
    try:
        assert all(v.verdict == VERIFIED for _, v, _ in pool.run(jobs))
        slot = pool._slots[0]  # noqa: SLF001
        assert slot.scratch is not None and list(slot.scratch.iterdir()) == []  # each pickle removed after use
        scratch = slot.scratch
    finally:
        pool.close()
    assert not scratch.exists()
    # a checker per REPL process: restarted with it every max_proofs proofs
    assert len(pool.started_pids) == 3 and len(pool.started_checker_pids) == 3
    for pid in pool.started_pids + pool.started_checker_pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
    checks = [line for line in fake_env.read_text().splitlines() if line.startswith("check ")]
    assert len(checks) == 5


# ----------------------------------------------------------------------------- reply shapes
@pytest.mark.parametrize(("reply", "problem"), [
    ({"env": 3}, None),
    ({"env": 3, "messages": [{"severity": "info", "data": "x"}], "sorries": []}, None),
    ({"env": 4}, "expected the fresh env 3"),
    ({"env": 3, "proofState": 0}, "1 unexpected keys"),
    ({"env": 3, "messages": "x"}, "'messages' is not a list"),
    ({"env": 3, "messages": [{"severity": "fatal", "data": "x"}]}, "malformed message"),
    ({"env": 3, "messages": [{"severity": "info", "data": 1}]}, "malformed message"),
])
def test_reply_problem(reply: dict[str, object], problem: str | None) -> None:
    got = reply_problem(reply, 3)
    assert (got is None) if problem is None else (got is not None and problem in got)


NONCE = "ab" * 16


@pytest.mark.parametrize(("reply", "kind"), [
    ({"id": "cd" * 16, "ok": True, "reason": "", "axioms": [], "detail": ""}, MISMATCH),
    ({"id": NONCE, "ok": True, "reason": "", "axioms": []}, "garbage"),
    ({"id": NONCE, "ok": "yes", "reason": "", "axioms": [], "detail": ""}, "garbage"),
    ({"id": NONCE, "ok": True, "reason": "", "axioms": [1], "detail": ""}, "garbage"),
    ({"id": NONCE, "ok": False, "reason": "looks_fine", "axioms": [], "detail": ""}, "garbage"),
])
def test_checker_replies_that_do_not_answer_are_system_errors(reply: dict[str, object], kind: str) -> None:
    with pytest.raises(ReplSystemError) as e:
        parse_reply(reply, NONCE)
    assert e.value.kind == kind


def test_checker_reply_parsed() -> None:
    ok = parse_reply({"id": NONCE, "ok": True, "reason": "", "axioms": ["propext"], "detail": ""}, NONCE)
    assert ok == RecheckResult(True, "", "", ["propext"])
    bad = parse_reply({"id": NONCE, "ok": False, "reason": "axioms", "axioms": ["sorryAx"], "detail": "d"}, NONCE)
    assert (bad.ok, bad.reason, bad.axioms) == (False, "axioms", ["sorryAx"])


def test_pool_refuses_recheck_without_a_checker(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="verification.checker_command"):
        settings(tmp_path, checker_command=())
    assert os.path.exists(tmp_path)


# ------------------------------------------------------------- issue 38, class 6: the kernel's budget
@pytest.mark.parametrize(("header", "theorem", "budget"), [
    ("import Mathlib\n", "theorem t : True := by", None),  # Lean's default on both sides
    ("import Mathlib\nset_option maxHeartbeats 400000\n", "theorem t : True := by", 400000),
    ("import Mathlib\n", "set_option maxHeartbeats 0 in\ntheorem t : True := by", 0),
    ("import Mathlib\nset_option maxHeartbeats 0\n", "set_option maxHeartbeats 1000 in theorem t : True := by", 1000),
    # the innermost prefix is the one in force when the theorem is declared; `«»` and doc comments
    ("import Mathlib\n", "set_option maxHeartbeats 1000 in\nopen Real in\n/-- d -/\n"
     "set_option «maxHeartbeats» 0 in\ntheorem t : True := by", 0),
    ("import Mathlib\n", "set_option maxRecDepth 10000 in\ntheorem t : True := by", None),
    # one inside the proof bounds the tactic, not the declaration's `addDecl`
    ("import Mathlib\n", "theorem t : True := by\n  set_option maxHeartbeats 0 in trivial", None),
    ("import Mathlib\nsection\nset_option maxHeartbeats 0\nend\n", "theorem t : True := by", None),
    ("import Mathlib\nnamespace A\nset_option maxHeartbeats 0\n", "theorem t : True := by", 0),
])
def test_kernel_heartbeats_is_the_budget_the_repl_had(header: str, theorem: str, budget: int | None) -> None:
    assert kernel_heartbeats(header, theorem) == budget


@pytest.mark.parametrize(("header", "theorem", "proof", "budget"), [
    # a proof's own option is the budget of the auxiliary declarations its tactic adds: the largest wins
    ("import Mathlib\n", "theorem t : True := by", "\n  set_option maxHeartbeats 400000 in\n  decide", 400000),
    ("import Mathlib\n", "theorem t : True := by", "\n  set_option maxHeartbeats 0 in decide", 0),
    ("import Mathlib\n", "theorem t : True := by", "\n  set_option maxHeartbeats 1000 in decide", 200000),
    ("import Mathlib\nset_option maxHeartbeats 0\n", "theorem t : True := by",
     "\n  set_option maxHeartbeats 400000 in decide", 0),
    ("import Mathlib\n", "set_option maxHeartbeats 300000 in theorem t : True := by",
     "\n  set_option maxHeartbeats 100000 in decide", 300000),
    ("import Mathlib\n", "theorem t : True := by", "\n  set_option maxRecDepth 10000 in decide", None),
    ("import Mathlib\n", "theorem t : True := by", "\n  decide -- set_option maxHeartbeats 0 in", None),
])
def test_kernel_heartbeats_takes_the_proofs_own_budgets(header: str, theorem: str, proof: str,
                                                        budget: int | None) -> None:
    assert kernel_heartbeats(header, theorem, proof) == budget


def test_the_checker_gets_the_proofs_own_budget(tmp_path: Path) -> None:
    """`decide (config := { kernel := true })` under a tactic-level `set_option maxHeartbeats 0 in`:
    its auxiliary lemma is checked by the REPL's kernel under that budget, so the replay gets it too."""
    theorem = "theorem t_tac (x : ℕ) : x + 0 = x := by"
    proof = "\n  set_option maxHeartbeats 0 in\n  decide -- FAKE_KERNEL_HEAVY"
    history = f"{HEADER}\n{theorem}{proof}"
    pickle = tmp_path / "env.json"
    pickle.write_text(json.dumps({"history": history, "constants": constants_of(history)}))
    checker = KernelChecker(FAKE_CHECKER_COMMAND, tmp_path)
    try:
        with_proof = checker.check(header=HEADER, theorem=theorem, name="t_tac", pickle=pickle, timeout_s=10.0,
                                   proof=proof)
        without = checker.check(header=HEADER, theorem=theorem, name="t_tac", pickle=pickle, timeout_s=10.0)
    finally:
        checker.close()
    assert with_proof.ok, with_proof
    assert (without.ok, without.reason) == (False, "kernel_rejected"), without


def _heavy(key: str, header: str, prefix: str) -> ProofJob:
    return ProofJob(key, header, f"{prefix}theorem t_{key} (x : ℕ) : x + 0 = x := by", "\n  decide -- FAKE_KERNEL_HEAVY")


def test_the_kernel_gets_the_statement_heartbeat_budget(tmp_path: Path) -> None:
    """Issue 38, class 6: the statement's own `set_option maxHeartbeats N in` is the budget the REPL's
    `addDecl` had; the re-check used only the header's and refused kernel-heavy honest proofs."""
    d3k = "import Mathlib\nset_option maxHeartbeats 0\n"
    got = _run(tmp_path, [
        _heavy("zero", HEADER, "set_option maxHeartbeats 0 in\n"),
        _heavy("large", HEADER, "set_option maxHeartbeats 1000000 in\n"),
        _heavy("none", HEADER, ""),  # the header's budget (Lean's default) still applies
        _heavy("d3k", d3k, ""),  # the header's `maxHeartbeats 0` when the statement sets none
        _heavy("smaller", d3k, "set_option maxHeartbeats 100000 in\n"),  # the statement's wins
    ])
    assert got["zero"][:2] == (VERIFIED, None), got["zero"]
    assert got["large"][:2] == (VERIFIED, None), got["large"]
    assert got["d3k"][:2] == (VERIFIED, None), got["d3k"]
    assert got["none"][:2] == (FAILED, "recheck_kernel_rejected"), got["none"]
    assert got["smaller"][:2] == (FAILED, "recheck_kernel_rejected"), got["smaller"]


def test_the_pool_passes_the_proofs_own_budget_to_the_kernel(tmp_path: Path) -> None:
    """The pool sends the proof with the request's budget (`set_option maxHeartbeats N in` inside the proof)."""
    theorem = "theorem t_own (x : ℕ) : x + 0 = x := by"
    got = _run(tmp_path, [ProofJob("own", HEADER, theorem, "\n  set_option maxHeartbeats 0 in\n  decide -- FAKE_KERNEL_HEAVY")])
    assert got["own"][:2] == (VERIFIED, None), got["own"]


# ------------------------------------------------------------- issue 38, class 2: resolved names
# Every root that gives a proof term the outside world, threads or the elaborator (lean/SgsKernelCheck.lean).
REQUIRED_ROOTS = ("System", "IO", "EIO", "BaseIO", "EStateM", "ST", "EST", "Task", "unsafeBaseIO", "unsafeIO",
                  "unsafeEIO", "dbgTrace", "dbgSleep", "ptrAddrUnsafe", "withPtrAddr", "Lean.Elab", "Lean.Meta",
                  "Lean.Core", "Lean.Environment", "Lean.Kernel", "Lean.evalConst", "Lean.importModules")


def test_forbidden_roots_cover_the_outside_world_and_threads() -> None:
    roots = forbidden_roots()  # read from lean/SgsKernelCheck.lean, as the stand-in does
    assert set(REQUIRED_ROOTS) <= set(roots), set(REQUIRED_ROOTS) - set(roots)
    for honest in ("Lean", "Lean.Omega", "Lean.Data.AC", "panicWithPosWithDecl", "Nat", "Mathlib"):
        assert honest not in roots, honest


@pytest.mark.parametrize("name", [
    "System.FilePath.readDir", "System.FilePath.pathExists", "Task.spawn", "Task.Priority.dedicated",
    "IO.asTask", "BaseIO.asTask", "EIO.asTask", "IO.Process.spawn", "ST.Ref.get", "EStateM.run",
    "unsafeBaseIO", "dbgSleep", "withPtrAddr", "Lean.Elab.Term.evalTerm", "Lean.Meta.evalExpr",
    "Lean.importModules",
])
def test_a_name_that_resolves_to_the_outside_world_fails_the_recheck(tmp_path: Path, name: str) -> None:
    # The marker stands for a proof whose names pass the allow-list and resolve to `name` (`open System in`,
    # `(p : FilePath).readDir`, a leading dot against an expected type); markers sit in comments.
    got = _run(tmp_path, [_job("main", f"simp -- FAKE_RESOLVES_TO {name}"),
                          _job("aux", f"simp -- FAKE_AUX_RESOLVES_TO {name}")])
    for key in ("main", "aux"):  # the theorem's own term, and an auxiliary constant it does not reach
        assert got[key][:2] == (FAILED, "recheck_forbidden_constant"), (key, got[key])
        assert any(name in m for m in got[key][2]), got[key]


def test_honest_resolved_names_pass_the_recheck(tmp_path: Path) -> None:
    names = ["Lean.Omega.LinearCombo.eval", "Lean.Data.AC.Context.eval", "panicWithPosWithDecl", "Nat.le_of_lt",
             "Finset.sum_range_succ", "Mathlib.Tactic.Ring.add_pf_add_zero", "SystemOfUnits.x", "TaskFoo.bar"]
    got = _run(tmp_path, [_job(f"n{i}", f"simp -- FAKE_RESOLVES_TO {n}") for i, n in enumerate(names)])
    for i, n in enumerate(names):
        assert got[f"n{i}"][:2] == (VERIFIED, None), (n, got[f"n{i}"])
