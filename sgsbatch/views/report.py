"""`sgsbatch report`: one self-contained HTML page about one or several runs, to share and compare.

Covered: the runs' times (launched, elapsed, rounds timed, mean and last round duration, projected
finish: round/timing.py), the projection made before launch against the rounds' actual durations
(views/plan.py), the scaling-law figure of all runs (views/plot.py), each curve overlaid
across the runs, one chart per metric and one line per run (cumulative solve rate against rounds
and against generations, pass@8, pass@1, round duration: `OVERLAYS`), the config keys in which the
runs differ (views/comparison.py), and per run: the conjecture funnel per round, the Guide's score
distributions of the recent rounds, the scaling-law fit with its random-half spread (views/fit.py),
the Solver's clipped tokens per side and drift from the sampler where the trainer recorded them
(CISPO, the GRPO family), the proofs the verifier's own rules refused per round by reason, with
the items that set them off (a tactic, an option, a name: round/refusals.py), a search Solver's `search/*` per
round (views/search_report.py), the Solver's loss, clipped tokens, KL and gradient norm per optimizer step
(views/train_step_report.py), GPU/CPU-hours per round (the `cost/*` metrics, recorded on Slurm; "not recorded" otherwise), the
config changes made after launch (`resume --set`: every amendment, its kind and first round), and
example conjectures of the recent rounds with their guide scores and whether the Solver proved
them. Images are inline base64 PNGs; there is no script, no stylesheet link and no external URL,
so the page opens offline. Every string that comes from a model or a config (conjectures,
run names, config values, messages) is HTML-escaped. A run with a simulated component says
SIMULATED in the page title and in a banner.

Reads the run database and the rounds' `steps.jsonl` (runs opened read-only by the caller); writes only `out`.
Not covered: live state (see `sgsbatch status`), proofs (`sgsbatch proofs`), TensorBoard's curves
beyond the ones above.
"""

from __future__ import annotations

import base64
import html
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import col, select

from sgsbatch.round import metrics as M
from sgsbatch.round.refusals import from_metrics
from sgsbatch.run import lineage
from sgsbatch.run.progress import duration
from sgsbatch.run.quarantine import describe as describe_quarantine
from sgsbatch.run.shards import atomic_write_text
from sgsbatch.state.schema import Attempt, Conjecture, ReviewRow
from sgsbatch.views.amendments import history
from sgsbatch.views.comparison import config_diff, read_metrics
from sgsbatch.views.eval_report import eval_section
from sgsbatch.views.fit import NotEnoughPoints, fit_run
from sgsbatch.views.plan import comparison_text, run_projection
from sgsbatch.views.plot import draw_fit, hist_png, lines_png, png_bytes, stacked_png
from sgsbatch.views.search_report import search_section
from sgsbatch.views.train_step_report import train_step_section
from sgsbatch.views.wording import GOING_ON, timing_text, when

if TYPE_CHECKING:
    from sgsbatch.run.handle import RunHandle

STYLE = """body{font-family:sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;margin-top:1.6em}
.sim{background:#fde2e2;border:2px solid #c00;padding:.5em;font-weight:bold}
.grid{display:flex;flex-wrap:wrap;gap:8px}.grid figure{margin:0}
img.plot{max-width:100%;border:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
pre{white-space:pre-wrap;margin:0;font-size:.85em;max-width:620px}.note{color:#666;font-style:italic}"""


def esc(value: Any) -> str:
    """HTML-escaped text of any value (quotes included): the only way text enters the page."""
    return html.escape(str(value), quote=True)


def _img(png: bytes, alt: str) -> str:
    return (f'<figure><img class="plot" alt="{esc(alt)}" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}"></figure>')


def _series(metrics: dict[int, dict[str, float]], name: str, x: str | None = None) -> tuple[list[float], list[float]]:
    """(x, y) of the rounds that have metric `name` (and `x`, when x is a metric name; else the round)."""
    pts = [(float(m[x] if x else r), m[name]) for r, m in metrics.items() if name in m and (x is None or x in m)]
    return [p[0] for p in pts], [p[1] for p in pts]


def guide_scores(h: RunHandle, rounds: list[int]) -> dict[str, list[float]]:
    """Parsed Guide scores per round (label "round R"), for the given rounds."""
    with h.db.read() as s:
        rows = s.exec(select(ReviewRow.round, ReviewRow.score).where(
            ReviewRow.run_id == h.run_id, ReviewRow.parsed, col(ReviewRow.round).in_(rounds))).all()
    out: dict[str, list[float]] = {f"round {r}": [] for r in rounds}
    for rnd, score in rows:
        out[f"round {rnd}"].append(score)
    return out


