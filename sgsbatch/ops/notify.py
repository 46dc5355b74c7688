"""What `sgsbatch watch` tells a person, and how: the events of one check and the `--notify CMD` command.

An event is a stall (`stall`: one `watch` repairs by itself, with what it did), a run that only a
person can continue (`needs-person`: a shard out of retries, a failed or a cancelled run; `watch`
then exits 1), or an alarm newly raised (`alarm`: one per alarm and shard, again only after it
cleared). `--notify CMD` runs CMD through the shell once per event, with the event in its
environment: SGSBATCH_RUN, SGSBATCH_RUN_DIR, SGSBATCH_EVENT, SGSBATCH_STATE (the run's state) and
SGSBATCH_MESSAGE (one line). A notify command that fails or hangs is reported, never fatal.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from sgsbatch.run.attempts import error_line
from sgsbatch.views.status import RunStatus

STALL, NEEDS_PERSON, ALARM = "stall", "needs-person", "alarm"
NOTIFY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Event:
    kind: str  # stall | needs-person | alarm
    message: str  # one line


def _alarm_key(a: dict[str, Any]) -> Hashable:
    return a["metric"], a.get("shard")


def events(st: RunStatus, action: str | None, raised: set[Hashable]) -> list[Event]:
    """The events of one `watch` check. `raised`: the alarms seen at the previous check, updated here
    (an alarm is an event when it appears, not at every check while it lasts)."""
    out = []
    if st.needs_person:
        out.append(Event(NEEDS_PERSON, st.message or f"run {st.name} is {st.state}"))
    elif st.state == "stalled":
        out.append(Event(STALL, st.message + (f" [watch: {action}]" if action else "")))
    now = {_alarm_key(a): a for a in st.alerts}
    out += [Event(ALARM, f"{a['metric']}: {a['message']}") for key, a in now.items() if key not in raised]
    raised.clear()
    raised.update(now)
    return out


def notify(command: str, st: RunStatus, event: Event) -> str | None:
    """Run the `--notify` command for one event; None when it succeeded, else why not (one line)."""
    env = {**os.environ, "SGSBATCH_RUN": st.name, "SGSBATCH_RUN_DIR": st.run_dir, "SGSBATCH_EVENT": event.kind,
           "SGSBATCH_STATE": st.state, "SGSBATCH_MESSAGE": event.message}
    try:
        p = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, timeout=NOTIFY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"the --notify command did not end within {NOTIFY_TIMEOUT_S:.0f} s"
    except OSError as e:
        return f"the --notify command could not start: {e}"
    if p.returncode != 0:
        return f"the --notify command exited with code {p.returncode}: {error_line(p.stderr or p.stdout)}"
    return None
