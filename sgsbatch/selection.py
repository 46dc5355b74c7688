"""Selection: solve rates, the Solver and Conjecturer bands, and which targets a round samples.

Covered: which problems a round trains on (bands) and which targets still need sampling (the
unsolved set for the Conjecturer, the Expert Iteration cap). Not covered: the solved store itself
(state/ingest.py keeps at most `solver.store_cap` proofs per target, first come first kept) and
the rewards. Determinism: band functions return sets; functions that return targets to sample
keep the caller's order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def solve_rate(verified: int, samples: int) -> float:
    """`verified / samples`; a problem with no samples is a user error."""
    if samples <= 0:
        raise ValueError(f"solve_rate: samples must be positive, got {samples}")
    if not 0 <= verified <= samples:
        raise ValueError(f"solve_rate: verified must be in 0..{samples}, got {verified}")
    return verified / samples


def solver_band(
    rates: Mapping[str, float], low: float = 0.0, high: float = 0.5, include_high: bool = True
) -> set[str]:
    """Problems with `low < s <= high` (`s < high` when `include_high` is False).

    Default: the "hard" band `0 < s <= 0.5`. CISPO uses `high=1.0, include_high=False`.
    """
    if low > high:
        raise ValueError(f"solver_band: low ({low}) is above high ({high})")
    if include_high:
        return {k for k, s in rates.items() if low < s <= high}
    return {k for k, s in rates.items() if low < s < high}


def conjecturer_band(rates: Mapping[str, float], percentile: float = 0.7) -> set[str]:
    """In-band conjectures: among those with `0 < s < 1`, keep `0 < s <= t`, `t = sorted[int(p * n)]`.

    Ties with `t` are kept. `percentile = 1.0` would index past the end; the index is clamped to
    the last element (keep all of `0 < s < 1`).
    """
    if not 0.0 <= percentile <= 1.0:
        raise ValueError(f"conjecturer_band: percentile must be in [0, 1], got {percentile}")
    candidates = {k: s for k, s in rates.items() if 0.0 < s < 1.0}
    if not candidates:
        return set()
    ordered = sorted(candidates.values())
    threshold = ordered[min(int(percentile * len(ordered)), len(ordered) - 1)]
    return {k for k, s in candidates.items() if s <= threshold}


def unsolved(target_ids: Iterable[str], stored: Mapping[str, int]) -> list[str]:
    """Targets without a stored verified proof (`stored`: proofs per target), in the given order."""
    return [t for t in target_ids if not stored.get(t)]


def ei_targets(target_ids: Iterable[str], stored: Mapping[str, int], cap: int) -> list[str]:
    """Targets Expert Iteration still samples: fewer than `cap` stored proofs, in the given order."""
    if cap <= 0:
        raise ValueError(f"ei_targets: cap must be positive, got {cap}")
    return [t for t in target_ids if stored.get(t, 0) < cap]
