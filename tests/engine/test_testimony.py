"""A testimony taken apart, claim by claim (issue 53): the split's rules, the spans, the
states and the verdict computed from them, on scripted models that speak the real OpenAI wire
on loopback (their judgements are fixed, so every state the rule must compute is known), and
resumed after a stop with only the claims left examined."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from engine import Paths, Workspace
from engine.interrogation.claims import (
    claim_problem,
    left_out,
    locate,
    not_checkable,
    read_split,
    segments,
    sentences,
    testimony_source as source_of,
    unfound,
)
from engine.interrogation.examine import settle
from engine.interrogation.pooling import parse_pooling
from engine.interrogation.testimony import left_out_text, listed_left_out
from engine.interrogation.verdict import (
    pooled,
    testimony_score as score_of,
    testimony_verdict as verdict_of,
)
from engine.models.events import ClaimExamined, ClaimsSplit, PairCompleted, Phase
from engine.models.session import InterrogationSession
from engine.models.testimony import Claim, SignalReading, words_p_false
from engine.report.claims import claim_line, claims_tally, marked_testimony
from engine.report.export import claims_table
from tests.support.evals import claim_question
from tests.support.interrogation import EQUAL_POOLING, make_config
from tests.support.scripted import Judged, ScriptedModel, is_judgement, judged_claim

Chat = list[dict[str, Any]]

REQUEST = "Summarize the health benefits of Vitamin B3"
TESTIMONY = ("Vitamin B3 helps convert food into energy. It also lowers cholesterol.\n"
             "Vitamin B3 is also called pantothenic acid. You should eat more fish.")
SPLIT = "\n".join([
    "Here are the claims:",
    "1. Vitamin B3 helps convert food into energy.",
    "2. Vitamin B3 lowers cholesterol.",
    "3. Vitamin B3 is also called pantothenic acid.",
    "4. Vitamin B3 is also called pantothenic acid.",
    "5. Vitamin B3 was discovered on Mars by astronauts.",
    "6. [not checkable] You should eat more fish.",
])
TRUTH = {"Vitamin B3 helps convert food into energy.": 0.95,
         "Vitamin B3 lowers cholesterol.": 0.9,
         "Vitamin B3 is also called pantothenic acid.": 0.05}


def detective(truth: dict[str, float] = TRUTH, split: str = SPLIT,
              alone: float = 0.8) -> Callable[[Chat], str]:
    def reply(messages: Chat) -> str:
        system = messages[0]["content"]
        if is_judgement(messages):
            if "The witness was asked" not in messages[-1]["content"]:
                return Judged(alone)  # the detective alone
            return Judged(truth.get(judged_claim(messages), 0.5))
        if system.startswith("You take a text apart"):
            return split
        return claim_question(system)
    return reply


def witness(messages: Chat) -> str:
    if messages[-1]["content"].startswith(REQUEST):
        return TESTIMONY
    return "I recall the substance as I described it."


async def run(paths: Paths, hypothesis: str = REQUEST,
              det: Callable[[Chat], str] | None = None,
              stop_after: int | None = None, wit: Callable[[Chat], str] = witness,
              window: int = 32768, usage: tuple[int, int] | None = None, **settings: Any
              ) -> tuple[InterrogationSession, list[Any], ScriptedModel, ScriptedModel]:
    """A run on scripted models (`det` the detective, `wit` the witness; each call reporting
    `usage` when given), stopped after `stop_after` claims when given; the session as stored,
    its events, both models."""
    with ScriptedModel(det or detective(), window=window, usage=usage) as d, \
            ScriptedModel(wit, usage=usage) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"],
                             **{"claim_concurrency": 2, **settings})
        workspace = Workspace(paths, config)
        events: list[Any] = []
        try:
            started = workspace.sessions.start(hypothesis, 5)
            async with aclosing(started.events()) as stream:
                async for event in stream:
                    events.append(event)
                    if stop_after is not None and isinstance(event, ClaimExamined) and \
                            sum(isinstance(e, ClaimExamined) for e in events) == stop_after:
                        break
            session = workspace.store.load(str(started.session.id))
        finally:
            await workspace.aclose()
    return session, events, d, w


# ---- the rules, as plain code -----------------------------------------------------------

def test_what_is_a_testimony() -> None:
    assert source_of("Summarize the health benefits of Vitamin B3") == "witness"
    assert source_of("What does vitamin B3 do?") == "witness"
    assert source_of("Paris is the capital of France. It lies on the Seine.") == "given"
    assert source_of("Paris is the capital of France and lies on the Seine.") is None
    assert source_of("Dr. J. R. R. Tolkien wrote The Hobbit in 1937.") is None
    # an evaluated answer to a question is one claim, however long its answer
    assert source_of('The answer to the question "Which river flows through the city of '
                     'Lisbon?" is: the Tagus, which reaches the Atlantic there') is None
    assert sentences("**Benefits**\n1. It lowers cholesterol.\n2. It helps the skin.") == 2


def test_segments_keep_offsets_and_abbreviations() -> None:
    text = "Mr. Smith met Dr. Jones. They talked, e.g. about tea!\n- A list item"
    found = segments(text)
    assert [s.text for s in found] == ["Mr. Smith met Dr. Jones.",
                                       "They talked, e.g. about tea!", "- A list item"]
    assert all(text[s.start:s.end] == s.text for s in found)


def test_the_split_is_read_and_held_to_its_rules() -> None:
    pieces = read_split(SPLIT)
    assert [p.text for p in pieces][0] == "Vitamin B3 helps convert food into energy."
    assert pieces[-1].marked and pieces[-1].text == "You should eat more fish."
    earlier = ["Vitamin B3 is also called pantothenic acid."]
    assert claim_problem("Vitamin B3 is also called pantothenic acid.", earlier, TESTIMONY,
                         REQUEST) == "it repeats claim 1"
    added = claim_problem("Vitamin B3 was discovered on Mars.", [], TESTIMONY, REQUEST)
    assert added is not None and "mars" in added
    assert claim_problem("Energy:", [], TESTIMONY, REQUEST) == "it is no statement"
    # naming what "it" stands for with the testimony's own words is fine
    assert claim_problem("Vitamin B3 lowers cholesterol.", [], TESTIMONY, REQUEST) is None
    # a number the testimony writes otherwise is the testimony's own, not an added word
    said = "Eighteen firefighters freed the horse. It cost 1,000 pounds."
    assert claim_problem("18 firefighters freed the horse.", [], said, "") is None
    assert claim_problem("The rescue cost 1000 pounds.", [], said, "") is not None  # rescue
    assert claim_problem("It cost 1000 pounds.", [], said, "") is None
    assert claim_problem("It cost 1,000 pounds.", ["It cost 1,000 pounds."], said,
                         "") == "it repeats claim 1"
    # another number is another claim, not a repeat
    assert claim_problem("Tea has 30 mg of caffeine.", ["Tea has 40 mg of caffeine."],
                         "Tea has 30 mg of caffeine. Tea has 40 mg of caffeine.", "") is None


def test_opinion_advice_and_vague_statements_are_not_checkable() -> None:
    assert not_checkable("You should eat more fish.") == "advice, not a fact"
    assert not_checkable("I think Paris is beautiful.") == "an opinion, not a fact"
    assert not_checkable("Vitamin B3 has a variety of benefits.") == "too vague to check"
    assert not_checkable("Vitamin B3 lowers cholesterol.") is None
    # the split's own mark is not taken on its word: the rules decide
    assert not_checkable("Vitamin B3 lowers cholesterol.", marked=True) is None
    assert claim_problem("Niacin helps maintain healthy immune function.",
                         ["Niacin helps maintain healthy kidney function."],
                         "Niacin helps maintain healthy immune and kidney function.", "") is None


def test_a_claim_is_placed_on_its_sentence() -> None:
    start, end = locate("Vitamin B3 lowers cholesterol.", TESTIMONY)
    assert TESTIMONY[start:end] == "It also lowers cholesterol."
    assert locate("Saturn has rings.", TESTIMONY) == (0, 0)


def test_the_sentences_a_split_left_out_are_found_and_given_again_with_their_subject() -> None:
    text = ("**Benefits**\nVitamin B3 helps convert food into energy. It also lowers cholesterol."
            "\nVitamin B3 is also called niacin. You should eat more fish.")
    placed = [locate("Vitamin B3 helps convert food into energy.", text),
              locate("Vitamin B3 is also called niacin.", text)]
    left = left_out(placed, text)
    # the heading states nothing; the two sentences no claim stands on are left out
    assert [s.text for s in left] == ["It also lowers cholesterol.",
                                      "You should eat more fish."]
    # given again after the first sentence (it names what "it" is), which is no claim's
    assert left_out_text(text, left) == ("**Benefits** It also lowers cholesterol. "
                                         "You should eat more fish.")
    assert left_out_text(TESTIMONY, segments(TESTIMONY)[:2]) == \
        "Vitamin B3 helps convert food into energy. It also lowers cholesterol."
    assert left_out([(0, 0)], "One two three four five. Six seven eight nine ten.") == \
        segments("One two three four five. Six seven eight nine ten.")


def leaving_out(second: str) -> Callable[[Chat], str]:
    """A detective whose split of the testimony leaves its second and fourth sentences out,
    and whose split of anything else is `second`."""
    base = detective({**TRUTH, "Vitamin B3 also lowers cholesterol.": 0.9})

    def reply(messages: Chat) -> str:
        if messages[0]["content"].startswith("You take a text apart"):
            if messages[-1]["content"] == TESTIMONY:
                return "Vitamin B3 helps convert food into energy.\n" \
                    "Vitamin B3 is also called pantothenic acid."
            return second
        if messages[0]["content"].startswith("You make one sentence"):  # the revision
            sentence = messages[-1]["content"].rsplit("Sentence:", 1)[-1].strip()
            return sentence.replace("It ", "Vitamin B3 ", 1)
        return base(messages)
    return reply


async def test_the_sentences_a_split_left_out_are_split_again_and_take_their_places(
        paths: Paths) -> None:
    second = "Vitamin B3 helps convert food into energy.\nVitamin B3 lowers cholesterol.\n" \
        "[not checkable] You should eat more fish."
    session, _, det, _ = await run(paths, det=leaving_out(second))
    asked = [body["messages"][-1]["content"] for body in det.bodies
             if body["messages"][0]["content"].startswith("You take a text apart")]
    # a new conversation: the sentences left out, after the first one that names the subject
    assert asked == [TESTIMONY, "Vitamin B3 helps convert food into energy. "
                     "It also lowers cholesterol. You should eat more fish."]
    testimony = session.testimony
    assert testimony is not None
    assert [(c.number, c.text) for c in testimony.claims] == [
        (1, "Vitamin B3 helps convert food into energy."),
        (2, "Vitamin B3 lowers cholesterol."),
        (3, "Vitamin B3 is also called pantothenic acid."),
        (4, "You should eat more fish.")]
    assert [c.state for c in testimony.claims] == ["held", "held", "contradicted",
                                                   "not checkable"]
    assert testimony.refused == ["Vitamin B3 helps convert food into energy. — it repeats "
                                 "claim 1"]
    assert session.audit_result is not None and session.audit_result.verdict == "false"


async def test_sentences_no_split_took_apart_are_made_to_stand_on_their_own_and_examined(
        paths: Paths) -> None:
    # the second split gives nothing usable: the first split stands, and the two sentences
    # no claim stands on are listed in their places, never dropped; the one led by a pronoun
    # ("It …") is named by rule, from the subject of the sentence before it — no call
    session, _, det, _ = await run(paths, det=leaving_out("Mars rocks are red."))
    testimony = session.testimony
    assert testimony is not None and testimony.problem is None
    assert [(c.number, c.text, c.state) for c in testimony.claims] == [
        (1, "Vitamin B3 helps convert food into energy.", "held"),
        (2, "Vitamin B3 also lowers cholesterol.", "held"),
        (3, "Vitamin B3 is also called pantothenic acid.", "contradicted"),
        (4, "You should eat more fish.", "not checkable")]
    assert TESTIMONY[testimony.claims[1].start:testimony.claims[1].end] == \
        "It also lowers cholesterol."
    assert not [b for b in det.bodies
                if b["messages"][0]["content"].startswith("You make one sentence")]
    assert sum(body["messages"][0]["content"].startswith("You take a text apart")
               for body in det.bodies) == 2


LEANING = ("Vitamin B12 deficiency causes pernicious anaemia in older people. "
           "Niacin can help correct this deficiency in most patients.")


@pytest.mark.parametrize("revision, taken", [
    ("Niacin can help correct vitamin B12 deficiency in most patients.", True),
    ("Niacin can help correct vitamin B12 deficiency on Mars.", False),  # adds a word
])
async def test_a_claim_that_points_back_is_made_to_stand_on_its_own_by_the_detective(
        paths: Paths, revision: str, taken: bool) -> None:
    """"this deficiency" names nothing in a fresh conversation: the detective rewrites the
    claim with its referent from the text before it (SAFE's and VeriScore's revision); a
    rewrite that breaks the split's rules is not taken."""
    def reviser(messages: Chat) -> str:
        if messages[0]["content"].startswith("You take a text apart"):
            return ("Vitamin B12 deficiency causes pernicious anaemia in older people.\n"
                    "Niacin can help correct this deficiency in most patients.")
        if messages[0]["content"].startswith("You make one sentence"):
            return revision
        return detective()(messages)

    session, _, det, _ = await run(paths, hypothesis=LEANING, det=reviser)
    testimony = session.testimony
    assert testimony is not None
    asked = [b["messages"][-1]["content"] for b in det.bodies
             if b["messages"][0]["content"].startswith("You make one sentence")]
    assert asked == ["Text before: Vitamin B12 deficiency causes pernicious anaemia in older "
                     "people.\nSentence: Niacin can help correct this deficiency in most "
                     "patients."]
    second = testimony.claims[1]
    assert second.text == (revision if taken else
                           "Niacin can help correct this deficiency in most patients.")
    assert LEANING[second.start:second.end] == \
        "Niacin can help correct this deficiency in most patients."
    if not taken:
        trail = [t.reason for t in session.audit_trail if t.event == "degenerate_output"]
        assert any("revision is unusable" in reason and "mars" in reason for reason in trail)


