"""A rollout run as a chain of phase jobs against the colocated rollout job (solver.colocated_steps), end to end.

The same run twice on the local executor: `--config` (default jobs/tiny-vllm.toml: vLLM's CPU build; or
jobs/tiny.toml: the transformers backend) in GRPO's rollout regime, `--rounds` rollout steps of 4 prompts x 4
samples, updates of 8 ("recompute" old log-probs):
  chain      every round its phase jobs (an engine started each round, a process per task)
  colocated  solver.colocated_steps = rounds: one job, its engine updated in place each step
Reported: each run's wall clock from `launch --wait` to its end, the ratio chain / colocated (the floor is the
colocated run, measured in the same invocation), whether the two runs' attempts, verdicts, stores and
training steps are equal (they must be: exit status 1 if not), and the job's in-place update times.

    .venv/bin/python bench/bench_colocated.py                          # tiny-vllm, 3 rounds (~3 min here)
    .venv/bin/python bench/bench_colocated.py --config jobs/tiny.toml  # transformers backend

Not covered: GPUs (vLLM's sleep mode, tensor parallelism over the job's GPUs), Slurm's queue waits (the
local executor has none: on a cluster the chain also waits in the queue at each hand-over, which `plan`
counts), a trainer kept across steps (not built: the job trains each step as a train job does).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ROLLOUT = ("run.executor=local", "conjecturer.enabled=false", "solver.objective=grpo", "solver.rollout_prompts=4",
           "solver.samples=4", "solver.batch_size=8", "train.old_logprobs=recompute")
QUERIES = {
    "attempts": "SELECT round, problem_id, sample, verdict, proof FROM attempts ORDER BY round, problem_id, sample",
    "store": "SELECT problem_id, slot, round, sample FROM stored_proofs ORDER BY problem_id, slot",
    "steps": "SELECT round, role, steps, sequences FROM checkpoints ORDER BY round, role",
}


def run(config: Path, runs: Path, name: str, rounds: int, *sets: str) -> float:
    args = [sys.executable, "-m", "sgsbatch.cli", "launch", str(config)]
    for o in (f"run.runs_dir={runs}", f"run.name={name}", f"run.rounds={rounds}", *ROLLOUT, *sets):
        args += ["--set", o]
    t0 = time.perf_counter()
    proc = subprocess.run([*args, "--wait"], capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stdout}\n{proc.stderr}")
    return time.perf_counter() - t0


def outcome(run_dir: Path) -> dict[str, Any]:
    con = sqlite3.connect(run_dir / "state.db")
    try:
        return {k: con.execute(q).fetchall() for k, q in QUERIES.items()}
    finally:
        con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, default=REPO / "jobs" / "tiny-vllm.toml")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-colocated-") as tmp:
        runs = Path(tmp)
        chain = run(a.config, runs, "chain", a.rounds)
        colo = run(a.config, runs, "colo", a.rounds, f"solver.colocated_steps={a.rounds}")
        same = outcome(runs / "chain") == outcome(runs / "colo")
        job = runs / "colo" / "rounds" / "r0000" / "rollout"
        while not (job / "shard_00000.done").exists():  # the job writes its marker after the run's last round ends
            time.sleep(0.2)
        updates = json.loads((job / "shard_00000.jsonl").read_text().splitlines()[-1])["weight_updates_s"]
    print(json.dumps({"config": a.config.name, "rounds": a.rounds, "chain_s": round(chain, 1),
                      "colocated_s": round(colo, 1), "chain_over_colocated": round(chain / colo, 2),
                      "same_outcome": same, "weight_updates_s": [round(x, 3) for x in updates]}))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
