"""Typed errors. The library raises these; the CLI turns them into clean messages and exit codes.

Exit codes: 2 for anything the user can fix in their input (config, overrides, data), 1 for
run-state problems (unknown run, a run that already exists, a scheduler that refuses a job).
"""

from __future__ import annotations


class SgsError(Exception):
    """Base class: the message is meant for the user, as is."""

    exit_code = 1


class ConfigError(SgsError, ValueError):
    """A config file, an override or a config value is wrong. Names the file and the key."""

    exit_code = 2

    def __init__(self, source: str, key: str, message: str) -> None:
        self.source = source
        self.key = key
        self.message = message
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {message}")


class RunError(SgsError):
    """The run named does not exist, already exists, or is in a state that forbids the command."""


class SchedulerError(SgsError):
    """Slurm (or the local executor) refused or failed an operation."""