def example_conjectures(h: RunHandle, recent: int, per_round: int) -> list[dict[str, Any]]:
    """Well-formed unique conjectures of the last `recent` rounds that have any, `per_round` each:
    reviewed ones first by guide score (highest first), then the rest by id; with the Solver's
    verified samples out of its samples (attempts read for the shown conjectures only)."""
    with h.db.read() as s:
        rounds = sorted(s.exec(select(Conjecture.round).where(  # one row per round, not per conjecture
            Conjecture.run_id == h.run_id, col(Conjecture.conjecture_id).is_not(None)).distinct()).all())[-recent:] \
            if recent else []
        if not rounds or per_round == 0:
            return []
        conj = s.exec(select(Conjecture).where(Conjecture.run_id == h.run_id, col(Conjecture.round).in_(rounds),
                                               col(Conjecture.conjecture_id).is_not(None))).all()
        reviews = {(v.round, v.conjecture_id): v for v in s.exec(select(ReviewRow).where(
            ReviewRow.run_id == h.run_id, col(ReviewRow.round).in_(rounds))).all()}
        out: list[dict[str, Any]] = []
        for r in rounds:
            rows = []
            for c in conj:
                if c.round != r or c.conjecture_id is None:
                    continue
                rv = reviews.get((r, c.conjecture_id))
                rows.append({"round": r, "conjecture_id": c.conjecture_id, "target_id": c.target_id,
                             "statement": c.statement or "",
                             "review": None if rv is None else {"parsed": rv.parsed, "score": rv.score,
                                                                "relevance": rv.relevance, "redundant": rv.redundant,
                                                                "complexity": rv.complexity}})
            rows.sort(key=_example_order)
            out.extend(rows[:per_round])
        tallies: dict[tuple[int, str], list[int]] = {}
        shown = sorted({x["conjecture_id"] for x in out})
        for rnd, pid, verdict in s.exec(select(Attempt.round, Attempt.problem_id, Attempt.verdict).where(
                Attempt.run_id == h.run_id, col(Attempt.problem_id).in_(shown), col(Attempt.round).in_(rounds),
                Attempt.is_target == False)):  # noqa: E712
            t = tallies.setdefault((rnd, pid), [0, 0])
            t[0] += verdict == "verified"
            t[1] += 1
    for x in out:
        x["verified"], x["samples"] = tallies.get((x["round"], x["conjecture_id"]), [0, 0])
    return out


def _example_order(x: dict[str, Any]) -> tuple[bool, float, str]:
    """Reviewed first, by guide score (highest first), then by conjecture id."""
    rv = x["review"]
    return rv is None, -(rv["score"] if rv is not None else 0.0), str(x["conjecture_id"])


def _cost_table(metrics: dict[int, dict[str, float]]) -> str:
    rows = [(r, m.get(M.COST_GPU_HOURS), m.get(M.COST_CPU_HOURS)) for r, m in metrics.items()
            if M.COST_GPU_HOURS in m or M.COST_CPU_HOURS in m]
    if not rows:
        return ('<p class="note">GPU/CPU-hours: not recorded (the run database has no cost/* metrics; they '
                'come from sacct on the Slurm executor)</p>')

    def cell(v: float | None) -> str:
        return "not recorded" if v is None else f"{v:,.2f}"

    body = "".join(f"<tr><td>{r}</td><td>{cell(g)}</td><td>{cell(c)}</td></tr>" for r, g, c in rows)
    gpu = sum(g or 0.0 for _, g, _ in rows)
    cpu = sum(c or 0.0 for _, _, c in rows)
    return (f"<table><tr><th>round</th><th>GPU-hours</th><th>CPU-hours</th></tr>{body}"
            f"<tr><th>total</th><th>{gpu:,.2f}</th><th>{cpu:,.2f}</th></tr></table>")


