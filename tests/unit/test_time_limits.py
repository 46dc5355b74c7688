"""No endless requeue: a task that reaches its time limit twice with no progress in between is
failed with a reason naming the shard and the keys to raise; one that progresses is requeued each
time (issue 18, part 5). The worker is a stand-in process; `requeue_self` (scontrol) is replaced
by an exception that stands for "the job was requeued and starts again"."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sgsbatch.phases.task import REQUEUE_EXIT
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling import supervisor as S


class Requeued(Exception):
    pass


def _requeue() -> None:
    raise Requeued


def _worker(partial: Path, progress: bool) -> list[str]:
    """A worker that stops at the 'time limit' (REQUEUE_EXIT), after one new item if `progress`."""
    code = "import json,sys\n"
    if progress:
        code += ("p=sys.argv[1]\nn=sum(1 for _ in open(p)) if __import__('os').path.exists(p) else 0\n"
                 "open(p,'a').write(json.dumps({'key': f'item{n}'})+'\\n')\n")
    code += f"sys.exit({REQUEUE_EXIT})\n"
    return [sys.executable, "-c", code, str(partial)]


@pytest.mark.parametrize("progress", [False, True])
def test_time_limits_without_progress_stall_the_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      progress: bool) -> None:
    shard = Shard(RunPaths(tmp_path).phase_dir(3, "verify"), 7)
    monkeypatch.setattr(S, "worker_command", lambda *a: _worker(shard.partial, progress))
    monkeypatch.setattr(S, "requeue_self", _requeue)
    monkeypatch.setattr(S, "at_time_limit", lambda *a: True)  # Slurm says the time is up
    with pytest.raises(Requeued):  # the first time limit: requeued
        S.run_supervised(tmp_path, 3, "verify", 7, max_retries=2, on_slurm=True)
    for _ in range(4):  # the requeued job hits the limit again, and again
        if progress:
            with pytest.raises(Requeued):
                S.run_supervised(tmp_path, 3, "verify", 7, max_retries=2, on_slurm=True)
        else:
            assert S.run_supervised(tmp_path, 3, "verify", 7, max_retries=2, on_slurm=True) == S.FAILED
            break
    if progress:
        assert shard.failed_reason() is None and len(shard.done_items()) == 5
        assert shard.failure_count() == 0  # a time limit is not a crash
    else:
        reason = shard.failed_reason()
        assert reason is not None
        assert "round 3 verify shard 7 reached its time limit twice without finishing a new item" in reason
        assert "slurm.verify.time_min" in reason and "shards.verify" in reason
        shard.clear_failures()  # what `resume` does after the config is raised
        assert not shard.time_limits.exists() and shard.failed_reason() is None


def test_progress_counts_training_checkpoints(tmp_path: Path) -> None:
    shard = Shard(tmp_path / "train", 0)
    (tmp_path / "train" / "solver").mkdir(parents=True)
    before = shard.progress()
    assert not shard.record_time_limit(before)
    (tmp_path / "train" / "solver" / "progress.json").write_text(json.dumps({"steps": 4}))
    assert not shard.record_time_limit(shard.progress())  # a new checkpoint is progress
    assert shard.record_time_limit(shard.progress())  # the same checkpoint again is not
    other = Shard(tmp_path / "train", 1)
    other.marker.write_text("{}")  # another shard finishing is not this one's progress
    assert shard.record_time_limit(shard.progress())


def test_preemptions_are_never_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shard = Shard(RunPaths(tmp_path).phase_dir(0, "solve"), 0)
    monkeypatch.setattr(S, "worker_command", lambda *a: _worker(shard.partial, False))
    monkeypatch.setattr(S, "requeue_self", _requeue)
    monkeypatch.setattr(S, "at_time_limit", lambda *a: False)  # SIGUSR2 with plenty of time left
    for _ in range(5):
        with pytest.raises(Requeued):
            S.run_supervised(tmp_path, 0, "solve", 0, max_retries=1, on_slurm=True)
    assert shard.failed_reason() is None and not shard.time_limits.exists()
    # the sixth start is not preempted: the shard completes
    done = f"import pathlib; pathlib.Path({str(shard.marker)!r}).write_text('{{}}')"
    monkeypatch.setattr(S, "worker_command", lambda *a: [sys.executable, "-c", done])
    assert S.run_supervised(tmp_path, 0, "solve", 0, max_retries=1, on_slurm=True) == S.DONE


def test_a_job_wide_kill_that_reaches_the_worker_first_is_not_a_crash(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`scancel` signals every process of the job in turn: when the worker dies of its SIGTERM before
    the supervisor's own arrives, the supervisor still exits 143 without counting a crash (CI saw a
    `resume --force` on Slurm count one)."""
    import signal

    shard = Shard(RunPaths(tmp_path).phase_dir(0, "init"), 0)
    # the worker asks for the supervisor's SIGTERM a second after its own (as slurmstepd may send them)
    code = ("import os,signal,subprocess\n"
            "subprocess.Popen(['sh','-c',f'sleep 1; kill -TERM {os.getppid()}'], start_new_session=True)\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n")
    monkeypatch.setattr(S, "worker_command", lambda *a: [sys.executable, "-c", code])
    monkeypatch.setattr(S, "requeue_self", _requeue)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR2)
    try:
        with pytest.raises(SystemExit) as ended:
            S.run_supervised(tmp_path, 0, "init", 0, max_retries=3, on_slurm=True, install_signals=True)
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGUSR2, before[1])
    assert ended.value.code == 143
    assert shard.failure_count() == 0 and shard.failed_reason() is None


def test_a_resume_after_a_broken_chain_keeps_the_count(tmp_path: Path) -> None:
    shard = Shard(tmp_path / "verify", 0)
    assert not shard.record_time_limit(shard.progress())
    shard.clear_failures()  # `resume` of a run whose chain broke at the first time limit
    assert shard.record_time_limit(shard.progress())  # the second stop without progress still counts


def test_a_stop_counts_only_near_the_jobs_end(tmp_path: Path) -> None:
    from sgsbatch.config.loading import load_config
    from sgsbatch.logic.data import Target
    from sgsbatch.run.handle import create_run

    cfg = load_config(Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml",
                      [f"run.runs_dir={tmp_path}", "run.name=tl", "slurm.verify.signal_delay_s=60"])
    h = create_run(cfg, [Target("t0", "", "theorem t0 : True := by")], "local")
    import time

    now = time.time()
    assert S.at_time_limit(h.paths, "verify", now + 100)  # the warning, 60 s + 2 min before the end
    assert not S.at_time_limit(h.paths, "verify", now + 3600)  # a preemption an hour before the limit
    assert not S.at_time_limit(h.paths, "verify", None)  # no end known: never counted
