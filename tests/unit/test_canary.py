"""The canary's pure parts: job shapes, the Slurm options of its jobs, rows and their table, the
kept result and what `launch` asks of it, the environment check against a lock."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sgsbatch.canary import record
from sgsbatch.canary.environment import check_environment, lock_pins
from sgsbatch.canary.rows import Row, failed, table
from sgsbatch.canary.shapes import shape_jobs
from sgsbatch.canary.submit import slurm_parameters
from sgsbatch.config.loading import load_config
from sgsbatch.errors import RunError
from sgsbatch.ops.control import canary_clearance

REPO = Path(__file__).resolve().parents[2]


def test_sgs_toml_has_one_job_per_distinct_shape() -> None:
    cfg = load_config(REPO / "jobs" / "sgs.toml")
    jobs = {j.name: j for j in shape_jobs(cfg)}
    # conjecture, solve and guide ask for the same GPU node: one job loads all three roles there
    assert set(jobs) == {"init", "conjecture+solve+guide", "verify", "train"}
    assert jobs["conjecture+solve+guide"].components == (
        "environment", "generation:conjecturer", "generation:solver", "guide")
    assert jobs["verify"].components == ("environment", "verification")
    assert jobs["train"].shape.gpus == cfg.slurm.train.gpus
    assert all(j.time_min <= cfg.canary.time_min for j in jobs.values())


def test_a_phase_on_another_partition_gets_its_own_job() -> None:
    cfg = load_config(REPO / "jobs" / "sgs.toml", ["slurm.guide.partition=gpu-small", "canary.time_min=5000"])
    jobs = {j.name: j for j in shape_jobs(cfg)}
    assert "guide" in jobs and "conjecture+solve" in jobs
    assert jobs["guide"].shape.partition == "gpu-small"
    assert jobs["guide"].time_min == cfg.slurm.guide.time_min  # never more than the phase's own limit


def test_canary_jobs_use_the_phase_options_without_requeue() -> None:
    cfg = load_config(REPO / "jobs" / "sgs.toml", ["slurm.train.partition=h200", "slurm.train.account=lab",
                                                   "slurm.train.extra={constraint = \"h200\"}"])
    train = next(j for j in shape_jobs(cfg) if j.name == "train")
    p = slurm_parameters(cfg, train)
    assert p["partition"] == "h200" and p["account"] == "lab" and p["gpus_per_node"] == cfg.slurm.train.gpus
    assert p["time"] == train.time_min and p["job_name"] == f"canary.{cfg.run.name}.train"
    assert p["additional_parameters"] == {"constraint": "h200"}  # no requeue, no dependency
    assert "array_parallelism" not in p


def test_failed_rows_and_the_table() -> None:
    rows = [Row("guide", "replies parse", True, "4 of 4"),
            failed("verification", "verifier starts", ValueError("lake\nnot found"), "./setup.sh --lean")]
    assert rows[1].figure == "ValueError: not found"
    text = table(rows)
    assert "FAIL" in text and "-> change: ./setup.sh --lean" in text and text.endswith("1 of 2 checks ok")
    assert Row.from_dict(rows[1].as_dict()) == rows[1]


def _env(**packages: str) -> dict[str, object]:
    return {"python": "3.11.2", "packages": {"torch": "2.13.0", "sgsbatch": "0.1.0", **packages}}


def test_the_fingerprint_ignores_the_run_and_sees_the_models(tmp_path: Path) -> None:
    base = load_config(REPO / "jobs" / "sgs.toml", [f"run.runs_dir={tmp_path}"])
    renamed = load_config(REPO / "jobs" / "sgs.toml", [f"run.runs_dir={tmp_path}", "run.name=other",
                                                       "run.rounds=7", "alerts.stuck_floor_s=60"])
    other = load_config(REPO / "jobs" / "sgs.toml", [f"run.runs_dir={tmp_path}", "models.solver=x/y"])
    assert record.fingerprint(base) == record.fingerprint(renamed) != record.fingerprint(other)


def test_clearance_asks_for_a_recent_passed_canary_in_this_environment(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record, "site", lambda: "testsite")
    cfg = load_config(REPO / "jobs" / "sgs.toml", [f"run.runs_dir={tmp_path}"])
    ok, why = record.clearance(cfg, _env())
    assert not ok and "no canary has run" in why
    bad = [Row("training", "stop checkpoint fits signal_delay_s", False, "90 s").as_dict()]
    record.save(tmp_path, cfg, bad, _env(), ["12"])
    ok, why = record.clearance(cfg, _env())
    assert not ok and "failed 1 check(s)" in why and "90 s" in why
    res = record.save(tmp_path, cfg, [Row("guide", "replies parse", True).as_dict()], _env(), ["13"])
    assert record.clearance(cfg, _env())[0]
    ok, why = record.clearance(cfg, _env(torch="2.14.0"))
    assert not ok and "another environment" in why
    ok, why = record.clearance(cfg, _env(), now=res["time"] + 15 * 86400)
    assert not ok and "canary.max_age_days" in why
    history = (tmp_path / ".canary" / "history.jsonl").read_text().splitlines()
    assert [json.loads(x)["jobs"] for x in history] == [["12"], ["13"]]


def test_launch_on_slurm_needs_a_canary_for_research_configs_only(tmp_path: Path) -> None:
    cfg = load_config(REPO / "jobs" / "sgs.toml", [f"run.runs_dir={tmp_path}"])
    with pytest.raises(RunError, match="sgsbatch canary CONFIG.*--skip-canary"):
        canary_clearance(cfg, "slurm", skip=False)
    assert canary_clearance(cfg, "slurm", skip=True)["skipped"] is True  # type: ignore[index]
    assert canary_clearance(cfg, "local", skip=False) is None
    tiny = load_config(REPO / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path}"])
    assert canary_clearance(tiny, "slurm", skip=False) is None
    assert canary_clearance(replace(cfg, run=replace(cfg.run, rehearsal=True)), "slurm", skip=False) is None


def test_environment_rows_against_the_lock() -> None:
    pins = lock_pins(REPO / "requirements" / "gpu.txt")
    assert pins["torch"] and pins["vllm"] and pins["deepspeed"]
    env = {"packages": {"torch": pins["torch"] + "+cu130", "transformers": "0.0.1", "deepspeed": pins["deepspeed"],
                        "vllm": pins["vllm"], "sgsbatch": "0.1.0"},
           "cuda": "13.0", "gpus": {"models": ["NVIDIA H200"] * 4, "driver": "580.1"}}
    rows = {r.check: r for r in check_environment(8, "slurm.train.gpus", env)}
    versions = rows["versions match gpu.txt"]
    assert not versions.ok and versions.figure == f"transformers 0.0.1 (lock {pins['transformers']})"  # +cu130 is torch
    assert not rows["GPUs visible"].ok and rows["GPUs visible"].figure == "4 seen, 8 asked for (slurm.train.gpus)"
    assert "driver runs the wheels' CUDA" in rows  # no nvidia-smi here: the driver's CUDA is unknown -> not ok
    assert not rows["driver runs the wheels' CUDA"].ok
    assert [r.check for r in check_environment(0, "slurm.verify.gpus", env)] == ["versions match gpu.txt"]


def test_the_conjecturer_canary_sends_the_prompts_the_setup_sends() -> None:
    """stp.toml's Conjecturer is seeded: the canary measures seeded prompts (a target and an honest
    canary proof), not the unseeded ones a seed_statement run never sends; sgs.toml's are unseeded."""
    from sgsbatch.canary.cases import HONEST
    from sgsbatch.canary.generation import role_messages
    from sgsbatch.logic.data import Target
    from sgsbatch.logic.prompts import conjecturer_messages, load_prompts, seeded_conjecturer_messages

    targets = [Target(f"t{i}", "import Mathlib\n", f"theorem t{i} : {i} + 0 = {i} := by") for i in range(4)]
    stp = load_config(REPO / "jobs" / "stp.toml")
    seeded = role_messages(stp, "conjecturer", targets)
    prompts = load_prompts(stp.prompts)
    assert seeded == [seeded_conjecturer_messages(t.header, t.theorem, HONEST[i % len(HONEST)].proof, True, prompts)
                      for i, t in enumerate(targets)]
    assert all(HONEST[i % len(HONEST)].proof.strip() in m[0]["content"] for i, m in enumerate(seeded))
    sgs = load_config(REPO / "jobs" / "sgs.toml")
    assert role_messages(sgs, "conjecturer", targets) == [
        conjecturer_messages(t.header, t.theorem, True, load_prompts(sgs.prompts)) for t in targets]
