"""Real Lean throughput: the REPL pool against one fresh REPL per proof (the reference's way).

The same proofs are checked twice with P processes at a time:

(a) pool: `LeanVerifier(cfg.verification, processes=P)`, what a verify task runs (static checks,
    one REPL per process that elaborates each header once and checks every later proof in that
    environment, the axiom audit and statement comparison, restarts every
    `max_proofs_per_process` proofs, and with `verification.kernel_recheck` the kernel re-check
    of every verified proof). Timed cold: from building the verifier, processes started
    and headers elaborated inside the timing, to the last verdict. With the re-check on, the
    pool runs a second time without it: `recheck_s_per_verified_proof` is the difference in
    process-seconds per verified proof (the checker's own start, `import Mathlib`, included).
(b) fresh: the reference's way. Per proof, start a REPL process (`repl.ReplProcess`, same command,
    project directory and memory limit), send ONE command, the whole file header + theorem +
    proof (`extraction.solver_file`, no env), read the reply, close the process. No reuse, no
    static checks, no audit: verified iff the reply has no error, no sorry and no warning with
    "failed" (`verdicts.proof_failure`). P proofs run at a time on a thread pool, so the two
    modes are compared per core. Timeout per proof: `header_timeout_s + timeout_s`.

Reported: proofs/s and proofs/s per process (= per core when P <= cores), the speedup pool/fresh,
the verdict counts of each mode, and the verdict agreement: every proof must get the same
verdict in both modes; each disagreement is listed (id, both verdicts and reasons). A proof only
the pool's extra rules catch (a cheat the static checks or the axiom audit refuse) is a true
disagreement, not a bench failure. Before timing, one REPL per distinct header elaborates it once
(untimed), so both modes find the `.olean` files in the page cache.

Input: a JSONL of `{id, header, theorem, proof}` (or `{id, code}`) rows, the `sgsbatch verify`
format, or a built-in set (`--builtin core`: Lean-core proofs with an empty header, which run in
`lean/core` or `lean`; `--builtin mathlib`: `import Mathlib` proofs, the realistic case for (b),
whose every proof re-imports Mathlib). `--proofs N` cycles the input to N proofs (default for
the built-in sets: 16 per process). The built-in proofs carry `-- FAKE_*` comments, inert in
Lean, that make the stand-in REPL (tests/lean/fake_repl.py) fail the ones Lean fails, for dry runs.

REPL: `verification.repl_command` / `project_dir` of `--config` (default jobs/sgs.toml, loaded
like `sgsbatch verify --config`; `--set KEY=VALUE` as there), or `--repl-command "PROG ARG..."`
/ `--project-dir DIR`. Without `lake` on PATH and without `--repl-command` it exits with status 2.
Dry run with the stand-in (checks the code path only; the numbers mean nothing):

    .venv/bin/python bench/bench_lean.py --repl-command "$(pwd)/.venv/bin/python tests/lean/fake_repl.py" \\
        --project-dir tests/lean --processes 2 --proofs 32

Real Lean (after ./setup.sh --lean):

    .venv/bin/python bench/bench_lean.py --builtin mathlib            # P = os.cpu_count()
    .venv/bin/python bench/bench_lean.py proofs.jsonl --processes 16

Results: bench/out/bench_lean-<time>.json (or `--out FILE`), with the machine. Exit status: 0,
1 when the modes disagree on some proof, 2 for bad arguments or no REPL.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sgsbatch.config.schema import Config, VerificationConfig  # noqa: E402
from sgsbatch.logic.extraction import solver_file  # noqa: E402
from sgsbatch.verification.command import parse_row  # noqa: E402
from sgsbatch.verification.lean import LeanVerifier, resolve_project_dir  # noqa: E402
from sgsbatch.verification.repl import ReplProcess, ReplSystemError, ReplTimeout  # noqa: E402
from sgsbatch.verification.rules import kept_messages, proof_failure  # noqa: E402
from sgsbatch.verification.verdict import (  # noqa: E402
    ERROR,
    FAILED,
    TIMEOUT,
    VERIFIED,
    ProofJob,  # noqa: E402
    Verdict,
)

NO_LEAN = ("real Lean not found: install it with ./setup.sh --lean (or --lean-core), "
           "or pass --repl-command to point at a REPL")

# (id, theorem, proof, expected verdict with real Lean). Core: Lean 4 core only, empty header.
CORE: list[tuple[str, str, str, str]] = [
    ("add_comm", "theorem add_comm' (a b : Nat) : a + b = b + a := by", "\n  omega", VERIFIED),
    ("add_comm_term", "theorem sgs_selfcheck (a b : Nat) : a + b = b + a := by", "\n  exact Nat.add_comm a b",
     VERIFIED),
    ("mul_comm", "theorem mul_comm' (a b : Nat) : a * b = b * a := by", "\n  exact Nat.mul_comm a b", VERIFIED),
    ("decide", "theorem two_two : 2 + 2 = 4 := by", "\n  decide", VERIFIED),
    ("induction", "theorem zero_add' (n : Nat) : 0 + n = n := by",
     "\n  induction n with\n  | zero => rfl\n  | succ n ih => omega", VERIFIED),
    ("classical", "theorem em' (p : Prop) : p ∨ ¬p := by", "\n  exact Classical.em p", VERIFIED),
    ("fail_simp", "theorem wrong (x : Nat) : x + 1 = x := by", "\n  simp  -- FAKE_ERROR", FAILED),
    ("fail_decide", "theorem bad_lt : 5 < 3 := by", "\n  decide  -- FAKE_ERROR", FAILED),
    ("sorry", "theorem s (x : Nat) : x = x := by", "\n  exact (sorry : x = x)  -- FAKE_SORRY", FAILED),
]
# Mathlib: tests/lean/test_lean_real.py's proofs and two more, `import Mathlib` header.
MATHLIB: list[tuple[str, str, str, str]] = [
    ("pass", "theorem sq_nonneg' (x : ℝ) : 0 ≤ x ^ 2 := by", "\n  positivity", VERIFIED),
    ("pass_core", "theorem add_comm' (a b : ℕ) : a + b = b + a := by", "\n  omega", VERIFIED),
    ("ring", "theorem two_mul' (x : ℝ) : 2 * x = x + x := by", "\n  ring", VERIFIED),
    ("classical", "theorem em' (p : Prop) : p ∨ ¬p := by", "\n  exact Classical.em p", VERIFIED),
    ("fail", "theorem wrong (x : ℕ) : x + 1 = x := by", "\n  simp  -- FAKE_ERROR", FAILED),
    ("fail_linarith", "theorem nope (x : ℝ) (h : 0 < x) : x < 0 := by", "\n  linarith  -- FAKE_ERROR", FAILED),
    ("sorry", "theorem s (x : ℕ) : x = x := by", "\n  exact (sorry : x = x)  -- FAKE_SORRY", FAILED),
]
BUILTIN = {"core": ("", CORE), "mathlib": ("import Mathlib", MATHLIB)}


def builtin_jobs(name: str) -> list[ProofJob]:
    header, rows = BUILTIN[name]
    return [ProofJob(rid, header, theorem, proof) for rid, theorem, proof, _ in rows]


def read_jobs(path: Path) -> list[ProofJob]:
    """The well-formed rows of a `sgsbatch verify` input file (malformed ones are reported and skipped)."""
    jobs: list[ProofJob] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        rid, parsed = parse_row(line, number)
        if isinstance(parsed, str):
            print(f"bench_lean: skipping {path}:{number} ({rid}): {parsed}", file=sys.stderr)
        else:
            jobs.append(parsed)
    return jobs


def cycle_to(jobs: Sequence[ProofJob], n: int) -> list[ProofJob]:
    """`n` jobs taken round-robin from `jobs`; repeats get ids `ID#k` (k = 1, 2, ...)."""
    out: list[ProofJob] = []
    for k, job in enumerate(itertools.islice(itertools.cycle(jobs), n)):
        rep = k // len(jobs)
        out.append(replace(job, key=job.key if rep == 0 else f"{job.key}#{rep}"))
    return out


# ---------------------------------------------------------------------------------------- machine
def _first(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def lean_version(project_dir: Path) -> str | None:
    """`lean --version` as the project sees it (through `lake env` where lake is installed)."""
    if shutil.which("lake") and project_dir.is_dir():
        argv, cwd = ["lake", "env", "lean", "--version"], project_dir
    elif shutil.which("lean"):
        argv, cwd = ["lean", "--version"], Path.cwd()
    else:
        return None
    try:
        p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else None


def machine(project_dir: Path) -> dict[str, Any]:
    toolchain = project_dir / "lean-toolchain"
    mem = _first("/proc/meminfo", "MemTotal")
    return {
        "host": platform.node(), "arch": platform.machine(), "cpu_model": _first("/proc/cpuinfo", "model name"),
        "cpus": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)), "memory": mem,
        "os": platform.platform(), "python": platform.python_version(), "loadavg_before": os.getloadavg(),
        "lean": lean_version(project_dir),
        "lean_toolchain_file": toolchain.read_text().strip() if toolchain.is_file() else None,
    }


# ---------------------------------------------------------------------------------------- modes
def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def warm_up(vcfg: VerificationConfig, project_dir: Path, headers: Sequence[str]) -> float:
    """Elaborate every distinct header once in a throw-away REPL (fills the page cache); seconds."""
    t0 = time.perf_counter()
    for header in headers:
        repl = ReplProcess(vcfg.repl_command, project_dir, vcfg.memory_limit_mb)
        try:
            repl.command(header, None, vcfg.header_timeout_s)
        except (ReplTimeout, ReplSystemError) as e:
            print(f"bench_lean: warm-up of header {header[:40]!r} failed: {e}", file=sys.stderr)
        finally:
            repl.close()
    return time.perf_counter() - t0


def fresh_one(vcfg: VerificationConfig, project_dir: Path, job: ProofJob) -> tuple[Verdict, float]:
    """The reference's way for one proof: a new REPL, one command (the whole file), close it."""
    t0 = time.perf_counter()
    try:
        repl = ReplProcess(vcfg.repl_command, project_dir, vcfg.memory_limit_mb)
    except ReplSystemError as e:
        return Verdict(ERROR, e.kind, [str(e)]), time.perf_counter() - t0
    try:
        reply = repl.command(solver_file(job.header, job.theorem, job.proof), None,
                             vcfg.header_timeout_s + vcfg.timeout_s)
        failure = proof_failure(reply)
        verdict = Verdict(VERIFIED if failure is None else FAILED, failure, kept_messages([reply]))
    except ReplTimeout as e:
        verdict = Verdict(TIMEOUT, "timeout", [str(e)])
    except ReplSystemError as e:
        verdict = Verdict(ERROR, e.kind, [str(e)])
    finally:
        repl.close()
    return verdict, time.perf_counter() - t0


