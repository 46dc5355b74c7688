"""Submitting a round's phases to Slurm through submitit, and asking Slurm what became of them.

A round is a chain of job arrays: [init ->] conjecture -> solve -> verify -> guide -> train;
each afterok on the one before, except verify: verify shard j waits only for the solve task of
shard j mod shards.solve (`verify_arrays`), to start (`after`: it checks proofs as they are
generated, `verification.streaming`) or, without streaming, to succeed; a solve shard out of
retries holds back (or, streaming, ends) its own verify shards and no others. Array task k runs the shard named in the SlurmJob row's `shards`
list (a resubmission after `resume` covers only unfinished shards, so task k need not be shard
k). Every job is `--requeue`able and gets SIGUSR2 `signal_delay_s` before its time limit; a task
step killed by that signal before its shell could ignore it is requeued by the job script
(`early_signal_requeue`). Submission is idempotent per (round, phase, shard): a shard covered by
an active job already recorded is not submitted again, so a retried train job does not submit
the next round twice. SLURM_* variables of the submitting job, a trainer's rank
variables (MASTER_PORT, OMP_NUM_THREADS, ...) and its devices (CUDA_VISIBLE_DEVICES) are
scrubbed so a round submitted from inside a job inherits none of that job's resources. A train
job over several nodes runs one task per node (`--nodes N --ntasks-per-node 1`). Every
submission reads config.toml afresh (`submission_config`): resources amended with `resume --set`
apply to the next job submitted, a train job's submission of the next round included, and a
round is submitted with its own shard counts (run/amendments.config_at).

Job names start with the run's tag, the phase's letter and the round (`job_name`: a default
`squeue` shows 8 characters); the site's `slurm.mail_*` keys ask Slurm to mail on the run's end
and on a failed job (`mail_parameters`).

Slurm state comes from `squeue` (live jobs) and `sacct` (finished ones, restarts); when `sacct`
is unavailable, status works from squeue and the shard files alone. Every submission is also
appended to the round's `jobs.jsonl`, so a lost database can be rebuilt with its job ids.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sqlmodel import select

from sgsbatch.config.schema import ROLLOUT_JOB, Config, SlurmPhaseConfig
from sgsbatch.config.validation import mail_types
from sgsbatch.errors import SchedulerError
from sgsbatch.round import metrics as M
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.journal import journal_job, task_of
from sgsbatch.run.paths import command
from sgsbatch.run.shards import unfinished
from sgsbatch.scheduling.liveness import Liveness, StallReason
from sgsbatch.scheduling.ranks import DIST_ENV, DIST_PREFIXES
from sgsbatch.state.schema import Metric, RunState, SlurmJob

# What a job's allocation sets that a job submitted from it must not inherit (beside SLURM_*).
JOB_ENV = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "MKL_NUM_THREADS")


def available(timeout: float = 10.0) -> bool:
    """True when a Slurm controller answers (`sinfo`)."""
    if shutil.which("sbatch") is None:
        return False
    try:
        return subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


TAG_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
TAG_CHARS = 4  # 36^4 = 1.7M tags: two runs share one about once in a million pairs
# the letter after the tag in a job's name: one per phase, and the run's watcher job (ops/watcher.py)
JOB_LETTERS = {"init": "i", "conjecture": "c", "solve": "s", "verify": "v", "guide": "g", "train": "t",
               "watcher": "w", "eval": "e", "rollout": "r"}


def run_tag(run: str) -> str:
    """The run's tag: TAG_CHARS characters of its name's SHA-256 in base 36, the same wherever it is computed.
    Runs whose names share a long prefix (grpo-lr1e-6, grpo-lr3e-6) get different tags."""
    import hashlib

    n = int.from_bytes(hashlib.sha256(run.encode()).digest()[:8], "big")
    out = ""
    for _ in range(TAG_CHARS):
        n, d = divmod(n, len(TAG_ALPHABET))
        out += TAG_ALPHABET[d]
    return out


def job_name(run: str, r: int | None, phase: str) -> str:
    """A job's Slurm name, `<tag><letter><round>.sgs.<run>.r<round:04d>.<phase>` (e.g. `k3f9s0.sgs.tiny.r0000.solve`;
    `r` None: a job of no round, the watcher's `k3f9w.sgs.tiny.watcher`). Its first 8 characters, all a
    default `squeue` shows (NAME is `%.8j`), are the run's tag (`run_tag`), the phase's letter (JOB_LETTERS)
    and the round (0-based, as in the run's `slurm/r0000` directories and `logs --round`): they tell runs apart;
    the rest names the run and phase in full (`squeue -o "%.18i %.50j %.8T"`, `sacct --name`)."""
    head = f"{run_tag(run)}{JOB_LETTERS[phase]}"
    if r is None:
        return f"{head}.sgs.{run}.{phase}"
    return f"{head}{r}.sgs.{run}.r{r:04d}.{phase}"


def is_run_job(name: str, run: str) -> bool:
    """Whether a Slurm job name (`job_name`) is one of run `run`'s jobs."""
    head, sep, rest = name.partition(".sgs.")
    if not sep or not head.startswith(run_tag(run)) or not rest.startswith(f"{run}."):
        return False
    tail = rest[len(run) + 1:]
    return tail == "watcher" or (tail[:1] == "r" and tail[1:5].isdigit() and tail[5:6] == "."
                                 and tail[6:] in JOB_LETTERS)


@contextmanager
def clean_env() -> Iterator[None]:
    """submitit's own scrub (SLURM_*, SLURMD_*, SRUN_*, SBATCH_*, SUBMITIT_*, the torch.distributed
    rendezvous variables) plus what it does not know: our launcher's and DeepSpeed's variables
    (DIST_ENV, DIST_PREFIXES) and the devices and threads of the job's allocation (JOB_ENV)."""
    from submitit.helpers import clean_env

    extra = [k for k in os.environ if k.startswith(DIST_PREFIXES) or k in DIST_ENV or k in JOB_ENV]
    with clean_env(extra_names=extra):
        yield


@dataclass(frozen=True)
class Array:
    """One job array of a phase: its Slurm job id and the shard each task runs (task k: shards[k])."""

    job_id: str
    shards: tuple[int, ...]


def active_arrays(h: RunHandle, r: int, phase: str) -> list[Array]:
    with h.db.read() as s:
        jobs = s.exec(select(SlurmJob).where(SlurmJob.run_id == h.run_id, SlurmJob.round == r,
                                             SlurmJob.phase == phase, SlurmJob.active)).all()
        return [Array(j.job_id, tuple(json.loads(j.shards))) for j in jobs]


def _parameters(h: RunHandle, r: int, phase: str, n: int, dependency: str | None) -> dict[str, object]:
    """The parameters round r's `phase` would be submitted with now (`submission_config`)."""
    return _parameters_for(submission_config(h, r), r, phase, n, dependency)


def resource_parameters(res: SlurmPhaseConfig, name: str, dependency: str | None = None) -> dict[str, object]:
    """submitit's parameters for one job of the resources `res` (a `slurm.<phase>` table) named `name`: time,
    CPUs, memory, GPUs, partition/account/qos, setup lines, requeue and the table's extra sbatch options; the
    one place a job's resources become sbatch's (phase arrays, the watcher, evaluation jobs)."""
    params: dict[str, object] = {
        "job_name": name, "time": res.time_min, "cpus_per_task": res.cpus, "mem": res.mem,
        "additional_parameters": {"requeue": True, **res.extra, **({"dependency": dependency} if dependency else {})},
        "stderr_to_stdout": True,
    }
    if res.gpus:
        params["gpus_per_node"] = res.gpus
    for key in ("partition", "account", "qos"):
        if getattr(res, key):
            params[key] = getattr(res, key)
    if res.setup:  # slurm.<phase>.setup: shell lines at the top of the job script, before the task starts
        params["setup"] = list(res.setup)
    return params


def _parameters_for(cfg: Config, r: int, phase: str, n: int, dependency: str | None) -> dict[str, object]:
    """submitit's parameters for one phase's array of `n` tasks (what preflight.py tests too)."""
    res = cfg.phase_resources(phase)
    params = resource_parameters(res, job_name(cfg.run.name, r, phase), dependency)
    params.update(signal_delay_s=res.signal_delay_s, array_parallelism=min(res.array_parallelism, n))
    if res.nodes > 1:  # one task per node; each starts its node's ranks (scheduling/ranks.py)
        params.update(nodes=res.nodes, ntasks_per_node=1)
    params.update(mail_parameters(cfg, r, phase))
    params["teardown"] = early_signal_requeue()
    return params


def mail_parameters(cfg: Config, r: int, phase: str) -> dict[str, str]:
    """submitit's `mail_user` and `mail_type` (sbatch --mail-user, --mail-type) for round r's `phase`; {}
    without `slurm.mail_user` or types.

    The job whose end is the run's end, the last round's train job (it ends the run's last round:
    scheduling/chain.py), gets `slurm.mail_type` (default END,FAIL); it and every other phase's job
    get `slurm.mail_type_failure` (default FAIL): a job out of retries fails, and what depends on it can
    never start, so the run stalls there. A job array mails once for the whole array (Slurm's rule
    without ARRAY_TASKS). Decided at submission, with the config read then: a run whose `run.rounds`
    is raised later (`resume --set`) mails END for the old last round too. Not covered: the watcher
    and canary jobs (neither's end is the run's), a local run (no Slurm)."""
    s = cfg.slurm
    last = ((phase == "train" and r == cfg.run.rounds - 1)
            or (phase == ROLLOUT_JOB and r + cfg.solver.colocated_steps >= cfg.run.rounds))
    types = list(dict.fromkeys((mail_types(s.mail_type) if last else []) + mail_types(s.mail_type_failure)))
    if not s.mail_user or not types:
        return {}
    return {"mail_user": s.mail_user, "mail_type": ",".join(types)}


def python_command(python: str = sys.executable) -> str:
    """How a task starts Python: with SIGUSR2 ignored until the task installs its handlers.

    A preemption signals its victims first (PreemptMode=REQUEUE with a user signal) and the time
    limit warning is SIGUSR2 too. Delivered in a task's first second, before Python and submitit
    have a handler, its default action killed the task: the job FAILED and every dependent job
    could never start. An ignored disposition survives `exec`, so the task starts ignoring it and
    its handlers (submitit's, then the supervisor's) replace SIG_IGN once installed. A signal lost
    that way costs nothing: a preemption requeues the job after its grace time anyway. The few
    milliseconds between the step's start and the shell's `trap` are covered by the job script's
    `early_signal_requeue`.
    """
    return f"/bin/sh -c 'trap \"\" USR2; exec \"$0\" \"$@\"' {shlex.quote(python)}"


def early_signal_requeue() -> list[str]:
    """Job-script lines after the task step (submitit's `teardown`): a step that died of SIGUSR2 was
    signalled in its first milliseconds, before its shell's `trap` (every later SIGUSR2 is ignored
    or handled, `python_command`): a preemption or a warning it could not see, never a crash of its
    own. The job requeues itself (as the supervisor does on SIGUSR2) instead of failing, which would
    leave its dependent jobs waiting for a person. Only the steps get the signal (`--signal=USR2`,
    not `B:`), so the batch shell running these lines is never the one it kills. Any other exit
    status is the job's own, unchanged."""
    died = 128 + int(signal.SIGUSR2)  # srun's exit status for a task killed by SIGUSR2
    return [
        "rc=$?  # the task step's exit status",
        f'if [ "$rc" -eq {died} ]; then  # killed by SIGUSR2 before it could ignore it: run it again',
        '    task="${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}}"',
        '    echo "sgsbatch: the task died of SIGUSR2 as it started; requeueing ${task:-$SLURM_JOB_ID}" >&2',
        '    scontrol requeue "${task:-$SLURM_JOB_ID}" && sleep 600',
        "fi",
        'exit "$rc"',
    ]


def submit_phase(h: RunHandle, r: int, phase: str, shards: Sequence[int], dependency: str | None,
                 cfg: Config | None = None) -> str:
    """Submit one phase (an array over `shards`); returns the Slurm (array) job id. `cfg`: the
    config to submit with (default: round r's, read now, `submission_config`)."""
    import submitit

    from sgsbatch.scheduling.supervisor import SlurmTask

    cfg = cfg or submission_config(h, r)
    folder = h.paths.slurm / f"r{r:04d}" / phase / "%j"
    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=0, python=python_command())
    ex.update_parameters(**_parameters_for(cfg, r, phase, len(shards), dependency))
    k = len(shards)
    try:
        with clean_env():
            jobs = ex.map_array(SlurmTask(), [str(h.paths.root)] * k, [r] * k, [phase] * k, list(shards),
                                [cfg.run.max_task_retries] * k)
    except Exception as e:  # submitit raises FailedJobError / CalledProcessError with sbatch's message
        raise SchedulerError(f"sbatch refused round {r} {phase}: {e}") from e
    job_id = jobs[0].job_id.split("_")[0]
    record_job(h, r, phase, job_id, shards)
    return job_id


