"""The CLI: every command has help with an example, and help never imports torch, vllm, deepspeed or matplotlib."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sgsbatch.cli import main

# every command and subcommand (`config show`), so a new one cannot be missed
COMMANDS = sorted(n for name, cmd in main.commands.items()
                  for n in [name, *(f"{name} {sub}" for sub in getattr(cmd, "commands", {}))])
HEAVY = ("torch", "vllm", "deepspeed", "transformers", "matplotlib")


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_has_example_and_imports_nothing_heavy(command: str | None) -> None:
    code = (
        "import sys, json\n"
        "from click.testing import CliRunner\n"
        "from sgsbatch.cli import main\n"
        f"args = {command.split() if command else []!r} + ['--help']\n"
        "r = CliRunner().invoke(main, args)\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps({'code': r.exit_code, 'out': r.output, 'heavy': heavy}))\n"
    )
    res = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert res["code"] == 0
    assert "Example" in res["out"] and "sgsbatch" in res["out"]
    assert res["heavy"] == []


def test_unknown_run_is_a_clean_error(tmp_path: pytest.TempPathFactory) -> None:
    proc = subprocess.run([sys.executable, "-m", "sgsbatch.cli", "status", "nope", "--runs-dir", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("Error: no run named 'nope'") and "Traceback" not in proc.stderr
