"""State-database benchmark: full-scale round ingestion, and `status` on a 200-round database.

Run by hand (not a test):

    .venv/bin/python bench/bench_db.py                 # full: 3 fresh ingests + a 200-round database
    .venv/bin/python bench/bench_db.py --rounds 20     # scaled-down database build
    .venv/bin/python bench/bench_db.py --rounds 0      # ingest timing only

(a) Ingest: one full-scale synthetic round (3,323 targets x 8 samples + 1,677 conjectures x 8
    = 40,000 attempts with 300-800 character proofs and Lean-like verify reasons, 1,800
    conjecture rows, 1,000 reviews, ~40 metrics) is written with `state.ingest.ingest_rows`
    into a fresh run database made by `runs.create_run` (jobs/tiny.toml, executor local, 3,323
    fake targets). Timed: `ingest_rows` (median over --repeats fresh databases) and the
    idempotent second call. Row generation is not timed.
(b) Status: one run with --rounds rounds ingested the same way, each ended with
    `round/lifecycle._record` (the database part of `finish_round`: checkpoints, train metrics, round
    completed, next round's rows). run.rounds is --rounds + 1, so the run is still `running`
    with --rounds completed rounds (status then takes its non-terminal path). Timed:
    `sgsbatch status bench --json --runs-dir DIR` as a subprocess (median of 5, includes Python
    start-up), `python -c 'import sgsbatch.cli, sgsbatch.views.status'` (the start-up floor), and
    `status.run_status(h, live=False)` in-process. Also reports the database file size.

Results go to bench/out/bench_db-<timestamp>.json. Temporary run directories are removed
unless --keep is given.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func as sa_func
from sqlalchemy import insert as sa_insert
from sqlmodel import select

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sgsbatch.config.loading import load_config  # noqa: E402
from sgsbatch.logic.data import Target  # noqa: E402
from sgsbatch.round.lifecycle import _record  # noqa: E402
from sgsbatch.round.metrics import STORE_NEW_PROOFS  # noqa: E402
from sgsbatch.run.handle import RunHandle, create_run, open_run  # noqa: E402
from sgsbatch.state import ingest as ingest_mod  # noqa: E402
from sgsbatch.state.ingest import RoundRows, ingest_rows  # noqa: E402
from sgsbatch.state.schema import Attempt, RunState  # noqa: E402
from sgsbatch.views.status import run_status  # noqa: E402

HEADER = ("import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
          "open BigOperators Real Nat Topology Rat\n\n")
TACTICS = [
    "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b), mul_pos ha hb, sq_nonneg (a * b - 1)]",
    "have h₁ : 0 < x * y := by positivity", "norm_num [Nat.factorial, Finset.sum_range_succ]",
    "rcases h₀ with ⟨k, rfl⟩", "field_simp [hx.ne', hy.ne']", "ring_nf", "omega", "intro x hx",
    "simp only [Finset.sum_range_succ, Finset.sum_range_zero, Nat.cast_add] at h ⊢", "constructor",
    "<;> linarith [h₀, h₁, sq_nonneg (x - 2)]", "interval_cases n <;> simp_all",
    "have h₂ : (x - 1) ^ 2 ≥ 0 := sq_nonneg _", "rw [div_le_iff (by positivity)]",
    "obtain ⟨m, hm⟩ := Nat.even_or_odd' n", "apply le_of_sub_nonneg", "exact ⟨by norm_num, by norm_num⟩",
    "nlinarith [mul_self_nonneg (x + y - 3), abs_nonneg (x - y), h₀.le]", "decide", "aesop",
    "calc (a + b) ^ 2 = a ^ 2 + 2 * a * b + b ^ 2 := by ring\n    _ ≤ 2 * (a ^ 2 + b ^ 2) := by nlinarith [sq_nonneg (a - b)]",
]
ERRORS = [
    "error: linarith failed to find a contradiction\ncase a\nx y : ℝ\nh₀ : 0 < x\nh₁ : x + y = 10\na✝ : x * y > 25\n⊢ False",
    "error: unsolved goals\nn : ℕ\nh₀ : n % 5 = 3\n⊢ 2 * n % 5 = 1",
    "error: type mismatch\n  h₁\nhas type\n  0 < x : Prop\nbut is expected to have type\n  0 ≤ x * y : Prop",
    "error: simp made no progress", "error: ring_nf failed to prove the goal",
    "error: unknown identifier 'Nat.sub_lt_sub_left_iff'",
    "error: The rfl tactic failed. Possible reasons:\n- The goal is not a reflexive relation",
]
WORDS = ["x", "y", "n", "a", "b", "(x + 1)", "f", "Real.sqrt", "∑ i in Finset.range n,", "≤", "<", "=", "*", "+",
         "^ 2", "2", "3", "7", "∀", "∃", "ℝ", "ℕ", "→", "Real.log", "|x - 1|", "%", "11", "∧"]


def blob(rng: random.Random, parts: list[str], n_chars: int, sep: str) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        s = rng.choice(parts)
        out.append(s)
        size += len(s) + len(sep)
    return sep.join(out)


class Corpus:
    """Large texts to slice realistic strings from (cheap: no per-row random.choice joins)."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.proofs = blob(rng, TACTICS, 3_000_000, "\n  ")
        self.errors = blob(rng, ERRORS, 600_000, "\n")
        self.words = blob(rng, WORDS, 600_000, " ")

    @staticmethod
    def cut(text: str, rng: random.Random, lo: int, hi: int) -> str:
        n = rng.randint(lo, hi)
        off = rng.randrange(0, len(text) - n)
        return text[off:off + n]


