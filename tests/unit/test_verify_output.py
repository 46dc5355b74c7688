"""`sgsbatch verify`'s output file: never the input, a torn tail cut on resume, garbage lines
refused with the file and line, an unwritable `--out` a clean error, and no empty output when the
verifier cannot start. Runs on the simulated verifier (no Lean needed); the Lean end to end is in
tests/lean/test_lean_verify_cli.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from sgsbatch.cli import main

ROWS = [{"id": i, "header": "", "theorem": f"theorem {i} : True := by", "proof": "trivial"} for i in ("a", "b")]
SIM = ["--set", "verification.backend=simulated", "--quiet"]


def _inp(tmp_path: Path) -> Path:
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return p


def _verify(*args: str) -> Result:
    res = CliRunner().invoke(main, ["verify", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def test_out_equal_to_the_input_is_refused(tmp_path: Path) -> None:
    inp = _inp(tmp_path)
    before = inp.read_bytes()
    res = _verify(str(inp), "--out", str(tmp_path / "." / "in.jsonl"), *SIM)
    assert res.exit_code == 2 and "is the input file" in res.stderr
    assert inp.read_bytes() == before


def test_torn_tail_is_cut_and_the_output_stays_jsonl(tmp_path: Path) -> None:
    inp, out = _inp(tmp_path), tmp_path / "out.jsonl"
    out.write_text(json.dumps({"id": "a", "verdict": "verified"}) + '\n{"id": "b", "verd')
    res = _verify(str(inp), "--out", str(out), *SIM)
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]  # every line is JSON
    assert [r["id"] for r in rows] == ["a", "b"]


def test_garbage_line_is_reported_and_nothing_written(tmp_path: Path) -> None:
    inp, out = _inp(tmp_path), tmp_path / "out.jsonl"
    out.write_text(json.dumps({"id": "a", "verdict": "verified"}) + "\nnot json\n")
    before = out.read_bytes()
    res = _verify(str(inp), "--out", str(out), *SIM)
    assert res.exit_code == 2 and f"--out {out}: line 2 is not a verdict row" in res.stderr
    assert out.read_bytes() == before


def test_unwritable_out_is_a_clean_error(tmp_path: Path) -> None:
    inp = _inp(tmp_path)
    for out in ("/proc/version", "/proc/sgsbatch-no-such-dir/v.jsonl"):
        res = _verify(str(inp), "--out", out, *SIM)
        assert res.exit_code == 2 and f"--out {out}" in res.stderr, res.output


def test_verifier_that_cannot_start_leaves_no_output(tmp_path: Path) -> None:
    inp, out = _inp(tmp_path), tmp_path / "sub" / "out.jsonl"
    res = _verify(str(inp), "--out", str(out), "--set", 'verification.repl_command=["/no/such/repl"]',
                  "--set", f"verification.project_dir={tmp_path}")
    assert res.exit_code == 2 and "/no/such/repl" in res.stderr, res.output
    assert not out.exists() and not out.parent.exists()


def test_watch_intervals_below_zero_are_refused(tmp_path: Path) -> None:
    for args in (["status", "--watch", "--interval", "-1"], ["watch", "x", "--interval", "-1"]):
        res = CliRunner().invoke(main, [*args, "--runs-dir", str(tmp_path)])
        assert res.exit_code == 2 and "--interval" in res.stderr


def test_an_input_of_no_readable_row_is_refused_naming_it(tmp_path: Path) -> None:
    inp, out = tmp_path / "bad.jsonl", tmp_path / "out.jsonl"
    inp.write_text('not json\n{"id": "a", "proof": "x"}\n\n')
    res = _verify(str(inp), "--out", str(out), *SIM)
    assert res.exit_code == 2 and f"{inp}: no row could be read (2 non-empty lines; line 1: not JSON" in res.stderr
    assert not out.exists()  # nothing written


def test_malformed_rows_beside_good_ones_are_recorded(tmp_path: Path) -> None:
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text(json.dumps(ROWS[0]) + "\nnot json\n" + json.dumps({"id": "c", "header": ""}) + "\n")
    res = _verify(str(inp), "--out", str(out), *SIM)
    assert res.exit_code == 0, res.output
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"a", "line-2", "c"}
    assert rows["line-2"]["reason"] == rows["c"]["reason"] == "malformed_row"


def test_stdin_and_proofs_json_rows(tmp_path: Path) -> None:
    """`-` reads standard input; a row of `sgsbatch proofs --json` (`statement` for `theorem`, extra
    fields) is an input row."""
    out = tmp_path / "out.jsonl"
    row = {"id": "t0#0", "problem_id": "t0", "round": 0, "sample": 1, "slot": 0, "header": "",
           "statement": "theorem t0 : True := by", "proof": "trivial"}
    res = CliRunner().invoke(main, ["verify", "-", "--out", str(out), *SIM],
                             input=json.dumps(row) + "\n" + json.dumps(ROWS[1]) + "\n")
    assert res.exit_code == 0, res.output
    assert [r["id"] for r in map(json.loads, out.read_text().splitlines())] == ["t0#0", "b"]
    res = CliRunner().invoke(main, ["verify", "-", "--out", str(tmp_path / "o2.jsonl"), *SIM], input="garbage\n")
    assert res.exit_code == 2 and "standard input: no row could be read" in res.stderr
    res = CliRunner().invoke(main, ["verify", "-", "--out", str(tmp_path / "o3.jsonl"), *SIM], input="")
    assert res.exit_code == 2 and "standard input: nothing to verify" in res.stderr  # an empty input: refused
    assert not (tmp_path / "o3.jsonl").exists()
