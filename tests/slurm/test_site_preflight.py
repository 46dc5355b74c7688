"""The pre-flight against the real local cluster (issue 17 part 4): a missing partition, GPUs the
nodes lack (no gres here), a QOS with MaxSubmitJobsPerUser below a round's tasks (created with
sacctmgr for the test, removed after): each reported with its key by `sgsbatch preflight` and by
`launch`, which then creates and submits nothing. Tight MaxArraySize and MaxTime need a
restarted controller: tests/unit/test_preflight.py covers them with recorded answers."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from runlib import TINY, sgsbatch

pytestmark = pytest.mark.slurm
QOS = "sgs_preflight_tight"


@pytest.fixture
def tight_qos(slurm_cluster: object) -> Iterator[str]:
    subprocess.run(["sacctmgr", "-i", "add", "qos", QOS, "MaxSubmitJobsPerUser=3"], capture_output=True, check=True)
    subprocess.run(["sacctmgr", "-i", "modify", "user", "root", "set", f"qos+={QOS}"], capture_output=True, check=True)
    try:
        yield QOS
    finally:
        subprocess.run(["sacctmgr", "-i", "modify", "user", "root", "set", f"qos-={QOS}"], capture_output=True)
        subprocess.run(["sacctmgr", "-i", "delete", "qos", QOS], capture_output=True)


def _jobs() -> str:
    return subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True).stdout


def test_preflight_passes_on_the_local_cluster(slurm_cluster: object) -> None:
    proc = sgsbatch("preflight", str(TINY))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pre-flight passed" in proc.stdout and "train: sbatch --test-only accepts 1 task(s)" in proc.stdout


def test_each_limit_is_reported_and_launch_submits_nothing(tight_qos: str, tmp_path: Path) -> None:
    sets = ["run.executor=slurm", "slurm.solve.partition=nowhere", "slurm.train.gpus=2",
            f"slurm.verify.qos={tight_qos}", "shards.solve=4", f"run.runs_dir={tmp_path}", "run.name=pf"]
    args = [a for s in sets for a in ("--set", s)]
    proc = sgsbatch("preflight", str(TINY), *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr
    assert "slurm.solve.partition: no partition 'nowhere' on this cluster (partitions: batch, urgent)" in err
    assert "slurm.train.gpus: 2 GPUs per node asked, but the nodes of partition 'batch' have at most 0 (gres)" in err
    assert f"slurm.verify.qos: QOS '{tight_qos}' allows 3 submitted jobs per user; a round submits 4" in err
    before = _jobs()
    for extra in ([], ["--dry-run"]):
        launch = sgsbatch("launch", str(TINY), *args, *extra)
        assert launch.returncode == 2 and "nothing was submitted" in launch.stderr, launch.stderr
    assert not (tmp_path / "pf").exists() and _jobs() == before
