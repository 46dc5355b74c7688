"""Ownership locks: one local driver per run, one worker per shard, on both executors.

A lock is an exclusive `flock` on a file held open for the owner's lifetime, with the holder's
host, pid and start time written into it (for the messages). The kernel (or the NFS server, which
maps flock to POSIX locks) drops the lock when its holder dies, so a lock left by a killed process
is stale by construction: the next owner simply takes it, whatever the file still says.
Covered: refusing or waiting for a second owner. Not covered: filesystems without working locks
(some FUSE mounts); there a second owner is not detected.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any


class LockHeld(RuntimeError):
    """Another live process owns the lock; `holder` says who (host, pid, since)."""

    def __init__(self, path: Path, holder: dict[str, Any]) -> None:
        self.path, self.holder = path, holder
        super().__init__(f"{path} is held by {describe(holder)}")


def describe(holder: dict[str, Any]) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("since", 0))))
    return f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')} (since {since})"


def _read(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        data = json.loads(os.read(fd, 4096).decode("utf-8", "replace") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class OwnerLock:
    """`with OwnerLock(path).acquire(wait_s):` owns `path` until the block ends (or the process dies)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, wait_s: float = 0.0, on_wait: Any = None) -> OwnerLock:
        """Take the lock, waiting up to `wait_s` for a live holder to let go; LockHeld otherwise.
        `on_wait(holder)` is called once when a wait starts."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline, told = time.monotonic() + wait_s, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _read(fd)
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise LockHeld(self.path, holder) from None
                if on_wait is not None and not told:
                    on_wait(holder)
                    told = True
                time.sleep(0.5)
        try:  # who holds it, for the messages only: a full disk leaves it unsaid, the flock is held all the same
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}).encode(), 0)
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                os.close(fd)
                raise
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = None

    def __enter__(self) -> OwnerLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def holder(path: Path) -> dict[str, Any] | None:
    """Who holds the lock at `path` now (host, pid, since), or None when nobody does."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read(fd)
    finally:
        os.close(fd)
    return None
