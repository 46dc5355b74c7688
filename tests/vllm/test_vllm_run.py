"""A whole SGS run on vLLM (jobs/tiny-vllm.toml, 2 rounds) on the local executor: every generating
phase (conjecture, solve, guide) on vLLM's real engine, training on what vLLM sampled.
The same run on the local Slurm: tests/slurm/test_vllm_run_slurm.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vllmlib  # noqa: E402
from runlib import outcome, sgsbatch, status  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
CONFIG = vllmlib.REPO / "jobs" / "tiny-vllm.toml"


def test_tiny_sgs_run_on_vllm_completes_locally(tmp_path: Path, cli_env: dict[str, str]) -> None:
    vllmlib.require_vllm()
    args = ["launch", str(CONFIG), "--wait"]
    for o in (f"run.runs_dir={tmp_path}", "run.executor=local", "records.keep_sample_tokens=true"):
        args += ["--set", o]
    proc = sgsbatch(*args, env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    st = status(tmp_path, "tiny-vllm")
    assert st["state"] == "completed" and st["rounds_completed"] == 2 and st["executor"] == "local"
    run = tmp_path / "tiny-vllm"
    figures = vllmlib.check_vllm_run(run, 2)
    print(figures)
    assert vllmlib.check_trained_on_vllm_samples(run, 1) > 0
    out = outcome(run)
    assert {r for r, _, _, _ in out["steps"]} == {0, 1}
    assert out["conjectures"] and out["reviews"], "the Conjecturer and the Guide ran on vLLM too"
