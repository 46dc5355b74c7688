"""How a round's phases wait for each other, on Slurm (dependencies, sbatch replaced) and locally
(the driver's order): a verify shard waits for its own solve shard only, to start (streaming, the
default) or to end, so a solve shard out of retries holds back nothing else of its phase."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from sgsbatch.config.loading import load_config
from sgsbatch.config.schema import Config
from sgsbatch.logic.data import Target
from sgsbatch.run.handle import create_run
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling import local, slurm
from sgsbatch.scheduling.supervisor import DONE, FAILED, UPSTREAM
from sgsbatch.state.schema import SlurmJob
from tests.runlib import recorded_run

REPO = Path(__file__).resolve().parents[2]


def _shards(solve: int, verify: int, *more: str) -> Config:
    return load_config(REPO / "jobs" / "tiny.toml", [f"shards.solve={solve}", f"shards.verify={verify}", *more])


def test_streaming_verify_starts_with_its_own_solve_task() -> None:
    """verify = 8 x solve (jobs/sgs.toml), streaming: one array per solve task, `after` its start (the
    verify tasks check proofs as they land); a done solve shard's verify shards wait for nothing."""
    cfg = _shards(8, 64)
    assert cfg.verification.streaming
    solve = [slurm.Array("41", tuple(range(8)))]
    plan = slurm.arrays_after("verify", list(range(64)), 64, ("solve", solve), cfg)
    assert plan == [([i + 8 * m for m in range(8)], f"after:41_{i}") for i in range(8)]
    # after `resume`: solve shards 3 and 5 resubmitted as job 50 (tasks 0 and 1), the others done
    plan = slurm.arrays_after("verify", [3, 5, 11, 13, 20], 64, ("solve", [slurm.Array("50", (3, 5))]), cfg)
    assert plan == [([3, 11], "after:50_0"), ([5, 13], "after:50_1"), ([20], None)]
    # one solve shard is a plain job: `after:7`, not `after:7_0`
    assert slurm.arrays_after("verify", [0, 1, 2], 3, ("solve", [slurm.Array("7", (0,))]), _shards(1, 3)) == [
        ([0, 1, 2], "after:7")]
    verify = [slurm.Array("60", (0, 1)), slurm.Array("61", (2, 3))]
    assert slurm.arrays_after("guide", [0], 1, ("verify", verify), cfg) == [([0], "afterok:60:61")]


def test_verify_waits_for_its_own_solve_task_only() -> None:
    """Streaming off, verify = 8 x solve: 8 arrays of 8, task i of each waiting for solve task i
    (aftercorr), so a solve task out of retries holds back its own 8 verify shards and no others."""
    cfg = _shards(8, 64, "verification.streaming=false")
    solve = [slurm.Array("41", tuple(range(8)))]
    plan = slurm.arrays_after("verify", list(range(64)), 64, ("solve", solve), cfg)
    assert len(plan) == 8 and {dep for _, dep in plan} == {"aftercorr:41"}
    assert all([cfg.solve_shard_of(j) for j in shards] == list(range(8)) for shards, _ in plan)
    assert sorted(j for shards, _ in plan for j in shards) == list(range(64))
    # as many verify as solve shards: one array, task i after solve task i
    assert slurm.arrays_after("verify", list(range(8)), 8, ("solve", solve),
                              _shards(8, 0, "verification.streaming=false")) == [
        (list(range(8)), "aftercorr:41")]
    # after `resume`: solve shards 3 and 5 resubmitted as job 50 (tasks 0 and 1), the others done
    plan = slurm.arrays_after("verify", [3, 5, 11, 13, 20], 64, ("solve", [slurm.Array("50", (3, 5))]), cfg)
    assert plan == [([3, 11], "afterok:50_0"), ([5, 13], "afterok:50_1"), ([20], None)]
    # one solve shard: submitit submits it as a plain job (no array), so the verify array waits for
    # job 7 itself; `afterok:7_0` on a job that is no array is dropped by Slurm without a word
    assert slurm.arrays_after("verify", [0, 1, 2], 3, ("solve", [slurm.Array("7", (0,))]),
                              _shards(1, 3, "verification.streaming=false")) == [([0, 1, 2], "afterok:7")]
    # after `resume` with one solve shard lost (verify = 2 x solve): its resubmission is a plain job
    plan = slurm.arrays_after("verify", [1, 3], 4, ("solve", [slurm.Array("52", (1,))]),
                              _shards(2, 4, "verification.streaming=false"))
    assert plan == [([1, 3], "afterok:52")]
    # every other phase waits for all of the phase before; nothing before: no dependency
    verify = [slurm.Array("60", (0, 1)), slurm.Array("61", (2, 3))]
    assert slurm.arrays_after("guide", [0], 1, ("verify", verify), cfg) == [([0], "afterok:60:61")]
    assert slurm.arrays_after("solve", [0, 1], 8, None, cfg) == [([0, 1], None)]


