"""Pool overhead per proof: the REPL pool with a stand-in REPL that answers at once (no Lean).

For 1, 2 and 16 processes: N proofs through `LeanVerifier` (static checks + pool + verdict rules),
each proof a full round trip as with Lean (statement reference once per theorem and process, the
proof, the axiom audit). Reported per proof: the CPU time of this (the pool's) process, which is
the overhead outside the REPL processes, and the wall time (throughput; on a machine with fewer
cores than processes the stand-ins compete with the pool for CPU). Target: < 2 ms CPU per proof.

    .venv/bin/python bench/bench_pool.py [--proofs 2000] [--processes 1 2 16]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

from sgsbatch.config.schema import VerificationConfig
from sgsbatch.verification.lean import LeanVerifier
from sgsbatch.verification.verdict import ProofJob

FAKE = Path(__file__).resolve().parents[1] / "tests" / "lean" / "fake_repl.py"
PROOF = "\n  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b), mul_pos ha hb]  -- a typical proof"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(processes: int, proofs: int) -> dict[str, float]:
    cfg = VerificationConfig(repl_command=(sys.executable, str(FAKE)), project_dir=str(FAKE.parent),
                             memory_limit_mb=0, max_proofs_per_process=10**9, sandbox="none")
    jobs = [ProofJob(str(i), "import Mathlib", f"theorem t{i // 8} (a b : ℝ) (ha : 0 < a) (hb : 0 < b) : "
                     "a * b > 0 := by", PROOF) for i in range(proofs)]
    verifier = LeanVerifier(cfg, processes=processes)
    try:  # warm up: start the processes and elaborate the header
        list(verifier.verify_stream(jobs[: processes * 2]))
        cpu0, wall0 = _cpu(), time.perf_counter()
        n = sum(1 for _, v, _ in verifier.verify_stream(jobs) if v.verdict == "verified")
        cpu, wall = _cpu() - cpu0, time.perf_counter() - wall0
    finally:
        verifier.close()
    assert n == proofs, f"only {n}/{proofs} verified"
    return {"processes": processes, "proofs": proofs, "cpu_ms_per_proof": 1000 * cpu / proofs,
            "wall_ms_per_proof": 1000 * wall / proofs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proofs", type=int, default=2000)
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2, 16])
    args = ap.parse_args()
    print(f"machine: {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}")
    for p in args.processes:
        r = run(p, args.proofs)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}))


if __name__ == "__main__":
    main()
