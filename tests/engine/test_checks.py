"""The rules of `engine.interrogation.checks` (pure logic): what is a usable question, answer,
summary, when an analysis contradicts itself, and when the loop may close."""

from __future__ import annotations

import pytest

from engine.interrogation.checks import (
    NO_ANSWER,
    UNSEEN,
    analysis_conflict,
    answer_problem,
    bare_question,
    copied_example,
    distinct_gaps,
    may_close,
    question_problem,
    repeats_itself,
    summary_problem,
)
from engine.models.session import GapAnalysis, ProvidersUsed, QuestionAnswerPair
from engine.prompts import load_prompt

HYPOTHESIS = "Water boils at 100 degrees Celsius at sea level."
INSTRUCTIONS = (load_prompt("detective_question"), load_prompt("detective_turn"))


@pytest.mark.parametrize(("question", "problem"), [
    ("", "the question is empty"),
    ("   \n ", "the question is empty"),
    ("(empty)", "it only echoes the marker '(empty)'"),
    ("(empty) (empty)", "it only echoes the marker '(empty) (empty)'"),
    ("What is {{HYPOTHESIS}}?", "it echoes a prompt placeholder"),
    ("?!", "it has no words"),
    ("Water boils at 100 degrees Celsius at sea level.", "it only repeats the hypothesis"),
    ("water boils at 100 degrees celsius at sea level?", "it only repeats the hypothesis"),
    ("At what pressure does water boil at 90 degrees?", "it repeats question 1"),
    ("Q1: What is the pressure?\nA1: One bar.", "it writes transcript lines"),
    ("Q2: What is the pressure?\nQ3: And the heat?", "it writes transcript lines"),
    ("Ask one open question at a time, addressed to the witness as you, that makes the "
     "witness state", "it echoes the instructions it was given"),
    ("Reply with the question only.", "it echoes the instructions it was given"),
    ("Markdown:", "it is not a question"),
    ("Does water boil at 100 degrees Celsius at any pressure?", "it is a yes/no question"),
    ("Is the boiling point on Everest lower?", "it is a yes/no question"),
    ("The shipment left on the third of May.", "it is not a question"),
    # a label before it hides nothing: what is stored is the bare question
    ("Q5: At what pressure does water boil at 90 degrees?", "it repeats question 1"),
    ("**Question 4:** At what pressure does water boil at 90 degrees?",
     "it repeats question 1"),
    ("Q5: Is the boiling point on Everest lower?", "it is a yes/no question"),
    ("Question 2: Water boils at 100 degrees Celsius at sea level?",
     "it only repeats the hypothesis"),
])
def test_an_unusable_question_is_named(question: str, problem: str) -> None:
    earlier = ["At what pressure does water boil at 90 degrees?"]
    found = question_problem(question, HYPOTHESIS, earlier, INSTRUCTIONS)
    assert found is not None and found.startswith(problem), found


@pytest.mark.parametrize("question", [
    "At what temperature does water boil on Mount Everest?",
    "Which is denser at sea level, ice or water",  # an opener, no mark
    "Is the boiling point higher or lower on Everest?",  # yes/no with its alternatives: open
    "Describe how atmospheric pressure changes the boiling point.",
    "Bei welcher Temperatur siedet Wasser auf der Zugspitze?",
    "Qual é a pressão ao nível do mar?",
    "What happens at 0.5 bar? And at 2 bar?",
    "At what pressure does water boil at 80 degrees?",  # question 1 with another number
    "**Question 2:** Who measured the boiling point first?",  # a label is a habit, no fault
])
def test_a_real_question_passes(question: str) -> None:
    earlier = ["Who measured it first?", "At what pressure does water boil at 90 degrees?"]
    assert question_problem(question, HYPOTHESIS, earlier, INSTRUCTIONS) is None


def test_a_question_shaped_like_a_worked_example_is_no_echo_of_the_instructions() -> None:
    """The worked examples are quoted: a question of their shape is what they are for."""
    instructions = ('Worked examples:\n- "Ottawa is the capital of Canada." → "What is the '
                    'capital city of\n  Canada?"\nReply with the question only.',)  # a quote
    # may go over a line
    assert question_problem("What is the capital city of Australia?",
                            "The capital of Australia is Sydney.", [], instructions) is None
    assert question_problem("Reply with the question only.", "Sydney is big.", [],
                            instructions) == "it echoes the instructions it was given"


