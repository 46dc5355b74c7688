"""Selection: solve rates, the Solver and Conjecturer bands, and the store of solved targets.

Covered: which problems a round trains on (bands), which targets still need sampling
(unsolved set, Expert Iteration cap), and `SolvedStore`, the run's memory of verified target
proofs (at most `cap` per target). Not covered: persisting the store in the state database
(the store converts to and from plain JSON-able dicts for that) and the rewards themselves.

Determinism: band functions return sets; functions that return problems to sample keep the
caller's order. `SolvedStore` keeps the first `cap` distinct proofs it is given per target, so
callers must add proofs in a stable order (e.g. by round, then sample index).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, overload


class HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=str | HasId)


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


def _key(item: str | HasId) -> str:
    return item if isinstance(item, str) else item.id


@dataclass(frozen=True)
class StoredProof:
    """A verified proof of a target and the round that found it."""

    proof: str
    round: int


class SolvedStore:
    """Verified target proofs, at most `cap` distinct proofs per target, first come first kept.

    Proofs are compared after stripping surrounding whitespace; an exact duplicate is not stored
    again (it would take a slot and double its weight in Expert Iteration).
    """

    def __init__(self, cap: int = 16) -> None:
        if cap <= 0:
            raise ValueError(f"SolvedStore: cap must be positive, got {cap}")
        self.cap = cap
        self._proofs: dict[str, list[StoredProof]] = {}

    def add(self, target_id: str, proof: str, round: int = 0) -> bool:
        """Store `proof` for `target_id`; True if it was kept (new and under the cap)."""
        kept = self._proofs.setdefault(target_id, [])
        text = proof.strip()
        if not text:
            raise ValueError(f"SolvedStore.add: empty proof for {target_id}")
        if len(kept) >= self.cap or any(p.proof == text for p in kept):
            return False
        kept.append(StoredProof(proof=text, round=round))
        return True

    def add_many(self, target_id: str, proofs: Iterable[str], round: int = 0) -> int:
        """Add proofs in the given order; returns how many were kept."""
        return sum(self.add(target_id, p, round) for p in proofs)

    def proofs(self, target_id: str) -> list[str]:
        return [p.proof for p in self._proofs.get(target_id, [])]

    def entries(self, target_id: str) -> list[StoredProof]:
        return list(self._proofs.get(target_id, []))

    def count(self, target_id: str) -> int:
        return len(self._proofs.get(target_id, []))

    def is_solved(self, target_id: str) -> bool:
        return self.count(target_id) > 0

    def __contains__(self, target_id: object) -> bool:
        return isinstance(target_id, str) and self.is_solved(target_id)

    def solved_ids(self) -> list[str]:
        """Solved targets, sorted."""
        return sorted(k for k, v in self._proofs.items() if v)

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in sorted(self._proofs.items()) if v}

    def solved_fraction(self, target_ids: Collection[str]) -> float:
        """Cumulative solve rate: share of `target_ids` with at least one stored proof."""
        if not target_ids:
            raise ValueError("solved_fraction: no targets")
        return sum(self.is_solved(t) for t in target_ids) / len(target_ids)

    def recent(self, current_round: int, window: int = 3) -> list[tuple[str, str]]:
        """(target id, proof) stored in the last `window` rounds up to `current_round`.

        Expert Iteration trains on these; rounds `current_round - window + 1 .. current_round`.
        Sorted by target id, then storage order.
        """
        if window <= 0:
            raise ValueError(f"SolvedStore.recent: window must be positive, got {window}")
        first = current_round - window + 1
        return [
            (target_id, p.proof)
            for target_id in sorted(self._proofs)
            for p in self._proofs[target_id]
            if first <= p.round <= current_round
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form: {"cap": N, "proofs": {id: [{"proof", "round"}, ...]}}."""
        return {
            "cap": self.cap,
            "proofs": {
                k: [{"proof": p.proof, "round": p.round} for p in v]
                for k, v in sorted(self._proofs.items())
                if v
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], cap: int | None = None) -> SolvedStore:
        """Rebuild a store from `to_dict` output; `cap` overrides the stored cap (extra proofs dropped)."""
        store = cls(cap=int(data.get("cap", 16)) if cap is None else cap)
        for target_id, items in data.get("proofs", {}).items():
            for item in items:
                store.add(target_id, str(item["proof"]), int(item.get("round", 0)))
        return store


def unsolved(targets: Iterable[T], store: SolvedStore | Collection[str]) -> list[T]:
    """Targets (ids or objects with `.id`) with no stored verified proof, in the given order.

    `store` is a `SolvedStore` or a collection of solved target ids.
    """
    if isinstance(store, SolvedStore):
        return [t for t in targets if not store.is_solved(_key(t))]
    return [t for t in targets if _key(t) not in store]


@overload
def ei_needs_samples(
    stored_counts: Mapping[str, int] | SolvedStore, cap: int = 16, targets: None = None
) -> list[str]: ...


@overload
def ei_needs_samples(
    stored_counts: Mapping[str, int] | SolvedStore, cap: int = 16, *, targets: Iterable[T]
) -> list[T]: ...


def ei_needs_samples(
    stored_counts: Mapping[str, int] | SolvedStore,
    cap: int = 16,
    targets: Iterable[T] | None = None,
) -> list[str] | list[T]:
    """Expert Iteration: targets with fewer than `cap` stored proofs.

    Without `targets`, the ids of `stored_counts` (which must then list every target, 0 for
    none) in its order. With `targets`, those of them (ids or objects) below the cap, in order;
    a target missing from `stored_counts` counts as 0.
    """
    if cap <= 0:
        raise ValueError(f"ei_needs_samples: cap must be positive, got {cap}")
    if isinstance(stored_counts, SolvedStore):
        store = stored_counts

        def count(target_id: str) -> int:
            return store.count(target_id)
    else:
        counts = stored_counts

        def count(target_id: str) -> int:
            return counts.get(target_id, 0)

    if targets is None:
        if isinstance(stored_counts, SolvedStore):
            raise ValueError("ei_needs_samples: pass `targets` when giving a SolvedStore")
        return [k for k in stored_counts if count(k) < cap]
    return [t for t in targets if count(_key(t)) < cap]


def rates_of(verified: Mapping[str, int], samples: int | Mapping[str, int]) -> dict[str, float]:
    """Solve rates for many problems: `samples` is one count for all or a count per problem."""
    if isinstance(samples, int):
        return {k: solve_rate(v, samples) for k, v in verified.items()}
    missing = sorted(set(verified) - set(samples))
    if missing:
        raise ValueError(f"rates_of: no sample count for {', '.join(missing[:5])}")
    return {k: solve_rate(v, samples[k]) for k, v in verified.items()}


__all__ = [
    "HasId",
    "SolvedStore",
    "StoredProof",
    "conjecturer_band",
    "ei_needs_samples",
    "rates_of",
    "solve_rate",
    "solver_band",
    "unsolved",
]
