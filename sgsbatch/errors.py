"""Typed errors. The library raises these; the CLI turns them into clean messages and exit codes.

One exit-code table for every command (docs/operating.md: Exit codes; tests/unit/test_exit_codes.py walks
every command with a bad input):

    0    ok
    1    the operation failed: a run or scheduler problem, a damaged run, a run that did not complete
    2    usage or bad input: an unknown option, run, phase, round or target, a run name already
         taken, a bad config value or data file, a config this site cannot run (preflight, canary)
    130  interrupted (Ctrl-C); a run's jobs go on, and the message says how to stop them

A write that finds the disk full or the quota spent (OSError ENOSPC, EDQUOT) is failure 1 too; its
message (`disk_full_message`) names the path, the free space of its file system and what to do.
"""

from __future__ import annotations

import errno
import os

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class SgsError(Exception):
    """Base class: the message is meant for the user, as is. Exit code 1: the operation failed."""

    exit_code = EXIT_FAILED


class InputError(SgsError, ValueError):
    """What the command was given is wrong: it names a run, phase, round, shard, target or file that
    does not exist, or a run name that is taken, or it needs another option (--force). Exit code 2."""

    exit_code = EXIT_USAGE


class ConfigError(InputError):
    """A config file, an override or a config value is wrong. Names the file and the key."""

    def __init__(self, source: str, key: str, message: str) -> None:
        self.source = source
        self.key = key
        self.message = message
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {message}")


class RunError(SgsError):
    """The run is in a state that forbids the command (completed, locked by another command, damaged)."""


class DamagedFile(RunError, ValueError):
    """A file of the run that sgsbatch wrote whole cannot be read back (bytes flipped or lost on disk): names
    the file and why; a ValueError too, for readers that treat an unreadable file as absent. Exit code 1."""

    def __init__(self, path: object, reason: str, remedy: str = "") -> None:
        self.path, self.reason = path, reason
        super().__init__(f"{path} is damaged ({reason}): it no longer holds what sgsbatch wrote there; "
                         + (remedy or "restore it from a backup (or a copy of the run), then run the command again"))


class SchedulerError(SgsError):
    """Slurm (or the local executor) refused or failed an operation."""


class HubError(SgsError):
    """A service outside the cluster (the Hugging Face Hub) could not be reached or refused; the message
    names what was asked (the repo), the reason in one line, and where the local copy is. Exit code 1."""


class UserInterrupt(SgsError):
    """Ctrl-C while a command waited or watched; the message says what goes on and how to stop it."""

    exit_code = EXIT_INTERRUPTED


def is_disk_full(exc: BaseException) -> bool:
    """True for an OSError that says the disk is full (ENOSPC) or the quota spent (EDQUOT)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def free_space(path: str) -> tuple[int, int] | None:
    """(free bytes for an unprivileged writer, total bytes) of the file system holding `path` (its nearest
    existing parent), or None when it cannot be asked."""
    p = os.path.abspath(path)
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def disk_full_message(exc: OSError, where: str | None = None) -> str:
    """One line for a full disk: the file the write failed on, the file system's free space and what to do.
    A copy's or a rename's error names its source first and its destination second: the destination is written."""
    path = exc.filename2 or exc.filename or where or os.getcwd()
    space = free_space(str(path))
    room = (f"{human_bytes(space[0])} free of {human_bytes(space[1])}" if space is not None
            else "free space unknown")
    what = "the disk quota is spent" if exc.errno == errno.EDQUOT else "the disk is full"
    writing = f"writing {path}" if exc.filename or exc.filename2 else f"a write under {path}"
    return (f"{what}: {writing} failed ({exc.strerror}); {room} on the file system holding it; free space "
            f"there (or move the runs directory to a larger disk), then run the command again")
