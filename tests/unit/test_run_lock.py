"""run/lock.py: an owner lock names its live holder (host, pid), refuses or waits for a second
owner, and is free again the moment its holder dies, whatever the file still says (stale locks)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sgsbatch.run.lock import LockHeld, OwnerLock, describe, holder

HOLD = textwrap.dedent("""
    import sys, time
    from sgsbatch.run.lock import OwnerLock
    lock = OwnerLock(__import__("pathlib").Path(sys.argv[1])).acquire()
    print("held", flush=True)
    time.sleep(600)
""")


def _holding_process(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_live_holder_is_named_and_a_second_owner_refused(tmp_path: Path) -> None:
    path = tmp_path / "driver.lock"
    assert holder(path) is None
    proc = _holding_process(path)
    try:
        who = holder(path)
        assert who is not None and who["pid"] == proc.pid and who["host"] == socket.gethostname()
        with pytest.raises(LockHeld) as e:
            OwnerLock(path).acquire(wait_s=0.6)
        assert f"pid {proc.pid} on host {socket.gethostname()}" in str(e.value)
        assert e.value.holder["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_holders_lock_is_stale_and_taken(tmp_path: Path) -> None:
    path = tmp_path / "shard_00000.lock"
    proc = _holding_process(path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert str(proc.pid) in path.read_text()  # the file still names the dead holder ...
    assert holder(path) is None  # ... but nobody holds it
    with OwnerLock(path).acquire() as lock:
        assert lock.fd is not None
        who = holder(path)
        assert who is not None and who["pid"] == os.getpid()
    assert holder(path) is None


def test_waiting_owner_is_told_once_and_gets_the_lock_when_released(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    first = OwnerLock(path).acquire()
    told: list[dict[str, object]] = []

    def release_on_wait(h: dict[str, object]) -> None:
        told.append(h)
        first.release()

    with OwnerLock(path).acquire(wait_s=30, on_wait=release_on_wait):
        assert len(told) == 1 and told[0]["pid"] == os.getpid()
    assert "pid " in describe({"pid": 1, "host": "h", "since": 0})