def test_a_listed_sentence_shows_without_its_list_marker_and_emphasis() -> None:
    text = ("Vitamin B3 has benefits.\n\n2. **Skin Health**: Niacin keeps skin healthy.\n"
            "- `Niacin` is found in fish.")
    kept = Claim(number=1, text="Vitamin B3 has benefits.", start=0, end=24)
    listed = listed_left_out([kept], text)
    assert [c.text for c in listed] == ["Vitamin B3 has benefits.",
                                        "Skin Health: Niacin keeps skin healthy.",
                                        "Niacin is found in fish."]
    skin = listed[1]
    assert text[skin.start:skin.end].endswith("Niacin keeps skin healthy.")  # marked in place
    assert skin.state == "pending"  # to be examined


def claim(number: int, state: str, p: float | None, deciding: int | None = None) -> Claim:
    return Claim.model_validate({"number": number, "text": f"claim {number}", "state": state,
                                 "probability_false": p, "deciding": deciding})


def test_the_testimony_verdict_and_score_are_computed_from_the_claims() -> None:
    held = [claim(1, "held", 0.05, 2), claim(2, "held", 0.2, 3),
            claim(3, "not checkable", None)]
    verdict = verdict_of(held)
    assert (verdict.verdict, verdict.probability_false, verdict.deciding) == ("true", 0.2,
                                                                              [2, 3])
    assert score_of(held) == 100
    wrong = [*held, claim(4, "contradicted", 0.9, 5)]
    verdict = verdict_of(wrong)
    assert (verdict.verdict, verdict.probability_false, verdict.deciding) == ("false", 0.9,
                                                                              [5])
    assert score_of(wrong) == round(100 * 2 / 3) - 10
    open_ = [*held, claim(5, "unsure", 0.5), claim(6, "not examined", None)]
    verdict = verdict_of(open_)
    assert verdict.verdict == "undetermined"
    assert "claim 5 is unsure" in verdict.reason and "claim 6 is not examined" in verdict.reason
    none = verdict_of([claim(1, "not checkable", None)])
    assert none.verdict == "undetermined" and "could be checked" in none.reason
    assert claims_tally(wrong) == "2/4 held, 1 contradicted, 1 not checkable"


EQUAL = parse_pooling(json.loads(EQUAL_POOLING.read_text()), "equal")


def read(**readings: float | None) -> Claim:
    """A pending claim with these signals' P(true) (None: the signal read nothing)."""
    return Claim(number=1, text="Niacin lowers cholesterol.", readings={
        name: SignalReading(p_true=p) for name, p in readings.items()})


CHOSEN = ("words", "alone", "samples", "rounds")


def test_a_claim_with_no_reading_is_unsure_at_one_half() -> None:
    settled = settle(read(rounds=None), [], EQUAL, "open", CHOSEN)
    assert (settled.state, settled.probability_false) == ("unsure", 0.5)


def test_a_claim_is_held_only_below_one_half_and_false_only_above() -> None:
    """The band (rule 4 of `examine`): held below 0.4, not held from 0.6, unsure between;
    with a document and no round against it, not held is `unsupported`."""
    for p_true, state in ((0.95, "held"), (0.62, "held"), (0.55, "unsure"), (0.45, "unsure"),
                          (0.35, "contradicted"), (0.05, "contradicted")):
        settled = settle(read(rounds=p_true), [], EQUAL, "open", CHOSEN)
        assert settled.state == state, (p_true, settled)
        p = settled.probability_false
        assert p is not None and (state != "held" or p < 0.5) and (
            state != "contradicted" or p > 0.5)
    assert settle(read(words=0.2), [], EQUAL, "document", CHOSEN).state == "unsupported"


def test_strong_readings_are_never_outvoted_silently() -> None:
    """Rule 3: the rounds strongly one way, the other readings strongly the other — unsure,
    both shown, unless the pool is decisive all the same; then the reading that decided is
    named."""
    torn = settle(read(alone=0.9, samples=0.85, rounds=0.1), [], EQUAL, "open", CHOSEN)
    assert torn.state == "unsure" and torn.decided_by is None
    assert "rounds p(true) 0.10" in (torn.why or "") and "others p(true)" in (torn.why or "")
    outweighed = settle(read(alone=0.99, samples=0.99, rounds=0.2), [], EQUAL, "open",
                        CHOSEN)
    assert outweighed.state == "held" and outweighed.decided_by in ("alone", "samples")
    assert "decided by its" in (outweighed.why or "")
    line = claim_line(outweighed)
    assert "decided by" in line and "rounds 0.20" in line


