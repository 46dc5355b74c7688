"""Progress lines in worker logs (run/progress.py): throttled, complete, no carriage returns;
item counts read back by counting lines (run/shards.py)."""

from __future__ import annotations

import io
from pathlib import Path

from sgsbatch.run.progress import ProgressLine, duration
from sgsbatch.run.shards import Shard


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_lines_are_throttled_and_end_with_the_total() -> None:
    out, clock = io.StringIO(), Clock()
    p = ProgressLine("r0 solve shard 1", total=10, done=2, every_s=5.0, out=out, clock=clock)
    for _ in range(8):
        clock.t += 1.0
        p.step()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) == 2  # at t=5 and at the end (t=8)
    assert lines[0].startswith("progress r0 solve shard 1: 7/10 items (70.0%) 1.00 items/s ETA 3s")
    assert lines[-1].startswith("progress r0 solve shard 1: 10/10 items (100.0%)")


def test_duration() -> None:
    assert (duration(12), duration(250), duration(7500)) == ("12s", "4m10s", "2h05m")
    assert (duration(86399), duration(90000)) == ("23h59m", "1d01h")  # a run's elapsed time and ETA


def test_item_count_and_total(tmp_path: Path) -> None:
    s = Shard(tmp_path, 3)
    assert s.items_logged() == 0 and s.total() is None
    for i in range(5):
        s.append_item({"key": f"k{i}"})
    s.set_total(9)
    assert s.items_logged() == 5 and s.total() == 9
