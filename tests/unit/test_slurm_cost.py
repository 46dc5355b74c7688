"""What a round costs (GPU- and CPU-hours from sacct).

sacct's answers are replaced by lines in its `-P` format (recorded shape: JobID|ElapsedRaw|AllocTRES,
one line per requeued instance with -D); the real cluster's accounting is exercised by tests/slurm.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sqlmodel import select

from sgsbatch.config.loading import load_config
from sgsbatch.logic.data import Target
from sgsbatch.run.handle import create_run
from sgsbatch.scheduling import slurm
from sgsbatch.state.schema import Metric, SlurmJob

REPO = Path(__file__).resolve().parents[2]

SACCT_USAGE = """41_0|3600|billing=8,cpu=8,gres/gpu=1,mem=64G,node=1
41_0|1800|billing=8,cpu=8,gres/gpu=1,mem=64G,node=1
41_1|3600|billing=8,cpu=8,gres/gpu=1,mem=64G,node=1
42_0|7200|billing=33,cpu=33,mem=64G,node=1
43|900|billing=64,cpu=64,gres/gpu:h200=8,gres/gpu=8,mem=1T,node=1
44_3|Unknown|
"""


def test_parse_tres() -> None:
    assert slurm.parse_tres("billing=33,cpu=33,gres/gpu=8,mem=64G,node=1") == (33, 8)
    assert slurm.parse_tres("billing=2,cpu=2,mem=500M,node=1") == (2, 0)
    assert slurm.parse_tres("cpu=16,gres/gpu:h100=4,mem=1T,node=1") == (16, 4)
    assert slurm.parse_tres("") == (0, 0)


def test_sacct_usage_sums_every_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm, "_run", lambda cmd: SACCT_USAGE)
    usage = slurm.sacct_usage(["41", "42", "43", "44"])
    assert usage is not None
    assert usage["41"] == pytest.approx((8 * 2.5, 2.5))  # 1 h + 0.5 h (requeued) + 1 h, 8 CPUs, 1 GPU
    assert usage["42"] == pytest.approx((66.0, 0.0))
    assert usage["43"] == pytest.approx((16.0, 2.0))
    assert "44" not in usage  # no elapsed time yet
    monkeypatch.setattr(slurm, "_run", lambda cmd: None)
    assert slurm.sacct_usage(["41"]) is None
    assert slurm.sacct_usage([]) == {}


def test_a_round_records_its_cost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config(REPO / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path}", "run.name=c", "run.executor=slurm"])
    h = create_run(cfg, [Target("t0", "", "theorem t0 : True := by")], "slurm")
    with h.db.write() as s:
        for phase, job in (("solve", "41"), ("verify", "42"), ("train", "43")):
            s.add(SlurmJob(run_id=h.run_id, round=0, phase=phase, job_id=job, shards="[0]", submitted_at=time.time(),
                           active=True))
    monkeypatch.setattr(slurm, "sacct", lambda ids: {"41_0": ("COMPLETED", 1), "41_1": ("COMPLETED", 0),
                                                     "42_0": ("COMPLETED", 0), "43": ("RUNNING", 0)})
    monkeypatch.setattr(slurm, "_run", lambda cmd: SACCT_USAGE)
    slurm.record_slurm_jobs(h, 0)
    slurm.record_slurm_jobs(h, 0)  # again (a retried train job): nothing doubles
    with h.db.read() as s:
        m = {x.name: x.value for x in s.exec(select(Metric).where(Metric.round == 0)).all()}
        jobs = {j.job_id: j for j in s.exec(select(SlurmJob)).all()}
    assert m["cost/solve/gpu_hours"] == pytest.approx(2.5) and m["cost/verify/cpu_hours"] == pytest.approx(66.0)
    assert m["cost/gpu_hours"] == pytest.approx(4.5) and m["cost/cpu_hours"] == pytest.approx(20 + 66 + 16)
    assert jobs["41"].restarts == 1 and json.loads(jobs["41"].task_states) == {"41_0": "COMPLETED", "41_1": "COMPLETED"}
