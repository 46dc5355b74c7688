"""The canary's verification check: the configured Lean (REPL, kernel checker, sandbox) on cases.py.

In order, each a row: the sandbox can start here (else its cause, e.g. user namespaces disabled,
and what the site can do); the verifier can be built (the Lean project, its REPL and checker
programs, the process filter); the first honest proof alone (its time includes elaborating the
header); the other honest proofs and every cheat on the configured pool (honest ones must be
`verified`, no cheat may be; the verdict and reason of each are shown); the kernel checker asked
directly about an honest proof against a changed statement (it must refuse); the looping proof on
a one-process pool with `canary.loop_timeout_s` (it must time out), then an honest proof on that
same pool (it must still be `verified`: the pool recovered). One row says whether per-slot cgroup
quotas (cgroups.py) are there, or why not (never a failure). Figures: proofs/s per process, header
time, the median time of a verified proof (REPL, audit and kernel re-check). Not covered: Lean's
speed on the run's own statements (bench/bench_lean.py), a site's Lean beyond these few proofs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import replace

from sgsbatch.canary.cases import CHANGED_THEOREM, CHEATS, HONEST, LOOP, Case
from sgsbatch.canary.rows import Row, failed
from sgsbatch.config.schema import Config, VerificationConfig
from sgsbatch.verification.verdict import TIMEOUT, VERIFIED, Verdict

C = "verification"
FIX_BUILD = ("build the Lean project on this site (`./setup.sh --lean`), or point verification.project_dir, "
             "verification.repl_command and verification.checker_command at a built one")


def _run(v: VerificationConfig, processes: int, cases: Sequence[Case]) -> tuple[dict[str, tuple[Verdict, float]], float]:
    """Every case through a fresh verifier of `v`: key -> (verdict, seconds), and the wall time."""
    from sgsbatch.verification.lean import LeanVerifier

    verifier = LeanVerifier(v, processes=processes)
    t0 = time.perf_counter()
    try:
        out = {job.key.removeprefix("canary:"): (verdict, secs)
               for job, verdict, secs in verifier.verify_stream([c.job() for c in cases])}
    finally:
        verifier.close()
    return out, time.perf_counter() - t0


def _sandbox_row(v: VerificationConfig) -> Row | None:
    if v.sandbox == "none":
        return Row(C, "sandbox", True, "verification.sandbox = \"none\": proofs run unsandboxed")
    from sgsbatch.verification.sandbox import Sandbox, probe

    want = Sandbox(v.sandbox, tmpfs_mb=v.sandbox_tmpfs_mb, process_filter=False)
    try:
        got = probe(want)
    except ValueError as e:
        return failed(C, "sandbox starts", e, "let bubblewrap run on compute nodes (install it; allow unprivileged "
                                              "user namespaces: sysctl kernel.unprivileged_userns_clone=1 or "
                                              "user.max_user_namespaces > 0), or verification.sandbox = \"none\"")
    if got.user_namespace != want.user_namespace or got.tmpfs_mb != want.tmpfs_mb:
        return Row(C, "sandbox starts", True, f"bwrap runs with less: user_namespace={got.user_namespace}, "
                                              f"tmpfs_mb={got.tmpfs_mb} (the site refuses the rest)")
    return Row(C, "sandbox starts", True, f"bwrap with a user namespace, tmpfs {v.sandbox_tmpfs_mb} MB")


def _quota_row(v: VerificationConfig) -> Row:
    """Whether per-slot cgroup quotas are there: one slot group made (with the keys' quotas) and
    removed again, as a pool makes them (cgroups.py); the reason where the site has none. Never a
    failure: without them the pool's restarts (leftover.py) and the job's cgroup still hold."""
    from sgsbatch.verification.cgroups import SlotGroups

    groups = SlotGroups.make(1, v.slot_cpus, v.slot_pids)
    there = bool(groups.dirs)
    groups.remove()
    return Row(C, "per-slot quotas", True, ("yes: " if there else "none: ") + groups.note.removeprefix(
        "no per-slot cgroup quotas: ") + ("" if there else " (per slot only rlimits; a proof's threads can take the "
                                           "CPU of the task's other slots while that proof runs)"))


def check_verification(cfg: Config, processes: int) -> list[Row]:
    v = cfg.verification
    if v.backend != "lean":
        return [Row(C, "backend", True, "verification.backend = \"simulated\": SIMULATED, no Lean to check")]
    rows: list[Row] = []
    sandbox = _sandbox_row(v)
    if sandbox is not None:
        rows.append(sandbox)
        if not sandbox.ok:
            return rows
    rows.append(_quota_row(v))
    processes = max(1, min(processes, len(HONEST) + len(CHEATS)))
    try:
        first, first_s = _run(v, 1, HONEST[:1])
        rest, rest_s = _run(v, processes, [*HONEST[1:], *CHEATS])
    except ValueError as e:  # the verifier cannot be built: Lean missing, programs missing, no process filter
        rows.append(failed(C, "verifier starts", e, FIX_BUILD))
        return rows
    verdicts = {**first, **rest}
    for case in (*HONEST, *CHEATS):
        verdict, secs = verdicts[case.key]
        if case.honest:
            ok = verdict.verdict == VERIFIED
            rows.append(Row(C, f"honest: {case.key}", ok, f"{verdict.verdict}"
                            + (f" ({verdict.reason})" if verdict.reason else "") + f" in {secs:.1f} s",
                            "" if ok else "the verifier refuses a proof real Lean v4.15.0 accepted: " + FIX_BUILD
                            + "; read the verdict's messages with `sgsbatch verify`"))
        else:
            ok = verdict.verdict != VERIFIED
            rows.append(Row(C, f"cheat: {case.key}", ok, f"{verdict.verdict} ({verdict.reason}): {case.what}",
                            "" if ok else "a cheat was verified: do not run; keep verification.kernel_recheck = "
                                          "true and verification.sandbox = \"bwrap\", rebuild lean/ (./setup.sh --lean)"))
    verified_s = [verdicts[c.key][1] for c in HONEST[1:] if verdicts[c.key][0].verdict == VERIFIED]
    per_proof = statistics.median(verified_s) if verified_s else 0.0
    n = len(HONEST) - 1 + len(CHEATS)
    header_s, per_process = max(0.0, first_s - per_proof), n / rest_s / processes
    rows.append(Row(C, "speed", True, f"header {header_s:.1f} s; verified proof (REPL, audit, "
                                      f"re-check) median {per_proof:.2f} s; {per_process:.3f} proofs/s "
                                      f"per process ({processes} processes)",
                    measures={"repl_start_s": header_s, "lean_proofs_per_s": per_process}))
    if v.kernel_recheck:
        rows.append(_checker_row(v))
    rows += _loop_rows(cfg)
    return rows


def _checker_row(v: VerificationConfig) -> Row:
    from sgsbatch.verification.lean import LeanVerifier

    verifier = LeanVerifier(v, processes=1)
    try:
        accepted, why = verifier.pool.checker_probe(HONEST[0].job(), CHANGED_THEOREM)
    except Exception as e:  # a checker that crashes on the probe is as broken as one that accepts
        return failed(C, "checker refuses a changed statement", e, FIX_BUILD)
    finally:
        verifier.close()
    return Row(C, "checker refuses a changed statement", not accepted, f"{'ACCEPTED' if accepted else 'refused'} "
               f"({why})", "" if not accepted else "the kernel checker accepts what it must refuse: rebuild "
                                                  "lean/SgsKernelCheck.lean (./setup.sh --lean); do not run")


def _loop_rows(cfg: Config) -> list[Row]:
    # the loop must run into the proof's own timeout: a header's seconds must not use it up first
    v = replace(cfg.verification, timeout_s=cfg.canary.loop_timeout_s, timeout_includes_header=False)
    try:
        out, _ = _run(v, 1, [LOOP, HONEST[0]])
    except ValueError as e:
        return [failed(C, "loop times out", e, FIX_BUILD)]
    (loop, loop_s), (after, after_s) = out[LOOP.key], out[HONEST[0].key]
    return [
        Row(C, "loop times out", loop.verdict == TIMEOUT, f"{loop.verdict} ({loop.reason}) after {loop_s:.1f} s "
            f"(canary.loop_timeout_s = {cfg.canary.loop_timeout_s})",
            "verification.timeout_s / memory_limit_mb: the looping proof was not stopped by the timeout"),
        Row(C, "pool healthy after the loop", after.verdict == VERIFIED, f"{after.verdict} in {after_s:.1f} s",
            "the pool did not recover from a timed-out proof: " + FIX_BUILD),
    ]
