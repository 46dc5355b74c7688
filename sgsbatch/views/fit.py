"""The scaling law of the cumulative solve rate (the SGS paper; docs/algorithm.md), fitted to a run's rounds.

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B),   C = generations so far

Covered: reading (generations so far, cumulative solve rate) per completed round from the run
database (metrics `generations/total` and `cumulative_solve_rate`, written together when a round
completes); the least-squares fit of A, C_mid and B; refits on random halves of the points for
the spread of A; the report `sgsbatch fit` prints. Pure numpy (no scipy).

How the spec is read:
* "R0 is fixed to the first observed value": the solve rate of the earliest point (smallest C,
  i.e. round 0) among *all* points, taken before points below `scaling.min_generations` are
  dropped. R0 is the curve's C -> 0 limit, so the base model's first result is the natural value;
  the dropped points only leave the least squares. A point with C <= 0 has no log and is dropped.
* Least squares on R in fraction units (not percent), unweighted.
* "Random halves": `scaling.halves` refits, each on a random subset of floor(n/2) of the n points
  used (R0 unchanged), drawn with numpy's default_rng(seed); the CLI uses the run's `run.seed`.
  Reported: mean +- sample std (ddof=1) of A over the refits.

The fit: Levenberg-Marquardt on (A, log C_mid, log B) (B > 0: with B <= 0 R0 is no longer the
C -> 0 limit), with the formula written as R0 + (A - R0) * sigmoid(B (log C - log C_mid)).
Starting points come from a grid over (log C_mid, B) on which A is solved in closed form (the
model is linear in A); the best few grid points start an LM run each and the lowest cost wins.

Not covered: weighting by round or noise model, confidence intervals beyond the random halves,
fitting R0, comparing runs (the CLI prints the paper's SGS fit, from `scaling.paper_*`).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from sgsbatch.errors import SgsError
from sgsbatch.round import metrics as M
from sgsbatch.run.paths import command

if TYPE_CHECKING:
    from sgsbatch.run.handle import RunHandle

Array = npt.NDArray[np.float64]
N_PARAMS = 3  # A, C_mid, B
SOLVE_RATE, GENERATIONS = M.CUMULATIVE_SOLVE_RATE, M.GENERATIONS_TOTAL


class NotEnoughPoints(SgsError, ValueError):
    """Too few points to fit (or to refit on halves). Exit code 1: the run needs more rounds."""


@dataclass(frozen=True)
class ScalingPoint:
    round: int
    generations: float
    solve_rate: float


@dataclass(frozen=True)
class ScalingFit:
    r0: float
    a: float
    c_mid: float
    b: float
    rms: float  # root mean square residual over the points used, in solve-rate units
    points_used: int
    points_dropped: int
    min_generations: float
    converged: bool


@dataclass(frozen=True)
class HalvesEstimate:
    halves: int
    seed: int
    points_per_half: int
    a_mean: float
    a_std: float
    a_values: tuple[float, ...]


def _sigmoid(z: Array) -> Array:
    return np.exp(-np.logaddexp(0.0, -z))


def _residuals(p: Array, u: Array, y: Array, r0: float) -> tuple[Array, Array]:
    """Residuals and Jacobian of R(u) - y for p = (A, m = log C_mid, beta = log B), u = log C."""
    a, m, beta = p
    b = math.exp(beta)
    s = _sigmoid(b * (u - m))
    ds = (a - r0) * s * (1.0 - s)
    jac = np.stack([s, -b * ds, b * (u - m) * ds], axis=1)
    return r0 + (a - r0) * s - y, jac


def _levenberg_marquardt(p: Array, u: Array, y: Array, r0: float, max_iter: int = 1000) -> tuple[Array, float, bool]:
    res, jac = _residuals(p, u, y, r0)
    cost = float(res @ res)
    lam = 1e-3
    for _ in range(max_iter):
        scale = np.sqrt(np.maximum(np.sum(jac * jac, axis=0), 1e-12))  # Marquardt's diagonal scaling
        lhs = np.vstack([jac, math.sqrt(lam) * np.diag(scale)])
        rhs = np.concatenate([-res, np.zeros(N_PARAMS)])
        step = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
        trial = p + step
        trial[2] = min(max(trial[2], -12.0), 6.0)  # B within [6e-6, 400]: keeps exp() finite
        t_res, t_jac = _residuals(trial, u, y, r0)
        t_cost = float(t_res @ t_res)
        if np.isfinite(t_cost) and t_cost <= cost:
            small = cost - t_cost <= 1e-15 + 1e-12 * cost or float(np.abs(step).max()) < 1e-10
            p, res, jac, cost = trial, t_res, t_jac, t_cost
            lam = max(lam / 3.0, 1e-12)
            if small:
                return p, cost, True
        else:
            lam *= 4.0
            if lam > 1e14:  # no step downhill at any damping: a minimum to working precision
                return p, cost, True
    return p, cost, False


def _starts(u: Array, y: Array, r0: float, keep: int = 5) -> list[Array]:
    """The best grid points of (log C_mid, B), with A solved in closed form for each."""
    span = max(float(u.max() - u.min()), 1.0)
    ms = np.linspace(float(u.min()) - span, float(u.max()) + 2.0 * span, 61)
    bs = np.geomspace(0.05, 8.0, 40)
    mm, bb = (g.reshape(-1, 1) for g in np.meshgrid(ms, bs, indexing="ij"))
    s = _sigmoid(bb * (u.reshape(1, -1) - mm))  # (grid, points)
    dy = y - r0
    ss = np.maximum(np.sum(s * s, axis=1), 1e-300)
    amp = np.sum(s * dy, axis=1) / ss  # optimal A - R0 for each grid point
    cost = np.sum((amp.reshape(-1, 1) * s - dy) ** 2, axis=1)
    order = np.argsort(cost, kind="stable")[:keep]
    return [np.array([r0 + amp[i], mm[i, 0], math.log(bb[i, 0])]) for i in order]


def _prepare(generations: Any, solve_rates: Any, min_generations: float,
             r0: float | None) -> tuple[Array, Array, float, int]:
    c = np.asarray(generations, dtype=np.float64).ravel()
    r = np.asarray(solve_rates, dtype=np.float64).ravel()
    if c.shape != r.shape:
        raise ValueError(f"{c.size} generation counts but {r.size} solve rates; give one of each per point")
    if c.size == 0:
        raise NotEnoughPoints("no points to fit: the run has no completed round with the metrics "
                              f"{SOLVE_RATE!r} and {GENERATIONS!r} yet; run more rounds")
    if not (np.all(np.isfinite(c)) and np.all(np.isfinite(r))):
        raise ValueError("generations and solve rates must be finite numbers")
    order = np.argsort(c, kind="stable")
    c, r = c[order], r[order]
    first = float(r[0]) if r0 is None else float(r0)
    keep = (c >= min_generations) & (c > 0)
    return c[keep], r[keep], first, int(c.size - keep.sum())


def _fit_kept(c: Array, r: Array, r0: float) -> tuple[Array, float, bool]:
    u = np.log(c)
    best: tuple[Array, float, bool] | None = None
    for start in _starts(u, r, r0):
        p, cost, ok = _levenberg_marquardt(start, u, r, r0)
        if best is None or cost < best[1] - 1e-15:
            best = (p, cost, ok)
    assert best is not None
    return best


def fit_scaling_law(generations: Any, solve_rates: Any, *, min_generations: float = 100_000,
                    r0: float | None = None) -> ScalingFit:
    """Fit A, C_mid, B to points (C, R); R0 = R at the smallest C of all points unless given.

    Points with C < min_generations (or C <= 0) are dropped after R0 is taken. Raises
    NotEnoughPoints when 3 or fewer remain (3 parameters need at least 4 points).
    """
    c, r, first, dropped = _prepare(generations, solve_rates, min_generations, r0)
    if c.size <= N_PARAMS:
        need = N_PARAMS + 1
        # lowering the threshold helps only when enough points lie below it; otherwise only more rounds do
        way = ("lower the threshold (`sgsbatch fit RUN --min-generations N`), or run more rounds"
               if c.size + dropped >= need else
               f"the run has {c.size + dropped} point(s) in all (one a completed round), so "
               f"{'more rounds are needed' if dropped and not c.size else 'only more rounds help'} (`sgsbatch resume RUN --set "
               f"run.rounds=N`, N >= {need})" + (
                   # every point below the threshold (a tiny run's ~100 generations a round): more rounds alone never
                   # reach it, so the threshold is named too
                   f", then fit them below the threshold: `sgsbatch fit RUN --min-generations 0` (the last point is at "
                   f"{float(np.max(np.asarray(generations, dtype=float))):,.0f} generations)" if dropped and not c.size
                   else "") + "; `sgsbatch status RUN` and `sgsbatch report RUN` show the solve-rate curve meanwhile")
        raise NotEnoughPoints(
            f"only {c.size} point(s) at or above scaling.min_generations = {min_generations:,.0f} generations "
            f"({dropped} dropped below it); fitting A, C_mid and B needs at least {need}: {way}")
    p, cost, ok = _fit_kept(c, r, first)
    return ScalingFit(r0=first, a=float(p[0]), c_mid=math.exp(float(p[1])), b=math.exp(float(p[2])),
                      rms=math.sqrt(cost / c.size), points_used=int(c.size), points_dropped=dropped,
                      min_generations=float(min_generations), converged=ok)


def random_halves(generations: Any, solve_rates: Any, *, halves: int = 20, seed: int = 0,
                  min_generations: float = 100_000, r0: float | None = None) -> HalvesEstimate:
    """Refit on `halves` random halves (floor(n/2) of the n points used, R0 fixed as in the full fit)."""
    if halves < 1:
        raise ValueError(f"halves must be >= 1, got {halves}")
    c, r, first, _ = _prepare(generations, solve_rates, min_generations, r0)
    size = c.size // 2
    if size <= N_PARAMS:
        raise NotEnoughPoints(f"random halves need at least {2 * (N_PARAMS + 1)} points used (halves of "
                              f"{N_PARAMS + 1}); have {c.size} at or above scaling.min_generations = "
                              f"{min_generations:,.0f}")
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(halves):
        idx = np.sort(rng.choice(c.size, size=size, replace=False))
        values.append(float(_fit_kept(c[idx], r[idx], first)[0][0]))
    arr = np.array(values)
    std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
    return HalvesEstimate(halves=halves, seed=seed, points_per_half=size, a_mean=float(arr.mean()), a_std=std,
                          a_values=tuple(values))


def read_points(h: RunHandle) -> list[ScalingPoint]:
    """(round, generations so far, cumulative solve rate) of every round that has both metrics."""
    from sqlmodel import col, select

    from sgsbatch.state.schema import Metric

    with h.db.read() as s:
        rows = s.exec(select(Metric.round, Metric.name, Metric.value).where(
            Metric.run_id == h.run_id, col(Metric.name).in_([SOLVE_RATE, GENERATIONS]))).all()
    by_round: dict[int, dict[str, float]] = {}
    for rnd, name, value in rows:
        by_round.setdefault(rnd, {})[name] = value
    return [ScalingPoint(rnd, m[GENERATIONS], m[SOLVE_RATE]) for rnd, m in sorted(by_round.items())
            if SOLVE_RATE in m and GENERATIONS in m]


def fit_run(h: RunHandle, *, min_generations: float | None = None, halves: int | None = None) -> dict[str, Any]:
    """The report of `sgsbatch fit`: the fit, the random halves (or why not) and the paper's values."""
    sc = h.cfg.scaling
    min_gen = sc.min_generations if min_generations is None else min_generations
    n_halves = sc.halves if halves is None else halves
    points = read_points(h)
    c = [p.generations for p in points]
    r = [p.solve_rate for p in points]
    try:
        fit = fit_scaling_law(c, r, min_generations=min_gen)
    except NotEnoughPoints as e:  # its advice as commands for this run, not for a placeholder RUN
        raise NotEnoughPoints(re.sub(r"`sgsbatch (\w+) RUN\b", lambda m: f"`{command(m.group(1), h.paths)}", str(e))) \
            from None
    out: dict[str, Any] = {"run": h.cfg.run.name, **asdict(fit), "rounds": len(points),
                           "first_round": points[0].round, "last_round": points[-1].round,
                           "generations": points[-1].generations, "solve_rate": points[-1].solve_rate,
                           "halves": None, "halves_note": "", "seed": h.cfg.run.seed}
    if n_halves == 0:
        out["halves_note"] = "no random-half refits (scaling.halves = 0)"
    else:
        try:
            est = random_halves(c, r, halves=n_halves, seed=h.cfg.run.seed, min_generations=min_gen)
            out["halves"] = {k: v for k, v in asdict(est).items() if k != "a_values"}
        except NotEnoughPoints as e:
            out["halves_note"] = str(e)
    out["paper"] = {"a": sc.paper_asymptote, "c_mid": sc.paper_c_mid, "b": sc.paper_b,
                    "halves_a_mean": sc.paper_halves_asymptote, "halves_a_std": sc.paper_halves_std}
    return out


