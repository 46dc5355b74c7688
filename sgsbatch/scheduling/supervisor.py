"""The task supervisor: runs one shard's worker as a child process, retries crashes, requeues.

Both executors use it. On Slurm it is the function submitit runs in the job; locally the driver
runs one per shard. A crash (non-zero exit, an exception, `kill -9`) is recorded in the shard's
failure log (which survives requeues) and the worker is started again, until
`run.max_task_retries` retries are spent; then the shard gets a `.failed` marker with the reason
and the supervisor fails, which leaves dependent Slurm jobs never satisfiable: the run shows as
stalled until `sgsbatch resume`. A worker that exits with REQUEUE_EXIT stopped on SIGUSR2: on
Slurm the supervisor requeues the job (`scontrol requeue`; if Slurm is already requeuing it for
a preemption that fails harmlessly) and waits to be killed; locally it reports `interrupted`.
Only the child this supervisor started is ever signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard

DONE, INTERRUPTED, FAILED = "done", "interrupted", "failed"
REQUEUE_EXIT = 75  # a worker's EX_TEMPFAIL: "stopped on request (SIGUSR2), run me again"


class TaskFailed(RuntimeError):
    """A shard task crashed more often than `run.max_task_retries` allows."""


def worker_command(run_dir: Path, r: int, phase: str, shard: int, gpus: int = 0) -> list[str]:
    args = [str(run_dir), str(r), phase, str(shard)]
    if phase == "train" and gpus > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}",
                "-m", "sgsbatch.scheduling.worker", *args]
    return [sys.executable, "-m", "sgsbatch.scheduling.worker", *args]


# Rendezvous variables a trainer sets in its own process; a worker inherits none of them (torchrun
# sets its own), or a later train would rendezvous on a port an earlier process still holds.
DIST_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
            "ROLE_RANK", "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE")


def worker_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in DIST_ENV and not k.startswith("TORCHELASTIC_")}


def _tail(path: Path, n: int = 4000) -> str:
    if not path.exists():
        return ""
    data = path.read_bytes()[-n:]
    return data.decode("utf-8", "replace")


def run_supervised(run_dir: Path, r: int, phase: str, shard_index: int, *, max_retries: int, gpus: int = 0,
                   on_slurm: bool = False, install_signals: bool = False) -> str:
    """Run the shard to completion; returns DONE, INTERRUPTED (local only) or FAILED."""
    paths = RunPaths(run_dir)
    shard = Shard(paths.phase_dir(r, phase), shard_index)
    shard.dir.mkdir(parents=True, exist_ok=True)
    shard.mark_started()
    child: list[subprocess.Popen[bytes]] = []
    stop = {"usr2": False}

    def forward(sig: int, _frame: FrameType | None) -> None:
        if sig == signal.SIGUSR2:
            stop["usr2"] = True
        for c in child:
            if c.poll() is None:
                c.send_signal(sig)
        if sig == signal.SIGTERM:
            raise SystemExit(143)

    if install_signals:
        signal.signal(signal.SIGUSR2, forward)
        signal.signal(signal.SIGTERM, forward)
    while not shard.is_done():
        if shard.failed_reason() is not None:
            return FAILED
        log = shard.dir / f"shard_{shard_index:05d}.attempt.log"
        with log.open("wb") as out:
            child[:] = [subprocess.Popen(worker_command(run_dir, r, phase, shard_index, gpus),
                                         stdout=out, stderr=subprocess.STDOUT, env=worker_env())]
            shard.pid_file.write_text(str(child[0].pid))
            rc = child[0].wait()
        sys.stderr.write(_tail(log, 20000))
        if rc == 0 and shard.is_done():
            return DONE
        if rc == REQUEUE_EXIT or stop["usr2"]:
            if not on_slurm:
                return INTERRUPTED
            requeue_self()
        if on_slurm and rc in (-signal.SIGTERM, -signal.SIGKILL):
            time.sleep(5)  # a job-wide kill (cancel, requeue) reaches the supervisor too: don't count it
        reason = f"worker exited with {'signal ' + str(-rc) if rc < 0 else 'code ' + str(rc)}: {_tail(log, 1500)}"
        if rc == 0:
            reason = "worker exited 0 without writing its completion marker"
        if shard.record_failure(reason) > max_retries:
            shard.mark_failed(f"round {r} {phase} shard {shard_index} failed {max_retries + 1} times; last: {reason}")
            return FAILED
    return DONE


def requeue_self() -> None:
    """Ask Slurm to requeue this job (array task), then wait to be killed by the requeue."""
    job = os.environ.get("SLURM_JOB_ID", "")
    if os.environ.get("SLURM_ARRAY_JOB_ID"):
        job = f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
    subprocess.run(["scontrol", "requeue", job], capture_output=True, timeout=60)
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

    def __call__(self, run_dir: str, r: int, phase: str, shard_index: int, max_retries: int, gpus: int) -> str:
        result = run_supervised(Path(run_dir), r, phase, shard_index, max_retries=max_retries, gpus=gpus,
                                on_slurm=True, install_signals=True)
        # The work is done (or failed for good): a late SIGUSR2 must not kill the job now. Python
        # resets handlers it installed to SIG_DFL when it shuts down, which would turn a signal
        # arriving during teardown into a FAILED job; SIG_IGN is left alone.
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        if result == FAILED:
            reason = Shard(RunPaths(Path(run_dir)).phase_dir(r, phase), shard_index).failed_reason()
            raise TaskFailed(reason or "failed")
        return result

    def checkpoint(self, *args: object, **kwargs: object) -> object:
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, *args, **kwargs)
