"""Drawing a run's curves with matplotlib (Agg backend, imported lazily): `sgsbatch fit --plot`, `report`.

Covered: the scaling-law figure (cumulative solve rate against generations so far for one or
several runs, each run's fitted curve and asymptote A from views/fit.py, and the paper's SGS curve
from `scaling.paper_*` drawn from the first run's R0, since the paper gives no R0), and small
generic figures (lines per round, histograms, stacked bars) rendered to PNG bytes. Every drawing
function returns the data it plotted, so tests compare it with the database.

Not covered: interactive output (no GUI backend is ever selected), styling options, reading the
database beyond views/fit.py's `read_points` (views/report.py reads the rest).
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sgsbatch.run.shards import atomic_write_bytes
from sgsbatch.views.fit import NotEnoughPoints, ScalingFit, fit_scaling_law, read_points

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from sgsbatch.run.handle import RunHandle

CURVE_POINTS = 200  # samples along each drawn curve (log-spaced in generations)
MARKED_POINTS = 100  # a line of lines_png with more points has no markers (they would hide the line)


def _figure(width: float = 7.0, height: float = 4.2) -> Figure:
    """A new figure on the non-interactive Agg canvas (no pyplot: no global state, no GUI)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def law(c: Any, r0: float, a: float, c_mid: float, b: float) -> Any:
    """R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (the SGS paper; docs/algorithm.md), vectorised over C > 0."""
    c = np.asarray(c, dtype=np.float64)
    return r0 + (a - r0) / (1.0 + (c_mid / c) ** b)


def fit_series(h: RunHandle, min_generations: float | None = None) -> dict[str, Any]:
    """One run's points and its fit (or why there is none): what the fit figure draws for it."""
    sc = h.cfg.scaling
    min_gen = sc.min_generations if min_generations is None else min_generations
    pts = read_points(h)
    out: dict[str, Any] = {"run": h.cfg.run.name, "rounds": [p.round for p in pts],
                           "generations": [p.generations for p in pts], "solve_rate": [p.solve_rate for p in pts],
                           "fit": None, "note": ""}
    try:
        fit: ScalingFit = fit_scaling_law(out["generations"], out["solve_rate"], min_generations=min_gen)
        out["fit"] = {"r0": fit.r0, "a": fit.a, "c_mid": fit.c_mid, "b": fit.b, "rms": fit.rms,
                      "points_used": fit.points_used}
    except NotEnoughPoints as e:
        out["note"] = str(e)
    return out


def draw_fit(handles: list[RunHandle], *, min_generations: float | None = None) -> tuple[Figure, dict[str, Any]]:
    """The scaling-law figure of one or several runs and the data drawn (points, fits, paper curve)."""
    series = [fit_series(h, min_generations) for h in handles]
    sc = handles[0].cfg.scaling
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    gens = [g for s in series for g in s["generations"] if g > 0]
    lo = min(gens) if gens else 1e4
    hi = max(max(gens) if gens else 1e7, 3 * sc.paper_c_mid)
    xs = np.geomspace(max(lo / 2, 1.0), hi, CURVE_POINTS)
    colors = [f"C{i % 10}" for i in range(len(series))]
    for s, color in zip(series, colors, strict=True):
        ax.plot(s["generations"], [100 * r for r in s["solve_rate"]], "o", ms=4, color=color,
                label=f"{s['run']} ({len(s['rounds'])} rounds)")
        f = s["fit"]
        if f is None:
            ax.plot([], [], " ", label=f"{s['run']}: not fitted (too few points at or above min_generations)")
            continue
        ax.plot(xs, 100 * law(xs, f["r0"], f["a"], f["c_mid"], f["b"]), "-", color=color, lw=1.5,
                label=f"{s['run']} fit: A = {f['a']:.1%}, C_mid = {f['c_mid']:,.0f}, B = {f['b']:.3f}")
        if math.isfinite(f["a"]) and -0.5 <= f["a"] <= 1.5:
            ax.axhline(100 * f["a"], color=color, ls=":", lw=1.0)
    r0 = series[0]["solve_rate"][0] if series[0]["solve_rate"] else 0.0
    paper = {"r0": r0, "a": sc.paper_asymptote, "c_mid": sc.paper_c_mid, "b": sc.paper_b}
    ax.plot(xs, 100 * law(xs, **paper), "--", color="0.35", lw=1.2,
            label=f"paper SGS: A = {sc.paper_asymptote:.1%}, C_mid = {sc.paper_c_mid:,.0f}, B = {sc.paper_b}"
                  f" (from {series[0]['run']}'s R0)")
    ax.axhline(100 * sc.paper_asymptote, color="0.35", ls=":", lw=1.0)
    ax.set_xscale("log")
    ax.set_xlabel("generations so far (C)")
    ax.set_ylabel("cumulative solve rate (%)")
    ax.set_title("Cumulative solve rate R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B); dotted: asymptotes",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14))  # below the axes: never on the points
    return fig, {"series": series, "paper": paper, "x": xs.tolist()}


def write_fit_plot(handles: list[RunHandle], out: Path, *, min_generations: float | None = None) -> dict[str, Any]:
    """Write the scaling-law figure as a PNG at `out`; returns the data drawn (see draw_fit)."""
    fig, data = draw_fit(handles, min_generations=min_generations)
    atomic_write_bytes(out, png_bytes(fig))  # whole or not at all: an earlier figure stays on a full disk
    return data


def _integer_x(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def lines_png(title: str, xlabel: str, ylabel: str, series: dict[str, tuple[list[float], list[float]]], *,
              logx: bool = False, percent: bool = False) -> bytes:
    """A PNG of one line per named series of (x, y) points; y in percent when `percent`. `logx`: a
    log x axis when the x values span more than a decade (else linear, and x = rounds: integer ticks).
    Series of more than MARKED_POINTS points (per optimizer step) are drawn as lines without markers."""
    fig = _figure(6.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    xs = [v for x, _ in series.values() for v in x if v > 0]
    for name, (x, y) in series.items():
        style = "o-" if len(x) <= MARKED_POINTS else "-"
        ax.plot(x, [100 * v for v in y] if percent else y, style, ms=3, lw=1.2, label=name)
    if logx and xs and max(xs) > 10 * min(xs):
        ax.set_xscale("log")
    elif not logx:
        _integer_x(ax)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel + (" (%)" if percent else ""))
    ax.grid(True, alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=7)
    return png_bytes(fig)


def stacked_png(title: str, rounds: list[int], stages: dict[str, list[float]]) -> bytes:
    """A PNG of side-by-side bars per round, one bar per stage (the conjecture funnel)."""
    fig = _figure(6.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(len(stages), 1)
    for i, (name, values) in enumerate(stages.items()):
        ax.bar([r + (i - (len(stages) - 1) / 2) * width for r in rounds], values, width=width, label=name)
    ax.set(title=title, xlabel="round", ylabel="conjectures")
    _integer_x(ax)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    return png_bytes(fig)


def hist_png(title: str, xlabel: str, groups: dict[str, list[float]], bins: int) -> bytes:
    """A PNG of overlaid histograms, one per named group of values."""
    fig = _figure(6.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    for name, values in groups.items():
        if values:
            ax.hist(values, bins=bins, alpha=0.55, label=f"{name} ({len(values)})")
    ax.set(title=title, xlabel=xlabel, ylabel="count")
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    return png_bytes(fig)
