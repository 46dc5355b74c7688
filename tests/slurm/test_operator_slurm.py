"""Control of a running run on the real local Slurm: `cancel` returns only when no task of the run
is left in the queue and spends no retry; a worker never runs a shard another process owns, and
`resume --force` on a live run leaves one worker per shard. The local executor's side is in
tests/integration/test_operator_control.py. Waiting is by polling; nothing is measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from runlib import launch_args, recorded_run, sgsbatch, status

from sgsbatch.run.lock import OwnerLock
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling.executor import executor_for
from sgsbatch.scheduling.slurm import is_run_job

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

DEADLINE_S = 600.0  # generous: the 2-core machine may be busy; nothing is asserted about speed


def _until(cond: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.5)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status_file = Path(f"/proc/{pid}/status")
    return status_file.exists() and "State:\tZ" not in status_file.read_text()


def _queued(run: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%j"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if is_run_job(line.split("|", 1)[1], run)]


def _hung(tmp_path: Path, cli_env: dict[str, str], name: str) -> tuple[RunPaths, Shard, int]:
    env = {**cli_env, "SGSBATCH_FAULT_INJECT": "init:0:hang:1"}
    proc = sgsbatch(*launch_args(tmp_path, name, "run.executor=slurm", "run.rounds=1"), env=env)
    assert proc.returncode == 0, proc.stderr
    paths = RunPaths(tmp_path / name)
    shard = Shard(paths.phase_dir(0, "init"), 0)
    _until(lambda: shard.pid_file.exists() and _alive(int(shard.pid_file.read_text())), "the init worker")
    return paths, shard, int(shard.pid_file.read_text())


def test_cancel_on_slurm_leaves_nothing_running(slurm_cluster: object, tmp_path: Path,
                                                cli_env: dict[str, str]) -> None:
    paths, shard, worker = _hung(tmp_path, cli_env, "scx")
    assert _queued("scx")
    proc = sgsbatch("cancel", "scx", "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    # cancel returned: every job of the run has left the queue and the worker is gone
    assert _queued("scx") == [] and not _alive(worker)
    assert shard.failure_count() == 0 and not shard.is_done()
    assert status(tmp_path, "scx")["state"] == "cancelled"
    assert not paths.phase_dir(0, "conjecture").exists()


def test_resume_force_on_a_live_slurm_run_keeps_one_owner_per_shard(slurm_cluster: object, tmp_path: Path,
                                                                    cli_env: dict[str, str]) -> None:
    paths, shard, worker = _hung(tmp_path, cli_env, "sdd")
    try:
        proc = sgsbatch("resume", "sdd", "--runs-dir", str(tmp_path), "--force", env=cli_env)
        assert proc.returncode == 0, proc.stderr
        # the old task is gone before the new one is submitted; the new worker runs the shard
        assert not _alive(worker)
        _until(lambda: shard.is_done(), "the resubmitted init shard")
        assert shard.failure_count() == 0
        ids = [r["key"] for r in shard.read()]
        assert len(ids) == len(set(ids))
    finally:
        sgsbatch("cancel", "sdd", "--runs-dir", str(tmp_path), env=cli_env)
    assert _queued("sdd") == []


def test_a_slurm_worker_waits_for_the_owner_of_its_shard(slurm_cluster: object, tmp_path: Path,
                                                         cli_env: dict[str, str]) -> None:
    h = recorded_run(tmp_path, "sown", executor="slurm", tiny_targets=True)
    shard = Shard(h.paths.phase_dir(0, "init"), 0)
    log = shard.dir / "shard_00000.attempt.log"
    try:
        with OwnerLock(shard.lock_file).acquire():
            executor_for(h).start(h, 0)
            _until(lambda: log.exists() and f"waiting for pid {os.getpid()} on host" in log.read_text(),
                   "the worker to wait for the lock")
            assert not shard.is_done() and not shard.partial.exists()  # it ran nothing meanwhile
        _until(lambda: shard.is_done(), "the init shard once the owner let go")
        assert shard.failure_count() == 0
    finally:
        sgsbatch("cancel", "sown", "--runs-dir", str(tmp_path), env=cli_env)


def _watcher_state(job: str) -> str | None:
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip()
    return out or None


def test_the_watcher_job_comes_back_after_its_time_limit_and_a_preemption_and_ends_with_the_run(
        slurm_cluster: object, tmp_path: Path, cli_env: dict[str, str]) -> None:
    """`watch --submit` (ops/watcher.py): the time-limit warning (SIGUSR2, sent here with scancel as
    Slurm sends it `slurm.watcher.signal_delay_s` ahead) makes the watcher requeue itself; a
    preemption (`scontrol requeue`) brings it back through Slurm; one watcher per run; it ends, as a
    COMPLETED job, when the run ends."""
    paths, _, _ = _hung(tmp_path, cli_env, "swj")  # a run that stays live: its init shard hangs
    args = ("--runs-dir", str(tmp_path))
    try:
        proc = sgsbatch("watch", "swj", *args, "--submit", "--interval", "1", env=cli_env)
        assert proc.returncode == 0, proc.stderr
        job = json.loads((paths.root / "watcher.json").read_text())["job_id"]
        assert f"watcher job {job} submitted" in proc.stdout
        log = paths.slurm / "watcher" / job / f"{job}_0_log.out"

        def logged(text: str) -> bool:
            return log.exists() and text in log.read_text()

        _until(lambda: logged("(restart 0) watching"), "the watcher job to start")
        again = sgsbatch("watch", "swj", *args, "--submit", env=cli_env)
        assert again.returncode != 0 and f"already has a watcher job: {job}" in again.stderr
        here = sgsbatch("watch", "swj", *args, "--max-checks", "1", env=cli_env)
        assert here.returncode != 0 and "is already watched by pid" in here.stderr
        assert status(tmp_path, "swj")["watcher"] == {"job_id": job, "state": "RUNNING"}

        subprocess.run(["scancel", "--signal=USR2", job], check=True)  # its time limit is near
        _until(lambda: logged("(restart 1) watching"), "the watcher to requeue itself")
        assert logged(f"time limit near: requeueing job {job}")

        subprocess.run(["scontrol", "requeue", job], check=True)  # preempted
        _until(lambda: logged("(restart 2) watching"), "the watcher to come back after a preemption")
    finally:
        sgsbatch("cancel", "swj", *args, env=cli_env)
    _until(lambda: _watcher_state(job) is None, "the watcher job to end with the run")
    assert logged("run ended (cancelled); the watcher ends")
    states = subprocess.run(["sacct", "-n", "-X", "-j", job, "-o", "State"], capture_output=True,
                            text=True).stdout.split()
    assert states[-1] == "COMPLETED", states
