"""Live progress of a running phase, the alarms `status` raises, and `launch --dry-run`'s checkpoint projection.

Progress comes from the shard files only: items done by counting the lines of each item log
(`.partial.jsonl`, no JSON parsed), totals from `.total`, restarts from `.failures`, requeues at
the time limit from `.timelimits`, last progress from the item log's mtime. Alarms (names in
round/metrics.py, `alerts/*`): stuck shards (judged here, from the progress), and verify
timeout+error rate, a phase running far longer than its recent average, disk projected over
`alerts.disk_budget_gb` (judged by round/alarms.py, which the round's end shares). Not covered
here: disk use (round/disk.py), stuck detection of init and train (no item logs: their progress is
training steps; the supervisor's time-limit rule covers them), acting on alarms (`resume`
resubmits unfinished shards) and writing them to TensorBoard (round/metrics.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sgsbatch.config.schema import Config
from sgsbatch.round.alarms import disk_alarm, slow_phase_alarm, verify_error_alarm
from sgsbatch.round.checkpoints import retained
from sgsbatch.round.metrics import alert
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.journal import read_journal
from sgsbatch.run.paths import RunPaths, command
from sgsbatch.run.progress import duration
from sgsbatch.run.shards import shards

SPARK = "▁▂▃▄▅▆▇█"
ITEM_PHASES = ("conjecture", "solve", "guide", "verify")  # the phases with item logs; init/train are never "stuck"


def sparkline(values: list[float], lo: float = 0.0, hi: float | None = None) -> str:
    """One block character per value, scaled between lo and hi (default: the largest value)."""
    if not values:
        return ""
    top = max(values) if hi is None else hi
    span = top - lo
    return "".join(SPARK[0 if span <= 0 else min(len(SPARK) - 1, int((v - lo) / span * (len(SPARK) - 1) + 0.5))]
                   for v in values)


def _job_of(paths: RunPaths, r: int, phase: str, shard: int) -> str | None:
    for rec in reversed(read_journal(paths.jobs_journal(r))):
        ids = [int(s) for s in rec.get("shards", [])]
        if rec.get("phase") == phase and shard in ids:
            return f"{rec['job_id']}_{ids.index(shard)}"
    return None


def stuck_after_s(cfg: Config, per_item_s: float | None) -> float:
    """`alerts.stuck_after_s`, or (0 = auto) `stuck_factor` x the phase's per-item time, floored."""
    a = cfg.alerts
    if a.stuck_after_s > 0:
        return a.stuck_after_s
    return max(a.stuck_floor_s, a.stuck_factor * (per_item_s or 0.0))


def phase_progress(cfg: Config, paths: RunPaths, r: int, phase: str, now: float | None = None) -> dict[str, Any]:
    """Items done/total, rate, ETA, slowest shard, requeues, restarts and stuck shards of one phase."""
    now = time.time() if now is None else now
    n = shards_at(cfg, paths, r, phase)
    rows: list[dict[str, Any]] = []
    for s in shards(paths.phase_dir(r, phase), n):
        done_marker = s.is_done()
        total = s.total()
        done = total if done_marker and total is not None else s.items_logged()
        started = s.started()
        last: float | None = started
        if s.partial.exists():
            last = s.partial.stat().st_mtime
        rows.append({"shard": s.index, "done": done, "total": total, "finished": done_marker, "started": started,
                     "last": last, "failed": s.failed_marker.exists(), "restarts": s.failure_count(),
                     "requeues": _count_lines(s.time_limits)})
    done = sum(x["done"] for x in rows)
    totals = [x["total"] for x in rows]
    total = sum(t for t in totals if t is not None) if all(t is not None for t in totals) else None
    starts = [x["started"] for x in rows if x["started"] is not None]
    elapsed = now - min(starts) if starts else 0.0
    rate = done / elapsed if elapsed > 0 and done else 0.0
    per_item = [(now - x["started"]) / x["done"] for x in rows if x["started"] and x["done"] and not x["finished"]]
    threshold = stuck_after_s(cfg, sum(per_item) / len(per_item) if per_item else None)
    running = [x for x in rows if x["started"] is not None and not x["finished"] and not x["failed"]]
    stuck = [{"shard": x["shard"], "idle_s": round(now - x["last"], 1), "job_id": _job_of(paths, r, phase, x["shard"])}
             for x in running if phase in ITEM_PHASES and x["last"] is not None and now - x["last"] > threshold]
    slowest = min(running, key=lambda x: x["done"] / x["total"] if x["total"] else 0.0, default=None)
    return {
        "round": r, "phase": phase, "shards": n, "shards_done": sum(x["finished"] for x in rows),
        "shards_started": len(starts), "items_done": done, "items_total": total,
        "rate_items_per_s": round(rate, 4), "elapsed_s": round(elapsed, 1),
        "eta_s": round((total - done) / rate, 1) if total is not None and rate > 0 else None,
        "slowest_shard": None if slowest is None else {k: slowest[k] for k in ("shard", "done", "total")},
        "requeues": sum(x["requeues"] for x in rows), "restarts": sum(x["restarts"] for x in rows),
        "stuck_after_s": threshold, "stuck": stuck,
    }


