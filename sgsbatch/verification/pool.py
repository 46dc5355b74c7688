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
import os
import queue
import secrets
import shutil
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from sgsbatch.verification import cgroups
from sgsbatch.verification.checks import declared_name
from sgsbatch.verification.leftover import LeftoverLimits, Usage, busy_during, poisoned, usage
from sgsbatch.verification.limits import Limits, cpu_seconds
from sgsbatch.verification.recheck import SYSTEM_REASONS, KernelChecker, RecheckResult
from sgsbatch.verification.repl import START, ReplProcess, ReplSystemError, ReplTimeout
from sgsbatch.verification.rules import (
    AUDIT_TEMPLATE,
    REFERENCE_TEMPLATE,
    judge,
    kept_messages,
    proof_failure,
    reference_type,
)
from sgsbatch.verification.sandbox import Sandbox, check_choice
from sgsbatch.verification.verdict import (
    ERROR,
    FAILED,
    TIMEOUT,
    VERIFIED,
    FixedFeed,
    JobFeed,
    ProofJob,
    Result,
    Verdict,
    results_only,
)

log = logging.getLogger(__name__)

HEADER_ERROR = "header_error"
HEADER_TIMEOUT = "header_timeout"
INTERNAL = "internal_error"


@dataclass(frozen=True)
class PoolSettings:
    command: tuple[str, ...]
    project_dir: Path
    processes: int = 1
    timeout_s: float = 200.0
    header_timeout_s: float = 600.0
    # the config's default is true (LeanVerifier passes it): a proof's elaboration gets timeout_s less the
    # seconds its process took to start and elaborate the header, as the reference times a whole file
    timeout_includes_header: bool = False
    memory_limit_mb: int = 0
    max_proofs: int = 200
    retries: int = 1
    failed_warning_fails: bool = True
    kernel_recheck: bool = False  # the config's default is true (LeanVerifier passes it)
    checker_command: tuple[str, ...] = ()
    settle_s: float = 0.05  # how long a REPL must stay silent after a verified proof's last reply
    sandbox: str = "none"  # the config's default is "bwrap" (LeanVerifier passes it, probed): sandbox.py
    sandbox_user_namespace: bool = True
    sandbox_tmpfs_mb: int = 0
    scratch_mb: int = 0  # the REPL's scratch is a tmpfs of this size in bwrap, and RLIMIT_FSIZE of every process
    scratch_tmpfs: bool = True  # False: the scratch stays the host directory under bwrap too (what probe found)
    cpu_time_factor: float = 0.0  # RLIMIT_CPU of every process (limits.cpu_seconds); 0 = none
    process_limit: int = 0  # RLIMIT_NPROC inside a sandbox with its own user namespace; 0 = none
    sandbox_pass_env: tuple[str, ...] = ()  # more variables passed into the sandbox (tests: the stand-in's)
    process_filter: bool = False  # the config's default is true: no process creation inside (process_filter.py)
    scratch_parent: Path | None = None  # where the pool's scratch directory goes (None: the temp dir)
    leftover: LeftoverLimits = field(default_factory=LeftoverLimits)  # work a proof leaves behind (leftover.py)
    slot_cpus: float = 0.0  # the config's default is 1.0 (LeanVerifier passes it): cpu.max per slot (cgroups.py)
    slot_pids: int = 0  # the config's default is 2048: pids.max per slot (cgroups.py); both 0 = no slot groups

    def __post_init__(self) -> None:
        if self.processes < 1:
            raise ValueError(f"a REPL pool needs at least 1 process, got {self.processes}")
        if self.timeout_s <= 0 or self.header_timeout_s <= 0:
            raise ValueError("REPL timeouts must be > 0")
        if self.kernel_recheck and not self.checker_command:
            raise ValueError("kernel_recheck needs a checker command (verification.checker_command)")
        check_choice(self.sandbox)
        for key, value in (("scratch_mb", self.scratch_mb), ("cpu_time_factor", self.cpu_time_factor),
                           ("process_limit", self.process_limit), ("memory_limit_mb", self.memory_limit_mb),
                           ("slot_cpus", self.slot_cpus), ("slot_pids", self.slot_pids)):
            if value < 0:
                raise ValueError(f"verification.{key} must be >= 0 (0 = no limit), got {value}")

    def make_sandbox(self) -> Sandbox:
        return Sandbox(self.sandbox, user_namespace=self.sandbox_user_namespace, tmpfs_mb=self.sandbox_tmpfs_mb,
                       scratch_mb=self.scratch_mb if self.scratch_tmpfs else 0, process_limit=self.process_limit,
                       pass_env=self.sandbox_pass_env, process_filter=self.process_filter)

    def limits(self) -> Limits:
        """The rlimits of every REPL and checker process (limits.py)."""
        return Limits(memory_mb=self.memory_limit_mb, file_mb=self.scratch_mb,
                      cpu_s=cpu_seconds(self.cpu_time_factor, self.header_timeout_s, self.timeout_s, self.max_proofs))


