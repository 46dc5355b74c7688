"""Resource limits per pool slot: what one REPL or checker process (and everything in its sandbox) may use.

Resources per slot. Set in the child between fork and exec of bwrap (`Limits.preexec`),
so bwrap, `lake env`, the REPL and all their threads inherit them; each counts per process:

- RLIMIT_AS (`verification.memory_limit_mb`): the address space, as before;
- RLIMIT_FSIZE (`verification.scratch_mb`): no file the process writes can grow past the cap. Under
  bwrap the scratch is a tmpfs of that size anyway (sandbox.py: that is what bounds the *total*);
  this bounds what stays on the host disk: the process's stderr, which goes to a file of the pool
  there, and, with `sandbox = "none"` (or a bwrap without `--size`), each file in the scratch
  (their total is then not bounded). A write past it raises SIGXFSZ: the process dies and the
  proof gets `error` with reason `file_size_limit`;
- RLIMIT_CPU (`verification.cpu_time_factor`): CPU seconds of each process over its whole life,
  `factor * (header_timeout_s + max_proofs_per_process * timeout_s)`, threads included: a backstop
  that bounds a thread a proof leaves spinning (the wall-clock timeout does not see it while the
  REPL keeps answering) to `factor` cores' worth of the longest life an honest process can have
  (every proof is under the timeout, or the process is replaced). Past it SIGXCPU kills the
  process: `error`, reason `cpu_limit`. It does not bound how many cores a process uses at one
  moment: only a cgroup does (below);
- RLIMIT_CORE = 0, always (no key): a crash must not write a core of a 16 GB process anywhere.

RLIMIT_NPROC (`verification.process_limit`: processes and threads) is set inside the sandbox by
the launcher (process_filter.py), because the kernel counts it per user and user namespace (5.14+):
set there, it counts only the sandbox's own tasks (its own namespace, uid 65534); set before bwrap,
it would count every task of the verify user on the node. So it applies under bwrap with a user
namespace on Linux 5.14+, for users other than root (the kernel exempts root); elsewhere it is not
set and `describe` says so. With the process filter no process can be created anyway; the limit
then bounds the threads a proof can start.

cgroups: under Slurm with `task/cgroup` (and `ConstrainCores`, `ConstrainRAMSpace`) the job's
cgroup already bounds the whole verify task: its cores (a proof's threads can only take CPU from
the task's own other slots), its memory (tmpfs pages included, which RLIMIT_AS does not see) and,
with a pids limit, its tasks. Per slot, where the task's cgroup v2 group is delegated to the verify
user, cgroups.py gives each slot (REPL and checker) a group of its own with `cpu.max`
(`verification.slot_cpus`) and `pids.max` (`verification.slot_pids`), which the processes join here,
in `Limits.preexec`; elsewhere none is made. `cgroup_note` says at startup which cgroup bounds the
task, whether per-slot groups exist (or why not), and so what is not enforced. Either way the pool
restarts a REPL whose process tree works while idle or keeps threads after a proof, and checks a
timeout beside such work again on a fresh REPL (leftover.py, pool.py).
"""

from __future__ import annotations

import math
import os
import platform
import resource
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

FILE_SIZE = "file_size_limit"
CPU = "cpu_limit"
# The signal a limit kills with, the reason it becomes, and the key that sets the limit.
LIMIT_SIGNALS: dict[int, tuple[str, str]] = {
    signal.SIGXFSZ: (FILE_SIZE, "verification.scratch_mb"),
    signal.SIGXCPU: (CPU, "verification.cpu_time_factor"),
}
MB = 1024 * 1024
NPROC_PER_NAMESPACE = (5, 14)  # Linux counts RLIMIT_NPROC per user namespace from 5.14 (ucounts)


