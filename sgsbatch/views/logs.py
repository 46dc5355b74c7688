"""Finding and following a run's logs (`sgsbatch logs`) without knowing where the executors put them.

Each start of a shard's worker is an attempt (run/attempts.py): the latest attempt's output is
`rounds/rNNNN/<phase>/shard_NNNNN.attempt.log`, attempt K's once a later one started
`shard_NNNNN.attempt-K.log`, on both executors and across `resume`. On Slurm the job that ran an
attempt also has submitit's own stdout/stderr under `slurm/rNNNN/<phase>/<job>_<task>/` (the
supervisor's account: every attempt of that job, with the tail of each). The local driver's own
log is `local/driver.log` (phase `driver`).

Covered: choosing the round/phase/shard/attempt (defaults: the latest round with files; there
the shard out of retries if there is one, else the latest phase and its only shard; the latest
attempt), listing the valid choices in the error, and `follow` (tail until the shard or the
phase ends). Not covered: runs from before attempts were recorded keep only their latest log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sgsbatch.config.schema import ROLLOUT_JOB, Config
from sgsbatch.errors import InputError, RunError
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.attempts import Attempt, attempt_log, attempts
from sgsbatch.run.journal import latest_task
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard

DRIVER = "driver"


@dataclass(frozen=True)
class LogChoice:
    """The log(s) chosen for one shard attempt; `live` is the file that grows while it runs."""

    round: int
    phase: str
    shard: int
    attempt: int
    attempts: int
    files: tuple[Path, ...]
    live: Path | None
    record: Attempt | None = None  # the attempt's start and end (run/attempts.py); None in older runs


def _rounds_with_files(paths: RunPaths) -> list[int]:
    rounds = paths.root / "rounds"
    if not rounds.is_dir():
        return []
    return sorted(int(d.name[1:]) for d in rounds.iterdir() if d.is_dir() and d.name[1:].isdigit())


def _log_phases(cfg: Config, paths: RunPaths, r: int) -> tuple[str, ...]:
    """Round r's phases, and the colocated rollout job when one started at round r (it has its own log)."""
    return cfg.phases_of_round(r) + ((ROLLOUT_JOB,) if paths.phase_dir(r, ROLLOUT_JOB).is_dir() else ())


def _phase_has_files(paths: RunPaths, r: int, phase: str) -> bool:
    d = paths.phase_dir(r, phase)
    return d.is_dir() and any(d.iterdir())


def _submitit_logs(paths: RunPaths, r: int, phase: str, job: str) -> list[Path]:
    """submitit's stdout/stderr of one Slurm job or array task (`123_4`)."""
    folder = paths.slurm / f"r{r:04d}" / phase / job
    return sorted(folder.glob("*_log.out")) + sorted(folder.glob("*_log.err"))


def failed_shard(paths: RunPaths, cfg: Config, r: int, phase: str | None = None) -> tuple[str, int] | None:
    """(phase, shard) of round r's first shard out of retries (of `phase` only, when given), or None."""
    for p in [phase] if phase else _log_phases(cfg, paths, r):
        for i in range(shards_at(cfg, paths, r, p)):
            if Shard(paths.phase_dir(r, p), i).failed_reason() is not None:
                return p, i
    return None


def choose_log(paths: RunPaths, cfg: Config, r: int | None = None, phase: str | None = None,
               shard: int | None = None, attempt: int | None = None) -> LogChoice:
    """The log of one shard attempt; an InputError naming the valid choices when one does not exist (exit 2).
    Defaults: the latest round with files; there, the shard out of retries if one is, else the
    latest started phase (its only shard); the latest attempt."""
    if phase == DRIVER:
        return _driver_log(paths, cfg, r)
    r = _round_with_files(paths, r)
    phase, shard = _phase_and_shard(paths, cfg, r, phase, shard)
    s = Shard(paths.phase_dir(r, phase), shard)
    tried = attempts(s)
    count = max(1, len(tried))
    k = count if attempt is None else attempt
    if not 1 <= k <= count:
        kept = "1" if count == 1 else f"1..{count}"
        raise InputError(f"round {r} {phase} shard {shard} has no attempt {attempt}; attempts: {kept}")
    # on Slurm, submitit's own log of the job that ran the attempt (its supervisor's account of it)
    job = tried[k - 1].job if tried else latest_task(paths.jobs_journal(r), phase, shard)
    files = _submitit_logs(paths, r, phase, job) if job and job != "local" else []
    worker_log = attempt_log(s, k, count)
    if worker_log.exists():
        files.append(worker_log)
    if not files:
        raise RunError(f"round {r} {phase} shard {shard} attempt {k} has written no log yet "
                       f"(looked for {worker_log}); it may still be waiting for a node")
    return LogChoice(r, phase, shard, k, count, tuple(files), s.attempt_log if k == count else None,
                     tried[k - 1] if tried else None)


