"""A pool of REPL processes for one verify task: every proof gets exactly one verdict.

Covered: N processes (one thread each); each elaborates a header once (`{"cmd": header}` -> env
H) and checks every later proof with that header in env H, then audits it (rules.py); jobs
are queued per header and a process keeps taking jobs of its current header, so it re-imports
only when its header's jobs run out. A process is killed and replaced after a proof timeout,
a crash, garbage or a cut-off reply, a limit of limits.py (memory, file size, CPU), or `max_proofs` proofs (the
REPL keeps every env, so its memory grows). A system error sends the job back to the front of
its queue for a fresh process, at most `retries` times, then it gets the verdict `error`; a
timeout is a verdict (`timeout`), not retried. Timeouts: the header gets `header_timeout_s`; the
proof's command gets `timeout_s`, less the seconds its process took to start and elaborate the
header with `timeout_includes_header` (the reference gives each file, header included, one budget
in a fresh process; none left: `timeout` at once and a fresh process next); the commands the
reference does not run (the statement's reference, the audit, the pickle, the re-check) get
`timeout_s` each. A header whose elaboration reports errors makes
every job with it an `error` (reason `header_error`) without asking again. The pool signals
only the process groups its own clients started (repl.py).

A proof the rules call verified must then leave its REPL silent and alive (`settle`, repl.py)
and, with `kernel_recheck`, pass the kernel re-check (recheck.py): the REPL pickles the proof's
env to an unpredictable path (a fresh directory named by 16 random bytes) in the slot's scratch,
the pool reads the file whole, removes it there and writes the bytes into the slot's checker
directory, which no REPL can write (a proof cannot swap the file checked); the slot's checker process (started with
the REPL, killed with it) gives the final verdict; its refusals are `failed` with reason
`recheck_<code>`. The theorem is audited and re-checked by its full name (`declared_name`: a
header's `namespace Foo` makes `theorem t` declare `Foo.t`).

Every process (REPL and checker) gets a scratch directory of its own under the pool's temp
directory, made when it starts and removed when it is replaced or the pool closes; with
`sandbox = "bwrap"` the process runs in bubblewrap with that directory as its only writable
path (sandbox.py), which with `scratch_mb` is a tmpfs of that size in its place inside the
sandbox (the host directory then stays empty). Killing a process group kills the sandbox with
everything in it. Every process runs under the rlimits of limits.py (`PoolSettings.limits`).

Nothing outlives its proof (leftover.py): after each proof's last reply the pool looks
at the REPL's process tree; when it uses CPU while waiting for a command or holds more threads
than after its header plus `thread_slack`, the REPL is killed and the next proof runs on a fresh
process (the proof keeps its verdict, with a note; `leftover_restarts` counts these). A proof that
times out on a REPL that had checked proofs before, while that REPL used more than
`timeout_cpu_factor` CPU-seconds per wall second (or too many threads), is checked once more on a
fresh process and only that verdict counts; a timeout on a fresh process is a verdict. Where the
verify task's cgroup v2 group is delegated, each slot's REPL and checker run in a cgroup of the
slot's own with `slot_cpus` cores and `slot_pids` tasks (cgroups.py: `slot_groups.note` says which).

Not covered: static checks (checks.py, run before the pool by lean.py) and the verdict rules.
"""

from __future__ import annotations

import logging
import queue
import shutil
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator, Sequence

from sgsbatch.verification import cgroups
from sgsbatch.verification.repl import START, ReplProcess, ReplSystemError
from sgsbatch.verification.slot import INTERNAL, PoolSettings, ProofChecker, QueuedProof, Slot
from sgsbatch.verification.verdict import (
    ERROR,
    FixedFeed,
    JobFeed,
    ProofJob,
    Result,
    Verdict,
    results_only,
)

log = logging.getLogger(__name__)

__all__ = ["PoolSettings", "ReplPool"]