def test_a_denial_decides_a_users_own_claim_but_not_a_testimonys() -> None:
    """Rule 3 on a session's single hypothesis: rounds that deny it strongly are not
    outvoted by the detective's own belief (`contradicted`, P(false) the rounds'); a
    testimony's claim with the same readings stays `unsure`, both shown."""
    readings = {"alone": 0.82, "rounds": 0.04}
    single = settle(read(**readings), [], EQUAL, "open", CHOSEN, users=True)
    assert (single.state, single.probability_false, single.decided_by) == (
        "contradicted", 0.96, "rounds")
    assert "a denial is not outvoted" in (single.why or "")
    assert "rounds p(true) 0.04" in (single.why or "")
    of_testimony = settle(read(**readings), [], EQUAL, "open", CHOSEN)
    assert of_testimony.state == "unsure" and of_testimony.decided_by is None
    # support is never given the same weight: rounds for, the detective strongly against
    doubted = settle(read(alone=0.1, rounds=0.9), [], EQUAL, "open", CHOSEN, users=True)
    assert doubted.state == "unsure"


def test_a_claim_of_the_witnesss_own_answer_examined_alone_is_no_users_claim() -> None:
    """Rule 3's denial decides a user's own claim only: a claim split from the witness's
    answer stays the witness's own when a session examines it alone (an evaluation of such
    claims: its topic and samples given), as it is inside its testimony."""
    from engine.interrogation.examine import users_claim
    from engine.interrogation.signals import Case

    claim = read(alone=0.82)
    assert users_claim(Case(claim=claim, single=True))
    assert not users_claim(Case(claim=claim, single=True, topic="What is niacin?",
                                samples=("Niacin is vitamin B3.",)))
    assert not users_claim(Case(claim=claim, topic="What is niacin?"))


def test_a_conflict_of_the_rounds_stays_unsure() -> None:
    claim = read(alone=0.95)
    claim.readings["rounds"] = SignalReading(conflict=True, why="the rounds conflict")
    settled = settle(claim, [], EQUAL, "open", CHOSEN)
    assert settled.state == "unsure"


def test_a_signal_left_out_by_the_settings_is_not_pooled() -> None:
    both = read(samples=0.1, rounds=0.95)
    assert settle(both, [], EQUAL, "open", ("rounds",)).state == "held"
    assert settle(both, [], EQUAL, "open", ("samples",)).state == "contradicted"


def test_the_detectives_own_reading_alone_never_decides_a_claim() -> None:
    """Rule 5: without a document, a claim the witness's own readings do not bear out is
    unsure, however sure the detective is alone."""
    believed = settle(read(alone=0.97, rounds=None), [], EQUAL, "open", CHOSEN)
    assert believed.state == "unsure" and "did not bear it out" in (believed.why or "")
    assert (believed.probability_false or 1) < 0.4  # its pooled P(false) still shown
    doubted = settle(read(alone=0.03, samples=0.5), [], EQUAL, "open", CHOSEN)
    assert doubted.state == "unsure" and "did not bear it down" in (doubted.why or "")
    # with a document, its words are evidence of what it says
    assert settle(read(words=0.2), [], EQUAL, "document", CHOSEN).state == "unsupported"


def test_a_claim_stored_before_the_signals_loads_with_its_readings() -> None:
    old = Claim.model_validate({"number": 2, "text": "x y z", "state": "held",
                                "probability_false": 0.2, "direct_p_true": 0.7,
                                "sampled_p_true": 0.9, "rounds_p_false": 0.1,
                                "unfound": ["prequel"]})
    assert old.reading("alone") == 0.7 and old.reading("samples") == 0.9
    assert old.reading("rounds") == 0.9 and old.unfound == ["prequel"]
    assert old.reading("words") == round(1 - words_p_false(1), 4)


def test_the_words_a_claim_has_that_its_document_lacks() -> None:
    """Rule 9's reading: words of five letters or more and numbers, endings aside; a short
    word (a paraphrase's "hits") is never counted, nor a word the document has in another
    form ("burning" for "burned"), each word once."""
    document = "The old mill burned down in 1901. Firemen from Leeds fought the fire."
    assert unfound("The mill was burning in 1901.", document) == []
    assert unfound("A gust hits the mill in 1902.", document) == ["1902"]
    assert unfound("The mayor of Leeds jailed the mayor's firemen.", document) == [
        "mayor", "jailed"]
    # a number as the document writes it otherwise: thousands separators, a spelled number
    assert unfound("About 1,200 firemen came, five from Leeds.",
                   "Some 1200 firemen came; 5 were from Leeds.") == []
    assert unfound("Twelve mills burned in 1901.", "The 12 mills burned in 1901.") == []
    assert unfound("About 1,300 firemen came.", "Some 1200 firemen came.") == ["1300"]
    # a negation written short is "not": "weren't" is no word the document lacks
    assert unfound("Parents weren't sure; firemen couldn’t come.",
                   "The parents were not sure. Firemen could not come.") == []
    assert [words_p_false(n) for n in (0, 1, 2, 3, 4, 9)] == [0.24, 0.46, 0.66, 0.78, 0.87,
                                                               0.87]


# ---- a run on scripted models --------------------------------------------------------------

SAMPLE = "Vitamin B3 helps convert food into energy. It is found in meat and fish."
"""The witness's answer to the request, asked again at the consistency temperature: the first
claim comes back, the others do not."""


def sampling_witness() -> Callable[[Chat], str]:
    """`witness`, whose answers to the request after its first are `SAMPLE`."""
    asked: list[int] = []

    def reply(messages: Chat) -> str:
        if messages[-1]["content"].startswith(REQUEST):
            asked.append(1)
            return TESTIMONY if len(asked) == 1 else SAMPLE
        return witness(messages)
    return reply


def sample_reader(messages: Chat) -> str:
    """`detective()`, reading a claim against a sampled answer as a reader would: supported
    when the sample says it, silent otherwise."""
    if is_judgement(messages) and SAMPLE in messages[-1]["content"]:
        return Judged(0.95 if judged_claim(messages) in SAMPLE else 0.5)
    return detective()(messages)


async def test_a_request_is_answered_then_its_testimony_examined_claim_by_claim(
        paths: Paths) -> None:
    session, events, det, wit = await run(paths, det=sample_reader, wit=sampling_witness(),
                                          testimony_samples=2)
    assert session.status == "completed"
    first = session.qa_pairs[0]
    assert first.testimony and first.question == REQUEST and first.answer == TESTIMONY
    testimony = session.testimony
    assert testimony is not None and testimony.split
    states = [(c.text, c.state) for c in testimony.claims]
    assert states == [("Vitamin B3 helps convert food into energy.", "held"),
                      ("Vitamin B3 lowers cholesterol.", "held"),
                      ("Vitamin B3 is also called pantothenic acid.", "contradicted"),
                      ("You should eat more fish.", "not checkable")]
    assert any("repeats claim 3" in line for line in testimony.refused)
    assert any("mars" in line for line in testimony.refused)
    # each claim its own rounds; the witness never saw its testimony again
    assert {p.claim for p in session.qa_pairs[1:]} == {1, 2, 3}
    assert all(TESTIMONY not in m["content"] for body in wit.bodies[1:]
               for m in body["messages"])
    # the detective alone, told only the question the testimony answers, beside each claim
    assert [c.reading("alone") for c in testimony.claims[:3]] == [0.8, 0.8, 0.8]
    alone = [b["messages"][-1]["content"] for b in det.bodies
             if is_judgement(b["messages"]) and "The witness was asked" not in
             b["messages"][-1]["content"]]
    assert len(alone) == 3
    assert all(f"The question was: {REQUEST}" in text and TESTIMONY not in text
               for text in alone)
    # the request asked again twice at the consistency temperature, told nothing; each
    # claim read against each answer: the one that comes back supported, the others silent
    asked = [b for b in wit.bodies if b["messages"][-1]["content"].startswith(REQUEST)]
    assert [b["temperature"] for b in asked] == [0.0, 1.0, 1.0]
    assert all(len(b["messages"]) == 2 for b in asked)
    assert testimony.samples == [SAMPLE] * 2
    assert [c.reading("samples") for c in testimony.claims[:3]] == [0.95, 0.5, 0.5]
    assert "samples 0.95" in claim_line(testimony.claims[0])
    audit = session.audit_result
    assert audit is not None and audit.computed
    # its rounds (P(true) 0.05) pooled with the detective alone (0.8) and the samples (0.5,
    # silent), each weighing the same in the tests' pool
    pooled = 1 - 1 / (1 + math.exp(-(math.log(0.05 / 0.95) + math.log(0.8 / 0.2) + 0) / 3))
    assert audit.verdict == "false" and audit.probability_false == pytest.approx(pooled, abs=1e-4)
    wrong = testimony.claims[2]
    assert wrong.deciding is not None
    assert [c.qa_pair_indexes for c in audit.contradictions] == [(0, wrong.deciding - 1)]
    assert session.qa_pairs[wrong.deciding - 1].claim == 3
    assert audit.consistency_score == round(100 * 2 / 3) - 10
    assert [g.category for g in audit.remaining_gaps] == ["vagueness"]
    text = TESTIMONY
    assert text[wrong.start:wrong.end] == "Vitamin B3 is also called pantothenic acid."
    assert "[✗3]" in marked_testimony(text, testimony.claims)
    assert sum(isinstance(e, ClaimExamined) for e in events) == 3
    split = [e for e in events if isinstance(e, ClaimsSplit)]
    assert len(split) == 1 and split[0].testimony.claims[0].state == "pending"