def fake_targets(n: int) -> list[Target]:
    corpus = Corpus(1)
    rng = random.Random(2)
    out = []
    for i in range(n):
        tid = "mathd_" + hashlib.sha256(f"target{i}".encode()).hexdigest()[:10]
        body = Corpus.cut(corpus.words, rng, 80, 300)
        out.append(Target(tid, HEADER, f"theorem {tid} (x y : ℝ) (h₀ : 0 < x) (h₁ : {body}) : x ≤ y := by"))
    return out


def fake_round(r: int, targets: list[Target], corpus: Corpus, *, samples: int, conjectures: int,
               rejected_conjectures: int, reviews: int) -> RoundRows:
    """One full-scale round's rows, with the shapes `round_rows` builds."""
    rng = random.Random(1000 + r)
    rows = RoundRows(store_metric=STORE_NEW_PROOFS)
    cids = []
    for j in range(conjectures + rejected_conjectures):
        t = targets[j % len(targets)]
        statement = f"theorem conj_{r}_{j} (x : ℝ) (h : {Corpus.cut(corpus.words, rng, 60, 280)}) : 0 ≤ x := by"
        row: dict[str, Any] = {"target_id": t.id, "sample": j // len(targets), "statement": statement,
                               "tokens": rng.randint(120, 900), "conjecture_id": None}
        if j < conjectures:
            cid = f"c{r}-" + hashlib.sha256(statement.encode()).hexdigest()[:12]
            cids.append(cid)
            rows.conjectures.append({**row, "status": "ok", "reason": None, "conjecture_id": cid})
            rows.problems.append({"problem_id": cid, "header": t.header, "theorem": statement})
        elif j % 2:
            rows.conjectures.append({**row, "status": "duplicate", "reason": "duplicate"})
        else:
            rows.conjectures.append({**row, "statement": None, "status": "malformed", "reason": "no_lean_block"})
    verdict_counts = {"verified": 0, "failed": 0, "timeout": 0, "error": 0, "unextracted": 0}
    problems = [(t.id, True) for t in targets] + [(c, False) for c in cids]
    for pid, is_target in problems:
        p = 0.0 if rng.random() < 0.5 else rng.random()
        for k in range(samples):
            u = rng.random()
            tokens = rng.randint(200, 2500)
            a: dict[str, Any]
            if u < 0.06:
                a = {"extracted": False, "extract_reason": rng.choice(["no_lean_block", "truncated"]), "proof": None,
                     "verdict": "unextracted", "verify_reason": None, "finish_reason": "length", "verify_s": 0.0}
            else:
                proof = Corpus.cut(corpus.proofs, rng, 300, 800)
                if rng.random() < p:
                    verdict, reason = "verified", None
                elif u < 0.10:
                    verdict, reason = "timeout", "verification timed out after 200 s"
                elif u < 0.11:
                    verdict, reason = "error", "lean repl crashed: exit code 137"
                else:
                    verdict, reason = "failed", Corpus.cut(corpus.errors, rng, 80, 600)
                a = {"extracted": True, "extract_reason": None, "proof": proof, "verdict": verdict,
                     "verify_reason": reason, "finish_reason": "stop", "verify_s": round(rng.uniform(0.3, 40.0), 3)}
            verdict_counts[a["verdict"]] += 1
            rows.attempts.append({"problem_id": pid, "is_target": is_target, "sample": k, "tokens": tokens, **a})
    for cid in cids[:reviews]:
        ok = rng.random() > 0.03
        rel, red, cx = (rng.random(), rng.random(), rng.random()) if ok else (0.0, 0.0, 0.0)
        rows.reviews.append({"conjecture_id": cid, "parsed": ok, "reason": None if ok else "missing_relevance",
                             "relevance": rel, "redundant": red, "complexity": cx,
                             "score": rel * (1 - red) * cx if ok else 1.0, "tokens": rng.randint(100, 700)})
    m = rows.metrics
    n = len(rows.attempts)
    m.update({"pass@8": 0.41, "pass@1": 0.12, "conjectures/generated": conjectures + rejected_conjectures,
              "conjectures/well_formed": conjectures + rejected_conjectures // 2, "conjectures/unique": conjectures,
              "conjectures/valid": 700, "conjectures/in_band": 300, "conjectures/rejected/no_lean_block": 60,
              "conjectures/rejected/truncated": 30, "conjectures/rejected/not_a_theorem": 20,
              "extraction_failures/no_lean_block": 1200, "extraction_failures/truncated": 1200,
              "verify/timeout_rate": verdict_counts["timeout"] / n, "verify/error_rate": verdict_counts["error"] / n,
              "verify/verified": verdict_counts["verified"], "guide/failed_reviews": 30,
              "generations/round": conjectures + rejected_conjectures + n + len(rows.reviews),
              "tokens/round": sum(a["tokens"] for a in rows.attempts)})
    for b in range(samples + 1):
        m[f"solve_rate_hist/targets_{b}"] = rng.randint(0, 1000)
    for key in ("score", "relevance", "redundant", "complexity"):
        m[f"guide/{key}_mean"] = rng.random()
    for i in range(40 - len(m)):
        m[f"extra/metric_{i}"] = rng.random()
    return rows


