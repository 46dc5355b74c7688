"""Every advisory message is executable (issue 28): a run is put in the state a message is about,
the command the message advises is taken from the message itself (never written here) and run as
printed, and the run then completes.

Covered here, on the local executor with rehearsal runs of jobs/tiny.toml (SIMULATED compute: the
repairs are about the run's control, not its numbers): a shard out of retries, a dead local
driver, an edited config.toml (config drift), a changed software environment (environment drift),
the disk alarm. On the local Slurm (tests/slurm/test_runs.py, test_site_preflight.py): the time
limit reached twice, a dependency that can never be satisfied, a refused partition at pre-flight.
`advised` also refuses a message whose command still holds a placeholder (`N`, `KEY=VALUE`, `RUN`):
a message must say exactly what to run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import TINY, advised, repair_steps, run_advice, sgsbatch, status  # noqa: E402

pytestmark = pytest.mark.slow

def rehearsal(runs: Path, name: str, env: dict[str, str], *sets: str) -> None:
    args = ["launch", str(TINY), "--rehearse"]
    for o in (f"run.runs_dir={runs}", f"run.name={name}", "run.executor=local", "run.rounds=1",
              "run.poll_interval_s=1", "run.max_task_retries=1", *sets):
        args += ["--set", o]
    proc = sgsbatch(*args, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def wait_for(runs: Path, name: str, states: tuple[str, ...], deadline_s: float = 900.0) -> dict[str, Any]:
    end = time.monotonic() + deadline_s  # a safety limit, not a measurement
    while True:
        st = status(runs, name)
        if st["state"] in states:
            return st
        assert time.monotonic() < end, f"run {name} never reached {states}: {st}"
        time.sleep(1)


def repair_and_complete(runs: Path, name: str, message: str, env: dict[str, str], expect: int = 1) -> list[str]:
    """Run every command `message` advises, in order; then the run must complete. Returns their outputs."""
    commands = repair_steps(message)
    assert len(commands) >= expect, f"no command advised in {message!r}"
    outs = []
    for argv in commands:
        proc = run_advice(argv, env)
        assert proc.returncode == 0, f"{shlex.join(argv)} (advised by {message!r}) failed: {proc.stdout}{proc.stderr}"
        outs.append(proc.stdout + proc.stderr)
    st = wait_for(runs, name, ("completed", "stalled", "failed", "cancelled"))
    assert st["state"] == "completed", (message, st)
    return outs


def test_a_shard_out_of_retries(tmp_path: Path, cli_env: dict[str, str]) -> None:
    rehearsal(tmp_path, "oor", {**cli_env, "SGSBATCH_FAULT_INJECT": "solve:0:raise:2"})
    st = wait_for(tmp_path, "oor", ("stalled", "completed"))
    assert st["state"] == "stalled" and st["stall"] == "shard_out_of_retries", st
    assert "\n" not in st["message"], st["message"]  # one line; the traceback is in the log it names
    repair_and_complete(tmp_path, "oor", st["message"], cli_env)


def test_a_dead_local_driver(tmp_path: Path, cli_env: dict[str, str]) -> None:
    rehearsal(tmp_path, "ddr", {**cli_env, "SGSBATCH_FAULT_INJECT": "solve:0:hang:1"})
    pid_file = tmp_path / "ddr" / "local" / "driver.pid"
    end = time.monotonic() + 300
    while not (tmp_path / "ddr" / "rounds" / "r0000" / "solve").exists():
        assert time.monotonic() < end
        time.sleep(0.5)
    os.killpg(int(pid_file.read_text().split()[0]), signal.SIGKILL)  # the driver and its workers
    st = wait_for(tmp_path, "ddr", ("stalled",))
    assert st["stall"] == "local_driver_dead", st
    repair_and_complete(tmp_path, "ddr", st["message"], cli_env)


def test_an_edited_config_toml(tmp_path: Path, cli_env: dict[str, str]) -> None:
    rehearsal(tmp_path, "cfd", {**cli_env, "SGSBATCH_FAULT_INJECT": "solve:0:raise:2"})
    wait_for(tmp_path, "cfd", ("stalled",))
    config = tmp_path / "cfd" / "config.toml"
    text = config.read_text()
    edited = re.sub(r"(?m)^(\[slurm\.solve\][^\[]*?time_min = )\d+", r"\g<1>45", text, count=1)
    assert edited != text
    config.write_text(edited)
    proc = sgsbatch("status", "cfd", "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode != 0 and "was edited after launch" in proc.stderr, proc.stderr
    message = proc.stderr
    commands = advised(message)
    assert any("--restore-config" in c for c in commands), message
    assert any("slurm.solve.time_min=45" in " ".join(c) for c in commands), message  # the edit, as an amendment
    repair_and_complete(tmp_path, "cfd", message, cli_env, expect=2)
    assert "time_min = 45" in config.read_text()  # the change the user wanted is in effect


def test_a_changed_environment(tmp_path: Path, cli_env: dict[str, str]) -> None:
    rehearsal(tmp_path, "env", {**cli_env, "SGSBATCH_FAULT_INJECT": "solve:0:hang:1"})
    run = tmp_path / "env"
    end = time.monotonic() + 300
    while not (run / "rounds" / "r0000" / "solve").exists():
        assert time.monotonic() < end
        time.sleep(0.5)
    sgsbatch("cancel", "env", "--runs-dir", str(tmp_path), env=cli_env)
    launch_env = json.loads((run / "environment.json").read_text())
    launch_env["packages"]["torch"] = "0.0.1"  # as if torch had changed under the run since launch
    (run / "environment.json").write_text(json.dumps(launch_env))
    assert sgsbatch("resume", "env", "--runs-dir", str(tmp_path), env=cli_env).returncode == 0
    st = wait_for(tmp_path, "env", ("stalled", "completed"))
    assert st["state"] == "stalled" and "differs from the launch's" in st["message"], st
    repair_and_complete(tmp_path, "env", st["message"], cli_env)


def test_the_disk_alarm(tmp_path: Path, cli_env: dict[str, str]) -> None:
    rehearsal(tmp_path, "dsk", {**cli_env, "SGSBATCH_FAULT_INJECT": "solve:0:hang:1"},
              "alerts.disk_budget_gb=0.000001", "run.rounds=2", "checkpoints.keep_last=2")
    end = time.monotonic() + 300
    while not (alarm := [a for a in status(tmp_path, "dsk")["alerts"] if a["metric"] == "alerts/disk_over_budget"]):
        assert time.monotonic() < end, "no disk alarm"
        time.sleep(1)
    sgsbatch("cancel", "dsk", "--runs-dir", str(tmp_path), env=cli_env)
    commands = advised(alarm[0]["message"])
    assert commands, alarm
    for argv in commands:
        proc = run_advice(argv, cli_env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = sgsbatch("resume", "dsk", "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert wait_for(tmp_path, "dsk", ("completed", "stalled"))["state"] == "completed"
