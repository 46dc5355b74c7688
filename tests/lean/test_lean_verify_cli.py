"""`sgsbatch verify` end to end with the stand-in REPL: verdict rows, malformed rows, resuming."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from leanlib import FAKE_CHECKER_COMMAND, FAKE_COMMAND

from sgsbatch.verification.command import split_code

THEOREM = "theorem t{i} (x : ℝ) : x ^ 2 ≥ 0 := by"


def _run(tmp_path: Path, inp: Path, out: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    command, checker = json.dumps(list(FAKE_COMMAND)), json.dumps(list(FAKE_CHECKER_COMMAND))
    return subprocess.run(
        [sys.executable, "-m", "sgsbatch.cli", "verify", str(inp), "--out", str(out), "--processes", "2",
         "--set", f"verification.repl_command={command}", "--set", f"verification.project_dir={tmp_path}",
         "--set", f"verification.checker_command={checker}",
         "--set", "verification.timeout_s=2", "--set", "verification.sandbox=none", *extra],
        capture_output=True, text=True, env=env, timeout=120,
    )


def test_verify_end_to_end_and_resume(tmp_path: Path, cli_env: dict[str, str]) -> None:
    rows = [
        {"id": "good", "header": "import Mathlib", "theorem": THEOREM.format(i=1), "proof": "\n  positivity"},
        {"id": "sorry", "header": "import Mathlib", "theorem": THEOREM.format(i=2), "proof": "\n  simp -- FAKE_SORRY"},
        {"id": "cheat", "header": "import Mathlib", "theorem": THEOREM.format(i=3), "proof": "\n  simp\n#eval 1"},
        {"id": "hang", "header": "import Mathlib", "theorem": THEOREM.format(i=4), "proof": "\n  simp -- FAKE_HANG"},
        {"id": 7, "code": "import Mathlib\nopen Real\n\ntheorem t7 (x : ℝ) : x ^ 2 ≥ 0 := by\n  positivity"},
        {"id": "nofields", "header": "import Mathlib"},
        {"header": "no id"},
    ]
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json at all\n")
    out = tmp_path / "out.jsonl"
    proc = _run(tmp_path, inp, out, cli_env)
    assert proc.returncode == 0, proc.stderr
    got = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(got) == {"good", "sorry", "cheat", "hang", "7", "nofields", "line-7", "line-8"}
    assert (got["good"]["verdict"], got["good"]["reason"]) == ("verified", None)
    assert (got["sorry"]["verdict"], got["sorry"]["reason"]) == ("failed", "sorry")
    assert (got["cheat"]["verdict"], got["cheat"]["reason"]) == ("failed", "eval")
    assert got["hang"]["verdict"] == "timeout"
    assert got["7"]["verdict"] == "verified"
    for rid in ("nofields", "line-7", "line-8"):
        assert (got[rid]["verdict"], got[rid]["reason"]) == ("error", "malformed_row")
    assert all(set(r) == {"id", "verdict", "reason", "messages", "time_s"} for r in got.values())
    assert "verify: 8/8" in proc.stderr
    # Resuming: nothing left to do, nothing written twice; a new row is checked alone.
    with inp.open("a") as f:
        f.write(json.dumps({"id": "late", "header": "", "theorem": THEOREM.format(i=9), "proof": " simp"}) + "\n")
    proc = _run(tmp_path, inp, out, cli_env, "--quiet")
    assert proc.returncode == 0, proc.stderr
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 9 and ids[-1] == "late"


def test_missing_repl_is_a_clean_error(tmp_path: Path, cli_env: dict[str, str]) -> None:
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "header": "", "theorem": THEOREM.format(i=1), "proof": " simp"}) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "sgsbatch.cli", "verify", str(inp), "--out", str(tmp_path / "o.jsonl"),
         "--set", "verification.repl_command=[\"no-such-repl-program\"]", "--set", f"verification.project_dir={tmp_path}"],
        capture_output=True, text=True, env=cli_env, timeout=60,
    )
    assert proc.returncode == 2 and "no-such-repl-program" in proc.stderr and "Traceback" not in proc.stderr


def test_split_code() -> None:
    header, theorem, proof = split_code("import Mathlib\nset_option maxHeartbeats 400000\n\n/-- d -/\ntheorem a : True := by\n  trivial")
    assert header == "import Mathlib\nset_option maxHeartbeats 400000\n"
    assert theorem == "/-- d -/\ntheorem a : True := by" and proof == "\n  trivial"


def test_bad_bytes_and_lone_surrogates_are_error_rows_and_never_stop_the_file(tmp_path: Path,
                                                                              cli_env: dict[str, str]) -> None:
    """Rows split on \\n only (a raw U+2028 stays in its row); invalid UTF-8 and lone surrogates are
    `error` rows named by line number; the file goes on, and a resume skips them."""
    good = {"id": "sep", "header": "", "theorem": THEOREM.format(i=1), "proof": "\n  positivity -- a\u2028b"}
    lines = [json.dumps(good, ensure_ascii=False).encode(),
             b'{"id": "bad-bytes", "header": "", "theorem": "t \xff", "proof": " simp"}',
             b'{"id": "\\ud800", "header": "", "theorem": "theorem x : True := by", "proof": " trivial"}',
             b'{"id": "sur", "header": "", "theorem": "theorem x : True := by", "proof": " \\udc00"}',
             json.dumps({"id": "last", "header": "", "theorem": THEOREM.format(i=5), "proof": " positivity"}).encode()]
    assert "\u2028".encode() in lines[0]
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_bytes(b"\r\n".join(lines) + b"\n")
    proc = _run(tmp_path, inp, out, cli_env)
    assert proc.returncode == 0, proc.stderr
    got = {r["id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").split("\n")[:-1])}
    assert set(got) == {"sep", "line-2", "line-3", "line-4", "last"}
    assert got["sep"]["verdict"] == got["last"]["verdict"] == "verified"
    assert "invalid UTF-8 at byte" in got["line-2"]["messages"][0]
    for rid in ("line-3", "line-4"):
        assert (got[rid]["verdict"], got[rid]["reason"]) == ("error", "malformed_row")
        assert "lone surrogate" in got[rid]["messages"][0]
    before = out.read_bytes()
    proc = _run(tmp_path, inp, out, cli_env, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == before  # the resume found every row done, bad ones included