def record_job(h: RunHandle, r: int, phase: str, job_id: str, shards: Sequence[int]) -> None:
    """A job of round r's `phase`, active: in the round's journal (what `rebuild` reads) and the database. A
    colocated rollout job records itself again for each round it goes on to (scheduling/colocated.py)."""
    now = time.time()
    journal_job(h.paths.jobs_journal(r), {"phase": phase, "job_id": job_id, "shards": list(shards),
                                          "submitted_at": now})
    with h.db.write() as s:
        s.add(SlurmJob(run_id=h.run_id, round=r, phase=phase, job_id=job_id, shards=json.dumps(list(shards)),
                       submitted_at=now, active=True))


def arrays_after(phase: str, todo: list[int], n: int, prev: tuple[str, list[Array]] | None,
                 cfg: Config) -> list[tuple[list[int], str | None]]:
    """How to submit shards `todo` of a phase of `n` shards after the phase before (`prev`: its name and
    arrays; None when it has nothing left to run): (shards, sbatch dependency) per job array.

    Every phase waits for the whole phase before (afterok on all its arrays) except verify, whose
    shard j needs one solve shard only (`Config.solve_shard_of`): a solve task out of retries then
    holds back just its own verify shards (`verify_arrays`)."""
    if prev is None:
        return [(todo, None)]
    if phase == "verify" and prev[0] == "solve":
        return verify_arrays(todo, n, prev[1], cfg)
    return [(todo, "afterok:" + ":".join(a.job_id for a in prev[1]))]