async def given(paths: Paths, answer: str, examined: bool = False,
                question: str | None = REQUEST, document: str | None = None, **settings: Any
                ) -> tuple[InterrogationSession, ScriptedModel]:
    """A run of REQUEST whose answer is given (an answer made elsewhere), the witness only
    sampled (`examined`: through `Sessions.examine_answer`, the scorer's one rule); the
    session as stored and the witness."""
    def sampled(messages: Chat) -> str:
        return SAMPLE if messages[-1]["content"].startswith(REQUEST) else witness(messages)

    with ScriptedModel(sample_reader) as d, ScriptedModel(sampled) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"],
                             **{"claim_concurrency": 2, **settings})
        workspace = Workspace(paths, config)
        try:
            started = workspace.sessions.examine_answer(
                question, answer, answered_by="inspect:mockllm", limit=5,
                document=document) if examined else \
                workspace.sessions.start(REQUEST, 5, answer=answer,
                                         answered_by="inspect:mockllm")
            async with aclosing(started.events()) as stream:
                async for _ in stream:
                    pass
            session = workspace.store.load(str(started.session.id))
        finally:
            await workspace.aclose()
    return session, w


async def test_an_answer_given_with_the_question_is_the_testimony_the_witness_only_sampled(
        paths: Paths) -> None:
    session, wit = await given(paths, TESTIMONY, testimony_samples=2)
    assert session.status == "completed"
    first = session.qa_pairs[0]
    assert first.testimony and first.question == REQUEST and first.answer == TESTIMONY
    assert first.provider_used.witness == "inspect:mockllm"
    testimony = session.testimony
    assert testimony is not None and testimony.source == "witness"
    # the witness was never asked for the answer: only drawn again, twice, at the
    # sampling temperature (the answer is read against them, as its own would be)
    asked = [b for b in wit.bodies if b["messages"][-1]["content"].startswith(REQUEST)]
    assert [b["temperature"] for b in asked] == [1.0, 1.0]
    assert testimony.samples == [SAMPLE, SAMPLE]
    assert [c.state for c in testimony.claims] == ["held", "held", "contradicted",
                                                   "not checkable"]
    assert session.audit_result is not None and session.audit_result.verdict == "false"


async def test_an_examination_cancelled_midway_ends_cancelled_and_resumes_to_its_end(
        paths: Paths) -> None:
    """What a scorer's cancellation from Inspect does: the session's reader is cancelled while
    the detective splits; it is stored `cancelled`, and resumed it goes on to its verdict."""
    import asyncio

    splitting = threading.Event()
    release = threading.Event()

    def slow(messages: Chat) -> str:
        if messages[0]["content"].startswith("You take a text apart") and \
                not release.is_set():
            splitting.set()
            release.wait(timeout=30)
        return sample_reader(messages)

    def sampled(messages: Chat) -> str:
        return SAMPLE if messages[-1]["content"].startswith(REQUEST) else witness(messages)

    with ScriptedModel(slow) as d, ScriptedModel(sampled) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"],
                             claim_concurrency=1, testimony_samples=1)
        workspace = Workspace(paths, config)
        try:
            run = workspace.sessions.examine_answer(REQUEST, TESTIMONY, limit=5)
            ident = str(run.session.id)

            async def read() -> None:
                async with aclosing(run.events()) as events:
                    async for _ in events:
                        pass

            task = asyncio.ensure_future(read())
            while not splitting.is_set():
                await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            release.set()
            assert workspace.sessions.status(ident) == "cancelled"
            again = workspace.sessions.resume(ident)
            async with aclosing(again.events()) as events:
                async for _ in events:
                    pass
            session = workspace.store.load(ident)
        finally:
            release.set()
            await workspace.aclose()
    assert session.status == "completed" and session.testimony is not None
    assert session.qa_pairs[0].answer == TESTIMONY  # the given answer kept, never asked
    assert all(c.state != "pending" for c in session.testimony.claims)


async def test_an_answer_of_one_statement_is_examined_as_the_claim_it_makes(
        paths: Paths) -> None:
    session, _ = await given(paths, "Vitamin B3 lowers cholesterol.", examined=True)
    assert session.testimony is None and session.answer is None
    assert session.hypothesis_text == ('The answer to the question "' + REQUEST + '" is: '
                                       "Vitamin B3 lowers cholesterol.")
    assert session.claim is not None and session.claim.state != "pending"


async def test_a_summary_answers_no_question_and_is_examined_as_it_stands(
        paths: Paths) -> None:
    """A one-sentence summary of a document the witness holds is itself the claim (as
    `detektiv eval` reads a HaluEval summary), never "the answer to the question …" of an
    instruction that carries the document."""
    summary = "The mill by the Avon was built in 1820 by monks."
    document = "The mill by the river Avon was built in 1820. It is now a museum."
    session, _ = await given(paths, summary, examined=True, question=None, document=document)
    assert session.hypothesis_text == summary
    assert session.witness_document is not None and session.witness_document.text == document


@pytest.mark.parametrize("answer", ["", "   ", "I don't know.",
                                    "I'm sorry, but I can't discuss that."])
async def test_a_given_answer_that_says_nothing_is_no_testimony_its_reason_named(
        paths: Paths, answer: str) -> None:
    session, wit = await given(paths, answer, examined=True)
    assert session.status == "completed" and session.testimony is not None
    assert session.testimony.problem is not None
    assert session.testimony.problem.startswith("no testimony: ")
    assert not session.testimony.claims and not wit.bodies  # nothing asked of anyone
    assert session.audit_result is not None
    assert session.audit_result.verdict == "undetermined"


async def test_each_round_counts_its_own_calls_whatever_runs_beside_it(paths: Paths) -> None:
    # every call reports 100 + 10 tokens; three claims side by side, the request drawn again
    session, _, det, wit = await run(paths, det=sample_reader, wit=sampling_witness(),
                                     usage=(100, 10), claim_concurrency=3, testimony_samples=1)
    assert session.status == "completed"
    first, rounds = session.qa_pairs[0], session.qa_pairs[1:]
    assert first.usage is not None and first.usage.total == 110  # its answer, not the sample
    assert {p.claim for p in rounds} == {1, 2, 3}
    # a round: its question, its answer, its judgement, none of another claim's
    assert [p.usage.total if p.usage else None for p in rounds] == [330] * len(rounds)
    calls = len(det.bodies) + len(wit.bodies)
    assert session.tokens.total == 110 * calls  # every call counted once in the session


async def test_the_witness_answers_again_while_the_detective_takes_the_testimony_apart(
        paths: Paths) -> None:
    splitting = threading.Event()
    waited: list[bool] = []
    asked = sampling_witness()
    requests: list[int] = []

    def det(messages: Chat) -> str:
        if messages[0]["content"].startswith("You take a text apart"):
            splitting.set()
        return sample_reader(messages)

    def wit(messages: Chat) -> str:
        if messages[-1]["content"].startswith(REQUEST):
            requests.append(1)
            if len(requests) == 2:  # the sample: answered once the split was asked for
                waited.append(splitting.wait(timeout=60))
        return asked(messages)

    session, events, _, _ = await run(paths, det=det, wit=wit, testimony_samples=1)
    assert waited == [True]
    assert session.status == "completed"
    testimony = session.testimony
    assert testimony is not None and testimony.samples == [SAMPLE]
    assert testimony.claims[0].reading("samples") == 0.95  # read against it, as before
    phases = [e.phase for e in events if isinstance(e, Phase)]
    assert phases[:4] == ["testimony", "samples", "split", "claims"]


async def test_a_testimony_with_no_statement_stops_the_sample_drawn_beside_it(
        paths: Paths) -> None:
    stopped = threading.Event()
    requests: list[int] = []

    def wit(messages: Chat) -> str:
        if messages[-1]["content"].startswith(REQUEST):
            requests.append(1)
            if len(requests) == 2:  # the sample, held until the run has ended
                stopped.wait(timeout=60)
            return "**Energy**:\n**Skin**:"  # headings, no statement
        return witness(messages)

    try:
        session, _, _, _ = await run(paths, det=detective(split="Energy:\nMars rocks are red."),
                                     wit=wit, testimony_samples=1)
    finally:
        stopped.set()
    testimony = session.testimony
    assert testimony is not None and testimony.problem is not None
    assert testimony.problem.startswith("the split gave no usable claim")
    assert testimony.samples is None  # not waited for


async def test_a_comparison_claim_is_asked_each_way_in_a_conversation_of_its_own(
        paths: Paths) -> None:
    pasted = "Lead is denser than aluminium. Lead is a metal."
    split = "1. Lead is denser than aluminium.\n2. Lead is a metal."
    session, _, _, wit = await run(paths, hypothesis=pasted, det=detective(split=split),
                                   wit=lambda _: "Lead is denser than aluminium.")
    asked = [chat for chat in wit.chats if chat[-1]["content"].startswith("Which is denser")]
    assert [chat[-1]["content"] for chat in asked] == ["Which is denser, aluminium or lead?",
                                                       "Which is denser, lead or aluminium?"]
    assert [len(chat) for chat in asked] == [2, 2]  # no earlier round before the swap
    testimony = session.testimony
    assert testimony is not None and testimony.claims[0].state == "held"


async def test_a_pasted_paragraph_is_itself_the_testimony(paths: Paths) -> None:
    # the detective alone unsure of each claim (0.6): the rounds decide
    session, _, det, wit = await run(paths, hypothesis=TESTIMONY, det=detective(alone=0.6))
    first = session.qa_pairs[0]
    assert first.testimony and first.answer == TESTIMONY
    assert first.provider_used.witness == "given"
    assert all(TESTIMONY not in m["content"] for body in wit.bodies for m in body["messages"])
    # no question was asked: the detective alone is told nothing but the claim
    assert not any("The question was" in m["content"] for body in det.bodies
                   for m in body["messages"])
    assert session.audit_result is not None and session.audit_result.verdict == "false"