def format_report(rep: dict[str, Any]) -> str:
    """The text `sgsbatch fit` prints for a report of fit_run."""
    lines = [
        f"{rep['run']}: R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), C = generations so far",
        f"  points   {rep['points_used']} used, {rep['points_dropped']} dropped (below scaling.min_generations = "
        f"{rep['min_generations']:,.0f}); rounds {rep['first_round']}-{rep['last_round']}, "
        f"last {rep['generations']:,.0f} generations at {rep['solve_rate']:.1%}",
        f"  R0       {rep['r0']:.1%} (fixed: first observed value)",
        f"  A        {rep['a']:.1%}",
        f"  C_mid    {rep['c_mid']:,.0f}",
        f"  B        {rep['b']:.3f}",
        f"  rms      {rep['rms']:.2%}" + ("" if rep["converged"] else "  (not converged: iteration limit)"),
    ]
    hv = rep["halves"]
    if hv is not None:
        lines.append(f"  halves   A = {hv['a_mean']:.1%} +- {hv['a_std']:.1%} ({hv['halves']} random halves of "
                     f"{hv['points_per_half']} points, seed {hv['seed']})")
    else:
        lines.append(f"  halves   none: {rep['halves_note']}")
    if not 0.0 <= rep["a"] <= 1.0 or rep["c_mid"] > 100 * rep["generations"]:
        lines.append("  note     the points do not constrain the asymptote yet (A outside [0, 1] or C_mid far "
                     "beyond the data): run more rounds before reading A")
    pp = rep["paper"]
    lines.append(f"  paper    SGS: A = {pp['a']:.1%}, C_mid = {pp['c_mid']:,.0f}, B = {pp['b']:.3f}; "
                 f"random halves A = {pp['halves_a_mean']:.1%} +- {pp['halves_a_std']:.1%}")
    return "\n".join(lines)