def verify_arrays(todo: list[int], n: int, solve: list[Array], cfg: Config) -> list[tuple[list[int], str | None]]:
    """Verify shard j starts with the task of its solve shard j mod solve_n (`verification.streaming`:
    `after:JOB_TASK`, Slurm's "once it has started"), or when that task succeeded, never later.

    Streaming: one array per solve task, of the verify shards that follow it. Not streaming: a whole
    round (one solve array of every shard, every verify shard to run) is k = n / solve_n arrays of
    solve_n tasks, array m holding shards m*solve_n .. m*solve_n + solve_n - 1, each `aftercorr` on
    the solve array (task i waits for solve task i only; one array when verify = solve); a partial
    one (after `resume`) has one array per solve task it waits for (`afterok:JOB_TASK`). Either way
    the shards whose solve shard has no job to wait for (it is done) form one array without dependency.
    """
    solve_n = cfg.shard_count("solve")
    streaming = cfg.verification.streaming
    if (not streaming and len(solve) == 1 and solve[0].shards == tuple(range(solve_n)) and todo == list(range(n))
            and solve_n > 1):
        return [(todo[m:m + solve_n], f"aftercorr:{solve[0].job_id}") for m in range(0, n, solve_n)]
    task = {shard: task_of(a.job_id, a.shards, shard) for a in solve for shard in a.shards}
    kind = "after" if streaming else "afterok"
    groups: dict[str | None, list[int]] = {}
    for j in todo:
        t = task.get(cfg.solve_shard_of(j))
        groups.setdefault(None if t is None else f"{kind}:{t}", []).append(j)
    return [(shards, dep) for dep, shards in groups.items()]