def _refusals_section(metrics: dict[int, dict[str, float]], recent: int) -> tuple[str, dict[int, dict[str, Any]]]:
    """Proofs refused by the verifier's own rules (static checks, kernel re-check): a figure of the
    count per reason and round, and a table of the last `recent` rounds with any, items included."""
    data = {r: from_metrics(m) for r, m in metrics.items() if M.VERIFY_REFUSED_RATE in m}
    if not data:
        return '<p class="note">Verifier refusals: not recorded (no round ingested with them yet).</p>', data
    reasons = sorted({x for d in data.values() for x in d["by_reason"]})
    if not reasons:
        return '<p class="note">Verifier refusals: none (no proof refused by a static check or the re-check).</p>', data
    rounds = sorted(data)
    series = {x: ([float(r) for r in rounds], [float(data[r]["by_reason"].get(x, 0)) for r in rounds]) for x in reasons}
    fig = _img(lines_png("Proofs refused by the verifier's own rules", "round", "refused proofs", series),
               "verifier refusals per reason")
    rows = []
    for r in [r for r in rounds if data[r]["by_reason"]][-recent:] if recent else []:
        d = data[r]
        cells = "; ".join(
            f"{esc(x)} {n:,}" + (" (" + ", ".join(f"{esc(i)} x {c:,}" for i, c in d["items"].get(x, [])) + ")"
                                 if d["items"].get(x) else "")
            for x, n in sorted(d["by_reason"].items(), key=lambda p: (-p[1], p[0])))
        rows.append(f"<tr><td>{r}</td><td>{sum(d['by_reason'].values()):,} ({(d['rate'] or 0.0):.1%})</td>"
                    f"<td>{cells}</td></tr>")
    table = ("<table><tr><th>round</th><th>refused (share of checked proofs)</th><th>by reason (most frequent "
             "items)</th></tr>" + "".join(rows) + "</table>")
    return f'<div class="grid">{fig}</div>{table}', data


def _amendments_table(records: list[dict[str, Any]]) -> str:
    """The config changes made after launch (`resume --set`, ops/amend.py): every one, oldest first."""
    if not records:
        return '<p class="note">Config: as launched (no amendment).</p>'
    method = sum(r["kind"] == "method" for r in records)
    out = [f"<h3>Amendments after launch ({len(records)}, {method} change(s) of method)</h3>",
           "<table><tr><th>when (UTC)</th><th>key</th><th>old</th><th>new</th><th>kind</th><th>in effect</th>"
           "<th>command</th></tr>"]
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(r["at"]))
        effect = (f"from round {r['from_round']}" if r["kind"] == "method"
                  else f"jobs started after it (during round {r['round']})")
        out.append(f"<tr><td>{when}</td><td>{esc(r['key'])}</td><td>{esc(repr(r['old']))}</td>"
                   f"<td>{esc(repr(r['new']))}</td><td>{esc(r['kind'])}</td><td>{effect}</td>"
                   f"<td><code>{esc(r['command'])}</code></td></tr>")
    return "".join(out) + "</table>"


def _fit_section(h: RunHandle) -> tuple[str, dict[str, Any] | None]:
    try:
        rep = fit_run(h)
    except NotEnoughPoints as e:
        return f'<p class="note">No fit: {esc(e)}</p>', None
    hv = rep["halves"]
    spread = (f"A = {hv['a_mean']:.1%} &plusmn; {hv['a_std']:.1%} over {hv['halves']} random halves of "
              f"{hv['points_per_half']} points" if hv else f"no random-half spread: {esc(rep['halves_note'])}")
    pp = rep["paper"]
    text = (f"<p>R0 = {rep['r0']:.1%} (first observed), A = <b>{rep['a']:.1%}</b>, C_mid = {rep['c_mid']:,.0f}, "
            f"B = {rep['b']:.3f}, rms {rep['rms']:.2%}, {rep['points_used']} points used "
            f"({rep['points_dropped']} below {rep['min_generations']:,.0f} generations)."
            f"{'' if rep['converged'] else ' Not converged.'}<br>Uncertainty: {spread}.<br>"
            f"Paper SGS: A = {pp['a']:.1%}, C_mid = {pp['c_mid']:,.0f}, B = {pp['b']:.3f}; random halves "
            f"A = {pp['halves_a_mean']:.1%} &plusmn; {pp['halves_a_std']:.1%}.</p>")
    return text, rep


