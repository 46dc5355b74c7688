"""Work a proof leaves behind in its REPL: threads that keep running, or that pile up.

A proof's code runs inside the REPL process and may start threads (`Task.spawn (prio := .dedicated)`,
`IO.asTask`) that outlive its reply: the process filter allows threads, RLIMIT_CPU is a lifetime
budget of thousands of CPU-seconds, and such a thread takes CPU from the next proofs the REPL
checks (which then time out: a wrong verdict for someone else's proof). The pool (pool.py) asks
this module, after each proof's last reply, whether the REPL now runs work of its own, and
restarts it when it does.

Covered: `usage(pid)`, the threads and CPU of the process `pid` and all its descendants (a
sandbox's bwrap processes and the REPL under them; a process that left the tree by a double fork
outside a pid namespace is not seen, and the process filter denies forks); `poisoned`: the tree
wants CPU while the REPL waits for a command (samples `idle_check_ms` apart: the time its threads
ran or stood runnable in the run queue, more than `idle_cpu_fraction` of one core in two windows
in a row; the queue's time counts so that a thread starved on a loaded node, which runs only a
sliver of a core, is seen as the whole core it takes from the next proof), or holds more than `thread_slack` threads beyond the count
right after its header (real Lean's own task-manager pool grows with a proof's parallel tasks up
to its worker count, so the slack must be generous); `busy_during`: a command that timed out
while the tree used (CPU-seconds, exited threads included) or wanted (run + run-queue time) more
than `timeout_cpu_factor` cores (a thread that
starts spinning only later is not seen when the proof returns, but its CPU is seen here).
Not covered: CPU taken by processes outside the tree, and per-slot quotas (cgroups, limits.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PROC = Path("/proc")


@dataclass(frozen=True)
class Usage:
    """A process tree at one moment: its threads, CPU-seconds of all its processes (exited threads
    included), the time its live threads ran and stood runnable in the run queue in ns (schedstat,
    precise; exited threads not included), and when."""

    threads: int
    cpu_s: float
    run_ns: int
    wait_ns: int
    at: float
    runnable: int = 0  # threads in state R (running, or runnable in the run queue) at that moment


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()  # fields from the state on (the name may hold spaces)


def descendants(root: int) -> list[int]:
    """`root` and every process below it (by parent id), as /proc shows them now."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _schedstat(pid: int) -> tuple[int, int, int]:
    """ns the live threads of `pid` ran on a CPU, ns they waited runnable in the run queue (both as the
    kernel last updated them: at a switch, so a long wait shows only once it ends), and how many are
    in state R now."""
    run, wait, runnable = 0, 0, 0
    try:
        tasks = os.listdir(PROC / str(pid) / "task")
    except OSError:
        return 0, 0, 0
    for tid in tasks:
        task = PROC / str(pid) / "task" / tid
        try:
            fields = (task / "schedstat").read_text().split()
            run, wait = run + int(fields[0]), wait + int(fields[1])
            runnable += (task / "stat").read_text().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, ValueError, IndexError):
            continue
    return run, wait, runnable


def usage(root: int) -> Usage:
    """Threads and CPU of `root` and its descendants (all zero when it is gone)."""
    threads, ticks, run_ns, wait_ns, runnable = 0, 0, 0, 0, 0
    for pid in descendants(root):
        fields = _stat_fields(pid)
        if fields is None:
            continue
        # fields[0] is stat's field 3 (state): utime 14, stime 15, num_threads 20
        ticks += int(fields[11]) + int(fields[12])
        threads += int(fields[17])
        run, wait, ready = _schedstat(pid)
        run_ns, wait_ns, runnable = run_ns + run, wait_ns + wait, runnable + ready
    return Usage(threads=threads, cpu_s=ticks / _TICK, run_ns=run_ns, wait_ns=wait_ns, at=time.monotonic(),
                 runnable=runnable)


def demand(before: Usage, after: Usage) -> float:
    """Cores the tree wanted between two samples: its threads' time running or runnable in the run
    queue per wall second (a spinning thread counts 1.0 however loaded the node is)."""
    wall = max(after.at - before.at, 1e-6)
    return max(after.run_ns + after.wait_ns - before.run_ns - before.wait_ns, 0) / 1e9 / wall


