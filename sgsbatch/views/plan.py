"""`sgsbatch plan` and `launch --dry-run`'s run projection; projected against actual for `status` and the report.

The arithmetic is views/projection.py's. Here: the target count (the data file's, or
`projection.hub_targets` for a hub id: a plan downloads nothing), the figures (the `[projection]`
keys, where a passed canary measured the same models, engine, verifier, trainer and resources:
canary/record.measured), the text and JSON `plan` prints, and the comparison with the rounds a
run completed (`round/timing.py`'s durations, the `wall_s/<phase>` metrics).

What a canary replaces (`canary_figures`): `model_load_s` (its engines' start), `repl_start_s`
(its REPL's `import Mathlib`), `checkpoint_write_s` (one role's weights at its checkpoint write
speed). Its rates bound the published ones only: its decode ran a few sequences at once, so its
tokens/s is a floor on an engine's batched throughput (`decode_short_tokens_per_s` is raised to
it); its Lean proofs are short and its cheats refused early, so its proofs/s is a ceiling
(`lean_proofs_per_s` is lowered to it). With `solver.mode = "search"` its known proof replayed
tactic by tactic (canary/search.py) gives the median tactic time: a few easy tactics, where a
search's tactics include failing and timed-out ones, so it is a floor (`lean_tactic_s` is raised
to it).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sgsbatch.canary.record import canary_dir, measured
from sgsbatch.config.loading import is_path_like
from sgsbatch.config.schema import Config
from sgsbatch.round import metrics as M
from sgsbatch.run.progress import duration
from sgsbatch.views.eval_projection import EvalPlan, eval_plan
from sgsbatch.views.projection import (
    ROLLOUT_FIGURES,
    SEARCH_FIGURES,
    Advice,
    Figures,
    Projection,
    advise,
    decode_tokens_per_s,
    pace_cpus,
    project,
    published,
)
from sgsbatch.views.reference_projection import ReferencePlan
from sgsbatch.views.rollout_projection import RolloutPlan
from sgsbatch.views.search_projection import search_text

if TYPE_CHECKING:
    from sgsbatch.run.handle import RunHandle


def target_count(cfg: Config, where: str = "config") -> tuple[int, str]:
    """(targets, where the count comes from): a data file's good rows, or `projection.hub_targets`."""
    if not is_path_like(cfg.data.source):
        n = min(cfg.projection.hub_targets, cfg.data.limit or cfg.projection.hub_targets)
        return n, f"projection.hub_targets: data.source {cfg.data.source} is a hub id, not downloaded"
    from sgsbatch.logic.data import load_data_source

    loaded = load_data_source(cfg.data, where)
    return len(loaded.targets), f"from {cfg.data.source}"


def canary_figures(cfg: Config, figures: Figures) -> tuple[Figures, str]:
    """`figures` with what a passed canary measured for `cfg` (module docstring), and a line saying so."""
    try:
        rec = measured(cfg.run.runs_dir, cfg)
    except (OSError, ValueError) as e:  # a damaged canary record: the published figures, and why
        return figures, f"the canary records in {canary_dir(cfg.run.runs_dir)} cannot be read ({e})"
    if rec is None:
        return figures, (f"no passed canary of these models, engine, verifier, trainer and resources in "
                         f"{canary_dir(cfg.run.runs_dir)}")
    found: dict[str, list[float]] = defaultdict(list)
    for row in rec.get("rows", []):
        for name, value in (row.get("measures") or {}).items():
            found[name].append(float(value))
    label = f"canary {rec.get('fingerprint')} ({rec.get('site') or 'this site'})"
    if not found:
        return figures, f"{label} passed but recorded no measurements (run it again): published figures"

    def mean(name: str) -> float:
        return sum(found[name]) / len(found[name])

    replaced: dict[str, tuple[float, str]] = {}
    for name in ("model_load_s", "repl_start_s"):
        if found[name]:
            replaced[name] = (mean(name), "measured")
    if found["checkpoint_bytes_per_s"]:
        secs = cfg.checkpoints.estimate_gb_per_role * 1e9 / max(mean("checkpoint_bytes_per_s"), 1.0)
        replaced["checkpoint_write_s"] = (secs, "its checkpoint write speed")
    decode = mean("decode_tokens_per_s_per_gpu") if found["decode_tokens_per_s_per_gpu"] else 0.0
    if decode > figures["decode_short_tokens_per_s"]:
        replaced["decode_short_tokens_per_s"] = (decode, "a floor")
    if found["lean_proofs_per_s"] and mean("lean_proofs_per_s") < figures["lean_proofs_per_s"]:
        replaced["lean_proofs_per_s"] = (mean("lean_proofs_per_s"), "a ceiling")
    if found["lean_tactic_s"] and mean("lean_tactic_s") > figures["lean_tactic_s"]:
        replaced["lean_tactic_s"] = (mean("lean_tactic_s"), "a floor")
    f = figures
    for name, (value, how) in replaced.items():
        f = f.with_figure(name, value, f"{label}: {how}")
    used = list(replaced)
    return f, f"{label} passed; its figures used: {', '.join(used) or 'none (within the published bounds)'}"


