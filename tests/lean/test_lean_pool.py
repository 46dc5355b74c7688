"""The REPL pool with stand-in processes that hang, crash, print garbage and outgrow the memory limit."""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from leanlib import settings

from sgsbatch.verification.pool import ReplPool
from sgsbatch.verification.slot import HEADER_ERROR
from sgsbatch.verification.verdict import ERROR, FAILED, TIMEOUT, VERIFIED, ProofJob

HEADER = "import Mathlib\nopen Real"
EXPECTED = {
    "ok": (VERIFIED, None), "hang": (TIMEOUT, "timeout"), "crash": (ERROR, "crash"),
    "garbage": (ERROR, "garbage"), "memory": (ERROR, "memory_limit"), "cut": (ERROR, "cut_off"),
    "flaky": (VERIFIED, None), "sorry": (FAILED, "sorry"), "sorrybt": (FAILED, "sorry"),
    "error": (FAILED, "lean_error"), "failedw": (FAILED, "failed_warning"), "axiom": (FAILED, "axioms"),
    "renamed": (FAILED, "statement_changed"),
}
MARKERS = {"ok": "norm_num", "hang": "FAKE_HANG", "crash": "FAKE_CRASH", "garbage": "FAKE_GARBAGE",
           "memory": "FAKE_MEMORY", "cut": "FAKE_CUT", "flaky": "FAKE_FLAKY", "sorry": "FAKE_SORRY",
           "sorrybt": "FAKE_SORRY_BACKTICK", "error": "FAKE_ERROR", "failedw": "FAKE_FAILED_WARNING",
           "axiom": "FAKE_AXIOM", "renamed": "FAKE_RENAMED"}


def _job(kind: str, i: int, header: str = HEADER) -> ProofJob:
    return ProofJob(f"{kind}-{i}", header, f"theorem t_{kind.replace('_', '')}_{i} (x : ℝ) : x ^ 2 ≥ 0 := by",
                    f"\n  -- job {kind}-{i}\n  {MARKERS[kind]}")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_every_job_gets_exactly_one_verdict_and_bystanders_survive(tmp_path: Path, fake_env: Path) -> None:
    bystander = subprocess.Popen(["sleep", "300"])
    jobs = [_job(kind, i) for i in range(2) for kind in EXPECTED]
    pool = ReplPool(settings(tmp_path, processes=3, memory_limit_mb=300))
    try:
        results = list(pool.run(jobs))
        started = pool.started_pids
    finally:
        pool.close()
    try:
        assert sorted(j.key for j, _, _ in results) == sorted(j.key for j in jobs), "none lost, none twice"
        for job, verdict, secs in results:
            assert (verdict.verdict, verdict.reason) == EXPECTED[job.key.split("-")[0]], (job.key, verdict)
            assert secs >= 0
        assert bystander.poll() is None, "the pool never signals a process it did not start"
        assert os.getpid() not in started and bystander.pid not in started
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(p) for p in started):
            time.sleep(0.05)
        assert not any(_alive(p) for p in started), "close() ends every process the pool started"
    finally:
        bystander.kill()
        bystander.wait()
    # Every proof reached a REPL exactly once, except system errors, tried 1 + retries times.
    # (the log holds each command's first line: a proof's is its statement, ending in `:= by`)
    sent = Counter(line.split(" theorem t_")[1].split()[0].replace("_", "-") for line in fake_env.read_text().splitlines()
                   if line.startswith("cmd ") and " theorem t_" in line and line.endswith(":= by"))
    for job in jobs:
        kind = job.key.split("-")[0]
        want = 2 if kind in ("crash", "garbage", "memory", "cut", "flaky") else 1
        assert sent[job.key] == want, (job.key, sent[job.key])
    starts = [line for line in fake_env.read_text().splitlines() if line.startswith("start ")]
    assert len(starts) == len(started)


def test_headers_are_elaborated_once_per_process(tmp_path: Path, fake_env: Path) -> None:
    other = "import Mathlib\nopen Nat"
    jobs = [_job("ok", i, HEADER if i % 2 else other) for i in range(10)]
    pool = ReplPool(settings(tmp_path, processes=1))
    try:
        results = list(pool.run(jobs))
    finally:
        pool.close()
    assert all(v.verdict == VERIFIED for _, v, _ in results) and len(results) == 10
    headers = [ln for ln in fake_env.read_text().splitlines() if ln.startswith("cmd ") and " import Mathlib" in ln]
    assert len(headers) == 2, headers


def test_restart_after_max_proofs(tmp_path: Path, fake_env: Path) -> None:
    pool = ReplPool(settings(tmp_path, processes=1, max_proofs=2))
    try:
        results = list(pool.run([_job("ok", i) for i in range(5)]))
        assert len(results) == 5 and len(set(pool.started_pids)) == 3
    finally:
        pool.close()


