"""Guide reviews: parsing, the combined score at complexity 2/3/4, and filling failed parses."""

from __future__ import annotations

import pytest

from sgsbatch.review import FilledReview, Review, fill_failed, guide_score, parse_review


def reply(rel: str, red: str, cpx: str, extra: str = "") -> str:
    return (
        f"{extra}Reasoning...\n<relevance>{rel}</relevance>\n"
        f"<redundant_premises>{red}</redundant_premises>\n<conclusion_complexity>{cpx}</conclusion_complexity>"
    )


def test_parse_good_reply() -> None:
    assert parse_review(reply("4", "0", "1")) == Review(4, 0, 1, True, None)
    assert parse_review(reply(" 5\n", "1", "0")) == Review(5, 1, 0, True, None)


def test_last_pair_of_each_tag_wins() -> None:
    text = reply("1", "1", "4") + "\nOn reflection:\n" + reply("3", "0", "2")
    assert parse_review(text) == Review(3, 0, 2, True, None)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no tags at all", "missing_relevance"),
        (reply("3", "0", "2").replace("</conclusion_complexity>", ""), "missing_conclusion_complexity"),
        (reply("N", "0", "2"), "not_a_number_relevance"),
        (reply("3.5", "0", "2"), "not_a_number_relevance"),
        (reply("-1", "0", "2"), "not_a_number_relevance"),
        (reply("3", "yes", "2"), "not_a_number_redundant_premises"),
        (reply("6", "0", "2"), "out_of_range_relevance"),
        (reply("3", "2", "2"), "out_of_range_redundant_premises"),
        (reply("3", "0", "5"), "out_of_range_conclusion_complexity"),
        (reply("", "0", "2"), "not_a_number_relevance"),
    ],
)
def test_parse_failures(text: str, reason: str) -> None:
    assert parse_review(text) == Review(None, None, None, False, reason)


@pytest.mark.parametrize(
    ("rel", "red", "cpx", "score"),
    [
        (5, 0, 0, 8.0),  # maximum: 5 + 2 + 1
        (0, 1, 2, 0.0),  # 0 + 0 + 0
        (3, 0, 2, 4.0),  # complexity 2: 3 + 0 + 1
        (3, 1, 2, 3.0),  # complexity 2, redundant: 3 + 0 + 0
        (5, 0, 3, 0.0),  # complexity 3 zeroes
        (5, 0, 4, 0.0),  # complexity 4 zeroes
        (2, 1, 1, 3.0),  # 2 + 1 + 0
    ],
)
def test_guide_score(rel: int, red: int, cpx: int, score: float) -> None:
    assert guide_score(rel, red, cpx) == score


def test_fill_failed_uses_means_of_successful_reviews() -> None:
    good_a = Review(4, 0, 1, True, None)  # score 4 + 1 + 1 = 6
    good_b = Review(2, 1, 3, True, None)  # score 0 (complexity 3)
    bad = Review(None, None, None, False, "missing_relevance")
    out = fill_failed([good_a, bad, good_b])
    assert out[0] == FilledReview(4.0, 0.0, 1.0, 6.0, False)
    assert out[2] == FilledReview(2.0, 1.0, 3.0, 0.0, False)
    # sub-scores are means (3, 0.5, 2); the score is the mean of scores (6 + 0) / 2 = 3,
    # not guide_score(3, 0.5, 2) = 3.5
    assert out[1] == FilledReview(3.0, 0.5, 2.0, 3.0, True)


def test_fill_failed_when_nothing_parsed_uses_the_fallback() -> None:
    bad = Review(None, None, None, False, "missing_relevance")
    # the reference's fill when nothing parsed is 0.0 (llm_judge_guide.py:105-106)
    assert fill_failed([bad, bad]) == [FilledReview(None, None, None, 0.0, True)] * 2
    assert fill_failed([bad], fallback_score=2.5)[0].score == 2.5
    assert fill_failed([]) == []


def test_review_score_property() -> None:
    assert Review(3, 0, 2, True, None).score == 4.0
    assert Review(None, None, None, False, "missing_relevance").score is None
