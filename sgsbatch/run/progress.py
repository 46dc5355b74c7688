"""Progress lines that long work (generation, verification) writes to its worker log.

One line at most every `alerts.progress_every_s` seconds (and one at the end), e.g.
`progress r0 solve shard 3: 120/400 items (30.0%) 2.10 items/s ETA 2m13s`: plain lines a file
and `sgsbatch logs --follow` show as they are (no carriage returns). Written to stderr, which the
supervisor sends to the shard's attempt log. Training logs a line per optimizer step itself
(backends/trainer.py) and its rank 0 appends each step to `rounds/rNNNN/train/steps.jsonl`
(`record_train_step`): role, the fields of backends/train_steps.TrainStep (step, steps, loss, tokens,
step_s and the step's statistics), time; what `status` and the stuck alarm read (views/progress.py,
which also counts the item logs of the other phases) and the round's end writes to TensorBoard as
`train_step/*` points (round/step_metrics.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.paths import RunPaths

TRAIN_STEPS = "steps.jsonl"


def duration(seconds: float) -> str:
    """`3d04h`, `2h05m`, `4m10s`, `12s`: a human duration."""
    s = int(max(0.0, seconds))
    if s >= 86400:
        return f"{s // 86400}d{s % 86400 // 3600:02d}h"
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class ProgressLine:
    """Counts items done of `total` and writes a progress line at most every `every_s` seconds."""

    def __init__(self, label: str, total: int, done: int, every_s: float, out: TextIO | None = None,
                 clock: object = time.monotonic) -> None:
        self.label, self.total, self.done, self.every_s = label, total, done, every_s
        self._out = out
        self._clock = clock
        self._start = self._now()
        self._start_done = done
        self._last = self._start

    def _now(self) -> float:
        return float(self._clock())  # type: ignore[operator]

    def text(self) -> str:
        elapsed = self._now() - self._start
        new = self.done - self._start_done
        rate = new / elapsed if elapsed > 0 else 0.0
        pct = f" ({self.done / self.total:.1%})" if self.total else ""
        eta = f" ETA {duration((self.total - self.done) / rate)}" if rate > 0 and self.total >= self.done else ""
        return f"progress {self.label}: {self.done}/{self.total} items{pct} {rate:.2f} items/s{eta}"

    def step(self, n: int = 1) -> None:
        self.done += n
        now = self._now()
        if now - self._last >= self.every_s or self.done >= self.total:
            self._last = now
            self.write()

    def write(self) -> None:
        out = self._out or sys.stderr
        out.write(self.text() + "\n")
        out.flush()


def train_steps_file(paths: RunPaths, r: int) -> Path:
    """Round r's record of optimizer steps (the one home of this path)."""
    return paths.phase_dir(r, "train") / TRAIN_STEPS


def record_train_step(path: Path, record: dict[str, Any]) -> None:
    """Append one optimizer step's record (with the time now): one line, one write, so a reader
    never sees half of it (a torn line of a killed writer is skipped by `read_jsonl`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({**record, "time": time.time()}, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def train_steps(path: Path) -> list[dict[str, Any]]:
    """The steps recorded so far, oldest first (requeued attempts repeat the steps they redo)."""
    return read_jsonl(path)
