"""The task supervisor: runs one shard's worker as a child process, retries crashes, requeues.

Both executors use it. On Slurm it is the function submitit runs in the job; locally the driver
runs one per shard. Each start of the worker is an attempt with its own log (run/attempts.py).
A crash (non-zero exit, an exception, `kill -9`) is recorded in the shard's failure log with one
line of reason (the exception's own line; the traceback stays in the attempt's log) and the
worker is started again, until `run.max_task_retries` retries are spent; then the shard gets a
`.failed` marker with the reason and the supervisor fails (at once, without retries, when the run
directory's disk has less free than `alerts.min_free_mb`: the reason names the disk, its free space
and path; when even that cannot be written, it goes to the supervisor's stderr), which leaves the Slurm jobs that need
the shard never satisfiable: the run shows as stalled until `sgsbatch resume`. A worker that exits
with UPSTREAM_EXIT (a streaming verify task whose solve shard did that) ends the task the same way
without a crash counted or a `.failed` marker of its own. A worker that exits with REQUEUE_EXIT stopped on SIGUSR2: on
Slurm the supervisor requeues the job (`scontrol requeue`; if Slurm is already requeuing it for
a preemption that fails harmlessly) and waits to be killed; locally it reports `interrupted`.
SIGUSR2 is the time limit's warning (`slurm.<phase>.signal_delay_s`) and a preemption's; when
the job's end is near (`at_time_limit`, from `squeue %e` at the task's start), a task that reaches its time limit twice with
no progress in between (no new item in its item log, no new training checkpoint
or completion marker: `Shard.progress`) is not requeued again but failed, with a reason naming
the shard and the keys to raise; preemptions (SIGTERM, Slurm's own requeue) are never counted.
SIGTERM is passed on too and waited out (a train job saves its checkpoint), then the supervisor
exits without requeueing: whoever sent it (a preemption, `scontrol requeue`, a cancel) decides.
Only the child this supervisor started is ever signalled. In a multi-node train job (one task per
node) only task 0 keeps the shard's files and decides: a crash there is counted and the whole
job requeued, so that every node's ranks start again together.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NoReturn

from sgsbatch.errors import disk_full_message, is_disk_full
from sgsbatch.phases.task import REQUEUE_EXIT, UPSTREAM_EXIT
from sgsbatch.run.attempts import CRASHED, STOPPED, end_attempt, error_line, start_attempt
from sgsbatch.run.attempts import DONE as ATTEMPT_DONE
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard, atomic_write_json, atomic_write_text, read_json
from sgsbatch.scheduling.ranks import DIST_ENV, DIST_PREFIXES, is_first_task

DONE, INTERRUPTED, FAILED = "done", "interrupted", "failed"
UPSTREAM = "upstream_failed"  # the shard the task follows while it is written ran out of retries (not counted)


class TaskFailed(RuntimeError):
    """A shard task crashed more often than `run.max_task_retries` allows."""


def worker_command(run_dir: Path, r: int, phase: str, shard: int) -> list[str]:
    return [sys.executable, "-m", "sgsbatch.scheduling.worker", str(run_dir), str(r), phase, str(shard)]


def worker_env() -> dict[str, str]:
    """The supervisor's environment less any rank's variables (a train job's launcher sets its ranks' own)."""
    return {k: v for k, v in os.environ.items() if k not in DIST_ENV and not k.startswith(DIST_PREFIXES)}


def _tail(path: Path, n: int = 4000) -> str:
    if not path.exists():
        return ""
    data = path.read_bytes()[-n:]
    return data.decode("utf-8", "replace")


def run_supervised(run_dir: Path, r: int, phase: str, shard_index: int, *, max_retries: int,
                   on_slurm: bool = False, install_signals: bool = False,
                   stopping: Callable[[], bool] = lambda: False) -> str:
    """Run the shard to completion; returns DONE, INTERRUPTED (local only), FAILED, or UPSTREAM (the
    solve shard a streaming verify task follows failed: the worker's exit is not counted as a crash).

    SIGUSR2 and SIGTERM are passed on to the worker; after SIGTERM (a cancel, a SIGTERM-only
    preemption, the end of the time limit) the supervisor waits for the worker (a train job is
    writing its checkpoint), then exits 143 without counting a failure: Slurm decides what comes
    next. On the second and later tasks of a multi-node train job the worker runs once: task 0
    alone counts failures and requeues (every node's ranks must start again together). Locally,
    `stopping()` true (the driver was cancelled) ends the loop as INTERRUPTED: the worker's exit is
    never counted as a crash and no new worker starts.
    """
    task = _Supervisor(RunPaths(run_dir), r, phase, shard_index, max_retries=max_retries, on_slurm=on_slurm,
                       stopping=stopping)
    return task.run(install_signals)


class _Supervisor:
    """One shard's task: `run` starts the worker until an attempt's outcome ends the task; `attempt` runs it
    once and hands its end to the method of that outcome (`stopped`, `terminated`, `requeue`, `crashed`)."""

    def __init__(self, paths: RunPaths, r: int, phase: str, shard_index: int, *, max_retries: int,
                 on_slurm: bool, stopping: Callable[[], bool]) -> None:
        self.paths, self.r, self.phase = paths, r, phase
        self.shard = Shard(paths.phase_dir(r, phase), shard_index)
        self.max_retries, self.on_slurm, self.stopping = max_retries, on_slurm, stopping
        self.multi_node = on_slurm and int(os.environ.get("SLURM_NNODES", "1")) > 1
        self.first = is_first_task(os.environ)  # task 0 keeps the shard's files and decides
        self.end: float | None = None  # the job's end at its time limit (job_end_time)
        self.child: list[subprocess.Popen[bytes]] = []
        self.signalled = {"usr2": False, "term": False}

    def forward(self, sig: int, _frame: FrameType | None) -> None:
        """The signal handler: note the signal and pass it on to the worker."""
        self.signalled["usr2" if sig == signal.SIGUSR2 else "term"] = True
        for c in self.child:
            if c.poll() is None:
                c.send_signal(sig)

    def run(self, install_signals: bool) -> str:
        shard = self.shard
        if self.first:
            shard.dir.mkdir(parents=True, exist_ok=True)
            shard.mark_started()
            refusal = environment_refusal(self.paths, shard, self.r, self.phase)
            if refusal is not None:
                shard.mark_failed(refusal)
                return FAILED
        self.end = job_end_time() if self.on_slurm and self.first else None
        if install_signals:
            signal.signal(signal.SIGUSR2, self.forward)
            signal.signal(signal.SIGTERM, self.forward)
        while not shard.is_done():
            if shard.failed_reason() is not None:
                return FAILED
            if self.stopping():
                return INTERRUPTED
            outcome = self.attempt()
            if outcome is not None:
                return outcome
        return DONE

    def attempt(self) -> str | None:
        """Start the worker once and judge how it ended: the task's outcome, or None to start it again."""
        shard, first = self.shard, self.first
        k = start_attempt(shard, slurm_task() or "local") if first else 0
        log = shard.attempt_log if first else shard.dir / f"shard_{shard.index:05d}.node{os.environ['SLURM_NODEID']}.log"
        with log.open("wb") as out:
            self.child[:] = [subprocess.Popen(worker_command(self.paths.root, self.r, self.phase, shard.index),
                                              stdout=out, stderr=subprocess.STDOUT, env=worker_env())]
            if first:
                atomic_write_text(shard.pid_file, str(self.child[0].pid))
            if self.stopping():  # cancelled while it started: it may have missed the group's SIGTERM
                self.child[0].terminate()
            rc = self.child[0].wait()
        if self.on_slurm and rc in (-signal.SIGTERM, -signal.SIGKILL) and not self.signalled["term"]:
            # a job-wide kill (cancel, requeue) signals every process of the job, the worker may die
            # first: give ours a moment to arrive, then look at the flags below (it is not a crash)
            time.sleep(5)
        output = _tail(log, 20000)
        sys.stderr.write(output)
        if self.stopping():
            self.ended(k, rc, STOPPED)
            return INTERRUPTED
        if self.signalled["term"]:
            self.terminated(k, rc)
        if not first:
            return DONE if rc == 0 else INTERRUPTED  # task 0 decides (its ranks see ours end)
        if rc == 0 and shard.is_done():
            self.ended(k, rc, ATTEMPT_DONE)
            return DONE
        if rc == UPSTREAM_EXIT:
            self.ended(k, rc, STOPPED, error_line(output))
            return UPSTREAM
        if rc == REQUEUE_EXIT or self.signalled["usr2"]:
            return self.requeue(k, rc)
        return self.crashed(k, rc, output)

    def ended(self, k: int, rc: int, outcome: str, error: str = "") -> None:
        """Record how attempt k ended (task 0 only: it keeps the shard's files)."""
        if self.first:
            end_attempt(self.shard, k, outcome, rc, error)

    def terminated(self, k: int, rc: int) -> None:
        """SIGTERM (a cancel, a preemption, the end of the time limit) after the worker ended: exit 143,
        nothing counted; Slurm's own kill at the time limit (the worker did not stop on the warning) counts
        like a requeue at the limit, so `watch` does not resume a shard that can never finish."""
        self.ended(k, rc, STOPPED)
        if self.on_slurm and self.first and at_time_limit(self.paths, self.phase, self.end):
            _stop_at_time_limit(self.paths, self.shard, self.r, self.phase)
        raise SystemExit(143)

    def requeue(self, k: int, rc: int) -> str:
        """The worker stopped on SIGUSR2 (REQUEUE_EXIT): locally INTERRUPTED; on Slurm FAILED at a second time
        limit without progress, else the job is requeued (requeue_self does not return)."""
        self.ended(k, rc, STOPPED)
        if not self.on_slurm:
            return INTERRUPTED
        if at_time_limit(self.paths, self.phase, self.end) and _stop_at_time_limit(self.paths, self.shard, self.r,
                                                                                    self.phase):
            return FAILED
        requeue_self()

    def crashed(self, k: int, rc: int, output: str) -> str | None:
        """A crash: counted; FAILED (the shard's `.failed` marker written) past `max_retries` or at once on a
        full disk; else None (start again; a multi-node job requeues itself so every node starts again)."""
        shard = self.shard
        reason = crash_reason(rc, output)
        disk = disk_full_reason(self.paths)
        if disk is not None:  # retrying on a full disk only spends the retries: the shard fails, naming the disk
            reason = f"{reason}; {disk}"
        try:
            self.ended(k, rc, CRASHED, reason)
            if disk is not None or shard.record_failure(reason, k) > self.max_retries:
                shard.mark_failed(reason if disk is not None else f"round {self.r} {self.phase} shard {shard.index} "
                                  f"failed {self.max_retries + 1} times; last: {reason}")
                return FAILED
        except OSError as e:
            if not is_disk_full(e):
                raise
            # nothing can be recorded: say it where the supervisor's output goes; `status` blames the disk
            sys.stderr.write(f"sgsbatch supervisor: round {self.r} {self.phase} shard {shard.index}: "
                             f"{disk_full_message(e)}\n")
            return FAILED
        if self.multi_node:
            requeue_self()  # every node starts its ranks again, on a fresh rendezvous port
        return None


def disk_full_reason(paths: RunPaths) -> str | None:
    """round/disk.full_disk for the run directory (by the run's `alerts.min_free_mb`), or None."""
    from sgsbatch.round.disk import free_space, full_disk
    from sgsbatch.run.handle import current_config

    try:
        cfg = current_config(paths)
    except (OSError, ValueError):  # a config that cannot be read now: judge the disk by the default
        from sgsbatch.config.schema import Config

        cfg = Config()
    return full_disk(cfg, free_space(paths))


def crash_reason(rc: int, output: str) -> str:
    """One line: how the worker ended and, for an exit with a code, its exception's own line (the
    traceback stays in the attempt's log, `sgsbatch logs`)."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "unknown"
        return f"worker killed by signal {-rc} ({name})"
    if rc == 0:
        return "worker exited 0 without writing its completion marker"
    return f"worker exited with code {rc}: {error_line(output)}"


def _stop_at_time_limit(paths: RunPaths, shard: Shard, r: int, phase: str) -> bool:
    """Record a stop at the time limit; True (and the shard failed) the second time without progress."""
    if not shard.record_time_limit(shard.progress()):
        return False
    shard.mark_failed(
        f"round {r} {phase} shard {shard.index} reached its time limit twice without finishing a new item "
        f"({shard.progress()['items']} items done, none since the last time limit): {time_limit_advice(paths, r, phase)}")
    return True


def time_limit_advice(paths: RunPaths, r: int, phase: str) -> str:
    """The commands that repair a shard out of time: a longer limit for this round (`resume --set`
    resubmits the shard with it), more shards for the rounds not yet started (a change of method)."""
    from sgsbatch.config.loading import from_toml_text
    from sgsbatch.config.schema import ROLLOUT_JOB
    from sgsbatch.run.amendments import config_at
    from sgsbatch.run.paths import command

    table = "train" if phase == ROLLOUT_JOB else phase  # a colocated rollout job runs on slurm.train
    try:
        cfg = config_at(from_toml_text(paths.config.read_text(encoding="utf-8"), str(paths.config)), paths, r)
    except (OSError, ValueError):
        return (f"raise slurm.{table}.time_min with `sgsbatch resume RUN --set slurm.{table}.time_min=N` (this round), "
                f"or use more shards (shards.{phase}) for later rounds")
    limit = cfg.phase_resources(phase).time_min
    out = (f"raise its time limit ({limit} min) with "
           f"`{command('resume', paths, '--set', f'slurm.{table}.time_min={2 * limit}')}`")
    if phase in ("conjecture", "solve", "verify", "guide") and r + 1 < cfg.run.rounds:
        n = cfg.shard_count(phase)
        sets = ["--set", f"shards.{phase}={2 * n}"]
        if phase == "solve" and cfg.shards.verify and cfg.shards.verify % (2 * n):
            sets += ["--set", f"shards.verify={2 * cfg.shards.verify}"]  # verify stays a multiple of solve
        out += (f"; for the rounds after this one, more shards (shards.{phase}, now {n}) also shorten each task: "
                f"`{command('resume', paths, *sets, '--method-change', '--from-round', str(r + 1))}`")
    return out


def environment_refusal(paths: RunPaths, shard: Shard, r: int, phase: str) -> str | None:
    """Record this task's environment beside its shard; the reason it may not run when a package
    that matters differs from the launch's (run/environment.py), unless `run.allow_env_drift`."""
    from sgsbatch.config.loading import from_toml_text
    from sgsbatch.run import environment
    from sgsbatch.run.paths import command

    here = environment.capture()
    atomic_write_json(shard.dir / f"shard_{shard.index:05d}.env.json", here)
    launch_file = paths.root / environment.FILE
    if not launch_file.exists():
        return None  # launched before environments were recorded
    launch = read_json(launch_file)
    if not environment.drift(launch, here):
        return None
    cfg = from_toml_text(paths.config.read_text(encoding="utf-8"), str(paths.config))
    changes = environment.drift(launch, here, environment.loaded_packages(cfg))  # what this run's backends load
    if not changes or cfg.run.allow_env_drift:
        return None
    return (f"round {r} {phase} shard {shard.index} refuses to run in an environment that differs from the "
            f"launch's: {'; '.join(changes)}. Restore the launch's versions (see {launch_file}), or accept the "
            f"change with `{command('resume', paths, '--set', 'run.allow_env_drift=true')}`")


def job_end_time() -> float | None:
    """When Slurm will end this job at its time limit (`squeue %e`), asked once at the task's start;
    None off Slurm, without a limit, or when squeue does not answer."""
    from datetime import datetime

    job = os.environ.get("SLURM_JOB_ID", "")
    if not job:
        return None
    try:
        out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%e"], capture_output=True, text=True, timeout=60)
        return datetime.fromisoformat(out.stdout.strip().splitlines()[0]).timestamp()
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def at_time_limit(paths: RunPaths, phase: str, end: float | None) -> bool:
    """True if this stop (SIGUSR2 or Slurm's SIGTERM) comes from the time limit, not a preemption
    (which sends them too): the job's end (`end`, from `job_end_time`) is at most
    `slurm.<phase>.signal_delay_s` + 2 min away. False when that cannot be told: a preemption
    must never be counted."""
    from sgsbatch.config.loading import from_toml_text

    if end is None:
        return False
    try:
        cfg = from_toml_text(paths.config.read_text(encoding="utf-8"), str(paths.config))
    except (OSError, ValueError):
        return False
    return time.time() >= end - cfg.phase_resources(phase).signal_delay_s - 120


def slurm_task() -> str:
    """This Slurm array task (`123_4`) or job (`123`); empty off Slurm."""
    if os.environ.get("SLURM_ARRAY_JOB_ID"):
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
    return os.environ.get("SLURM_JOB_ID", "")


def requeue_self() -> NoReturn:
    """Ask Slurm to requeue this job (array task), then wait to be killed by the requeue."""
    subprocess.run(["scontrol", "requeue", slurm_task()], capture_output=True, timeout=60)
    deadline = time.time() + 300
    while time.time() < deadline:
        time.sleep(1)
    raise SystemExit(REQUEUE_EXIT)


class SlurmTask:
    """What submitit runs in each Slurm (array) task.

    Checkpointable in submitit's sense: if SIGUSR2 arrives before `run_supervised` installed its
    own handlers, submitit calls `checkpoint` and requeues the same task, which then resumes
    from its files.
    """

    def __call__(self, run_dir: str, r: int, phase: str, shard_index: int, max_retries: int) -> str:
        result = run_supervised(Path(run_dir), r, phase, shard_index, max_retries=max_retries,
                                on_slurm=True, install_signals=True)
        # The work is done (or failed for good): a late SIGUSR2 must not kill the job now. Python
        # resets handlers it installed to SIG_DFL when it shuts down, which would turn a signal
        # arriving during teardown into a FAILED job; SIG_IGN is left alone.
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        if result == FAILED:
            reason = Shard(RunPaths(Path(run_dir)).phase_dir(r, phase), shard_index).failed_reason()
            raise TaskFailed(reason or "failed")
        if result == UPSTREAM:  # fail the job, so that what waits for it (afterok) waits for `resume`
            raise TaskFailed(f"round {r} {phase} shard {shard_index}: the solve shard it follows ran out of retries")
        return result

    def checkpoint(self, *args: object, **kwargs: object) -> object:
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, *args, **kwargs)