def config(runs_dir: Path, rounds: int) -> Any:
    return load_config(REPO / "jobs" / "tiny.toml",
                       [f"run.runs_dir={runs_dir}", "run.name=bench", "run.executor=local", f"run.rounds={rounds}",
                        "solver.samples=8", "solver.store_cap=16"], cwd=REPO)


def core_insert_ignore(s: Any, table: Any, rows: list[dict[str, Any]]) -> None:
    """What-if replacement for ingest._insert_ignore: a Core INSERT on the Table (one executemany).

    `insert(Model)` executed through an ORM Session is an ORM bulk insert: it leaves out the keys
    whose value is None and groups consecutive rows by key set, so rows with and without a
    proof / verify_reason / extract_reason end up in thousands of small statements.
    """
    if rows:
        s.connection().execute(sa_insert(table.__table__).prefix_with("OR IGNORE"), rows)


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def bench_ingest(tmp: Path, targets: list[Target], corpus: Corpus, repeats: int, shape: dict[str, int],
                 label: str = "ingest") -> dict:
    first, again, create, gen, load = [], [], [], [], []
    counts: dict[str, int] = {}
    for i in range(repeats):
        runs_dir = tmp / f"{label}{i}"
        t0 = time.perf_counter()
        h = create_run(config(runs_dir, 3), targets, "local")
        create.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rows = fake_round(0, targets, corpus, **shape)
        gen.append(time.perf_counter() - t0)
        counts = {"attempts": len(rows.attempts), "conjectures": len(rows.conjectures), "reviews": len(rows.reviews),
                  "problems": len(rows.problems), "metrics": len(rows.metrics) + 1}
        load.append(os.getloadavg()[0])
        t0 = time.perf_counter()
        assert ingest_rows(h.db, h.run_id, 0, rows, h.cfg.solver.store_cap)
        first.append(time.perf_counter() - t0)
        with h.db.read() as s:
            stored = s.exec(select(sa_func.count()).select_from(Attempt)).one()
        assert stored == len(rows.attempts), (stored, len(rows.attempts))
        t0 = time.perf_counter()
        assert not ingest_rows(h.db, h.run_id, 0, rows, h.cfg.solver.store_cap)
        again.append(time.perf_counter() - t0)
        counts["stored_proofs"] = int(rows.metrics["store/new_proofs"])
        size = h.paths.db.stat().st_size
        h.db.close()
        shutil.rmtree(runs_dir)
        print(f"  {label} #{i + 1}: {first[-1]:.3f} s, re-ingest {again[-1] * 1000:.1f} ms "
              f"(create_run {create[-1]:.2f} s, row generation {gen[-1]:.2f} s, db {size / 2**20:.1f} MiB, "
              f"load {load[-1]:.2f})",
              flush=True)
    return {"rows": counts, "ingest_s": first, "ingest_median_s": median(first), "reingest_s": again,
            "reingest_median_s": median(again), "create_run_s": create, "row_generation_s": gen, "loadavg_1min": load,
            "db_bytes_one_round": size}


