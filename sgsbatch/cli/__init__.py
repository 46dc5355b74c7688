"""The command line: every click command (commands.py registers them); nothing else imports click."""

from sgsbatch.cli.commands import main

__all__ = ["main"]
