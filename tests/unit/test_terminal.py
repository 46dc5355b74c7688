"""What a person at a terminal sees, and what a file or pipe never gets: Ctrl-C while waiting or
watching (exit 130, the run goes on, how to stop it), `status --watch` redrawing on a terminal and
stopping at a terminal state, colour only on a terminal, `verify`'s `\\r` counter only on a terminal,
and `--version` naming the commit."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sgsbatch.cli import console, main
from sgsbatch.ops import control
from sgsbatch.run.shards import Shard
from sgsbatch.state.schema import RunState
from tests.runlib import TINY, recorded_run


def _interrupt(*_: Any, **__: Any) -> Any:
    raise KeyboardInterrupt


def test_ctrl_c_on_launch_wait_says_the_run_goes_on_and_how_to_stop_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    h = recorded_run(tmp_path, "t")
    monkeypatch.setattr(control, "launch", lambda *a, **k: h)  # launched; then the person presses Ctrl-C
    monkeypatch.setattr(control, "wait", _interrupt)
    res = CliRunner().invoke(main, ["launch", str(TINY), "--wait", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 130, res.output
    assert "interrupted: stopped waiting; run t goes on (its jobs are not stopped)" in res.stderr
    assert f"sgsbatch cancel t --runs-dir {tmp_path}" in res.stderr and "status t" in res.stderr
    assert "Aborted" not in res.output and h.row().state == RunState.running  # nothing was stopped


def test_ctrl_c_on_watch_and_status_watch_exits_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded_run(tmp_path, "t")
    monkeypatch.setattr(control, "watch", _interrupt)
    res = CliRunner().invoke(main, ["watch", "t", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 130 and "nothing resumes its stalls now; run t goes on" in res.stderr
    monkeypatch.setattr(time, "sleep", _interrupt)
    for args in (["status", "t", "--watch"], ["status", "--watch"]):
        res = CliRunner().invoke(main, [*args, "--runs-dir", str(tmp_path)])
        assert res.exit_code == 130 and "interrupted: stopped watching" in res.stderr, res.output
    from sgsbatch.views import proofs

    monkeypatch.setattr(proofs, "found_proofs", _interrupt)  # any other command: 130, no "Aborted!"
    res = CliRunner().invoke(main, ["proofs", "t", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 130 and res.stderr.strip() == "interrupted"


def test_status_watch_redraws_on_a_terminal_and_stops_when_the_run_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = recorded_run(tmp_path, "t")  # running, no driver: stalled, but repairable (a person need not act)
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        if len(sleeps) == 2:
            h.set_state(RunState.completed)

    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(console, "is_terminal", lambda err=False: True)
    res = CliRunner().invoke(main, ["status", "t", "--watch", "--interval", "7", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert sleeps == [7.0, 7.0] and res.stdout.count(console.CLEAR) == 3  # each refresh redrawn in place
    assert res.stdout.split(console.CLEAR)[-1].startswith("t: \x1b[32mcompleted")  # coloured on a terminal
    h.set_state(RunState.running)
    sleeps.clear()
    monkeypatch.setattr(console, "is_terminal", lambda err=False: False)  # a file or a pipe: appended, plain
    res = CliRunner().invoke(main, ["status", "t", "--watch", "--interval", "7", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0 and "\x1b" not in res.stdout and "\r" not in res.stdout
    assert res.stdout.count("\nt: ") == 2 and "\n\n" in res.stdout and res.stdout.startswith("t: stalled")


def test_status_watch_stops_at_a_stall_that_needs_a_person(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = recorded_run(tmp_path, "t")
    Shard(h.paths.phase_dir(0, "init"), 0).mark_failed("round 0 init shard 0 failed 3 times; last: boom")
    monkeypatch.setattr(time, "sleep", _interrupt)  # never reached
    res = CliRunner().invoke(main, ["status", "t", "--watch", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0 and "stalled" in res.stdout and "failed 3 times" in res.stdout
    res = CliRunner().invoke(main, ["status", "--watch", "--json", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0 and json.loads(res.stdout)[0]["stall"] == "shard_out_of_retries"


def test_colour_only_on_a_terminal(tmp_path: Path) -> None:
    recorded_run(tmp_path, "t")
    plain = CliRunner().invoke(main, ["status", "--runs-dir", str(tmp_path)])
    assert plain.exit_code == 0 and "\x1b" not in plain.output
    tty = CliRunner().invoke(main, ["status", "--runs-dir", str(tmp_path)], color=True)
    assert "t: \x1b[33m\x1b[1mstalled\x1b[0m round 0 " in tty.stdout
    err = CliRunner().invoke(main, ["status", "nope", "--runs-dir", str(tmp_path)])
    assert err.stderr.startswith("Error: no run named") and "\x1b" not in err.stderr


def test_verify_counter_is_plain_lines_off_a_terminal(tmp_path: Path) -> None:
    rows = [{"id": str(i), "header": "", "theorem": f"theorem x{i} : True := by", "proof": "trivial"}
            for i in range(20)]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(main, ["verify", str(inp), "--out", str(tmp_path / "out.jsonl"),
                                    "--set", "verification.backend=simulated"])
    assert res.exit_code == 0, res.output
    lines = [x for x in res.stderr.splitlines() if x.startswith("verify:")]
    assert "\r" not in res.stderr and len(lines) == 10 and lines[-1].startswith("verify: 20/20")


def test_version_names_the_commit_of_the_code_that_runs() -> None:
    repo = Path(__file__).resolve().parents[2]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    res = CliRunner().invoke(main, ["--version"])
    assert res.exit_code == 0 and res.stdout.startswith("sgsbatch 0.1.0, commit ")
    assert commit and commit in res.stdout and str(repo) in res.stdout
    proc = subprocess.run([sys.executable, "-m", "sgsbatch.cli", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and commit in proc.stdout
