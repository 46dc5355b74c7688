"""Live progress of a running phase, the alarms `status` raises, and `launch --dry-run`'s checkpoint projection.

Progress comes from the shard files only: items done by counting the lines of each item log
(`.partial.jsonl`, no JSON parsed), totals from `.total`, restarts from `.failures`, requeues at
the time limit from `.timelimits`, last progress from the item log's mtime. The train job's
progress is its optimizer steps (`steps.jsonl`, run/progress.py): its last progress is its last
step, or the start of its latest attempt if later. Alarms (names in round/metrics.py, `alerts/*`):
stuck shards (judged here, from the progress: an item phase's shard without a new item, the train
job without a new step, for longer than the bound of `stuck_after_s` / `train_stuck_after_s`; a
verify shard's progress includes its solve shard's, which it follows while streaming), and
verify timeout+error rate, verify refusals by the verifier's own rules (round/refusals.py), a phase running far longer than its recent average, disk projected over
`alerts.disk_budget_gb` (judged by round/alarms.py, which the round's end shares). Not covered
here: disk use (round/disk.py), stuck detection of init (no items, no steps; the supervisor's
time-limit rule covers it), acting on alarms (`resume` resubmits unfinished shards) and writing
them to TensorBoard (round/metrics.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sgsbatch.config.schema import TINY_RANDOM, Config
from sgsbatch.round.alarms import disk_alarm, refusal_alarm, slow_phase_alarm, verify_error_alarm
from sgsbatch.round.checkpoints import retained
from sgsbatch.round.metrics import alert
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.journal import latest_task
from sgsbatch.run.paths import RunPaths, command
from sgsbatch.run.progress import duration, train_steps, train_steps_file
from sgsbatch.run.shards import Shard, shards

SPARK = "▁▂▃▄▅▆▇█"
ITEM_PHASES = ("conjecture", "solve", "guide", "verify")  # the phases with item logs
STUCK_PHASES = (*ITEM_PHASES, "train")  # init is never "stuck"


def sparkline(values: list[float], lo: float = 0.0, hi: float | None = None) -> str:
    """One block character per value, scaled between lo and hi (default: the largest value)."""
    if not values:
        return ""
    top = max(values) if hi is None else hi
    span = top - lo
    return "".join(SPARK[0 if span <= 0 else min(len(SPARK) - 1, int((v - lo) / span * (len(SPARK) - 1) + 0.5))]
                   for v in values)


def stuck_after_s(cfg: Config, per_item_s: float | None) -> float:
    """`alerts.stuck_after_s`, or (0 = auto) `stuck_factor` x the phase's per-item time, floored."""
    a = cfg.alerts
    if a.stuck_after_s > 0:
        return a.stuck_after_s
    return max(a.stuck_floor_s, a.stuck_factor * (per_item_s or 0.0))


def train_stuck_after_s(cfg: Config, slowest_step_s: float | None) -> float:
    """How long the train job may go without a new optimizer step: `alerts.train_stuck_factor` x
    its slowest step so far, never less than `alerts.train_stuck_floor_s` (the floor alone before
    its first step: ingesting, loading the weights)."""
    a = cfg.alerts
    return max(a.train_stuck_floor_s, a.train_stuck_factor * (slowest_step_s or 0.0))


def train_progress(paths: RunPaths, r: int) -> dict[str, Any] | None:
    """Round r's training so far: the last optimizer step's role, step/steps, loss, tokens and time,
    the role's tokens so far, the slowest step; None before the first step."""
    records = train_steps(train_steps_file(paths, r))
    if not records:
        return None
    last = records[-1]
    tokens = {int(x["step"]): int(x["tokens"]) for x in records if x["role"] == last["role"]}  # a redone step once
    return {"role": last["role"], "step": int(last["step"]), "steps": int(last["steps"]), "loss": float(last["loss"]),
            "tokens": int(last["tokens"]), "step_s": float(last["step_s"]), "last_step_at": float(last["time"]),
            "role_tokens": sum(t for k, t in tokens.items() if k <= int(last["step"])),
            "slowest_step_s": max(float(x["step_s"]) for x in records)}


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return None


