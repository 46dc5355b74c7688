"""Phase-to-phase latency on the local Slurm: a bare sbatch dependency chain vs an sgsbatch run.

Run by hand (not a test), with the local cluster up (slurm/cluster.sh up) and preferably idle:

    .venv/bin/python bench/bench_latency.py                  # bare chain of 8 + tiny run of 2 rounds
    .venv/bin/python bench/bench_latency.py --k 12 --rounds 3
    .venv/bin/python bench/bench_latency.py --skip-sgs       # bare chain only

(a) Bare chain: K no-op `sbatch --wrap` jobs (1 cpu, 100M), job i+1 `--dependency=afterok:<job i>`,
    the first one submitted `--hold` and released once all are queued (so every hand-over is a
    real dependency release, not a submission racing a finished job). Each job writes
    `date +%s.%N` at its start and end. Latency = start(i+1) - end(i).
(b) sgsbatch chain: `sgsbatch launch jobs/tiny.toml --wait` with run.rounds=2 (--rounds), one
    conjecture and one solve shard, 2 samples, in a temporary runs dir. Hand-over latency of
    phase P -> next phase Q = earliest `.pid` mtime of Q's shards - latest `"time"` in P's
    `shard_*.done` markers: from the moment P's last worker finished its work to the moment the
    task supervisor of Q started Q's first worker. The `.pid` file is written once per worker
    start, right after Popen (an `.attempt.log` mtime moves while the worker logs, so it is not
    a start time). It leaves out Q's own worker start-up (python -m sgsbatch.scheduling.worker importing
    torch and the phase), which is reported separately as an import time. The hand-over from
    one round's train to the next round's first phase is not a dependency hand-over (train
    submits the next round without a dependency before it writes its marker) and is reported
    apart, not in the median.

Where the time goes, per hand-over, from timestamps with millisecond resolution:
    done -> exit    P's .done marker -> P's submitit log "Job completed successfully"
                    (worker process exit + supervisor return)
    exit -> end     -> slurmctld.log "_job_complete: JobId=P done"  (submitit/python exit, srun, epilog)
    slurm           -> slurmctld.log "Allocate/Started JobId=Q"    (dependency release + scheduling)
    launch          -> Q's submitit log "Starting with JobEnvironment" (slurmd, batch script, srun step,
                       python start-up, import submitit)
    unpickle+spawn  -> Q's .pid mtime (unpickling slurm_task imports sgsbatch.scheduling.supervisor,
                       supervisor checks, Popen)
The bare chain gets the same slurm column. slurmctld.log is read from /var/lib/sgsbatch-slurm/log
(--slurmctld-log); lines before this benchmark started are ignored (job ids restart when the
cluster is re-created). Python start-up costs are also timed directly (`python -c 'import X'`).

Results go to bench/out/bench_latency-<timestamp>.json; temporary directories are removed unless
--keep is given. Only jobs this script submitted are ever cancelled (by id).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
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
SGSBATCH = str(Path(PY).with_name("sgsbatch"))
CTLD_RE = re.compile(r"^\[(\S+)\] (.*)$")
JOBID_RE = re.compile(r"JobId=(\d+)(?:_(\d+))?(?:\((\d+)\))?")


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def sh(cmd: list[str], timeout: float = 60) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def other_jobs(mine: set[str]) -> list[str]:
    try:
        out = sh(["squeue", "-h", "-o", "%i %j %T"])
    except (RuntimeError, subprocess.TimeoutExpired):
        return ["(squeue failed)"]
    return [line for line in out.splitlines() if line.split()[0].split("_")[0] not in mine]


def wait_idle(timeout: float) -> list[str]:
    """Wait until squeue shows no job; returns what was still there at the deadline."""
    deadline = time.time() + timeout
    busy = other_jobs(set())
    while busy and time.time() < deadline:
        print(f"  waiting for an idle cluster: {len(busy)} job(s) in squeue", flush=True)
        time.sleep(10)
        busy = other_jobs(set())
    return busy


# --- slurmctld log ---------------------------------------------------------------------------


def ctld_events(log: Path, since: float) -> dict[str, dict[str, float]]:
    """{array or job id: {"start": earliest allocation, "done": latest completion}} from slurmctld.log."""
    out: dict[str, dict[str, float]] = {}
    if not log.exists():
        return out
    for line in log.read_text(errors="replace").splitlines():
        m = CTLD_RE.match(line)
        if not m:
            continue
        try:
            t = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
        except ValueError:
            continue
        if t < since:
            continue
        msg = m.group(2)
        kind = ("start" if ("sched: Allocate JobId=" in msg or "Started JobId=" in msg)
                else "done" if "_job_complete: JobId=" in msg and msg.endswith(" done") else None)
        if kind is None:
            continue
        jm = JOBID_RE.search(msg)
        if not jm:
            continue
        ev = out.setdefault(jm.group(1), {})
        if kind == "start":
            ev["start"] = min(ev.get("start", t), t)
        else:
            ev["done"] = max(ev.get("done", t), t)
    return out


def sacct_intervals(since: float) -> list[tuple[str, str, float, float, str]]:
    """(job id, name, start, end, state) of every job (instance) since `since`; 1-s resolution."""
    try:
        out = sh(["sacct", "-a", "-X", "-D", "-n", "-P", "-S", time.strftime("%Y-%m-%dT%H:%M:%S",
                                                                            time.localtime(since - 60)),
                  "-o", "JobID,JobName,Start,End,State"])
    except (RuntimeError, subprocess.TimeoutExpired):
        return []
    rows = []
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) != 5 or parts[2] in ("", "Unknown", "None"):
            continue
        start = datetime.strptime(parts[2], "%Y-%m-%dT%H:%M:%S").timestamp()
        end = time.time() if parts[3] in ("", "Unknown", "None") else \
            datetime.strptime(parts[3], "%Y-%m-%dT%H:%M:%S").timestamp()
        rows.append((parts[0], parts[1], start, end, parts[4]))
    return rows


def others_during(rows: list[tuple[str, str, float, float, str]], mine: str, a: float, b: float) -> list[str]:
    """Jobs not named `mine`* that ran at some point in [a, b] (one-second slack on both sides)."""
    lo, hi = a - 1.0, b + 1.0
    return sorted({f"{jid} {name}" for jid, name, st, en, _ in rows
                   if not name.startswith(mine) and st <= hi and en >= lo})


def requeues(rows: list[tuple[str, str, float, float, str]], mine: str) -> list[str]:
    return sorted({f"{jid} {name}" for jid, name, _, _, state in rows if name.startswith(mine)
                   and state.startswith(("REQUEUED", "PREEMPTED", "NODE_FAIL"))})


# --- python start-up --------------------------------------------------------------------------


def import_times(repeats: int) -> dict[str, float | None]:
    probes = {"python -c pass": "pass", "import submitit": "import submitit",
              "import sgsbatch.scheduling.supervisor": "import sgsbatch.scheduling.supervisor",
              "import sgsbatch.scheduling.worker": "import sgsbatch.scheduling.worker",
              "import torch": "import torch", "import torch, transformers": "import torch, transformers",
              "import sgsbatch.phases.train": "import sgsbatch.phases.train"}
    res: dict[str, float | None] = {}
    for name, code in probes.items():
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            subprocess.run([PY, "-c", code], capture_output=True, cwd=REPO, check=True)
            ts.append(time.perf_counter() - t0)
        res[name] = median(ts)
        print(f"  {name:<40} {res[name]:.3f} s", flush=True)
    return res


# --- (a) bare chain -----------------------------------------------------------------------------


def bare_chain(tmp: Path, k: int, timeout: float, log: Path, t_begin: float) -> dict[str, Any]:
    d = tmp / "bare"
    d.mkdir()
    ids: list[str] = []
    try:
        for i in range(k):
            cmd = ["sbatch", "--parsable", f"--job-name=benchlat.bare.{i}", "-p", "batch", "-c", "1", "--mem=100M",
                   "-t", "5", "-o", str(d / f"job{i}.out"),
                   "--wrap", f"date +%s.%N > {d}/start.{i}; date +%s.%N > {d}/end.{i}"]
            if i == 0:
                cmd.insert(1, "--hold")
            else:
                cmd.insert(1, f"--dependency=afterok:{ids[-1]}")
            ids.append(sh(cmd).strip().split(";")[0])
        others = other_jobs(set(ids))
        sh(["scontrol", "release", ids[0]])
        deadline = time.time() + timeout
        while not (d / f"end.{k - 1}").exists():
            if time.time() > deadline:
                raise TimeoutError(f"bare chain did not finish in {timeout:.0f} s (jobs {ids})")
            time.sleep(0.5)
    except BaseException:
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True)
        raise
    time.sleep(1.5)  # let slurmctld log the last completion
    start = [float((d / f"start.{i}").read_text()) for i in range(k)]
    end = [float((d / f"end.{i}").read_text()) for i in range(k)]
    ev = ctld_events(log, t_begin)
    acct = sacct_intervals(t_begin)
    hand: list[dict[str, Any]] = []
    for i in range(k - 1):
        a, b = ev.get(ids[i], {}), ev.get(ids[i + 1], {})
        hand.append({"from": ids[i], "to": ids[i + 1], "latency_s": start[i + 1] - end[i],
                     "others": others_during(acct, "benchlat.bare.", end[i], start[i + 1]),
                     "slurm_s": b["start"] - a["done"] if "done" in a and "start" in b else None,
                     "end_to_done_s": a["done"] - end[i] if "done" in a else None,
                     "alloc_to_start_s": start[i + 1] - b["start"] if "start" in b else None})
    lat = [h["latency_s"] for h in hand]
    quiet = [h["latency_s"] for h in hand if not h["others"]]
    return {"k": k, "job_ids": ids, "other_jobs_at_release": others, "handovers": hand, "latency_s": lat,
            "median_uncontended_s": median(quiet), "uncontended": len(quiet),
            "requeued": requeues(acct, "benchlat.bare."),
            "median_s": median(lat), "min_s": min(lat), "max_s": max(lat),
            "slurm_median_s": median([h["slurm_s"] for h in hand if h["slurm_s"] is not None])}


# --- (b) sgsbatch chain -------------------------------------------------------------------------


def submitit_times(folder: Path) -> tuple[float | None, float | None]:
    """(earliest 'Starting with JobEnvironment', latest 'Job completed successfully') in a job's logs."""
    first = last = None
    for f in folder.glob("*/*_log.out"):
        for line in f.read_text(errors="replace").splitlines():
            m = re.match(r"submitit \w+ \((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\) - (.*)", line)
            if not m:
                continue
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if m.group(2).startswith("Starting with JobEnvironment"):
                first = t if first is None else min(first, t)
            elif m.group(2).startswith("Job completed successfully"):
                last = t if last is None else max(last, t)
    return first, last


