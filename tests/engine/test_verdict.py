"""The verdict rule (`engine.interrogation.verdict`) and the judgement's readers
(`engine.interrogation.judgement`): pure logic, so plain values in, figures out."""

from __future__ import annotations

import math

import pytest

from engine.config.models import InterrogationConfig
from engine.interrogation.judgement import (
    THINKING_BUDGET,
    TOP_LOGPROBS,
    Plan,
    Reading,
    does_not_know,
    read_stated,
    read_word,
    says_one_word,
)
from engine.interrogation.verdict import (
    DECISIVE,
    LEANS,
    NO_CLAIM,
    bearing_of,
    claim_facts,
    compute,
    pooled,
    settled,
    states_no_claim,
)
from engine.models.judgement import Judgement
from engine.providers import TokenChoices
from engine.providers._logprobs import token_choices


def judged(p: float | None, bearing: str | None = None) -> Judgement:
    if p is None:
        return Judgement(bearing="silent", why="no answer")
    return Judgement(bearing=bearing or bearing_of(p), p_true=p, source="logprobs")


def test_all_silent_rounds_are_undetermined_at_one_half() -> None:
    result = compute([(1, judged(None)), (2, judged(0.5)), (3, None)])
    assert (result.verdict, result.probability_false, result.deciding) == \
        ("undetermined", 0.5, [])
    assert "silent" in result.reason


def test_one_strong_round_decides_and_silent_rounds_do_not_dilute_it() -> None:
    alone = compute([(1, judged(0.97))])
    with_silence = compute([(1, judged(0.97)), (2, judged(None)), (3, judged(0.55))])
    assert alone.verdict == with_silence.verdict == "true"
    assert alone.probability_false == pytest.approx(0.03, abs=1e-3)
    assert with_silence.probability_false == alone.probability_false
    assert with_silence.deciding == [1]


def test_a_contradicting_round_makes_the_verdict_false() -> None:
    result = compute([(1, judged(0.55)), (2, judged(0.04))])
    assert result.verdict == "false"
    assert result.deciding == [2]
    assert result.probability_false == pytest.approx(0.96, abs=1e-3)


def test_decisive_rounds_on_both_sides_are_a_conflict() -> None:
    result = compute([(1, judged(0.95)), (2, judged(0.03))])
    assert result.verdict == "undetermined" and result.conflict
    assert "round 1" in result.reason and "round 2" in result.reason


def test_rounds_at_the_decisive_bounds_as_stored_are_a_conflict() -> None:
    # a comparison asked both ways, the witness naming the side asked first each time: the
    # rule reads one answer 0.9 for and the other 0.1 (stored rounded), which 1 − 0.9 in
    # floating point (0.0999…98) had left out: the verdict was `true` at 0.37
    result = compute([(1, judged(0.1)), (2, judged(0.96))])
    assert result.verdict == "undetermined" and result.conflict
    assert compute([(1, judged(0.9)), (2, judged(0.04))]).conflict


def test_weak_rounds_that_cancel_out_are_undetermined() -> None:
    result = compute([(1, judged(0.7)), (2, judged(0.3))])
    assert result.verdict == "undetermined" and not result.conflict
    assert result.probability_false == pytest.approx(0.5, abs=1e-3)


def test_the_rule_weighs_evidence_not_a_head_count() -> None:
    # two leaning rounds against one decisive one: the decisive one carries the mean
    result = compute([(1, judged(0.99)), (2, judged(0.3)), (3, judged(0.3))])
    expected = 1 - 1 / (1 + math.exp(-(math.log(99) + 2 * math.log(0.3 / 0.7)) / 3))
    assert result.probability_false == pytest.approx(expected, abs=1e-3)


def test_bearing_thresholds() -> None:
    assert bearing_of(LEANS) == "supports"
    assert bearing_of(1 - LEANS) == "contradicts"
    assert bearing_of(0.5) == "silent"
    assert pooled([0.9, 0.1]) == pytest.approx(0.5)


