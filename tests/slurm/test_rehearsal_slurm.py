"""A rehearsal of jobs/sgs.toml on the real local Slurm (`launch --rehearse`, SIMULATED compute).

The config is bench/rehearsal.toml: jobs/sgs.toml with only the resources changed for this
one-node, 2-core, GPU-less cluster. On top, to keep the test to a few minutes: the shard counts
divided by 8 (conjecture 2 -> 1, solve 8 -> 1, guide 1, verify 64 -> 8), 2 rounds, and the data a
local copy of D_3k limited to 48 targets (the hub is not reachable here). Everything else (the
phases, arrays, dependencies, the chain of jobs, the database) is the research run's.
Covered: the rehearsal completes on Slurm, is named and labelled REHEARSAL, its verify array had
8 tasks, and the round's checkpoints hand over from round 0 to round 1.
Not covered: anything a real model, Lean or DeepSpeed does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runlib import REPO, outcome, sgsbatch, status

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
D3K = REPO.parent / "shared" / "data" / "d3k" / "D_3k_small_prover_dataset.json"


def test_rehearsal_of_sgs_toml_completes_on_slurm(slurm_cluster: object, tmp_path: Path) -> None:
    if not D3K.is_file():
        pytest.skip(f"{D3K} is missing")
    args = ["launch", str(REPO / "bench" / "rehearsal.toml"), "--rehearse", "--wait"]
    for o in (f"run.runs_dir={tmp_path}", "run.executor=slurm", "run.rounds=2", "run.poll_interval_s=2",
              f"data.source={D3K}", "data.limit=48", "shards.conjecture=1", "shards.solve=1", "shards.guide=1",
              "shards.verify=8"):
        args += ["--set", o]
    proc = sgsbatch(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    st = status(tmp_path, "sgs-rehearsal")
    assert st["state"] == "completed" and st["rounds_completed"] == 2 and st["executor"] == "slurm"
    assert st["rehearsal"] is True
    run = tmp_path / "sgs-rehearsal"
    verify = run / "rounds" / "r0001" / "verify"
    assert sorted(p.name for p in verify.glob("shard_*.done")) == [f"shard_{i:05d}.done" for i in range(8)]
    out = outcome(run)
    assert {"verified", "failed"} <= {a[3] for a in out["attempts"]}
    assert {r for r, _, _, _ in out["steps"]} == {0, 1}
    marker = json.loads((run / "checkpoints" / "r0001" / "solver" / "SGSBATCH_COMPLETE").read_text())
    assert marker["simulated"] is True and str(run / "checkpoints" / "r0000" / "solver") in marker["source"]