def sgs_chain(tmp: Path, rounds: int, timeout: float, log: Path, t_begin: float, extra: list[str],
              name: str = "benchlat", env: dict[str, str] | None = None) -> dict[str, Any]:
    runs_dir = tmp / "runs"
    sets = [f"run.rounds={rounds}", f"run.name={name}", f"run.runs_dir={runs_dir}", "run.executor=slurm",
            "shards.solve=1", "shards.conjecture=1", "solver.samples=2", *extra]
    cmd = [SGSBATCH, "launch", "jobs/tiny.toml", *[x for s in sets for x in ("--set", s)], "--wait"]
    print("  $ " + " ".join(cmd), flush=True)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout,
                           env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        _cancel_run(runs_dir, name)
        raise
    wall = time.time() - t0
    if p.returncode != 0:
        _cancel_run(runs_dir, name)
        raise RuntimeError(f"sgsbatch launch failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    time.sleep(1.5)
    sys.path.insert(0, str(REPO))
    from sqlmodel import select

    from sgsbatch.run.handle import open_run
    from sgsbatch.run.shards import Shard
    from sgsbatch.scheduling.slurm import run_tag
    from sgsbatch.state.schema import SlurmJob

    h = open_run(runs_dir, name)
    with h.db.read() as s:
        jobs = {(j.round, j.phase): j.job_id for j in s.exec(select(SlurmJob).where(SlurmJob.active)).all()}
    h.db.close()
    ev = ctld_events(log, t_begin)
    acct = sacct_intervals(t_begin)
    mine = run_tag(name)  # every job name of the run starts with its tag (scheduling/slurm.job_name)
    phases: list[dict[str, Any]] = []
    for r in range(rounds):
        for ph in h.cfg.phases_of_round(r):
            shards = [Shard(h.paths.phase_dir(r, ph), i) for i in range(h.cfg.shard_count(ph))]
            job = jobs.get((r, ph), "")
            sub_start, sub_done = submitit_times(h.paths.slurm / f"r{r:04d}" / ph)
            phases.append({
                "round": r, "phase": ph, "job_id": job,
                "pid_first": min(s.pid_file.stat().st_mtime for s in shards),
                "done_last": max(float(s.meta()["time"]) for s in shards),
                "retries": sum(s.failure_count() for s in shards),
                "submitit_start": sub_start, "submitit_done": sub_done,
                "ctld_start": ev.get(job, {}).get("start"), "ctld_done": ev.get(job, {}).get("done")})
    hand: list[dict[str, Any]] = []
    for a, b in zip(phases, phases[1:], strict=False):
        def diff(x: float | None, y: float | None) -> float | None:
            return y - x if x is not None and y is not None else None

        hand.append({
            "from": f"r{a['round']}.{a['phase']}", "to": f"r{b['round']}.{b['phase']}",
            "dependency": a["round"] == b["round"],
            "latency_s": b["pid_first"] - a["done_last"],
            "others": others_during(acct, mine, a["done_last"], b["pid_first"]),
            "done_to_exit_s": diff(a["done_last"], a["submitit_done"]),
            "exit_to_end_s": diff(a["submitit_done"], a["ctld_done"]),
            "slurm_s": diff(a["ctld_done"], b["ctld_start"]),
            "launch_s": diff(b["ctld_start"], b["submitit_start"]),
            "unpickle_spawn_s": diff(b["submitit_start"], b["pid_first"]),
            "work_prev_s": a["done_last"] - a["pid_first"]})
    dep = [x["latency_s"] for x in hand if x["dependency"]]

    def col(key: str) -> float | None:
        return median([x[key] for x in hand if x["dependency"] and x[key] is not None])

    quiet = [x["latency_s"] for x in hand if x["dependency"] and not x["others"]]
    return {"command": cmd, "launch_wall_s": wall, "launch_stdout": p.stdout[-4000:], "phases": phases,
            "handovers": hand, "median_s": median(dep), "median_uncontended_s": median(quiet),
            "uncontended": len(quiet), "requeued": requeues(acct, mine), "min_s": min(dep) if dep else None,
            "max_s": max(dep) if dep else None,
            "breakdown_median_s": {k: col(k) for k in ("done_to_exit_s", "exit_to_end_s", "slurm_s", "launch_s",
                                                        "unpickle_spawn_s")}}


def _cancel_run(runs_dir: Path, name: str) -> None:
    """Cancel the benchmark run's own jobs (sgsbatch cancel: by the ids in its database)."""
    if (runs_dir / name / "config.toml").exists():
        subprocess.run([SGSBATCH, "cancel", name, "--runs-dir", str(runs_dir)], capture_output=True, cwd=REPO)


# --- main -----------------------------------------------------------------------------------------


def fmt(x: float | None, unit: str = "s") -> str:
    return "-" if x is None else f"{x:.3f} {unit}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, default=8, help="jobs in the bare chain")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the tiny sgsbatch run")
    ap.add_argument("--set", dest="extra", action="append", default=[], help="more --set overrides for the run")
    ap.add_argument("--skip-bare", action="store_true")
    ap.add_argument("--skip-sgs", action="store_true")
    ap.add_argument("--skip-imports", action="store_true")
    ap.add_argument("--what-if-fast-exit", action="store_true",
                    help="also run the tiny chain with bench/whatif/sitecustomize.py: workers skip interpreter "
                         "teardown (os._exit after success); shows what that change would save")
    ap.add_argument("--idle-timeout", type=float, default=300, help="seconds to wait for an empty squeue first")
    ap.add_argument("--timeout", type=float, default=900, help="seconds allowed for each chain")
    ap.add_argument("--slurmctld-log", type=Path, default=Path("/var/lib/sgsbatch-slurm/log/slurmctld.log"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    args = ap.parse_args()
    t_begin = time.time()
    result: dict[str, Any] = {"benchmark": "bench_latency", "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                              "host": platform.node(), "cpus": os.cpu_count(), "args": {k: str(v) for k, v in
                                                                                        vars(args).items()}}
    try:
        conf = sh(["scontrol", "show", "config"])
        result["slurm"] = {k: v for k, v in (ln.split("=", 1) for ln in conf.splitlines() if " = " in ln)
                           if k.strip() in ("SLURM_VERSION", "SchedulerType", "SchedulerParameters", "PrologFlags",
                                            "SlurmctldParameters")}
        result["slurm"] = {k.strip(): v.strip() for k, v in result["slurm"].items()}
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"Slurm does not answer ({e}); start it with slurm/cluster.sh up", file=sys.stderr)
        return 1
    print(f"Slurm {result['slurm'].get('SLURM_VERSION')}: SchedulerParameters={result['slurm'].get('SchedulerParameters')}")
    busy = wait_idle(args.idle_timeout)
    result["other_jobs_at_start"] = busy
    if busy:
        print(f"  warning: {len(busy)} other job(s) in the queue; latencies may include waits for resources")
    tmp = Path(tempfile.mkdtemp(prefix="sgsbench-lat-"))
    print(f"temporary dirs under {tmp}", flush=True)
    try:
        if not args.skip_bare:
            print(f"(a) bare chain of {args.k} sbatch --wrap jobs", flush=True)
            result["bare"] = bare_chain(tmp, args.k, args.timeout, args.slurmctld_log, t_begin)
            print(f"  median {fmt(result['bare']['median_s'])} (slurm part {fmt(result['bare']['slurm_median_s'])})")
        if not args.skip_sgs:
            print(f"(b) sgsbatch chain: jobs/tiny.toml, {args.rounds} rounds", flush=True)
            result["sgs_other_jobs_at_start"] = wait_idle(args.idle_timeout)
            result["sgs"] = sgs_chain(tmp, args.rounds, args.timeout, args.slurmctld_log, t_begin, args.extra)
            print(f"  median {fmt(result['sgs']['median_s'])} ({result['sgs']['launch_wall_s']:.0f} s run)")
        if args.what_if_fast_exit:
            print("(b') what-if: the same chain, workers leaving with os._exit after success", flush=True)
            result["sgs_fast_exit_other_jobs_at_start"] = wait_idle(args.idle_timeout)
            env = {"PYTHONPATH": os.pathsep.join(x for x in (str(REPO / "bench" / "whatif"),
                                                             os.environ.get("PYTHONPATH", "")) if x),
                   "SGSBENCH_FAST_EXIT": "1"}
            result["sgs_fast_exit"] = sgs_chain(tmp, args.rounds, args.timeout, args.slurmctld_log, t_begin,
                                                args.extra, name="benchlatfx", env=env)
            print(f"  median {fmt(result['sgs_fast_exit']['median_s'])}")
        if not args.skip_imports:
            print("python start-up (median of 3)", flush=True)
            result["imports_s"] = import_times(3)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if "bare" in result and "sgs" in result and result["bare"]["median_s"] and result["sgs"]["median_s"] is not None:
        result["ratio"] = result["sgs"]["median_s"] / result["bare"]["median_s"]
        if "sgs_fast_exit" in result and result["sgs_fast_exit"]["median_s"] is not None:
            result["ratio_fast_exit"] = result["sgs_fast_exit"]["median_s"] / result["bare"]["median_s"]
    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"bench_latency-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    report(result)
    print(f"\nresults: {path.relative_to(REPO)}")
    return 0