async def test_claims_past_the_token_budget_are_not_examined_and_numbered_right(
        paths: Paths) -> None:
    """The testimony's budget (`claim_tokens` × its checkable claims) is spent by its answer,
    its split and its claims in turn: a claim reached after it is spent is `not examined`,
    and the verdict says which, by their own numbers."""
    # every call counts 100 + 10 tokens; three checkable claims at 200 tokens each: the
    # request and the split (220) and the first claim's readings leave nothing for the rest
    session, _, _, _ = await run(paths, usage=(100, 10), claim_tokens=200,
                                 claim_concurrency=1)
    testimony = session.testimony
    assert testimony is not None
    states = [c.state for c in testimony.claims]
    assert states[-1] == "not checkable" and "not examined" in states
    unexamined = [c for c in testimony.claims if c.state == "not examined"]
    assert all("token budget" in (c.why or "") for c in unexamined)
    audit = session.audit_result
    assert audit is not None and audit.verdict in ("undetermined", "false")
    if audit.verdict == "undetermined":
        numbers = ", ".join(str(c.number) for c in unexamined)
        assert f"{numbers} " in (audit.undetermined_because or "")
    # a budget large enough examines every checkable claim
    session, _, _, _ = await run(paths, usage=(100, 10), claim_tokens=100_000)
    testimony = session.testimony
    assert testimony is not None
    assert not [c for c in testimony.claims if c.state in ("not examined", "pending")]


async def test_a_split_with_no_usable_claim_examines_the_sentences_as_they_stand(
        paths: Paths) -> None:
    session, _, _, _ = await run(paths, det=detective(split="Energy:\nMars rocks are red."))
    assert session.status == "completed"
    testimony = session.testimony
    assert testimony is not None and testimony.problem is None
    assert [c.text for c in testimony.claims] == [
        "Vitamin B3 helps convert food into energy.", "Vitamin B3 also lowers cholesterol.",
        "Vitamin B3 is also called pantothenic acid.", "You should eat more fish."]
    assert [c.state for c in testimony.claims][-1] == "not checkable"
    split_again = [t.reason for t in session.audit_trail if t.event == "degenerate_output"
                   and t.reason.startswith("the split gave")]
    assert len(split_again) == 1  # the split asked again once
    audit = session.audit_result
    assert audit is not None and audit.verdict == "false"


async def test_an_empty_testimony_ends_named(paths: Paths) -> None:
    def mute(messages: Chat) -> str:
        return ""
    session, _, d, w = await run(paths, wit=mute)
    assert session.status == "completed"
    assert session.testimony is not None and "no testimony" in (session.testimony.problem or "")
    assert len(w.bodies) == 1  # nothing more is asked of an empty testimony
    assert not any(is_judgement(b["messages"]) for b in d.bodies)


REFUSAL = "I'm sorry, but I can't discuss that topic."


def asking_anew(reply: Callable[[Chat], str]) -> Callable[[Chat], str]:
    """`reply`, writing a question of its own each round (never a repeat)."""
    asked = iter(["origin", "history", "source", "chemistry", "story", "nature"] * 10)

    def varied(messages: Chat) -> str:
        said = reply(messages)
        return said.replace("what else", f"its {next(asked)}") \
            if isinstance(said, str) and said.startswith("What do you know") else said
    return varied


async def test_a_claim_the_witness_refuses_to_discuss_stays_open_never_contradicted(
        paths: Paths) -> None:
    """A witness that declines each claim's question: a small judge reads "I'm sorry, but I
    can't discuss that" as the claim's contradiction (here every judgement says false at
    0.05), so a refusal is read by rule, never judged — silent, its reason named — and the
    claim closes after two refusals, `unsure`; a refused sample is not read either."""
    answered: list[str] = []

    def refusing(messages: Chat) -> str:  # its testimony, then only refusals (the sample too)
        answered.append(TESTIMONY if not answered else REFUSAL)
        return answered[-1]

    wrong = detective({text: 0.05 for text in TRUTH})
    session, _, det, _ = await run(paths, det=asking_anew(wrong), wit=refusing,
                                   testimony_samples=1)
    assert session.status == "completed"
    testimony = session.testimony
    assert testimony is not None and testimony.samples == [REFUSAL]
    examined = [c for c in testimony.claims if c.state != "not checkable"]
    assert examined and all(c.state == "unsure" for c in examined)
    assert all(c.reading("samples") is None for c in examined)  # the refusal read against none
    for claim in examined:
        rounds = [p for p in session.qa_pairs if p.claim == claim.number]
        assert len(rounds) == 2
        assert all(p.judgement is not None and p.judgement.bearing == "silent" and
                   p.judgement.why == "the witness declines to answer" for p in rounds)
        assert claim.why is not None and "declines to answer, twice" in claim.why
    read = [b["messages"][-1]["content"] for b in det.bodies if is_judgement(b["messages"])]
    assert read and all(REFUSAL not in text for text in read)  # only the detective alone
    audit = session.audit_result
    assert audit is not None and audit.verdict == "undetermined" and not audit.contradictions


async def test_a_refused_request_is_no_testimony(paths: Paths) -> None:
    session, _, det, wit = await run(
        paths, wit=lambda messages: "I'm sorry, but I can't help with that request.")
    assert session.status == "completed"
    testimony = session.testimony
    assert testimony is not None and not testimony.claims
    assert testimony.problem == "no testimony: the witness declines to answer"
    assert len(wit.bodies) == 1 and not det.bodies  # nothing more is asked
    audit = session.audit_result
    assert audit is not None and audit.verdict == "undetermined"


def test_a_refusal_is_told_from_an_answer_that_apologises() -> None:
    from engine.interrogation.judgement import says_nothing

    for refused in ("I'm sorry, but I can't discuss that topic.",
                    "I cannot provide information on that.",
                    "As an AI, I am not able to comment on medical claims.",
                    "I must decline to answer this question.",
                    "Sorry, I won't go into that."):
        assert says_nothing(refused) == "the witness declines to answer", refused
    assert says_nothing("I don't know.") == "the witness says it does not know"
    for answered in ("I'm sorry, but that is not right: Vitamin B3 is niacin.",
                     "Vitamin B3 cannot provide energy by itself; it helps enzymes do so.",
                     "I can't give medical advice, but niacin helps convert food to energy.",
                     "No. " + "Pantothenic acid is vitamin B5, not B3, and " * 4 +
                     "I cannot discuss more."):
        assert says_nothing(answered) is None, answered


async def test_a_stopped_testimony_resumes_with_the_claims_it_had_not_finished(
        paths: Paths) -> None:
    session, _, _, _ = await run(paths, stop_after=1, claim_concurrency=1)
    assert session.status == "cancelled"
    testimony = session.testimony
    assert testimony is not None
    done = [c.number for c in testimony.claims if c.examined]
    assert done == [3]  # the riskiest first: its samples read it false
    # every claim's cheap readings were stored before any was questioned
    assert all(c.readings for c in testimony.claims if c.state != "not checkable")
    with ScriptedModel(detective()) as d, ScriptedModel(witness) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"],
                             claim_concurrency=1)
        workspace = Workspace(paths, config)
        try:
            resumed = workspace.sessions.resume(str(session.id))
            [event async for event in resumed.events()]
            after = workspace.store.load(str(session.id))
        finally:
            await workspace.aclose()
        # nothing of the testimony, its split, its sample, claim 3 or the claims' cheap
        # readings was asked again
        assert not any(b["messages"][0]["content"].startswith("You take a text apart")
                       for b in d.bodies)
        assert all(not m["content"].startswith(REQUEST) for b in w.bodies
                   for m in b["messages"])
        assert not [b for b in d.bodies if is_judgement(b["messages"])
                    and "The witness was asked" not in b["messages"][-1]["content"]]
    assert after.status == "completed" and after.testimony is not None
    assert [c.state for c in after.testimony.claims] == ["held", "held", "contradicted",
                                                         "not checkable"]
    assert [p.claim for p in after.qa_pairs].count(3) == 1


# ---- testimonies measured: the two formats, and an evaluation of summaries ------------------

def test_halueval_summarization_rows_give_two_testimonies(tmp_path: Path) -> None:
    from engine.evals.items import read_items

    path = tmp_path / "summaries.jsonl"
    path.write_text(json.dumps({"document": "The mill burned in 1901. Nobody was hurt.",
                                "right_summary": "The mill burned in 1901. Nobody was hurt.",
                                "hallucinated_summary": "The mill burned in 1910. Two died."})
                    + "\n")
    right, wrong = read_items(path)
    assert (right.label, wrong.label) == (True, False)
    assert right.group == wrong.group and right.source == "halueval-summarization"
    assert right.document == "The mill burned in 1901. Nobody was hurt."
    assert source_of(wrong.claim) == "given"


