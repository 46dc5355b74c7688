"""Typed errors. The library raises these; the CLI turns them into clean messages and exit codes.

One exit-code table for every command (docs/operating.md: Exit codes; tests/unit/test_exit_codes.py walks
every command with a bad input):

    0    ok
    1    the operation failed: a run or scheduler problem, a damaged run, a run that did not complete
    2    usage or bad input: an unknown option, run, phase, round or target, a run name already
         taken, a bad config value or data file, a config this site cannot run (preflight, canary)
    130  interrupted (Ctrl-C); a run's jobs go on, and the message says how to stop them
"""

from __future__ import annotations

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


class SchedulerError(SgsError):
    """Slurm (or the local executor) refused or failed an operation."""


class UserInterrupt(SgsError):
    """Ctrl-C while a command waited or watched; the message says what goes on and how to stop it."""

    exit_code = EXIT_INTERRUPTED