def _summary(mode: str, verdicts: dict[str, tuple[Verdict, float]], wall: float, processes: int,
             cpu: float, extra: dict[str, Any]) -> dict[str, Any]:
    n = len(verdicts)
    times = sorted(s for _, s in verdicts.values())
    return {
        "mode": mode, "processes": processes, "proofs": n, "wall_s": round(wall, 3),
        "proofs_per_s": n / wall if wall > 0 else None,
        "proofs_per_s_per_core": n / wall / processes if wall > 0 else None,
        "median_s_per_proof": times[n // 2] if n else None,
        "repl_cpu_s_per_proof": cpu / n if n else None,
        "verdicts": dict(Counter(v.verdict for v, _ in verdicts.values())), **extra,
    }


def run_pool(vcfg: VerificationConfig, processes: int, jobs: Sequence[ProofJob]
             ) -> tuple[dict[str, Any], dict[str, tuple[Verdict, float]]]:
    cpu0, t0 = _children_cpu(), time.perf_counter()
    verifier = LeanVerifier(vcfg, processes=processes)
    try:
        got = {job.key: (verdict, secs) for job, verdict, secs in verifier.verify_stream(jobs)}
        wall = time.perf_counter() - t0
    finally:
        t1 = time.perf_counter()
        verifier.close()
        close_s = time.perf_counter() - t1
    started = len(verifier.pool.started_pids)
    return _summary("pool", got, wall, processes, _children_cpu() - cpu0,
                    {"close_s": round(close_s, 3), "repl_processes_started": started}), got


def run_fresh(vcfg: VerificationConfig, project_dir: Path, processes: int, jobs: Sequence[ProofJob]
              ) -> tuple[dict[str, Any], dict[str, tuple[Verdict, float]]]:
    cpu0, t0 = _children_cpu(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=processes, thread_name_prefix="fresh") as ex:
        results = list(ex.map(lambda j: fresh_one(vcfg, project_dir, j), jobs))
    wall = time.perf_counter() - t0
    got = {job.key: r for job, r in zip(jobs, results, strict=True)}
    return _summary("fresh", got, wall, processes, _children_cpu() - cpu0,
                    {"repl_processes_started": len(jobs)}), got


def agreement(jobs: Sequence[ProofJob], pool: dict[str, tuple[Verdict, float]],
              fresh: dict[str, tuple[Verdict, float]]) -> dict[str, Any]:
    bad = []
    for job in jobs:
        (p, _), (f, _) = pool[job.key], fresh[job.key]
        if p.verdict != f.verdict:
            bad.append({"id": job.key, "pool": p.verdict, "pool_reason": p.reason, "fresh": f.verdict,
                        "fresh_reason": f.reason, "pool_messages": p.messages[:3], "fresh_messages": f.messages[:3]})
    return {"proofs": len(jobs), "agree": len(jobs) - len(bad), "disagreements": bad}


# ---------------------------------------------------------------------------------------- main
def _absolute_args(argv: list[str]) -> list[str]:
    """Arguments naming an existing file relative to the current directory, made absolute (the
    REPL runs in the project directory, not here)."""
    out = []
    for a in argv:
        p = Path(a)
        out.append(str(p.resolve()) if not p.is_absolute() and ("/" in a or p.suffix) and p.exists() else a)
    return out


def load_cfg(args: argparse.Namespace) -> Config:
    from sgsbatch.config.loading import load_config

    cfg: Config = load_config(args.config, args.overrides)
    return cfg


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", type=Path, nargs="?", help="JSONL of {id, header, theorem, proof} (default: --builtin)")
    ap.add_argument("--builtin", choices=sorted(BUILTIN), default="core",
                    help="built-in proof set when no INPUT is given (default: core)")
    ap.add_argument("--proofs", type=int, default=None,
                    help="cycle the input to this many proofs (default: the file as is; built-in: 16 per process)")
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="P (default: os.cpu_count())")
    ap.add_argument("--config", type=Path, default=REPO / "jobs" / "sgs.toml", help="jobs file (default: jobs/sgs.toml)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="config override, as in `sgsbatch verify --set` (repeatable)")
    ap.add_argument("--repl-command", default=None, metavar='"PROG ARG..."',
                    help="REPL program and arguments (shell words), instead of verification.repl_command")
    ap.add_argument("--checker-command", default=None, metavar='"PROG ARG..."',
                    help="kernel re-check program and arguments, instead of verification.checker_command")
    ap.add_argument("--project-dir", type=Path, default=None, help="directory the REPL runs in (relative: to here)")
    ap.add_argument("--no-warm-up", action="store_true", help="skip the untimed header elaboration before timing")
    ap.add_argument("--out", type=Path, default=None, help="JSON result file (default: bench/out/bench_lean-<time>.json)")
    args = ap.parse_args()

    def usage(msg: str) -> int:
        print(f"bench_lean: {msg}", file=sys.stderr)
        return 2

    if args.processes < 1:
        return usage("--processes must be >= 1")
    try:
        cfg = load_cfg(args)
    except Exception as e:  # ConfigError and friends: one clean line
        return usage(f"config: {e}")
    vcfg = cfg.verification
    if args.repl_command is not None:
        command = _absolute_args(shlex.split(args.repl_command))
        if not command:
            return usage("--repl-command is empty")
        vcfg = replace(vcfg, repl_command=tuple(command))
    elif vcfg.repl_command and vcfg.repl_command[0] == "lake" and shutil.which("lake") is None:
        return usage(NO_LEAN)
    if args.checker_command is not None:
        vcfg = replace(vcfg, checker_command=tuple(_absolute_args(shlex.split(args.checker_command))))
    if args.project_dir is not None:
        vcfg = replace(vcfg, project_dir=str(args.project_dir.resolve()))
    project_dir = resolve_project_dir(vcfg.project_dir)
    vcfg = replace(vcfg, project_dir=str(project_dir))
    if args.repl_command is None and list(vcfg.repl_command[:2]) == ["lake", "env"] and len(vcfg.repl_command) > 2:
        binary = project_dir / vcfg.repl_command[2]
        if not binary.exists():
            return usage(f"the REPL is not built at {binary}: run ./setup.sh --lean (or --lean-core and "
                         "--project-dir lean/core), or pass --repl-command")
    try:
        LeanVerifier(vcfg, processes=1)  # the pool's own preflight: program and project directory exist
    except ValueError as e:
        return usage(f"{e}\n{NO_LEAN}")

    if args.input is not None:
        if not args.input.is_file():
            return usage(f"no such input file: {args.input}")
        jobs, source = read_jobs(args.input), str(args.input)
        if args.proofs is not None:
            jobs = cycle_to(jobs, args.proofs)
    else:
        source = f"builtin:{args.builtin}"
        jobs = cycle_to(builtin_jobs(args.builtin), args.proofs or 16 * args.processes)
    if not jobs:
        return usage("no proofs to check")
    if len({j.key for j in jobs}) != len(jobs):
        return usage("duplicate ids in the input")

    stand_in = "fake_repl" in " ".join(vcfg.repl_command)
    result: dict[str, Any] = {
        "benchmark": "bench_lean", "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": machine(project_dir), "stand_in_repl": stand_in,
        "args": {k: str(v) for k, v in vars(args).items()},
        "verification": {"repl_command": list(vcfg.repl_command), "project_dir": str(project_dir),
                         "timeout_s": vcfg.timeout_s, "header_timeout_s": vcfg.header_timeout_s,
                         "memory_limit_mb": vcfg.memory_limit_mb,
                         "max_proofs_per_process": vcfg.max_proofs_per_process,
                         "kernel_recheck": vcfg.kernel_recheck, "checker_command": list(vcfg.checker_command)},
        "input": {"source": source, "proofs": len(jobs), "distinct_headers": len({j.header for j in jobs})},
    }
    m = result["machine"]
    print(f"machine: {m['host']} {m['arch']} {m['cpu_model']}, {m['cpus']} cpus ({m['cpus_usable']} usable), "
          f"{m['memory']}, python {m['python']}, lean {m['lean']}")
    print(f"REPL: {shlex.join(vcfg.repl_command)} in {project_dir}")
    if stand_in:
        print("STAND-IN REPL (tests/lean/fake_repl.py, not Lean): this checks the code path only; "
              "the numbers below mean nothing")
    if args.processes > (m["cpus_usable"] or 1):
        print(f"warning: {args.processes} processes on {m['cpus_usable']} usable cpus: per-process is not per-core")
    print(f"{len(jobs)} proofs from {source}, P = {args.processes}", flush=True)

    if not args.no_warm_up:
        result["warm_up_s"] = round(warm_up(vcfg, project_dir, sorted({j.header for j in jobs})), 3)
        print(f"warm-up (each header elaborated once, untimed): {result['warm_up_s']} s", flush=True)
    result["pool"], pool = run_pool(vcfg, args.processes, jobs)
    print(f"(a) pool:  {result['pool']['proofs_per_s']:.3f} proofs/s, "
          f"{result['pool']['proofs_per_s_per_core']:.4f} proofs/s/core, verdicts {result['pool']['verdicts']}",
          flush=True)
    if vcfg.kernel_recheck:  # the re-check's cost: the same pool without it
        result["pool_no_recheck"], _ = run_pool(replace(vcfg, kernel_recheck=False), args.processes, jobs)
        verified = result["pool"]["verdicts"].get(VERIFIED, 0)
        extra = (result["pool"]["wall_s"] - result["pool_no_recheck"]["wall_s"]) * args.processes
        result["recheck_s_per_verified_proof"] = extra / verified if verified else None
        print(f"kernel re-check: {result['pool_no_recheck']['proofs_per_s']:.3f} proofs/s without it; "
              f"{result['recheck_s_per_verified_proof']} process-seconds per verified proof", flush=True)
    result["fresh"], fresh = run_fresh(vcfg, project_dir, args.processes, jobs)
    print(f"(b) fresh: {result['fresh']['proofs_per_s']:.3f} proofs/s, "
          f"{result['fresh']['proofs_per_s_per_core']:.4f} proofs/s/core, verdicts {result['fresh']['verdicts']}",
          flush=True)
    result["speedup_pool_over_fresh"] = result["pool"]["proofs_per_s"] / result["fresh"]["proofs_per_s"]
    result["agreement"] = agree = agreement(jobs, pool, fresh)
    result["per_proof"] = [{"id": j.key, "pool": pool[j.key][0].verdict, "pool_reason": pool[j.key][0].reason,
                            "pool_s": round(pool[j.key][1], 4), "fresh": fresh[j.key][0].verdict,
                            "fresh_reason": fresh[j.key][0].reason, "fresh_s": round(fresh[j.key][1], 4)}
                           for j in jobs]
    print(f"speedup pool / fresh: {result['speedup_pool_over_fresh']:.2f}x")
    print(f"verdict agreement: {agree['agree']}/{agree['proofs']}")
    for d in agree["disagreements"][:20]:
        print(f"  DISAGREE {d['id']}: pool {d['pool']} ({d['pool_reason']}), fresh {d['fresh']} ({d['fresh_reason']})")
    if len(agree["disagreements"]) > 20:
        print(f"  ... {len(agree['disagreements']) - 20} more (see the JSON)")
    for mode in ("pool", "fresh"):
        if result[mode]["verdicts"].get(ERROR) == len(jobs):
            print(f"warning: every {mode} verdict is `error`: the REPL does not work; the timing measures failures")

    path = args.out or REPO / "bench" / "out" / f"bench_lean-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {path}")
    return 1 if agree["disagreements"] else 0


if __name__ == "__main__":
    sys.exit(main())