def _driver_log(paths: RunPaths, cfg: Config, r: int | None) -> LogChoice:
    log = paths.local / "driver.log"
    if not log.exists():
        raise InputError(f"{log} does not exist: the run has no local driver log (executor "
                         f"{cfg.run.executor}); choose a phase with --phase")
    return LogChoice(r or 0, DRIVER, 0, 1, 1, (log,), log)


def _round_with_files(paths: RunPaths, r: int | None) -> int:
    """Round `r` (the latest with files when None), or an error naming the rounds that have files."""
    rounds = _rounds_with_files(paths)
    if not rounds:
        raise RunError(f"{paths.root} has no round yet: nothing has logged")
    if r is None:
        return rounds[-1]
    if r not in rounds:
        raise InputError(f"round {r} has no files in {paths.root / 'rounds'}; rounds that exist: "
                         f"{', '.join(map(str, rounds))} (0-based)")
    return r


def _phase_and_shard(paths: RunPaths, cfg: Config, r: int, phase: str | None,
                     shard: int | None) -> tuple[str, int]:
    """The phase and shard `choose_log` reads in round r (its docstring's defaults), or an error naming the
    valid choices."""
    here = _log_phases(cfg, paths, r)
    phases = [p for p in here if _phase_has_files(paths, r, p)]
    valid = ", ".join(here) + (f", {DRIVER}" if (paths.local / "driver.log").exists() else "")
    if phase is not None and phase not in here:
        raise InputError(f"round {r} has no phase {phase!r}; its phases: {valid}")
    failed = failed_shard(paths, cfg, r, phase) if shard is None else None
    if failed is not None:
        phase, shard = failed
    if phase is None:
        if not phases:
            raise RunError(f"round {r} has started no phase yet; phases of round {r}: {valid}")
        phase = phases[-1]
    n = shards_at(cfg, paths, r, phase)
    if shard is None:
        if n > 1:
            raise InputError(f"round {r} {phase} has {n} shards and none failed: choose one with --shard 0..{n - 1}")
        return phase, 0
    if not 0 <= shard < n:
        raise InputError(f"round {r} {phase} has no shard {shard}; its shards: 0..{n - 1}")
    return phase, shard


def describe(choice: LogChoice) -> str:
    """The header `logs` prints: which attempt of how many, and how it ended."""
    text = f"round {choice.round} {choice.phase} shard {choice.shard} attempt {choice.attempt}/{choice.attempts}"
    a = choice.record
    if a is None or a.outcome is None:
        return text + ("" if a is None else f" (job {a.job}, running or killed with its job)")
    return text + f" (job {a.job}, {a.outcome}" + (f": {a.error})" if a.error else ")")


def phase_ended(paths: RunPaths, cfg: Config, choice: LogChoice) -> bool:
    """The followed shard is done or out of retries, or every shard of its phase is."""
    if choice.phase == DRIVER:
        from sgsbatch.scheduling.local import driver_alive

        return driver_alive(paths) is None
    shard = Shard(paths.phase_dir(choice.round, choice.phase), choice.shard)
    return shard.is_done() or shard.failed_reason() is not None


def follow(path: Path, ended: Callable[[], bool], poll_s: float) -> Iterator[str]:
    """The file's text as it grows, from its start, until `ended()`; a rewritten (new attempt) file
    starts again from its beginning."""
    pos = 0
    while True:
        stop = ended()  # read once more after the end, so the last lines are not lost
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size < pos:
            pos = 0
        if size > pos:
            with path.open("rb") as f:
                f.seek(pos)
                data = f.read(size - pos)
            pos = size
            yield data.decode("utf-8", errors="replace")
        if stop:
            return
        time.sleep(poll_s)
