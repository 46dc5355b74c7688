"""The colocated rollout job (solver.colocated_steps) on vLLM's real engine (its CPU build): jobs/tiny-vllm.toml
in GRPO's rollout regime, 2 rounds in one job whose engine takes round 1's weights in place (the worker's
`reload_weights`, the prefix cache reset), samples and trains exactly as the chain, which starts an engine a
round. Not covered here: vLLM's sleep mode while the job trains (GPUs only: vLLM's CPU build has none)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vllmlib  # noqa: E402
from runlib import finished_job, outcome, sgsbatch  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
CONFIG = vllmlib.REPO / "jobs" / "tiny-vllm.toml"
ROLLOUT = ("run.executor=local", "run.rounds=2", "conjecturer.enabled=false", "solver.objective=grpo",
           "solver.rollout_prompts=4", "solver.samples=4", "solver.batch_size=8", "train.old_logprobs=recompute",
           "records.keep_sample_tokens=true")


def _launch(runs: Path, name: str, *sets: str) -> None:
    args = ["launch", str(CONFIG)]
    for o in (f"run.runs_dir={runs}", f"run.name={name}", *ROLLOUT, *sets):
        args += ["--set", o]
    proc = sgsbatch(*args, "--wait")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_colocated_job_on_vllm_updates_its_engine_in_place_and_ends_as_the_chain(tmp_path: Path) -> None:
    vllmlib.require_vllm()
    _launch(tmp_path, "chain")
    _launch(tmp_path, "colo", "solver.colocated_steps=2")
    assert outcome(tmp_path / "colo") == outcome(tmp_path / "chain")
    vllmlib.check_vllm_run(tmp_path / "colo", 2, ("solve",))  # a Solver alone
    assert vllmlib.check_trained_on_vllm_samples(tmp_path / "colo", 1) > 0  # round 1 trained on the updated engine's
    job = {rec["round"]: rec for rec in finished_job(tmp_path / "colo" / "rounds" / "r0000" / "rollout").read()}
    assert job[0]["weight_updates_s"] == [] and len(job[1]["weight_updates_s"]) == 1  # built once, updated once