def _read_no_symlinks(directory: Path, name: str) -> bytes:
    """The bytes of `directory/name`, refusing a symlink at either (a thread the proof left could
    put one there; through /proc/<pid>/root it would resolve on the host, in places the sandbox hides)."""
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as f:
        return f.read()


@dataclass
class _Item:
    index: int
    job: ProofJob
    attempts: int = 0
    errors: list[str] = field(default_factory=list)
    timeout_retried: bool = False  # checked again on a fresh process after a timeout beside leftover work


class _JobQueue:
    """Jobs by header; `take(h)` prefers header `h`, else the header with the most jobs left. Jobs
    may be added (`put`) until `close()`: until then `take` waits for one instead of returning None."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._by_header: dict[str, deque[_Item]] = {}
        self._closed = False

    def put(self, items: Sequence[_Item]) -> None:
        with self._cond:
            for it in items:
                self._by_header.setdefault(it.job.header, deque()).append(it)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def take(self, prefer: str | None, stop: threading.Event) -> _Item | None:
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

    def put_front(self, item: _Item) -> None:
        with self._cond:
            self._by_header.setdefault(item.job.header, deque()).appendleft(item)
            self._cond.notify_all()


@dataclass
class _Slot:
    """One process place in the pool; `repl` is None until started, and after a kill."""

    repl: ReplProcess | None = None
    header: str | None = None
    header_env: int | None = None
    header_s: float = 0.0  # seconds from the process's start to its header env (timeout_includes_header)
    base_threads: int = 0  # the process tree's threads right after its header (leftover.py)
    proofs: int = 0
    references: dict[str, str | None] = field(default_factory=dict)
    pids: list[int] = field(default_factory=list)
    checker: KernelChecker | None = None  # lives and dies with `repl` (its memory grows too)
    checker_pids: list[int] = field(default_factory=list)
    scratch: Path | None = None  # the process's one writable directory (sandbox.py); pickles are written here
    checker_dir: Path | None = None  # the checker's (read-only to it); no REPL can write it
    cgroup: Path | None = None  # the slot's cgroup (cgroups.py), kept across restarts; None where none

    def close(self) -> None:
        """End the slot's processes gracefully (each asked to exit, then killed), then `reset`."""
        if self.repl is not None:
            self.repl.close()
        if self.checker is not None:
            self.checker.close()
        self.reset()

    def reset(self) -> None:
        """Kill the slot's processes and whatever is left in its cgroup; delete its directories."""
        if self.repl is not None:
            self.repl.kill()
        if self.checker is not None:
            self.checker.kill()
        cgroups.kill(self.cgroup)  # what left the process groups (a proof's own session) goes too
        for path in (self.scratch, self.checker_dir):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
        self.repl, self.header, self.header_env, self.proofs, self.header_s = None, None, None, 0, 0.0
        self.checker, self.scratch, self.checker_dir = None, None, None
        self.references = {}