def submission_config(h: RunHandle, r: int) -> Config:
    """What round r's jobs are submitted with: config.toml as it is now (resources amended with
    `resume --set` since `h` was opened count), with round r's own method (its shard counts)."""
    return h.refreshed().at(r)


def submit_round(h: RunHandle, r: int, only_unfinished: bool = False) -> list[str]:
    """Submit round r's phases chained by dependencies (`arrays_after`); shards already covered by an
    active job of their phase, and phases done, are skipped. Returns the new job ids."""
    ids = []
    prev: tuple[str, list[Array]] | None = None  # the phase before: its arrays, active or new
    cfg = submission_config(h, r)
    for phase in cfg.jobs_of_round(r):  # a colocated config: init (round 0) and the rollout job
        n = cfg.shard_count(phase)
        todo = unfinished(h.paths.phase_dir(r, phase), n) if only_unfinished else list(range(n))
        if not todo:
            prev = None
            continue
        arrays = active_arrays(h, r, phase)
        covered = {i for a in arrays for i in a.shards}
        rest = [i for i in todo if i not in covered]
        for shards, dep in arrays_after(phase, rest, n, prev, cfg) if rest else []:
            job_id = submit_phase(h, r, phase, shards, dep, cfg)
            ids.append(job_id)
            arrays.append(Array(job_id, tuple(shards)))
        prev = (phase, arrays)
    return ids


