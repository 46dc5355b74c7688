"""`run_status` in every state and for every stall reason, and what `watch` does about each.

The local executor is exercised for real (a process whose command line names the run stands in
for the local driver only where a driver must be alive; a dead one is just absent). For Slurm,
`squeue`/`sacct` answers are replaced by recorded-style answers (`TaskState` rows), so the
liveness rules are tested without a cluster; the real-cluster stalls are in tests/slurm.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlmodel import select

from sgsbatch.cli import main
from sgsbatch.config.loading import load_config
from sgsbatch.logic.data import Target
from sgsbatch.ops import control
from sgsbatch.round.lifecycle import prepare_round
from sgsbatch.run.handle import RunHandle, create_run
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling import local, slurm
from sgsbatch.scheduling.liveness import StallReason
from sgsbatch.scheduling.slurm import TaskState
from sgsbatch.state.schema import Round, RunState, SlurmJob
from sgsbatch.views.status import run_status

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, executor: str, name: str = "st") -> RunHandle:
    cfg = load_config(REPO / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path}", f"run.name={name}",
                                                    f"run.executor={executor}", "run.rounds=2"])
    targets = [Target(f"t{i}", "import Mathlib\n", f"theorem t{i} : True := by") for i in range(3)]
    h = create_run(cfg, targets, executor)
    prepare_round(h, 0)
    h.set_state(RunState.running)
    return h


@pytest.fixture
def fake_driver() -> Iterator[Callable[[RunHandle], int]]:
    """A live process whose command line is a local driver's for the run (stands in for the driver)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(h: RunHandle) -> int:
        code = "import time; time.sleep(120)"
        p = subprocess.Popen([sys.executable, "-c", code, local.DRIVER_MODULE, str(h.paths.root)])
        procs.append(p)
        h.paths.local.mkdir(parents=True, exist_ok=True)
        local.pid_file(h.paths).write_text(str(p.pid))
        return p.pid

    yield start
    for p in procs:
        p.kill()
        p.wait()


def _slurm_answers(monkeypatch: pytest.MonkeyPatch, live: list[TaskState] | None,
                   acct: dict[str, tuple[str, int]] | None = None) -> None:
    monkeypatch.setattr(slurm, "squeue", lambda ids: live)
    monkeypatch.setattr(slurm, "sacct", lambda ids: acct)


def _add_job(h: RunHandle, r: int, phase: str, job_id: str, shards: list[int]) -> None:
    with h.db.write() as s:
        s.add(SlurmJob(run_id=h.run_id, round=r, phase=phase, job_id=job_id, shards=json.dumps(shards),
                       submitted_at=time.time(), active=True))


def test_local_states(tmp_path: Path, fake_driver: Callable[[RunHandle], int]) -> None:
    h = _run(tmp_path, "local")
    st = run_status(h)
    assert (st.state, st.stall, st.round, st.phase) == ("stalled", StallReason.local_driver_dead, 0, "init")
    assert st.repairable and "local driver is not running" in st.message and "resume st" in st.message
    pid = fake_driver(h)
    st = run_status(h)
    assert (st.state, st.stall, st.driver_pid) == ("running", None, pid)
    assert st.to_json()["driver_pid"] == pid and st.to_json()["stall"] is None
    assert run_status(h, live=False).driver_pid is None  # live=False never asks the executor


def test_a_shard_out_of_retries_stalls_and_is_not_repairable(tmp_path: Path,
                                                              fake_driver: Callable[[RunHandle], int]) -> None:
    h = _run(tmp_path, "local")
    fake_driver(h)  # even with a live driver: the failed shard decides
    Shard(h.paths.phase_dir(0, "init"), 0).mark_failed("round 0 init shard 0 failed 3 times; last: boom")
    st = run_status(h)
    assert (st.state, st.stall, st.repairable) == ("stalled", StallReason.shard_out_of_retries, False)
    assert st.message.startswith("round 0 init shard 0 failed 3 times") and st.to_json()["stall"] == "shard_out_of_retries"


