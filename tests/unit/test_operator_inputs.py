"""Inputs that once reached a Python traceback or a later failure: each is refused at launch (and by
`--dry-run`, with the same message), exits 2 and creates nothing.

Also a seeded property test: random bytes, random TOML and random `--set` values fed to
`launch --dry-run` and `verify` end with exit code 0, 1 or 2 and never a traceback.
Not covered here: damaged run directories (test_damaged_runs.py).
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sgsbatch.cli import main

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "jobs" / "tiny.toml"


def _invoke(args: list[str], cwd: Path | None = None) -> Result:
    res = CliRunner().invoke(main, args, catch_exceptions=True)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"{args!r} raised {res.exception!r}") from res.exception
    return res


BAD_SETS = [
    (["run.name=" + "x" * 300], "run.name", "1-100 characters"),
    (["run.name=-x"], "run.name", "not starting with"),
    (['run.name="a\\nb"'], "run.name", "1-100 characters"),
    (["run.seed=99999999999999999999"], "run.seed", "within [-9223372036854775808"),
    (["run.rounds=9223372036854775808"], "run.rounds", "within [-9223372036854775808"),
    (["run.seed=-1"], "run.seed", ">= 0"),
    (["run.database_url=foo://bar"], "run.database_url", "not a database URL"),
    (["run.database_url=::::"], "run.database_url", "not a database URL"),
    (["solver.lr=inf"], "solver.lr", "finite"),
    (["solver.temperature=nan"], "solver.temperature", "finite"),
    (["shards.solve=100000000"], "shards.solve", "<= 10000"),
    (["slurm.solve.cpus=100000000"], "slurm.solve.cpus", "<= 4096"),
    (['slurm.solve.mem="lots"'], "slurm.solve.mem", "Slurm memory size"),
]


@pytest.mark.parametrize(("sets", "key", "words"), BAD_SETS)
def test_bad_value_is_refused_by_dry_run_and_launch_alike(tmp_path: Path, sets: list[str], key: str,
                                                          words: str) -> None:
    runs = tmp_path / "runs"
    args = [str(TINY), "--set", f"run.runs_dir={runs}", *[x for s in sets for x in ("--set", s)]]
    dry = _invoke(["launch", *args, "--dry-run"])
    real = _invoke(["launch", *args])
    assert dry.exit_code == real.exit_code == 2, (dry.output, real.output)
    assert dry.stderr == real.stderr and key in dry.stderr and words in dry.stderr
    assert f"--set {sets[0]}" in dry.stderr  # names where the value came from
    assert not runs.exists()


def test_runs_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    for extra in (["--dry-run"], []):
        res = _invoke(["launch", str(TINY), "--set", f"run.runs_dir={tmp_path / 'f' / 'runs'}", *extra])
        assert res.exit_code == 2 and "run.runs_dir" in res.stderr and "is not a directory" in res.stderr


def test_binary_config_file(tmp_path: Path) -> None:
    path = tmp_path / "bin.toml"
    path.write_bytes(b"\x00\xff\xfe\x80binary")
    res = _invoke(["launch", str(path), "--dry-run"])
    assert res.exit_code == 2 and f"{path}: not a text file" in res.stderr


def test_dry_run_refuses_a_name_that_exists(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    res = _invoke(["launch", str(TINY), "--set", f"run.runs_dir={tmp_path}", "--set", "run.name=taken", "--dry-run"])
    assert res.exit_code == 2 and "run 'taken' already exists" in res.stderr
    assert "nothing created" not in res.stdout


# --- the property test: random input never reaches a traceback ---

KEYS = ["run.rounds", "run.seed", "run.name", "run.runs_dir", "run.database_url", "solver.lr", "solver.samples",
        "shards.solve", "shards.verify", "slurm.solve.mem", "slurm.train.gpus", "data.limit", "run", "solver",
        "verification.timeout_s", "verification.backend", "nope.x", "train.betas", "prompts.solver"]


def _random_value(rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return str(rng.choice([0, -1, 1, 2**63, -(2**70), 10**30, 3]))
    if kind == 1:
        return rng.choice(["inf", "-inf", "nan", "1e400", "0.5", "-0.0"])
    if kind == 2:
        return rng.choice(["true", "[]", "[1, 2]", "{a = 1}", '""', '"x"', "[[1]]"])
    if kind == 3:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(0, 40)))
    if kind == 4:
        return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(1, 10)))
    if kind == 5:
        return rng.choice(["/", "/proc/version", "./missing", "~", "-", "--help"])
    if kind == 6:
        return "x" * rng.randrange(200, 400)
    return rng.choice(["lots", "64G", "0", "simulated", "lean"])


def _random_toml(rng: random.Random) -> str:
    lines = [f'inherit = "{TINY}"'] if rng.random() < 0.7 else []
    for _ in range(rng.randrange(0, 5)):
        key = rng.choice(KEYS)
        table, _, leaf = key.rpartition(".")
        lines.append(f"[{table}]\n{leaf} = {_random_value(rng)}" if table else f"{leaf} = {_random_value(rng)}")
    return "\n".join(lines) + "\n"


def _random_sets(rng: random.Random, runs: Path) -> list[str]:
    out = ["--set", f"run.runs_dir={runs}"]
    for _ in range(rng.randrange(0, 4)):
        out += ["--set", f"{rng.choice(KEYS)}={_random_value(rng)}" if rng.random() < 0.9 else _random_value(rng)]
    return out


def test_random_configs_and_sets_never_reach_a_traceback(tmp_path: Path) -> None:
    rng = random.Random(13)
    for case in range(60):
        path = tmp_path / f"c{case}.toml"
        mode = case % 3
        if mode == 0:
            path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200))))
        elif mode == 1:
            path.write_text(_random_toml(rng))
        else:
            path = TINY
        runs = tmp_path / f"runs{case}"
        res = _invoke(["launch", str(path), "--dry-run", *_random_sets(rng, runs)])
        assert res.exit_code in (0, 1, 2), (case, res.output)
        assert "Traceback" not in res.output
        assert not runs.exists() or not any(runs.iterdir())


def test_random_verify_inputs_never_reach_a_traceback(tmp_path: Path) -> None:
    rng = random.Random(31)
    good = json.dumps({"id": "a", "header": "", "theorem": "theorem a : True := by", "proof": "trivial"})
    for case in range(30):
        inp = tmp_path / f"in{case}.jsonl"
        rows = [good.encode(), bytes(rng.randrange(256) for _ in range(rng.randrange(0, 80))),
                json.dumps({"id": rng.randrange(5), "code": _random_value(rng)}).encode()]
        rng.shuffle(rows)
        inp.write_bytes(b"\n".join(rows))
        out = tmp_path / f"out{case}.jsonl"
        if case % 4 == 0:
            out.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 60))))
        sets = ["--set", "verification.backend=simulated"]
        if case % 3 == 0:
            sets += ["--set", f"verification.{rng.choice(['timeout_s', 'memory_limit_mb', 'nope'])}={_random_value(rng)}"]
        res = _invoke(["verify", str(inp), "--out", str(out), "--quiet", *sets])
        assert res.exit_code in (0, 1, 2), (case, res.output)
        assert "Traceback" not in res.output


# --- messages name where the value came from ---

def test_bad_value_in_a_parent_names_the_parent_via_the_child(tmp_path: Path) -> None:
    (tmp_path / "parent.toml").write_text(f'inherit = "{TINY}"\n[solver]\nlr = -1.0\n')
    (tmp_path / "child.toml").write_text('inherit = "parent.toml"\n[run]\nrounds = 2\n')
    res = _invoke(["launch", str(tmp_path / "child.toml"), "--dry-run"])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"Error: {tmp_path / 'parent.toml'} via {tmp_path / 'child.toml'}: solver.lr: ")
    (tmp_path / "child.toml").write_text('inherit = "parent.toml"\n[run]\nrounds = 0\n')
    res = _invoke(["launch", str(tmp_path / "child.toml"), "--dry-run"])
    assert res.stderr.startswith(f"Error: {tmp_path / 'child.toml'}: run.rounds: ")


def test_set_over_a_whole_table_names_the_set(tmp_path: Path) -> None:
    res = _invoke(["launch", str(TINY), "--set", "run=3", "--dry-run"])
    assert res.exit_code == 2
    assert res.stderr.startswith("Error: --set run=3: run: must be a table") and "is required" not in res.stderr
    res = _invoke(["launch", str(TINY), "--set", "run.rounds=0", "--dry-run"])
    assert res.stderr.startswith("Error: --set run.rounds=0: run.rounds: must be")
