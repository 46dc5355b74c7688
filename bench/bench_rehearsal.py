"""The full-size rehearsal, measured: jobs/sgs.toml on the local Slurm for N rounds (default 20).

Run by hand (not a test), with the local cluster up (slurm/cluster.sh up) and idle:

    .venv/bin/python bench/bench_rehearsal.py                 # 20 rounds
    .venv/bin/python bench/bench_rehearsal.py --rounds 3 --keep

It launches `sgsbatch launch bench/rehearsal.toml --rehearse --set run.rounds=N` (bench/rehearsal.toml
inherits jobs/sgs.toml and changes only resources and the data path: every shard count, sample
count, time limit and the DAG are the research config's) with SIMULATED generation, verifier and
trainer at zero simulated decode time, so the wall time of a round is the orchestration overhead:
Slurm scheduling, task start-up, reading and writing shard files, ingesting into the database,
TensorBoard, checkpoints hand-over and retention. While it runs it polls every `--poll` seconds:

    per round   wall time (completion of round r - completion of round r-1; round 0 from launch),
                state database size (+ WAL), run directory size without checkpoints/, checkpoints/
                (the tiny files written and the size a real checkpoint would have, as recorded)
    status      `sgsbatch status RUN` and `status RUN --json` wall time and peak RSS (a child
                process each, so Python start-up is included), sampled while a 64-shard phase
                has unfinished shards, and after the last round; the floor is `python -c pass`
                timed the same way in the same run
    controller  peak RSS of the status calls, and of the round-ending train task (sacct MaxRSS,
                where accounting records it)
    files       the largest number of entries in one directory of the run, at the end

Growth: mean wall time of rounds 1-3 against rounds N-3..N-1 (round 0 carries init and is left
out), and the per-round database and run-directory growth extrapolated linearly to 200 rounds.
Results: bench/out/bench_rehearsal-<timestamp>.json and a summary on stdout. Only this run's jobs
are ever cancelled (by `sgsbatch cancel` on error or Ctrl-C).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PY = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
SGSBATCH = [PY, "-m", "sgsbatch.cli"]
CONFIG = REPO / "bench" / "rehearsal.toml"


def dir_size(path: Path, skip: str | None = None) -> int:
    total = 0
    for root, dirs, files in os.walk(path):
        if skip is not None and Path(root) == path:
            dirs[:] = [d for d in dirs if d != skip]
        for f in files:
            with contextlib.suppress(OSError):  # removed while we walked (a shard's temporary file)
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def largest_dir(path: Path) -> tuple[int, str]:
    best = (0, "")
    for root, dirs, files in os.walk(path):
        best = max(best, (len(dirs) + len(files), os.path.relpath(root, path)))
    return best


def timed(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB of the child, exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(after, before) / 1024.0, proc.returncode


def status_json(runs_dir: Path, name: str) -> dict[str, Any]:
    proc = subprocess.run([*SGSBATCH, "status", name, "--runs-dir", str(runs_dir), "--json"],
                          capture_output=True, text=True)
    try:
        data: dict[str, Any] = json.loads(proc.stdout)
        return data
    except ValueError:
        return {"state": "unknown", "message": proc.stderr.strip()[-300:]}


def rounds_completed(db: Path) -> list[tuple[int, float]]:
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return [(int(i), float(t)) for i, t in con.execute(
            "select \"index\", completed_at from rounds where state = 'completed' order by \"index\"")]
    finally:
        con.close()


def unfinished_big_phase(run: Path, r: int) -> str | None:
    """A phase of round r with 64 shards of which some are unfinished (its shard files say so)."""
    for phase in ("verify",):
        d = run / "rounds" / f"r{r:04d}" / phase
        if d.is_dir() and len(list(d.glob("shard_*.done"))) < 64:
            return phase
    return None


def sacct_maxrss_mib(run_name: str, since: float) -> dict[str, float]:
    start = datetime.fromtimestamp(since).strftime("%Y-%m-%dT%H:%M:%S")
    proc = subprocess.run(["sacct", "-n", "-P", "-S", start, "-o", "JobName,MaxRSS"], capture_output=True, text=True)
    out: dict[str, float] = {}
    last = ""
    for line in proc.stdout.splitlines():
        name, rss = (line.split("|") + [""])[:2]
        if name.startswith(f"sgs.{run_name}."):
            last = name.rsplit(".", 1)[1]
            continue
        if rss and last:
            units = {"K": 1 / 1024, "M": 1.0, "G": 1024.0}
            v = float(rss[:-1]) * units.get(rss[-1], 1 / 1024 / 1024) if rss[-1] in units else float(rss) / 2**20
            out[last] = max(out.get(last, 0.0), v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--poll", type=float, default=2.0)
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    ap.add_argument("--limit-s", type=float, default=4 * 3600, help="give up (and cancel) after this long")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_rehearsal-"))
    runs = tmp / "runs"
    floor = [timed([PY, "-c", "pass"])[0] for _ in range(3)]
    t_launch = time.time()
    launch = subprocess.run([*SGSBATCH, "launch", str(CONFIG), "--rehearse", "--set", f"run.rounds={args.rounds}",
                             "--set", f"run.runs_dir={runs}"], capture_output=True, text=True)
    print(launch.stdout + launch.stderr, flush=True)
    if launch.returncode != 0:
        return 1
    run = next(p for p in runs.iterdir() if p.is_dir())
    name = run.name
    db = run / "state.db"
    per_round: dict[int, dict[str, Any]] = {}
    status_live: list[dict[str, float]] = []
    try:
        while True:
            time.sleep(args.poll)
            st = status_json(runs, name)
            done = rounds_completed(db) if db.exists() else []
            for r, t_done in done:
                if r not in per_round:
                    prev = per_round.get(r - 1, {}).get("completed_at", t_launch)
                    per_round[r] = {"completed_at": t_done, "wall_s": t_done - prev,
                                    "db_bytes": sum(p.stat().st_size for p in run.glob("state.db*")),
                                    "run_dir_bytes_no_ckpt": dir_size(run, skip="checkpoints"),
                                    "checkpoints_bytes": dir_size(run / "checkpoints")}
                    print(f"round {r}: {per_round[r]['wall_s']:.1f} s, db {per_round[r]['db_bytes'] / 2**20:.1f} MiB, "
                          f"run dir {per_round[r]['run_dir_bytes_no_ckpt'] / 2**20:.1f} MiB", flush=True)
            cur = len(done)
            if len(status_live) < 10 and cur < args.rounds and unfinished_big_phase(run, cur):
                w_h, rss_h, _ = timed([*SGSBATCH, "status", name, "--runs-dir", str(runs)])
                w_j, rss_j, _ = timed([*SGSBATCH, "status", name, "--runs-dir", str(runs), "--json"])
                status_live.append({"round": cur, "human_s": w_h, "json_s": w_j, "rss_mib": max(rss_h, rss_j)})
            if st.get("state") in ("completed", "failed", "cancelled", "stalled"):
                break
            if time.time() - t_launch > args.limit_s:
                print("limit reached: cancelling", flush=True)
                break
    except KeyboardInterrupt:
        pass
    finally:
        if status_json(runs, name).get("state") not in ("completed", "failed", "cancelled"):
            subprocess.run([*SGSBATCH, "cancel", name, "--runs-dir", str(runs)], capture_output=True, text=True)
    end_status = [timed([*SGSBATCH, "status", name, "--runs-dir", str(runs), *extra])
                  for extra in ([], ["--json"]) for _ in range(3)]
    walls = [per_round[r]["wall_s"] for r in sorted(per_round)]
    n = len(walls)
    early = walls[1:4] if n >= 4 else walls[1:]
    late = walls[-3:] if n >= 7 else walls[-1:]
    growth = (statistics.mean(late) / statistics.mean(early)) if early and late else None
    per_db = [per_round[r]["db_bytes"] for r in sorted(per_round)]
    per_dir = [per_round[r]["run_dir_bytes_no_ckpt"] for r in sorted(per_round)]

    def to_200(xs: list[int]) -> float | None:
        if len(xs) < 3:
            return None
        step = (xs[-1] - xs[1]) / (len(xs) - 2)  # per round, round 0 (init, targets) left out
        return xs[-1] + step * (200 - len(xs))

    result = {
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "rounds_requested": args.rounds, "rounds_completed": n, "final_status": status_json(runs, name),
        "per_round": per_round, "wall_s": walls, "growth_late_over_early": growth,
        "python_floor_s": statistics.median(floor),
        "status_while_64_shards": status_live,
        "status_after": {"human_s": statistics.median(x[0] for x in end_status[:3]),
                         "json_s": statistics.median(x[0] for x in end_status[3:]),
                         "rss_mib": max(x[1] for x in end_status)},
        "train_task_maxrss_mib": sacct_maxrss_mib(name, t_launch),
        "db_bytes_200_rounds": to_200(per_db), "run_dir_no_ckpt_bytes_200_rounds": to_200(per_dir),
        "largest_dir": largest_dir(run),
    }
    out = REPO / "bench" / "out" / f"bench_rehearsal-{datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({k: v for k, v in result.items() if k != "per_round"}, indent=1, default=str))
    print(f"written: {out}")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"kept: {tmp}")
    return 0 if n == args.rounds else 1


if __name__ == "__main__":
    sys.exit(main())