def build_db(tmp: Path, targets: list[Target], corpus: Corpus, rounds: int, shape: dict[str, int]) -> tuple[RunHandle, dict]:
    runs_dir = tmp / "status"
    h = create_run(config(runs_dir, rounds + 1), targets, "local")
    h.set_state(RunState.running)
    ingest_t, record_t = [], []
    t_start = time.time()
    train = {role: {"steps": 120, "sequences": 3800, "mean_loss": 0.42} for role in ("solver", "conjecturer")}
    for r in range(rounds):
        rows = fake_round(r, targets, corpus, **shape)
        t0 = time.perf_counter()
        ingest_rows(h.db, h.run_id, r, rows, h.cfg.solver.store_cap)
        t1 = time.perf_counter()
        _record(h, r, train)
        t2 = time.perf_counter()
        ingest_t.append(t1 - t0)
        record_t.append(t2 - t1)
        if (r + 1) % 10 == 0 or r + 1 == rounds:
            el = time.time() - t_start
            eta = el / (r + 1) * (rounds - r - 1)
            print(f"  built {r + 1}/{rounds} rounds: last ingest {ingest_t[-1]:.2f} s, _record "
                  f"{record_t[-1] * 1000:.0f} ms, db {h.paths.db.stat().st_size / 2**30:.2f} GiB, "
                  f"{el:.0f} s elapsed, ~{eta:.0f} s left", flush=True)
    pick = sorted({0, rounds // 2, rounds - 1})
    return h, {"rounds": rounds, "build_s": time.time() - t_start,
               "ingest_s_at_round": {str(r): ingest_t[r] for r in pick},
               "ingest_s_last10_median": median(ingest_t[-10:]), "ingest_s_median_all": median(ingest_t),
               "ingest_s_max": max(ingest_t), "record_s_median": median(record_t),
               "record_s_at_round": {str(r): record_t[r] for r in pick}}


def timed_cmd(cmd: list[str], n: int) -> tuple[list[float], str]:
    times, out = [], ""
    for _ in range(n):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise RuntimeError(f"{cmd} failed ({p.returncode}): {p.stderr}")
        out = p.stdout
    return times, out


def bench_status(h: RunHandle, rounds: int) -> dict:
    runs_dir = str(h.paths.root.parent)
    exe = str(Path(sys.executable).with_name("sgsbatch"))
    cli, out = timed_cmd([exe, "status", "bench", "--json", "--runs-dir", runs_dir], 5)
    st = json.loads(out)
    assert st["rounds_completed"] == rounds, st
    floor, _ = timed_cmd([sys.executable, "-c", "import sgsbatch.cli, sgsbatch.views.status"], 5)
    opened, inproc = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        h2 = open_run(runs_dir, "bench")
        t1 = time.perf_counter()
        st2 = run_status(h2, live=False)
        t2 = time.perf_counter()
        h2.db.close()
        opened.append(t1 - t0)
        inproc.append(t2 - t1)
    assert st2["rounds_completed"] == rounds
    return {"cli_status_s": cli, "cli_status_median_s": median(cli), "python_import_floor_s": floor,
            "python_import_floor_median_s": median(floor), "open_run_s": opened, "open_run_median_s": median(opened),
            "run_status_s": inproc, "run_status_median_s": median(inproc), "status_state": st["state"],
            "status_message": st["message"], "status_metrics": len(st["metrics"]),
            "db_bytes": h.paths.db.stat().st_size}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=200, help="rounds in the status database (0: skip part b)")
    ap.add_argument("--repeats", type=int, default=3, help="fresh databases for the ingest timing")
    ap.add_argument("--targets", type=int, default=3323)
    ap.add_argument("--conjectures", type=int, default=1677, help="unique conjectures (problems) per round")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--tmp", type=Path, default=None, help="parent of the temporary run dirs (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary run directories")
    ap.add_argument("--no-what-if", action="store_true", help="skip the Core-insert what-if ingest timing")
    args = ap.parse_args()
    shape = {"samples": args.samples, "conjectures": args.conjectures, "rejected_conjectures": 123, "reviews": 1000}
    tmp = Path(tempfile.mkdtemp(prefix="sgsbench-db-", dir=args.tmp))
    print(f"temporary run dirs under {tmp}", flush=True)
    result: dict[str, Any] = {"benchmark": "bench_db", "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                              "host": platform.node(), "python": platform.python_version(), "cpus": os.cpu_count(),
                              "args": {k: str(v) for k, v in vars(args).items()}, "shape": shape}
    try:
        corpus = Corpus(0)
        targets = fake_targets(args.targets)
        print(f"(a) ingest one round, {args.repeats} fresh databases", flush=True)
        result["ingest"] = bench_ingest(tmp, targets, corpus, args.repeats, shape)
        if not args.no_what_if:
            print("    what-if: the same ingest_rows with Core inserts (bench-only patch of _insert_ignore)", flush=True)
            real = ingest_mod._insert_ignore
            ingest_mod._insert_ignore = core_insert_ignore
            try:
                result["ingest_core_what_if"] = bench_ingest(tmp, targets, corpus, args.repeats, shape, "core")
            finally:
                ingest_mod._insert_ignore = real
        if args.rounds > 0:
            print(f"(b) build a {args.rounds}-round database", flush=True)
            h, result["build"] = build_db(tmp, targets, corpus, args.rounds, shape)
            print("    timing status", flush=True)
            result["status"] = bench_status(h, args.rounds)
            h.db.close()
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"bench_db-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    ing = result["ingest"]
    lines = [("rows per round", ", ".join(f"{k} {v}" for k, v in ing["rows"].items()), ""),
             ("ingest_rows (median)", f"{ing['ingest_median_s']:.3f} s", "target < 1 s"),
             ("re-ingest (median)", f"{ing['reingest_median_s'] * 1000:.1f} ms", "near 0"),
             ("db after one round", f"{ing['db_bytes_one_round'] / 2**20:.1f} MiB", "")]
    if "ingest_core_what_if" in result:
        lines.append(("what-if: Core inserts (median)", f"{result['ingest_core_what_if']['ingest_median_s']:.3f} s",
                      "not the shipped code"))
    if "status" in result:
        b, s = result["build"], result["status"]
        lines += [(f"build {b['rounds']} rounds", f"{b['build_s']:.0f} s", ""),
                  ("ingest_rows, all rounds (median)", f"{b['ingest_s_median_all']:.3f} s", ""),
                  ("ingest_rows, last 10 rounds (median)", f"{b['ingest_s_last10_median']:.3f} s", ""),
                  ("_record (median)", f"{b['record_s_median'] * 1000:.0f} ms", ""),
                  ("sgsbatch status --json (median of 5)", f"{s['cli_status_median_s']:.3f} s", "target < 1 s"),
                  ("  python + import floor (median of 5)", f"{s['python_import_floor_median_s']:.3f} s", ""),
                  ("open_run (median of 5)", f"{s['open_run_median_s'] * 1000:.1f} ms", ""),
                  ("run_status(live=False) (median of 5)", f"{s['run_status_median_s'] * 1000:.1f} ms", "target < 1 s"),
                  (f"db size, {b['rounds']} rounds", f"{s['db_bytes'] / 2**30:.2f} GiB", "")]
    w = max(len(x[0]) for x in lines)
    print()
    for k, v, t in lines:
        print(f"{k:<{w}}  {v:<14} {t}")
    print(f"\nresults: {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