def test_split_and_labelled_claims_are_an_item_each_grouped_by_their_testimony(
        tmp_path: Path) -> None:
    from engine.errors import DatasetError
    from engine.evals.items import chosen_items, read_items

    path = tmp_path / "claims.jsonl"
    rows = [{"id": "b3", "topic": "Vitamin B3", "source": "an encyclopaedia entry",
             "claims": [{"claim": "Niacin is vitamin B3.", "label": True},
                        {"claim": "Niacin is pantothenic acid.", "label": "false"}]},
            {"topic": "Tea", "claims": [{"claim": "Tea contains caffeine.", "label": 1}]}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    items = read_items(path)
    assert [(i.key, i.label, i.group) for i in items] == [
        ("b3:1", True, "b3"), ("b3:2", False, "b3"), ("line2:1", True, "line2")]
    assert items[0].source == "an encyclopaedia entry"
    assert [i.key for i in chosen_items(path, None, 0)] == [i.key for i in items]
    # FActScore's own shape: its atomic facts' `text`, labelled S / NS
    path.write_text(json.dumps({"topic": "Tea", "claims": [
        {"text": "Tea contains caffeine.", "label": "S"},
        {"text": "Tea is red.", "label": "NS"}]}) + "\n")
    assert [(i.claim, i.label) for i in read_items(path)] == [
        ("Tea contains caffeine.", True), ("Tea is red.", False)]
    path.write_text(json.dumps({"topic": "Tea", "claims": [{"claim": "Tea is red."}]}) + "\n")
    with pytest.raises(DatasetError, match="claim 1: 'label' is missing"):
        read_items(path)
    path.write_text(json.dumps({"topic": "Tea", "claims": []}) + "\n")
    with pytest.raises(DatasetError, match="'claims' must be a non-empty list"):
        read_items(path)


async def test_an_evaluation_of_summaries_examines_each_claim_against_the_document(
        paths: Paths, tmp_path: Path) -> None:
    """Document mode: the hallucinated summary's added claim is one the witness holding the
    document answers against — its rounds pooled with its two words the document lacks,
    `contradicted`, so the summary is false; the right one holds. No "Are you sure?" for a
    summary; the reader reads the document; the detective alone is a baseline of its own
    (with a document it is no signal of the sessions')."""
    from engine import EvalRequest

    document = "The mill burned down in 1901. Nobody was hurt in the fire."
    path = tmp_path / "summaries.jsonl"
    path.write_text(json.dumps({
        "document": document,
        "right_summary": "The mill burned down in 1901. Nobody was hurt in the fire.",
        "hallucinated_summary": "The mill burned down in 1901. The mayor was jailed."}) + "\n")

    def splitter(messages: Chat) -> str:
        if is_judgement(messages):
            if "The witness was asked" not in messages[-1]["content"]:
                return Judged(0.7)  # the detective alone, the reader
            claim = judged_claim(messages)
            return Judged(0.05 if "mayor" in claim else 0.95)
        if messages[0]["content"].startswith("You take a text apart"):
            return messages[-1]["content"].replace(". ", ".\n")
        about = "mayor" if "mayor" in messages[0]["content"] else "mill"
        return f"What happened to the {about}, according to your document?"

    def reader(messages: Chat) -> str:
        held = "<document>" in messages[0]["content"] and document in messages[0]["content"]
        return "The document says the mill burned in 1901." if held else "I do not know."

    with ScriptedModel(splitter) as d, ScriptedModel(reader) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"],
                             claim_concurrency=2)
        workspace = Workspace(paths, config)
        try:
            run = await workspace.evals.start(EvalRequest(dataset=str(path), mode="document"),
                                              baselines=True)
            [event async for event in run.events()]
            results = {(r.item, r.kind): r for r in run.folder.latest().values()}
            sessions = {r.item: workspace.store.load(r.session) for r in results.values()
                        if r.kind == "interrogation" and r.session}
        finally:
            await workspace.aclose()
    assert results[("row1:right", "interrogation")].verdict == "true"
    assert results[("row1:hallucinated", "interrogation")].verdict == "false"
    assert {kind for _, kind in results} == {"interrogation", "direct", "reader"}
    wrong = sessions["row1:hallucinated"].testimony
    assert wrong is not None
    assert [c.state for c in wrong.claims] == ["held", "contradicted"]
    assert all(c.reading("alone") is None for c in wrong.claims)  # with a document: no signal
    # two words the document lacks: shown beside the claim, pooled with its rounds
    assert [c.unfound for c in wrong.claims] == [[], ["mayor", "jailed"]]
    assert wrong.claims[1].deciding is not None
    assert wrong.claims[1].reading("rounds") == 0.05
    assert wrong.claims[1].probability_false == round(
        1 - pooled([0.05, 1 - words_p_false(2)]), 4)
    line = claim_line(wrong.claims[1])  # each reading beside the claim
    assert "p(true) words 0.34, rounds 0.05" in line
    assert "| words p(true) | rounds p(true) |" in claims_table(wrong.claims)[0]
    assert "| 0.34 | 0.05 |" in claims_table(wrong.claims)[3]


async def test_a_claim_with_words_its_document_lacks_is_unsupported_when_no_round_holds_it(
        paths: Paths, tmp_path: Path) -> None:
    """"The mayor was jailed for fraud." has four words of five letters or more that the
    document nowhere has (the words signal: P(false) 0.87); the detective's question about
    it does not name its subject ("Who was jailed?" — the mayor is never named), so no round
    is asked and the witness never hears of it: `unsupported` on its words, named, and the
    summary is false; the claim whose words the document holds is examined as before."""
    from engine import EvalRequest

    document = "The mill burned down in 1901. Nobody was hurt in the fire."
    path = tmp_path / "summaries.jsonl"
    path.write_text(json.dumps({
        "document": document,
        "right_summary": "The mill burned down in 1901. Nobody was hurt in the fire.",
        "hallucinated_summary": "The mill burned down in 1901. The mayor was jailed for "
                                "fraud yesterday."}) + "\n")
    asked: list[str] = []

    def detective(messages: Chat) -> str:
        if is_judgement(messages):
            return Judged(0.7 if "The witness was asked" not in messages[-1]["content"]
                          else 0.95)
        if messages[0]["content"].startswith("You take a text apart"):
            return messages[-1]["content"].replace(". ", ".\n")
        claim = messages[-1]["content"]
        return ("Who was jailed?" if "mayor" in claim
                else "What happened to the mill, according to your document?")

    def witness(messages: Chat) -> str:
        asked.append(messages[-1]["content"])
        return "The document says the mill burned in 1901."

    with ScriptedModel(detective) as d, ScriptedModel(witness) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"])
        workspace = Workspace(paths, config)
        try:
            run = await workspace.evals.start(EvalRequest(dataset=str(path), mode="document"))
            [event async for event in run.events()]
            results = {r.item: r for r in run.folder.latest().values()}
            wrong = workspace.store.load(results["row1:hallucinated"].session).testimony
        finally:
            await workspace.aclose()
    assert results["row1:hallucinated"].verdict == "false"
    assert results["row1:right"].verdict == "true"
    assert wrong is not None
    mill, mayor = wrong.claims
    # its words pooled with rounds that read nothing (their feature 0, as the fit reads it)
    assert (mayor.state, mayor.probability_false, mayor.deciding) == (
        "unsupported", round(1 - pooled([0.13, 0.5]), 4), None)
    assert mayor.unfound == ["mayor", "jailed", "fraud", "yesterday"]
    assert "no usable question" in (mayor.readings["rounds"].why or "")
    assert "the document has none of: mayor, jailed, fraud, yesterday" in claim_line(mayor)
    table = "\n".join(claims_table(wrong.claims))
    assert "| not in the document | claim |" in table
    assert "| mayor, jailed, fraud, yesterday | The mayor was jailed" in table
    assert mill.state == "held" and mill.unfound == []
    assert asked and not any("jailed" in question for question in asked)


@pytest.mark.parametrize("second", ["Vitamin B3 is niacin, also called nicotinic acid.",
                                    REFUSAL, ""])
