"""The site layer and the runs-directory rule (issue 29, items 2 and 3).

`[slurm.defaults]` goes into every phase (a phase's own key wins, built-in per-phase defaults
stay unless the defaults set the key); a site file (`--site`, $SGSBATCH_SITE) lies between the
jobs file and --set and may set only site facts; `slurm.<phase>.setup` lines reach submitit's
parameters, the job script, the pre-flight's `sbatch --test-only` script and the canary's jobs;
every command finds runs by --runs-dir > $SGSBATCH_RUNS_DIR > run.runs_dir > ./runs, and RUN
may be a path to a run directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sgsbatch.canary.shapes import shape_jobs
from sgsbatch.canary.submit import slurm_parameters
from sgsbatch.cli import main
from sgsbatch.config.loading import load_config
from sgsbatch.config.schema import PHASES, SLURM_TABLES, SlurmConfig
from sgsbatch.errors import ConfigError
from sgsbatch.ops import control
from sgsbatch.ops.amend import amend
from sgsbatch.ops.control import runs_dir_layer
from sgsbatch.run.handle import open_run
from sgsbatch.scheduling import preflight as P
from sgsbatch.scheduling.slurm import _parameters_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import recorded_run as make_run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "jobs"
SETUP = ["module load cuda/12", "export HF_HOME=/shared/hf"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _site(tmp_path: Path, text: str = "") -> Path:
    return _write(tmp_path / "site.toml", text or f"""