def test_ended_runs(tmp_path: Path) -> None:
    h = _run(tmp_path, "local")
    h.set_state(RunState.cancelled, "cancelled by user")
    st = run_status(h)
    assert (st.state, st.phase, st.stall, st.message) == ("cancelled", "init", None, "cancelled by user")
    h.set_state(RunState.completed, "all 2 rounds completed")
    st = run_status(h)
    assert (st.state, st.phase) == ("completed", None)
    js = st.to_json()
    for key in ("name", "state", "message", "executor", "rounds", "rounds_completed", "round", "phase", "simulated",
                "smoke", "targets", "run_dir", "metrics", "stall"):
        assert key in js, key
    assert "jobs" not in js and "driver_pid" not in js


def test_slurm_liveness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = _run(tmp_path, "slurm")
    _add_job(h, 0, "init", "11", [0])
    _add_job(h, 0, "conjecture", "12", [0])
    _slurm_answers(monkeypatch, [TaskState("11", "PENDING", "None"), TaskState("12", "PENDING", "Dependency")])
    st = run_status(h)
    assert (st.state, st.stall) == ("pending", None) and st.to_json()["sacct"].startswith("unavailable")
    _slurm_answers(monkeypatch, [TaskState("11", "RUNNING", "None")], {"11": ("RUNNING", 1), "12": ("PENDING", 0)})
    st = run_status(h)
    assert st.state == "running" and st.message == ""
    assert st.jobs is not None and [(j["job_id"], j["phase"], j["restarts"]) for j in st.jobs] == [
        ("11", "init", 1), ("12", "conjecture", 0)]
    _slurm_answers(monkeypatch, None)
    st = run_status(h)
    assert (st.state, st.jobs, st.message) == ("running", None, "squeue does not answer: state unknown")


def test_slurm_stalls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = _run(tmp_path, "slurm")
    _add_job(h, 0, "init", "11", [0])
    _add_job(h, 0, "conjecture", "12", [0])
    _slurm_answers(monkeypatch, [TaskState("12_0", "PENDING", "DependencyNeverSatisfied")])
    st = run_status(h)
    assert (st.state, st.stall, st.repairable) == ("stalled", StallReason.dependency_never_satisfied, True)
    assert "job 12_0 (conjecture) can never start" in st.message
    _slurm_answers(monkeypatch, [])
    st = run_status(h)
    assert (st.state, st.stall) == ("stalled", StallReason.no_live_job)
    assert "round 0, init" in st.message
    _add_job(h, 1, "conjecture", "21", [0])  # the train job just submitted the next round: not a stall
    st = run_status(h)
    assert (st.state, st.stall) == ("running", None)


