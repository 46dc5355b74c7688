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


def test_hparams_session_holds_every_config_key_and_the_latest_metrics(tmp_path: Path) -> None:
    """One HParams session per run under tb/hparams: each round's end replaces the last, with every
    config key (lists as JSON text) and the round's headline metrics."""
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    from sgsbatch.config.loading import flat_config
    from sgsbatch.config.schema import Config
    from sgsbatch.round.metrics import write_hparams

    tb = tmp_path / "tb"
    hp = flat_config(Config())
    for r in range(2):
        write_hparams(tb, r, hp, {"cumulative_solve_rate": 0.1 * (r + 1), "pass@8": 0.5, "tokens/round": 9.0})
    assert len(list((tb / "hparams").glob("events.*"))) == 1  # replaced, not added to
    acc = _load(tb / "hparams")
    content = acc.PluginTagToContent("hparams")  # type: ignore[attr-defined]
    start = HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    values = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()}
    assert set(values) == set(hp)
    assert values["solver.lr"] == pytest.approx(3e-6) and values["run.name"] == "sgs"
    assert values["train.betas"] == "[0.9, 0.95]" and values["guide.enabled"] == "true"
    experiment = HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert sorted(m.name.tag for m in experiment.metric_infos) == ["cumulative_solve_rate", "pass@8"]
    assert [(e.step, round(e.value, 6)) for e in acc.Scalars("cumulative_solve_rate")] == [(1, 0.2)]  # type: ignore[attr-defined]


def test_a_re_ended_round_replaces_its_points_whatever_the_event_files_names(tmp_path: Path) -> None:
    """TensorBoard reads event files in name order; a file named to sort after the new write (two writes in
    one second whose counters cross a digit, "...10" < "...9"; stood in for by a later second here) must not
    keep the round's old points: the new file is renamed to sort last."""
    tb = tmp_path / "tb"
    write_tensorboard(tb, 0, {"cumulative_solve_rate": 0.1}, simulated=False, smoke=False)
    write_tensorboard(tb, 1, {"cumulative_solve_rate": 0.3}, simulated=False, smoke=False)
    for d in (tb, tb / "by_generations"):
        newest = max(d.glob("events.out.tfevents.*"))
        stamp, rest = newest.name[len("events.out.tfevents."):].split(".", 1)
        newest.rename(d / f"events.out.tfevents.{int(stamp) + 100:010d}.{rest}")  # sorts after any write now
    write_tensorboard(tb, 1, {"cumulative_solve_rate": 0.5}, simulated=False, smoke=False)
    rates = [(e.step, round(e.value, 6)) for e in _load(tb).Scalars("cumulative_solve_rate")]  # type: ignore[attr-defined]
    assert rates == [(0, 0.1), (1, 0.5)]