[run]
runs_dir = "{tmp_path / 'site-runs'}"
[slurm.defaults]
partition = "gpu"
account = "lab"
qos = "normal"
setup = {SETUP!r}
scratch = "$TMPDIR"
[slurm.verify]
partition = "cpu"
""")


# --- [slurm.defaults] ---

def test_defaults_reach_every_phase_and_a_phase_key_wins(tmp_path: Path) -> None:
    job = _write(tmp_path / "job.toml", f'inherit = "{JOBS / "sgs.toml"}"\n'
                 '[slurm.defaults]\npartition = "gpu"\naccount = "lab"\nmem = "16G"\nextra = {constraint = "a100"}\n'
                 '[slurm.solve]\npartition = "gpu-long"\nextra = {gres = "gpu:1"}\n')
    cfg = load_config(job)
    for phase in SLURM_TABLES:  # the six phases and the watcher job
        r = cfg.phase_resources(phase)
        assert r.account == "lab"
        assert r.partition == ("gpu-long" if phase == "solve" else "gpu")
    # a key set only in the defaults replaces the built-in default (init has no table in sgs.toml);
    # a phase table of the jobs file that sets it wins (sgs.toml's solve mem)
    assert cfg.slurm.init.mem == "16G" and cfg.slurm.solve.mem == "64G" and cfg.slurm.train.mem == "800G"
    # keys the defaults do not set keep the built-in per-phase defaults
    assert cfg.slurm.train.gpus == 8 and cfg.slurm.train.signal_delay_s == 600 and cfg.slurm.init.gpus == 0
    assert cfg.slurm.verify.array_parallelism == 128
    # extra merges option by option
    assert cfg.slurm.solve.extra == {"constraint": "a100", "gres": "gpu:1"}
    assert cfg.slurm.train.extra == {"constraint": "a100"}


def test_a_defaults_key_beats_a_builtin_default_only_when_set(tmp_path: Path) -> None:
    assert SlurmConfig().train.gpus == 8  # the built-in default
    job = _write(tmp_path / "job.toml", f'inherit = "{JOBS / "tiny.toml"}"\n[slurm.defaults]\ncpus = 2\n')
    assert load_config(job).slurm.train.cpus == 1  # tiny.toml's own [slurm.train] wins
    bare = _write(tmp_path / "bare.toml", 'data.source = "x/y"\nrun.name = "b"\nrun.rounds = 1\n'
                  'models.solver = "a/b"\n[slurm.defaults]\npartition = "p"\n')
    assert load_config(bare).slurm.train.gpus == 8  # not set in the defaults: the built-in per-phase default
    part = load_config(bare, ["slurm.train.partition=x", "slurm.init.cpus=2"])  # a partial phase table too
    assert (part.slurm.train.gpus, part.slurm.train.mem, part.slurm.init.mem) == (8, "800G", "32G")
    cfg = load_config(bare, ["slurm.defaults.gpus=2"])
    assert [cfg.phase_resources(p).gpus for p in PHASES] == [2] * 6  # set in the defaults: every phase
    cfg = load_config(bare, ["slurm.defaults.setup=['a']", "slurm.train.setup=['b']"])
    assert cfg.slurm.train.setup == ("b",)  # setup is replaced whole by a phase's own
    assert {cfg.phase_resources(p).setup for p in PHASES if p != "train"} == {("a",)}


def test_the_frozen_config_has_no_defaults_table(tmp_path: Path) -> None:
    from sgsbatch.config.loading import from_toml_text, to_toml

    cfg = load_config(JOBS / "tiny.toml", ["slurm.defaults.partition=gpu"])
    text = to_toml(cfg)
    assert "defaults" not in text and from_toml_text(text, "config.toml") == cfg


@pytest.mark.parametrize(("line", "key", "says"), [
    ("bogus = 1", "slurm.defaults.bogus", "unknown key"),
    ('gpus = "two"', "slurm.defaults.gpus", "must be an integer"),
    ("nodes = 2", "slurm.defaults.nodes", "slurm.train.nodes"),
    ("array_parallelism = 0", "slurm.init.array_parallelism", "must be >= 1"),  # a value's own check
    ('setup = ["a\\nb"]', "slurm.init.setup[0]", "one shell line"),
])
def test_a_bad_default_names_the_file_and_the_key(tmp_path: Path, line: str, key: str, says: str) -> None:
    site = _site(tmp_path, f"[slurm.defaults]\n{line}\n")
    with pytest.raises(ConfigError) as e:
        load_config(JOBS / "tiny.toml", site=site)
    assert e.value.source == str(site.resolve()) and e.value.key == key and says in e.value.message


def test_defaults_must_be_a_table() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(JOBS / "tiny.toml", ["slurm.defaults=3"])
    assert e.value.source == "--set slurm.defaults=3" and e.value.key == "slurm.defaults"


# --- the site file ---

def test_site_lies_between_the_jobs_file_and_set(tmp_path: Path) -> None:
    site = _site(tmp_path)
    cfg = load_config(JOBS / "sgs.toml", site=site)
    assert cfg.run.runs_dir == str(tmp_path / "site-runs")
    assert cfg.slurm.verify.partition == "cpu" and cfg.slurm.train.partition == "gpu"
    assert cfg.slurm.train.setup == tuple(SETUP) and cfg.slurm.train.gpus == 8  # sgs.toml's train keeps its GPUs
    over = load_config(JOBS / "sgs.toml", ["slurm.train.partition=h200", f"run.runs_dir={tmp_path / 'x'}"], site=site)
    assert over.slurm.train.partition == "h200" and over.run.runs_dir == str(tmp_path / "x")
    # the site's phase table wins over the jobs file's phase table
    site2 = _site(tmp_path, "[slurm.solve]\nmem = \"99G\"\n")
    assert load_config(JOBS / "sgs.toml", site=site2).slurm.solve.mem == "99G"


def test_site_paths_are_resolved_against_the_site_file(tmp_path: Path) -> None:
    (tmp_path / "lean").mkdir()
    site = _site(tmp_path, '[verification]\nproject_dir = "./lean"\nscratch_dir = "./scratch"\n')
    cfg = load_config(JOBS / "tiny.toml", site=site)
    assert cfg.verification.project_dir == str(tmp_path / "lean")
    assert cfg.verification.scratch_dir == str(tmp_path / "scratch")


@pytest.mark.parametrize("text,key", [
    ('[models]\nsolver = "/shared/models/x"\n', "models.solver"),
    ("[run]\nrounds = 3\n", "run.rounds"),
    ('[data]\nsource = "x/y"\n', "data.source"),
    ("[solver]\nsamples = 2\n", "solver.samples"),
])
def test_a_site_file_sets_only_site_facts(tmp_path: Path, text: str, key: str) -> None:
    site = _site(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(JOBS / "tiny.toml", site=site)
    assert e.value.source == str(site.resolve()) and e.value.key == key
    assert "site file sets only" in e.value.message and f"--set {key}=" in e.value.message


def test_a_missing_site_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such site file"):
        load_config(JOBS / "tiny.toml", site=tmp_path / "nope.toml")


def test_site_example_fits_every_experiment(tmp_path: Path) -> None:
    for path in sorted(JOBS.glob("*.toml")):
        if path.name == "site.example.toml":
            continue
        cfg = load_config(path, site=JOBS / "site.example.toml", runs_dir=(str(tmp_path), "--runs-dir"))
        assert all(cfg.phase_resources(p).setup and cfg.phase_resources(p).account for p in SLURM_TABLES), path
        assert cfg.slurm.verify.partition == "cpu" and cfg.slurm.watcher.partition == "cpu"


# --- setup lines in every job script ---

def test_setup_lines_reach_submitit_and_the_job_script(tmp_path: Path) -> None:
    from submitit.slurm.slurm import _make_sbatch_string

    cfg = load_config(JOBS / "tiny.toml", site=_site(tmp_path))
    for phase in PHASES:
        params = _parameters_for(cfg, 0, phase, 2, None)
        assert params["setup"] == SETUP
        script = _make_sbatch_string("python -m x", folder=tmp_path / "%j", map_count=2, **params)  # type: ignore[arg-type]
        lines = script.splitlines()
        at = lines.index(SETUP[0])
        assert lines[at + 1] == SETUP[1] and at < next(i for i, x in enumerate(lines) if x.startswith("srun"))
    assert "setup" not in _parameters_for(load_config(JOBS / "tiny.toml"), 0, "solve", 2, None)


def test_the_preflight_script_has_the_setup_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripts: list[str] = []

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        if argv[0] == "sbatch":
            scripts.append(Path(argv[-1]).read_text())
            return subprocess.CompletedProcess(argv, 0, "sbatch: Job 1 to start at now", "")
        return subprocess.CompletedProcess(argv, 1, "", "")

    monkeypatch.setattr(P, "_run", run)
    P._check_site(load_config(JOBS / "tiny.toml", site=_site(tmp_path)), P.Report())
    assert len(scripts) == 6 and all("# setup\n" + "\n".join(SETUP) + "\n" in s for s in scripts)


def test_canary_jobs_get_the_setup_lines_and_split_by_them(tmp_path: Path) -> None:
    cfg = load_config(JOBS / "sgs.toml", site=_site(tmp_path))
    assert all(slurm_parameters(cfg, j)["setup"] == SETUP for j in shape_jobs(cfg))
    other = load_config(JOBS / "sgs.toml", ["slurm.guide.setup=['module load x']"], site=_site(tmp_path))
    jobs = {j.name: j for j in shape_jobs(other)}
    assert "guide" in jobs and "conjecture+solve" in jobs
    assert slurm_parameters(other, jobs["guide"])["setup"] == ["module load x"]


def test_resume_set_of_a_default_changes_every_phase(tmp_path: Path) -> None:
    h = make_run(tmp_path, "am")
    h2, changes = amend(h, ["slurm.defaults.partition=gpu2", "slurm.defaults.setup=['module load y']"])
    assert all(h2.cfg.phase_resources(p).partition == "gpu2" for p in SLURM_TABLES)
    assert all(h2.cfg.phase_resources(p).setup == ("module load y",) for p in SLURM_TABLES)
    assert len(changes) == 2 * len(SLURM_TABLES)
    assert open_run(tmp_path, "am").cfg.slurm.train.partition == "gpu2"


# --- the runs directory ---

def test_runs_dir_rule() -> None:
    env = {"SGSBATCH_RUNS_DIR": "/env/runs"}
    assert runs_dir_layer("/opt", [], env) == ("/opt", "--runs-dir")
    assert runs_dir_layer("/opt", ["run.runs_dir=/opt"], env) == ("/opt", "--runs-dir")
    assert runs_dir_layer(None, ["run.runs_dir=/set"], env) is None  # the --set itself applies
    assert runs_dir_layer(None, [], env) == ("/env/runs", "$SGSBATCH_RUNS_DIR")
    assert runs_dir_layer(None, [], {}) is None and runs_dir_layer(None, [], {"SGSBATCH_RUNS_DIR": ""}) is None
    with pytest.raises(ConfigError, match="contradicts"):
        runs_dir_layer("/opt", ["run.runs_dir=/set"], env)


def _plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *sets: str, **kw: object) -> control.Plan:
    monkeypatch.chdir(tmp_path)
    p, _ = control.plan(JOBS / "tiny.toml", ["run.executor=local", "verification.backend=simulated", *sets],
                        **kw)  # type: ignore[arg-type]
    return p


def test_launch_finds_its_runs_dir_by_the_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SGSBATCH_RUNS_DIR", raising=False)
    assert _plan(tmp_path, monkeypatch).cfg.run.runs_dir == "runs"  # ./runs
    site = _site(tmp_path)
    assert _plan(tmp_path, monkeypatch, site=site).cfg.run.runs_dir == str(tmp_path / "site-runs")
    monkeypatch.setenv("SGSBATCH_RUNS_DIR", str(tmp_path / "env"))
    p = _plan(tmp_path, monkeypatch, site=site)
    assert p.cfg.run.runs_dir == str(tmp_path / "env") and p.runs_dir_from == "$SGSBATCH_RUNS_DIR"
    assert f"run directory: {tmp_path / 'env' / 'tiny'} (runs_dir from $SGSBATCH_RUNS_DIR)" in p.describe()
    assert _plan(tmp_path, monkeypatch, f"run.runs_dir={tmp_path / 's'}").cfg.run.runs_dir == str(tmp_path / "s")
    p = _plan(tmp_path, monkeypatch, site=site, runs_dir=str(tmp_path / "opt"))
    assert p.cfg.run.runs_dir == str(tmp_path / "opt") and "runs_dir from --runs-dir" in p.describe()


def test_dry_run_prints_the_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "SGSBATCH_RUNS_DIR": str(tmp_path / "env"), "SGSBATCH_SITE": str(_site(tmp_path))}
    args = ["launch", str(JOBS / "tiny.toml"), "--dry-run", "--set", "run.executor=local",
            "--set", "verification.backend=simulated"]
    res = CliRunner(env=env).invoke(main, args)
    assert res.exit_code == 0, res.output
    assert f"run directory: {tmp_path / 'env' / 'tiny'}" in res.output
    assert f"site file: {tmp_path / 'site.toml'}" in res.output and "module load cuda/12" in res.output
    res = CliRunner(env=env).invoke(main, [*args, "--runs-dir", "elsewhere"])
    assert f"run directory: {tmp_path / 'elsewhere' / 'tiny'} (runs_dir from --runs-dir)" in res.output
    assert not (tmp_path / "env").exists() and not (tmp_path / "elsewhere").exists()
    bad = _write(tmp_path / "bad.toml", "[guide]\nenabled = false\n")
    res = CliRunner().invoke(main, [*args, "--site", str(bad)])
    assert res.exit_code == 2 and f"{bad}: guide.enabled" in res.output


def test_run_may_be_a_path_to_its_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_run(tmp_path / "runs", "pathy")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SGSBATCH_RUNS_DIR", str(tmp_path / "nowhere"))
    for run in ("runs/pathy", str(tmp_path / "runs" / "pathy"), "./runs/pathy/"):
        res = CliRunner().invoke(main, ["status", run, "--json"])
        assert res.exit_code == 0, res.output
        assert '"name": "pathy"' in res.output
    res = CliRunner().invoke(main, ["status", "pathy"])  # a name: looked up in $SGSBATCH_RUNS_DIR
    assert res.exit_code == 2 and "no run named 'pathy'" in res.output
    res = CliRunner().invoke(main, ["logs", "runs/nope"])
    assert res.exit_code == 2 and "is not a run directory" in res.output


def test_a_smoke_run_keeps_the_sites_account_qos_and_setup(tmp_path: Path) -> None:
    from sgsbatch.config.smoke import smoke_config

    cfg = smoke_config(load_config(JOBS / "tiny.toml", site=_site(tmp_path)), JOBS / "tiny.toml", [])
    for p in PHASES:
        r = cfg.phase_resources(p)
        assert (r.account, r.qos, r.setup, r.cpus, r.gpus) == ("lab", "normal", tuple(SETUP), 1, 0)
