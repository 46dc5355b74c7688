"""The task supervisor's outcomes (scheduling/supervisor.py), one test each, with stand-in worker processes
(a Python one-liner in place of `python -m sgsbatch.scheduling.worker`): done, crashes counted and retried,
failed past the retries or at once on a full disk, a shard already failed, the solve shard's failure passed
on (UPSTREAM), a local stop on SIGUSR2 or a cancel (interrupted, never counted), and a later node's task of a
multi-node job (never counts). The time limit, requeue and SIGTERM paths: tests/unit/test_time_limits.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sgsbatch.phases.task import REQUEUE_EXIT, UPSTREAM_EXIT
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling import supervisor as S


def _shard(tmp_path: Path) -> Shard:
    return Shard(RunPaths(tmp_path).phase_dir(0, "solve"), 0)


def _worker(monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    """Each start of the worker runs `code` (with `marker`, the shard's completion marker, and `n`, a count of
    starts kept in a file beside it)."""
    monkeypatch.setattr(S, "worker_command", lambda run_dir, r, phase, i: [sys.executable, "-c", (
        "import pathlib,sys\n"
        f"marker = pathlib.Path({str(Shard(RunPaths(run_dir).phase_dir(r, phase), i).marker)!r})\n"
        "count = marker.parent / 'starts'\n"
        "n = int(count.read_text()) + 1 if count.exists() else 1\n"
        "count.write_text(str(n))\n" + code)])


def _run(tmp_path: Path, **kw: object) -> str:
    return S.run_supervised(tmp_path, 0, "solve", 0, max_retries=2, **kw)  # type: ignore[arg-type]


def test_a_worker_that_finishes_is_done_and_crashes_before_it_are_counted(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _worker(monkeypatch, "if n < 3: raise RuntimeError(f'boom {n}')\nmarker.write_text('{}')\n")
    assert _run(tmp_path) == S.DONE
    shard = _shard(tmp_path)
    assert shard.failure_count() == 2 and shard.failed_reason() is None
    assert [f["reason"] for f in shard.failure_history()] == [
        "worker exited with code 1: RuntimeError: boom 1", "worker exited with code 1: RuntimeError: boom 2"]


def test_crashes_past_the_retries_fail_the_shard_with_the_last_reason(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _worker(monkeypatch, "sys.exit(3)\n")
    assert _run(tmp_path) == S.FAILED
    reason = _shard(tmp_path).failed_reason()
    assert reason == "round 0 solve shard 0 failed 3 times; last: worker exited with code 3: (no output)"
    assert _run(tmp_path) == S.FAILED  # a shard already failed: no worker starts again
    assert (_shard(tmp_path).dir / "starts").read_text() == "3"


def test_a_full_disk_fails_the_shard_at_once_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _worker(monkeypatch, "sys.exit(1)\n")
    monkeypatch.setattr(S, "disk_full_reason", lambda paths: f"the disk of {paths.root} has 1 MB free")
    assert _run(tmp_path) == S.FAILED
    assert _shard(tmp_path).failed_reason() == f"worker exited with code 1: (no output); the disk of {tmp_path} has 1 MB free"


def test_an_upstream_failure_ends_the_task_without_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _worker(monkeypatch, f"print('solve shard 0 failed'); sys.exit({UPSTREAM_EXIT})\n")
    assert _run(tmp_path) == S.UPSTREAM
    shard = _shard(tmp_path)
    assert shard.failure_count() == 0 and shard.failed_reason() is None


def test_a_local_stop_is_interrupted_and_never_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _worker(monkeypatch, f"sys.exit({REQUEUE_EXIT})\n")  # stopped on SIGUSR2
    assert _run(tmp_path) == S.INTERRUPTED
    stops = iter([False, True])  # the driver is cancelled while the worker runs: it crashes on the way out
    _worker(monkeypatch, "sys.exit(1)\n")
    assert _run(tmp_path, stopping=lambda: next(stops, True)) == S.INTERRUPTED
    assert _shard(tmp_path).failure_count() == 0


@pytest.mark.parametrize(("code", "outcome"), [("sys.exit(1)\n", S.INTERRUPTED), ("sys.exit(0)\n", S.DONE)])
def test_a_later_nodes_task_runs_its_worker_once_and_never_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  code: str, outcome: str) -> None:
    monkeypatch.setenv("SLURM_NNODES", "2")
    monkeypatch.setenv("SLURM_NODEID", "1")
    _shard(tmp_path).dir.mkdir(parents=True)
    _worker(monkeypatch, code)
    assert _run(tmp_path) == outcome  # task 0 decides; its ranks see ours end
    shard = _shard(tmp_path)
    assert shard.failure_count() == 0 and not shard.attempts_file.exists()
    assert (shard.dir / "shard_00000.node1.log").exists()