@dataclass(frozen=True)
class LeftoverLimits:
    """The pool's settings for this check (config keys verification.idle_check_ms, ...)."""

    idle_check_ms: float = 20.0  # 0 = no check
    idle_cpu_fraction: float = 0.25
    thread_slack: int = 32
    timeout_cpu_factor: float = 1.5  # 0 = no timeout retry

    def __post_init__(self) -> None:
        for key, value in (("idle_check_ms", self.idle_check_ms), ("idle_cpu_fraction", self.idle_cpu_fraction),
                           ("thread_slack", self.thread_slack), ("timeout_cpu_factor", self.timeout_cpu_factor)):
            if value < 0:
                raise ValueError(f"verification.{key} must be >= 0, got {value}")


@dataclass(frozen=True)
class Leftover:
    """Work a proof left in its REPL: `cause` is the counter's name (`leftover_cpu`, `leftover_threads`)."""

    cause: str
    detail: str


def _extra_threads(threads: int, baseline_threads: int, limits: LeftoverLimits) -> str | None:
    """Why `threads` are too many for a REPL that had `baseline_threads` after its header, or None."""
    extra = threads - baseline_threads
    if extra > limits.thread_slack:
        return (f"it holds {extra} threads more than after its header "
                f"(verification.thread_slack = {limits.thread_slack})")
    return None


WINDOW_SAMPLES = 4  # samples of the threads' states within one idle window


def _window(root: int, start: Usage, window_ms: float) -> tuple[Usage, float, bool]:
    """One idle window from `start`: its last sample, the cores the tree wanted in it, and whether
    some thread was runnable at every sample (a spinner always is, whatever the load)."""
    always_runnable = start.runnable > 0
    sample = start
    for _ in range(WINDOW_SAMPLES):
        time.sleep(window_ms / 1000 / WINDOW_SAMPLES)
        sample = usage(root)
        always_runnable = always_runnable and sample.runnable > 0
    return sample, demand(start, sample), always_runnable


def poisoned(root: int, baseline_threads: int, limits: LeftoverLimits) -> Leftover | None:
    """The work the idle REPL tree `root` runs that a proof left (threads beyond `baseline_threads` +
    slack, or CPU while it waits for a command), or None; None without a check (idle_check_ms 0).

    A window is busy when the tree wanted more than idle_cpu_fraction of a core (run + run-queue
    time) or some thread stood runnable at every sample; two busy windows in a row (the reply's own
    last steps end within one) make the REPL poisoned. The states matter on a loaded node, where
    the kernel adds a long run-queue wait to schedstat only once the wait ends."""
    if limits.idle_check_ms <= 0:
        return None
    second, busy, runnable = _window(root, usage(root), limits.idle_check_ms)
    if busy > limits.idle_cpu_fraction or runnable:
        _, busy_again, runnable_again = _window(root, second, limits.idle_check_ms)
        if busy_again > limits.idle_cpu_fraction or runnable_again:
            return Leftover("leftover_cpu", f"it wanted {min(busy, busy_again):.2f} of a core"
                                            f"{', runnable throughout' if runnable and runnable_again else ''}"
                                            " while waiting for a command (verification.idle_cpu_fraction)")
    threads = _extra_threads(second.threads, baseline_threads, limits)
    return None if threads is None else Leftover("leftover_threads", threads)


def busy_during(before: Usage, after: Usage, baseline_threads: int, limits: LeftoverLimits) -> str | None:
    """Why a command that timed out between `before` and `after` looks like it competed with work
    left by an earlier proof (CPU-seconds or demand above timeout_cpu_factor x wall seconds, or threads
    beyond the slack), or None; None with timeout_cpu_factor 0."""
    if limits.timeout_cpu_factor <= 0:
        return None
    wall = max(after.at - before.at, 1e-6)
    rate = max((after.cpu_s - before.cpu_s) / wall, demand(before, after))
    if rate > limits.timeout_cpu_factor:
        return f"the REPL wanted {rate:.2f} cores (verification.timeout_cpu_factor)"
    return _extra_threads(after.threads, baseline_threads, limits)