def test_settled_once_a_round_bears_on_it_and_not_before() -> None:
    leaning = [(1, judged(LEANS + 0.01))]
    assert settled(leaning, 1, 1, 1)
    assert not settled([(1, judged(0.5))], 1, 1, 1)  # silent: pressed on
    assert settled([(1, judged(None)), (2, judged(1 - LEANS - 0.01))], 2, 1, 1)
    assert not settled([(1, judged(0.3)), (2, judged(0.7))], 2, 1, 1)  # they cancel out
    assert not settled(leaning, 1, 2, 1)  # min_rounds
    assert not settled(leaning, 1, 1, 2)  # one round a fact
    assert not settled([(1, judged(DECISIVE)), (2, judged(0.02))], 2, 1, 1)  # a conflict


def test_claims_facts_and_requests() -> None:
    assert claim_facts("Vienna is the capital of Austria and lies on the Danube.") == 2
    assert claim_facts("Salt and pepper are spices.") == 1
    assert claim_facts("Marie Curie won two Nobel prizes and was born in Warsaw.") == 2
    assert states_no_claim("Summarize the health benefits of Vitamin B3")
    assert states_no_claim("Is tea a stimulant?")
    assert not states_no_claim("Can openers were invented after cans.")
    assert NO_CLAIM == "the hypothesis states no claim to judge"


def test_probability_read_from_the_first_true_or_false_token() -> None:
    choices = [
        TokenChoices("The", -0.1, (("The", -0.1), ("True", -2.5))),
        TokenChoices(" claim", -0.01, ((" claim", -0.01),)),
        TokenChoices(" False", -0.2, ((" False", -0.2), (" True", -1.8), (" false", -3.0))),
    ]
    reading = read_word(choices, "The claim False")
    assert reading is not None and reading.source == "logprobs"
    p_false = math.exp(-0.2) + math.exp(-3.0)
    assert reading.p_true == pytest.approx(math.exp(-1.8) / (math.exp(-1.8) + p_false))


def test_a_side_missing_from_the_alternatives_is_taken_at_the_least_likely() -> None:
    choices = [TokenChoices("True", -0.01, (("True", -0.01), ("Yes", -6.0)))]
    reading = read_word(choices, "True")
    assert reading is not None
    yes, floor = math.exp(-0.01), math.exp(-6.0)
    assert reading.p_true == pytest.approx(yes / (yes + floor))


def test_log_probabilities_too_small_for_a_float_are_still_read() -> None:
    # exp(-1000) is 0.0 as a float: summed as probabilities, both sides were nothing (0 / 0)
    even = read_word([TokenChoices("True", -1000.0, (("True", -1000.0), ("False", -1000.0)))],
                     "True")
    assert even is not None and even.p_true == pytest.approx(0.5)
    leaning = read_word([TokenChoices("False", -900.0, (("False", -900.0), ("True", -902.0),
                                                         ("true", -902.0)))], "False")
    assert leaning is not None
    assert leaning.p_true == pytest.approx(2 * math.exp(-2) / (1 + 2 * math.exp(-2)))
    lopsided = read_word([TokenChoices("True", -0.1, (("True", -0.1), ("False", -5000.0)))],
                         "True")
    assert lopsided is not None and lopsided.p_true == pytest.approx(1.0)


def test_no_true_or_false_token_is_no_reading() -> None:
    assert read_word([TokenChoices("Unknown", -0.1, (("Unknown", -0.1),))], "Unknown") is None
    assert read_word([], "") is None


@pytest.mark.parametrize(("text", "p"), [
    ("85", 0.85), ("85%", 0.85), ("Probability: 0.3", 0.3), ("100", 1.0), ("0", 0.0),
    ("80/100", 0.8), ("80 out of 100", 0.8), ("**Probability:** 80%", 0.8), ("75.", 0.75),
    ("62 percent", 0.62), ("Answer: 40\n\nThe witness names the place.", 0.4),
    ("**Probability:**\n\n75%", 0.75), ("P(true) = 0.9", 0.9),
])
def test_stated_probabilities(text: str, p: float) -> None:
    reading = read_stated(text)
    assert reading is not None and reading.p_true == pytest.approx(p)
    assert reading.source == "stated"