@dataclass
class TaskState:
    job_id: str  # "123" or "123_4"
    state: str
    reason: str = ""


def _run(cmd: list[str]) -> str | None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout if p.returncode == 0 else None


def squeue(job_ids: Sequence[str]) -> list[TaskState] | None:
    """Live tasks of these jobs (arrays expanded); None when squeue does not answer."""
    if not job_ids:
        return []
    out = _run(["squeue", "-h", "-r", "-j", ",".join(job_ids), "-o", "%i|%T|%r"])
    if out is None:
        # squeue fails for a list holding only unknown (long-finished) ids: ask one by one
        if _run(["squeue", "-h", "-o", "%i"]) is None:
            return None
        out = "".join(_run(["squeue", "-h", "-r", "-j", j, "-o", "%i|%T|%r"]) or "" for j in job_ids)
    return [TaskState(*line.split("|", 2)) for line in out.splitlines() if line.count("|") == 2]


def sacct(job_ids: Sequence[str]) -> dict[str, tuple[str, int]] | None:
    """Latest state and restart count (requeued instances) per task id; None when accounting is unavailable."""
    if not job_ids:
        return {}
    out = _run(["sacct", "-n", "-P", "-X", "-D", "-j", ",".join(job_ids), "-o", "JobID,State"])
    if out is None:
        return None
    seen: dict[str, tuple[str, int]] = {}
    for line in out.splitlines():  # with -D, every requeued instance of a task is one more line
        if "|" not in line:
            continue
        jid, state = line.split("|", 1)
        lines = seen[jid][1] + 1 if jid in seen else 0
        seen[jid] = ((state.split() or [""])[0], lines)
    return seen


