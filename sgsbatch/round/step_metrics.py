"""Per-optimizer-step metrics: `train_step/<role>/*` on TensorBoard against each role's global step.

Source: the round's `steps.jsonl` (run/progress.py), where rank 0 appends every optimizer step's
`TrainStep` (backends/train_steps.py) as it finishes. The global step of step k of round r is
k + the role's optimizer steps in rounds 0..r-1 (their `train/<role>_steps` metrics, recorded when
each round ended), so it starts at 1 and continues across rounds.

Why at the round's end (round/lifecycle.finish_round) and not live from rank 0: a train job
preempted mid-round resumes from its last checkpoint and does again the steps recorded after it, so
`steps.jsonl` may hold a step twice; the round's end keeps the LAST record of each step (the one
whose update the weights kept), runs once the round's training is final, and knows every earlier
round's step count from the database (which the train job's ranks do not read). Each role is its own
TensorBoard run (`tb/train_steps/<role>/`: the Solver's and the Conjecturer's points never touch) with
one event file per round, named by the round's first global step (`round_file`), so a run's files sort
in step order whatever the clock. Ending a round again (a retried train job, `resume`, `rebuild`)
replaces that file, so a resumed or re-ended round never duplicates points; the file also opens with
purge_step = the round's first global step (as round/metrics.write_tensorboard does per round), so a
reader that loaded an earlier copy drops it (a TensorBoard already running shows a replaced file after
a restart). The price: the curves of a round appear when it ends; while it trains, `status` and the
train log show each step. A value that does not apply (None in the record: e.g. clip fractions of
REINFORCE) is not written. Steps the SIMULATED trainer reported (a rehearsal: counts and LR, loss 0,
nothing trained) are written with a `train_step/labels` text saying so. Not covered: runs whose
`steps.jsonl` predates these statistics (only the fields they hold are written).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sgsbatch.round import metrics as M
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.progress import train_steps, train_steps_file

ROLES = ("solver", "conjecturer")


def round_steps(paths: RunPaths, r: int, role: str) -> list[dict[str, Any]]:
    """Round r's optimizer steps of `role`, one record per step (the last written: a resumed train job
    repeats the steps after its checkpoint), in step order."""
    last: dict[int, dict[str, Any]] = {}
    total = 0
    for rec in train_steps(train_steps_file(paths, r)):
        if rec.get("role") == role and isinstance(rec.get("step"), int):
            last[rec["step"]] = rec
            total = int(rec.get("steps", 0))
    # an earlier attempt of another length (its data changed: the trainer started afresh) leaves no step past the last
    return [last[k] for k in sorted(last) if k <= total]


def steps_before(steps_per_round: Mapping[int, float], r: int) -> int:
    """The role's optimizer steps in the rounds before r ({round: `train/<role>_steps`})."""
    return int(sum(v for k, v in steps_per_round.items() if k < r))


def step_scalars(role: str, r: int, record: Mapping[str, Any]) -> dict[str, float]:
    """One step's `train_step/<role>/*` values (fields absent or None are left out)."""
    rec = {**record, "round": r}
    return {M.train_step(role, name): float(rec[field]) for name, field in M.TRAIN_STEP_STATS.items()
            if isinstance(rec.get(field), int | float) and not isinstance(rec.get(field), bool)}


def role_tb_dir(tb_dir: Path, role: str) -> Path:
    return tb_dir / M.TRAIN_STEPS_DIR / role


def round_file(r: int, first_step: int) -> str:
    """Round r's event file of a role: named by its first global step, so that a run's files sort in step
    order (TensorBoard reads them in name order; torch's names sort by the second, then by a counter that
    a fast rewrite, e.g. `rebuild`, can carry from 9 to 10)."""
    return f"events.out.tfevents.{first_step:012d}.r{r:06d}"


def write_round_steps(tb_dir: Path, paths: RunPaths, r: int, before: Mapping[str, int]) -> dict[str, int]:
    """Write round r's steps of every role to TensorBoard (`before`: each role's steps in earlier rounds),
    one event file per role replacing the round's earlier one; returns the steps written per role."""
    import shutil

    from torch.utils.tensorboard import SummaryWriter

    written: dict[str, int] = {}
    for role in ROLES:
        records = round_steps(paths, r, role)
        if not records:
            continue
        offset = before.get(role, 0)
        tmp = paths.phase_dir(r, "train") / f".train_steps_tb_{role}"  # outside tb/: never seen as a run
        shutil.rmtree(tmp, ignore_errors=True)
        # purge_step too: a reader that had loaded an earlier copy drops its points from the first step on
        with SummaryWriter(str(tmp), purge_step=offset + 1) as w:
            if any(rec.get("simulated") for rec in records):
                w.add_text(M.TRAIN_STEP_LABELS, "SIMULATED trainer: nothing trained (step counts and LR; loss 0)",
                           offset + 1)
            for rec in records:
                for name, value in step_scalars(role, r, rec).items():
                    w.add_scalar(name, value, offset + int(rec["step"]))
        (made,) = tmp.glob("events.out.tfevents.*")
        out = role_tb_dir(tb_dir, role)
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob(f"events.out.tfevents.*.r{r:06d}"):  # an earlier write (another offset: rebuilt)
            old.unlink()
        os.replace(made, out / round_file(r, offset + 1))
        shutil.rmtree(tmp, ignore_errors=True)
        written[role] = len(records)
    return written


def run_step_series(paths: RunPaths, metrics: Mapping[int, Mapping[str, float]], role: str,
                    names: tuple[str, ...]) -> dict[str, tuple[list[float], list[float]]]:
    """For the report: {stat: (global steps, values)} of `role` over the rounds that ended (those with a
    `train/<role>_steps` metric), the same points TensorBoard holds."""
    counts = {r: m[M.train(role, "steps")] for r, m in metrics.items() if M.train(role, "steps") in m}
    out: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in names}
    for r in sorted(counts):
        offset = steps_before(counts, r)
        for rec in round_steps(paths, r, role):
            values = step_scalars(role, r, rec)
            for n in names:
                if M.train_step(role, n) in values:
                    out[n][0].append(float(offset + int(rec["step"])))
                    out[n][1].append(values[M.train_step(role, n)])
    return {n: xy for n, xy in out.items() if xy[0]}
