"""Finding and following a run's logs (`sgsbatch logs`) without knowing where the executors put them.

A shard's worker writes its output to `rounds/rNNNN/<phase>/shard_NNNNN.attempt.log` on both
executors (scheduling/supervisor.py rewrites it at each attempt, so it holds the latest attempt).
On Slurm, every submission of a shard (the round's `jobs.jsonl`, run/journal.py) also has
submitit's own stdout/stderr under `slurm/rNNNN/<phase>/<job>_<task>/`: attempt K is the K-th
submission that covered the shard, and its submitit log holds the tail of that attempt's worker
output. The local driver's own log is `local/driver.log` (phase `driver`).

Covered: choosing the round/phase/shard/attempt (defaults: the latest round with files, its
latest phase, the shard when there is only one), listing the valid choices in the error, and
`follow` (tail until the shard or the phase ends). Not covered: Slurm logs of requeues within one
job (Slurm reuses the job's log files; they are one attempt here).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sgsbatch.config.schema import Config
from sgsbatch.errors import InputError, RunError
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.journal import read_journal
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


def _rounds_with_files(paths: RunPaths) -> list[int]:
    rounds = paths.root / "rounds"
    if not rounds.is_dir():
        return []
    return sorted(int(d.name[1:]) for d in rounds.iterdir() if d.is_dir() and d.name[1:].isdigit())


def _phase_has_files(paths: RunPaths, r: int, phase: str) -> bool:
    d = paths.phase_dir(r, phase)
    return d.is_dir() and any(d.iterdir())


def _submissions(paths: RunPaths, r: int, phase: str, shard: int) -> list[tuple[str, int]]:
    """(Slurm job id, array task index) of every submission of this shard, oldest first."""
    out = []
    for rec in read_journal(paths.jobs_journal(r)):
        shards = [int(s) for s in rec.get("shards", [])]
        if rec.get("phase") == phase and shard in shards:
            out.append((str(rec["job_id"]), shards.index(shard)))
    return out


def _submitit_logs(paths: RunPaths, r: int, phase: str, job: tuple[str, int]) -> list[Path]:
    folder = paths.slurm / f"r{r:04d}" / phase
    found: list[Path] = []
    for name in (f"{job[0]}_{job[1]}", job[0]):  # an array task, or a single job
        found += sorted((folder / name).glob("*_log.out")) + sorted((folder / name).glob("*_log.err"))
        if found:
            break
    return found


def choose_log(paths: RunPaths, cfg: Config, r: int | None = None, phase: str | None = None,
               shard: int | None = None, attempt: int | None = None) -> LogChoice:
    """The log of one shard attempt; an InputError naming the valid choices when one does not exist (exit 2)."""
    if phase == DRIVER:
        log = paths.local / "driver.log"
        if not log.exists():
            raise InputError(f"{log} does not exist: the run has no local driver log (executor "
                             f"{cfg.run.executor}); choose a phase with --phase")
        return LogChoice(r or 0, DRIVER, 0, 1, 1, (log,), log)
    rounds = _rounds_with_files(paths)
    if not rounds:
        raise RunError(f"{paths.root} has no round yet: nothing has logged")
    if r is None:
        r = rounds[-1]
    elif r not in rounds:
        raise InputError(f"round {r} has no files in {paths.root / 'rounds'}; rounds that exist: "
                         f"{', '.join(map(str, rounds))} (0-based)")
    phases = [p for p in cfg.phases_of_round(r) if _phase_has_files(paths, r, p)]
    valid = ", ".join(cfg.phases_of_round(r)) + (f", {DRIVER}" if (paths.local / "driver.log").exists() else "")
    if phase is None:
        if not phases:
            raise RunError(f"round {r} has started no phase yet; phases of round {r}: {valid}")
        phase = phases[-1]
    elif phase not in cfg.phases_of_round(r):
        raise InputError(f"round {r} has no phase {phase!r}; its phases: {valid}")
    n = shards_at(cfg, paths, r, phase)
    if shard is None:
        if n > 1:
            raise InputError(f"round {r} {phase} has {n} shards: choose one with --shard 0..{n - 1}")
        shard = 0
    elif not 0 <= shard < n:
        raise InputError(f"round {r} {phase} has no shard {shard}; its shards: 0..{n - 1}")
    worker_log = paths.phase_dir(r, phase) / f"shard_{shard:05d}.attempt.log"
    subs = _submissions(paths, r, phase, shard)
    attempts = max(1, len(subs))
    k = attempts if attempt is None else attempt
    if not 1 <= k <= attempts:
        kept = "1" if attempts == 1 else f"1..{attempts}"
        raise InputError(f"round {r} {phase} shard {shard} has no attempt {attempt}; attempts with logs: {kept}"
                         + ("" if subs else " (the local executor keeps the latest attempt's log only)"))
    files = _submitit_logs(paths, r, phase, subs[k - 1]) if subs else []
    latest = k == attempts
    if latest and worker_log.exists():
        files.append(worker_log)
    if not files:
        raise RunError(f"round {r} {phase} shard {shard} attempt {k} has written no log yet "
                       f"(looked for {worker_log}); it may still be waiting for a node")
    return LogChoice(r, phase, shard, k, attempts, tuple(files), worker_log if latest else None)


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