@pytest.mark.parametrize("text", [
    "about half", "", "250", "-",
    # prose holding a number is no probability (it was read as P(true) 0.01)
    "I stand by it: the place is on record, and point 1 holds as stated.",
    "The witness named 3 cities.", "The probability is high, maybe 80",
])
def test_unreadable_stated_probabilities(text: str) -> None:
    assert read_stated(text) is None


@pytest.mark.parametrize(("text", "one"), [
    ("True", True), ("false", True), ("**True**", True), ("Answer: false.", True),
    ("False. The witness names Rome.", True), ("`TRUE`", True), ("Verdict: True", True),
    ("**Answer:**\nFalse", True), ("Answer:\n\nThe witness is unsure.", False),
    ("It is not true that the tower is in Berlin.", False),
    ("I stand by it: the place is on record, and point 1 holds as stated.", False),
    ("The claim is false", False), ("", False),
])
def test_a_one_word_judgement_is_read_only_from_a_reply_that_is_one(text: str,
                                                                    one: bool) -> None:
    assert says_one_word(text) is one


def test_an_answer_that_only_says_it_does_not_know() -> None:
    assert does_not_know("I don't know.")
    assert does_not_know("I'm not sure which year that was.")
    assert not does_not_know("The wall fell on 9 November 1989.")
    long = "I'm not sure, but " + "the records say it was 1989 " * 8
    assert not does_not_know(long)


def test_hostile_logprobs_are_left_out_never_an_error() -> None:
    found = token_choices({"content": [
        {"token": "True", "logprob": -0.1, "top_logprobs": [
            {"token": "False", "logprob": "high"}, {"token": "True", "logprob": -0.1},
            {"token": 5, "logprob": -1}, "junk", {"token": "false", "logprob": float("nan")},
            {"token": "FALSE", "logprob": float("-inf")}]},  # masked out, as a grammar does
        {"token": "x", "logprob": 3.0},  # a probability above 1
        {"token": "y", "logprob": float("-inf")},  # a token it gave, at no probability
        "junk", None, {"logprob": -1.0},
    ]})
    assert found == [TokenChoices("True", -0.1, (("True", -0.1),))]
    assert token_choices(None) == token_choices({"content": "x"}) == []


def test_the_judgement_plan_reads_after_the_thinking_and_falls_back_to_a_stated_number(
) -> None:
    settings = InterrogationConfig(judgement_max_tokens=8)
    plan = Plan("A is B.", "", "judgement_direct", settings, logprobs=True)
    assert plan.request is not None and plan.request.top_logprobs == TOP_LOGPROBS
    assert plan.request.max_tokens == 8
    plan.took("", [], "length", "Let me think about A and B")  # its budget went on thinking
    assert plan.request is not None and plan.request.max_tokens == THINKING_BUDGET
    plan.took("True", [], "stop", "")  # answered, but its provider sent no log-probabilities
    assert plan.request is not None and plan.request.top_logprobs is None
    assert "0 to 100" in plan.request.messages[-1].content
    plan.took("85", [], "stop", "")
    assert plan.request is None and isinstance(plan.reading, Reading)
    assert plan.reading.p_true == pytest.approx(0.85) and plan.reading.source == "stated"
    unsure = Plan("A is B.", "", "judgement_direct", settings, logprobs=True)
    unsure.took("Maybe", [TokenChoices("Maybe", -0.1, (("Maybe", -0.1),))], "stop", "")
    assert unsure.request is None and isinstance(unsure.reading, str)
    assert "neither true nor false" in unsure.reading
    # prose that holds the word is no one-word judgement: the round is silent, and says why
    prose = Plan("A is B.", "", "judgement_direct", settings, logprobs=True)
    prose.took("It is not true that A is B", [
        TokenChoices("It", -0.1, (("It", -0.1),)), TokenChoices(" is", -0.1, ((" is", -0.1),)),
        TokenChoices(" not", -0.1, ((" not", -0.1),)),
        TokenChoices(" true", -0.1, ((" true", -0.1), (" false", -3.0)))], "stop", "")
    assert prose.request is None and isinstance(prose.reading, str)
    assert "neither true nor false in one word ('It is not true" in prose.reading