def test_an_open_question_for_the_claims_own_word_is_no_repetition() -> None:
    """It leaves out the word the claim gives and asks for it: the ideal first question, for
    all its words in common with the hypothesis."""
    hypothesis = "Saturn is the largest planet in the Solar System."
    assert question_problem("What is the largest planet in the Solar System?", hypothesis,
                            [], INSTRUCTIONS) is None
    assert question_problem("Saturn is the largest planet in the Solar Sytem?", hypothesis,
                            [], INSTRUCTIONS) == "it only repeats the hypothesis"


def test_answers_empty_or_echoed_are_named_and_real_ones_pass() -> None:
    question = "At what temperature does water boil on Everest?"
    assert answer_problem("", question) == NO_ANSWER
    assert answer_problem(" \n", question) == NO_ANSWER
    assert answer_problem("(empty) (empty)", question) == NO_ANSWER
    assert answer_problem("At what temperature does water boil on Everest?", question) \
        == "the answer only repeats the question"
    assert answer_problem("About 70 degrees Celsius.", question) is None
    assert answer_problem("I don't know.", question) is None  # honest, and testimony


@pytest.mark.parametrize(("answer", "problem"), [
    ("I am being questioned as a witness. Answer each question truthfully, precisely and "
     "concisely, from what I know.", "the answer only repeats its instructions"),
    ("About 70 degrees.\nQ2: And at sea level?\nA2: 100 degrees.",
     "the answer writes transcript lines (Q2:, A2:) instead of an answer"),
    ("**Question 3:** Why is that?", "the answer writes transcript lines (Q2:, A2:) instead "
     "of an answer"),
    # testimony: a label of its own, the claim it stands by, a plain "I do not know"
    ("A1: About 70 degrees Celsius.", None),
    ("The Berlin Wall fell in 1989, as I said.", None),
    ("I do not know that, and I will not guess.", None),
])
def test_an_answer_that_echoes_its_instructions_or_writes_the_transcript_is_named(
        answer: str, problem: str | None) -> None:
    from engine.interrogation.transcript import witness_instructions
    from engine.models.session import WitnessBrief

    question = "At what temperature does water boil on Everest?"
    defend = WitnessBrief(mode="defend", claim="The Berlin Wall fell in 1989.")
    echo = problem == "the answer only repeats its instructions"
    for brief in (None,) if echo else (None, defend):  # the echo is of the open prompt
        assert answer_problem(answer, question, instructions=[witness_instructions(brief)]) \
            == problem, brief


def test_an_empty_or_boilerplate_summary_is_named() -> None:
    audit = load_prompt("audit")
    assert summary_problem("", (audit,)) == "the summary is empty"
    problem = summary_problem("Markdown:", (audit,))
    assert problem is not None and problem.startswith("the summary is boilerplate")
    assert summary_problem("See {{TRANSCRIPT}} above for all details", (audit,)) \
        == "the summary echoes a prompt placeholder"
    assert summary_problem("what the witness established, what stayed open, and how far "
                           "the hypothesis holds", (audit,)) \
        == "the summary only repeats the instructions"
    assert summary_problem("The witness placed the boiling point at 100 °C at one bar and "
                           "lower on mountains.", (audit,)) is None


def analysis(score: int, follow_up: bool, *severities: str) -> GapAnalysis:
    return GapAnalysis.model_validate({
        "gaps": [{"category": "vagueness", "description": "vague", "severity": s}
                 for s in severities],
        "completeness_score": score, "requires_follow_up": follow_up,
    })


def test_a_self_contradicting_analysis_is_named() -> None:
    assert analysis_conflict(analysis(0, False)) == \
        "it needs no follow-up yet rates completeness 0/100"
    assert analysis_conflict(analysis(85, False, "high")) == \
        "it needs no follow-up yet names a high-severity gap"
    assert analysis_conflict(analysis(100, True, "high")) == \
        "it rates completeness 100/100 yet names a high-severity gap"
    assert analysis_conflict(analysis(30, True, "high")) is None
    assert analysis_conflict(analysis(85, False, "low")) is None