def parse_tres(tres: str) -> tuple[int, int]:
    """(cpus, gpus) of an AllocTRES string such as "billing=33,cpu=33,gres/gpu=8,mem=64G,node=1"."""
    cpus = gpus = 0
    for part in tres.split(","):
        key, _, value = part.partition("=")
        if key == "cpu" and value.isdigit():
            cpus = int(value)
        elif (key == "gres/gpu" or key.startswith("gres/gpu:")) and value.isdigit() and key.count(":") <= 1:
            gpus = max(gpus, int(value)) if key.startswith("gres/gpu:") else int(value)
    return cpus, gpus


def sacct_usage(job_ids: Sequence[str]) -> dict[str, tuple[float, float]] | None:
    """(CPU-hours, GPU-hours) per job id: elapsed x allocation, every requeued instance included.

    None when accounting is unavailable. A job still running counts its time so far.
    """
    if not job_ids:
        return {}
    out = _run(["sacct", "-n", "-P", "-X", "-D", "-j", ",".join(job_ids), "-o", "JobID,ElapsedRaw,AllocTRES"])
    if out is None:
        return None
    usage: dict[str, tuple[float, float]] = {}
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        job = parts[0].split("_")[0]
        cpus, gpus = parse_tres(parts[2])
        hours = int(parts[1]) / 3600
        c, g = usage.get(job, (0.0, 0.0))
        usage[job] = (c + cpus * hours, g + gpus * hours)
    return usage


def cancel(job_ids: Sequence[str]) -> None:
    if job_ids:
        subprocess.run(["scancel", *job_ids], capture_output=True, timeout=60)


def record_slurm_jobs(h: RunHandle, r: int) -> None:
    """Store the round's Slurm task states, restart counts and cost (sacct), when accounting answers.

    Cost: `cost/<phase>/{gpu,cpu}_hours` and the round's `cost/{gpu,cpu}_hours` metrics, from every
    job of the round (resubmissions and requeued instances included; the train job calling this
    counts its time so far).
    """
    with h.db.read() as s:
        jobs = s.exec(select(SlurmJob).where(SlurmJob.run_id == h.run_id, SlurmJob.round == r)).all()
        ids = [j.job_id for j in jobs]
        phase_of = {j.job_id: j.phase for j in jobs}
    acct = sacct(ids) if ids else None
    if not acct:
        return
    usage = sacct_usage(ids) or {}
    costs: dict[str, float] = {}
    earlier = _earlier_rollout_cost(h, r, [i for i, p in phase_of.items() if p == ROLLOUT_JOB])
    for job_id, (cpu_h, gpu_h) in usage.items():
        phase = phase_of.get(job_id)
        if phase is None:
            continue
        if job_id in earlier:  # a colocated job's time so far, less what its earlier rounds counted
            cpu_h, gpu_h = max(0.0, cpu_h - earlier[job_id][0]), max(0.0, gpu_h - earlier[job_id][1])
        for name, value in ((M.cost(phase, "cpu_hours"), cpu_h), (M.cost(phase, "gpu_hours"), gpu_h),
                            (M.COST_CPU_HOURS, cpu_h), (M.COST_GPU_HOURS, gpu_h)):
            costs[name] = costs.get(name, 0.0) + value
    with h.db.write() as s:
        have = set(s.exec(select(Metric.name).where(Metric.run_id == h.run_id, Metric.round == r)).all())
        for name, value in sorted(costs.items()):
            if name not in have:
                s.add(Metric(run_id=h.run_id, round=r, name=name, value=round(value, 6)))
        for job in s.exec(select(SlurmJob).where(SlurmJob.run_id == h.run_id, SlurmJob.round == r)).all():
            tasks = _tasks_of(acct, job.job_id)
            job.task_states = json.dumps({k: v[0] for k, v in sorted(tasks.items())})
            job.restarts = sum(v[1] for v in tasks.values())
            states = {v[0] for v in tasks.values()}
            job.state = states.pop() if len(states) == 1 else "MIXED"
            s.add(job)


