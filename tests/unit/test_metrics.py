"""TensorBoard output: scalars per round, solve-rate histograms, purge on rewrite (real event files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgsbatch.round.metrics import solve_rate_histograms, write_tensorboard

pytest.importorskip("tensorboard")


def _load(tb: Path) -> object:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb), size_guidance={"histograms": 0, "scalars": 0})
    acc.Reload()
    return acc


def test_histogram_from_bin_counts() -> None:
    m = {"solve_rate_hist/targets_0": 3, "solve_rate_hist/targets_1": 0, "solve_rate_hist/targets_2": 1,
         "pass@8": 0.25}
    h = solve_rate_histograms(m)["solve_rate_hist/targets"]
    assert h["bucket_limits"] == [0.0, 0.5, 1.0] and h["bucket_counts"] == [3, 0, 1]
    assert h["num"] == 4 and h["min"] == 0.0 and h["max"] == 1.0
    assert h["sum"] == pytest.approx(1.0) and h["sum_squares"] == pytest.approx(1.0)
    assert solve_rate_histograms({"solve_rate_hist/targets_0": 0, "solve_rate_hist/targets_1": 0}) == {}


def test_event_files_hold_scalars_and_histograms_without_duplicates(tmp_path: Path) -> None:
    tb = tmp_path / "tb"
    for r in range(3):
        m = {"cumulative_solve_rate": 0.1 * (r + 1), "generations/total": 100.0 * (r + 1),
             "solve_rate_hist/targets_0": 4 - r, "solve_rate_hist/targets_1": r,
             "solve_rate_hist/conjectures_0": 1, "solve_rate_hist/conjectures_1": 1}
        write_tensorboard(tb, r, m, simulated=True, smoke=False)
    # round 2 written again (a retried train job): its points are replaced, not duplicated
    write_tensorboard(tb, 2, {"cumulative_solve_rate": 0.5, "generations/total": 300.0,
                              "solve_rate_hist/targets_0": 1, "solve_rate_hist/targets_1": 3},
                      simulated=True, smoke=False)
    acc = _load(tb)
    rates = [(e.step, round(e.value, 6)) for e in acc.Scalars("cumulative_solve_rate")]  # type: ignore[attr-defined]
    assert rates == [(0, 0.1), (1, 0.2), (2, 0.5)]
    hists = acc.Histograms("solve_rate_hist/targets")  # type: ignore[attr-defined]
    assert [h.step for h in hists] == [0, 1, 2]
    last = hists[-1].histogram_value
    assert last.num == 4 and list(last.bucket) == [1, 3] and last.max == 1.0
    assert [h.step for h in acc.Histograms("solve_rate_hist/conjectures")] == [0, 1]  # type: ignore[attr-defined]
    gen = _load(tb / "by_generations")
    assert [e.step for e in gen.Scalars("cumulative_solve_rate")] == [100, 200, 300]  # type: ignore[attr-defined]
