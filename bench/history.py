"""A run's history for benchmarks: a run directory + state database as a long run leaves them.

`build_history(tmp, rounds)` makes run `bench` under `tmp/runs`: 3,323 fake targets, `rounds`
completed rounds each ingested as the tables really store a full-scale round (bench_db.fake_round:
~40,000 attempts, conjectures, reviews, metrics) and ended with `round/lifecycle._record`; per
round and phase the shard files (`.started`, output, `.done`) and a `jobs.jsonl` line as the
executors leave them; small stand-in checkpoint files for the rounds retention keeps; and round
`rounds` with every phase before verify done and verify running on 64 shards, each with an item
log half written (`items_per_shard` total, ~1 KB per item line). Shards follow jobs/sgs.toml
(conjecture 2, solve 8, verify 64). Not covered: Slurm's own files (status does not read them).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_db import REPO, Corpus, fake_round, fake_targets  # noqa: E402

from sgsbatch.config.loading import load_config  # noqa: E402
from sgsbatch.round.checkpoints import retained  # noqa: E402
from sgsbatch.round.lifecycle import _record  # noqa: E402
from sgsbatch.run.handle import RunHandle, create_run  # noqa: E402
from sgsbatch.run.journal import journal_job  # noqa: E402
from sgsbatch.run.shards import Shard  # noqa: E402
from sgsbatch.state.ingest import ingest_rows  # noqa: E402
from sgsbatch.state.schema import RunState  # noqa: E402

SHAPE = {"samples": 8, "conjectures": 1677, "rejected_conjectures": 123, "reviews": 1000}


def _phase_files(h: RunHandle, r: int, phase: str, finished: bool, items_per_shard: int) -> None:
    n = h.cfg.shard_count(phase)
    journal_job(h.paths.jobs_journal(r), {"phase": phase, "job_id": str(1000 + r * 10), "shards": list(range(n)),
                                          "submitted_at": time.time()})
    line = {"key": "", "problem_id": "", "verdicts": [{"verdict": "failed", "verify_reason": "x" * 100}] * 8}
    for i in range(n):
        s = Shard(h.paths.phase_dir(r, phase), i)
        s.mark_started()
        s.set_total(items_per_shard)
        if finished:
            s.finish([], {"items": items_per_shard, "proofs": 400, "timeout": 3, "error": 1})
        else:
            for k in range(items_per_shard // 2):
                s.append_item({**line, "key": f"p{i}_{k}", "problem_id": f"p{i}_{k}"})


def build_history(tmp: Path, rounds: int, items_per_shard: int = 52, progress: bool = True) -> RunHandle:
    cfg = load_config(REPO / "jobs" / "tiny.toml",
                      [f"run.runs_dir={tmp / 'runs'}", "run.name=bench", "run.executor=local",
                       f"run.rounds={rounds + 1}", "solver.samples=8", "solver.store_cap=16",
                       "shards.conjecture=2", "shards.solve=8", "shards.verify=64"], cwd=REPO)
    targets = fake_targets(3323)
    corpus = Corpus(0)
    h = create_run(cfg, targets, "local")
    h.set_state(RunState.running)
    train = {role: {"steps": 120, "sequences": 3800, "mean_loss": 0.42} for role in ("solver", "conjecturer")}
    t0 = time.time()
    for r in range(rounds):
        ingest_rows(h.db, h.run_id, r, fake_round(r, targets, corpus, **SHAPE), h.cfg.solver.store_cap)
        _record(h, r, train)
        for phase in h.cfg.phases_of_round(r):
            _phase_files(h, r, phase, True, items_per_shard)
        for role in ("solver", "conjecturer"):
            if retained(h.cfg, r, rounds - 1):
                d = h.paths.checkpoint(r, role)
                d.mkdir(parents=True, exist_ok=True)
                (d / "model.safetensors").write_bytes(b"\0" * 4096)
        if progress and ((r + 1) % 10 == 0 or r + 1 == rounds):
            print(f"  built {r + 1}/{rounds} rounds in {time.time() - t0:.0f} s", flush=True)
    for phase in h.cfg.phases_of_round(rounds):
        if phase == "verify":
            _phase_files(h, rounds, phase, False, items_per_shard)
            break
        _phase_files(h, rounds, phase, True, items_per_shard)
    return h


def describe(h: RunHandle) -> dict[str, Any]:
    files = sum(1 for _ in (h.paths.root / "rounds").rglob("*"))
    return {"db_bytes": h.paths.db.stat().st_size, "round_files": files}