def _earlier_rollout_cost(h: RunHandle, r: int, job_ids: list[str]) -> dict[str, tuple[float, float]]:
    """(CPU, GPU) hours the rounds before r already counted for each colocated rollout job in `job_ids`
    (one job runs several rounds; sacct gives its time so far). A round two rollout jobs shared (one failed,
    `resume` submitted another) counts both against each: an over-subtraction, clamped at 0 by the caller."""
    if not job_ids:
        return {}
    with h.db.read() as s:
        rows = s.exec(select(SlurmJob.job_id, SlurmJob.round).where(
            SlurmJob.run_id == h.run_id, SlurmJob.phase == ROLLOUT_JOB, SlurmJob.round < r,
            SlurmJob.job_id.in_(job_ids))).all()  # type: ignore[attr-defined]
        rounds = {k for _, k in rows}
        names = (M.cost(ROLLOUT_JOB, "cpu_hours"), M.cost(ROLLOUT_JOB, "gpu_hours"))
        spent = {(k, n): v for k, n, v in s.exec(select(Metric.round, Metric.name, Metric.value).where(
            Metric.run_id == h.run_id, Metric.round.in_(rounds), Metric.name.in_(names))).all()}  # type: ignore[attr-defined]
    out: dict[str, tuple[float, float]] = {}
    for job_id, k in rows:
        cpu, gpu = out.get(job_id, (0.0, 0.0))
        out[job_id] = (cpu + spent.get((k, names[0]), 0.0), gpu + spent.get((k, names[1]), 0.0))
    return out


def _tasks_of(acct: dict[str, tuple[str, int]], job_id: str) -> dict[str, tuple[str, int]]:
    return {k: v for k, v in acct.items() if k == job_id or k.startswith(job_id + "_")}


def _active_jobs(h: RunHandle, min_round: int) -> list[SlurmJob]:
    with h.db.read() as s:
        jobs = list(s.exec(select(SlurmJob).where(SlurmJob.run_id == h.run_id, SlurmJob.active,
                                                  SlurmJob.round >= min_round)).all())
        for j in jobs:
            s.expunge(j)
    return jobs


def _deactivate_jobs(h: RunHandle) -> list[str]:
    with h.db.write() as s:
        jobs = s.exec(select(SlurmJob).where(SlurmJob.run_id == h.run_id, SlurmJob.active)).all()
        ids = [j.job_id for j in jobs]
        for j in jobs:
            j.active = False
            s.add(j)
    return ids


STOP_WAIT_S = 120.0  # how long `cancel` / `resume --force` wait for the cancelled jobs to leave the queue


def stop_jobs(h: RunHandle, wait_s: float = STOP_WAIT_S) -> list[str]:
    """Cancel every active job of the run and wait (up to `wait_s`) until none is left in the queue,
    so that no task of the run runs after `cancel` returns (and a `resume --force` never starts a
    task beside a stopping one: the shard locks make the rest wait, run/lock.py). A job submitted
    meanwhile (a train job ending its round as the cancel came) is cancelled too. Returns the job ids."""
    ids = _deactivate_jobs(h)
    cancel(ids)
    deadline = time.monotonic() + wait_s
    while True:
        late = _deactivate_jobs(h)
        cancel(late)
        ids += late
        live = squeue(ids)
        if live is None:
            return ids  # squeue does not answer: nothing to wait on
        if (live == [] and not late) or time.monotonic() > deadline:
            return ids
        time.sleep(1.0)


# Jobs this process has already seen leave the queue: polling asks accounting once per job exit.
_GONE_SEEN: set[str] = set()