def phase_progress(cfg: Config, paths: RunPaths, r: int, phase: str, now: float | None = None) -> dict[str, Any]:
    """Items done/total, rate, ETA, slowest shard, requeues, restarts and stuck shards of one phase
    (the train phase: its optimizer steps under `train`)."""
    now = time.time() if now is None else now
    n = shards_at(cfg, paths, r, phase)
    trained = train_progress(paths, r) if phase == "train" else None
    solve_n = shards_at(cfg, paths, r, "solve") if phase == "verify" else 1
    rows: list[dict[str, Any]] = []
    for s in shards(paths.phase_dir(r, phase), n):
        done_marker = s.is_done()
        total = s.total()
        done = total if done_marker and total is not None else s.items_logged()
        started = s.started()
        last: float | None = started
        if s.partial.exists():
            last = s.partial.stat().st_mtime
        if phase == "verify" and started is not None:  # streaming: it waits while its solve shard works
            up = Shard(paths.phase_dir(r, "solve"), s.index % solve_n)
            last = max(t for t in (last, up.started(), _mtime(up.partial), _mtime(up.marker)) if t is not None)
        if phase == "train" and started is not None:  # the last step, or a later attempt's start (its pid file)
            step_at = None if trained is None else trained["last_step_at"]
            last = max(t for t in (started, _mtime(s.pid_file), step_at) if t is not None)
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
    if phase == "train":
        threshold = train_stuck_after_s(cfg, None if trained is None else trained["slowest_step_s"])
    else:
        threshold = stuck_after_s(cfg, sum(per_item) / len(per_item) if per_item else None)
    running = [x for x in rows if x["started"] is not None and not x["finished"] and not x["failed"]]
    stuck = [{"shard": x["shard"], "idle_s": round(now - x["last"], 1), "job_id": latest_task(paths.jobs_journal(r), phase, x["shard"])}
             for x in running if phase in STUCK_PHASES and x["last"] is not None and now - x["last"] > threshold]
    slowest = min(running, key=lambda x: x["done"] / x["total"] if x["total"] else 0.0, default=None)
    return {
        "round": r, "phase": phase, "shards": n, "shards_done": sum(x["finished"] for x in rows),
        "shards_started": len(starts), "items_done": done, "items_total": total,
        "rate_items_per_s": round(rate, 4), "elapsed_s": round(elapsed, 1),
        "eta_s": round((total - done) / rate, 1) if total is not None and rate > 0 else None,
        "slowest_shard": None if slowest is None else {k: slowest[k] for k in ("shard", "done", "total")},
        "requeues": sum(x["requeues"] for x in rows), "restarts": sum(x["restarts"] for x in rows),
        "stuck_after_s": threshold, "stuck": stuck, "train": trained,
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


def role_checkpoint_gb(cfg: Config) -> tuple[float, str]:
    """One role's saved weights in GB and where the figure comes from: tiny-random models (every role
    tiny-random) their exact size, fp32 (`models/tiny.tiny_param_count`); otherwise
    `checkpoints.estimate_gb_per_role` (a 7B model in bf16)."""
    from sgsbatch.models.tiny import tiny_param_count

    if all(getattr(cfg.models, role) == TINY_RANDOM for role in ("solver", "conjecturer")):
        t = cfg.models.tiny
        n = tiny_param_count(vocab_size=t.vocab_size, hidden_size=t.hidden_size, num_layers=t.num_layers)
        return n * 4 / 1e9, "tiny-random models, fp32"
    return cfg.checkpoints.estimate_gb_per_role, "checkpoints.estimate_gb_per_role"


def projection_text(cfg: Config) -> str:
    """The `launch --dry-run` line: checkpoints kept at the end and their estimated size."""
    roles = trained_roles(cfg)
    gb, source = role_checkpoint_gb(cfg)
    kept, size = checkpoint_projection(cfg, roles * gb * 1e9)
    shown = f"{size / 1e9:.0f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB"
    per = f"{gb:g} GB" if gb >= 1 else f"{gb * 1e3:.2g} MB"
    text = (f"checkpoints: {kept} rounds kept at the end of {cfg.run.rounds} rounds (checkpoints.keep_last="
            f"{cfg.checkpoints.keep_last}, keep_every={cfg.checkpoints.keep_every}) x {roles} roles x "
            f"{per} ({source}) = {shown}")
    if cfg.train.optimizer == "carry":  # the newest state a role, two while a round trains (backends/optimizer_state.py)
        from sgsbatch.views.projection import optimizer_write_factor

        state = roles * optimizer_write_factor(cfg) * gb * 1e9
        size += 2 * state
        text += f"; + the carried optimizer states (train.optimizer = \"carry\"): {2 * state / 1e9:.0f} GB at most"
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
        train = progress["phase"] == "train"
        for s in progress["stuck"]:
            what = "no optimizer step" if train else "no item progress"
            out.append({"metric": alert("stuck_shards"), "shard": s["shard"], "job_id": s["job_id"],
                        "message": f"round {r} {progress['phase']} shard {s['shard']} (job {s['job_id'] or 'local'}) "
                                   f"made {what} for {duration(s['idle_s'])} "
                                   f"(threshold {duration(progress['stuck_after_s'])}); `{command('resume', paths)}` "
                                   "resubmits it"})
        out.append(slow_phase_alarm(cfg, paths, r, progress["phase"], progress["elapsed_s"], running=True))
    out.append(verify_error_alarm(cfg, paths, r))
    out.append(refusal_alarm(cfg, paths, r))
    if disk is not None:
        out.append(disk_alarm(cfg, paths, disk))
    return [a for a in out if a is not None]
