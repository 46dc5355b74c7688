"""Progress lines that long work (generation, verification) writes to its worker log.

One line at most every `alerts.progress_every_s` seconds (and one at the end), e.g.
`progress r0 solve shard 3: 120/400 items (30.0%) 2.10 items/s ETA 2m13s`: plain lines a file
and `sgsbatch logs --follow` show as they are (no carriage returns). Written to stderr, which the
supervisor sends to the shard's attempt log. Not covered: training (its steps are logged by the
trainer) and the reading side (ops/progress.py counts the item logs instead).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


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