def _stalled_by(reason: StallReason, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunHandle:
    if reason is StallReason.local_driver_dead:
        return _run(tmp_path, "local", reason.value)
    if reason is StallReason.disk_full:  # a dead driver on a full disk (a real full tmpfs: test_failures_truth.py)
        from sgsbatch.views import status as status_mod

        h = _run(tmp_path, "local", reason.value)
        monkeypatch.setattr(status_mod, "free_space", lambda paths: {"path": str(paths.root), "free_bytes": 4096,
                                                                      "total_bytes": 3_000_000})
        return h
    h = _run(tmp_path, "slurm", reason.value)
    _add_job(h, 0, "init", "11", [0])
    if reason is StallReason.shard_out_of_retries:
        Shard(h.paths.phase_dir(0, "init"), 0).mark_failed("round 0 init shard 0 failed 3 times")
        _slurm_answers(monkeypatch, [TaskState("11", "RUNNING", "None")])
    elif reason is StallReason.dependency_never_satisfied:
        _slurm_answers(monkeypatch, [TaskState("11", "PENDING", "DependencyNeverSatisfied")])
    else:
        _slurm_answers(monkeypatch, [])
    return h


@pytest.mark.parametrize("reason", list(StallReason))
def test_watch_repairs_every_repairable_stall(reason: StallReason, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Through `sgsbatch watch` itself: each stall reason once; resume is recorded, not run. A stall
    only a person can fix ends `watch` with exit status 1; `--notify` hears of every stall."""
    h = _stalled_by(reason, tmp_path, monkeypatch)
    assert run_status(h).stall is reason
    resumed: list[str] = []
    monkeypatch.setattr(control, "resume", lambda h, force=False: resumed.append(h.cfg.run.name) or "resumed it")
    told = tmp_path / "told.txt"
    out = CliRunner().invoke(main, ["watch", reason.value, "--runs-dir", str(tmp_path), "--interval", "0",
                                    "--max-checks", "3", "--notify",
                                    f'echo "$SGSBATCH_EVENT|$SGSBATCH_STATE|$SGSBATCH_RUN|$SGSBATCH_MESSAGE" >> {told}'])
    assert "stalled" in out.output
    event, state, run, message = told.read_text().splitlines()[0].split("|", 3)
    assert (state, run) == ("stalled", reason.value) and message.startswith(run_status(h).message)
    if reason.repairable:
        assert out.exit_code == 0, out.output
        assert resumed == [reason.value] * 3 and "resumed it" in out.output
        assert event == "stall" and message.endswith("[watch: resumed it]")
        assert out.output.count(f"{reason.value}: stalled") == 3  # a line per action taken
    else:
        assert out.exit_code == 1, out.output  # a person must fix the cause: watch ends at once
        assert resumed == [] and "resumed it" not in out.output and event == "needs-person"
        assert len(told.read_text().splitlines()) == 1


def test_watch_prints_a_line_per_change_and_notifies_each_new_alarm(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    h = _run(tmp_path, "slurm")
    _add_job(h, 0, "init", "11", [0])
    _slurm_answers(monkeypatch, [TaskState("11", "RUNNING", "None")])
    alarms = itertools.cycle([[], [{"metric": "alerts/stuck_shards", "shard": 3, "message": "shard 3 made no progress"}]])
    real = control.run_status
    monkeypatch.setattr(control, "write_live_alerts", lambda *a: None)  # tested in test_status_watch.py
    monkeypatch.setattr(control, "run_status", lambda h, detail=True: _with_alerts(real(h, detail=detail), next(alarms)))
    told = tmp_path / "told.txt"
    out = CliRunner().invoke(main, ["watch", "st", "--runs-dir", str(tmp_path), "--interval", "0", "--max-checks",
                                    "6", "--notify", f'echo "$SGSBATCH_EVENT $SGSBATCH_MESSAGE" >> {told}'])
    assert out.exit_code == 0, out.output
    assert out.output.count("st: running") == 1  # the state never changed: printed once
    assert told.read_text().splitlines() == ["alarm alerts/stuck_shards: shard 3 made no progress"] * 3
    bad = CliRunner().invoke(main, ["watch", "st", "--runs-dir", str(tmp_path), "--interval", "0", "--max-checks",
                                    "2", "--notify", "exit 3"])
    assert bad.exit_code == 0 and "the --notify command exited with code 3" in bad.output


def _with_alerts(st: Any, alerts: list[dict[str, Any]]) -> Any:
    st.alerts = alerts
    return st


def test_a_failed_shard_reads_as_one_line_with_the_logs_command(tmp_path: Path) -> None:
    h = _run(tmp_path, "local")
    tb = "worker exited with code 1: Traceback (most recent call last):\n  File \"x.py\", line 1\n    boom()\nValueError: bad"
    Shard(h.paths.phase_dir(0, "init"), 0).mark_failed(f"round 0 init shard 0 failed 3 times; last: {tb}")
    st = run_status(h)
    assert "\n" not in st.message and "ValueError: bad" in st.message and "File" not in st.message
    assert "`sgsbatch logs st --runs-dir" in st.message and "then `sgsbatch resume st" in st.message
    assert st.needs_person and not st.repairable


def test_a_round_hand_over_is_not_a_stall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 0's train job ended its round (the database says round 1 is current) and is still
    submitting round 1: running, not stalled; once it left the queue with nothing submitted, stalled."""
    h = _run(tmp_path, "slurm")
    _add_job(h, 0, "train", "19", [0])
    with h.db.write() as s:
        row = s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == 0)).one()
        row.state = "completed"
        s.add(row)
    queue = [TaskState("19_0", "RUNNING", "None")]
    monkeypatch.setattr(slurm, "squeue", lambda ids: [t for t in queue if t.job_id.split("_")[0] in ids])
    monkeypatch.setattr(slurm, "sacct", lambda ids: None)
    st = run_status(h)
    assert (st.round, st.state, st.stall) == (1, "running", None) and "submitting round 1" in st.message
    queue.clear()
    st = run_status(h)
    assert (st.state, st.stall) == ("stalled", StallReason.no_live_job)