def rounds(*analyses: GapAnalysis, answered: bool = True) -> list[QuestionAnswerPair]:
    return [QuestionAnswerPair(
        sequence=n, question=f"Question {n}?", answer="An answer." if answered else "",
        gap_analysis=a, provider_used=ProvidersUsed(detective="d:m", witness="w:m"),
        answer_problem=None if answered else NO_ANSWER,
    ) for n, a in enumerate(analyses, start=1)]


def test_the_loop_decides_and_the_detective_only_advises() -> None:
    done = analysis(90, False)
    assert not may_close([], 10, 80, 3)
    # satisfied, but fewer than min_rounds rounds
    assert not may_close(rounds(done, done), 10, 80, 3)
    assert may_close(rounds(done, done, done), 10, 80, 3)
    # min_rounds never exceeds the limit
    assert may_close(rounds(done, done), 2, 80, 3)
    # "no follow-up" at 0/100 is advice the rule overrules
    assert not may_close(rounds(done, done, analysis(0, False)), 10, 80, 3)
    # below satisfied_at, or a high-severity gap left: go on
    assert not may_close(rounds(done, done, analysis(79, False)), 10, 80, 3)
    assert not may_close(rounds(done, done, analysis(95, False, "high")), 10, 80, 3)
    # the detective's wish to ask more is followed
    assert not may_close(rounds(done, done, analysis(95, True)), 10, 80, 3)


CLAIM = 'The answer to the question "Which country does most of the Amazon lie in?" is: Brazil'


@pytest.mark.parametrize(("question", "hypothesis", "answer", "asked", "problem"), [
    ("Is it true that water boils at 100 degrees Celsius at sea level?", HYPOTHESIS, None,
     None, "it states the whole hypothesis inside the question"),
    ("Does most of the Amazon lie in Brazil?", CLAIM, "Brazil",
     "Which country does most of the Amazon lie in?", "it states the claim's answer ('Brazil')"),
    ("Was it in the year 1905 or later?", "Einstein published it in 1905.", "1905", None,
     "it states the claim's answer ('1905')"),
    ("Wo liegt der größte Teil des Amazonas, in Brasilien?", "Der Amazonas liegt in "
     "Brasilien.", "Brasilien", None, "it states the claim's answer ('Brasilien')"),
    ("What is the key fact that bats are birds?", "Bats are birds.", None, None,
     "it states the whole hypothesis inside the question"),  # three words are enough
])
def test_a_leading_question_is_named(question: str, hypothesis: str, answer: str | None,
                                     asked: str | None, problem: str) -> None:
    found = question_problem(question, hypothesis, [], INSTRUCTIONS, answer, asked)
    assert found is not None and found.startswith(problem), found


@pytest.mark.parametrize(("question", "answer", "asked"), [
    ("Which country does most of the Amazon lie in?", "Brazil",
     "Which country does most of the Amazon lie in?"),  # the open question itself
    ("Which is older, the Colosseum or the Parthenon?", "the Parthenon",
     "Which is older, the Colosseum or the Parthenon?"),  # its words are the question's
    ("Where does the Amazon river end?", None, None),
    ("What do you know about boiling water?", "Brazilian", None),  # a part of a word is not it
])
def test_an_open_question_is_not_leading(question: str, answer: str | None,
                                         asked: str | None) -> None:
    assert question_problem(question, CLAIM, [], INSTRUCTIONS, answer, asked) is None


def test_a_question_is_kept_without_the_labels_before_it() -> None:
    assert bare_question("Q5: Q5: What was his profession?") == "What was his profession?"
    assert bare_question("**Question 2:** Who built it?") == "Who built it?"
    assert bare_question("  What is Q2: about?  ") == "What is Q2: about?"
    assert bare_question("Q1:") == "Q1:"  # nothing after it: left for the rules to name


