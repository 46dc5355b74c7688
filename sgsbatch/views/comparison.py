"""Comparing runs: their metrics as rows (run x round x metric) and the config keys in which they differ.

`read_metrics` is the one reader of a run's `metrics` table (the report's curves, `sgsbatch
metrics`); `metric_rows` lays several runs' out as rows, filtered by metric-name patterns
(`fnmatch`: `cost/*`) and rounds, with the round's start and end from the `rounds` table
(`rounds.started_at`/`completed_at`, round/timing.py) beside them; `write_rows` writes them as
CSV or JSON lines. `config_diff`: every key whose value is not the same in all runs (the
config each run has now, amendments included). Reads the databases only.
"""

from __future__ import annotations

import csv
import json
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, TextIO

from sqlmodel import select

from sgsbatch.config.loading import flat_config
from sgsbatch.state.schema import Metric, Round

if TYPE_CHECKING:
    from sgsbatch.run.handle import RunHandle

COLUMNS = ("run", "round", "metric", "value", "round_started_at", "round_completed_at")


def read_metrics(h: RunHandle) -> dict[int, dict[str, float]]:
    """Every metric row of the run: round -> name -> value."""
    with h.db.read() as s:
        rows = s.exec(select(Metric.round, Metric.name, Metric.value).where(Metric.run_id == h.run_id)).all()
    out: dict[int, dict[str, float]] = {}
    for rnd, name, value in rows:
        out.setdefault(rnd, {})[name] = value
    return dict(sorted(out.items()))


def round_times(h: RunHandle) -> dict[int, tuple[float | None, float | None]]:
    """round -> (started_at, completed_at) as recorded, None where not (0.0 in the table)."""
    with h.db.read() as s:
        rows = s.exec(select(Round.index, Round.started_at, Round.completed_at).where(Round.run_id == h.run_id)).all()
    return {i: (a or None, b or None) for i, a, b in rows}


def metric_rows(handles: list[RunHandle], patterns: tuple[str, ...] = (), rounds: tuple[int, ...] = ()
                ) -> list[dict[str, Any]]:
    """One row per run, round and metric (run order as given, then round, then metric name); only
    the metrics matching one of `patterns` (all without) and the `rounds` given (all without)."""
    out: list[dict[str, Any]] = []
    for h in handles:
        times = round_times(h)
        for r, values in read_metrics(h).items():
            if rounds and r not in rounds:
                continue
            start, end = times.get(r, (None, None))
            for name in sorted(values):
                if not patterns or any(fnmatchcase(name, p) for p in patterns):
                    out.append({"run": h.cfg.run.name, "round": r, "metric": name, "value": values[name],
                                "round_started_at": start, "round_completed_at": end})
    return out


def write_rows(rows: list[dict[str, Any]], out: TextIO, fmt: str) -> None:
    """`rows` as CSV with a header (`fmt` "csv"; empty cells for unknown times) or JSON lines ("json")."""
    if fmt == "json":
        for row in rows:
            out.write(json.dumps(row, sort_keys=True) + "\n")
        return
    assert fmt == "csv", fmt
    w = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)


def config_diff(handles: list[RunHandle]) -> dict[str, list[Any]]:
    """key -> its value in each run (None where a run lacks the key), for every key whose value
    differs between the runs (run.name left out: it names them); {} for one run or identical configs."""
    flats = [{k: v for k, v in flat_config(h.cfg).items() if k != "run.name"} for h in handles]
    keys = sorted(set().union(*flats)) if flats else []
    return {k: [f.get(k) for f in flats] for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flats}) > 1}
