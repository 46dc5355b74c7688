"""A run database with a known history (metrics, conjectures, reviews, attempts), for the fit plot
and report tests: written with the real schema through create_run, never run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

HOSTILE = ("theorem evil (n : Nat) : n = n := by\n  -- </pre></td><script>console.error('pwned')</script>"
           "<img src=x onerror=\"console.error('pwned img')\"> & \"quotes\" 'apos'")


T0 = 1_750_000_000.0  # round 0's start (epoch seconds)


def round_start(i: int) -> float:
    return T0 + 3600.0 * i


def round_seconds(i: int) -> float:
    """Round i's duration in a curve run: 50 minutes, a minute longer each round."""
    return 3000.0 + 60.0 * i


def curve_run(runs_dir: Path, name: str, rounds: int, *, simulated: bool = True, costs: bool = True,
              sets: tuple[str, ...] = ()) -> Any:
    """A finished-looking run of `rounds` rounds: solve rate on an S-curve over generations, pass@k,
    the conjecture funnel, 3 conjectures a round (one hostile text) with reviews and attempts, and
    each round's start and end (`round_start`, `round_seconds`; `wall_s/round` beside them); `sets`: more
    --set overrides."""
    import numpy as np
    from sqlmodel import select

    from sgsbatch.config.loading import load_config
    from sgsbatch.logic.data import Target
    from sgsbatch.run.handle import create_run
    from sgsbatch.state.schema import Attempt, Conjecture, Metric, ReviewRow, Round, Run, RunState

    overrides = [f"run.runs_dir={runs_dir}", f"run.name={name}", "run.executor=local", f"run.rounds={rounds}",
                 *sets]
    if not simulated:
        overrides.append("verification.backend=lean")
    cfg = load_config(Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml", overrides)
    h = create_run(cfg, [Target(f"t{i}", "import Mathlib\n", f"theorem t{i} : True := by") for i in range(4)],
                   "local")
    c = 45_000.0 * np.arange(1, rounds + 1) ** 1.3
    r = 0.30 + (0.671 - 0.30) / (1.0 + (1_252_336.0 / c) ** 0.585) + np.random.default_rng(5).normal(0, 0.002, rounds)
    r[0] = 0.30
    with h.db.write() as s:
        for i in range(rounds):
            vals = {"cumulative_solve_rate": r[i], "generations/total": c[i], "pass@8": r[i] - 0.05,
                    "pass@1": r[i] - 0.15, "conjectures/generated": 100 - i, "conjectures/well_formed": 80 - i,
                    "conjectures/unique": 70 - i, "conjectures/valid": 60 - i, "conjectures/in_band": 20 + i,
                    "guide/reviews": 3.0}
            if costs:
                vals.update({"cost/gpu_hours": 1.5 + i, "cost/cpu_hours": 10.0 + i})
            start, took = round_start(i), round_seconds(i)
            vals["wall_s/round"] = took
            rnd = s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == i)).first() or Round(
                run_id=h.run_id, index=i)
            rnd.state, rnd.started_at, rnd.completed_at = "completed", start, start + took
            s.add(rnd)
            for metric, value in vals.items():
                s.add(Metric(run_id=h.run_id, round=i, name=metric, value=float(value)))
            for k, stmt in enumerate(f"theorem c{i}_{k} : {i} + {k} = {k} + {i} := by" for k in range(2)):
                cid = f"c{i}-{k:012d}"
                s.add(Conjecture(run_id=h.run_id, round=i, target_id=f"t{k}", conjecture_id=cid, statement=stmt,
                                 status="ok"))
                s.add(ReviewRow(run_id=h.run_id, round=i, conjecture_id=cid, parsed=True, relevance=0.5 + k / 4,
                                redundant=0.1, complexity=0.3, score=0.2 + 0.3 * k + 0.01 * i))
                for smp in range(8):
                    s.add(Attempt(run_id=h.run_id, round=i, problem_id=cid, is_target=False, sample=smp,
                                  extracted=True, verdict="verified" if smp < 2 * k else "failed"))
            s.add(Conjecture(run_id=h.run_id, round=i, target_id="t3", conjecture_id=f"c{i}-hostile", statement=HOSTILE,
                             status="ok"))
        s.add(Metric(run_id=h.run_id, round=rounds, name="generations/round", value=1.0))  # a round in progress
        run = s.get(Run, h.run_id)
        assert run is not None
        run.created_at = T0 - 60.0  # launched a minute before round 0 started
        s.add(run)
    h.set_state(RunState.completed)
    return h
