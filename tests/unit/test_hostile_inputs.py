"""Hostile input a researcher types by mistake (issue 41): each is a clean error that names the right thing,
exits 2 and writes nothing.

- a `--set` of an unknown table, or a `--set data.source=` that cannot be loaded, is blamed on that `--set`,
  not on the jobs file (and the same mistake in a jobs file on the jobs file);
- `inherit` of a directory or of a missing file names the key, the jobs file and the path;
- a `--round` beyond the run's rounds (or beyond int64) is refused by every read command that takes it,
  naming the run's rounds (run/handle.check_round);
- `metrics --csv --json` is refused, naming both (ops/command_line.mutually_exclusive);
- an output path under a regular file is refused before any work, naming the path (ops/command_line.OutPath),
  by every command with such an option;
- `verify` of an empty input is refused: nothing to verify, no verdicts file.
Not covered here: the messages of damaged runs (test_damaged_runs.py) and bad config values
(test_operator_inputs.py).
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from sgsbatch.cli import main
from sgsbatch.cli.command_line import OutPath
from tests.runlib import TINY, recorded_run

HUGE = "99999999999999999999"  # beyond int64


def _run(args: list[str], stdin: str | None = None) -> Result:
    res = CliRunner().invoke(main, args, input=stdin)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"{args!r} raised {res.exception!r}") from res.exception
    return res


def _config_commands(tmp_path: Path, config: Path, *sets: str) -> list[list[str]]:
    """`launch --dry-run`, `launch` and `plan` of `config` with `sets`: the commands that load a jobs file."""
    s = [x for o in ("run.executor=local", *sets) for x in ("--set", o)]
    runs = ["--runs-dir", str(tmp_path / "runs")]
    return [["launch", str(config), "--dry-run", *s, *runs], ["launch", str(config), *s, *runs],
            ["plan", str(config), *s]]


@pytest.mark.parametrize("bad", ["nosuch.key=1", "slurm.nosuch.partition=x"])
def test_a_set_of_an_unknown_table_is_blamed_on_the_set(tmp_path: Path, bad: str) -> None:
    for args in _config_commands(tmp_path, TINY, bad):
        res = _run(args)
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith(f"Error: --set {bad}: {bad.rsplit('.', 1)[0]}: unknown key"), res.stderr
        assert str(TINY) not in res.stderr
    assert not (tmp_path / "runs").exists()


def _bad_sources(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Data sources that exist but cannot be loaded, and a word of the reason each gives."""
    (tmp_path / "not-a-dataset").mkdir()
    (tmp_path / "targets.txt").write_text("x\n")
    (tmp_path / "garbage.jsonl").write_text("{bad\n")
    return {"directory": (tmp_path / "not-a-dataset", "neither a `Dataset`"),
            "format": (tmp_path / "targets.txt", "cannot tell the format"),
            "rows": (tmp_path / "garbage.jsonl", "holds no usable targets (every row rejected, first: line 1")}


@pytest.mark.parametrize("kind", ["directory", "format", "rows"])
def test_a_bad_data_source_is_blamed_on_whoever_set_it(tmp_path: Path, kind: str) -> None:
    source, words = _bad_sources(tmp_path)[kind]
    for args in _config_commands(tmp_path, TINY, f"data.source={source}"):
        res = _run(args)
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith(f"Error: --set data.source={source}: data.source: "), res.stderr
        assert words in res.stderr and str(TINY) not in res.stderr
    jobs = tmp_path / "jobs.toml"  # the same source in a jobs file: the jobs file is to blame
    jobs.write_text(f'inherit = "{TINY}"\n\n[data]\nsource = "{source}"\n')
    for args in _config_commands(tmp_path, jobs):
        res = _run(args)
        assert res.exit_code == 2 and res.stderr.startswith(f"Error: {jobs}: data.source: "), res.stderr
    assert not (tmp_path / "runs").exists()


def test_a_set_of_the_data_format_that_breaks_a_good_source_is_named_too(tmp_path: Path) -> None:
    for args in _config_commands(tmp_path, TINY, "data.format=reference_json"):  # tiny's targets are JSONL
        res = _run(args)
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith(f"Error: {TINY} and --set data.format=reference_json: data.source: could not "
                                     "load"), res.stderr


@pytest.mark.parametrize("parent", ["a-directory", "missing.toml"])
def test_inherit_of_a_directory_or_missing_file_names_the_key_the_file_and_the_path(tmp_path: Path,
                                                                                   parent: str) -> None:
    (tmp_path / "a-directory").mkdir()
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(f'inherit = "{parent}"\n')
    what = "is a directory" if parent == "a-directory" else "is not an existing file"
    for args in _config_commands(tmp_path, jobs):
        res = _run(args)
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith(f"Error: {jobs}: inherit: '{parent}' ({tmp_path / parent}) {what}"), res.stderr


