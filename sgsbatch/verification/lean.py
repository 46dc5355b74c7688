"""The Lean verifier: static checks first, then a pool of leanprover-community REPL processes.

`LeanVerifier(vcfg, processes)` is what `verifier.make_verifier` builds for `backend = "lean"`.
A job whose header, statement or proof is refused by checks.py gets `failed` with the check's
reason code and never reaches Lean; everything else goes through pool.py (header once per
process, per-proof timeout, memory limit, restarts, retries, axiom audit, kernel re-check), each
process in the sandbox of `verification.sandbox` (sandbox.py; checked once here: bwrap present
and able to create its namespaces). Covered: wiring, path resolution, preflight. Not covered:
installing Lean or bubblewrap (lean/install.sh) or the rules themselves (checks.py, rules.py).
"""

from __future__ import annotations

import logging
import platform
import shutil
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from sgsbatch.checkout import checkout_root
from sgsbatch.config.schema import VerificationConfig
from sgsbatch.verification import process_filter
from sgsbatch.verification.checks import (
    DEFAULT_BOUNDS,
    OptionBounds,
    check_header,
    check_proof,
    check_statement,
)
from sgsbatch.verification.leftover import LeftoverLimits
from sgsbatch.verification.limits import cgroup_note
from sgsbatch.verification.pool import PoolSettings, ReplPool
from sgsbatch.verification.sandbox import check_choice, probe
from sgsbatch.verification.verdict import (
    FAILED,
    STATIC_NOTE,
    FixedFeed,
    JobFeed,
    ProofJob,
    Result,
    Verdict,
    results_only,
)

log = logging.getLogger(__name__)


def describe(s: PoolSettings) -> str:
    """The limits each REPL and checker process runs under, in words (for the startup log line)."""
    limits = s.limits()
    scratch = (f"scratch a {s.scratch_mb} MB tmpfs" if s.make_sandbox().scratch_in_sandbox
               else "scratch on the host disk, its total not capped")
    return (f"{scratch}, files <= {limits.file_mb or 'any'} MB, address space <= {limits.memory_mb or 'any'} MB, "
            f"CPU <= {limits.cpu_s or 'any'} s over its life, "
            f"{f'<= {s.process_limit} tasks' if s.process_limit and s.sandbox == 'bwrap' else 'tasks not limited'}"
            f"{', no process creation' if s.process_filter else ''}, no core dumps")


def resolve_project_dir(value: str) -> Path:
    """An absolute path as is; a relative one (the default `lean`) against the repository root.

    Config files give `./lean`-style paths already resolved against the file (config/loading.py).
    """
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    try:
        return (checkout_root() / path).resolve()
    except FileNotFoundError as e:
        raise ValueError(f"verification.project_dir = {value!r} is relative, and sgsbatch is not installed from a "
                         "checkout (a wheel): set it to the absolute path of your Lean project") from e


def _preflight(command: Sequence[str], project_dir: Path, key: str = "verification.repl_command") -> None:
    """A clear ValueError now, rather than an `error` verdict per proof, when the REPL cannot start."""
    if not command:
        raise ValueError(f"{key} is empty: give the program and its arguments")
    if not project_dir.is_dir():
        raise ValueError(f"verification.project_dir {project_dir} does not exist: install Lean with "
                         "`./setup.sh --lean` (lean/install.sh) or point the key at your Lean project")
    program = command[0]
    found = (project_dir / program).exists() if "/" in program else shutil.which(program) is not None
    if not found:
        raise ValueError(f"the program {program!r} ({key}) was not found"
                         + ("" if "/" in program else " on PATH")
                         + f": install Lean with `./setup.sh --lean` or set {key}"
                         + (" (or verification.kernel_recheck = false)" if key.endswith("checker_command") else ""))


def static_verdict(job: ProofJob, bounds: OptionBounds = DEFAULT_BOUNDS) -> Verdict | None:
    """`failed` with the reason code if the header, the statement or the proof may not reach Lean, else None."""
    rejection = check_header(job.header) or check_statement(job.theorem, bounds) or check_proof(job.proof, bounds)
    if rejection is None:
        return None
    return Verdict(FAILED, rejection.reason, [STATIC_NOTE + rejection.detail])


class _StaticFirst:
    """`feed` less the jobs the static checks decide: their results go to `statics` instead."""

    def __init__(self, feed: JobFeed, statics: deque[Result], bounds: OptionBounds) -> None:
        self.feed, self.statics, self.wait_s, self.bounds = feed, statics, feed.wait_s, bounds

    def poll(self) -> tuple[list[ProofJob], bool]:
        jobs, ended = self.feed.poll()
        to_lean = []
        for job in jobs:
            verdict = static_verdict(job, self.bounds)
            if verdict is None:
                to_lean.append(job)
            else:
                self.statics.append((job, verdict, 0.0))
        return to_lean, ended


