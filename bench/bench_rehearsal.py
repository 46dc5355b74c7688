"""Rehearsal benchmark: jobs/sgs.toml rehearsed (`launch --rehearse`) on the local Slurm for N rounds.

Run by hand (not a test), with the repository's local Slurm up (slurm/cluster.sh):

    .venv/bin/python bench/bench_rehearsal.py                         # 20 rounds, 3000 targets
    .venv/bin/python bench/bench_rehearsal.py --rounds 3 --targets 300 --shard-divisor 8

The config is bench/rehearsal.toml (jobs/sgs.toml with only the resources changed for a GPU-less
node); generation, verifier and trainer are SIMULATED. The data is the local copy of D_3k
(`--data`, the hub is not assumed reachable) limited to `--targets`; `--shard-divisor` divides
jobs/sgs.toml's shard counts (1 = as written). Per completed round it records: the round's wall
time (from the launch or the previous round's completion to its completion in the database), the database and run-directory sizes, the wall
time of `sgsbatch status RUN --json` (a subprocess, Python start-up included), and the largest
directory's entry count in the run directory. Throughout: the peak RSS (VmHWM from /proc, sampled
every 0.5 s) of each phase's worker processes; the train job's is the controller's (it ingests the
round, ends it and submits the next), its ranks are listed apart. Results go to bench/out/bench_rehearsal-<timestamp>.json and are printed as a table.
Not covered: real generation, Lean or training times (all simulated).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "bench" / "rehearsal.toml"
D3K = REPO.parent / "shared" / "data" / "d3k" / "D_3k_prover_dataset.json"
SGS_SHARDS = {"conjecture": 2, "solve": 8, "guide": 1, "verify": 64}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "sgsbatch.cli", *args], capture_output=True, text=True, env=env,
                          cwd=REPO)


def _tree_size(root: Path) -> tuple[int, int, str]:
    """(bytes, entries of the largest directory, that directory) under `root`."""
    total, widest, where = 0, 0, ""
    for d, dirs, files in os.walk(root):
        if len(dirs) + len(files) > widest:
            widest, where = len(dirs) + len(files), os.path.relpath(d, root)
        for f in files:
            with contextlib.suppress(FileNotFoundError):  # a file replaced while we walk
                total += os.lstat(os.path.join(d, f)).st_size
    return total, widest, where


def _rounds(db: Path) -> list[tuple[int, float, float]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute('SELECT "index", started_at, completed_at FROM rounds WHERE state = "completed" '
                           'ORDER BY "index"').fetchall()
    finally:
        con.close()


def _sample_rss(run: Path, peaks: dict[str, float]) -> None:
    """Fold the peak RSS (VmHWM, MiB) of this run's live worker processes into `peaks`, per phase.

    Read from /proc (the local Slurm runs on this machine; its accounting gathers no MaxRSS)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            if "sgsbatch.scheduling.worker" not in argv or str(run) not in argv:
                continue
            i = argv.index("sgsbatch.scheduling.worker")
            phase = argv[i + 3] + (" rank" if "--rank" in argv else "")
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peaks[phase] = max(peaks.get(phase, 0.0), round(int(line.split()[1]) / 1024, 1))
        except (OSError, IndexError, ValueError):
            continue


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--targets", type=int, default=3000)
    ap.add_argument("--shard-divisor", type=int, default=1)
    ap.add_argument("--data", type=Path, default=D3K)
    ap.add_argument("--runs-dir", type=Path, default=REPO / "bench" / "out" / "rehearsal-runs")
    ap.add_argument("--name", default=f"rehearsal-{time.strftime('%Y%m%d-%H%M%S')}")
    a = ap.parse_args()
    sets = [f"run.runs_dir={a.runs_dir}", f"run.name={a.name}", "run.executor=slurm", f"run.rounds={a.rounds}",
            f"data.source={a.data}", f"data.limit={a.targets}"]
    sets += [f"shards.{k}={max(1, v // a.shard_divisor)}" for k, v in SGS_SHARDS.items()]
    args = ["launch", str(CONFIG), "--rehearse"]
    for s in sets:
        args += ["--set", s]
    t0 = time.time()
    proc = _cli(*args)
    if proc.returncode != 0:
        sys.exit(f"launch failed: {proc.stderr.strip() or proc.stdout.strip()}")
    run = a.runs_dir / a.name
    db = run / "state.db"
    rows: list[dict[str, Any]] = []
    peaks: dict[str, float] = {}
    state, stalled_polls, last_status = "running", 0, 0.0
    status_s = 0.0
    while state not in ("completed", "failed", "cancelled") and stalled_polls < 4:
        time.sleep(0.5)
        _sample_rss(run, peaks)
        if time.time() - last_status < 5:
            continue
        last_status = time.time()
        s0 = time.perf_counter()
        st = _cli("status", a.name, "--runs-dir", str(a.runs_dir), "--json")
        status_s = time.perf_counter() - s0
        state = json.loads(st.stdout)["state"] if st.returncode == 0 else "unreadable"
        stalled_polls = stalled_polls + 1 if state == "stalled" else 0  # a hand-over can look stalled briefly
        for index, _, completed in _rounds(db)[len(rows):]:
            size, widest, where = _tree_size(run)
            since = rows[-1]["completed_at"] if rows else t0  # from the launch, or the previous round's end
            rows.append({"round": index, "round_wall_s": round(completed - since, 1), "completed_at": completed,
                         "db_mb": round(db.stat().st_size / 2**20, 2), "run_dir_mb": round(size / 2**20, 1),
                         "status_s": round(status_s, 2), "largest_dir_entries": widest, "largest_dir": where})
            print(json.dumps(rows[-1]), flush=True)
    result = {"config": str(CONFIG.relative_to(REPO)), "sets": sets, "state": state,
              "total_wall_s": round(time.time() - t0, 1), "rounds": rows, "worker_peak_rss_mib": peaks}
    out = REPO / "bench" / "out" / f"bench_rehearsal-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=1))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
