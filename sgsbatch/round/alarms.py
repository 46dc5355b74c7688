"""Alarms: what `status`, `watch` and a round's end judge about a run's health, in one place.

An alarm is {"metric": "alerts/<kind>", "message": ..., ...} (kinds in round/metrics.ALERT_KINDS).
Judged here, from the run's files: `verify_error_rate` (timeouts + errors over the proofs checked
by the round's finished verify shards, from their completion markers, above
`alerts.max_error_rate`), `verify_refusals` (proofs the verifier's own rules refused, over the proofs
checked by the round's finished verify shards, round/refusals.py, above `alerts.max_refused_rate`), `slow_phase` (a phase's wall time, or a running phase's elapsed time,
over `alerts.slow_phase_factor` x its average over the previous `alerts.slow_phase_rounds`
rounds), `disk_over_budget` (disk projected to the planned rounds, round/disk.py, above
`alerts.disk_budget_gb`; 0 = no budget, never judged). `alert_values` turns alarms into TensorBoard
scalars: per kind, the number of alarms raised (0 = none; stuck_shards: the stuck shards, slow_phase:
the slow phases). `round_end_values` is what a finished round writes (round/lifecycle.finish_round).
Not covered: stuck shards (a running phase's item logs: views/progress.py), acting on alarms (`resume`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from sgsbatch.config.schema import Config
from sgsbatch.round import metrics as M
from sgsbatch.round.disk import disk_usage
from sgsbatch.round.refusals import round_refusals, summary_text
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.paths import RunPaths, command
from sgsbatch.run.progress import duration
from sgsbatch.run.shards import phase_wall_s, shards


def verify_error_alarm(cfg: Config, paths: RunPaths, r: int) -> dict[str, Any] | None:
    """Round r's verify timeouts + errors over its checked proofs (finished shards), if over the limit."""
    proofs = bad = 0
    for s in shards(paths.phase_dir(r, "verify"), shards_at(cfg, paths, r, "verify")):
        if s.is_done():
            m = s.meta()
            proofs += int(m.get("proofs", 0))
            bad += int(m.get("timeout", 0)) + int(m.get("error", 0))
    if not (proofs and bad / proofs > cfg.alerts.max_error_rate):
        return None
    return {"metric": M.alert("verify_error_rate"), "value": round(bad / proofs, 4),
            "message": f"round {r} verify: {bad / proofs:.1%} of {proofs} proofs timed out or errored "
                       f"(alerts.max_error_rate {cfg.alerts.max_error_rate:.0%})"}


def refusal_alarm(cfg: Config, paths: RunPaths, r: int) -> dict[str, Any] | None:
    """Round r's refusals by the verifier's own rules over its checked proofs (finished shards), if over the limit."""
    s = round_refusals(cfg, paths, r)
    if s is None or not (s["proofs"] and s["refused"] / s["proofs"] > cfg.alerts.max_refused_rate):
        return None
    return {"metric": M.alert("verify_refusals"), "value": round(s["refused"] / s["proofs"], 4),
            "message": f"round {r} verify refused {summary_text(s, cfg.alerts.refused_items)} "
                       f"(alerts.max_refused_rate {cfg.alerts.max_refused_rate:.0%}); if an honest style is refused, "
                       "extend the verifier's allow-list (docs/verification.md)"}


def slow_phase_alarm(cfg: Config, paths: RunPaths, r: int, phase: str, wall_s: float,
                     running: bool) -> dict[str, Any] | None:
    """Round r's `phase` (running for, or done in, `wall_s`) against its recent average, if slow."""
    past = [w for w in (phase_wall_s(paths.phase_dir(q, phase), shards_at(cfg, paths, q, phase))
                        for q in range(max(0, r - cfg.alerts.slow_phase_rounds), r)) if w]
    if not past:
        return None
    average = sum(past) / len(past)
    if wall_s <= cfg.alerts.slow_phase_factor * average:
        return None
    return {"metric": M.alert("slow_phase"), "phase": phase, "value": round(wall_s, 1),
            "message": f"round {r} {phase} {'has run' if running else 'took'} {duration(wall_s)}, over "
                       f"{cfg.alerts.slow_phase_factor:g}x its recent average {duration(average)}"}


def disk_alarm(cfg: Config, paths: RunPaths, disk: Mapping[str, Any]) -> dict[str, Any] | None:
    """`disk` (round/disk.disk_usage) projected over `alerts.disk_budget_gb` (never with no budget)."""
    budget = cfg.alerts.disk_budget_gb
    if not (budget > 0 and disk["projected_bytes"] > budget * 1e9):
        return None
    return {"metric": M.alert("disk_over_budget"), "value": disk["projected_bytes"],
            "message": f"disk projected to {disk['projected_bytes'] / 1e9:.1f} GB by the end of {cfg.run.rounds} rounds, "
                       f"over alerts.disk_budget_gb {budget:g}; {_fewer_checkpoints(cfg, paths, disk)}"}


def _fewer_checkpoints(cfg: Config, paths: RunPaths, disk: Mapping[str, Any]) -> str:
    """The command that keeps fewer checkpoints from now on (or, when none can go, raises the budget)."""
    ck = cfg.checkpoints

    def amend(key: str, value: object) -> str:
        return command("resume", paths, "--set", f"{key}={value}")

    if ck.keep_every:
        return f"keep every {2 * ck.keep_every}th round's weights with `{amend('checkpoints.keep_every', 2 * ck.keep_every)}`"
    if ck.keep_last > 1:
        return f"keep fewer rounds' weights with `{amend('checkpoints.keep_last', ck.keep_last - 1)}`"
    need = math.ceil(disk["projected_bytes"] * 1.2 / 1e9)  # the projection and a fifth more
    return f"raise the budget with `{amend('alerts.disk_budget_gb', need)}` (no checkpoint left to drop)"


def alert_values(alarms: Iterable[Mapping[str, Any]], kinds: Iterable[str]) -> dict[str, float]:
    """`alerts/<kind>` -> the number of `alarms` of that kind, for each judged kind (0: none raised)."""
    values = {M.alert(k): 0.0 for k in kinds}
    for a in alarms:
        assert a["metric"] in values, f"{a['metric']} raised but not judged"
        values[a["metric"]] += 1.0
    return values


def round_end_values(cfg: Config, paths: RunPaths, r: int, metrics: Mapping[str, float]) -> dict[str, float]:
    """The alarms judged when round r ends, as TensorBoard values: verify_error_rate, verify_refusals, slow_phase
    (each phase's `wall_s/<phase>` in the round's `metrics`) and, with a budget, disk_over_budget
    (projected from r + 1 completed rounds). Not stuck_shards: a finished round has none running."""
    raised: list[dict[str, Any]] = []
    kinds = ["verify_error_rate", "verify_refusals", "slow_phase"]
    for alarm in (verify_error_alarm(cfg, paths, r), refusal_alarm(cfg, paths, r)):
        if alarm is not None:
            raised.append(alarm)
    for phase in cfg.phases_of_round(r):
        wall = metrics.get(M.wall_s(phase))
        alarm = None if wall is None else slow_phase_alarm(cfg, paths, r, phase, wall, running=False)
        if alarm is not None:
            raised.append(alarm)
    if cfg.alerts.disk_budget_gb > 0:
        kinds.append("disk_over_budget")
        alarm = disk_alarm(cfg, paths, disk_usage(cfg, paths, r + 1))
        if alarm is not None:
            raised.append(alarm)
    return alert_values(raised, kinds)
