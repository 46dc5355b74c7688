"""One slot of the REPL pool and the protocol of checking one proof on it: the pool's settings, a slot's
processes (`Slot`: the REPL, its kernel checker, their scratch and cgroup), and `ProofChecker`, the
per-proof steps a pool's worker runs on its slot: start a REPL on a header, check a proof (the budget,
the rules' audit, `settle`, the pickle, the kernel re-check), retry a timeout that followed a poisoned
proof on a fresh process. How jobs are scheduled onto slots (threads, queues, the feed) is pool.py's;
the module docstring of pool.py describes both together.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from sgsbatch.verification import cgroups
from sgsbatch.verification.checks import declared_name
from sgsbatch.verification.leftover import LeftoverLimits, Usage, busy_during, poisoned, usage
from sgsbatch.verification.limits import Limits, cpu_seconds
from sgsbatch.verification.recheck import SYSTEM_REASONS, KernelChecker, RecheckResult
from sgsbatch.verification.repl import ReplProcess, ReplSystemError, ReplTimeout
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
    ProofJob,
    Verdict,
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
class QueuedProof:
    index: int
    job: ProofJob
    attempts: int = 0
    errors: list[str] = field(default_factory=list)
    timeout_retried: bool = False  # checked again on a fresh process after a timeout beside leftover work


@dataclass
class Slot:
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




class ProofChecker:
    """The per-proof protocol over a pool's slots (pool.ReplPool schedules onto them): what each method
    needs of the pool is set here."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self._bad_headers: dict[str, Verdict] = {}
        self._lock = threading.Lock()
        self._sandbox = settings.make_sandbox()
        self._limits = settings.limits()
        self._scratch_root: Path | None = None  # made on first use, removed by the pool's close()
        self.leftover_restarts: Counter[str] = Counter()  # REPLs restarted for work a proof left, by cause

    def _slot_limits(self, slot: Slot) -> Limits:
        """The rlimits of `slot`'s processes, and the cgroup they join before exec (where it has one)."""
        if slot.cgroup is None:
            return self._limits
        return replace(self._limits, cgroup_procs=str(slot.cgroup / "cgroup.procs"))

    def _joined(self, slot: Slot, pid: int) -> None:
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
    def _start(self, slot: Slot, header: str) -> Verdict | None:
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

    def _proof_budget(self, slot: Slot) -> float:
        """Seconds the proof's own command may take: `timeout_s`, less the slot's header seconds with
        `timeout_includes_header` (the reference's 500 s cover a fresh process, its import and the proof)."""
        s = self.settings
        return s.timeout_s - slot.header_s if s.timeout_includes_header else s.timeout_s

    def _check(self, slot: Slot, item: QueuedProof) -> Verdict:
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
        slot = Slot()
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

    def _checker_result(self, slot: Slot, header: str, theorem: str, name: str, env: int,
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

    def _recheck(self, slot: Slot, job: ProofJob, name: str, env: int, verdict: Verdict) -> Verdict:
        """The kernel re-check of a proof the REPL called verified (recheck.py): its verdict is final."""
        result = self._checker_result(slot, job.header, job.theorem, name, env, job.proof)
        if result.ok:
            return Verdict(VERIFIED, None, [*verdict.messages,
                                            "kernel re-check: ok, axioms " + ", ".join(result.axioms or ["none"])])
        if result.reason in SYSTEM_REASONS:
            raise ReplSystemError(f"recheck_{result.reason}", result.detail)
        return Verdict(FAILED, f"recheck_{result.reason}", [*verdict.messages, f"kernel re-check: {result.detail}"])