def liveness(h: RunHandle, r: int, phase: str, detail: bool = True) -> Liveness:
    """Judge a run with unfinished work in round r from its active Slurm jobs (squeue, sacct).

    `detail=False` (what `--wait` and `watch` poll with): `sacct` only when one of the active jobs
    has newly left the queue (once per job and process), so a week of polling does not hammer
    the site's slurmdbd."""
    jobs = _active_jobs(h, r)
    ids = [j.job_id for j in jobs]
    live = squeue(ids)
    if live is None:
        return Liveness("running", message="squeue does not answer: state unknown")
    out = Liveness("running", message="")
    gone = {i for i in ids if i not in {t.job_id.split("_")[0] for t in live}}
    ask = detail or bool(gone - _GONE_SEEN)
    _GONE_SEEN.update(gone)
    acct = sacct(ids) if ask else None
    out.jobs = [{"job_id": j.job_id, "phase": j.phase, "round": j.round, "shards": json.loads(j.shards)}
                for j in jobs]
    if acct is not None:
        for row in out.jobs:
            tasks = _tasks_of(acct, row["job_id"])
            row["task_states"] = {k: v[0] for k, v in tasks.items()}
            row["restarts"] = sum(v[1] for v in tasks.values())
    elif ask:
        out.sacct_unavailable = True
    by_phase = {j.job_id: j.phase for j in jobs}
    for t in live:
        if "DependencyNeverSatisfied" in t.reason:
            out.state, out.stall = "stalled", StallReason.dependency_never_satisfied
            out.message = (f"job {t.job_id} ({by_phase.get(t.job_id.split('_')[0], '?')}) can never start: its "
                           f"dependency failed or was cancelled; run `{command('resume', h.paths)}`")
            return out
    if not live:
        # the train job may have submitted the next round between our reads: look once more
        if _active_jobs(h, r + 1):
            return out
        if _handing_over(h, r):
            out.message = f"round {r - 1}'s train job is submitting round {r}"
            return out
        out.state, out.stall = "stalled", StallReason.no_live_job
        out.message = f"no live Slurm job but unfinished work (round {r}, {phase}); run `{command('resume', h.paths)}`"
        return out
    started = any(t.state != "PENDING" for t in live) or h.paths.phase_dir(0, "init").exists()
    out.state = "running" if started else "pending"
    return out


def _handing_over(h: RunHandle, r: int) -> bool:
    """True while round r - 1's train job, which ended its round (the database says round r is
    current) and submits round r (chain.py), is still in the queue: a hand-over, not a stall."""
    if r == 0:
        return False
    with h.db.read() as s:  # a colocated rollout job hands on to its own next round, or submits the next job
        ids = list(s.exec(select(SlurmJob.job_id).where(SlurmJob.run_id == h.run_id, SlurmJob.round == r - 1,
                                                        SlurmJob.phase.in_(("train", ROLLOUT_JOB)),  # type: ignore[attr-defined]
                                                        SlurmJob.active)).all())
    return bool(ids) and bool(squeue(ids))


class SlurmExecutor:
    """Rounds as chains of Slurm job arrays (submitit); the train job submits the next round."""

    name = "slurm"

    def start(self, h: RunHandle, r: int) -> None:
        submit_round(h, r, only_unfinished=True)

    def stop(self, h: RunHandle) -> None:
        stop_jobs(h)

    def liveness(self, h: RunHandle, r: int, phase: str, detail: bool = True) -> Liveness:
        return liveness(h, r, phase, detail)

    def record_round(self, h: RunHandle, r: int) -> None:
        record_slurm_jobs(h, r)

    def continue_chain(self, h: RunHandle, r: int) -> None:
        if h.row().state == RunState.cancelled:
            return  # cancelled while this train job ended its round: submit nothing
        if r + 1 < h.cfg.run.rounds and h.cfg.run.submit_from_jobs:
            submit_round(h, r + 1)
