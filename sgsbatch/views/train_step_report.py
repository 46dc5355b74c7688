"""The report's section on the Solver's optimizer steps: its `train_step/solver/*` curves per global step.

Four figures, each left out when no step recorded its values: the step's loss; the share of tokens
clipped (CISPO: its weight at cispo_clip_max; the GRPO family: both sides and each side); the KL per
token (to the sampler, and to the reference policy when the objective has that term) beside the
spread of the sequence ratio; the gradient norm before clipping. The points are the ones TensorBoard
holds (round/step_metrics.run_step_series: the rounds that ended, the last record of each step).
Not covered: the Conjecturer's steps, entropy, learning rate and tokens (on TensorBoard), runs whose
steps predate these statistics or whose trainer is simulated (no section).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sgsbatch.round.step_metrics import run_step_series
from sgsbatch.views.plot import lines_png

if TYPE_CHECKING:
    from sgsbatch.run.handle import RunHandle

# (title, y label, percent, {legend: stat}); a stat is a name of round/metrics.TRAIN_STEP_STATS
FIGURES: tuple[tuple[str, str, bool, dict[str, str]], ...] = (
    ("Solver: loss per optimizer step", "loss", False, {"loss": "loss"}),
    ("Solver: tokens clipped per optimizer step", "share of tokens", True,
     {"clipped": "clip_fraction", "clipped low": "clip_fraction_low", "clipped high": "clip_fraction_high"}),
    ("Solver: KL and ratio spread per optimizer step", "value", False,
     {"KL(sampler || policy) per token": "sampler_kl", "KL to the reference per token": "ref_kl",
      "std of the sequence ratio": "ratio_std"}),
    ("Solver: gradient norm per optimizer step (before clipping)", "L2 norm", False, {"gradient norm": "grad_norm"}),
)


def train_step_section(h: RunHandle, metrics: dict[int, dict[str, float]]) -> tuple[str, dict[str, Any]]:
    """The section's HTML ("" when no Solver step was recorded) and its data: {stat: (global steps, values)}."""
    import base64
    import html

    names = tuple(sorted({s for *_, legend in FIGURES for s in legend.values()}))
    data = run_step_series(h.paths, metrics, "solver", names)
    figs = []
    for title, ylabel, percent, legend in FIGURES:
        series = {label: data[stat] for label, stat in legend.items() if stat in data}
        if series:
            png = base64.b64encode(lines_png(title, "optimizer step (all rounds)", ylabel, series, percent=percent))
            figs.append(f'<figure><img class="plot" alt="{html.escape(title, quote=True)}" '
                        f'src="data:image/png;base64,{png.decode("ascii")}"></figure>')
    if not figs:
        return "", data
    return ("<h3>Solver per optimizer step</h3>"
            '<p class="note">One point per optimizer step; the x-axis counts the Solver\'s steps over all rounds '
            "(TensorBoard: train_step/solver/* in tb/train_steps/solver).</p>"
            f'<div class="grid">{"".join(figs)}</div>'), data
