"""Verify phase (CPU array): shard j checks proofs of solve shard j mod solve (see ShardsConfig).

With as many verify as solve tasks, verify task i checks all of solve shard i; with k times as many,
each checks every verify-th problem of its solve shard. With `verification.streaming` (the
default) the task starts with its solve task (scheduling/slurm.verify_arrays; the local driver
likewise) and follows the solve shard's item log (`SolveFeed`): each problem's proofs go to the
verifier as soon as its line lands there, and the task ends shortly after the solve task's last
line. Without streaming it starts when its solve shard is done and reads the solve output.
Either way what it writes is the same: the verdicts depend on the proofs only, and the output
lists the problems in the shard's order.

A pool of one REPL per allotted core stays busy with whatever has arrived; a problem's record is
appended to the item log as soon as its last sample has a verdict, so a requeued task resumes with
the problems it has not finished. An unextracted sample gets the verdict `unextracted` without
reaching the verifier. A solve shard that ran out of retries ends the task with `UpstreamFailed`
(not a crash of its own: scheduling/worker.py). On Slurm a task with nothing to check whose solve
task has not run for `verification.stream_yield_s` (requeued or preempted, waiting in the queue)
is requeued (`Interrupted`), so that its CPUs never keep the solve task from starting again. The
completion marker records this attempt's proofs, its timeout and error counts, its wall time,
whether it followed a running solve task (`streamed`), the seconds it spent waiting for solve
lines with nothing to check (the round's rates are metrics), and `refusals`: the shard's proofs the
verifier's own rules refused, by reason and item, over all of its proofs (earlier attempts'
included; round/refusals.py), which `status` and the alarm read while the round runs.
"""

from __future__ import annotations

import os
import time
from typing import Any

from sgsbatch.phases.task import Interrupted, Task, UpstreamFailed
from sgsbatch.round.refusals import tally
from sgsbatch.round.results import Problem, solve_problems
from sgsbatch.run.attempts import attempts
from sgsbatch.run.progress import ProgressLine
from sgsbatch.run.shards import Shard, rollout_shard_of
from sgsbatch.verification.verdict import ProofJob
from sgsbatch.verification.verifier import make_verifier


def _unextracted(reason: str) -> dict[str, Any]:
    return {"verdict": "unextracted", "verify_reason": reason, "messages": [], "time_s": 0.0}


class SolveFeed:
    """The solve records of this task's problems, as they become readable: from the solve shard's
    item log while it runs (`Shard.items_after`, its keys only), from its output once it is done
    and a key was not in the log (a compacted round has none; a task started after solve ended
    reads only the output). It follows the log whenever solve is unfinished, whatever
    `verification.streaming` says now (that key decides when the task is started: an amendment
    must not break a task submitted before it). `records()` returns the new ones."""

    def __init__(self, solve: Shard, keys: set[str], owner: Shard | None = None) -> None:
        self.solve, self.remaining = solve, set(keys)
        # the colocated rollout job's shard when the solve shard is sampled inside that job (no task of its
        # own): the job's failure and attempts stand for the solve shard's (scheduling/colocated.py)
        self.owner = owner
        self.offset = 0
        self.followed = False  # it read the item log of a running solve task

    def records(self) -> list[dict[str, Any]]:
        finished = self.solve.is_done()  # before reading: every line is in the log (or the output) by then
        if not finished:
            reason = self.solve.failed_reason()
            if reason is not None:
                raise UpstreamFailed(f"solve shard {self.solve.index} ran out of retries ({reason}); this verify "
                                     f"task stops until `sgsbatch resume` runs it again")
            reason = self.owner.failed_reason() if self.owner is not None else None
            if reason is not None:
                raise UpstreamFailed(f"the rollout job sampling solve shard {self.solve.index} ran out of retries "
                                     f"({reason}); this verify task stops until `sgsbatch resume` runs it again")
            self.followed = True
        out: list[dict[str, Any]] = []
        if self.followed:
            out, self.offset = self.solve.items_after(self.offset, self.remaining)
            out = [r for r in out if r["key"] in self.remaining]  # a key logged twice counts once
            self.remaining -= {r["key"] for r in out}
        if finished and self.remaining:
            rest = self.solve.read_keys(self.remaining)
            assert set(rest) == self.remaining, "verify shard j checks problems of solve shard j mod solve"
            out += [rest[k] for k in sorted(rest)]
            self.remaining.clear()
        return out

    @property
    def ended(self) -> bool:
        return not self.remaining


