"""How a run's times, rounds and ending are said, the same in every command and page: `when` (a UTC time),
`timing_short` and `timing_text` (elapsed, round durations, the projected finish), `rounds_text` (the one
convention for rounds), `finished` (the states `status --watch` stops at). Plain text, no colour (the CLI's
console adds it); used by the CLI, the report and the watcher job.
"""

from __future__ import annotations

import time
from typing import Any

from sgsbatch.run.progress import duration


def when(t: float) -> str:
    """An epoch time for people, in UTC: `2026-11-25 18:40 UTC`."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def timing_short(t: dict[str, Any] | None, state: str) -> str:
    """`; elapsed 3h12m, 41m00s a round, ETA 2h30m` for one status line ("" when nothing is known)."""
    if not t:
        return ""
    parts = [("took " if state == "completed" else "elapsed ") + duration(t["elapsed_s"])]
    if t.get("mean_round_s") is not None:
        parts.append(f"{duration(t['mean_round_s'])} a round")
    if t.get("eta_s") is not None:
        parts.append(f"ETA {duration(t['eta_s'])}")
    return "; " + ", ".join(parts)


GOING_ON = ("pending", "running")  # states with a projected finish; a stalled run finishes only once resumed


def timing_text(t: dict[str, Any], state: str) -> str:
    """The times of `status RUN`: launch, elapsed, round durations, the running round, the projected finish."""
    out = [f"launched {when(t['started_at'])}, " + ("took " if state == "completed" else "elapsed ")
           + duration(t["elapsed_s"])]
    rs = t.get("round_s") or {}
    if rs:
        last = rs[max(rs)]
        out.append(f"rounds take {duration(t['mean_round_s'])} on average ({len(rs)} timed; last "
                   f"{duration(last)})")
    if t.get("current_s") is not None:
        out.append(f"round {t['current_round']} running for {duration(t['current_s'])}")
    if t.get("eta_s") is not None and state in GOING_ON:
        out.append(f"projected finish in {duration(t['eta_s'])} (about {when(t['finish_at'])})")
    elif state not in GOING_ON and state != "completed":
        out.append(f"{state}: no projected finish")
    elif state == "completed" and t.get("finish_at"):
        out.append(f"finished {when(t['finish_at'])}")
    return "; ".join(out)


def rounds_text(round_: int | None, rounds_completed: int, rounds: int, completed: bool = False,
                phase: str = "") -> str:
    """Where a run is, in the one convention for rounds (docs/operating.md): the round as stored, 0-based
    as in `rounds/r0002`, job names and `--round`, and counts that say they are counts:
    `round 2 conjecture (2 of 3 rounds completed)`; a completed run `(3 of 3 rounds completed)`."""
    counts = f"({rounds_completed} of {rounds} rounds completed)"
    return counts if completed or round_ is None else f"round {round_}{f' {phase}' if phase else ''} {counts}"


def finished(st: dict[str, Any]) -> bool:
    """A state `status --watch` stops at: ended (completed, failed, cancelled), or stalled on a shard
    out of retries (a person must fix its cause; other stalls are repaired by `resume`/`watch`)."""
    from sgsbatch.scheduling.liveness import StallReason

    return st["state"] in ("completed", "failed", "cancelled") or (
        st["state"] == "stalled" and st.get("stall") is not None and not StallReason(st["stall"]).repairable)
