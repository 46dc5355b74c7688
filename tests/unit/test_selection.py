"""Selection: solve rates, bands at their edges, ties at the 70th percentile, the solved store."""

from __future__ import annotations

import pytest

from sgsbatch.logic.selection import conjecturer_band, ei_targets, solve_rate, solver_band, unsolved


def test_solve_rate() -> None:
    assert solve_rate(0, 8) == 0.0
    assert solve_rate(4, 8) == 0.5
    assert solve_rate(8, 8) == 1.0
    for bad in ((1, 0), (-1, 8), (9, 8)):
        with pytest.raises(ValueError):
            solve_rate(*bad)


RATES = {
    "zero": 0.0,
    "one_eighth": 1 / 8,
    "half": 0.5,
    "five_eighths": 5 / 8,
    "seven_eighths": 7 / 8,
    "one": 1.0,
}


def test_solver_band_hard_default_edges() -> None:
    # 0 excluded, 0.5 included, above 0.5 excluded
    assert solver_band(RATES) == {"one_eighth", "half"}


def test_solver_band_cispo() -> None:
    # 0 < s < 1: both ends excluded
    assert solver_band(RATES, high=1.0, include_high=False) == {
        "one_eighth",
        "half",
        "five_eighths",
        "seven_eighths",
    }
    assert solver_band(RATES, high=0.5, include_high=False) == {"one_eighth"}
    with pytest.raises(ValueError):
        solver_band(RATES, low=0.6, high=0.5)


def test_conjecturer_band_basic() -> None:
    # candidates (0 < s < 1): 1/8, 2/8, 3/8, 4/8, 5/8, 6/8, 7/8 -> n = 7, int(0.7 * 7) = 4
    # sorted[4] = 5/8 -> keep s <= 5/8
    rates = {f"c{i}": i / 8 for i in range(0, 9)}
    assert conjecturer_band(rates) == {"c1", "c2", "c3", "c4", "c5"}


def test_conjecturer_band_ties_at_threshold_are_kept() -> None:
    # candidates: 1/8, 2/8, 2/8, 2/8, 2/8, 6/8 (n = 6); int(0.7 * 6) = 4 -> sorted[4] = 2/8
    rates = {"a": 1 / 8, "b": 2 / 8, "c": 2 / 8, "d": 2 / 8, "e": 2 / 8, "f": 6 / 8, "g": 0.0, "h": 1.0}
    assert conjecturer_band(rates) == {"a", "b", "c", "d", "e"}


def test_conjecturer_band_ties_span_the_threshold_index() -> None:
    # n = 10 eighths [1, 1, 2, 2, 2, 3, 3, 3, 4, 5]; int(0.7 * 10) = 7 -> sorted[7] = 3/8;
    # all three 3/8 (indices 5, 6, 7) are kept, 4/8 and 5/8 are not
    values = [1, 1, 2, 2, 2, 3, 3, 3, 4, 5]
    rates = {f"c{i}": v / 8 for i, v in enumerate(values)}
    assert conjecturer_band(rates) == {f"c{i}" for i in range(8)}


def test_conjecturer_band_small_and_empty() -> None:
    assert conjecturer_band({}) == set()
    assert conjecturer_band({"x": 0.0, "y": 1.0}) == set()
    # n = 1: int(0.7) = 0 -> threshold is the only value
    assert conjecturer_band({"x": 3 / 8}) == {"x"}
    # n = 2: int(1.4) = 1 -> threshold is the larger one: both kept
    assert conjecturer_band({"x": 1 / 8, "y": 7 / 8}) == {"x", "y"}
    # percentile 0 -> threshold is the minimum
    assert conjecturer_band({"x": 1 / 8, "y": 7 / 8}, percentile=0.0) == {"x"}
    assert conjecturer_band({"x": 1 / 8, "y": 7 / 8}, percentile=1.0) == {"x", "y"}
    with pytest.raises(ValueError):
        conjecturer_band({"x": 0.5}, percentile=1.5)


def test_unsolved_keeps_order() -> None:
    assert unsolved(["c", "b", "a"], {"b": 1, "a": 0}) == ["c", "a"]
    assert unsolved([], {"a": 3}) == []


def test_ei_targets_below_the_cap() -> None:
    assert ei_targets(["a", "b", "c", "d"], {"a": 0, "b": 16, "c": 15, "d": 17}, 16) == ["a", "c"]
    assert ei_targets(["a"], {"a": 2}, 2) == []
    assert ei_targets(["x", "a"], {"a": 16}, 16) == ["x"]
    with pytest.raises(ValueError):
        ei_targets(["a"], {}, 0)