def test_watch_really_restarts_a_dead_local_driver(tmp_path: Path) -> None:
    h = _run(tmp_path, "local")
    out = CliRunner().invoke(main, ["watch", "st", "--runs-dir", str(tmp_path), "--interval", "0", "--max-checks", "1"])
    try:
        assert out.exit_code == 0, out.output
        assert "resubmitted unfinished work from round 0" in out.output
        pid = local.driver_alive(h.paths)
        assert pid is not None
        assert run_status(h).state == "running" and h.row().message == "resumed"
    finally:
        local.stop_driver(h.paths)


def test_polling_asks_sacct_only_when_a_job_left_the_queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--wait` and `watch` poll with detail=False: squeue every time, sacct only when one of the
    run's active jobs is no longer in the queue (issue 18 part 6); `status` keeps the detail."""
    h = _run(tmp_path, "slurm")
    _add_job(h, 0, "init", "11", [0])
    _add_job(h, 0, "conjecture", "12", [0])
    asked: list[list[str]] = []
    monkeypatch.setattr(slurm, "sacct", lambda ids: asked.append(list(ids)) or {"11": ("RUNNING", 0)})
    monkeypatch.setattr(slurm, "squeue", lambda ids: [TaskState("11", "RUNNING", "None"),
                                                      TaskState("12_0", "PENDING", "Dependency")])
    for _ in range(5):
        st = run_status(h, detail=False)
        assert st.state == "running" and not st.sacct_unavailable
    assert asked == []  # both jobs queued: nothing to ask accounting
    assert run_status(h).jobs is not None and len(asked) == 1  # one-shot status: task states and restarts
    monkeypatch.setattr(slurm, "squeue", lambda ids: [TaskState("12_0", "RUNNING", "None")])
    monkeypatch.setattr(slurm, "_GONE_SEEN", set())
    run_status(h, detail=False)  # job 11 left the queue: now accounting is asked, once
    run_status(h, detail=False)
    assert len(asked) == 2


def test_wait_polls_at_the_configured_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = _run(tmp_path, "slurm")
    assert h.cfg.run.poll_interval_s == 2  # jobs/tiny.toml; research configs keep the 30 s default
    assert load_config(REPO / "jobs" / "sgs.toml", []).run.poll_interval_s == 30
    slept: list[float] = []
    calls = iter(["running", "running", "completed"])
    monkeypatch.setattr(control, "run_status", lambda h, detail=True: _fake_status(next(calls), detail))
    monkeypatch.setattr(control.time, "sleep", slept.append)
    assert control.wait(h).state == "completed"
    assert slept == [2, 2]


def _fake_status(state: str, detail: bool) -> object:
    assert detail is False  # polling never asks for accounting detail
    from sgsbatch.views.status import RunStatus

    return RunStatus(name="st", state=state, message="", executor="slurm", rounds=2, rounds_completed=0, round=0,
                     phase="init", simulated=True, smoke=False, targets=3, run_dir="x")
