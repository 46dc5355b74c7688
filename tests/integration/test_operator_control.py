"""Control of a running local run with real processes: `cancel` stops every process of the run and
spends no retry, a second driver (or `resume --force`) never runs beside the first, and a shard has
one owner at a time (a second worker waits for the first). The Slurm side is in
tests/slurm/test_operator_slurm.py.

The run hangs in its init task (`SGSBATCH_FAULT_INJECT=init:0:hang:1`), so it is reliably mid-phase.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import launch_args, recorded_run, sgsbatch, status  # noqa: E402

from sgsbatch.run.lock import OwnerLock  # noqa: E402
from sgsbatch.run.paths import RunPaths  # noqa: E402
from sgsbatch.run.shards import Shard  # noqa: E402
from sgsbatch.scheduling import local  # noqa: E402

DEADLINE_S = 300.0  # generous: the machine may be busy; nothing is asserted about how fast


def _until(cond: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()


def _group_alive(pgid: int) -> bool:
    """A process of the group still runs (ps; zombies not yet reaped by init do not run)."""
    out = subprocess.run(["ps", "-eo", "pgid=,stat="], capture_output=True, text=True, check=True).stdout
    return any(int(g) == pgid and not st.startswith("Z") for g, st in (line.split() for line in out.splitlines()))


def _hung_run(tmp_path: Path, cli_env: dict[str, str], name: str) -> tuple[RunPaths, Shard, int, int]:
    env = {**cli_env, "SGSBATCH_FAULT_INJECT": "init:0:hang:1"}
    proc = sgsbatch(*launch_args(tmp_path, name, "run.executor=local"), env=env)
    assert proc.returncode == 0, proc.stderr
    paths = RunPaths(tmp_path / name)
    shard = Shard(paths.phase_dir(0, "init"), 0)
    _until(lambda: shard.pid_file.exists() and _alive(int(shard.pid_file.read_text())), "the init worker")
    driver = local.driver_alive(paths)
    assert driver is not None
    return paths, shard, driver, int(shard.pid_file.read_text())


def test_cancel_stops_every_process_and_spends_no_retry(tmp_path: Path, cli_env: dict[str, str]) -> None:
    paths, shard, driver, worker = _hung_run(tmp_path, cli_env, "cx")
    proc = sgsbatch("cancel", "cx", "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    # cancel returns once the driver's whole process group is gone: nothing can go on after it
    assert not _group_alive(driver) and not _alive(worker)
    assert shard.failure_count() == 0 and not shard.is_done()
    assert not paths.phase_dir(0, "conjecture").exists()
    assert status(tmp_path, "cx")["state"] == "cancelled"
    assert "stopped" in (paths.local / "driver.log").read_text()


def test_one_driver_per_run(tmp_path: Path, cli_env: dict[str, str]) -> None:
    paths, shard, driver, worker = _hung_run(tmp_path, cli_env, "dd")
    try:
        second = subprocess.run([sys.executable, "-m", local.DRIVER_MODULE, str(paths.root)], capture_output=True,
                                text=True, env=cli_env, timeout=DEADLINE_S)
        assert second.returncode == 2 and f"already driven by pid {driver}" in second.stderr
        assert _alive(driver) and _alive(worker)
        # resume --force stops the first driver (all of it) before the next one starts
        proc = sgsbatch("resume", "dd", "--runs-dir", str(tmp_path), "--force", env=cli_env)
        assert proc.returncode == 0, proc.stderr
        assert not _group_alive(driver) and not _alive(worker)
        assert shard.failure_count() == 0
        new = local.driver_alive(paths)
        assert new is not None and new != driver
    finally:
        sgsbatch("cancel", "dd", "--runs-dir", str(tmp_path), env=cli_env)
    assert local.driver_alive(paths) is None


def test_a_shard_has_one_owner(tmp_path: Path, cli_env: dict[str, str]) -> None:
    h = recorded_run(tmp_path, "own")
    shard = Shard(h.paths.phase_dir(0, "init"), 0)
    env = {**cli_env, "SGSBATCH_FAULT_INJECT": "init:0:raise:1"}
    with OwnerLock(shard.lock_file).acquire():
        worker = subprocess.Popen([sys.executable, "-m", "sgsbatch.scheduling.worker", str(h.paths.root), "0", "init",
                                   "0"], stderr=subprocess.PIPE, text=True, env=env)
        assert worker.stderr is not None
        line = worker.stderr.readline()
        assert f"waiting for pid {os.getpid()} on host" in line and "round 0 init shard 0" in line
        assert worker.poll() is None  # it waits: it has not run the shard
    _, err = worker.communicate(timeout=DEADLINE_S)
    assert worker.returncode != 0 and "injected fault" in err  # it ran once the owner let go


def test_one_command_at_a_time_changes_a_run(tmp_path: Path, cli_env: dict[str, str]) -> None:
    h = recorded_run(tmp_path, "ctl")
    with OwnerLock(h.paths.root / "control.lock").acquire():
        for verb in ("cancel", "resume"):
            proc = sgsbatch(verb, "ctl", "--runs-dir", str(tmp_path), env=cli_env)
            assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
            assert f"another sgsbatch command (pid {os.getpid()} on host" in proc.stderr
            assert "is changing run ctl right now" in proc.stderr
        assert local.driver_alive(h.paths) is None and h.row().state == "running"  # nothing was done
    proc = sgsbatch("cancel", "ctl", "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode == 0, proc.stderr