def test_a_question_off_a_testimony_claim_is_refused_there_only() -> None:
    """A testimony's claim is asked for its key fact: a question sharing less than a fifth of
    its content words is about something else (its answer was read against the claim). A
    session's own hypothesis may still be probed from another side."""
    from engine.interrogation.checks import off_the_claim

    claim = "Princess Beatrice spent last night partying in London's hip Shoreditch."
    off = question_problem("What is the capital city of London?", claim, [], claim=True)
    assert off is not None and "beside the hypothesis" in off
    assert question_problem("What is the capital city of London?", claim, []) is None
    for question, kept in (("Where did Princess Beatrice spend last night?", claim),
                           ("What does niacin do in the body?",
                            "Niacin helps convert food into energy."),
                           ("On which river does Vienna lie?",
                            "Vienna is the capital of Austria and lies on the Rhine."),
                           ("Which body orbits the other, the Earth or the Sun?",
                            "The Earth does not orbit the Sun.")):
        assert off_the_claim(question, kept) is None, question
    assert off_the_claim("What is it?", "Salt is salty.") is None  # too short to tell


def test_an_answer_that_states_the_claims_own_detail() -> None:
    """The words an answer adds to its question are all the claim's: it states what the claim
    says. Not when it adds nothing, adds other words, or negates."""
    from engine.interrogation.checks import states_claim_detail

    beatrice = ("Princess Beatrice spent the evening at Shoreditch House with boyfriend Dave "
                "Clark, 31.")
    assert states_claim_detail("What was the name of the boyfriend of Princess Beatrice?",
                               "Dave Clark", beatrice)
    assert states_claim_detail("What was the temperature like overnight?",
                               "Cooler overnight temperatures.",
                               "Cooler overnight temperatures allowed fire crews to attack.")
    assert not states_claim_detail("Which is denser, iron or lead?", "Lead",
                                   "Iron is denser than lead.")  # adds nothing
    assert not states_claim_detail("In which year was the Eiffel Tower completed?", "1889",
                                   "The Eiffel Tower was completed in 1925.")
    assert not states_claim_detail("What is the capital of Australia?",
                                   "The capital of Australia is not Sydney.",
                                   "The capital of Australia is Sydney.")
    assert not states_claim_detail("Who is she?", "She isn't Dave Clark's friend.", beatrice)
    # a number the answer writes otherwise is the claim's own: "Eighteen" for 18, "1,000"
    horse = "It took 18 firefighters to free the horse following its six-hour ordeal."
    assert states_claim_detail("How many firefighters were involved in freeing the horse?",
                               "Eighteen firefighters were involved in freeing the horse.",
                               horse)
    assert states_claim_detail("How many homes were evacuated?", "1,000 homes.",
                               "About 1000 homes were evacuated.")
    assert not states_claim_detail("How many firefighters freed the horse?",
                                   "Seventeen firefighters freed the horse.", horse)


@pytest.mark.parametrize(("question", "hypothesis", "copied"), [
    # copies of the question prompt's own worked examples (a demonstration detective's)
    ("Who wrote the novel Don Quixote?", "Summarize the health benefits of Vitamin B3",
     "Who wrote the novel Don Quixote?"),
    ('The hypothesis to be investigated: "An octopus has ten arms." (I am not allowed to add '
     "any additional questions or details.) You are allowed to ask only one question. The "
     "question to ask is: ?", "The Eiffel Tower is in Berlin.", "An octopus has ten arms."),
    ("How many arms does an octopus have?", "A spider has eight legs.",
     "An octopus has ten arms."),
    # its words come from the hypothesis: never a copy
    ("Who wrote Don Quixote?", "Don Quixote was written by Cervantes.", None),
    ("Who wrote the novel Don Quixote?", "Don Quixote was written by Cervantes.", None),
    ("How many arms does an octopus have?", "An octopus has ten arms.", None),
    # a word of its own beside an example's: no copy
    ("What is the capital city of Australia?", "Summarize the health benefits of Vitamin B3",
     None),
    ("What is the capital city of Australia?", "Sydney is the capital of Australia.", None),
])
def test_a_question_that_copies_a_worked_example_is_an_echo(
        question: str, hypothesis: str, copied: str | None) -> None:
    instructions = (load_prompt("detective_question"),)
    assert copied_example(question, hypothesis, instructions) == copied
    problem = question_problem(question, hypothesis, [], instructions)
    if copied is None:
        assert problem is None or "worked example" not in problem
    else:
        assert problem == (f"it copies a worked example of its instructions ({copied!r}), "
                           "not the hypothesis")