def test_bad_header_is_an_error_for_its_jobs_only(tmp_path: Path, fake_env: Path) -> None:
    jobs = [_job("ok", i, "import FAKE_BAD_HEADER") for i in range(3)] + [_job("ok", 9)]
    pool = ReplPool(settings(tmp_path, processes=2))
    try:
        got = {j.key: v for j, v, _ in pool.run(jobs)}
    finally:
        pool.close()
    assert [got[f"ok-{i}"].reason for i in range(3)] == [HEADER_ERROR] * 3
    assert got["ok-9"].verdict == VERIFIED


def test_unstartable_program_gives_error_verdicts_without_retries(tmp_path: Path) -> None:
    pool = ReplPool(settings(tmp_path, command=("/nonexistent/repl",)))
    try:
        got = list(pool.run([_job("ok", i) for i in range(3)]))
    finally:
        pool.close()
    assert [(v.verdict, v.reason) for _, v, _ in got] == [(ERROR, "start")] * 3


def test_stopping_early_kills_only_the_pools_processes(tmp_path: Path, fake_env: Path) -> None:
    pool = ReplPool(settings(tmp_path, processes=2, timeout_s=30))
    stream = pool.run([_job("ok", 0), _job("hang", 1), _job("hang", 2)])
    job, verdict, _ = next(stream)
    assert job.key == "ok-0" and verdict.verdict == VERIFIED
    stream.close()  # the caller stops: the hanging processes are killed, not waited for
    pool.close()
    assert not any(_alive(p) for p in pool.started_pids)


def test_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        settings(tmp_path, processes=0)


class _Trickle:
    """A JobFeed that gives its jobs in batches, one batch a poll, with empty polls in between."""

    wait_s = 0.05

    def __init__(self, batches: list[list[ProofJob]]) -> None:
        self.batches, self.polls = list(batches), 0

    def poll(self) -> tuple[list[ProofJob], bool]:
        self.polls += 1
        if self.polls % 3 or not self.batches:  # two empty polls before each batch
            return [], not self.batches
        return self.batches.pop(0), not self.batches


def test_jobs_fed_while_the_pool_runs_get_one_verdict_each_on_the_same_processes(tmp_path: Path,
                                                                               fake_env: Path) -> None:
    """A streaming verify task's feed: jobs arrive in batches with gaps; every job gets exactly one
    verdict, the REPLs started for the first batch check the later ones (one header import each),
    and the stream ticks (None) while it waits."""
    batches = [[_job("ok", 0), _job("error", 1)], [], [_job("ok", 2), _job("crash", 3), _job("ok", 4)], [_job("ok", 5)]]
    pool = ReplPool(settings(tmp_path, processes=2))
    try:
        out = list(pool.run_feed(_Trickle(batches)))
        started = pool.started_pids
    finally:
        pool.close()
    results = [r for r in out if r is not None]
    assert sorted(j.key for j, _, _ in results) == sorted(j.key for b in batches for j in b), "none lost, none twice"
    for job, verdict, _ in results:
        assert (verdict.verdict, verdict.reason) == EXPECTED[job.key.split("-")[0]], (job.key, verdict)
    assert None in out  # it waited for the feed between batches
    assert len(started) in (3, 4)  # two REPLs and one or two fresh ones for the crash job (its retry): none per batch


def test_a_feed_that_raises_stops_the_pool_and_its_processes(tmp_path: Path, fake_env: Path) -> None:
    class Failing(_Trickle):
        def poll(self) -> tuple[list[ProofJob], bool]:
            if self.polls == 4:
                raise RuntimeError("the solve shard this feed follows failed")
            return super().poll()

    pool = ReplPool(settings(tmp_path, processes=2))
    try:
        with pytest.raises(RuntimeError, match="solve shard"):
            for _ in pool.run_feed(Failing([[_job("hang", 0)], [_job("ok", 1)]])):
                pass
        started = pool.started_pids
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started and not any(_alive(p) for p in started), "a stopped run kills what it started"
        assert [j.key for j, _, _ in pool.run([_job("ok", 2)])] == ["ok-2"]  # the pool works again afterwards
    finally:
        pool.close()


def test_with_timeout_includes_header_the_header_seconds_count_against_the_proof(tmp_path: Path,
                                                                                fake_env: Path) -> None:
    """The reference times each file, its `import` included (timeout_includes_header, the default):
    a header that takes longer than timeout_s leaves its proofs no time, each a `timeout` on a fresh
    process; without it the proof's command gets timeout_s of its own. The stand-in's header sleeps
    0.3 s (FAKE_SLOW); its proofs answer at once."""
    slow = "import Mathlib\n-- FAKE_SLOW"
    jobs = [_job("ok", i, slow) for i in range(2)]
    for includes, expected in ((False, VERIFIED), (True, TIMEOUT)):
        pool = ReplPool(settings(tmp_path, processes=1, timeout_s=0.25, timeout_includes_header=includes))
        try:
            results = {j.key: v for j, v, _ in pool.run(jobs)}
            starts = len(set(pool.started_pids))
        finally:
            pool.close()
        assert [v.verdict for v in results.values()] == [expected, expected], results
        if includes:
            assert all(v.messages[0].startswith("the header took ") and "timeout_includes_header" in v.messages[0]
                       for v in results.values())
            assert starts == 2  # each proof on a fresh process, as each file in the reference
        else:
            assert starts == 1
