"""`launch jobs/sgs.toml --rehearse` on the local executor: the research config, SIMULATED compute.

Covered: a 2-round rehearsal of jobs/sgs.toml completes with only the data (a local copy of D_3k,
24 targets), the executor (local) and the rounds overridden; it is named `sgs-rehearsal`, status
and TensorBoard say REHEARSAL; the verdicts, malformed conjectures and trained steps come from the
real phases; the task logs say REHEARSAL; checkpoints are published with the completion marker and a simulated size; the
refusals (`--smoke`, a `--set` of a key the rehearsal sets, `run.rehearsal` in a file) exit 2
with a one-line message; jobs/sgs.toml itself stays real. Not covered: Slurm
(tests/slurm/test_rehearsal_slurm.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import REPO, outcome, sgsbatch, status  # noqa: E402

pytestmark = pytest.mark.slow
SGS = REPO / "jobs" / "sgs.toml"
D3K = REPO.parent / "shared" / "data" / "d3k" / "D_3k_small_prover_dataset.json"


def _args(runs: Path, *extra: str) -> list[str]:
    out = ["launch", str(SGS), "--rehearse"]
    for o in (f"run.runs_dir={runs}", "run.executor=local", "run.rounds=2", f"data.source={D3K}",
              "data.limit=24", "run.poll_interval_s=1", *extra):
        out += ["--set", o]
    return out


def test_rehearsal_of_sgs_toml_completes_locally(tmp_path: Path, cli_env: dict[str, str]) -> None:
    if not D3K.is_file():
        pytest.skip(f"{D3K} is missing")
    proc = sgsbatch(*_args(tmp_path), "--wait", env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "REHEARSAL" in proc.stdout
    st = status(tmp_path, "sgs-rehearsal")
    assert st["state"] == "completed" and st["rounds_completed"] == 2 and st["rehearsal"] is True
    assert st["simulated"] is True
    text = sgsbatch("status", "sgs-rehearsal", "--runs-dir", str(tmp_path), env=cli_env).stdout
    assert "[REHEARSAL]" in text
    out = outcome(tmp_path / "sgs-rehearsal")
    assert {"verified", "failed", "unextracted"} <= {a[3] for a in out["attempts"]}
    statuses = {c[3] for c in out["conjectures"]}
    assert "ok" in statuses and "malformed" in statuses
    assert all(steps >= 1 for _, _, steps, _ in out["steps"]) and len(out["steps"]) == 4
    run = tmp_path / "sgs-rehearsal"
    marker = json.loads((run / "checkpoints" / "r0001" / "solver" / "SGSBATCH_COMPLETE").read_text())
    assert marker["simulated"] is True and marker["simulated_bytes"] > 10**9
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    labels = b" ".join(e.tensor_proto.string_val[0] for e in acc.Tensors("run/labels/text_summary"))
    assert b"REHEARSAL" in labels
    logs = list((run / "rounds" / "r0000" / "solve").glob("shard_*.attempt.log"))
    assert logs and all("REHEARSAL: SIMULATED generation" in p.read_text() for p in logs)


def test_rehearse_refuses_what_makes_no_sense(tmp_path: Path, cli_env: dict[str, str]) -> None:
    smoke = sgsbatch(*_args(tmp_path), "--smoke", env=cli_env)
    assert smoke.returncode == 2 and "--rehearse" in smoke.stderr and "--smoke" in smoke.stderr
    backend = sgsbatch(*_args(tmp_path, "generation.backend=vllm"), env=cli_env)
    assert backend.returncode == 2 and "generation.backend" in backend.stderr
    assert "Traceback" not in smoke.stderr + backend.stderr
    cfg = tmp_path / "r.toml"
    cfg.write_text(f'inherit = "{SGS}"\n[run]\nrehearsal = true\n')
    flag = sgsbatch("launch", str(cfg), "--dry-run", env=cli_env)
    assert flag.returncode == 2 and "run.rehearsal" in flag.stderr and "--rehearse" in flag.stderr
    assert not list(tmp_path.glob("sgs-rehearsal*"))


def test_sgs_toml_is_real() -> None:
    from sgsbatch.config.loading import load_config

    cfg = load_config(SGS, [])
    assert not cfg.simulated and cfg.generation.backend == "vllm" and cfg.train.backend == "deepspeed"
