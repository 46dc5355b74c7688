"""One exit-code table for every command (errors.py; README: Exit codes): 0 ok, 1 the operation
failed, 2 usage or bad input, 130 interrupted. Every command of the click group, subcommands
included, is walked with a bad input and with an unknown option: both exit 2 with one clean line,
never a traceback; a new command without a case here fails the test."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sgsbatch.cli import main
from tests.runlib import TINY, recorded_run


def _paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        out.append((*prefix, name))
        if isinstance(cmd, click.Group):
            out += _paths(cmd, (*prefix, name))
    return out


COMMANDS = _paths(main)


def _bad_inputs(runs: Path) -> dict[tuple[str, ...], list[list[str]]]:
    """Per command, bad inputs a user types: unknown runs, names taken, options naming nothing."""
    r = ["--runs-dir", str(runs)]
    no_rows = runs / "garbage.jsonl"
    no_rows.write_text("not json\n")
    return {
        ("launch",): [[str(TINY), "--set", "run.rounds=0", *r], [str(TINY), "--set", "run.name=t", *r],
                      [str(runs / "missing.toml")]],
        ("status",): [["nope", *r]],
        ("resume",): [["nope", *r], ["t", "--method-change", *r]],
        ("cancel",): [["nope", *r]],
        ("watch",): [["nope", *r]],
        ("rebuild",): [["nope", *r], ["t", *r]],  # t's database is there: rebuild wants --force
        ("verify",): [[str(no_rows), "--out", str(runs / "v.jsonl"), "--set", "verification.backend=simulated"]],
        ("fit",): [["nope", *r]],
        ("report",): [["nope", "--out", str(runs / "r.html"), *r]],
        ("metrics",): [["nope", *r], ["t", "--metric", "no/such/*", *r]],
        ("preflight",): [[str(TINY), "--set", "nope.x=1"]],
        ("plan",): [[str(TINY), "--set", "nope.x=1"], [str(runs / "missing.toml")],
                    [str(TINY), "--set", f"data.source={no_rows}"]],
        ("canary",): [[str(TINY), "--set", "nope.x=1", "--local"]],
        ("timeline",): [["nope", *r], ["t", "--round", "99", *r]],
        ("logs",): [["nope", *r], ["t", "--phase", "nope", *r], ["t", "--round", "99", *r]],
        ("proofs",): [["nope", *r], ["t", "--target", "nope", *r], ["t", "--round", "99", *r]],
        ("export",): [["nope", "--out", str(runs / "x"), *r], ["t", "--out", str(no_rows), *r]],
        ("eval",): [["nope", "--round", "0", *r], ["t", "--round", "99", *r], ["t", "--round", "0", "--set", "x", *r]],
        ("config",): [["nope"]],
        ("config", "show"): [["nope", *r], ["t", "--set", "run.rounds=3", *r]],
        ("config", "keys"): [["nope"]],
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("exit")
    h = recorded_run(root, "t")
    h.paths.phase_dir(0, "init").mkdir(parents=True, exist_ok=True)
    (h.paths.phase_dir(0, "init") / "shard_00000.attempt.log").write_text("init log\n")
    return root


def test_every_command_has_a_bad_input_case(runs: Path) -> None:
    assert sorted(_bad_inputs(runs)) == COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_bad_input_exits_2_with_one_clean_line(runs: Path, path: tuple[str, ...]) -> None:
    for args in _bad_inputs(runs)[path]:
        res = CliRunner().invoke(main, [*path, *args])
        assert res.exit_code == 2, (path, args, res.output)
        assert isinstance(res.exception, SystemExit) and "Traceback" not in res.output, res.exception
        assert res.stderr.startswith(("Error:", "Usage:")), (path, args, res.stderr)
    res = CliRunner().invoke(main, [*path, "--no-such-option"])
    assert res.exit_code == 2 and "No such option" in res.stderr, (path, res.output)


def test_a_failed_operation_exits_1_and_a_good_one_0(runs: Path, tmp_path: Path) -> None:
    r = ["--runs-dir", str(runs)]
    fit = CliRunner().invoke(main, ["fit", "t", *r])  # too few points: the run needs more rounds
    assert fit.exit_code == 1 and fit.stderr.startswith("Error: no points to fit")
    ok = CliRunner().invoke(main, ["status", "t", "--json", *r])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["name"] == "t"
