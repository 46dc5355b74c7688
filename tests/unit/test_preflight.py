"""The site pre-flight's limit checks against a site with tight limits (issue 17 part 4): the
answers of `scontrol`, `sbatch --test-only` and `sacctmgr` are recorded strings here; the real
cluster's are checked in tests/slurm/test_preflight.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sgsbatch.config.loading import load_config
from sgsbatch.scheduling import preflight as P

REPO = Path(__file__).resolve().parents[2]
CONFIG = """ClusterName = site
MaxArraySize            = 33
MaxJobCount             = 10000
"""
PARTITIONS = ("PartitionName=cpu Default=YES State=UP MaxTime=04:00:00 Nodes=c[1-4]\n"
              "PartitionName=gpu Default=NO State=UP MaxTime=2-00:00:00 Nodes=g[1-2]\n"
              "PartitionName=old Default=NO State=DOWN MaxTime=UNLIMITED Nodes=c1\n")
NODES = ("NodeName=c1 Partitions=cpu,old Gres=(null) CPUTot=64\n"
         "NodeName=g1 Partitions=gpu Gres=gpu:h200:4(S:0-1) CPUTot=96\n")


def _site(monkeypatch: pytest.MonkeyPatch, qos: str = "normal|||", assoc: str = "acct|normal,tight|100|") -> list[str]:
    calls: list[str] = []

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        calls.append(" ".join(argv[:2]) if argv[0] == "sbatch" else " ".join(argv[:3]))
        out = {("scontrol", "show", "config"): CONFIG, ("scontrol", "show", "partition"): PARTITIONS,
               ("scontrol", "show", "node"): NODES}.get(tuple(argv[:3]), "")
        if argv[0] == "sbatch":
            out = "sbatch: Job 1 to start at now"
        if argv[:3] == ["sacctmgr", "-nP", "show"]:
            out = assoc if argv[3] == "assoc" else qos
        return subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(P, "_run", run)
    return calls


def _cfg(*overrides: str):  # noqa: ANN202
    return load_config(REPO / "jobs" / "tiny.toml", ["run.executor=slurm", *overrides])


def test_a_clean_site_passes_and_says_what_it_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _site(monkeypatch)
    rep = P.check(_cfg())
    assert rep.ok, rep.text()
    assert calls.count("sbatch --test-only") == 6  # one per phase
    assert "arrays within MaxArraySize 33" in rep.text()


def test_every_problem_is_reported_at_once_with_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    _site(monkeypatch, qos="tight|5|", assoc="acct|normal,tight|8|")
    rep = P.check(_cfg("shards.solve=4", "shards.verify=40", "slurm.verify.qos=tight",
                       "slurm.solve.time_min=300", "slurm.train.partition=gpu", "slurm.train.gpus=8",
                       "slurm.guide.partition=old", "slurm.conjecture.partition=nope"))
    keys = [p.key for p in rep.problems]
    text = rep.text()
    assert "shards.verify" in keys and "an array of 40 tasks exceeds the site's MaxArraySize 33" in text
    assert "slurm.solve.time_min" in keys and "300 min exceeds partition 'cpu''s MaxTime 04:00:00" in text
    assert "slurm.train.gpus" in keys and "have at most 4 (gres)" in text
    assert "slurm.guide.partition" in keys and "partition 'old' is DOWN" in text
    assert "slurm.conjecture.partition" in keys and "(partitions: cpu, gpu, old)" in text
    assert "slurm.verify.qos" in keys and "QOS 'tight' allows 5 submitted jobs per user" in text
    assert "shards" in keys and "over your association's MaxSubmitJobs 8" in text
    with pytest.raises(P.PreflightError) as e:
        P.require(_cfg("shards.verify=40", "shards.solve=4"))
    assert e.value.exit_code == 2 and "nothing was submitted" in str(e.value)


def test_a_qos_the_site_lacks_or_forbids(monkeypatch: pytest.MonkeyPatch) -> None:
    _site(monkeypatch, qos="", assoc="acct|normal|100|")
    rep = P.check(_cfg("slurm.solve.qos=gold"))
    assert [str(p) for p in rep.problems] == ["slurm.solve.qos: no QOS 'gold' on this cluster"]
    _site(monkeypatch, qos="gold|||", assoc="acct|normal|100|")
    rep = P.check(_cfg("slurm.solve.qos=gold"))
    assert "your association may not use QOS 'gold' (allowed: normal)" in rep.text()


@pytest.mark.parametrize(("text", "minutes"), [("UNLIMITED", None), ("04:00:00", 240), ("2-00:00:00", 2880),
                                                ("30", 30), ("10:30", 10.5), ("1-02:03:00", 1563)])
def test_slurm_times(text: str, minutes: float | None) -> None:
    assert P.minutes(text) == minutes


@pytest.mark.parametrize(("gres", "gpus"), [("(null)", 0), ("gpu:4", 4), ("gpu:h200:8(S:0-1)", 8),
                                             ("gpu:a100:2,gpu:v100:2", 4), ("shard:8", 0)])
def test_gpus_of_a_node(gres: str, gpus: int) -> None:
    assert P._gpus_of(gres) == gpus