def _count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def checkpoint_projection(cfg: Config, bytes_per_checkpoint: float) -> tuple[int, float]:
    """(round checkpoints kept at the end of the planned rounds, bytes): what `launch --dry-run` prints."""
    kept = sum(retained(cfg, r, cfg.run.rounds - 1) for r in range(cfg.run.rounds))
    return kept, kept * bytes_per_checkpoint


def trained_roles(cfg: Config) -> int:
    """Roles whose weights each round saves: the Solver, and the Conjecturer unless frozen or off."""
    return 1 + int(cfg.conjecturer.enabled and cfg.conjecturer.train)


def projection_text(cfg: Config) -> str:
    """The `launch --dry-run` line: checkpoints kept at the end and their estimated size."""
    roles = trained_roles(cfg)
    kept, size = checkpoint_projection(cfg, roles * cfg.checkpoints.estimate_gb_per_role * 1e9)
    text = (f"checkpoints: {kept} rounds kept at round {cfg.run.rounds} (checkpoints.keep_last="
            f"{cfg.checkpoints.keep_last}, keep_every={cfg.checkpoints.keep_every}) x {roles} roles x "
            f"{cfg.checkpoints.estimate_gb_per_role:g} GB (checkpoints.estimate_gb_per_role) = {size / 1e9:.0f} GB")
    budget = cfg.alerts.disk_budget_gb
    if budget > 0 and size > budget * 1e9:
        text += f"; over alerts.disk_budget_gb {budget:g}: raise checkpoints.keep_every or lower keep_last"
    return text


def alarms(cfg: Config, paths: RunPaths, r: int, progress: dict[str, Any] | None,
           disk: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The alarms raised now: each {"metric": "alerts/...", "message": ..., ...}; stuck shards from
    `progress` (phase_progress), the others judged by round/alarms.py."""
    out: list[dict[str, Any] | None] = []
    if progress is not None:
        for s in progress["stuck"]:
            out.append({"metric": alert("stuck_shards"), "shard": s["shard"], "job_id": s["job_id"],
                        "message": f"round {r} {progress['phase']} shard {s['shard']} (job {s['job_id'] or 'local'}) "
                                   f"made no item progress for {duration(s['idle_s'])} "
                                   f"(threshold {duration(progress['stuck_after_s'])}); `{command('resume', paths)}` "
                                   "resubmits it"})
        out.append(slow_phase_alarm(cfg, paths, r, progress["phase"], progress["elapsed_s"], running=True))
    out.append(verify_error_alarm(cfg, paths, r))
    if disk is not None:
        out.append(disk_alarm(cfg, paths, disk))
    return [a for a in out if a is not None]
