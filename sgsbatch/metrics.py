"""Round metrics in TensorBoard: one step per round, and a second x-axis in generations so far.

Events go under `runs/<name>/tb/` (step = round) and `runs/<name>/tb/by_generations/` (step =
generations so far), so `tensorboard --logdir runs/` shows every run. Writing a round again
(a retried train job) first purges that round's points (`purge_step`), so resuming never
duplicates them. Simulated and smoke runs are labelled in a text summary on every round.
The metric values themselves are computed at ingestion (state/ingest.py, advance.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

HEADLINE = "cumulative_solve_rate"


def write_tensorboard(tb_dir: Path, r: int, metrics: Mapping[str, float], *, simulated: bool, smoke: bool) -> None:
    from torch.utils.tensorboard import SummaryWriter

    generations = int(metrics.get("generations/total", 0))
    labels = [x for x, on in (("SIMULATED verifier (not Lean)", simulated), ("smoke run", smoke)) if on]
    with SummaryWriter(str(tb_dir), purge_step=r) as w:
        for name, value in sorted(metrics.items()):
            w.add_scalar(name, value, r)
        w.add_text("run/labels", ", ".join(labels) or "research run", r)
    with SummaryWriter(str(tb_dir / "by_generations"), purge_step=generations) as w:
        for name, value in sorted(metrics.items()):
            w.add_scalar(name, value, generations)
