"""`sgsbatch timeline RUN`: each completed round's critical path (phase by phase: waiting, start-up,
work) and the GPU and CPU time it left idle, from the times the run recorded (views/critical_path.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sgsbatch.errors import InputError
from sgsbatch.views.critical_path import Resource, RoundTimeline, round_timeline

if TYPE_CHECKING:
    from sgsbatch.run.handle import RunHandle


def run_timelines(h: RunHandle, only: int | None = None) -> list[RoundTimeline]:
    """The completed rounds' timelines (`only`: that round, an InputError unless it completed)."""
    from sgsbatch.run.handle import check_round

    check_round(only, h.cfg)
    rounds = [only] if only is not None else range(h.cfg.run.rounds)
    out = []
    for r in rounds:
        tl = round_timeline(h.cfg, h.paths, r) if 0 <= r < h.cfg.run.rounds else None
        if tl is None and only is not None:
            raise InputError(f"run {h.cfg.run.name}: round {r} has no completed timeline (rounds 0-"
                             f"{h.cfg.run.rounds - 1}; a round counts once every phase's tasks ended)")
        if tl is not None:
            out.append(tl)
    return out


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _resource(name: str, res: Resource) -> str:
    if res.peak == 0:
        return f"  {name}: none held (the config's phases ask for no {name})"
    share = f" ({res.idle_share:.0%} of the pool)" if res.idle_share is not None else ""
    return (f"  {name}: pool {res.peak} x round = {_s(res.pool_s)} {name}-s; start-up {_s(res.startup_s)}, "
            f"work {_s(res.work_s)}, idle {_s(res.idle_s)}{share}")


def timeline_text(tl: RoundTimeline) -> str:
    """One round's critical path as a table, its totals and its idle GPU and CPU time."""
    lines = [f"round {tl.round}: {_s(tl.round_s)} s on the critical path (every phase waits for the one before; "
             f"longest: {tl.critical.phase})",
             f"  {'phase':<11}{'tasks':>6}{'waiting s':>12}{'start-up s':>12}{'work s':>12}{'path s':>12}{'share':>7}"]
    for p in tl.phases:
        share = p.path_s / tl.round_s if tl.round_s > 0 else 0.0
        lines.append(f"  {p.phase:<11}{len(p.tasks):>6}{_s(p.wait_s):>12}{_s(p.startup_s):>12}{_s(p.work_s):>12}"
                     f"{_s(p.path_s):>12}{share:>7.0%}")
    t = tl.totals()
    lines.append(f"  {'total':<11}{'':>6}{_s(t['wait_s']):>12}{_s(t['startup_s']):>12}{_s(t['work_s']):>12}"
                 f"{_s(tl.round_s):>12}")
    lines += [_resource("GPU", tl.resource("gpus")), _resource("CPU", tl.resource("cpus"))]
    return "\n".join(lines)


def timelines_json(tls: list[RoundTimeline]) -> list[dict[str, Any]]:
    return [tl.to_json() for tl in tls]