async def test_an_evaluation_of_labelled_claims_reads_each_against_samples_drawn_once(
        paths: Paths, tmp_path: Path, second: str) -> None:
    """`eval --baselines` of a testimony's labelled claims in `open` mode measures what a
    session computes: the testimony's question drawn again once for all its claims (at the
    sampling temperature, the testimony's cap), handed to each claim's session, which reads
    the claim against the samples beside its rounds and the detective alone; each signal
    alone and the pool without each are rows of the run, from those same sessions, and
    SelfCheckGPT's scorer reads the same samples. A refused or empty sample is not read
    (the detective here reads any claim against it as false), as in a session."""
    from engine import EvalRequest
    from engine.evals.summary import summarize

    path = tmp_path / "claims.jsonl"
    path.write_text(json.dumps({
        "id": "b3", "topic": "Vitamin B3", "question": "What is vitamin B3?",
        "claims": [{"claim": "Niacin is vitamin B3.", "label": True},
                   {"claim": "Niacin is pantothenic acid.", "label": False}]}) + "\n")

    def det(messages: Chat) -> str:
        if is_judgement(messages):
            evidence = messages[-1]["content"]
            if "Vitamin B3 is niacin, also called nicotinic acid." in evidence:  # a sample
                return Judged(0.95 if "vitamin B3" in judged_claim(messages) else 0.05)
            if "The witness answered: \n" in evidence or REFUSAL in evidence:
                return Judged(0.05)
            return Judged(0.6 if "The witness was asked" in evidence else 0.7)
        if messages[0]["content"].startswith("Context:"):  # SelfCheckGPT's own prompt
            said = messages[0]["content"]
            return "Yes" if "nicotinic" in said and "vitamin B3." in said else "No"
        return claim_question(messages[0]["content"])

    drawn: list[str] = []

    def wit(messages: Chat) -> str:
        if messages[-1]["content"] == "What is vitamin B3?":
            body = next(b for b in w.bodies if b["messages"] is messages)
            if body.get("temperature") != 0.9:  # "Are you sure?"'s first answer
                return "Vitamin B3 is niacin, also called nicotinic acid."
            drawn.append("Vitamin B3 is niacin, also called nicotinic acid." if not drawn
                         else second)  # the samples, one after the other
            return drawn[-1]
        return "I recall the substance as I described it."

    with ScriptedModel(det) as d, ScriptedModel(wit) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"],
                             testimony_samples=2, consistency_temperature=0.9)
        workspace = Workspace(paths, config)
        try:
            run = await workspace.evals.start(EvalRequest(dataset=str(path), mode="open"),
                                              baselines=True, concurrency=2)
            [event async for event in run.events()]
            results = {(r.item, r.kind): r for r in run.folder.latest().values()}
            summary = summarize(run.folder)
            sessions = {item: workspace.store.load(r.session) for (item, kind), r in
                        results.items() if kind == "interrogation" and r.session}
        finally:
            await workspace.aclose()
    hot = [body for body in w.bodies if body.get("temperature") == 0.9]
    # two samples for the testimony, not two a claim: its question, told nothing, the cap
    assert [([m["role"] for m in b["messages"]], b["messages"][-1]["content"], b["max_tokens"])
            for b in hot] == [(["system", "user"], "What is vitamin B3?", 512)] * 2
    assert len({b.get("seed") for b in hot}) == 2  # each draw its own seed
    for item in ("b3:1", "b3:2"):  # each claim's session holds them, and its question
        assert sessions[item].samples == drawn and sessions[item].topic == "What is vitamin B3?"
    true, false = results[("b3:1", "interrogation")], results[("b3:2", "interrogation")]
    assert true.readings is not None and false.readings is not None
    assert true.readings["samples"] == 0.95 and false.readings["samples"] == 0.05
    assert {"signal:samples", "signal:alone", "signal:rounds", "without:samples"} <= \
        set(summary.systems)
    assert summary.systems["signal:samples"].figures["auroc"].value == 1.0
    assert ("b3:1", "selfcheck") in results and ("b3:2", "selfcheck") in results
    assert results[("b3:1", "selfcheck")].probability_false == 0.0  # "Yes" to every sample
    assert "selfcheck" in summary.systems
    read = [b["messages"][-1]["content"] for b in d.bodies if is_judgement(b["messages"])
            and "The witness was asked: What is vitamin B3?\n" in b["messages"][-1]["content"]]
    answered = second == drawn[0]  # else only the first sample is read, for each claim
    assert len(read) == 2 * (2 if answered else 1)
    assert all("The witness answered: Vitamin B3 is niacin" in text for text in read)


def test_oracles_and_the_case_agent_see_each_claim_and_its_state(tmp_path: Path) -> None:
    from engine.agent.vault import documents
    from engine.oracles.context import CaseContext
    from tests.support.app import fixed_testimony

    session = fixed_testimony(tmp_path)
    audit = CaseContext.build(session, [], [], include_history=False).audit
    assert audit is not None
    assert "✗ 3 contradicted" in audit.body and "Niacin is also called" in audit.body
    pieces = {kind: text for kind, _, text in documents(session, {}, {})}
    assert "✓ 1 held" in pieces["claims"] and "~ 4 not checkable" in pieces["claims"]


def test_the_markdown_export_writes_the_marked_testimony_and_the_claims_table(
        paths: Paths) -> None:
    from tests.support.app import fixed_testimony

    session = fixed_testimony(paths.data_dir / "sessions")
    workspace = Workspace(paths)
    report = workspace.sessions.export(str(session.id), "md")
    assert "**The testimony, marked**" in report
    assert "> Niacin is also called pantothenic acid. [✗3]" in report
    assert "## Claims" in report
    assert "- Testimony: 4 claims, 3 examined, in 4 rounds (round 1 the testimony; " in report
    # every count says the same: the testimony's own answer is round 1, here and in Costs
    from engine.models.usage import TokenTally
    from engine.report.export import to_markdown
    for pair in session.qa_pairs:
        pair.usage = TokenTally(prompt=100, completion=20)
    costs = [line for line in to_markdown(session).splitlines() if line.startswith("- Round ")]
    assert len(costs) == len(session.qa_pairs) == 4
    assert costs[0].startswith("- Round 1 (the testimony): ")
    from engine import rounds_cell
    from engine.storage.index import summarize
    assert rounds_cell(summarize("x", session)) == "4"
    assert "| # | state | p(false) | round | alone p(true) | rounds p(true) | claim |" in report
    assert "| 3 | ✗ contradicted | 0.96 | 3 | 0.80 | 0.04 | Niacin is also called pantothenic " \
        "acid. |" in report
    assert "- ~ 4 not checkable · advice, not a fact · You should eat more fish." in report
    exported = workspace.sessions.export(str(session.id), "json")
    again = InterrogationSession.model_validate_json(exported)
    assert again.testimony == session.testimony


def test_a_session_an_earlier_version_began_goes_on_as_it_began() -> None:
    """A hypothesis that asks, stored with rounds and no testimony (begun before testimonies),
    resumes its old questioning; a new one is a testimony from the start."""
    from engine.interrogation.testimony import is_testimony
    from engine.models.session import Hypothesis
    from tests.support.factory import sample_pair

    old = InterrogationSession(hypothesis=Hypothesis(text=REQUEST), iteration_limit=5,
                               qa_pairs=[sample_pair(1)])
    assert not is_testimony(old)
    assert is_testimony(InterrogationSession(hypothesis=Hypothesis(text=REQUEST),
                                             iteration_limit=5))


def test_an_answer_that_the_document_does_not_say_it_is_silent() -> None:
    """No evidence either way (a HaluEval row's "… is not mentioned in the given document"
    was read as contradicting a different fact): silent, so with a document a claim no other
    round bore on is unsupported."""
    from engine.interrogation.judgement import does_not_know

    assert does_not_know("Captain Mike Across America is not mentioned in the given document.")
    assert does_not_know("The document does not say when the film was released.")
    assert not does_not_know("The film was released in 2007, the document says.")


def test_a_killed_testimony_is_read_back_from_its_checkpoints() -> None:
    """What a kill leaves: metadata.json from the start, the log beyond it. Reading it folds
    the testimony's pair, its split and each examined claim back in (a resume then examines
    only the claims still pending); a claim's round after the last checkpoint is cut short."""
    import tempfile

    from engine.models.events import Record
    from engine.models.session import Hypothesis
    from engine.storage.layout import fold
    from tests.support.app import fixed_testimony
    with tempfile.TemporaryDirectory() as root:
        done = fixed_testimony(Path(root))
    stored = InterrogationSession(id=done.id, hypothesis=Hypothesis(text=REQUEST),
                                  iteration_limit=5)
    assert done.testimony is not None
    split = done.testimony.model_copy(deep=True)
    for claim in split.claims:
        if claim.state != "not checkable":
            claim.state, claim.probability_false, claim.deciding = "pending", None, None
    events = [PairCompleted(pair=done.qa_pairs[0]), ClaimsSplit(testimony=split),
              PairCompleted(pair=done.qa_pairs[1]), ClaimExamined(claim=done.testimony.claims[0]),
              PairCompleted(pair=done.qa_pairs[2])]
    records = [Record(n, 0.0, event) for n, event in enumerate(events, start=1)]
    folded = fold(stored, records)
    assert folded.testimony is not None and folded.testimony.split
    assert [c.state for c in folded.testimony.claims] == ["held", "pending", "pending",
                                                          "not checkable"]
    assert [p.sequence for p in folded.qa_pairs] == [1, 2, 3]
    assert folded.events_recorded == 5


def _hostile() -> tuple[Callable[[Chat], str], str, Callable[..., str]]:
    """A hostile testimony, and a detective that checks the split gets it as typed."""
    hostile = ("Paris is the capital of France \x1b]0;pwned\x07[bold]{{TESTIMONY}}[/bold]. "
               "The Seine \u202eflows\u202c through Paris.")
    from engine.report.claims import marked_testimony as marked

    def splitter(messages: Chat) -> str:
        if messages[0]["content"].startswith("You take a text apart"):
            assert messages[-1]["content"] == hostile  # as typed, filled into nothing
            return "Paris is the capital of France.\nThe Seine flows through Paris."
        return detective()(messages)

    return splitter, hostile, marked


async def test_a_hostile_testimony_is_data(paths: Paths) -> None:
    """Escapes, markup, bidi overrides and placeholders in a pasted testimony are text: the
    split gets it as typed, nothing a terminal would obey reaches the marked testimony."""
    splitter, hostile, marked = _hostile()
    session, _, _, _ = await run(paths, hypothesis=hostile, det=splitter)
    assert session.status == "completed" and session.testimony is not None
    assert [c.text for c in session.testimony.claims] == [
        "Paris is the capital of France.", "The Seine flows through Paris."]
    shown = marked(session.qa_pairs[0].answer, session.testimony.claims)
    assert "\x1b" not in shown and "\u202e" not in shown and "{{TESTIMONY}}" in shown