class _Jobs:
    """The verifier's JobFeed: each new solve record becomes its extracted samples' proof jobs; a
    problem with none to check is recorded at once."""

    def __init__(self, task: Task, feed: SolveFeed, problems: dict[str, Problem], done: dict[str, dict[str, Any]],
                 progress: ProgressLine) -> None:
        self.task, self.feed, self.problems, self.done, self.progress = task, feed, problems, done, progress
        self.wait_s = task.cfg.verification.stream_poll_s
        self.pending: dict[str, list[dict[str, Any] | None]] = {}
        self.proofs = 0
        self.waited_s = 0.0
        self._last_empty: float | None = None

    def poll(self) -> tuple[list[ProofJob], bool]:
        self.task.check_stop()
        jobs = []
        records = self.feed.records()
        if not records and not self.pending and not self.feed.ended:
            self._step_aside()
        for rec in records:
            p, samples = self.problems[rec["key"]], rec["samples"]
            verdicts: list[dict[str, Any] | None] = [None if s["ok"] else _unextracted(s["reason"]) for s in samples]
            todo = [ProofJob(f"{p.problem_id}\t{k}", p.header, p.theorem, s["proof"])
                    for k, s in enumerate(samples) if s["ok"]]
            if todo:
                self.pending[p.problem_id] = verdicts
                jobs += todo
            else:  # nothing to check: record at once
                self.record(p.problem_id, verdicts)
        self.proofs += len(jobs)
        return jobs, self.feed.ended

    def _step_aside(self) -> None:
        """On Slurm, with nothing to check: requeue this task (Interrupted) when its solve shard's latest
        attempt ended over `verification.stream_yield_s` ago (the solve task waits in the queue), so
        that this task's CPUs cannot be what keeps it waiting."""
        limit = self.task.cfg.verification.stream_yield_s
        if limit <= 0 or not os.environ.get("SLURM_JOB_ID") or self.task.cfg.run.executor == "local":
            return
        latest = attempts(self.feed.owner or self.feed.solve)[-1:]  # a colocated job: its own attempts
        if latest and latest[0].end is not None and time.time() - latest[0].end > limit:
            raise Interrupted(f"round {self.task.round} verify shard {self.task.shard.index}: its solve shard "
                              f"{self.feed.solve.index} has not run for {time.time() - latest[0].end:.0f} s "
                              f"(verification.stream_yield_s = {limit:g}); requeued to free its CPUs")

    def verdict(self, key: str, verdict: dict[str, Any]) -> None:
        self._last_empty = None
        pid, k = key.split("\t")
        self.pending[pid][int(k)] = verdict
        if all(x is not None for x in self.pending[pid]):
            self.record(pid, self.pending.pop(pid))

    def record(self, pid: str, verdicts: list[Any]) -> None:
        rec = {"key": pid, "problem_id": pid, "verdicts": verdicts}
        self.task.shard.append_item(rec)
        self.done[pid] = rec
        self.progress.step()

    def idle(self, now: float) -> None:
        """A tick of the verifier without a result: with no proof in flight, the time since the previous
        such tick was spent waiting for solve lines."""
        if self.pending:
            self._last_empty = None
            return
        if self._last_empty is not None:
            self.waited_s += now - self._last_empty
        self._last_empty = now


def run(task: Task) -> None:
    if task.shard.is_done():
        return
    problems = task.mine(solve_problems(task.cfg, task.paths, task.round))
    solve = Shard(task.paths.phase_dir(task.round, "solve"), task.cfg.solve_shard_of(task.shard.index))
    task.shard.set_total(len(problems))
    done = task.shard.done_items()
    progress = ProgressLine(f"r{task.round} verify shard {task.shard.index}", len(problems), len(done),
                            task.cfg.alerts.progress_every_s)
    keys = {p.problem_id for p in problems} - set(done)
    rollout = rollout_shard_of(task.paths, task.round) if task.cfg.colocated() else None
    jobs = _Jobs(task, SolveFeed(solve, keys, rollout[1] if rollout else None), {p.problem_id: p for p in problems}, done, progress)
    started, counts = time.time(), {"timeout": 0, "error": 0}
    if keys:
        verifier = make_verifier(task.cfg, processes=task.cfg.phase_resources("verify").cpus)
        task.shard.mark_ready()
        try:
            for out in verifier.verify_feed(jobs):
                if out is None:
                    jobs.idle(time.time())
                else:
                    job, v, secs = out
                    counts[v.verdict] = counts.get(v.verdict, 0) + 1
                    jobs.verdict(job.key, {"verdict": v.verdict, "verify_reason": v.reason, "messages": v.messages,
                                           "time_s": round(secs, 4)})
                task.check_stop()
        finally:
            verifier.close()
    assert not jobs.pending and not jobs.feed.remaining, "every proof gets a verdict"
    secs = time.time() - started
    busy = max(secs - jobs.waited_s, 1e-9)
    records = [done[p.problem_id] for p in problems]
    task.shard.finish(records,
                      {"items": len(problems), "proofs": jobs.proofs, **counts, "seconds": round(secs, 3),
                       "waited_s": round(jobs.waited_s, 3), "streamed": jobs.feed.followed,
                       "proofs_per_s": round(jobs.proofs / busy, 3) if jobs.proofs else 0.0,
                       "refusals": tally(v for rec in records for v in rec["verdicts"])})
