"""SIGUSR2 as a task starts: how many tasks it killed, and whether the job script's requeue saves them.

Run by hand (not a test), with the local cluster up (slurm/cluster.sh up) and preferably idle:

    .venv/bin/python bench/bench_signal_window.py [--jobs 24] [--max-delay-ms 40]

Each job is what sgsbatch submits (submitit, `scheduling/slurm._parameters_for` of jobs/tiny.toml's
init phase, `python_command`), running a trivial function. A `setup` line of its job script starts
`scancel --signal=USR2` (the steps only, as a preemption's user signal or the time-limit warning
reach them) in the background d ms before `srun` starts the task, d spread evenly over
0..--max-delay-ms, so some signals land before the task step exists (lost), some in its first
milliseconds (before its shell's `trap`) and the rest after (ignored or handled). Two variants,
--jobs each: `bare` (the job script without `early_signal_requeue`, as before issue 28) and
`requeue` (as submitted now). Per variant: jobs whose task died of SIGUSR2 (srun's status 140;
counted from sacct's ExitCode 0:12 / the script's message), and their end: COMPLETED (after a
requeue) or FAILED (what left a run's dependent jobs waiting for a person).
Measured results: bench/README.md.

Results go to bench/out/bench_signal_window-<timestamp>.json. Only jobs this script submitted are
cancelled (by id) if it is interrupted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sgsbatch.config.loading import load_config  # noqa: E402
from sgsbatch.scheduling.slurm import _parameters_for, python_command  # noqa: E402


def _final(job_id: str) -> tuple[str, int]:
    """(final state, requeued runs) from sacct -D, once the job no longer runs again."""
    while True:
        out = subprocess.run(["sacct", "-n", "-P", "-X", "-D", "-j", job_id, "-o", "State"],
                             capture_output=True, text=True).stdout.split()
        if out and out[-1] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"):
            return out[-1], sum(x.startswith("REQUEUED") for x in out)
        time.sleep(1)


def run_variant(name: str, jobs: int, max_delay_ms: float, root: Path) -> dict[str, Any]:
    import submitit

    cfg = load_config(REPO / "jobs" / "tiny.toml")
    submitted = []
    try:
        for i in range(jobs):
            d = max_delay_ms * i / max(1, jobs - 1) / 1000.0
            params = _parameters_for(cfg, 0, "init", 1, None)
            if name == "bare":
                params.pop("teardown")
            # only the first run of a job is signalled (a requeued run starts clean)
            params["setup"] = ['if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then '
                               f'(sleep {d:.4f}; scancel --signal=USR2 "$SLURM_JOB_ID") & fi']
            ex = submitit.SlurmExecutor(folder=root / name / "%j", max_num_timeout=0, python=python_command())
            ex.update_parameters(**params)
            submitted.append((d, ex.submit(abs, 0)))  # a builtin: nothing of this script is unpickled
        rows: list[dict[str, Any]] = []
        for d, job in submitted:
            state, requeues = _final(job.job_id)
            log = next((root / name / job.job_id).glob("*_log.out"), None)
            died = log is not None and "died of SIGUSR2" in log.read_text(errors="replace")
            code = subprocess.run(["sacct", "-n", "-P", "-X", "-D", "-j", job.job_id, "-o", "ExitCode"],
                                  capture_output=True, text=True).stdout.split()
            rows.append({"delay_ms": round(d * 1000, 2), "job": job.job_id, "state": state, "requeues": requeues,
                         "died_of_usr2": died or bool({"0:12", "140:0"} & set(code)), "exit_codes": code})
    except BaseException:
        subprocess.run(["scancel", *[j.job_id for _, j in submitted]], capture_output=True)
        raise
    return {"variant": name, "jobs": jobs, "died_of_usr2": sum(r["died_of_usr2"] for r in rows),
            "failed": sum(r["state"] != "COMPLETED" for r in rows),
            "completed_after_requeue": sum(r["state"] == "COMPLETED" and r["requeues"] > 0 for r in rows),
            "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=24)
    ap.add_argument("--max-delay-ms", type=float, default=40.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sigwin-") as tmp:
        results = [run_variant(v, args.jobs, args.max_delay_ms, Path(tmp)) for v in ("bare", "requeue")]
    for r in results:
        print(f"{r['variant']:8} jobs {r['jobs']}: task killed by SIGUSR2 {r['died_of_usr2']}, "
              f"FAILED {r['failed']}, completed after a requeue {r['completed_after_requeue']}")
    out = REPO / "bench" / "out" / f"bench_signal_window-{datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