def _examples_table(rows: list[dict[str, Any]], max_chars: int) -> str:
    if not rows:
        return '<p class="note">No well-formed conjectures recorded yet.</p>'
    out = ["<table><tr><th>round</th><th>target</th><th>conjecture</th><th>guide score (relevance, redundant, "
           "complexity)</th><th>solved (verified / samples)</th></tr>"]
    for x in rows:
        stmt = x["statement"]
        if len(stmt) > max_chars:
            stmt = stmt[:max_chars] + " [...]"
        rv = x["review"]
        score = ("no review" if rv is None else "review unparsed" if not rv["parsed"] else
                 f"{rv['score']:.3f} ({rv['relevance']:.2f}, {rv['redundant']:.2f}, {rv['complexity']:.2f})")
        solved = f"{'yes' if x['verified'] else 'no'} ({x['verified']} / {x['samples']})"
        out.append(f"<tr><td>{x['round']}</td><td>{esc(x['target_id'])}</td><td><pre>{esc(stmt)}</pre></td>"
                   f"<td>{score}</td><td>{solved}</td></tr>")
    return "".join(out) + "</table>"


def _ratio_figures(metrics: dict[int, dict[str, float]]) -> list[str]:
    """The Solver's importance-ratio curves where the trainer recorded them (CISPO, the GRPO family):
    clipped tokens per side, and the sampler KL beside the sequence ratio's spread."""
    sides = {side: _series(metrics, M.train_ratio("solver", f"clip_fraction_{side}")) for side in ("low", "high")}
    drift = {"KL(sampler || policy) per token": _series(metrics, M.train_ratio("solver", "sampler_kl")),
             "std of the sequence ratio": _series(metrics, M.train_ratio("solver", "seq_ratio_std")),
             "KL(policy || reference) per token": _series(metrics, M.train_ratio("solver", "ref_kl"))}
    out = []
    if any(x for x, _ in sides.values()):
        out.append(_img(lines_png("Solver: tokens clipped per side (GRPO family)", "round", "share of tokens",
                                  sides, percent=True), "solver clip fractions per side"))
    if any(x for x, _ in drift.values()):
        out.append(_img(lines_png("Solver: drift from the sampler", "round", "value", drift),
                        "solver sampler KL and sequence ratio"))
    return out


