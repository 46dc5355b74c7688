"""A verify task streaming behind its solve task (phases/verify.py, `verification.streaming`).

A writer thread plays the solve task: it appends records to the solve shard's item log one by
one (waiting until the verify task has recorded the first, which proves the verify task checks
while solve runs), then writes the output and its completion marker. Covered: the streamed
output equals the output of a verify task started after solve ended (streaming off); a torn line
being written is not read early; a solve shard out of retries ends the task with UpstreamFailed;
a stop request while it waits ends it with Interrupted, and so does (on Slurm) a solve task that
has not run for `stream_yield_s`; a done solve shard whose item log is gone
(a compacted round) is read from its output; `Shard.items_after` reads only complete lines of its keys.
Runs on the SIMULATED verifier (no Lean).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sgsbatch.phases import verify
from sgsbatch.phases.task import Interrupted, Task, UpstreamFailed
from sgsbatch.run.shards import Shard, jsonl_text
from tests.runlib import recorded_run
from tests.shardlib import FORMATS, split_arrays

PROOFS = ["\n  simp", "\n  trivial", "\n  (", "\n  norm_num"]


def _solve_record(pid: str) -> dict[str, Any]:
    samples = [{"text": f"```lean4\n{p}\n```", "token_ids": [1, 2], "logprobs": [-0.1, -0.2], "finish_reason": "stop",
                "ok": k != 2, "proof": p, "reason": None if k != 2 else "no_code_block"} for k, p in enumerate(PROOFS)]
    return {"key": pid, "problem_id": pid, "is_target": True, "prompt_ids": [1], "samples": samples}


def _run(tmp_path: Path, name: str, streaming: bool, should_stop: Any = lambda: False,
         *sets: str, executor: str = "local") -> tuple[Any, Task]:
    h = recorded_run(tmp_path, name, executor, sets=["shards.solve=1", "shards.verify=1", "verification.stream_poll_s=0.05",
                                           f"verification.streaming={str(streaming).lower()}", *sets])
    for i in range(h.cfg.shard_count("conjecture")):
        Shard(h.paths.phase_dir(0, "conjecture"), i).finish([])
    task = Task(h.cfg, h.paths, 0, "verify", Shard(h.paths.phase_dir(0, "verify"), 0), should_stop)
    return h, task


def _solve_in_thread(solve: Shard, verify_shard: Shard, records: list[dict[str, Any]], seen: dict[str, Any],
                     fmt: str = "inline") -> threading.Thread:
    def append(rec: dict[str, Any]) -> dict[str, Any]:  # as a solve task writes it (arrays: ids in shard_N.arrays)
        return solve.append_item(rec) if fmt == "inline" else solve.append_item(*split_arrays(rec))

    def write() -> None:
        written = [append(records[0])]
        deadline = time.monotonic() + 60
        while verify_shard.items_logged() < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        seen["verified_while_solving"] = verify_shard.items_logged() >= 1
        with solve.partial.open("ab") as f:  # a line being written: no newline yet
            f.write(json.dumps(records[1], sort_keys=True)[:40].encode())
        time.sleep(0.3)
        seen["torn_not_read"] = verify_shard.items_logged() == 1
        for rec in records[1:]:
            written.append(append(rec))  # cuts the torn tail first, as a requeued solve task does
        solve.finish(written)

    t = threading.Thread(target=write)
    t.start()
    return t


@pytest.mark.parametrize("fmt", FORMATS)
def test_streamed_verdicts_equal_those_of_a_verify_task_started_after_solve(tmp_path: Path, fmt: str) -> None:
    """Either format of the solve item log (token ids in `shard_N.arrays`, or inline as runs before it)."""
    h, task = _run(tmp_path, "stream", streaming=True)
    records = [_solve_record(f"t{i}") for i in range(3)]
    solve = Shard(h.paths.phase_dir(0, "solve"), 0)
    seen: dict[str, Any] = {}
    writer = _solve_in_thread(solve, task.shard, records, seen, fmt)
    verify.run(task)
    writer.join()
    assert seen == {"verified_while_solving": True, "torn_not_read": True}
    meta = task.shard.meta()
    assert meta["streamed"] is True and meta["proofs"] == 9 and meta["waited_s"] > 0
    # the same solve shard verified after the fact, streaming off
    h2, task2 = _run(tmp_path, "after", streaming=False)
    shutil.copytree(solve.dir, h2.paths.phase_dir(0, "solve"), dirs_exist_ok=True)
    verify.run(task2)
    assert task2.shard.meta()["streamed"] is False  # solve was done: it read the output

    def verdicts(shard: Shard) -> list[Any]:
        return [[{k: v for k, v in x.items() if k != "time_s"} for x in rec["verdicts"]] for rec in shard.read()]

    assert verdicts(task.shard) == verdicts(task2.shard)
    assert [r["key"] for r in task.shard.read()] == ["t0", "t1", "t2"]
    assert [x["verdict"] for x in task.shard.read()[0]["verdicts"]][2] == "unextracted"


def test_a_failed_solve_shard_ends_the_streaming_task_without_a_verdict_lost(tmp_path: Path) -> None:
    h, task = _run(tmp_path, "upstream", streaming=True)
    solve = Shard(h.paths.phase_dir(0, "solve"), 0)
    solve.append_item(_solve_record("t0"))

    def fail_later() -> None:
        time.sleep(0.5)
        solve.mark_failed("round 0 solve shard 0 failed 3 times; last: worker killed by signal 9 (SIGKILL)")

    t = threading.Thread(target=fail_later)
    t.start()
    with pytest.raises(UpstreamFailed, match="solve shard 0 ran out of retries .*SIGKILL.*sgsbatch resume"):
        verify.run(task)
    t.join()
    assert [r["key"] for r in task.shard.done_items().values()] == ["t0"]  # what arrived was checked and kept
    assert not task.shard.is_done() and task.shard.failure_count() == 0


def test_a_failed_colocated_rollout_job_ends_the_streaming_task(tmp_path: Path) -> None:
    """A colocated rollout job samples the solve shards in its own process (scheduling/colocated.py): its
    shard's failure is the solve shard's, for the verify task following it."""
    colocated = ("conjecturer.enabled=false", "solver.objective=grpo", "solver.rollout_prompts=3",
                 "solver.colocated_steps=2")
    deadline = time.monotonic() + 30  # without the rule the task would wait for ever: stop it (Interrupted) instead
    h, task = _run(tmp_path, "colo", True, lambda: time.monotonic() > deadline, *colocated)
    solve = Shard(h.paths.phase_dir(0, "solve"), 0)
    solve.append_item(_solve_record("t0"))
    job = Shard(h.paths.phase_dir(0, "rollout"), 0)
    job.dir.mkdir(parents=True)

    def fail_later() -> None:
        time.sleep(0.5)
        job.mark_failed("round 0 rollout shard 0 failed 3 times; last: worker killed by signal 9 (SIGKILL)")

    t = threading.Thread(target=fail_later)
    t.start()
    with pytest.raises(UpstreamFailed, match="the rollout job sampling solve shard 0 ran out of retries .*SIGKILL"):
        verify.run(task)
    t.join()
    assert [r["key"] for r in task.shard.done_items().values()] == ["t0"]


def test_a_stop_request_ends_a_waiting_task(tmp_path: Path) -> None:
    asked = {"stop": False}
    h, task = _run(tmp_path, "stop", streaming=True, should_stop=lambda: asked["stop"])
    threading.Timer(0.3, lambda: asked.update(stop=True)).start()
    with pytest.raises(Interrupted):
        verify.run(task)  # nothing of solve has come: it waits until asked to stop
    assert not task.shard.is_done()


def test_a_done_solve_shard_without_its_item_log_is_read_from_its_output(tmp_path: Path) -> None:
    h, task = _run(tmp_path, "compacted", streaming=True)
    solve = Shard(h.paths.phase_dir(0, "solve"), 0)
    records = [_solve_record(f"t{i}") for i in range(3)]
    solve.finish(records)  # no item log at all (compaction deletes it)
    verify.run(task)
    assert [r["key"] for r in task.shard.read()] == ["t0", "t1", "t2"]


def test_items_after_reads_complete_lines_of_its_keys_only(tmp_path: Path) -> None:
    s = Shard(tmp_path, 0)
    assert s.items_after(0, {"a"}) == ([], 0)  # no item log yet
    s.append_item({"key": "a", "x": 1})
    s.append_item({"key": "b", "x": 2})
    size = s.partial.stat().st_size
    with s.partial.open("ab") as f:
        f.write(b'{"key": "c", "x"')
    got, offset = s.items_after(0, {"a", "c"})
    assert got == [{"key": "a", "x": 1}] and offset == size  # b is not asked for; c is not complete
    s.append_item({"key": "c", "x": 3})
    got, offset = s.items_after(offset, {"a", "c"})
    assert got == [{"key": "c", "x": 3}] and offset == s.partial.stat().st_size
    assert jsonl_text(got) == '{"key": "c", "x": 3}\n'
    # a late reader catches up a few bytes at a time, never splitting a line
    got, offset, calls = [], 0, 0
    while offset < s.partial.stat().st_size:
        more, offset = s.items_after(offset, {"a", "b", "c"}, max_bytes=10)
        got, calls = got + more, calls + 1
    assert [r["key"] for r in got] == ["a", "b", "c"] and calls == 3


def test_on_slurm_a_task_whose_solve_task_does_not_run_steps_aside(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The solve task's latest attempt ended (requeued, preempted) longer than stream_yield_s ago: the
    verify task requeues itself (Interrupted) instead of holding its CPUs; off Slurm it waits on."""
    from sgsbatch.run.attempts import STOPPED, end_attempt, start_attempt

    polls = iter(range(10_000))  # a bound on the wait (not a time limit): a task that never steps aside fails
    h, task = _run(tmp_path, "aside", True, lambda: next(polls) >= 9_999, "verification.stream_yield_s=0.2",
                   executor="slurm")
    solve = Shard(h.paths.phase_dir(0, "solve"), 0)
    solve.append_item(_solve_record("t0"))
    k = start_attempt(solve, "77_0")
    end_attempt(solve, k, STOPPED, 75)
    time.sleep(0.3)
    monkeypatch.setenv("SLURM_JOB_ID", "78")
    with pytest.raises(Interrupted, match="its solve shard 0 has not run for .* requeued to free its CPUs"):
        verify.run(task)
    assert [r["key"] for r in task.shard.done_items().values()] == ["t0"]  # what had come was checked first


def test_streaming_can_be_switched_on_a_live_run_but_not_what_counts_as_a_proof() -> None:
    from sgsbatch.run.amendments import OPERATIONAL, classify

    for key in ("verification.streaming", "verification.stream_poll_s", "verification.stream_yield_s"):
        assert classify(key)[0] == OPERATIONAL, key
    kind, why = classify("verification.kernel_recheck")
    assert kind is None and "streaming keys" in why