def test_a_question_or_summary_that_repeats_itself_is_degenerate() -> None:
    looping = "A question 10, A question 10. A question 10, A question 10. A question ?"
    assert repeats_itself(looping.casefold().replace(",", "").replace(".", "").split())
    assert question_problem(looping, HYPOTHESIS, [], INSTRUCTIONS) == \
        "it repeats itself over and over: degenerate output"
    assert summary_problem("The witness said 100. " * 6) == \
        "the summary repeats itself over and over: degenerate output"
    varied = "How does the boiling point of water change with the air pressure around it?"
    assert not repeats_itself(varied.casefold().replace("?", "").split())
    assert question_problem(varied, HYPOTHESIS, [], INSTRUCTIONS) is None


def test_a_summary_that_only_restates_the_task_is_boilerplate_however_long() -> None:
    for text in ("The answer to the question", "The answer to the question given above.",
                 "This is the summary of the answers the witness provided to the questions"):
        problem = summary_problem(text, (load_prompt("audit"),))
        assert problem is not None and problem.endswith("only restates the task)"), text
    assert summary_problem("The witness answered that water boils at 100 °C.") is None


def test_a_gap_listed_twice_makes_the_analysis_invalid() -> None:
    twice = GapAnalysis.model_validate({"gaps": [
        {"category": "missing_information", "description": "An octopus has ten arms.",
         "severity": "high"},
        {"category": "ambiguity", "description": "an octopus has TEN arms", "severity": "low"},
    ], "completeness_score": 99, "requires_follow_up": True})
    with pytest.raises(ValueError, match="it lists the gap 'an octopus has TEN arms' twice"):
        distinct_gaps(twice)
    once = GapAnalysis.model_validate({"gaps": [
        {"category": "vagueness", "description": "Which pressure?", "severity": "low"},
        {"category": "vagueness", "description": "Which altitude?", "severity": "low"},
    ], "completeness_score": 60, "requires_follow_up": True})
    assert distinct_gaps(once) is once
    wordless = GapAnalysis.model_validate({"gaps": [
        {"category": "ambiguity", "description": "3.03.3.3.1", "severity": "high"}],
        "completeness_score": 40, "requires_follow_up": True})
    with pytest.raises(ValueError, match="the gap '3.03.3.3.1' says nothing"):
        distinct_gaps(wordless)


def test_an_audit_may_not_set_identical_answers_against_each_other_nor_list_one_twice(
) -> None:
    from engine.interrogation.audit import validated

    pairs = rounds(analysis(40, True), analysis(40, True), analysis(40, True))
    pairs[2] = pairs[2].model_copy(update={"answer": "Vitamin B3 helps make collagen."})
    summary = "The witness said Vitamin B3 helps make collagen and lowers cholesterol."

    def audit(*contradictions: tuple[int, int, str]) -> object:
        return validated({"summary": summary, "verdict": "undetermined", "contradictions": [
            {"questions": [a, b], "description": d} for a, b, d in contradictions]}, pairs, "")

    with pytest.raises(ValueError, match="Q1 and Q2, whose answers are the same words"):
        audit((1, 2, "The answers differ."))
    with pytest.raises(ValueError, match="it lists the contradiction 'The answer to the "
                                         "question' twice"):
        audit((1, 3, "The answer to the question"), (2, 3, "The answer to the question"))
    one = audit((1, 3, "Q1 says nothing of collagen; Q3 says it makes it."))
    assert len(one.contradictions) == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(("question", "hypothesis", "refused"), [
    ("What is the key fact of the hypothesis?", "4 is an even prime number.", True),
    ("Which number does the claim name?", "4 is an even prime number.", True),
    ("What do you know about this hypothesis?", "Bats are birds.", True),
    ("Which even numbers are prime?", "4 is an even prime number.", False),
    # a hypothesis that speaks of a claim may be asked about it
    ("Who made the claim that the Earth is flat?", "The claim that the Earth is flat was made "
     "by Ptolemy.", False),
])
def test_a_question_about_the_unseen_hypothesis_is_refused(question: str, hypothesis: str,
                                                            refused: bool) -> None:
    found = question_problem(question, hypothesis, [], INSTRUCTIONS)
    assert (found == UNSEEN) is refused, found


def test_a_two_word_hypothesis_inside_a_question_is_no_lead() -> None:
    assert question_problem("What makes dogs bark?", "Dogs bark.", [], INSTRUCTIONS) is None