class ReplPool:
    """`run(jobs)` yields (job, verdict, seconds) for every job exactly once, in completion order;
    `run_feed(feed)` the same for jobs that arrive while it runs (verdict.JobFeed)."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self._slots = [_Slot() for _ in range(settings.processes)]
        self._bad_headers: dict[str, Verdict] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sandbox = settings.make_sandbox()
        self._limits = settings.limits()
        self._scratch_root: Path | None = None  # made on first use, removed by close()
        self.slot_groups = cgroups.SlotGroups.make(settings.processes, settings.slot_cpus, settings.slot_pids)
        for i, slot in enumerate(self._slots):
            slot.cgroup = self.slot_groups.dirs[i] if self.slot_groups.dirs else None
        self.leftover_restarts: Counter[str] = Counter()  # REPLs restarted for work a proof left, by cause

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
        results: queue.Queue[tuple[_Item, Verdict, float]] = queue.Queue()
        threads: list[threading.Thread] = []
        added, seen, ended, asked = 0, set[int](), False, -float("inf")
        try:
            while True:
                if not ended and (len(seen) == added or time.monotonic() - asked >= feed.wait_s):
                    jobs, ended = feed.poll()
                    asked = time.monotonic()
                    work.put([_Item(added + i, job) for i, job in enumerate(jobs)])
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

    def _slot_limits(self, slot: _Slot) -> Limits:
        """The rlimits of `slot`'s processes, and the cgroup they join before exec (where it has one)."""
        if slot.cgroup is None:
            return self._limits
        return replace(self._limits, cgroup_procs=str(slot.cgroup / "cgroup.procs"))

    def _joined(self, slot: _Slot, pid: int) -> None:
        """Warn when process `pid` did not join its slot's cgroup (it then runs without the slot's quotas)."""
        if slot.cgroup is not None and not cgroups.member_of(pid, slot.cgroup):
            log.warning("process %d did not join its slot's cgroup %s: it runs without the slot's quotas "
                        "(verification.slot_cpus, slot_pids)", pid, slot.cgroup)

    def _new_scratch(self, prefix: str = "repl-") -> Path:
        """A fresh per-process scratch directory under this pool's own temp directory."""
        with self._lock:
            if self._scratch_root is None or not self._scratch_root.is_dir():
                parent = self.settings.scratch_parent
                if parent is not None:
                    parent.mkdir(parents=True, exist_ok=True)
                self._scratch_root = Path(tempfile.mkdtemp(prefix="sgsbatch-pool-", dir=parent))
            return Path(tempfile.mkdtemp(prefix=prefix, dir=self._scratch_root))

    # ------------------------------------------------------------------ one worker thread per slot
    def _worker(self, slot: _Slot, work: _JobQueue, results: queue.Queue[tuple[_Item, Verdict, float]]) -> None:
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

    def _start(self, slot: _Slot, header: str) -> Verdict | None:
        """Make `slot` hold a live process with `header` elaborated; a Verdict if the header is bad."""
        bad = self._bad_headers.get(header)
        if bad is not None:
            return bad
        if slot.repl is not None and slot.header == header:
            return None
        slot.reset()
        s = self.settings
        slot.scratch = self._new_scratch()
        started = time.monotonic()
        argv = self._sandbox.wrap(s.command, cwd=s.project_dir, scratch=slot.scratch)
        slot.repl = ReplProcess(argv, s.project_dir, env=self._sandbox.env(slot.scratch),
                                limits=self._slot_limits(slot))
        slot.pids.append(slot.repl.pid)
        self._joined(slot, slot.repl.pid)
        try:
            reply = slot.repl.command(header, None, s.header_timeout_s)
        except ReplTimeout as e:
            slot.reset()
            raise ReplSystemError(HEADER_TIMEOUT, f"elaborating the header: {e}") from e
        if any(m.get("severity") == "error" for m in reply.get("messages") or [] if isinstance(m, dict)):
            verdict = Verdict(ERROR, HEADER_ERROR, kept_messages([reply]))
            with self._lock:
                self._bad_headers[header] = verdict
            slot.reset()
            return verdict
        slot.header, slot.header_env = header, int(reply["env"])
        slot.header_s = time.monotonic() - started
        slot.base_threads = usage(slot.repl.pid).threads
        return None

    def _proof_budget(self, slot: _Slot) -> float:
        """Seconds the proof's own command may take: `timeout_s`, less the slot's header seconds with
        `timeout_includes_header` (the reference's 500 s cover a fresh process, its import and the proof)."""
        s = self.settings
        return s.timeout_s - slot.header_s if s.timeout_includes_header else s.timeout_s

    def _check(self, slot: _Slot, item: _Item) -> Verdict:
        job, s = item.job, self.settings
        name = declared_name(job.header, job.theorem)  # `Foo.t` under a header's `namespace Foo`
        if name is None:
            return Verdict(FAILED, "bad_statement", ["the statement must be a single named theorem or lemma"])
        bad = self._start(slot, job.header)
        if bad is not None:
            return bad
        repl, env = slot.repl, slot.header_env
        assert repl is not None and env is not None
        fresh = slot.proofs == 0  # no earlier proof can have left work in this process
        before: Usage | None = None if fresh or item.timeout_retried else usage(repl.pid)
        try:
            if job.theorem not in slot.references:
                ref = repl.command(REFERENCE_TEMPLATE.format(theorem=job.theorem, name=name), env, s.timeout_s)
                slot.references[job.theorem] = reference_type(ref)
            reference = slot.references[job.theorem]
            budget = self._proof_budget(slot)
            if budget <= 0:  # the header used the whole file's time: a timeout, on a fresh process next time
                slot.reset()
                return Verdict(TIMEOUT, "timeout", [f"the header took {s.timeout_s - budget:.1f} s of "
                                                    f"verification.timeout_s = {s.timeout_s:g} "
                                                    "(verification.timeout_includes_header)"])
            reply = repl.command(job.theorem + job.proof, env, budget)
            audit = None
            if proof_failure(reply, s.failed_warning_fails) is None:
                audit = repl.command(AUDIT_TEMPLATE.format(name=name), int(reply["env"]), s.timeout_s)
            verdict = judge(reply, audit, reference, s.failed_warning_fails)
            if verdict.ok:
                repl.settle(s.settle_s)
                if s.kernel_recheck:
                    verdict = self._recheck(slot, job, name, int(reply["env"]), verdict)
        except ReplTimeout as e:
            why = (f"verification.timeout_s = {s.timeout_s:g}, the proof's command less the header's "
                   f"{slot.header_s:.1f} s" if s.timeout_includes_header else "verification.timeout_s")
            suspect = None if before is None else busy_during(before, usage(repl.pid), slot.base_threads, s.leftover)
            slot.reset()
            if suspect is not None:  # perhaps starved by work an earlier proof left: once more, on a fresh process
                log.warning("timeout of %s on a REPL that had checked proofs before (%s): checking it again on a "
                            "fresh process", job.key, suspect)
                self._count("timeout_retry")
                item.timeout_retried = True
                return self._check(slot, item)
            return Verdict(TIMEOUT, "timeout", [f"{e} ({why})"])
        left = poisoned(repl.pid, slot.base_threads, s.leftover) if repl.alive() else None
        if left is not None:
            log.warning("restarting the REPL after %s: %s", job.key, left.detail)
            self._count(left.cause)
            slot.reset()
            return Verdict(verdict.verdict, verdict.reason,
                           [*verdict.messages, f"the REPL was restarted after this proof: {left.detail}"])
        slot.proofs += 1
        if slot.proofs >= s.max_proofs:
            slot.reset()
        return verdict

    def _count(self, cause: str) -> None:
        with self._lock:
            self.leftover_restarts[cause] += 1

    def _fetch_pickle(self, repl: ReplProcess, env: int, scratch: Path, checker_dir: Path) -> Path:
        """The REPL pickles env `env` to an unpredictable path in a fresh directory of its scratch;
        the bytes are read whole, removed there and written to the checker's directory, which no
        REPL can write: a file swapped in later changes nothing checked. A
        scratch that is a tmpfs inside the sandbox is reached through /proc (`Sandbox.scratch_view`);
        the pickle then counts against its cap (`verification.scratch_mb`)."""
        token = secrets.token_hex(16)
        try:
            view = self._sandbox.scratch_view(repl.pid, scratch) / token
            view.mkdir()
        except OSError as e:
            raise ReplSystemError("no_pickle", f"the sandbox's scratch cannot be reached: {e.strerror or e}") from e
        try:
            repl.pickle(env, scratch / token / "env.olean", self.settings.timeout_s)
            try:
                data = _read_no_symlinks(view, "env.olean")
            except OSError as e:
                raise ReplSystemError("no_pickle", f"the REPL wrote no pickle: {e.strerror}") from e
        finally:
            shutil.rmtree(view, ignore_errors=True)
        private = checker_dir / f"{secrets.token_hex(16)}.olean"
        private.write_bytes(data)
        return private

    def checker_probe(self, job: ProofJob, other_theorem: str) -> tuple[bool, str]:
        """Ask the kernel checker about `job`'s proof environment against `other_theorem` (same
        name, another meaning): (accepted, reason or detail). A checker that accepts is broken
        (the canary, canary/lean.py). `job` must elaborate without errors; needs kernel_recheck."""
        assert self.settings.kernel_recheck, "the checker probe needs verification.kernel_recheck"
        name = declared_name(job.header, job.theorem)
        assert name is not None, f"{job.key}: not a named theorem"
        slot = _Slot()
        try:
            bad = self._start(slot, job.header)
            if bad is not None:
                return False, f"header: {bad.reason}"
            assert slot.repl is not None and slot.header_env is not None
            reply = slot.repl.command(job.theorem + job.proof, slot.header_env, self.settings.timeout_s)
            failure = proof_failure(reply, self.settings.failed_warning_fails)
            if failure is not None:
                return False, f"the honest proof itself failed in the REPL: {failure}"
            slot.repl.settle(self.settings.settle_s)
            result = self._checker_result(slot, job.header, other_theorem, name, int(reply["env"]))
            return result.ok, result.reason or "accepted"
        finally:
            slot.close()

    def _checker_result(self, slot: _Slot, header: str, theorem: str, name: str, env: int,
                        proof: str = "") -> RecheckResult:
        """The slot's checker's answer about env `env` of its REPL against `header` + `theorem` (the
        kernel's budget includes `proof`'s own `set_option maxHeartbeats N in`)."""
        s, repl = self.settings, slot.repl
        assert repl is not None
        if slot.scratch is None:
            slot.scratch = self._new_scratch()
        if slot.checker_dir is None:
            slot.checker_dir = self._new_scratch("checker-")
        pickle = self._fetch_pickle(repl, env, slot.scratch, slot.checker_dir)
        try:
            if slot.checker is None:
                argv = self._sandbox.wrap(s.checker_command, cwd=s.project_dir, scratch=slot.checker_dir,
                                          writable=False)
                slot.checker = KernelChecker(argv, s.project_dir, limits=self._slot_limits(slot))
                slot.checker_pids.append(slot.checker.pid)
                self._joined(slot, slot.checker.pid)
            return slot.checker.check(header=header, theorem=theorem, name=name, pickle=pickle, timeout_s=s.timeout_s,
                                      proof=proof)
        finally:
            pickle.unlink(missing_ok=True)

    def _recheck(self, slot: _Slot, job: ProofJob, name: str, env: int, verdict: Verdict) -> Verdict:
        """The kernel re-check of a proof the REPL called verified (recheck.py): its verdict is final."""
        result = self._checker_result(slot, job.header, job.theorem, name, env, job.proof)
        if result.ok:
            return Verdict(VERIFIED, None, [*verdict.messages,
                                            "kernel re-check: ok, axioms " + ", ".join(result.axioms or ["none"])])
        if result.reason in SYSTEM_REASONS:
            raise ReplSystemError(f"recheck_{result.reason}", result.detail)
        return Verdict(FAILED, f"recheck_{result.reason}", [*verdict.messages, f"kernel re-check: {result.detail}"])
