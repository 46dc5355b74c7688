"""bench/bench_lean.py end to end with the stand-in REPL (the code path only; no timing is checked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().with_name("fake_repl.py")
BENCH = REPO / "bench" / "bench_lean.py"
STAND_IN = f"{sys.executable} {FAKE}"
CHECKER = f"{sys.executable} {FAKE.with_name('fake_checker.py')}"
THEOREM = "theorem t{i} (x : ℕ) : x + 0 = x := by"


def _bench(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # the stand-in runs unsandboxed here (test_lean_sandbox.py covers bwrap, where the machine allows it)
    args = (*args, "--set", "verification.sandbox=none")
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=180)


def _rows(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_both_modes_agree(tmp_path: Path) -> None:
    inp = _rows(tmp_path / "in.jsonl", [
        {"id": "ok", "header": "", "theorem": THEOREM.format(i=1), "proof": "\n  simp"},
        {"id": "ok_mathlib", "header": "import Mathlib", "theorem": THEOREM.format(i=2), "proof": "\n  omega"},
        {"id": "err", "header": "", "theorem": THEOREM.format(i=3), "proof": "\n  simp -- FAKE_ERROR"},
        {"id": "sorry", "header": "", "theorem": THEOREM.format(i=4), "proof": "\n  sorry  -- FAKE_SORRY"},
    ])
    out = tmp_path / "result.json"
    proc = _bench(tmp_path, str(inp), "--proofs", "6", "--processes", "2", "--repl-command", STAND_IN,
                  "--checker-command", CHECKER, "--project-dir", str(tmp_path), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "STAND-IN REPL" in proc.stdout and "verdict agreement: 6/6" in proc.stdout
    r = json.loads(out.read_text())
    assert r["stand_in_repl"] is True and r["machine"]["cpus"] == os.cpu_count()
    for mode in ("pool", "fresh"):
        assert r[mode]["proofs"] == 6 and r[mode]["processes"] == 2
        assert r[mode]["proofs_per_s"] > 0 and r[mode]["proofs_per_s_per_core"] > 0
        assert r[mode]["verdicts"] == {"verified": 4, "failed": 2}
    # the re-check's cost is measured against the same pool without it; both agree on verdicts
    assert r["verification"]["kernel_recheck"] is True
    assert r["pool_no_recheck"]["verdicts"] == {"verified": 4, "failed": 2}
    assert isinstance(r["recheck_s_per_verified_proof"], float)
    assert r["fresh"]["repl_processes_started"] == 6  # one fresh process per proof, no reuse
    assert r["pool"]["repl_processes_started"] <= 2 * 2  # at most a process per slot per header
    assert r["agreement"] == {"proofs": 6, "agree": 6, "disagreements": []}
    by_id = {p["id"]: p for p in r["per_proof"]}
    assert set(by_id) == {"ok", "ok_mathlib", "err", "sorry", "ok#1", "ok_mathlib#1"}
    assert (by_id["err"]["pool_reason"], by_id["err"]["fresh_reason"]) == ("lean_error", "lean_error")
    assert (by_id["sorry"]["pool_reason"], by_id["sorry"]["fresh_reason"]) == ("sorry", "sorry")


def test_builtin_set_and_disagreement(tmp_path: Path) -> None:
    # The built-in set agrees under the stand-in; a proof only the pool's axiom audit catches
    # (the stand-in lists sorryAx for FAKE_AXIOM) is reported as a disagreement, exit status 1.
    out = tmp_path / "builtin.json"
    proc = _bench(tmp_path, "--processes", "1", "--proofs", "9", "--repl-command", STAND_IN,
                  "--project-dir", str(tmp_path), "--out", str(out), "--no-warm-up",
                  "--set", "verification.kernel_recheck=false")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(out.read_text())["agreement"]["agree"] == 9
    inp = _rows(tmp_path / "axiom.jsonl", [
        {"id": "ok", "header": "", "theorem": THEOREM.format(i=1), "proof": "\n  simp"},
        {"id": "cheat", "header": "", "theorem": THEOREM.format(i=2), "proof": "\n  simp  -- FAKE_AXIOM"},
    ])
    proc = _bench(tmp_path, str(inp), "--processes", "2", "--repl-command", STAND_IN,
                  "--checker-command", CHECKER, "--project-dir", str(tmp_path), "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "DISAGREE cheat: pool failed (axioms), fresh verified (None)" in proc.stdout
    (d,) = json.loads(out.read_text())["agreement"]["disagreements"]
    assert (d["id"], d["pool"], d["pool_reason"], d["fresh"]) == ("cheat", "failed", "axioms", "verified")


def test_no_lean_exits_2(tmp_path: Path) -> None:
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not (Path(d) / "lake").exists())
    env = {**os.environ, "PATH": path}
    proc = _bench(tmp_path, "--out", str(tmp_path / "x.json"), env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("real Lean not found: install it with ./setup.sh --lean (or --lean-core), "
            "or pass --repl-command to point at a REPL") in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "x.json").exists()