def run_section(h: RunHandle, examples: int | None = None) -> tuple[str, dict[str, Any]]:
    """One run's part of the page, and the data it shows (for tests and callers)."""
    rc = h.cfg.report
    metrics = read_metrics(h)
    name = h.cfg.run.name
    data: dict[str, Any] = {"run": name, "metrics": metrics, "simulated": h.cfg.simulated}
    parts = [f"<h2>{esc(name)}{' [SIMULATED]' if h.cfg.simulated else ''}</h2>"]
    if h.cfg.simulated:
        parts.append('<p class="sim">SIMULATED: this run uses simulated components '
                     f'({esc(", ".join(h.cfg.simulated_parts()) or "rehearsal")}); its numbers say nothing about '
                     'models or Lean.</p>')
    done = [r for r, m in metrics.items() if M.CUMULATIVE_SOLVE_RATE in m]
    parts.append(f"<p>{len(done)} completed round(s) of {h.cfg.run.rounds}; executor {esc(h.cfg.run.executor)}; "
                 f"seed {h.cfg.run.seed}.</p>")
    data["forked_from"] = lineage.read(h.paths)
    if data["forked_from"]:
        parts.append(f"<p>{esc(lineage.describe(data['forked_from']).capitalize())}; its keys that differ are changes of "
                     f"method from round {data['forked_from']['round']} below.</p>")
    data["amendments"] = history(h)
    parts.append(_amendments_table(data["amendments"]))
    from sgsbatch.views.status import run_status

    st = run_status(h, live=True, detail=False)  # status's truth (a dead driver: stalled) and its timing
    data["timing"], data["state"] = st.timing, st.state
    parts.append(f"<p>State: {esc(data['state'])}. Time: {esc(timing_text(data['timing'], data['state']))}.</p>")
    damaged = st.damaged or {}  # status's corrupt and quarantined shard files (run/quarantine.py): the same here
    data["damaged"] = damaged
    lost = [f"{q['file']} is corrupt ({q['reason']}): `{damaged['repair']}` quarantines it" for q in damaged.get("found", [])]
    lost += [f"quarantined: {describe_quarantine(q)}" for q in damaged.get("quarantined", [])]
    if lost:
        parts.append('<p class="sim">Damaged files (the rounds they belong to lack what they held):</p><ul>'
                     + "".join(f"<li>{esc(x)}</li>" for x in lost) + "</ul>")
    data["projection"] = run_projection(h, h.row().targets, data["timing"], metrics[max(done)] if done else {})
    compared = comparison_text(data["projection"]) or "none (no phase has a throughput figure)"
    parts.append(f"<p>Projection (sgsbatch plan): {esc(compared)}.</p>")
    figs = []
    if done:
        figs += _ratio_figures(metrics)  # the Solver's clip fractions and sampler drift (CISPO, GRPO family)
    funnel_rounds = [r for r, m in metrics.items() if M.conjectures("generated") in m]
    data["funnel"] = {s: [metrics[r].get(M.conjectures(s), 0.0) for r in funnel_rounds] for s in M.CONJECTURE_STAGES}
    data["funnel_rounds"] = funnel_rounds
    if funnel_rounds:
        figs.append(_img(stacked_png("Conjecture funnel per round", funnel_rounds, data["funnel"]),
                         "conjecture funnel per round"))
    review_rounds = sorted({r for r, m in metrics.items() if M.GUIDE_REVIEWS in m and m[M.GUIDE_REVIEWS] > 0})
    scores = guide_scores(h, review_rounds[-rc.recent_rounds:]) if rc.recent_rounds else {}
    data["guide_scores"] = scores
    if any(scores.values()):
        figs.append(_img(hist_png("Guide scores of the recent rounds", "guide score", scores, rc.score_bins),
                         "guide score distributions"))
    parts.append(f'<div class="grid">{"".join(figs)}</div>' if figs else
                 '<p class="note">No conjecture funnel recorded yet.</p>')
    if not any(scores.values()):
        parts.append('<p class="note">Guide scores: none recorded (no parsed review yet, or guide.enabled = false).</p>')
    parts.append("<h3>Scaling-law fit</h3>")
    fit_html, data["fit"] = _fit_section(h)
    parts.append(fit_html)
    parts.append("<h3>Verifier refusals per round</h3>")
    refusals_html, data["refusals"] = _refusals_section(metrics, rc.recent_rounds)
    parts.append(refusals_html)
    eval_html, data["eval"] = eval_section(metrics)
    search_html, data["search"] = search_section(metrics)
    steps_html, data["train_steps"] = train_step_section(h, metrics)  # the Solver's curves per optimizer step
    parts += [x for x in (eval_html, search_html, steps_html) if x]
    parts.append("<h3>Cost per round</h3>")
    parts.append(_cost_table(metrics))
    per_round = rc.examples if examples is None else examples
    data["examples"] = example_conjectures(h, rc.recent_rounds, per_round)
    parts.append(f"<h3>Example conjectures (last {rc.recent_rounds} rounds with any, {per_round} each)</h3>")
    parts.append(_examples_table(data["examples"], rc.max_statement_chars))
    return "\n".join(parts), data


# the curves overlaid across runs: (metric, x metric or None for the round, title, x label, y label, y scale, log x)
OVERLAYS: tuple[tuple[str, str | None, str, str, str, float, bool], ...] = (
    (M.CUMULATIVE_SOLVE_RATE, None, "Cumulative solve rate by round", "round", "solve rate (%)", 100.0, False),
    (M.CUMULATIVE_SOLVE_RATE, M.GENERATIONS_TOTAL, "Cumulative solve rate by generations", "generations so far",
     "solve rate (%)", 100.0, True),
    (M.PASS_AT_8, None, "pass@8 of the targets", "round", "pass@8 (%)", 100.0, False),
    (M.PASS_AT_1, None, "pass@1 of the targets", "round", "pass@1 (%)", 100.0, False),
    (M.ROUND_WALL_S, None, "Round duration (first task start to the round's end)", "round", "hours", 1 / 3600, False),
)


def overlay_section(handles: list[RunHandle], metrics: list[dict[int, dict[str, float]]]) -> tuple[str, dict[str, Any]]:
    """One chart per metric of OVERLAYS with one line per run (charts no run has points for left out),
    and the data drawn: {"<title>": {run: (x, y)}} with y as stored (unscaled)."""
    figs, data = [], {}
    for metric, x, title, xlabel, ylabel, scale, logx in OVERLAYS:
        series = {h.cfg.run.name: _series(m, metric, x) for h, m in zip(handles, metrics, strict=True)}
        if not any(ys for _, ys in series.values()):
            continue
        data[title] = series
        shown = {name: (xs, [y * scale for y in ys]) for name, (xs, ys) in series.items()}
        figs.append(_img(lines_png(title, xlabel, ylabel, shown, logx=logx), title))
    if not figs:
        return '<p class="note">No completed round yet: no curves.</p>', data
    return f'<div class="grid">{"".join(figs)}</div>', data


