"""`sgsbatch eval RUN --round N [--set NAME]`: held-out evaluation of a stored round, in this process.

For each evaluation set of the run's `[eval]` (all, or the one `--set` names): load it like `data.source`
(data.load_data_source; an unreadable set is a ConfigError on `eval.sets.<name>`), evaluate the Solver's
weights after round N on it (phases/evaluate.py: generation, the run's verifier, the files under
`<run>/eval/r000N/<set>/`), then record `eval/<set>/pass@<k>` for round N in the state database (replacing
an earlier evaluation's values) and in TensorBoard (`tb/eval/`). `status`, `metrics` and the report read
them from the database like every round metric. A set already evaluated for round N (its DONE marker)
is not sampled again unless `force`: its stored summary is recorded again.

Refused with an InputError: a round not completed (its weights are not published), a run without
`eval.sets`, a `--set` the run does not have, a search Solver (`solver.mode = "search"`: not built). Submitting it as a job (`eval --submit`, `eval.every_rounds`):
scheduling/eval_jobs.py, which runs this command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import select

from sgsbatch.errors import DamagedFile, InputError
from sgsbatch.logic.data import load_data_source
from sgsbatch.phases.evaluate import evaluate_set, is_evaluated, read_summary, solver_weights
from sgsbatch.round import metrics as M
from sgsbatch.run.checkpoint import is_complete
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.paths import command
from sgsbatch.state.schema import Metric, Round


@dataclass(frozen=True)
class SetResult:
    name: str
    summary: dict[str, Any]
    metrics: dict[str, float]
    reused: bool  # the stored evaluation was recorded again (not sampled)


def _check_round(h: RunHandle, r: int) -> None:
    with h.db.read() as s:
        rnd = s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == r)).first()
    if rnd is None or rnd.state != "completed":
        state = "not created yet" if rnd is None else rnd.state
        raise InputError(f"--round {r}: round {r} of run {h.cfg.run.name} has not completed ({state}), so its Solver "
                         f"weights are not published; evaluate a completed round (`{command('status', h.paths)}` "
                         f"shows them)")


def _check_weights(h: RunHandle, r: int, names: list[str], force: bool) -> None:
    """Round r's Solver weights are there when a set of `names` must be sampled (not stored, or `force`): an
    InputError naming the checkpoint and the rounds whose weights are kept, before anything is sampled."""
    if not force and all(is_evaluated(h.paths, r, name) for name in names):
        return
    try:
        solver_weights(h.at(r), h.paths, r)
    except FileNotFoundError as e:
        kept = [k for k in range(h.cfg.run.rounds) if is_complete(h.paths.checkpoint(k, "solver"))]
        raise InputError(f"--round {r}: {e}" + (f": --round {' or '.join(map(str, kept))}" if kept else
                                                 " (none is kept)")) from None


def chosen_sets(h: RunHandle, only: str | None) -> dict[str, str]:
    """{name: source} of the sets to evaluate: the run's `eval.sets`, or the one named `only`."""
    sets = h.cfg.eval.sets
    if h.cfg.solver.mode == "search":
        raise InputError(f"run {h.cfg.run.name} has a search Solver (solver.mode = \"search\"): held-out evaluation "
                         "samples whole proofs with the solve prompt and is not built for tactic-level search yet")
    if not sets:
        raise InputError(f"run {h.cfg.run.name} has no evaluation sets (eval.sets is empty in {h.paths.config}); "
                         f"launch runs with an [eval] table, e.g. eval.sets = {{minif2f_test = \"data/minif2f.jsonl\"}} "
                         f"(docs/evaluation.md)")
    if only is not None and only not in sets:
        raise InputError(f"--set {only}: run {h.cfg.run.name} has no evaluation set {only!r}; its eval.sets: "
                         f"{', '.join(sorted(sets))}")
    return {only: sets[only]} if only is not None else dict(sets)


def record_metrics(h: RunHandle, r: int, values: dict[str, float]) -> None:
    """`values` as round r's metrics in the database, replacing the same names' earlier values."""
    with h.db.write() as s:
        old = {m.name: m for m in s.exec(select(Metric).where(Metric.run_id == h.run_id, Metric.round == r,
                                                              Metric.name.in_(list(values)))).all()}  # type: ignore[attr-defined]
        for name, value in values.items():
            row = old.get(name) or Metric(run_id=h.run_id, round=r, name=name, value=0.0)
            row.value = float(value)
            s.add(row)


def check_submittable(h: RunHandle, r: int, only: str | None = None) -> None:
    """What `eval --submit` refuses before submitting: no such set, a round not completed."""
    sets = chosen_sets(h, only)
    _check_round(h, r)
    _check_weights(h, r, sorted(sets), force=False)
    from sgsbatch.scheduling.eval_jobs import live_job

    job = live_job(h, r)
    if job is not None:  # two jobs would write the same files, and the first one's id would be forgotten
        stop = f"scancel {job}" if not job.startswith("pid ") else f"kill -TERM -- -{job.removeprefix('pid ')}"
        raise InputError(f"--submit: round {r}'s evaluation of run {h.cfg.run.name} is already submitted ({job}) and "
                         f"not done; wait for it (`{command('status', h.paths)}` lists it), or stop it (`{stop}`) and "
                         f"submit again")


def evaluate_round(h: RunHandle, r: int, only: str | None = None, force: bool = False) -> list[SetResult]:
    """Evaluate round r's Solver weights on the run's evaluation sets (see the module docstring)."""
    sets = chosen_sets(h, only)
    _check_round(h, r)
    _check_weights(h, r, sorted(sets), force)
    cfg, e = h.at(r), h.cfg.eval
    out: list[SetResult] = []
    for name in sorted(sets):
        where = h.paths.eval_dir(r, name)
        reused = is_evaluated(h.paths, r, name) and not force
        if reused:
            try:
                summary = read_summary(where)
            except DamagedFile as damaged:
                again = command("eval", h.paths, "--round", str(r), "--set", name, "--force")
                raise DamagedFile(damaged.path, damaged.reason, f"evaluate the set again with `{again}` (or restore the file "
                                                    f"from a backup)") from None
        else:
            targets = load_data_source(e.set_data(name), str(h.paths.config), key=f"eval.sets.{name}").targets
            summary = evaluate_set(cfg, h.paths, r, name, targets, samples=e.samples, ks=e.pass_k,
                                   processes=cfg.phase_resources("solve").cpus)  # the evaluation job's CPUs
        values = {M.eval_pass_at(name, int(k)): float(v) for k, v in summary["pass_at_k"].items()}
        record_metrics(h, r, values)
        M.write_eval_tensorboard(h.paths.tb, r, values, simulated=cfg.simulated)
        out.append(SetResult(name, summary, values, reused))
    return out


def result_text(h: RunHandle, r: int, results: list[SetResult]) -> str:
    """What `sgsbatch eval` prints: one line per set."""
    lines = []
    for res in results:
        s = res.summary
        passes = ", ".join(f"pass@{k} {v:.3f}" for k, v in s["pass_at_k"].items())
        label = f" (SIMULATED: {s['simulated']})" if s.get("simulated") else ""
        again = " (stored; --force samples again)" if res.reused else ""
        lines.append(f"run {h.cfg.run.name} round {r} set {res.name}: {s['problems']} problems x {s['samples']} samples, "
                     f"{s['solved']} solved; {passes}{label}{again}\n  files: {h.paths.eval_dir(r, res.name)}")
    return "\n".join(lines)