class _JobQueue:
    """Jobs by header; `take(h)` prefers header `h`, else the header with the most jobs left. Jobs
    may be added (`put`) until `close()`: until then `take` waits for one instead of returning None."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._by_header: dict[str, deque[QueuedProof]] = {}
        self._closed = False

    def put(self, items: Sequence[QueuedProof]) -> None:
        with self._cond:
            for it in items:
                self._by_header.setdefault(it.job.header, deque()).append(it)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def take(self, prefer: str | None, stop: threading.Event) -> QueuedProof | None:
        with self._cond:
            while not stop.is_set():
                q = self._by_header.get(prefer) if prefer is not None else None
                if not q:
                    live = [d for d in self._by_header.values() if d]
                    q = max(live, key=len) if live else None
                if q:
                    return q.popleft()
                if self._closed:
                    return None
                self._cond.wait(timeout=1.0)
            return None

    def put_front(self, item: QueuedProof) -> None:
        with self._cond:
            self._by_header.setdefault(item.job.header, deque()).appendleft(item)
            self._cond.notify_all()


class ReplPool(ProofChecker):
    """`run(jobs)` yields (job, verdict, seconds) for every job exactly once, in completion order;
    `run_feed(feed)` the same for jobs that arrive while it runs (verdict.JobFeed)."""

    def __init__(self, settings: PoolSettings) -> None:
        super().__init__(settings)
        self._slots = [Slot() for _ in range(settings.processes)]
        self._stop = threading.Event()
        self.slot_groups = cgroups.SlotGroups.make(settings.processes, settings.slot_cpus, settings.slot_pids)
        for i, slot in enumerate(self._slots):
            slot.cgroup = self.slot_groups.dirs[i] if self.slot_groups.dirs else None

    @property
    def started_pids(self) -> list[int]:
        """Every REPL process id this pool has started (for tests and logs)."""
        return [pid for s in self._slots for pid in s.pids]

    @property
    def started_checker_pids(self) -> list[int]:
        """Every kernel re-check process id this pool has started."""
        return [pid for s in self._slots for pid in s.checker_pids]

    def run(self, jobs: Sequence[ProofJob]) -> Generator[Result, None, None]:
        return results_only(self.run_feed(FixedFeed(jobs)))

    def run_feed(self, feed: JobFeed) -> Iterator[Result | None]:
        """Every job of `feed` exactly once, as it completes; None after `feed.wait_s` without a
        result. The feed is asked for new jobs at most every `wait_s` (and at once when the pool
        has run dry); a slot's thread starts with the first job it can take."""
        self._stop.clear()
        work = _JobQueue()
        results: queue.Queue[tuple[QueuedProof, Verdict, float]] = queue.Queue()
        threads: list[threading.Thread] = []
        added, seen, ended, asked = 0, set[int](), False, -float("inf")
        try:
            while True:
                if not ended and (len(seen) == added or time.monotonic() - asked >= feed.wait_s):
                    jobs, ended = feed.poll()
                    asked = time.monotonic()
                    work.put([QueuedProof(added + i, job) for i, job in enumerate(jobs)])
                    added += len(jobs)
                    if ended:
                        work.close()
                    for slot in self._slots[len(threads): added]:
                        threads.append(threading.Thread(target=self._worker, args=(slot, work, results),
                                                        daemon=True, name=f"repl-pool-{len(threads)}"))
                        threads[-1].start()
                if ended and len(seen) == added:
                    return
                try:
                    item, verdict, secs = results.get(timeout=feed.wait_s)
                except queue.Empty:
                    yield None
                    continue
                assert item.index not in seen, f"job {item.job.key!r} got two verdicts"
                seen.add(item.index)
                yield item.job, verdict, secs
        finally:
            work.close()
            if not ended or len(seen) < added:  # the caller stopped early: stop the workers and their processes
                self._stop.set()
                for slot in self._slots:
                    if slot.repl is not None:
                        slot.repl.kill()
            for t in threads:
                t.join(timeout=30)

    def close(self) -> None:
        self._stop.set()
        for slot in self._slots:
            slot.close()
        if self._scratch_root is not None:
            shutil.rmtree(self._scratch_root, ignore_errors=True)
            self._scratch_root = None
        for slot in self._slots:
            slot.cgroup = None
        self.slot_groups.remove()

    def slot_repl(self, index: int, header: str) -> tuple[ReplProcess, int] | Verdict:
        """Slot `index`'s live REPL with `header` elaborated, and the header's env (a fresh process when
        it has none, a dead one or another header), or the header's `error` Verdict. For the search's
        tactic environment (search/lean_env.py), which talks to the REPL itself; the caller must
        `reset_slot` after a ReplTimeout or ReplSystemError."""
        slot = self._slots[index]
        if slot.repl is not None and not slot.repl.alive():
            slot.reset()
        bad = self._start(slot, header)
        if bad is not None:
            return bad
        assert slot.repl is not None and slot.header_env is not None
        return slot.repl, slot.header_env

    def current_repl(self, index: int) -> ReplProcess | None:
        """Slot `index`'s REPL now (None when it has none)."""
        return self._slots[index].repl

    def reset_slot(self, index: int) -> None:
        """Kill slot `index`'s processes (the next `slot_repl` starts a fresh one)."""
        self._slots[index].reset()

    def _worker(self, slot: Slot, work: _JobQueue, results: queue.Queue[tuple[QueuedProof, Verdict, float]]) -> None:
        while not self._stop.is_set():
            item = work.take(slot.header, self._stop)
            if item is None:
                return
            t0 = time.perf_counter()
            try:
                verdict = self._check(slot, item)
            except ReplSystemError as e:
                slot.reset()
                item.attempts += 1
                item.errors.append(str(e))
                if self._stop.is_set():
                    verdict = Verdict(ERROR, "stopped", item.errors[-3:])
                elif e.kind == START:  # the program cannot start: retrying cannot help
                    verdict = Verdict(ERROR, e.kind, item.errors[-3:])
                elif item.attempts <= self.settings.retries:
                    log.warning("REPL system error on %s (attempt %d, retrying on a fresh process): %s",
                                item.job.key, item.attempts, e)
                    work.put_front(item)
                    continue
                else:
                    verdict = Verdict(ERROR, e.kind, item.errors[-3:])
            except Exception as e:  # a bug here must not lose the job
                log.exception("internal error while checking %s", item.job.key)
                slot.reset()
                verdict = Verdict(ERROR, INTERNAL, [f"{type(e).__name__}: {e}"])
            results.put((item, verdict, time.perf_counter() - t0))

