"""Guide reviews: parsing a Guide reply, the combined guide score, and filling failed parses.

Covered: the three sub-scores (relevance 0-5, redundant premises 0/1, conclusion complexity
0-4), `R_guide`, and the round-level fill of reviews that failed to parse. Not covered: the
Guide prompt (`prompts.py`) and the Conjecturer reward built from `R_guide` (`rewards.py`).

Parsing: for each tag, the text between the last ``<tag>`` ... ``</tag>`` pair, stripped of
surrounding whitespace, must be ASCII digits only and in range; otherwise the whole review
fails with a reason code such as ``missing_relevance``, ``not_a_number_redundant_premises`` or
``out_of_range_conclusion_complexity``.

Filling (`fill_failed`): a failed review gets, per sub-score, the mean of that sub-score over
the round's successful reviews, and as combined score the mean of the successful combined
scores (not the score of the mean sub-scores: `R_guide` is not linear, complexity 3-4 zeroes
it). If no review of the round succeeded, every review gets `fallback_score` (default 0.0, as the
reference: `average_review = 0.0` in sgs/models/guide/llm_judge_guide.py:105-106; every
Conjecturer reward is then 0 and min-max normalises to 1) and no sub-scores (None).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sgsbatch.prompts import CONCLUSION_COMPLEXITY_TAG, REDUNDANT_PREMISES_TAG, RELEVANCE_TAG

RELEVANCE_RANGE = (0, 5)
REDUNDANT_RANGE = (0, 1)
COMPLEXITY_RANGE = (0, 4)
_RANGES: dict[str, tuple[int, int]] = {
    RELEVANCE_TAG: RELEVANCE_RANGE,
    REDUNDANT_PREMISES_TAG: REDUNDANT_RANGE,
    CONCLUSION_COMPLEXITY_TAG: COMPLEXITY_RANGE,
}
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Review:
    """One parsed Guide reply. Sub-scores are None exactly when the parse failed."""

    relevance: int | None
    redundant: int | None
    complexity: int | None
    ok: bool
    reason: str | None

    @property
    def score(self) -> float | None:
        """`R_guide` of a successful review, None for a failed one."""
        if self.relevance is None or self.redundant is None or self.complexity is None:
            return None
        return guide_score(self.relevance, self.redundant, self.complexity)


@dataclass(frozen=True)
class FilledReview:
    """A review after `fill_failed`: every one has a combined `score`; `filled` marks stand-ins."""

    relevance: float | None
    redundant: float | None
    complexity: float | None
    score: float
    filled: bool


def _failed(reason: str) -> Review:
    return Review(relevance=None, redundant=None, complexity=None, ok=False, reason=reason)


def _tag_value(reply: str, tag: str) -> tuple[int | None, str | None]:
    """(value, None) or (None, reason code) for the last ``<tag>...</tag>`` pair of `reply`."""
    close = f"</{tag}>"
    end = reply.rfind(close)
    if end < 0:
        return None, f"missing_{tag}"
    start = reply.rfind(f"<{tag}>", 0, end)
    if start < 0:
        return None, f"missing_{tag}"
    inner = reply[start + len(tag) + 2 : end].strip()
    if not _DIGITS.fullmatch(inner):
        return None, f"not_a_number_{tag}"
    value = int(inner)
    low, high = _RANGES[tag]
    if not low <= value <= high:
        return None, f"out_of_range_{tag}"
    return value, None


def parse_review(reply: str) -> Review:
    """Parse a Guide reply; the first failing tag (in prompt order) names the reason."""
    values: dict[str, int] = {}
    for tag in (RELEVANCE_TAG, REDUNDANT_PREMISES_TAG, CONCLUSION_COMPLEXITY_TAG):
        value, reason = _tag_value(reply, tag)
        if reason is not None:
            return _failed(reason)
        assert value is not None
        values[tag] = value
    return Review(
        relevance=values[RELEVANCE_TAG],
        redundant=values[REDUNDANT_PREMISES_TAG],
        complexity=values[CONCLUSION_COMPLEXITY_TAG],
        ok=True,
        reason=None,
    )


def guide_score(relevance: float, redundant: float, complexity: float) -> float:
    """`R_guide = 0 if complexity in {3, 4} else max(0, relevance + (2 - complexity) + (1 - redundant))`.

    Range 0..8. Accepts floats so it can score averaged sub-scores; complexity >= 3 counts as
    "3 or 4".
    """
    if complexity >= 3:
        return 0.0
    return float(max(0.0, relevance + (2 - complexity) + (1 - redundant)))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def fill_failed(reviews: Sequence[Review], fallback_score: float = 0.0) -> list[FilledReview]:
    """The round's reviews with failed parses replaced by the mean of the successful ones."""
    good = [r for r in reviews if r.ok]
    if not good:
        return [
            FilledReview(relevance=None, redundant=None, complexity=None, score=fallback_score, filled=True)
            for _ in reviews
        ]
    means: list[float] = []
    for attr in ("relevance", "redundant", "complexity"):
        values = [getattr(r, attr) for r in good]
        means.append(_mean(values))
    scores = [r.score for r in good]
    assert all(s is not None for s in scores)
    mean_score = _mean([s for s in scores if s is not None])
    out: list[FilledReview] = []
    for r in reviews:
        if r.ok:
            assert r.relevance is not None and r.redundant is not None and r.complexity is not None
            out.append(
                FilledReview(
                    relevance=float(r.relevance),
                    redundant=float(r.redundant),
                    complexity=float(r.complexity),
                    score=guide_score(r.relevance, r.redundant, r.complexity),
                    filled=False,
                )
            )
        else:
            out.append(
                FilledReview(
                    relevance=means[0], redundant=means[1], complexity=means[2], score=mean_score, filled=True
                )
            )
    return out
