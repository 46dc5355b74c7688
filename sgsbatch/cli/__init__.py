"""The command line: every click command (main.py registers them); nothing else imports click."""

from sgsbatch.cli.main import main

__all__ = ["main"]
