"""`sgsbatch config keys` (every key, its type, default and help text, from the schema alone) and
`sgsbatch config show` (a run's, a jobs file's or the defaults' effective config, as TOML)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from click.testing import CliRunner

from sgsbatch.cli import main
from sgsbatch.config.keys import config_keys
from sgsbatch.config.loading import flat_config, load_config, to_toml
from sgsbatch.config.schema import Config
from tests.runlib import TINY, recorded_run


def test_every_key_has_a_help_text_and_its_default() -> None:
    infos = config_keys()
    defaults = flat_config(Config())
    assert {k.key for k in infos} >= set(defaults)  # every key (an empty table such as extra is one key)
    assert not [k.key for k in infos if len(k.help) < 10], "add a help text with key(default, help) in schema.py"
    by = {k.key: k for k in infos}
    assert by["solver.lr"].default == 3e-6 and by["solver.lr"].type == "a number"
    assert by["slurm.train.gpus"].default == 8 and by["slurm.solve.gpus"].default == 1  # each phase's own
    assert by["train.betas"].default == [0.9, 0.95] and by["run.executor"].type == "one of 'auto', 'slurm', 'local'"
    assert by["slurm.train.time_min"].help == by["slurm.init.time_min"].help  # one text per key of a phase table


def test_config_keys_lists_them_filtered_and_as_json() -> None:
    res = CliRunner().invoke(main, ["config", "keys"])
    assert res.exit_code == 0
    for k in config_keys():
        assert f"  {k.key} = " in res.stdout
    assert "[solver]  The Solver: sampling, rewards and training." in res.stdout
    res = CliRunner().invoke(main, ["config", "keys", "slurm.train", "--json"])
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["key"] for r in rows][:2] == ["slurm.train.partition", "slurm.train.account"] and len(rows) == 13
    assert rows[3] == {"key": "slurm.train.gpus", "type": "an integer", "default": 8, "table": "slurm.train",
                       "help": "GPUs per task (per node).", "range": ""}
    res = CliRunner().invoke(main, ["config", "keys", "run.rounds", "--json"])
    assert json.loads(res.stdout)["range"] == ">= 1"  # declared with the key (config/schema.py Bound)
    res = CliRunner().invoke(main, ["config", "keys", "solver.band_low"])
    assert "(a number, [0.0, 1.0])" in res.stdout
    res = CliRunner().invoke(main, ["config", "keys", "solver.lr"])
    assert res.exit_code == 0 and res.stdout.count(" = ") == 1


def test_config_show_of_a_run_a_jobs_file_and_the_defaults(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t")
    res = CliRunner().invoke(main, ["config", "show", "t", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert tomllib.loads(res.stdout) == tomllib.loads(h.paths.config.read_text())
    res = CliRunner().invoke(main, ["config", "show", str(TINY), "--set", "run.rounds=7", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    want = load_config(TINY, ["run.rounds=7", f"run.runs_dir={tmp_path}"])
    assert tomllib.loads(res.stdout) == tomllib.loads(to_toml(want)) and res.stdout.startswith(f"# {TINY} --set")
    res = CliRunner().invoke(main, ["config", "show", "--set", "solver.lr=1e-5"])
    got = tomllib.loads(res.stdout)
    assert got["solver"]["lr"] == 1e-5 and got["run"] == tomllib.loads(to_toml(Config()))["run"]
    res = CliRunner().invoke(main, ["config", "show", str(TINY), "--set", "solver.lr=-1"])
    assert res.exit_code == 2 and "solver.lr" in res.stderr  # checked as launch checks it