def test_a_round_is_submitted_once_with_per_solve_shard_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`submit_round` on a recorded run (sbatch replaced): verify = 2 x solve gives two verify arrays
    after the solve array, the guide waits for both; submitting again submits nothing (a retried
    train job), and after a lost solve shard only its own verify shards wait for the resubmission."""
    cfg = _shards(2, 4, f"run.runs_dir={tmp_path}", "run.name=sub", "run.executor=slurm", "verification.streaming=false")
    h = create_run(cfg, [Target("t0", "import Mathlib\n", "theorem t0 : True := by")], "slurm")
    sent: list[tuple[str, list[int], str | None]] = []

    def fake_submit(h: object, r: int, phase: str, shards: list[int], dep: str | None, cfg: object = None) -> str:
        job_id = str(100 + len(sent))
        sent.append((phase, list(shards), dep))
        with h.db.write() as s:  # type: ignore[attr-defined]
            s.add(SlurmJob(run_id=h.run_id, round=r, phase=phase, job_id=job_id,  # type: ignore[attr-defined]
                           shards=json.dumps(list(shards)), submitted_at=time.time(), active=True))
        return job_id

    monkeypatch.setattr(slurm, "submit_phase", fake_submit)
    slurm.submit_round(h, 1)
    ids = {(p, tuple(s)): str(100 + i) for i, (p, s, _) in enumerate(sent)}
    solve = ids[("solve", (0, 1))]
    assert [x for x in sent if x[0] == "verify"] == [("verify", [0, 1], f"aftercorr:{solve}"),
                                                      ("verify", [2, 3], f"aftercorr:{solve}")]
    assert ("guide", [0], f"afterok:{ids[('verify', (0, 1))]}:{ids[('verify', (2, 3))]}") in sent
    n = len(sent)
    assert slurm.submit_round(h, 1) == [] and len(sent) == n
    # `resume` (jobs deactivated) after solve shard 0 finished and shard 1 ran out of retries
    slurm._deactivate_jobs(h)
    Shard(h.paths.phase_dir(1, "conjecture"), 0).finish([])
    Shard(h.paths.phase_dir(1, "conjecture"), 1).finish([])
    Shard(h.paths.phase_dir(1, "solve"), 0).finish([])
    slurm.submit_round(h, 1, only_unfinished=True)
    again = sent[n:]
    assert again[0][:2] == ("solve", [1])
    # the one resubmitted solve shard is a plain job (submitit submits a single shard without --array)
    assert ("verify", [1, 3], f"afterok:{100 + n}") in again and ("verify", [0, 2], None) in again


@pytest.mark.parametrize("streaming", [True, False])
def test_the_local_driver_verifies_the_finished_solve_shards_when_one_failed(tmp_path: Path, streaming: bool,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Streaming, verify shard 1 starts with solve shard 1 and ends when it fails (its supervisor's
    UPSTREAM); without, it never starts. Either way verify shard 0 checks solve shard 0, nothing later runs."""
    h = recorded_run(tmp_path, "t", sets=[f"verification.streaming={str(streaming).lower()}"])
    cfg = h.cfg
    assert cfg.shard_count("solve") == 2 and cfg.shard_count("verify") == 2
    ran: list[tuple[str, int]] = []

    def supervised(run_dir: Path, r: int, phase: str, i: int, **kw: object) -> str:
        ran.append((phase, i))
        Shard(h.paths.phase_dir(r, phase), i).mark_started()
        if (phase, i) == ("solve", 1):
            time.sleep(0.5)  # verify shard 1 (streaming) starts while solve shard 1 runs
            return FAILED
        if (phase, i) == ("verify", 1):
            return UPSTREAM
        Shard(h.paths.phase_dir(r, phase), i).finish([])
        return DONE

    monkeypatch.setattr(local, "run_supervised", supervised)
    old = signal.getsignal(signal.SIGTERM)
    try:
        assert local.drive(h.paths.root) == 1  # a shard out of retries: the run stalls for a person
    finally:
        signal.signal(signal.SIGTERM, old)
    phases = [p for p, _ in ran]
    assert ("verify", 0) in ran and (("verify", 1) in ran) == streaming  # verify shard 1 checks solve shard 1
    assert "guide" not in phases and "train" not in phases