def report(res: dict[str, Any]) -> None:
    print()
    if "bare" in res:
        b = res["bare"]
        print(f"bare chain ({b['k']} jobs): hand-over median {fmt(b['median_s'])} "
              f"(min {fmt(b['min_s'])}, max {fmt(b['max_s'])}); slurmctld done->start median {fmt(b['slurm_median_s'])}")
        print(f"  hand-overs with another job on the cluster: {len(b['handovers']) - b['uncontended']} of "
              f"{len(b['handovers'])}; median of the others {fmt(b['median_uncontended_s'])}"
              + (f"; REQUEUED: {b['requeued']}" if b["requeued"] else ""))
    for key, title in (("sgs", "sgsbatch hand-overs"),
                       ("sgs_fast_exit", "what-if (NOT the shipped code): workers exit with os._exit")):
        if key not in res:
            continue
        s = res[key]
        cols = ("latency_s", "done_to_exit_s", "exit_to_end_s", "slurm_s", "launch_s", "unpickle_spawn_s")
        heads = ("hand-over", "done->exit", "exit->end", "slurm", "launch", "unpickle+spawn")
        print(f"\n{title} (seconds; dependency hand-overs in the median, * = next round, no dependency)")
        print(f"{'from -> to':<30}" + "".join(f"{h:>15}" for h in heads) + f"{'prev work':>12}{'others':>8}")
        for x in s["handovers"]:
            label = f"{x['from']} -> {x['to']}" + ("" if x["dependency"] else " *")
            print(f"{label:<30}" + "".join(f"{'-' if x[c] is None else format(x[c], '.3f'):>15}" for c in cols)
                  + f"{x['work_prev_s']:>12.2f}{len(x['others']):>8}")
        bd = s["breakdown_median_s"]
        print(f"{'median (dependency)':<30}{fmt(s['median_s'], ''):>15}" + "".join(
            f"{fmt(bd[c], ''):>15}" for c in cols[1:]))
        print(f"  dependency hand-overs with no other job on the cluster: {s['uncontended']}, median "
              f"{fmt(s['median_uncontended_s'])}" + (f"; REQUEUED/PREEMPTED: {s['requeued']}" if s["requeued"] else ""))
    if "ratio" in res:
        print(f"\nsgsbatch / bare median ratio: {res['ratio']:.2f}x (target <= 1.5x)")
    if "ratio_fast_exit" in res:
        print(f"what-if fast exit / bare median ratio: {res['ratio_fast_exit']:.2f}x")
    if "imports_s" in res:
        print("\npython start-up: " + ", ".join(f"{k} {v:.2f} s" for k, v in res["imports_s"].items() if v))


if __name__ == "__main__":
    sys.exit(main())
