"""Guide reviews: parsing replies in the reference format, the combined score, filling failed parses."""

from __future__ import annotations

import pytest

from sgsbatch.logic.prompts import GuideTags
from sgsbatch.logic.review import FilledReview, Review, fill_failed, guide_score, parse_review

REL = ("<begin_relevance_score>", "<end_relevance_score>")
RED = ("<begin_redundancy_score>", "<end_redundancy_score>")
CPX = ("<begin_conclusion_complexity_score>", "<end_conclusion_complexity_score>")


def reply(rel: str, red: str, cpx: str, extra: str = "") -> str:
    """A reply shaped like the example in the reference Guide prompt."""
    return (
        f"{extra}Reasoning...\n\n{REL[0]}\n{rel}\n{REL[1]}\n{RED[0]}\n{red}\n{RED[1]}\n"
        f"{CPX[0]}\n{cpx}\n{CPX[1]}"
    )


def test_parse_good_reply() -> None:
    assert parse_review(reply("4", "0", "1")) == Review(4.0, 0.0, 1.0, True, None)
    assert parse_review(reply(" 5\n", "1", "0")) == Review(5.0, 1.0, 0.0, True, None)
    # float(), as the reference: decimals and signs are numbers
    assert parse_review(reply("3.5", "0.0", "+2")) == Review(3.5, 0.0, 2.0, True, None)
    assert parse_review(f"{REL[0]}4{REL[1]} {RED[0]} 1 {RED[1]} {CPX[0]}0{CPX[1]}") == Review(4.0, 1.0, 0.0, True, None)


def test_last_begin_and_last_end_tag_win() -> None:
    text = reply("1", "1", "4") + "\nOn reflection:\n" + reply("3", "0", "2")
    assert parse_review(text) == Review(3.0, 0.0, 2.0, True, None)
    # several begin tags before one end tag: the text after the last begin tag
    several = reply("3", "0", "2").replace(f"{REL[0]}\n3", f"{REL[0]} 1 {REL[0]} 4")
    assert parse_review(several) == Review(4.0, 0.0, 2.0, True, None)


def test_reply_echoing_the_prompt_line_uses_the_scores_after_it() -> None:
    echo = f"1) Relevance score: {REL[0]} {REL[1]}\n"  # the prompt's own line: an empty value, then the real one
    assert parse_review(echo + reply("2", "1", "1")) == Review(2.0, 1.0, 1.0, True, None)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no tags at all", "missing_relevance"),
        (reply("3", "0", "2").replace(CPX[1], ""), "missing_conclusion_complexity"),  # missing end tag
        (reply("3", "0", "2").replace(RED[0], ""), "missing_redundancy"),  # missing begin tag
        (reply("N", "0", "2"), "not_a_number_relevance"),
        (reply("3/5", "0", "2"), "not_a_number_relevance"),
        (reply("3", "yes", "2"), "not_a_number_redundancy"),
        (reply("", "0", "2"), "not_a_number_relevance"),
        (reply("4 out of 5", "0", "2"), "not_a_number_relevance"),
        # the end tag only before the last begin tag: the reference's slice is empty
        (reply("3", "0", "2") + f"\n{REL[0]} 5", "not_a_number_relevance"),
        (reply("6", "0", "2"), "out_of_range_relevance"),
        (reply("-1", "0", "2"), "out_of_range_relevance"),
        (reply("3", "2", "2"), "out_of_range_redundancy"),
        (reply("3", "0", "5"), "out_of_range_conclusion_complexity"),
        (reply("3", "0", "4.5"), "out_of_range_conclusion_complexity"),
        (reply("nan", "0", "2"), "out_of_range_relevance"),
        (reply("3", "inf", "2"), "out_of_range_redundancy"),
        # the old sgsbatch tags are not the reference's
        ("<relevance>3</relevance><redundant_premises>0</redundant_premises>"
         "<conclusion_complexity>2</conclusion_complexity>", "missing_relevance"),
    ],
)
def test_parse_failures(text: str, reason: str) -> None:
    assert parse_review(text) == Review(None, None, None, False, reason)


def test_parse_with_another_tag_set() -> None:
    tags = GuideTags(("<relevance>", "</relevance>"), ("<redundant_premises>", "</redundant_premises>"),
                     ("<conclusion_complexity>", "</conclusion_complexity>"))
    text = "<relevance>3</relevance><redundant_premises>0</redundant_premises><conclusion_complexity>2</conclusion_complexity>"
    assert parse_review(text, tags) == Review(3.0, 0.0, 2.0, True, None)
    assert parse_review(reply("3", "0", "2"), tags).reason == "missing_relevance"


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
        (5.0, 0.0, 3.0, 0.0),  # floats as parsed: 3.0 is 3
        (4, 0, 2.5, 4.5),  # the reference zeroes only complexity 3 or 4: 4 - 0.5 + 1
        (4, 0, 3.5, 3.5),  # 4 - 1.5 + 1 (not zeroed: the reference tests `in [3, 4]`)
        (0, 1, 2.5, 0.0),  # floored at 0
    ],
)
def test_guide_score(rel: float, red: float, cpx: float, score: float) -> None:
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
