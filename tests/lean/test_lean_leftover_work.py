"""Nothing outlives its proof (issue 38): work a proof leaves in its REPL is not charged to the next proof.

Stand-in REPLs (fake_repl.py, which models real Lean here): FAKE_SPIN_AFTER leaves threads that
burn CPU after a verified reply, FAKE_SPIN_LATER leaves threads that start burning only after a
while (past the pool's idle check), FAKE_LEAVE_THREADS leaves sleeping threads; while spinning
threads exist, the stand-in's later proofs never answer (a proof starved of CPU times out). The
markers sit in comments, as a proof that passes the tactic allow-list would carry such code.
Sandbox "none" (the default of `settings`): the pool sees the stand-in's process tree directly;
one test runs the stand-in in the real bubblewrap under the process filter, where the pool finds
the REPL below the sandbox's own processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from leanlib import settings
from test_lean_sandbox import Attack, attack, needs_bwrap

from sgsbatch.verification.leftover import LeftoverLimits, usage
from sgsbatch.verification.pool import ReplPool
from sgsbatch.verification.verdict import TIMEOUT, VERIFIED, ProofJob

__all__ = ["attack"]  # the fixture, shared with test_lean_sandbox.py
HEADER = "import Mathlib"


def _job(key: str, marker: str = "") -> ProofJob:
    return ProofJob(key, HEADER, f"theorem t_{key} (x : Nat) : x + 0 = x := by",
                    f"\n  simp{f' -- {marker}' if marker else ''}")


def _run(tmp_path: Path, jobs: list[ProofJob], **kw: object) -> tuple[dict[str, tuple[str, list[str]]], ReplPool,
                                                                        list[int]]:
    pool = ReplPool(settings(tmp_path, processes=1, kernel_recheck=False, **kw))
    try:
        out = {j.key: (v.verdict, v.messages) for j, v, _ in pool.run(jobs)}
        return out, pool, pool.started_pids
    finally:
        pool.close()


def _pids_by_proof(log: Path) -> dict[str, int]:
    """job key -> the pid of the REPL its proof command was sent to (the stand-in's log)."""
    out: dict[str, int] = {}
    for line in log.read_text().splitlines():
        parts = line.split()
        if parts[0] == "cmd" and len(parts) > 3 and parts[2] == "theorem" and line.endswith(":= by"):
            out[parts[3].removeprefix("t_")] = int(parts[1])
    return out


def test_a_proof_that_leaves_a_spinning_thread_costs_the_next_proof_nothing(tmp_path: Path, fake_env: Path) -> None:
    results, pool, pids = _run(tmp_path, [_job("poison", "FAKE_SPIN_AFTER"), _job("honest")])
    assert results["honest"][0] == VERIFIED, results["honest"]
    assert results["poison"][0] == VERIFIED  # the REPL called it verified; the pool only restarts the REPL
    assert any("restarted after this proof" in m for m in results["poison"][1])
    on = _pids_by_proof(fake_env)
    assert on["honest"] != on["poison"], "the next proof runs on a fresh process"
    assert len(pids) == 2 and pool.leftover_restarts["leftover_cpu"] == 1


@needs_bwrap
def test_a_spinning_thread_is_found_inside_the_sandbox(attack: Attack) -> None:
    pool = ReplPool(attack.pool_settings("bwrap", process_filter=True, kernel_recheck=False, timeout_s=5.0))
    try:
        results = {j.key: v for j, v, _ in pool.run([_job("poison", "FAKE_SPIN_AFTER"), _job("honest")])}
        pids = pool.started_pids
    finally:
        pool.close()
    assert results["honest"].verdict == VERIFIED, results["honest"]
    assert len(pids) == 2 and pool.leftover_restarts["leftover_cpu"] == 1


def test_threads_left_beyond_the_slack_restart_the_repl(tmp_path: Path, fake_env: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_THREADS_N", "20")
    results, pool, _ = _run(tmp_path, [_job("many", "FAKE_LEAVE_THREADS"), _job("after")],
                            leftover=LeftoverLimits(thread_slack=8))
    assert results["after"][0] == VERIFIED
    on = _pids_by_proof(fake_env)
    assert on["after"] != on["many"]
    assert pool.leftover_restarts["leftover_threads"] == 1


def test_threads_within_the_slack_keep_the_repl(tmp_path: Path, fake_env: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_THREADS_N", "4")
    results, pool, pids = _run(tmp_path, [_job("few", "FAKE_LEAVE_THREADS"), _job("after")],
                               leftover=LeftoverLimits(thread_slack=8))
    assert results["after"][0] == VERIFIED and len(pids) == 1 and not pool.leftover_restarts


def test_a_timeout_after_a_poisoned_proof_is_checked_again_on_a_fresh_repl(tmp_path: Path, fake_env: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # the threads wake after the idle check; the next proof starves and its REPL burns CPU meanwhile
    # (a delay well past the idle check and a timeout long enough to measure the spinner's demand on
    # a loaded machine, where the kernel records a run-queue wait only when it ends)
    monkeypatch.setenv("FAKE_SPIN_DELAY_S", "0.6")
    results, pool, pids = _run(tmp_path, [_job("late", "FAKE_SPIN_LATER"), _job("victim")],
                               leftover=LeftoverLimits(timeout_cpu_factor=0.3), timeout_s=3.0)
    assert results["victim"][0] == VERIFIED, results["victim"]
    assert pool.leftover_restarts["timeout_retry"] == 1
    assert len(pids) == 2
    assert _pids_by_proof(fake_env)["victim"] == pids[1], "its verdict comes from the fresh process"


def test_an_honest_timeout_on_a_fresh_repl_is_not_retried(tmp_path: Path, fake_env: Path) -> None:
    results, pool, pids = _run(tmp_path, [_job("slow", "FAKE_HANG")], leftover=LeftoverLimits(timeout_cpu_factor=0.0001))
    assert results["slow"][0] == TIMEOUT
    assert len(pids) == 1 and not pool.leftover_restarts
    sent = [line for line in fake_env.read_text().splitlines() if line.startswith("cmd ") and "t_slow" in line
            and line.endswith(":= by")]
    assert len(sent) == 1, "one proof command, no second try"


def test_honest_proofs_cause_no_restarts_at_the_default_settings(tmp_path: Path, fake_env: Path) -> None:
    results, pool, pids = _run(tmp_path, [_job(f"h{i}") for i in range(6)])
    assert all(v == VERIFIED for v, _ in results.values())
    assert len(pids) == 1 and not pool.leftover_restarts


def test_usage_counts_threads_and_cpu_of_the_tree() -> None:
    import os
    import threading

    stop = threading.Event()
    before = usage(os.getpid())
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert usage(os.getpid()).threads == before.threads + 1
    finally:
        stop.set()
        t.join()
    assert usage(2 ** 22 + 12345).threads == 0, "a process that is gone has nothing"


def test_the_limits_are_checked_with_their_names() -> None:
    with pytest.raises(ValueError, match="verification.thread_slack"):
        LeftoverLimits(thread_slack=-1)
