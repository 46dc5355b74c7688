"""A shard's attempts: every start of its worker (after a crash, a requeue, a `resume`), its log and its end.

The task supervisor (scheduling/supervisor.py) appends to `shard_N.attempts.jsonl` when it starts
a worker (`{"attempt": K, "start", "job", "host"}`; job: the Slurm array task `123_4`, or
`local`) and when the worker ends (`{"attempt": K, "end", "outcome", "rc", "error"}`; outcome:
done | crashed | stopped). The worker writes into `shard_N.attempt.log`; when attempt K + 1
starts, attempt K's log is renamed `shard_N.attempt-K.log`. So the latest attempt's log keeps its
name (what `logs --follow` reads) and every earlier one survives retries, requeues and `resume`,
which deletes none of these files. An attempt killed with its job (a preemption, `kill -9` of the
supervisor) has no end line. `error_line` turns a worker's output into the one line a failure is
reported with: the exception's own line, the rest being in the log.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.shards import Shard

CRASHED, STOPPED, DONE = "crashed", "stopped", "done"


@dataclass(frozen=True)
class Attempt:
    number: int  # 1-based
    start: float
    job: str  # the Slurm array task ("123_4") or "local"
    host: str
    end: float | None = None  # None: still running, or killed with its job
    outcome: str | None = None  # done | crashed | stopped
    rc: int | None = None
    error: str = ""  # crashed: the one-line reason


def _append(shard: Shard, record: dict[str, object]) -> None:
    shard.dir.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
    fd = os.open(shard.attempts_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def archived_log(shard: Shard, k: int) -> Path:
    return shard.dir / f"shard_{shard.index:05d}.attempt-{k}.log"


def start_attempt(shard: Shard, job: str) -> int:
    """Record a new attempt (its number is returned) and move the previous attempt's log aside."""
    k = 1 + sum(1 for rec in read_jsonl(shard.attempts_file) if "start" in rec)
    if k > 1 and shard.attempt_log.exists():
        os.replace(shard.attempt_log, archived_log(shard, k - 1))
    _append(shard, {"attempt": k, "start": time.time(), "job": job, "host": socket.gethostname()})
    return k


def end_attempt(shard: Shard, k: int, outcome: str, rc: int, error: str = "") -> None:
    _append(shard, {"attempt": k, "end": time.time(), "outcome": outcome, "rc": rc, "error": error})


def attempts(shard: Shard) -> list[Attempt]:
    """The shard's attempts, oldest first."""
    starts: dict[int, Attempt] = {}
    for rec in read_jsonl(shard.attempts_file):
        k = int(rec["attempt"])
        if "start" in rec:
            starts[k] = Attempt(k, float(rec["start"]), str(rec.get("job", "")), str(rec.get("host", "")))
        elif k in starts:
            a = starts[k]
            starts[k] = Attempt(a.number, a.start, a.job, a.host, float(rec["end"]), str(rec.get("outcome")),
                                rec.get("rc"), str(rec.get("error") or ""))
    return [starts[k] for k in sorted(starts)]


def attempt_log(shard: Shard, k: int, latest: int) -> Path:
    """Where attempt k's worker output is: the live log for the latest attempt, else its archived copy."""
    return shard.attempt_log if k == latest else archived_log(shard, k)


def error_line(output: str, limit: int = 300) -> str:
    """The one line that says why a worker failed: the exception line of its output's last Python
    traceback (the first unindented line after it), else its last non-empty line."""
    lines = [x.rstrip() for x in output.splitlines() if x.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last):"):
            line = next((x for x in lines[i + 1:] if not x.startswith((" ", "\t"))), None)
            if line is not None:
                return _cut(line, limit)
            break
    return _cut(lines[-1], limit) if lines else "(no output)"


def _cut(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."
