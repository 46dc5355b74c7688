"""The REPL client (repl.py) against the recorded REPL v4.15.0 transcripts and a misbehaving stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from leanlib import FAKE, FAKE_COMMAND

from sgsbatch.verification import repl as R
from sgsbatch.verification.rules import LEAN_ERROR, SORRY, proof_failure


def _blocks(path: Path) -> list[str]:
    return [b for b in path.read_text().split("\n\n") if b.strip()]


def _recorded(transcripts: Path) -> list[Path]:
    """Transcripts with recorded replies whose commands are all `cmd` commands (no `.lean` files)."""
    out = []
    for inp in sorted(transcripts.rglob("*.in")):
        exp = inp.with_name(inp.name[:-3] + ".expected.out")
        if exp.exists() and all("path" not in json.loads(b) for b in _blocks(inp)):
            out.append(inp)
    return out


def _replay(transcript: Path, tmp_path: Path) -> R.ReplProcess:
    return R.ReplProcess([*FAKE_COMMAND, "--transcript", str(transcript)], tmp_path)


def test_every_recorded_transcript_round_trips(transcripts: Path, tmp_path: Path) -> None:
    files = _recorded(transcripts)
    assert len(files) >= 30 and any("Mathlib" in str(f) for f in files)
    for inp in files:
        exp = inp.with_name(inp.name[:-3] + ".expected.out")
        repl = _replay(inp, tmp_path)
        try:
            for cmd, want in zip(_blocks(inp), _blocks(exp), strict=True):
                assert repl.send(json.loads(cmd), timeout_s=10) == json.loads(want), inp.name
        finally:
            repl.close()


def test_env_numbering_messages_and_sorries(transcripts: Path, tmp_path: Path) -> None:
    repl = _replay(transcripts / "dup_msg.in", tmp_path)
    try:
        first = repl.command("def f := 2", None, 10)
        second = repl.command("#check f", first["env"], 10)
        third = repl.command("#check g", second["env"], 10)
    finally:
        repl.close()
    assert [first["env"], second["env"], third["env"]] == [0, 1, 2]
    assert second["messages"][0]["data"] == "f : Nat" and proof_failure(second) is None
    assert third["messages"][0]["severity"] == "error" and proof_failure(third) == LEAN_ERROR
    repl = _replay(transcripts / "tactic_sorry.in", tmp_path)
    try:
        reply = repl.command("def f : Nat := by sorry", None, 10)
    finally:
        repl.close()
    assert reply["sorries"][0]["goal"] == "⊢ Nat" and proof_failure(reply) == SORRY


def test_unknown_environment_is_a_system_error(transcripts: Path, tmp_path: Path) -> None:
    """The reference counts a proof answered this way as correct (sgs/verification/prover/lean/verifier.py
    `verify_lean4_file_kimina`, :543 `result = json.loads(outputs.stdout)` has no "messages", so :567 `result["pass"] =
    not result["errors"]` and `complete` are True); here it is a system error (retried, then `error`, never
    `verified`): a row of docs/algorithm.md's differences table."""
    repl = _replay(transcripts / "unknown_environment.in", tmp_path)
    try:
        with pytest.raises(R.ReplSystemError) as e:
            repl.command("def f : Nat := by sorry", 5, 10)
    finally:
        repl.close()
    assert e.value.kind == R.REPL_MESSAGE and "Unknown environment." in e.value.detail


@pytest.mark.parametrize(("marker", "kind"), [
    ("FAKE_CUT_BLANK", R.CUT_OFF), ("FAKE_CUT", R.CUT_OFF), ("FAKE_GARBAGE", R.GARBAGE), ("FAKE_CRASH", R.CRASH),
])
def test_broken_replies_are_system_errors(tmp_path: Path, marker: str, kind: str) -> None:
    repl = R.ReplProcess(FAKE_COMMAND, tmp_path)
    try:
        env = repl.command("import Mathlib", None, 10)["env"]
        with pytest.raises(R.ReplSystemError) as e:
            repl.command(f"theorem t : True := by\n  {marker}", env, 10)
    finally:
        repl.kill()
    assert e.value.kind == kind


def test_memory_limit_is_recognised(tmp_path: Path) -> None:
    repl = R.ReplProcess(FAKE_COMMAND, tmp_path, memory_limit_mb=300)
    try:
        with pytest.raises(R.ReplSystemError) as e:
            repl.command("theorem t : True := by\n  FAKE_MEMORY", None, 20)
    finally:
        repl.kill()
    assert e.value.kind == R.MEMORY


def test_hang_times_out_and_kill_stops_the_whole_group_only(tmp_path: Path) -> None:
    # The REPL command starts a child (like `lake env repl` does); both must die, a bystander must not.
    child_pid_file = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {child_pid_file}; exec {sys.executable} {FAKE}"
    bystander = subprocess.Popen(["sleep", "300"])
    repl = R.ReplProcess(["sh", "-c", script], tmp_path)
    try:
        with pytest.raises(R.ReplTimeout):
            repl.command("theorem t : True := by\n  FAKE_HANG", None, 0.5)
        child = int(child_pid_file.read_text())
        repl.kill()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(child):
            time.sleep(0.05)
        assert not _alive(child), "the REPL's own child must die with its process group"
        assert repl.proc.returncode is not None
        assert bystander.poll() is None, "a process the client did not start must never be signalled"
    finally:
        bystander.kill()
        bystander.wait()


def test_close_ends_the_process_and_a_missing_program_is_a_start_error(tmp_path: Path) -> None:
    repl = R.ReplProcess(FAKE_COMMAND, tmp_path)
    repl.command("", None, 10)
    repl.close()
    assert repl.proc.returncode is not None and not repl.alive()
    with pytest.raises(R.ReplSystemError) as e:
        R.ReplProcess(["/nonexistent/repl"], tmp_path)
    assert e.value.kind == R.START


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        return os.path.exists(f"/proc/{pid}")