@dataclass(frozen=True)
class RunPlan:
    """What `plan` prints: the projection of `cfg`, the shard advice, and where their inputs came from."""

    cfg: Config
    projection: Projection
    advice: Advice | None
    targets_from: str
    canary: str

    def to_json(self) -> dict[str, Any]:
        """`plan --json`: the projection (round/projection.Projection.to_json), advice, and sources."""
        return {**self.projection.to_json(), "targets_from": self.targets_from, "canary": self.canary,
                "advice": self.advice.to_json() if self.advice else None}


def make_plan(cfg: Config, targets: int | None = None, where: str = "config") -> RunPlan:
    """The plan of `cfg`; `targets`: the count when known (launch's dry run loaded them), `where`: the
    config file, for errors."""
    count, source = ((targets, f"from {cfg.data.source}") if targets is not None and targets >= 0
                     else target_count(cfg, where))
    figures, canary = canary_figures(cfg, published(cfg))
    proj = project(cfg, count, figures)
    if cfg.eval.every_rounds > 0 and cfg.eval.sets:
        problems, uncounted = eval_problem_count(cfg, where)
        proj = replace(proj, eval=eval_plan(cfg, figures, decode_tokens_per_s(cfg, figures), problems, uncounted))
    return RunPlan(cfg, proj, advise(cfg, count, figures), source, canary)


def eval_problem_count(cfg: Config, where: str = "config") -> tuple[int, tuple[str, ...]]:
    """(problems of one evaluation, the sets not counted): each set's usable rows (a file, read like data.source),
    a hub set's `eval.limit` when set (hub sets are not downloaded here), else it is not counted."""
    from sgsbatch.logic.data import load_data_source

    e, total, uncounted = cfg.eval, 0, []
    for name, source in sorted(e.sets.items()):
        if is_path_like(source):
            total += len(load_data_source(e.set_data(name), where, key=f"eval.sets.{name}").targets)
        elif e.limit:
            total += e.limit
        else:
            uncounted.append(name)
    return total, tuple(uncounted)


def _n(x: float) -> str:
    return f"{x / 1e9:.1f}G" if x >= 1e9 else f"{x / 1e6:.1f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e4 else f"{x:,.0f}"