@dataclass(frozen=True)
class Limits:
    """The rlimits of one REPL or checker process; 0 = no limit."""

    memory_mb: int = 0  # RLIMIT_AS
    file_mb: int = 0  # RLIMIT_FSIZE
    cpu_s: int = 0  # RLIMIT_CPU
    cgroup_procs: str = ""  # the slot's cgroup.procs the process joins before exec (cgroups.py); "" = none

    def rlimits(self) -> list[tuple[int, int]]:
        """(resource, value) pairs to set, RLIMIT_CORE = 0 always."""
        out = [(resource.RLIMIT_CORE, 0)]
        if self.memory_mb > 0:
            out.append((resource.RLIMIT_AS, self.memory_mb * MB))
        if self.file_mb > 0:
            out.append((resource.RLIMIT_FSIZE, self.file_mb * MB))
        if self.cpu_s > 0:
            out.append((resource.RLIMIT_CPU, self.cpu_s))
        return out

    def preexec(self) -> Callable[[], None]:
        """A `preexec_fn` that sets them: soft = hard (no process inside can raise them again), but
        for RLIMIT_CPU, whose hard limit is one second later: the kernel sends SIGXCPU at the soft
        limit (the exit status then says `cpu_limit`) and SIGKILL at the hard one. With `cgroup_procs`
        the child first joins that cgroup (writes 0 to it), so all it starts is inside from the start;
        a join that fails leaves it where it is (the pool checks membership: cgroups.member_of)."""
        pairs = [(which, (value, value + 1 if which == resource.RLIMIT_CPU else value))
                 for which, value in self.rlimits()]
        procs = self.cgroup_procs

        def apply() -> None:  # runs in the child between fork and exec: keep it minimal
            if procs:
                try:
                    fd = os.open(procs, os.O_WRONLY)
                    try:
                        os.write(fd, b"0")
                    finally:
                        os.close(fd)
                except OSError:
                    pass
            for which, soft_hard in pairs:
                resource.setrlimit(which, soft_hard)

        return apply


def cpu_seconds(factor: float, header_timeout_s: float, timeout_s: float, max_proofs: int) -> int:
    """RLIMIT_CPU for a process that may elaborate one header and `max_proofs` proofs: 0 when `factor` is 0."""
    if factor <= 0:
        return 0
    return max(1, math.ceil(factor * (header_timeout_s + max_proofs * timeout_s)))


def limit_hit(returncode: int | None) -> tuple[str, str] | None:
    """(reason, key) when `returncode` says a limit's signal ended the process: -SIG from Python,
    128+SIG through bwrap (which reports a signalled child so); else None."""
    if returncode is None:
        return None
    for sig, hit in LIMIT_SIGNALS.items():
        if returncode in (-sig, 128 + sig):
            return hit
    return None


def nproc_applies(sandbox_kind: str, user_namespace: bool, release: str | None = None,
                  uid: int | None = None) -> str | None:
    """None when RLIMIT_NPROC set inside the sandbox counts that sandbox's tasks only; else why not."""
    if sandbox_kind != "bwrap" or not user_namespace:
        return "no user namespace of its own (the count would be every task of the verify user)"
    parts = (release if release is not None else platform.release()).split(".")
    try:
        version = (int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0))
    except (IndexError, ValueError):
        return f"kernel release {release!r} unreadable"
    if version < NPROC_PER_NAMESPACE:
        return f"Linux {version[0]}.{version[1]} counts it per user, not per user namespace (5.14+)"
    if (os.getuid() if uid is None else uid) == 0:
        return "the verify user is root, whom the kernel exempts"
    return None


LEFTOVER_NOTE = ("the pool restarts a REPL that works while idle or keeps threads after a proof "
                 "(verification.idle_check_ms, thread_slack; pool.py)")


def cgroup_note(cgroup_text: str | None = None, environ: Mapping[str, str] | None = None,
                root: Path = Path("/sys/fs/cgroup"), per_slot: str = "no per-slot cgroup quotas") -> str:
    """One line: which cgroup controllers apply to this process (and so to every slot together), or
    that none does and so what is not enforced, then `per_slot` (the pool's `SlotGroups.note`). It
    reads the process's cgroups (v1 or v2), not the limits set in them."""
    env = os.environ if environ is None else environ
    if cgroup_text is None:
        try:
            cgroup_text = Path("/proc/self/cgroup").read_text()
        except OSError:
            cgroup_text = ""
    limited: list[str] = []
    for line in cgroup_text.splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if path in ("", "/"):
            continue
        if controllers == "":  # cgroup v2: the controllers are a file of the group
            try:
                names = (root / path.lstrip("/") / "cgroup.controllers").read_text().split()
            except OSError:
                names = []
            limited += [f"{n} ({path})" for n in names if n in ("cpu", "cpuset", "memory", "pids")]
        else:
            limited += [f"{n} ({path})" for n in controllers.split(",") if n in ("cpu", "cpuset", "memory", "pids")]
    job = f"Slurm job {env['SLURM_JOB_ID']}" if env.get("SLURM_JOB_ID") else "no Slurm job"
    if limited:
        return (f"{job}: the cgroup controllers {', '.join(limited)} apply to the whole verify task "
                f"(all slots together: their limits, where set, bound it); {per_slot}; {LEFTOVER_NOTE}")
    return (f"{job}, no cgroup limits this process: nothing bounds how many cores the slots' threads use "
            "at once or the RAM of their tmpfs (RLIMIT_CPU bounds each process's lifetime CPU, "
            f"RLIMIT_AS its address space, --size each tmpfs); {per_slot}; {LEFTOVER_NOTE}")