def timing_table(handles: list[RunHandle], timings: list[dict[str, Any]], states: list[str]) -> str:
    """Per run (its `run_timing`, its state as `status` judges it): launched, state, elapsed, rounds timed,
    mean and last round duration, projected finish (only for a run that is going on)."""
    rows = []
    for h, t, state in zip(handles, timings, states, strict=True):
        row = h.row()
        rs = t["round_s"]
        finish = (f"finished {when(t['finish_at'])}" if state == "completed" and t["finish_at"] else
                  f"in {duration(t['eta_s'])} (about {when(t['finish_at'])})"
                  if t["eta_s"] is not None and state in GOING_ON else
                  "not projected (no timed round yet)" if state in GOING_ON else state)
        rows.append(f"<tr><td>{esc(h.cfg.run.name)}</td><td>{when(t['started_at'])}</td><td>{esc(state)}</td>"
                    f"<td>{duration(t['elapsed_s'])}</td><td>{len(rs)} of {row.rounds}</td>"
                    f"<td>{duration(t['mean_round_s']) if rs else '-'}</td>"
                    f"<td>{duration(rs[max(rs)]) if rs else '-'}</td><td>{esc(finish)}</td></tr>")
    head = ("<table><tr><th>run</th><th>launched</th><th>state</th><th>elapsed</th><th>rounds timed</th>"
            "<th>mean round</th><th>last round</th><th>projected finish</th></tr>")
    return head + "".join(rows) + "</table>"


def diff_table(handles: list[RunHandle]) -> tuple[str, dict[str, list[Any]]]:
    """The config keys whose values differ between the runs (views/comparison.py), one column per run."""
    diff = config_diff(handles)
    if len(handles) < 2:
        return "", diff
    if not diff:
        return '<p class="note">The runs\' configs are identical (run.name apart).</p>', diff
    head = "".join(f"<th>{esc(h.cfg.run.name)}</th>" for h in handles)
    body = "".join(f"<tr><td>{esc(k)}</td>" + "".join(f"<td>{esc(json.dumps(v))}</td>" for v in vals) + "</tr>"
                   for k, vals in diff.items())
    return (f"<p>{len(diff)} key(s) differ (each run's config now, amendments included).</p>"
            f"<table><tr><th>key</th>{head}</tr>{body}</table>"), diff


def render_report(handles: list[RunHandle], examples: int | None = None) -> tuple[str, dict[str, Any]]:
    """The whole page and its data: a header, the runs' times, the fit figure of all runs, each curve
    overlaid across the runs, the config differences, then one section per run."""
    simulated = any(h.cfg.simulated for h in handles)
    names = ", ".join(h.cfg.run.name for h in handles)
    title = f"{'SIMULATED - ' if simulated else ''}sgsbatch report: {names}"
    sections, runs = [], []
    for h in handles:
        sec, data = run_section(h, examples)
        sections.append(sec)
        runs.append(data)
    fig, fit_data = draw_fit(handles)
    times_html = timing_table(handles, [r["timing"] for r in runs], [r["state"] for r in runs])
    curves_html, curves = overlay_section(handles, [r["metrics"] for r in runs])
    diff_html, diff = diff_table(handles)
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{esc(title)}</h1><p>Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from the run "
            f"database(s), read-only.</p><h2>Time</h2>{times_html}"
            "<h2>Scaling law: cumulative solve rate against generations</h2>"
            f"{_img(png_bytes(fig), 'scaling-law fit')}\n<h2>Curves (one line per run)</h2>{curves_html}\n"
            + (f"<h2>Config differences</h2>{diff_html}\n" if diff_html else "")
            + "\n".join(sections) + "</body></html>\n")
    return page, {"title": title, "runs": runs, "fit_plot": fit_data, "curves": curves, "config_diff": diff}


def write_report(handles: list[RunHandle], out: Path, examples: int | None = None) -> dict[str, Any]:
    """Write the page to `out` (atomically: a temporary file renamed); returns the data it shows."""
    page, data = render_report(handles, examples)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, page)  # a page written whole or not at all: an earlier one stays on a full disk
    return data
