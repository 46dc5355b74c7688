"""Rebuild benchmark: `sgsbatch.ops.rebuild.rebuild` on a synthetic full-scale run directory.

Run by hand (not a test):

    .venv/bin/python bench/bench_rebuild.py                  # 3 full-scale rounds (~1.2 GB of shard files)
    .venv/bin/python bench/bench_rebuild.py --rounds 1 --keep # keep the run directory (e.g. to profile it)

A run directory is synthesized with the record formats the phases write (learned from a real
`sgsbatch launch jobs/tiny.toml` run): config.toml = jobs/tiny.toml loaded with `load_config`
and frozen with `to_toml` as launch does (executor local, --rounds rounds, solver.samples 8,
shards conjecture/solve/guide = 8/64/8 (jobs/sgs.toml then; now 2/64/1), one conjecture per target), 3,323
targets, and per round: inputs.json; init (round 0); conjecture (1,800 samples: 1,677 unique,
61 duplicates, 62 malformed); solve + verify (3,323 targets + 1,677 conjectures, 8 samples each
= 40,000 attempts, 300-800 character proofs, 200-500 token ids and logprobs per sample, ~6 %
unextracted, ~16 % verified); guide (1,000 reviews, ~3 % unparsed); train (solver +
conjecturer results) and the round's checkpoint directories. Every shard is written with
`Shard.finish` (output, then its completion marker last); a generating shard's token ids and
logprobs go to its arrays file (run/token_arrays.py, written in one go), or with `--inline`
inline in the JSON records (the format of runs written before the arrays file). Not timed.

Timed, in a fresh child process (so that its peak RSS is the rebuild's own): `rebuild(RunPaths
(dir))` on the directory without state.db, per round (from its `progress` callback) and in
total. The shard files were just written, so they are read from the page cache. Checked:
attempts, conjectures, reviews in the database == what was written, rounds completed == R.
Results go to bench/out/bench_rebuild-<timestamp>.json; the run directory is removed unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_db import Corpus, fake_targets  # noqa: E402

from sgsbatch.config.loading import load_config, to_toml  # noqa: E402
from sgsbatch.round.results import conjecture_id  # noqa: E402
from sgsbatch.run.paths import RunPaths  # noqa: E402
from sgsbatch.run.shards import Shard, atomic_write_json  # noqa: E402
from sgsbatch.run.token_arrays import ALIGN  # noqa: E402
from tests.shardlib import split_arrays  # noqa: E402

TOKEN_POOL = 64  # distinct token-id / logprob lists, reused across samples (generation speed)


def chunks(items: list[Any], n: int) -> list[list[Any]]:
    k, m = divmod(len(items), n)
    return [items[i * k + min(i, m):(i + 1) * k + min(i + 1, m)] for i in range(n)]


INLINE = False  # --inline: token ids and logprobs inline in the JSON records (runs written before)


def write_phase(d: Path, records: list[dict[str, Any]], n: int, generating: bool = False) -> None:
    for i, part in enumerate(chunks(records, n)):
        sh = Shard(d, i)
        sh.mark_started()
        if generating and not INLINE:  # as the item log's appends leave it, in one write
            blob, out = bytearray(), []
            for rec in part:
                counted, arrays = split_arrays(rec)
                blob += b"\0" * (-len(blob) % ALIGN)
                out.append({**counted, "arrays_at": len(blob)})
                blob += arrays.block()
            sh.arrays.write_bytes(bytes(blob))
            part = out
        sh.finish(part, {"items": len(part)})


class Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.corpus = Corpus(seed)
        self.tokens = []
        for _ in range(TOKEN_POOL):
            n = self.rng.randint(200, 500)
            self.tokens.append(([self.rng.randrange(100_000) for _ in range(n)],
                                [round(-self.rng.expovariate(3.0), 6) for _ in range(n)]))
        self.prompts = [[self.rng.randrange(100_000) for _ in range(self.rng.randint(250, 450))] for _ in range(16)]

    def sample(self, text: str) -> dict[str, Any]:
        ids, lps = self.rng.choice(self.tokens)
        return {"finish_reason": "length" if self.rng.random() < 0.03 else "stop", "logprobs": lps,
                "text": text, "token_ids": ids}


def write_round(paths: RunPaths, r: int, targets: list[Any], g: Gen, n_conj: int, samples: int,
                shards: dict[str, int], rounds: int) -> dict[str, int]:
    rng, cut = g.rng, Corpus.cut
    atomic_write_json(paths.round_inputs(r), {"round": r, "solve_targets": [t.id for t in targets],
                                              "unsolved": [t.id for t in targets], "solved": 0})
    if r == 0:
        write_phase(paths.phase_dir(r, "init"), [{"key": x, "role": x, "cache": ""} for x in
                                                ("solver", "conjecturer", "guide")], 1)
    # conjecture: n_conj unique statements + ~3.6 % duplicates + ~3.7 % malformed, one sample per target
    n_dup, n_bad = round(n_conj * 0.0364), round(n_conj * 0.037)
    kinds = ["ok"] * n_conj + ["dup"] * n_dup + ["bad"] * n_bad
    rng.shuffle(kinds)
    kinds.sort(key=lambda k: k == "dup" and rng.random() < 0.5)  # keep duplicates after some originals
    kinds.insert(0, kinds.pop(kinds.index("ok")))  # a duplicate needs an earlier original
    items, conj, statements = [], [], []
    for j, kind in enumerate(kinds):
        t = targets[j % len(targets)]
        if kind == "ok":
            st = f"theorem conj_{r}_{j} (x y : ℝ) (h₀ : {cut(g.corpus.words, rng, 60, 280)}) : 0 ≤ x * y := by"
            statements.append(st)
            conj.append((conjecture_id(r, st), t))
        elif kind == "dup":
            st = rng.choice(statements)
        smp = g.sample(f"```lean4\n{st}\n  sorry\n```" if kind != "bad" else "I think the lemma is")
        smp.update({"ok": kind != "bad", "reason": "no_fence" if kind == "bad" else None,
                    "statement": st if kind != "bad" else None})
        items.append({"key": t.id, "target_id": t.id, "prompt_ids": rng.choice(g.prompts), "samples": [smp]})
    write_phase(paths.phase_dir(r, "conjecture"), items, shards["conjecture"], generating=True)
    # solve + verify
    problems = [(t.id, True) for t in targets] + [(cid, False) for cid, _ in conj]
    solve, verify, counts = [], [], {"attempts": 0, "verified": 0}
    for pid, is_target in problems:
        p = rng.random() ** 5  # per-problem solve probability, mean 1/6
        smps, vds = [], []
        for _ in range(samples):
            ok = rng.random() >= 0.06
            proof = "\n  " + cut(g.corpus.proofs, rng, 300, 800) if ok else None
            smp = g.sample(f"```lean4\ntheorem {pid} := by{proof}\n```" if ok else "no code block")
            smp.update({"ok": ok, "proof": proof, "reason": None if ok else "no_fence"})
            smps.append(smp)
            if not ok:
                vds.append({"verdict": "unextracted", "verify_reason": "no_fence", "messages": [], "time_s": 0.0})
                continue
            u = rng.random()
            verdict = "verified" if u < p else ("timeout" if u > 0.995 else "failed")
            reason = None if verdict == "verified" else ("timeout after 200 s" if verdict == "timeout"
                                                          else cut(g.corpus.errors, rng, 80, 600))
            vds.append({"verdict": verdict, "verify_reason": reason, "messages": [reason] if reason else [],
                        "time_s": round(rng.uniform(0.5, 30.0), 3)})
            counts["verified"] += verdict == "verified"
        counts["attempts"] += samples
        solve.append({"key": pid, "problem_id": pid, "is_target": is_target, "prompt_ids": rng.choice(g.prompts),
                      "samples": smps})
        verify.append({"key": pid, "problem_id": pid, "verdicts": vds})
    write_phase(paths.phase_dir(r, "solve"), solve, shards["solve"], generating=True)
    write_phase(paths.phase_dir(r, "verify"), verify, shards["solve"])
    # guide: 1,000 reviews of this round's conjectures
    reviews = []
    for cid, _ in conj[:1000]:
        ok = rng.random() >= 0.03
        sc = [rng.randint(1, 5) for _ in range(3)] if ok else [None] * 3
        text = (f"The conjecture is a useful step.\n<relevance>{sc[0]}</relevance>\n<redundant_premises>{sc[1]}"
                f"</redundant_premises>\n<conclusion_complexity>{sc[2]}</conclusion_complexity>")
        reviews.append({**g.sample(text), "key": cid, "conjecture_id": cid, "ok": ok,
                        "reason": None if ok else "no_scores", "relevance": sc[0], "redundant": sc[1],
                        "complexity": sc[2]})
    write_phase(paths.phase_dir(r, "guide"), reviews, shards["guide"], generating=True)
    for role in ("solver", "conjecturer"):
        ck = paths.checkpoint(r, role)
        ck.mkdir(parents=True, exist_ok=True)
        (ck / "SGSBATCH_COMPLETE").write_text("")
    write_phase(paths.phase_dir(r, "train"), [
        {"key": "solver", "role": "solver", "steps": 120, "sequences": 3800, "mean_loss": 0.41,
         "target_tokens": 1_300_000},
        {"key": "conjecturer", "role": "conjecturer", "steps": 20, "sequences": 500, "mean_loss": 1.14,
         "reward_mean": 0.25, "target_tokens": 160_000}], 1)
    counts.update(conjectures=len(kinds), unique=len(conj), reviews=len(reviews))
    return counts


def synthesize(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    shards = {"conjecture": 8, "solve": 64, "guide": 8}
    over = [f"run.name={root.name}", f"run.runs_dir={root.parent}", "run.executor=local", f"run.rounds={args.rounds}",
            f"solver.samples={args.samples}", "conjecturer.samples_per_target=1"]
    over += [f"shards.{k}={v}" for k, v in shards.items()]
    cfg = load_config(REPO / "jobs" / "tiny.toml", over, cwd=REPO)
    paths = RunPaths(root)
    root.mkdir(parents=True)
    paths.config.write_text(to_toml(cfg), encoding="utf-8")
    targets = fake_targets(args.targets)
    with paths.targets.open("w", encoding="utf-8") as f:
        for t in targets:
            f.write(json.dumps({"id": t.id, "header": t.header, "theorem": t.theorem}, ensure_ascii=False) + "\n")
    g = Gen(args.seed)
    per_round = []
    for r in range(args.rounds):
        t0 = time.perf_counter()
        per_round.append(write_round(paths, r, targets, g, args.conjectures, args.samples, shards, args.rounds))
        print(f"    round {r} written in {time.perf_counter() - t0:.1f} s: {per_round[-1]}", flush=True)
    size = sum(p.stat().st_size for p in (root / "rounds").rglob("*") if p.is_file())
    return {"per_round": per_round, "shards": shards, "round_files_bytes": size}


def time_rebuild(root: Path) -> dict[str, Any]:
    """The child process: rebuild and report timings, peak RSS and row counts."""
    from sqlalchemy import func
    from sqlmodel import select

    import sgsbatch.ops.rebuild as rb
    import sgsbatch.round.lifecycle as lc
    import sgsbatch.scheduling.chain as chain
    from sgsbatch.state.db import open_db
    from sgsbatch.state.schema import Conjecture, ReviewRow

    spans: dict[str, list[float]] = {"read": [], "ingest": [], "finish": []}
    starts: list[float] = []

    def timed(name: str, fn: Any, add: bool = False) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            if name == "read":
                starts.append(t)
            try:
                return fn(*a, **k)
            finally:
                if add:  # the second half of a step: add to the round's span
                    spans[name][-1] += time.perf_counter() - t
                else:
                    spans[name].append(time.perf_counter() - t)
        return wrapper

    # bench-only wrappers of the steps rebuild runs per round through chain.end_round (timing, no
    # behaviour change): reading the round back, ingestion (building the rows + writing them), finishing
    lc.round_results = timed("read", lc.round_results)
    lc.round_rows = timed("ingest", lc.round_rows)
    lc.ingest_rows = timed("ingest", lc.ingest_rows, add=True)
    chain.finish_round = timed("finish", chain.finish_round)
    paths = RunPaths(root)
    marks: list[float] = []
    t0 = time.perf_counter()
    rep = rb.rebuild(paths, force=False, progress=lambda r: marks.append(time.perf_counter()))
    total = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with open_db(rep.database).read() as s:
        conj = s.exec(select(func.count()).select_from(Conjecture)).one()
        reviews = s.exec(select(func.count()).select_from(ReviewRow)).one()
    return {"total_s": total, "round_s": [b - a for a, b in zip(starts, marks, strict=True)], **{
            f"{k}_s": v for k, v in spans.items()}, "before_first_round_s": starts[0] - t0 if starts else total,
            "after_last_round_s": t0 + total - marks[-1] if marks else 0.0,
            "peak_rss_bytes": rss, "db_bytes": paths.db.stat().st_size, "rounds_completed": rep.rounds_completed,
            "attempts": rep.attempts, "conjectures": conj, "reviews": reviews}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--targets", type=int, default=3323)
    ap.add_argument("--conjectures", type=int, default=1677, help="unique conjectures (problems) per round")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp", type=Path, default=None, help="parent of the temporary run dir (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    ap.add_argument("--inline", action="store_true",
                    help="token ids and logprobs inline in the JSON records (runs written before the arrays file)")
    ap.add_argument("--time-rebuild", type=Path, help=argparse.SUPPRESS)  # the child process
    args = ap.parse_args()
    if args.time_rebuild:
        print(json.dumps(time_rebuild(args.time_rebuild)))
        return 0
    global INLINE
    INLINE = args.inline
    tmp = Path(tempfile.mkdtemp(prefix="sgsbench-rebuild-", dir=args.tmp))
    root = tmp / "bench"
    print(f"run directory {root}", flush=True)
    result: dict[str, Any] = {"benchmark": "bench_rebuild", "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                              "host": platform.node(), "python": platform.python_version(), "cpus": os.cpu_count(),
                              "format": "inline" if args.inline else "arrays",
                              "args": {k: str(v) for k, v in vars(args).items() if k != "time_rebuild"}}
    try:
        print(f"synthesizing {args.rounds} rounds", flush=True)
        t0 = time.perf_counter()
        result["synthesized"] = synthesize(root, args)
        result["synthesize_s"] = time.perf_counter() - t0
        RunPaths(root).db.unlink(missing_ok=True)
        print("timing rebuild (child process)", flush=True)
        out = subprocess.run([sys.executable, __file__, "--time-rebuild", str(root)], check=True,
                             capture_output=True, text=True)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        result["rebuild"] = res
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    written = result["synthesized"]["per_round"]
    want = {"attempts": sum(x["attempts"] for x in written), "conjectures": sum(x["conjectures"] for x in written),
            "reviews": sum(x["reviews"] for x in written), "rounds_completed": args.rounds}
    result["checks"] = {k: {"written": v, "database": res[k], "ok": v == res[k]} for k, v in want.items()}
    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"bench_rebuild-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    lines = [("attempts per round", f"{written[0]['attempts']:,}", ""),
             ("shard files", f"{result['synthesized']['round_files_bytes'] / 2**20:.0f} MiB", ""),
             ("rebuild total", f"{res['total_s']:.1f} s", f"{args.rounds} rounds"),
             ("per round (median)", f"{statistics.median(res['round_s']):.2f} s", ", ".join(f"{x:.2f}" for x in res["round_s"])),
             ("  read / ingest / finish_round", " / ".join(f"{statistics.median(res[k + '_s']):.2f}" for k in
                                                         ("read", "ingest", "finish")) + " s", "medians"),
             ("  finish_round per round", ", ".join(f"{x:.2f}" for x in res["finish_s"]) + " s",
              "round 0 imports torch (TensorBoard)"),
             ("before round 0 / after last", f"{res['before_first_round_s']:.2f} / {res['after_last_round_s']:.2f} s",
              "run rows + jobs / checkpoint check"),
             ("peak RSS", f"{res['peak_rss_bytes'] / 2**20:.0f} MiB", ""),
             ("state.db", f"{res['db_bytes'] / 2**20:.1f} MiB", "")]
    lines += [(f"check {k}", f"{c['database']:,}", "ok" if c["ok"] else f"MISMATCH, wrote {c['written']:,}")
              for k, c in result["checks"].items()]
    w = max(len(x[0]) for x in lines)
    print()
    for k, v, t in lines:
        print(f"{k:<{w}}  {v:<14} {t}")
    print(f"\nresults: {path.relative_to(REPO)}")
    return 0 if all(c["ok"] for c in result["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