def _round_options() -> set[str]:
    """Every command of the click group with a --round option."""
    return {name for name, cmd in main.commands.items() if any("--round" in p.opts for p in cmd.params)}


@pytest.mark.parametrize("value", ["2", "9", HUGE, "-1"])
def test_every_read_command_refuses_a_round_the_run_does_not_have(tmp_path: Path, value: str) -> None:
    recorded_run(tmp_path, "t")  # 2 rounds: 0 and 1
    # launch's --round is a fork's (--from RUN --round N): ops/fork.py checks it against RUN's completed rounds
    # (tests/integration/test_fork.py); every other --round reads a run's round
    assert _round_options() == {"metrics", "proofs", "timeline", "logs", "eval", "launch"}, \
        "a new command with --round: check it here"
    for name in sorted(_round_options() - {"launch"}):
        res = _run([name, "t", "--runs-dir", str(tmp_path), "--round", value])
        assert res.exit_code == 2, (name, res.output)
        if value == "-1" and name in ("metrics", "logs"):  # click.IntRange(min=0) says it first
            assert "--round" in res.stderr and "-1" in res.stderr
            continue
        assert f"--round {value}: no such round; run t has rounds 0..1 (0-based" in res.stderr, (name, res.stderr)
    res = _run(["metrics", "t", "--runs-dir", str(tmp_path), "--round", "1"])  # a round of the run's: a table
    assert res.exit_code == 0 and res.stdout.startswith("run,round,metric"), res.output


def test_metrics_of_several_runs_takes_a_round_of_any_of_them(tmp_path: Path) -> None:
    recorded_run(tmp_path, "t")
    recorded_run(tmp_path, "u", sets=["run.rounds=4"])
    r = ["--runs-dir", str(tmp_path)]
    assert _run(["metrics", "t", "u", "--round", "3", *r]).exit_code == 0
    res = _run(["metrics", "t", "u", "--round", "4", *r])
    assert res.exit_code == 2 and "run t has rounds 0..1; run u has rounds 0..3" in res.stderr


def test_metrics_refuses_csv_and_json_together(tmp_path: Path) -> None:
    recorded_run(tmp_path, "t")
    r = ["metrics", "t", "--runs-dir", str(tmp_path)]
    for flags in (["--csv", "--json"], ["--json", "--csv"]):
        res = _run([*r, *flags])
        assert res.exit_code == 2 and "--csv and --json are mutually exclusive" in res.stderr, res.output
        assert res.stdout == ""
    assert _run([*r, "--json"]).exit_code == _run([*r, "--csv"]).exit_code == _run(r).exit_code == 0


def test_an_output_path_under_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    recorded_run(tmp_path, "t")
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "code": "theorem a : True := by trivial"}\n')
    r = ["--runs-dir", str(tmp_path)]
    cases = {"report": ["report", "t", *r, "--out"], "metrics": ["metrics", "t", *r, "--out"],
             "fit": ["fit", "t", *r, "--plot"], "export": ["export", "t", *r, "--out"],
             "verify": ["verify", str(rows), "--set", "verification.backend=simulated", "--out"]}
    outs = {name for name, cmd in main.commands.items() for p in cmd.params
            if isinstance(p, click.Option) and isinstance(p.type, OutPath)}
    assert outs == set(cases)
    written = [p for c in main.commands.values() for p in c.params
               if isinstance(p, click.Option) and {"--out", "--plot"} & set(p.opts)]
    assert all(isinstance(p.type, OutPath) for p in written), "an --out/--plot without OutPath"
    for name, args in cases.items():
        for under in (notes / "x.out", notes / "deeper" / "x.out"):
            res = _run([*args, str(under)])
            assert res.exit_code == 2, (name, res.output)
            assert f"{under}: {notes} is a file, not a directory" in res.stderr, (name, res.stderr)
    assert notes.read_text() == "mine\n"


def test_verify_of_an_empty_input_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "verdicts.jsonl"
    sim = ["--set", "verification.backend=simulated"]
    for text in ("", "\n\n  \n"):
        empty = tmp_path / "empty.jsonl"
        empty.write_text(text)
        res = _run(["verify", str(empty), "--out", str(out), *sim])
        assert res.exit_code == 2 and f"{empty}: nothing to verify" in res.stderr, res.output
        assert not out.exists()
    res = _run(["verify", "-", "--out", str(out), *sim], stdin="")
    assert res.exit_code == 2 and "standard input: nothing to verify" in res.stderr and not out.exists()