def _hours(x: float | None) -> str:
    return "-" if x is None else "0" if x == 0 else f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def _of(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def advice_text(adv: Advice | None, proj: Projection | None = None) -> str:
    if adv is None:
        if proj is not None and proj.projected and proj.not_projected:
            return (f"advice: none ({', '.join(proj.not_projected)} not projected: shard counts are not judged on "
                    "part of a round)")
        return "advice: none (no phase is projected)" if proj is None or not proj.projected else "advice: none"
    before = adv.before.phase(adv.phase)
    assert before is not None and before.on_path_s is not None
    head = (f"advice: {adv.longest} is the longest phase"
            + ("" if adv.longest == adv.phase else f" (one job: slurm.train.nodes adds GPUs); of the sharded "
               f"phases {adv.phase} is") + f" ({duration(before.on_path_s)} of a {duration(adv.before.round_s)} round)")
    if adv.after is None:
        more = f"--set {adv.budget_key}={2 * max(1, adv.budget)}"
        return (f"{head}; {before.shards} tasks of {_of(adv.per_task, adv.resource)} within {adv.budget_key} = "
                f"{_of(adv.budget, adv.resource)}: more shards would not shorten it (`{more}` shows what a "
                "larger budget buys)")
    ph = adv.after.phase(adv.phase)
    assert ph is not None and ph.on_path_s is not None
    return (f"{head}; within {adv.budget_key} = {_of(adv.budget, adv.resource)}: `{adv.set_args()}` -> {adv.phase} "
            f"{duration(ph.on_path_s)}, round {duration(adv.after.round_s)}, run {adv.after.run_days:.1f} days, "
            f"{_hours(adv.after.rounds * adv.after.hours('gpu'))} GPU-hours (a launched run takes them with "
            "`resume --set ... --method-change --from-round`)")


def plan_text(p: RunPlan) -> str:
    """The projection as `plan` and `launch --dry-run` print it."""
    proj, cfg = p.projection, p.cfg
    conj = proj.phase("conjecture")
    drawn = (f"{proj.sampled:,} targets a round (a rollout batch: solver.rollout_prompts) of {proj.targets:,}"
             if 0 <= proj.sampled < proj.targets else f"{proj.targets:,} targets")
    lines = [f"projection: {proj.rounds} rounds of {drawn} ({p.targets_from})"
             + (f", {conj.items:,.0f} conjectures a round" if conj else ""),
             f"  {'phase':<11}{'tasks':<15}{'work a round':<30}{'rate a task':<19}{'task':>8}{'wall':>9}"
             f"{'GPU-h':>8}{'CPU-h':>8}"]
    for ph in proj.phases:
        kind = f"{ph.gpus} GPU" if ph.gpus else f"{ph.cpus} CPU"
        work = f"{_n(ph.items)} {ph.unit}" + (f", {_n(ph.tokens)} tokens" if ph.tokens else "")
        rate = "no GPU: not projected" if ph.rate is None else (
            f"{ph.rate:.3g} proofs/s" if ph.phase == "verify" else f"{_n(ph.rate)} tokens/s"
            + (" + Lean" if ph.unit == "searches" else ""))
        times = "".join(f"{'-' if t is None else duration(t):>{w}}" for t, w in ((ph.task_s, 8), (ph.wall_s, 9)))
        streams = "" if ph.path_s is None else f"  streams behind solve: {duration(ph.path_s)} after solve's end"
        lines.append(f"  {ph.phase:<11}{ph.shards:>3} x {kind:<9}{work:<30}{rate:<19}{times}"
                     f"{_hours(ph.gpu_hours):>8}{_hours(ph.cpu_hours):>8}{streams}")
    crit = proj.critical
    if crit is None or crit.on_path_s is None:
        lines.append("  round: not projected (no phase has a figure)")
    else:
        path = " -> ".join(x.phase for x in proj.projected)
        lines.append(f"  round: {duration(proj.round_s)}, {_hours(proj.hours('gpu'))} GPU-hours, "
                     f"{_hours(proj.hours('cpu'))} CPU-hours; critical path {path}"
                     f" (one after another), longest {crit.phase} {duration(crit.on_path_s)} "
                     f"({crit.on_path_s / proj.round_s:.0%})")
        lines.append(f"  run: {proj.rounds} rounds = {proj.run_days:.1f} days, "
                     f"{_hours(proj.rounds * proj.hours('gpu'))} GPU-hours, "
                     f"{_hours(proj.rounds * proj.hours('cpu'))} CPU-hours (round 0's init job not counted)")
        if proj.reference is not None:
            lines.append(reference_text(proj.reference, proj.rounds * proj.hours("gpu")))
    if proj.eval is not None:
        lines.append(eval_text(proj.eval))
    solve = proj.phase("solve")
    if proj.search is not None and solve is not None:
        lines += search_text(proj.search, solve.gpu_hours, solve.cpus)
    if proj.rollout is not None:
        lines += rollout_text(proj.rollout, cfg.solver.colocated_steps)
    if proj.not_projected:
        lines.append(f"  not projected: {', '.join(proj.not_projected)} (generation or training without GPUs: "
                     "no figure covers it)")
    if cfg.simulated:
        lines.append("  SIMULATED components: the figures are those of the real ones")
    by_source: dict[str, list[str]] = defaultdict(list)
    for name, value in proj.figures.values.items():
        if (name in SEARCH_FIGURES and proj.search is None) or (name in ROLLOUT_FIGURES and proj.rollout is None):
            continue
        by_source[proj.figures.sources[name]].append(f"{name}={value:.4g}")
    lines += [f"  figures, {src}: {', '.join(names)}" for src, names in by_source.items()]
    lines.append(f"  canary figures: {p.canary}")
    lines.append("  " + advice_text(p.advice, proj))
    verify, pace = proj.phase("verify"), pace_cpus(proj)
    if verify is not None and pace is not None:
        held = verify.shards * verify.cpus
        lines.append(f"  verify streams behind solve: {pace:,} Lean cores keep pace with its decoding; this config "
                     f"holds {held:,} ({verify.shards} x {verify.cpus})"
                     + (", idle while they wait for proofs (shards.verify and slurm.verify.cpus set them)"
                        if held > 1.5 * pace else ""))
    return "\n".join(lines)


def eval_text(ev: EvalPlan) -> str:
    """Held-out evaluation's jobs (views/eval_projection.py): beside the chain, their own GPU- and CPU-hours."""
    job = "not projected (no GPU in slurm.solve)" if ev.job_s is None else duration(ev.job_s)
    left = f"; not counted (hub ids without eval.limit): {', '.join(ev.uncounted)}" if ev.uncounted else ""
    return (f"  held-out evaluation (eval.every_rounds = {ev.every_rounds}): {ev.evaluations} jobs beside the chain "
            f"(not on its path), each {ev.problems:,} problems x {ev.samples // max(1, ev.problems)} samples on "
            f"{ev.gpus} GPU / {ev.cpus} CPU (slurm.solve), {job} a job; {_hours(ev.gpu_hours)} GPU-hours, "
            f"{_hours(ev.cpu_hours)} CPU-hours besides the run's{left}")


def reference_text(ref: ReferencePlan, gpu_hours: float) -> str:
    """The same run on the SGS reference's layout (views/reference_projection.py) and the GPU-hours' ratio."""
    longest = max(ref.phase_s, key=lambda k: ref.phase_s[k])
    return (f"  the reference's layout (one node of {ref.gpus} GPUs and {ref.cpus} CPUs holding every phase, Lean on "
            f"its CPUs, GPUs held throughout): {duration(ref.round_s)} a round (longest {longest} "
            f"{duration(ref.phase_s[longest])}), {ref.run_days:.1f} days, {_hours(ref.gpu_hours)} GPU-hours; "
            f"this layout: {gpu_hours / ref.gpu_hours:.2f}x its GPU-hours")


def rollout_text(ro: RolloutPlan, colocated_steps: int = 0) -> list[str]:
    """The rollout steps both ways (views/rollout_projection.py), the one in use (`solver.colocated_steps`) marked."""
    chain_use, colo_use = ("in use", "solver.colocated_steps = N") if not colocated_steps else (
        "solver.colocated_steps = 0", f"in use: {colocated_steps} steps a job")
    over = f" ({ro.drawn:,} drawn: DAPO's over-sampling)" if ro.drawn > ro.prompts else ""
    return [
        f"  rollout steps: {ro.steps} (one a round) of {ro.prompts:,} prompts{over}, {_n(ro.samples)} samples, "
        f"{_of(ro.updates, 'update')} a step",
        f"    chain ({chain_use}): {duration(ro.chain_step_s)} a step, {duration(ro.chain_fixed_s)} of it queue waits, "
        f"start-ups and checkpoint writes; {ro.chain_days:.1f} days, {_hours(ro.chain_gpu_hours)} GPU-hours",
        f"    colocated job ({colo_use}): {duration(ro.colocated_step_s)} a step on "
        f"{ro.colocated_gpus} GPUs (weights updated in place), {_of(ro.colocated_jobs, 'job')} of "
        f"{duration(ro.colocated_startup_s)} start-up; {ro.colocated_days:.1f} days, "
        f"{_hours(ro.colocated_gpu_hours)} GPU-hours"
        + (f" (chain / colocated: {ro.chain_gpu_hours / ro.colocated_gpu_hours:.2f})" if ro.colocated_gpu_hours else ""),
    ] + ([f"    DAPO's re-sampling: a step short of {ro.prompts:,} kept groups takes up to {ro.max_gen_batches} "
          f"generation batches, each a round as projected here (run.rounds counts them)"]
         if ro.max_gen_batches > 1 else [])


def run_projection(h: RunHandle, targets: int, timing: dict[str, Any], last_metrics: dict[str, float]
                   ) -> dict[str, Any]:
    """A run's projection against its completed rounds: per round the projected and actual duration
    (first task start to the round's end: the queue wait before its first task is in neither), and
    per phase of the last completed round the projected and actual `wall_s/<phase>` (queue waits out)."""
    from sgsbatch.run.amendments import config_with, method_values, read

    figures, canary = canary_figures(h.cfg, published(h.cfg))
    proj = project(h.cfg, targets, figures)
    queue, records = figures["queue_wait_s"], read(h.paths)
    by_method: dict[str, Projection] = {}  # rounds run with the same amended method share one projection

    def at(r: int) -> Projection:
        key = json.dumps(method_values(records, r), sort_keys=True, default=str)
        if key not in by_method:
            by_method[key] = project(config_with(h.cfg, records, r), targets, figures)
        return by_method[key]

    by_round = {int(r): (at(int(r)), s) for r, s in sorted((timing.get("round_s") or {}).items())}
    rounds = {r: {"projected_s": p.round_s - queue, "actual_s": s} for r, (p, s) in by_round.items()}
    last = by_round[max(by_round)][0] if by_round else proj  # with the shard counts that round ran with
    phases = {ph.phase: {"projected_s": ph.wall_s - queue, "actual_s": last_metrics.get(M.wall_s(ph.phase))}
              for ph in last.projected if ph.wall_s is not None}
    actual = [x["actual_s"] for x in rounds.values()]
    crit = proj.critical
    return {"round_s": proj.round_s - queue, "run_days": proj.run_days, "critical_phase": crit.phase if crit else None,
            "run_gpu_hours": proj.rounds * proj.hours("gpu"), "not_projected": proj.not_projected, "canary": canary,
            "rounds": rounds, "phases": phases, "actual_mean_s": sum(actual) / len(actual) if actual else None}


def comparison_text(c: dict[str, Any] | None) -> str:
    """One line: the projected round against the actual mean, and the last round's phases."""
    if not c or not c["round_s"]:
        return ""
    out = (f"projected {duration(c['round_s'])} a round (longest {c['critical_phase']}), "
           f"{c['run_days']:.1f} days, {_hours(c['run_gpu_hours'])} GPU-hours")
    if c["not_projected"]:
        out += f" without {', '.join(c['not_projected'])} (no GPUs: not projected)"
    if c["actual_mean_s"] is None:
        return out + "; no round completed yet"
    ratio = "" if c["not_projected"] else f" ({c['actual_mean_s'] / c['round_s'] - 1:+.0%})"
    out += f"; actual {duration(c['actual_mean_s'])} a round over {len(c['rounds'])}{ratio}"
    ph = [f"{k} {duration(v['projected_s'])}/{duration(v['actual_s'])}" for k, v in c["phases"].items()
          if v["actual_s"] is not None]
    return out + (f"; last round projected/actual: {', '.join(ph)}" if ph else "")
