"""Comparisons and negations (`engine.interrogation.shapes`): the rules that take them apart,
and what a session does with them — a comparison's question names both sides, the side the
witness names decides the round, a negated claim is judged in its positive form."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from engine import Paths, Workspace
from engine.interrogation.asking import BY_RULE
from engine.interrogation.checks import question_problem
from engine.interrogation.judgement import (
    CHOSEN_REASON,
    DENIED_REASON,
    NEGATION_REASON,
    OTHER_REASON,
)
from engine.interrogation.shapes import (
    asked_alone,
    by_position,
    comparison,
    finished,
    positive,
    restates,
    rule_question,
)
from tests.support.interrogation import make_config
from tests.support.scripted import Judged, ScriptedModel, is_judgement, judged_claim

Chat = list[dict[str, Any]]


@pytest.mark.parametrize(("claim", "question"), [
    ("Lead is denser than aluminium.", "Which is denser, aluminium or lead?"),
    ("Aluminium is less dense than lead.", "Which is less dense, aluminium or lead?"),
    ("The Nile is longer than the Thames.", "Which is longer, the Nile or the Thames?"),
    ("Canada has a larger area than France.", "Which has a larger area, Canada or France?"),
    ("Light travels faster than sound.", "Which travels faster, light or sound?"),
    ("Water boils at a higher temperature than ethanol.",
     "Which boils at a higher temperature, ethanol or water?"),
    ("The Thames is longer than the Nile.", "Which is longer, the Nile or the Thames?"),
    ("Tokyo has more inhabitants than Paris.", "Which has more inhabitants, Paris or Tokyo?"),
    ("Paris has more inhabitants than Tokyo.", "Which has more inhabitants, Paris or Tokyo?"),
    ("Tokyo has fewer parks than Paris.", "Which has fewer parks, Paris or Tokyo?"),
])
def test_a_comparison_is_asked_in_its_open_form(claim: str, question: str) -> None:
    found = comparison(claim)
    assert found is not None and found.question == question


@pytest.mark.parametrize("claim", [
    "Ottawa is the capital of Canada.",
    "The river is wider here. It is older than the town.",  # two sentences
    "Nothing is better than rest.",  # no side named
    "The water is cold.",
    "The city has more than 2 million inhabitants.",  # a quantity, not a side
    "Paris is more than a city.",
    "He moved to Paris after the war.",  # order in time is left alone
    "Einstein moved to the United States before the war began.",
])
def test_what_is_no_comparison_is_left_alone(claim: str) -> None:
    assert comparison(claim) is None


@pytest.mark.parametrize(("claim", "sides", "predicate"), [
    # an auxiliary is the verb before a noun's plural ending
    ("A kilogram of feathers is heavier than a kilogram of iron.",
     ("A kilogram of feathers", "a kilogram of iron"), "is heavier"),
    ("Venus is closer to the Sun than Earth is.", ("Venus", "Earth"),
     "is closer to the Sun"),  # the other side's trailing auxiliary is none of it
    ("Light travels faster than sound does.", ("Light", "sound"), "travels faster"),
    ("A cat weighs more than a mouse.", ("A cat", "a mouse"), "weighs more"),
    # where it holds is the comparison's, not the other side's
    ("Sound travels faster than light in air.", ("Sound", "light"), "travels faster in air"),
    ("Water boils at a higher temperature than ethanol at sea level.", ("Water", "ethanol"),
     "boils at a higher temperature at sea level"),
    ("Russia is larger than Canada by area.", ("Russia", "Canada"), "is larger by area"),
])
def test_a_comparisons_sides_are_where_its_verb_says(claim: str, sides: tuple[str, str],
                                                     predicate: str) -> None:
    found = comparison(claim)
    assert found is not None
    assert (found.subject, found.other, found.predicate) == (*sides, predicate)
    assert not found.negated


@pytest.mark.parametrize("claim", [
    "Sound travels faster in water than it does in air.",  # one thing in two places
    "Malaria is more common in Africa than in Europe.",
    "Lead is denser than ???.",  # no other side: it raised IndexError
    "Lead is denser than — .",
    "Lead, which does not rust, is denser than aluminium.",  # a clause's verb
    "Paris is nothing more than a city.",
    "Lead is no denser than gold.",
    "Neither lead nor gold is denser than osmium.",
])
def test_a_comparison_the_rules_would_misread_is_left_to_the_detective(claim: str) -> None:
    assert comparison(claim) is None


@pytest.mark.parametrize(("claim", "question"), [
    ("Lead is not denser than aluminium.", "Which is denser, aluminium or lead?"),
    ("Lead isn't denser than aluminium.", "Which is denser, aluminium or lead?"),
    ("Gold never weighs more than lead.", "Which weighs more, gold or lead?"),
    ("Penguins can't run faster than ostriches.", "Which can run faster, ostriches or penguins?"),
])
def test_a_denied_comparison_is_asked_its_positive_open_form(claim: str, question: str) -> None:
    found = comparison(claim)
    assert found is not None and found.negated
    assert rule_question(claim, []) == question


@pytest.mark.parametrize(("answer", "holds"), [
    ("Lead is denser than aluminium.", False),  # the comparison the claim denies
    ("Lead.", False),
    ("Aluminium is denser than lead.", True),
    ("Aluminium.", True),
    ("Lead is not denser than aluminium.", None),  # turned over: the judgement reads it
])
def test_the_side_that_wins_a_denied_comparison_contradicts_it(answer: str,
                                                               holds: bool | None) -> None:
    found = comparison("Lead is not denser than aluminium.")
    assert found is not None and found.winner(answer) is holds


@pytest.mark.parametrize(("answer", "wins"), [
    ("Lead is denser than aluminium.", False),
    ("Aluminium is denser than lead.", True),
    ("Lead.", False),
    ("Lead is the denser of the two.", False),
    ("The density of aluminum is about 2.70 g/cm³, while lead's is about 11.34 g/cm³.", None),
    ("Aluminium is less dense than lead.", None),  # turned over: the judgement reads it
    ("Both are equally dense.", None),
    ("Lead is heavier than aluminium.", None),  # not the claim's comparative
    ("Lead is used in batteries and pipes, and in old paint as well.", None),  # in passing
])
def test_the_side_an_answer_names_is_read_by_rule(answer: str, wins: bool | None) -> None:
    found = comparison("Aluminium is denser than lead.")
    assert found is not None and found.winner(answer) is wins


def test_the_claims_words_between_its_marker_and_than_are_read_through() -> None:
    found = comparison("Mars is closer to the Sun than Venus.")
    assert found is not None
    assert found.winner("Venus is closer to the Sun than Mars.") is False
    assert found.winner("Mars is closer to the Sun than Venus.") is True


def test_sides_that_share_every_word_are_left_to_the_judgement() -> None:
    found = comparison("World War II was longer than World War I.")
    assert found is not None and found.winner("World War II was longer.") is None


def test_a_claim_of_fewer_reads_its_own_word_as_no_turn() -> None:
    found = comparison("Tokyo has fewer parks than Paris.")
    assert found is not None
    assert found.winner("Paris has fewer parks than Tokyo.") is False
    assert found.winner("Tokyo has fewer parks than Paris.") is True


@pytest.mark.parametrize(("claim", "turned"), [
    ("The Earth does not orbit the Moon.", "The Earth does orbit the Moon."),
    ("Penguins cannot fly.", "Penguins can fly."),
    ("A whale is not a fish.", "A whale is a fish."),
    ("Mars does not have any moons.", "Mars does have moons."),
    ("Venus has no moons.", "Venus has moons."),
    ("Gold doesn't rust.", "Gold does rust."),
    ("He never won the race.", "He won the race."),
    ("There are no snakes in Ireland.", "There are snakes in Ireland."),
    ("There is no gravity in space.", "There is gravity in space."),
])
def test_a_negated_claim_has_a_positive_form(claim: str, turned: str) -> None:
    assert positive(claim) == turned


@pytest.mark.parametrize(("claim", "question"), [
    ("The Earth does not orbit the Moon.", "Is it true that the Earth does not orbit the Moon?"),
    ("Penguins cannot fly.", "Is it true that Penguins cannot fly?"),
    ("Mercury has no moons.", "Is it true that Mercury has no moons?"),
    ("There are no snakes in Ireland.", "Is it true that there are no snakes in Ireland?"),
    ("It is not only red but not blue either.", None),  # does not turn over
    ("Ottawa is the capital of Canada.", None),
    ("Lead is denser than aluminium.", "Which is denser, aluminium or lead?"),
])
def test_a_shape_is_first_asked_by_rule(claim: str, question: str | None) -> None:
    assert rule_question(claim, []) == question


@pytest.mark.parametrize("claim", [
    "The Earth orbits the Sun.",
    "It is not only red but not blue either.",  # two negations
    "She no longer lives in Paris.",
    "Nobody lives on the island.",
])
def test_a_claim_that_does_not_turn_over_keeps_its_form(claim: str) -> None:
    assert positive(claim) is None


def detective(first: str, then: str, judged: float) -> Any:
    """A detective whose first question is `first` and any asked again `then`; its
    judgements say `judged`."""

    def reply(messages: Chat) -> str:
        system = messages[0]["content"]
        if is_judgement(messages):
            return Judged(judged)
        if system.startswith("You are a detective analysing"):
            return json.dumps({"gaps": [], "completeness_score": 95,
                               "requires_follow_up": False})
        if system.startswith("You are a detective auditing"):
            return json.dumps({"contradictions": [], "verdict": "undetermined",
                               "summary": "The witness answered plainly."})
        asked_again = re.search(r"could not be used as question", messages[-1]["content"])
        return then if asked_again else first

    return reply


async def run_session(paths: Paths, hypothesis: str, det_reply: Any, answer: Any
                      ) -> tuple[Any, ScriptedModel, ScriptedModel]:
    """A session of `hypothesis`; `answer`: the witness's one reply, or a function of the
    question it is asked."""
    def witness(messages: Chat) -> str:
        return answer(messages[-1]["content"]) if callable(answer) else answer

    with ScriptedModel(det_reply) as det, ScriptedModel(witness) as wit:
        # the shapes' rules read the rounds: read alone here (the scripted detective's one
        # reading would stand for its own reading of the claim too)
        config = make_config({"det": det.url + "/v1", "wit": wit.url + "/v1"}, ["det"],
                             ["wit"], signals=["rounds"])
        workspace = Workspace(paths, config)
        try:
            run = workspace.sessions.start(hypothesis, 5)
            [event async for event in run.events()]
            session = workspace.store.load(str(run.session.id))
        finally:
            await workspace.aclose()
    return session, det, wit


async def test_a_comparison_is_asked_its_open_form_by_rule_and_the_named_side_decides(
        paths: Paths) -> None:
    session, det, wit = await run_session(
        paths, "Aluminium is denser than lead.",
        detective("What is the density of aluminium?", "What is the density of lead?",
                  0.87),  # the one-word judgement reads the reverse as support
        "Lead is denser than aluminium.")
    pair = session.qa_pairs[0]
    assert pair.question == "Which is denser, aluminium or lead?"
    assert pair.provider_used.detective == BY_RULE
    asked = [b for b in det.bodies if "Write question" in b["messages"][-1]["content"]]
    assert asked == []  # no call wrote it
    assert "Which is denser, aluminium or lead?" in wit.bodies[0]["messages"][-1]["content"]
    judgement = pair.judgement
    assert judgement is not None and judgement.bearing == "contradicts"
    assert judgement.p_true is not None and judgement.p_true <= 0.1
    assert judgement.why == OTHER_REASON
    assert session.audit_result is not None and session.audit_result.verdict == "false"


def test_a_later_question_of_a_comparison_must_ask_which_too() -> None:
    claim = "Aluminium is denser than lead."
    problem = question_problem("What is the density of aluminium?", claim, [])
    assert problem is not None and "one side of a comparison" in problem
    assert "Which is denser, aluminium or lead?" in problem
    assert question_problem("Which metal is denser, lead or aluminium?", claim, []) is None


async def test_the_claims_own_side_named_supports_it(paths: Paths) -> None:
    session, _, _ = await run_session(
        paths, "Lead is denser than aluminium.",
        detective("unused", "unused", 0.55),
        "Lead is denser than aluminium.")
    judgement = session.qa_pairs[0].judgement
    assert judgement is not None and judgement.bearing == "supports"
    assert judgement.p_true is not None and judgement.p_true >= 0.9
    assert judgement.why == CHOSEN_REASON
    assert session.audit_result is not None and session.audit_result.verdict == "true"


async def test_a_denied_comparison_is_asked_in_its_positive_form_and_the_winner_denies_it(
        paths: Paths) -> None:
    session, det, _ = await run_session(
        paths, "Lead is not denser than aluminium.",
        detective("unused", "unused", 0.9),  # the judge reads the positive form as held
        "Lead is denser than aluminium.")
    pair = session.qa_pairs[0]
    assert pair.question == "Which is denser, aluminium or lead?"
    assert pair.provider_used.detective == BY_RULE
    asked = [b for b in det.bodies if is_judgement(b["messages"])]
    assert asked and all(judged_claim(b["messages"]) == "Lead is denser than aluminium."
                         for b in asked)
    judgement = pair.judgement
    assert judgement is not None and judgement.bearing == "contradicts"
    assert judgement.p_true is not None and judgement.p_true <= 0.1
    assert judgement.why == DENIED_REASON  # the claim's own subject won the comparison
    assert session.audit_result is not None and session.audit_result.verdict == "false"


async def test_a_negated_claim_is_asked_and_judged_in_its_positive_form_and_turned_over(
        paths: Paths) -> None:
    session, det, wit = await run_session(
        paths, "The Earth does not orbit the Moon.",
        detective("What makes the Earth not orbit the Moon?", "unused", 0.1),
        "The Moon orbits the Earth.")
    question = "Is it true that the Earth does not orbit the Moon?"
    assert session.qa_pairs[0].question == question
    assert session.qa_pairs[0].provider_used.detective == BY_RULE
    assert question in wit.bodies[0]["messages"][-1]["content"]
    asked = [b for b in det.bodies if is_judgement(b["messages"])]
    assert asked and all(judged_claim(b["messages"]) == "The Earth does orbit the Moon."
                         for b in asked)
    judgement = session.qa_pairs[0].judgement
    assert judgement is not None and judgement.bearing == "supports"
    assert judgement.p_true == pytest.approx(0.9)
    assert "turned over" in (judgement.word or "")
    assert session.audit_result is not None and session.audit_result.verdict == "true"


@pytest.mark.parametrize(("question", "fair"), [
    ("Which is denser, aluminium or lead?", True),
    ("Which metal is denser: lead or aluminium?", True),
    ("What is the density of aluminium?", False),  # one side
    ("What is the density of lead compared to that of aluminium?", False),  # both values
    ("Which is denser, aluminium or iron?", False),  # the other side is not named
])
def test_a_comparisons_question_names_both_sides_and_asks_which(question: str,
                                                                 fair: bool) -> None:
    found = comparison("Aluminium is denser than lead.")
    assert found is not None and found.asks_which(question) is fair


@pytest.mark.parametrize(("answer", "says"), [
    ("Yes, gold does not rust.", True),
    ("Gold doesn't rust at all.", True),
    ("No, gold does rust.", False),
    ("Gold rusts.", False),
    ("Gold is a noble metal that resists corrosion.", None),  # words of its own
    ("Yes.", None),  # too little to restate anything
    ("Yes, it is true that gold does not rust. Rust needs iron.", True),
    ("No, it is not true that gold does not rust.", False),  # turned over twice
    ("It's not true that gold rusts.", True),
])
def test_an_answer_that_restates_a_negation_or_its_positive_form_is_read_by_rule(
        answer: str, says: bool | None) -> None:
    assert restates(answer, "Gold does not rust.") is says


async def test_a_restated_negation_decides_the_round_whatever_the_word(paths: Paths) -> None:
    session, _, _ = await run_session(
        paths, "Gold does not rust.",
        detective("unused", "unused", 0.45),  # the positive form read as 0.45: 0.55 turned
        "Yes, gold does not rust.")
    judgement = session.qa_pairs[0].judgement
    assert judgement is not None and judgement.bearing == "supports"
    assert judgement.p_true is not None and judgement.p_true >= 0.9
    assert judgement.why == NEGATION_REASON


def test_the_claims_words_in_another_order_are_no_form_of_it() -> None:
    claim = "The Earth does not orbit the Moon."
    assert restates("The Moon orbits the Earth.", claim) is None
    assert restates("No, the Earth does orbit the Moon.", claim) is False


def test_a_cut_off_reply_says_what_its_finished_sentences_say() -> None:
    assert finished("Yes, gold does not rust. Rust is a reaction that occurs wh") == \
        "Yes, gold does not rust."
    assert finished("Gold does not rus") == ""


def test_a_comparison_is_asked_both_ways_by_rule_then_by_the_detective() -> None:
    claim = "Lead is denser than aluminium."
    one, two = "Which is denser, aluminium or lead?", "Which is denser, lead or aluminium?"
    assert rule_question(claim, []) == one
    assert rule_question(claim, [one]) == two
    assert rule_question(claim, [one, two]) is None
    assert rule_question(claim, ["Which metal is denser, lead or aluminium?"]) is None
    negation = "Penguins cannot fly."
    assert rule_question(negation, []) == "Is it true that Penguins cannot fly?"
    assert rule_question(negation, ["Is it true that Penguins cannot fly?"]) is None


def test_only_a_comparisons_own_questions_are_asked_alone() -> None:
    claim = "Lead is denser than aluminium."
    assert asked_alone(claim, "Which is denser, aluminium or lead?")
    assert asked_alone(claim, "Which is denser, lead or aluminium?")
    assert not asked_alone(claim, "What is the density of lead?")
    assert not asked_alone("Penguins cannot fly.", "Is it true that Penguins cannot fly?")


@pytest.mark.parametrize(("first", "second", "biased"), [
    ("Aluminium is denser than lead.", "Lead is denser than aluminium.", True),
    ("Lead is denser than aluminium.", "Lead.", False),  # the same side both ways
    ("Aluminium.", "I am not sure.", False),  # one answer names no side
])
def test_opposite_sides_asked_both_ways_are_the_witness_answering_by_position(
        first: str, second: str, biased: bool) -> None:
    claim = "Lead is denser than aluminium."
    found = comparison(claim)
    assert found is not None
    one, two = found.questions
    assert by_position(claim, [(one, first), (two, second)]) is biased
    assert not by_position(claim, [(one, first)])


async def test_a_witness_naming_the_side_asked_first_leaves_the_comparison_undetermined(
        paths: Paths) -> None:
    def first_named(question: str) -> str:
        found = re.search(r"Which is denser, (\w+) or (\w+)\?", question)
        assert found is not None, question
        return f"{found.group(1).capitalize()} is denser than {found.group(2)}."

    session, det, _ = await run_session(
        paths, "Aluminium is denser than lead.", detective("unused", "unused", 0.5),
        first_named)
    asked = [(p.question, p.provider_used.detective) for p in session.qa_pairs]
    assert asked == [("Which is denser, aluminium or lead?", BY_RULE),
                     ("Which is denser, lead or aluminium?", BY_RULE)]  # and no third
    assert [b for b in det.bodies if "Write question" in b["messages"][-1]["content"]] == []
    assert session.audit_result is not None
    assert session.audit_result.verdict == "undetermined"


async def test_the_same_side_named_both_ways_decides_the_comparison(paths: Paths) -> None:
    session, _, wit = await run_session(
        paths, "Aluminium is denser than lead.", detective("unused", "unused", 0.5),
        "Lead is denser than aluminium.")
    assert len(session.qa_pairs) == 2
    # each way in a conversation of its own: with its first answer before it, a witness
    # says that answer again, whichever side the question names first
    assert [[m["role"] for m in chat] for chat in wit.chats] == [["system", "user"]] * 2
    assert wit.chats[1][-1]["content"] == "Which is denser, lead or aluminium?"
    assert all(p.judgement is not None and p.judgement.bearing == "contradicts"
               for p in session.qa_pairs)
    assert session.audit_result is not None and session.audit_result.verdict == "false"

