"""Guide reviews: parsing a Guide reply, the combined guide score, and filling failed parses.

Covered: the three sub-scores (relevance 0-5, redundancy 0/1, conclusion complexity 0-4), `R_guide`,
and the round-level fill of reviews that failed to parse. Not covered: the Guide prompt and its
tags (`logic/prompts.py`, data chosen by the `[prompts]` config section) and the Conjecturer reward
built from `R_guide` (`logic/rewards.py`).

Parsing follows the reference (sgs/utils/prompts.py, extract_guide_*_score): for each score, the
text between the LAST begin tag and the LAST end tag (each found with rfind), parsed with
`float()` (which ignores surrounding whitespace). A missing tag, or a value `float()` refuses
(an end tag before the last begin tag leaves an empty value), fails the whole review. Ours on top:
a value outside the score's range (or not finite) also fails it. Reason codes, for the first
failing score in prompt order: ``missing_relevance``, ``not_a_number_redundancy``,
``out_of_range_conclusion_complexity`` and so on.

Filling (`fill_failed`): a failed review gets, per sub-score, the mean of that sub-score over
the round's successful reviews, and as combined score the mean of the successful combined
scores (not the score of the mean sub-scores: `R_guide` is not linear, complexity 3-4 zeroes
it). If no review of the round succeeded, every review gets `fallback_score` (default 0.0, as the
reference: `average_review = 0.0` in sgs/models/guide/llm_judge_guide.py:105-106; every
Conjecturer reward is then 0 and min-max normalises to 1) and no sub-scores (None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sgsbatch.logic.prompts import GuideTags, reference_prompts

RELEVANCE_RANGE = (0.0, 5.0)
REDUNDANCY_RANGE = (0.0, 1.0)
COMPLEXITY_RANGE = (0.0, 4.0)
_RANGES: dict[str, tuple[float, float]] = {
    "relevance": RELEVANCE_RANGE,
    "redundancy": REDUNDANCY_RANGE,
    "conclusion_complexity": COMPLEXITY_RANGE,
}


@dataclass(frozen=True)
class Review:
    """One parsed Guide reply. Sub-scores are None exactly when the parse failed."""

    relevance: float | None
    redundant: float | None
    complexity: float | None
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


def _tag_value(reply: str, name: str, begin: str, end: str) -> tuple[float | None, str | None]:
    """(value, None) or (None, reason code): the text between the last `begin` and the last `end`."""
    start = reply.rfind(begin)
    stop = reply.rfind(end)
    if start < 0 or stop < 0:
        return None, f"missing_{name}"
    try:
        value = float(reply[start + len(begin) : stop])
    except ValueError:
        return None, f"not_a_number_{name}"
    low, high = _RANGES[name]
    if not (math.isfinite(value) and low <= value <= high):
        return None, f"out_of_range_{name}"
    return value, None


def parse_review(reply: str, tags: GuideTags | None = None) -> Review:
    """Parse a Guide reply with `tags` (default: the reference's); the first failing score names the reason."""
    values: dict[str, float] = {}
    for name, begin, end in (tags or reference_prompts().guide_tags).pairs():
        value, reason = _tag_value(reply, name, begin, end)
        if reason is not None:
            return _failed(reason)
        assert value is not None
        values[name] = value
    return Review(
        relevance=values["relevance"],
        redundant=values["redundancy"],
        complexity=values["conclusion_complexity"],
        ok=True,
        reason=None,
    )


def guide_score(relevance: float, redundant: float, complexity: float) -> float:
    """`R_guide = 0 if complexity in {3, 4} else max(0, relevance + (2 - complexity) + (1 - redundant))`.

    The reference's `sub_scores_to_review`, to the letter: only a complexity equal to 3 or 4 zeroes
    the score (3.5 does not: it gives `max(0, relevance - 1.5 + (1 - redundant))`). Range 0..8.
    """
    if complexity in (3, 4):
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