async def test_a_testimony_longer_than_the_window_is_cut_to_fit_and_said(paths: Paths) -> None:
    sentences_ = [f"The mill number {n} stood by the river in the year {1800 + n}."
                  for n in range(1, 200)]
    long = " ".join(sentences_)
    seen: list[str] = []

    def splitter(messages: Chat) -> str:
        if messages[0]["content"].startswith("You take a text apart"):
            seen.append(messages[-1]["content"])
            return "The mill number 1 stood by the river in the year 1801."
        return detective({"The mill number 1 stood by the river in the year 1801.": 0.9})(
            messages)

    session, _, _, _ = await run(paths, hypothesis=long, det=splitter, window=2048)
    assert session.status == "completed"
    assert seen and seen[0].endswith("[… the rest of the text did not fit]")
    assert len(seen[0]) < len(long)
    assert any("did not fit the detective's window" in t.reason for t in session.audit_trail)
    assert session.testimony is not None and session.testimony.claims[0].state == "held"


def test_a_sampled_answer_that_leaves_the_claim_out_reads_half() -> None:
    """Each sampled answer's reading is made a P(true) by rule 1, as a round's: supporting
    and contradicting keep their reading, silent (neither way) is 0.5."""
    from engine.interrogation.verdict import sampled_p_true

    assert sampled_p_true(0.95) == 0.95 and sampled_p_true(0.1) == 0.1
    assert sampled_p_true(0.55) == 0.5 == sampled_p_true(0.45)


async def test_a_demonstration_detective_s_testimony_says_so_and_shows_it_once(
        paths: Paths) -> None:
    """A demonstration model split the testimony (no claim came of it, so no round names
    it): the verdict still says a demonstration model gave it; the transcript has one
    Testimony heading."""
    from engine.report.blocks import Block, Narration

    with ScriptedModel(detective(split="Energy:")) as d, ScriptedModel(witness) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"])
        config.providers["det"] = config.providers["det"].model_copy(
            update={"model": "smollm2-135m"})
        assert config.providers["det"].is_demonstration
        workspace = Workspace(paths, config)
        try:
            started = workspace.sessions.start(TESTIMONY, 5)
            events = [event async for event in started.events()]
            session = workspace.store.load(str(started.session.id))
        finally:
            await workspace.aclose()
    assert session.audit_result is not None and session.audit_result.demonstration
    narration = Narration()
    headings = [piece.title for event in events for piece in narration.pieces(event)
                if isinstance(piece, Block) and piece.kind == "heading"]
    assert headings.count("Testimony") == 1


async def test_an_answer_stating_the_claims_own_detail_supports_it(paths: Paths) -> None:
    """The one-word judgement read a partial answer ("Shoreditch House", asked where) as a
    contradiction; an answer whose added words are all the claim's supports it at 0.8."""
    from engine.interrogation.judgement import STATED_DETAIL, STATED_REASON

    text = "Princess Beatrice spent the evening at Shoreditch House. She left the club at 2am."
    claims = ["Princess Beatrice spent the evening at Shoreditch House.",
              "Princess Beatrice left the club at 2am."]

    def det(messages: Chat) -> str:
        if is_judgement(messages):
            if "The witness was asked" not in messages[-1]["content"]:
                return Judged(0.8)
            return Judged(0.3)  # the judgement leans against either answer
        if messages[0]["content"].startswith("You take a text apart"):
            return "\n".join(claims)
        return detective()(messages)

    def wit(messages: Chat) -> str:
        return "Shoreditch House"

    session, _, _, _ = await run(paths, hypothesis=text, det=det, wit=wit)
    testimony = session.testimony
    assert testimony is not None
    first, second = testimony.claims
    assert first.state == "held"
    stated = [p for p in session.qa_pairs if p.claim == 1][0].judgement
    assert stated is not None and stated.p_true == STATED_DETAIL and stated.why == STATED_REASON
    # the same answer adds words the second claim does not have: read as judged
    other = [p for p in session.qa_pairs if p.claim == 2][0].judgement
    assert other is not None and other.p_true == 0.3 and second.state != "held"


@pytest.mark.parametrize(("answer", "claim_answer", "expected"), [(1024, 40, 40), (24, 40, 24)])
async def test_a_claim_s_answer_has_a_cap_of_its_own(paths: Paths, answer: int,
                                                     claim_answer: int, expected: int) -> None:
    """The testimony is answered within `testimony_max_tokens`, each claim's question within
    `claim_answer_max_tokens`, never above `answer_max_tokens`."""
    session, _, _, wit = await run(paths, answer_max_tokens=answer,
                                   claim_answer_max_tokens=claim_answer)
    assert session.status == "completed"
    caps = [body.get("max_tokens", body.get("max_completion_tokens")) for body in wit.bodies]
    # the testimony and its samples, then each claim's answers
    from engine.config.models import InterrogationConfig

    drawn = 1 + InterrogationConfig().testimony_samples  # the default, as `run` uses
    assert caps[:drawn] == [512] * drawn and len(caps) > drawn
    assert set(caps[drawn:]) == {expected}


async def test_claims_run_one_at_a_time_where_they_share_this_machine_s_cores(
        paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded model's four slots share this machine's cores, and so do a server's on
    this machine when it has no GPU: a testimony's claims take them one at a time (an
    evaluation still counts its slots); a server with a GPU here, or replicas of their own,
    are counted by their slots."""
    from engine.config.models import Config
    from engine.interrogation.testimony import DEFAULT_CLAIM_CONCURRENCY, MOST_CLAIM_CONCURRENCY
    from engine.routing import slots
    from engine.routing.router import Router
    from tests.support.servers import closed_port

    def router(providers: dict[str, Any]) -> Router:
        return Router(Config.model_validate({
            "providers": providers,
            "roles": {"detective": list(providers), "witness": list(providers)}}),
            paths, persist=False)

    local = router({"local": {"kind": "local", "n_parallel": 4}})
    served = router({"det": {"kind": "openai", "model": "m", "replicas": [
        {"base_url": f"http://127.0.0.1:{closed_port()}/v1", "slots": 3}]}})
    # a server here that says nothing of its slots: the default, unless it shares the cores
    here = router({"box": {"kind": "openai", "model": "m",
                           "base_url": f"http://127.0.0.1:{closed_port()}/v1"}})

    async def widths() -> list[int]:
        return [await slots.role_slots(r, MOST_CLAIM_CONCURRENCY, DEFAULT_CLAIM_CONCURRENCY,
                                       cores=cores)
                for r in (local, served, here) for cores in (True, False)]
    try:
        monkeypatch.setattr(slots, "_accelerated", lambda: False)
        assert await widths() == [1, 4, 3, 3, 1, DEFAULT_CLAIM_CONCURRENCY]
        # a server here measured reading prompts at a GPU's rate: a tunnel to one elsewhere
        from engine.providers._deadline import Speed
        here.providers["box"].speed = Speed(prompt=slots.GPU_PROMPT_RATE * 2, reply=90.0)
        assert await widths() == [1, 4, 3, 3, DEFAULT_CLAIM_CONCURRENCY,
                                  DEFAULT_CLAIM_CONCURRENCY]
        here.providers["box"].speed = Speed(prompt=67.0, reply=27.0)  # this machine's CPU
        assert (await widths())[4] == 1
        monkeypatch.setattr(slots, "_accelerated", lambda: True)  # a GPU the server uses
        assert await widths() == [1, 4, 3, 3, DEFAULT_CLAIM_CONCURRENCY,
                                  DEFAULT_CLAIM_CONCURRENCY]
    finally:
        for each in (local, served, here):
            await each.aclose()


async def test_claims_examined_one_at_a_time_or_side_by_side_end_the_same(
        paths: Paths) -> None:
    """The scheduling changes when a claim is read, never how: one at a time and four at a
    time, the same states, P(false) and verdict."""
    ended = []
    for width in (1, 4):
        session, _, _, _ = await run(paths, det=sample_reader, wit=sampling_witness(),
                                     testimony_samples=1, claim_concurrency=width)
        assert session.testimony is not None and session.audit_result is not None
        ended.append(([(c.text, c.state, c.probability_false)
                       for c in session.testimony.claims], session.audit_result.verdict))
    assert ended[0] == ended[1]


async def test_a_claim_s_questioning_closes_when_the_witness_only_says_again_what_it_said(
        paths: Paths) -> None:
    """A witness that answers each new question of a claim with what it said before (the
    1.5B: "… is vitamin B12", five rounds running) gives no more evidence: the claim closes
    after its second such round, unsure, and says why — not at the round limit."""
    session, _, _, _ = await run(paths, det=asking_anew(detective({text: 0.5 for text in TRUTH})),
                                 claim_tokens=100_000)
    testimony = session.testimony
    assert testimony is not None and session.status == "completed"
    examined = [c for c in testimony.claims if c.state != "not checkable"]
    assert examined and all(c.state == "unsure" for c in examined)
    for claim in examined:
        rounds = [p for p in session.qa_pairs if p.claim == claim.number]
        assert len(rounds) == 2, (claim.text, len(rounds))
        assert claim.why is not None and "said again what it had said" in claim.why


def test_a_claim_led_by_a_pronoun_is_named_by_the_sentence_before_it() -> None:
    from engine.interrogation.testimony import leans, named_by_rule

    before = "The Panama Canal was built between 1904 and 1914."
    assert named_by_rule("It connects two oceans.", before) == \
        "The Panama Canal connects two oceans."
    assert named_by_rule("Its locks raise ships.", before) == \
        "The Panama Canal's locks raise ships."
    assert named_by_rule("She was born in 1867.", "Marie Curie was a physicist.") == \
        "Marie Curie was born in 1867."
    assert named_by_rule("This is important.", before) is None  # no noun to name
    assert named_by_rule("It is long.", "It was built in 1914.") is None  # a pronoun again
    assert leans("It connects two oceans.") and leans("Niacin corrects this deficiency.")
    assert not leans("The Panama Canal connects two oceans.")