def option_bounds(vcfg: VerificationConfig) -> OptionBounds:
    """The bounds the static checks put on a proof's resource options (verification.*_option)."""
    return OptionBounds(max_heartbeats=vcfg.max_heartbeats_option, max_rec_depth=vcfg.max_rec_depth_option)


def pool_settings(vcfg: VerificationConfig, processes: int, kernel_recheck: bool | None = None) -> PoolSettings:
    """The pool's settings from the config, checked now (the REPL and checker programs, the process
    filter, bwrap probed: what this machine allows). The verify pool and the search's tactic
    environment (search/lean_env.py, `kernel_recheck=False`) start their REPLs from these."""
    if processes < 1:
        raise ValueError(f"a Lean REPL pool needs at least 1 process, got {processes}")
    recheck = vcfg.kernel_recheck if kernel_recheck is None else kernel_recheck
    settings = PoolSettings(
        command=tuple(vcfg.repl_command),
        project_dir=resolve_project_dir(vcfg.project_dir),
        processes=processes,
        timeout_s=vcfg.timeout_s,
        header_timeout_s=vcfg.header_timeout_s,
        timeout_includes_header=vcfg.timeout_includes_header,
        memory_limit_mb=vcfg.memory_limit_mb,
        max_proofs=vcfg.max_proofs_per_process,
        retries=vcfg.system_error_retries,
        failed_warning_fails=vcfg.failed_warning_fails,
        kernel_recheck=recheck,
        checker_command=tuple(vcfg.checker_command),
        sandbox=check_choice(vcfg.sandbox),
        sandbox_tmpfs_mb=vcfg.sandbox_tmpfs_mb,
        scratch_mb=vcfg.scratch_mb,
        cpu_time_factor=vcfg.cpu_time_factor,
        process_limit=vcfg.process_limit,
        process_filter=vcfg.process_filter,
        scratch_parent=Path(vcfg.scratch_dir).expanduser() if vcfg.scratch_dir else None,
        leftover=LeftoverLimits(idle_check_ms=vcfg.idle_check_ms, idle_cpu_fraction=vcfg.idle_cpu_fraction,
                                thread_slack=vcfg.thread_slack, timeout_cpu_factor=vcfg.timeout_cpu_factor),
        slot_cpus=vcfg.slot_cpus,
        slot_pids=vcfg.slot_pids,
    )
    _preflight(settings.command, settings.project_dir)
    if vcfg.process_filter:
        try:
            process_filter.program(platform.machine(), 0)
        except process_filter.FilterUnavailable as e:
            raise ValueError(str(e)) from e
    if recheck:
        _preflight(settings.checker_command, settings.project_dir, "verification.checker_command")
    # bwrap on PATH and able to run here, with what this machine allows (a warning if less)
    sandbox = probe(settings.make_sandbox())
    return replace(settings, sandbox_user_namespace=sandbox.user_namespace, sandbox_tmpfs_mb=sandbox.tmpfs_mb,
                   process_limit=sandbox.process_limit, scratch_tmpfs=sandbox.scratch_mb > 0)


class LeanVerifier:
    """The `Verifier` for real Lean: `verify_stream` yields every job exactly once, as it completes."""

    def __init__(self, vcfg: VerificationConfig, processes: int) -> None:
        self.bounds = option_bounds(vcfg)
        self.settings = pool_settings(vcfg, processes)
        self.pool = ReplPool(self.settings)
        log.info("verify limits per process: %s; %s", describe(self.settings),
                 cgroup_note(per_slot=self.pool.slot_groups.note))

    def verify_stream(self, jobs: Sequence[ProofJob]) -> Iterator[Result]:
        return results_only(self.verify_feed(FixedFeed(jobs)))

    def verify_feed(self, feed: JobFeed) -> Iterator[Result | None]:
        """The static checks' verdicts (no Lean) as the feed gives their jobs, the others from the pool."""
        statics: deque[Result] = deque()
        for out in self.pool.run_feed(_StaticFirst(feed, statics, self.bounds)):
            while statics:
                yield statics.popleft()
            yield out
        yield from statics

    def close(self) -> None:
        if self.pool.leftover_restarts:
            log.warning("REPLs restarted for work a proof left behind (threads or CPU past its own): %s",
                        dict(self.pool.leftover_restarts))
        self.pool.close()
