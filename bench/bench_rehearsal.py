"""Rehearsal benchmark: jobs/sgs.toml rehearsed (`launch --rehearse`) on the local Slurm for N rounds.

Run by hand (not a test), with the repository's local Slurm up (slurm/cluster.sh):

    .venv/bin/python bench/bench_rehearsal.py                         # 20 rounds, all 3,323 targets
    .venv/bin/python bench/bench_rehearsal.py --rounds 3 --targets 300 --shard-divisor 8

The config is bench/rehearsal.toml (jobs/sgs.toml with only the resources changed for a GPU-less
node); generation, verifier and trainer are SIMULATED. The data is the local copy of D_3k
(`--data`, the hub is not assumed reachable) limited to `--targets`; `--shard-divisor` divides
jobs/sgs.toml's shard counts (1 = as written). Per completed round it records: the round's wall
time (from the launch or the previous round's completion to its completion in the database), the database and run-directory sizes, the wall
time of `sgsbatch status RUN --json` (a subprocess, Python start-up included), and the largest
directory's entry count in the run directory. Throughout: the peak RSS (VmHWM from /proc, sampled
every 0.5 s) of each phase's worker processes; the train job's is the controller's (it ingests the
round, ends it and submits the next), its ranks are listed apart, and per round the train job's
peak (the controller's memory as the run grows), and the mean 1-minute load average during the
round (the machine is shared: a loaded round is slower for reasons of its own). Per round also each phase's wall time from the
metrics table, the slowest `status --json` seen while the verify array ran, and the bytes the solve
phase wrote (`solve_written_mib`: the largest size of the round's solve directory seen, temp files
left out; its files are written once and only the round's compaction shrinks them).

The floor, measured in the same run before the rehearsal (`--floor-repeats`, 0 = skip): the same
round as a bare Slurm DAG, the same arrays and dependencies (conjecture -> solve -> verify ->
guide -> train, as many tasks as the rehearsal's round >= 1) of `sbatch --wrap true` jobs, 1 CPU
each; its wall time is from releasing the held first job to the train job's end. A round's
`vs_floor` is its wall time over the floor's median: what sgsbatch's work (simulated engines,
shard files, ingestion, status, the next submission) adds to Slurm's own scheduling.
Results go to bench/out/bench_rehearsal-<timestamp>.json and are printed as a table.
`--set KEY=VALUE` passes more config keys (e.g. `verification.streaming=false`, to compare).
`--time-scale S` sets `projection.simulated_time_scale` (the SIMULATED parts sleep the projection's
times x S); the result then also holds `sgsbatch timeline`'s critical path of every round (printed
at the end). Not covered: real generation, Lean or training (all simulated).
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


def bare_round(tmp: Path, counts: dict[str, int], timeout: float = 1800) -> float:
    """Wall seconds of one bare DAG shaped like a rehearsal round (see the module docstring)."""
    tmp.mkdir(parents=True, exist_ok=True)
    end = tmp / "end"
    end.unlink(missing_ok=True)
    ids: list[str] = []
    for phase in ("conjecture", "solve", "verify", "guide", "train"):
        n = counts.get(phase, 1)
        cmd = ["sbatch", "--parsable", f"--job-name=floor.{phase}", "-c", "1", "--mem=100M", "-o", "/dev/null"]
        cmd += [f"--array=0-{n - 1}"] if phase != "train" else []
        cmd += [f"--dependency=afterok:{ids[-1]}"] if ids else ["--hold"]
        wrap = f"date +%s.%N > {end}" if phase == "train" else "true"
        ids.append(subprocess.run([*cmd, "--wrap", wrap], capture_output=True, text=True, check=True)
                   .stdout.strip().split(";")[0])
    t0 = time.time()
    subprocess.run(["scontrol", "release", ids[0]], check=True, capture_output=True)
    while not end.exists() or not end.read_text().strip():
        if time.time() - t0 > timeout:
            subprocess.run(["scancel", *ids], capture_output=True)
            raise RuntimeError(f"the bare DAG did not finish within {timeout:.0f} s")
        time.sleep(0.2)
    return float(end.read_text()) - t0


def _phase_walls(db: Path, r: int) -> dict[str, float]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {n.split("/", 1)[1]: round(v, 1) for n, v in con.execute(
            "SELECT name, value FROM metrics WHERE round = ? AND name LIKE 'wall_s/%'", (r,))}
    finally:
        con.close()


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


def _dir_bytes(d: Path) -> int:
    total = 0
    with contextlib.suppress(FileNotFoundError):
        for f in os.scandir(d):
            with contextlib.suppress(FileNotFoundError):
                if f.is_file(follow_symlinks=False) and not f.name.startswith("."):  # not a temp file being renamed
                    total += f.stat(follow_symlinks=False).st_size
    return total


def _sample_solve_bytes(run: Path, seen: dict[int, int]) -> None:
    """Fold each round's solve directory size into `seen` (the largest seen: its files are written once and
    only compaction, after the round's training, shrinks them, so that is what the solve phase wrote)."""
    for d in sorted((run / "rounds").glob("r*/solve"))[-2:]:
        r = int(d.parent.name[1:])
        seen[r] = max(seen.get(r, 0), _dir_bytes(d))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--targets", type=int, default=0, help="0 = all of D_3k (3,323)")
    ap.add_argument("--shard-divisor", type=int, default=1)
    ap.add_argument("--data", type=Path, default=D3K)
    ap.add_argument("--runs-dir", type=Path, default=REPO / "bench" / "out" / "rehearsal-runs")
    ap.add_argument("--name", default=f"rehearsal-{time.strftime('%Y%m%d-%H%M%S')}")
    ap.add_argument("--floor-repeats", type=int, default=3, help="bare DAGs timed before the run (0 = none)")
    ap.add_argument("--time-scale", type=float, default=0.0,
                    help="projection.simulated_time_scale: the SIMULATED parts sleep the projection's times x this")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for the rehearsed run (repeatable), e.g. solver.objective=grpo")
    a = ap.parse_args()
    counts = {k: max(1, v // a.shard_divisor) for k, v in SGS_SHARDS.items()}
    floors = [bare_round(a.runs_dir / "floor", counts) for _ in range(a.floor_repeats)]
    floor = sorted(floors)[len(floors) // 2] if floors else None
    if floors:
        print(json.dumps({"floor_round_s": [round(x, 2) for x in floors], "median": round(floor or 0, 2)}), flush=True)
    sets = [f"run.runs_dir={a.runs_dir}", f"run.name={a.name}", "run.executor=slurm", f"run.rounds={a.rounds}",
            f"data.source={a.data}", f"data.limit={a.targets}", f"projection.simulated_time_scale={a.time_scale}"]
    sets += [f"shards.{k}={v}" for k, v in counts.items()] + a.set
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
    solve_bytes: dict[int, int] = {}
    state, stalled_polls, last_status = "running", 0, 0.0
    status_s, verify_status_s, round_peak, loads = 0.0, 0.0, 0.0, []
    while state not in ("completed", "failed", "cancelled") and stalled_polls < 4:
        time.sleep(0.5)
        _sample_rss(run, peaks)
        _sample_solve_bytes(run, solve_bytes)
        round_peak = max(round_peak, peaks.get("train", 0.0))
        loads.append(os.getloadavg()[0])
        if time.time() - last_status < 5:
            continue
        last_status = time.time()
        s0 = time.perf_counter()
        st = _cli("status", a.name, "--runs-dir", str(a.runs_dir), "--json")
        status_s = time.perf_counter() - s0
        doc = json.loads(st.stdout) if st.returncode == 0 else {}
        state = doc.get("state", "unreadable")
        if doc.get("phase") == "verify":
            verify_status_s = max(verify_status_s, status_s)
        stalled_polls = stalled_polls + 1 if state == "stalled" else 0  # a hand-over can look stalled briefly
        for index, _, completed in _rounds(db)[len(rows):]:
            size, widest, where = _tree_size(run)
            since = rows[-1]["completed_at"] if rows else t0  # from the launch, or the previous round's end
            wall = completed - since
            rows.append({"round": index, "round_wall_s": round(wall, 1), "completed_at": completed,
                         "vs_floor": round(wall / floor, 2) if floor else None,
                         "db_mb": round(db.stat().st_size / 2**20, 2), "run_dir_mb": round(size / 2**20, 1),
                         "status_s": round(status_s, 2), "status_s_during_verify": round(verify_status_s, 2),
                         "train_peak_rss_mib": round_peak,
                         "solve_written_mib": round(solve_bytes.get(index, 0) / 2**20, 1), "phase_wall_s": _phase_walls(db, index),
                         "mean_load_1m": round(sum(loads) / max(len(loads), 1), 2),
                         "largest_dir_entries": widest, "largest_dir": where})
            verify_status_s, round_peak, loads = 0.0, 0.0, []
            peaks.pop("train", None)
            print(json.dumps(rows[-1]), flush=True)
    if rows:
        peaks["train"] = max(r["train_peak_rss_mib"] for r in rows)
    tl = _cli("timeline", a.name, "--runs-dir", str(a.runs_dir), "--json")
    result = {"config": str(CONFIG.relative_to(REPO)), "sets": sets, "state": state, "floor_round_s": floors,
              "total_wall_s": round(time.time() - t0, 1), "rounds": rows, "worker_peak_rss_mib": peaks,
              "timeline": json.loads(tl.stdout) if tl.returncode == 0 else tl.stderr.strip()}
    out = REPO / "bench" / "out" / f"bench_rehearsal-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=1))
    print(_cli("timeline", a.name, "--runs-dir", str(a.runs_dir)).stdout)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
