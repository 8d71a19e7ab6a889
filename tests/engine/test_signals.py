"""A claim held only when the evidence holds it (issue 72): the examination as a list of
signals pooled by a fitted model, the sampled rounds, the rules that keep a claim from being
held against the evidence, and the bad input of each — as plain code where they are rules,
on scripted models over the real OpenAI wire where they are runs."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine import Paths, Workspace
from engine.interrogation.checks import denial, narrative_stances
from engine.interrogation.pooling import (
    L2,
    READINGS_VERSION,
    Model,
    _newton,
    cross_validated,
    feature,
    fit_model,
    load_pooling,
    parse_pooling,
    shipped_pooling,
)
from engine.interrogation.rounds import disagree, round_p_true
from engine.interrogation.signals import SIGNALS, chosen
from engine.interrogation.subject import aliases, subject, subject_keys, subject_problem
from engine.models.events import AnswerDrawn, PairCompleted
from engine.models.testimony import SignalReading
from tests.support.interrogation import EQUAL_POOLING, make_config
from tests.support.scripted import Judged, ScriptedModel, is_judgement

Chat = list[dict[str, Any]]

# ---- the rules, as plain code ------------------------------------------------------------


def test_a_denial_anywhere_in_an_answer_is_never_support() -> None:
    claim = "Niacin can help reduce symptoms of Pernicious Anemia"
    mixed = ("Niacin is a B vitamin. However, niacin does not directly affect the symptoms "
             "of Pernicious Anemia. However, niacin can help alleviate some of the symptoms "
             "of pernicious anemia such as fatigue.")
    assert denial(mixed, claim) == "mixed"
    assert denial("Niacin does not reduce the symptoms of pernicious anemia.",
                  claim) == "denies"
    assert denial("Niacin can't reduce symptoms of pernicious anemia.", claim) == "denies"
    assert denial("Niacin helps reduce symptoms of pernicious anemia.", claim) is None
    # a negation about something else, or "not only", is no denial of the claim
    assert denial("Paris is not the largest city in Europe, but it is the capital of France.",
                  "Paris is the capital of France") is None
    assert denial("Niacin not only reduces symptoms of pernicious anemia but more.",
                  claim) is None
    # a negated claim is read by the shapes' rule, not this one
    assert denial("Gold does not rust.", "Gold does not rust") is None


def test_a_questions_subject_is_the_claims_or_one_of_its_names() -> None:
    testimony = "Vitamin B3, also known as niacin, is a water-soluble vitamin."
    pairs = aliases(testimony)
    assert pairs == [("Vitamin B3", "niacin")]
    assert aliases("Niacin (vitamin B3) helps the skin.") == [("Niacin", "vitamin B3")]
    claim = "Niacin is good for you."
    assert subject(claim) == "Niacin" and subject_keys("Niacin") == {"niacin"}
    refused = subject_problem("What is the name of the vitamin that is good for you?", claim,
                              pairs)
    assert refused is not None and "'Niacin' or 'Vitamin B3'" in refused
    assert subject_problem("How many vitamin C pills do you take per day?", claim,
                           pairs) is not None
    assert subject_problem("What does vitamin B3 do for the body?", claim, pairs) is None
    assert subject_problem("What does niacin do for the body?", claim, pairs) is None
    # the least common word of the subject's head, and its codes
    assert subject_keys("The Great Wall of China") == {"wall"}
    assert subject_keys("The Sahara Desert") == {"sahara"}
    assert subject_keys("Vitamin D") == {"vitamin", "d"}
    assert subject_problem("What does vitamin C do?", "Vitamin D supports immune function",
                           ()) is not None
    # a scene set before the subject is no part of it; a pronoun subject is not held to it
    assert subject("At sea level, pure water boils at 90 degrees Celsius.") == "pure water"
    assert subject_problem("What is it?", "It connects the seas.", ()) is None
    # a subject that is the claim's answer is not held to it (naming it would lead)
    assert subject_problem("Which planet is the largest?", "Saturn is the largest planet.",
                           (), answer="Saturn") is None


def test_a_question_leaves_the_claims_fact_for_the_witness_to_say() -> None:
    """A question that names the subject and carries every word of what the claim says of
    it only asks the witness to agree: sampled, it agreed again (the development claims)."""
    from engine.interrogation.subject import fact_problem, fact_words

    claim = "Niacin helps convert carbohydrates into glucose."
    assert fact_words(claim) == ["convert", "carbohydrates", "glucose"]
    stated = fact_problem("What is the role of niacin in the conversion of carbohydrates "
                          "into glucose?", claim)
    assert stated is not None and "leave out what the witness should say" in stated
    assert fact_problem("What does niacin help convert carbohydrates into?", claim) is None
    assert fact_problem("Was the Eiffel Tower completed in 1889?",
                        "The Eiffel Tower was completed in 1889.") is not None
    assert fact_problem("When was the Eiffel Tower completed?",
                        "The Eiffel Tower was completed in 1889.") is None
    # asking for the subject leaves it to the witness; comparisons are asked by rule
    assert fact_problem("What is the fourth planet from the Sun?",
                        "Mars is the fourth planet from the Sun.") is None
    assert fact_problem("Which is denser, aluminium or lead?",
                        "Lead is denser than aluminium.") is None


def test_a_round_of_answers_that_disagree_is_silent() -> None:
    assert round_p_true([0.95, 0.9, 0.92]) == pytest.approx(0.923, abs=1e-3)
    assert round_p_true([0.05, 0.1, None]) == pytest.approx((0.05 + 0.1 + 0.5) / 3)
    assert disagree([0.95, 0.05, 0.9]) and round_p_true([0.95, 0.05, 0.9]) == 0.5
    assert round_p_true([None, None]) is None
    assert not disagree([0.55, 0.45])


def test_the_narrative_stances_are_read_sentence_by_sentence() -> None:
    said = ("The witness established that the wall is long. The hypothesis is therefore "
            "false. It is not only long but old.")
    assert narrative_stances(said) == [
        ("true", "The witness established that the wall is long."),
        ("false", "The hypothesis is therefore false.")]
    assert narrative_stances("The hypothesis is true, or it is false.") == []


# ---- the pool ------------------------------------------------------------------------------

EQUAL = parse_pooling(json.loads(EQUAL_POOLING.read_text()), "equal")


def test_the_pool_is_a_logistic_model_of_the_readings_log_odds() -> None:
    model = Model(("alone", "rounds"), -0.5, {"alone": 0.3, "rounds": 1.2})
    readings = {"alone": 0.9, "rounds": 0.2}
    z = -0.5 + 0.3 * math.log(0.9 / 0.1) + 1.2 * math.log(0.2 / 0.8)
    assert model.p_true(readings) == pytest.approx(1 / (1 + math.exp(-z)))
    assert feature(None) == 0.0 and feature(1.0) == pytest.approx(math.log(0.99 / 0.01))
    # the equal pool: the mean of the readings' log-odds when every signal read
    pooled = EQUAL.pooled({"alone": SignalReading(p_true=0.9),
                           "samples": SignalReading(p_true=0.8),
                           "rounds": SignalReading(p_true=0.3)}, "open")
    mean = (math.log(9) + math.log(4) + math.log(0.3 / 0.7)) / 3
    assert pooled.p_false == pytest.approx(1 - 1 / (1 + math.exp(-mean)), abs=1e-4)
    assert pooled.strongest("true") == "alone"
    # a claim read by fewer signals is pooled by the model of those
    only = EQUAL.pooled({"rounds": SignalReading(p_true=0.3)}, "open", ["rounds"])
    assert only.p_false == pytest.approx(0.7, abs=1e-4)


def test_the_fit_is_the_regularised_logistic_regression(tmp_path: Path) -> None:
    """Newton's method on the L2-penalised log-likelihood (intercept free) gives what
    scikit-learn's solver gives for the same penalty."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(7)
    rows = []
    for _ in range(200):
        label = bool(rng.random() < 0.7)
        alone = float(np.clip(rng.normal(0.75 if label else 0.6, 0.15), 0.02, 0.98))
        rounds = float(np.clip(rng.normal(0.8 if label else 0.35, 0.2), 0.02, 0.98))
        rows.append(({"alone": alone, "rounds": rounds if rng.random() > 0.1 else None},
                     label))
    model = fit_model(rows, ("alone", "rounds"), l2=1.0)
    x = np.array([[feature(r.get("alone")), feature(r.get("rounds"))] for r, _ in rows])
    y = np.array([1 if label else 0 for _, label in rows])
    reference = LogisticRegression(C=1.0, solver="lbfgs", tol=1e-10, max_iter=10_000).fit(x, y)
    assert model.intercept == pytest.approx(float(reference.intercept_[0]), abs=1e-3)
    assert [model.weights["alone"], model.weights["rounds"]] == pytest.approx(
        [float(w) for w in reference.coef_[0]], abs=1e-3)
    assert model.weights["rounds"] > model.weights["alone"] > 0  # rounds tell them apart
    predicted = cross_validated(rows, ("alone", "rounds"))
    assert len(predicted) == 200 and all(0 <= p <= 1 for p in predicted)


def test_a_fitted_weight_is_never_negative() -> None:
    """A reading that moves with a stronger one (here `alone`, which follows `samples`)
    can be fitted below zero: it is left out at weight 0 and the others fitted again, so no
    reading ever counts against what it reads."""
    rng = np.random.default_rng(3)
    rows = []
    for _ in range(60):
        label = bool(rng.random() < 0.75)
        samples = float(np.clip(rng.normal(0.8 if label else 0.3, 0.15), 0.02, 0.98))
        rounds = float(np.clip(samples + rng.normal(0, 0.03), 0.02, 0.98))
        # `alone` follows `samples`, less so on true claims: given `samples`, it leans
        # against the label (a negative weight unconstrained), though for it on its own
        alone = float(np.clip(samples - (0.25 if label else 0.0) + rng.normal(0, 0.05),
                              0.02, 0.98))
        rows.append(({"alone": alone, "samples": samples, "rounds": rounds}, label))
    free = _newton(rows, ["alone", "samples", "rounds"], L2, 50)
    assert min(free[1:]) < 0, "the unconstrained fit has a negative weight to leave out"
    model = fit_model(rows, ("alone", "samples", "rounds"))
    assert set(model.weights) == {"alone", "samples", "rounds"}
    assert all(w >= 0 for w in model.weights.values()), model.weights
    assert model.weights["samples"] > 0
    refit = fit_model(rows, [s for s, w in model.weights.items() if w > 0])
    assert refit.intercept == pytest.approx(model.intercept)


def test_a_pooling_file_that_cannot_be_used_is_named_and_the_shipped_one_used(
        tmp_path: Path) -> None:
    path = tmp_path / "pooling.json"
    for content, why in (("{ not json", "Expecting property name"),
                         (json.dumps({"format": 1, "readings_version": READINGS_VERSION - 1,
                                      "modes": {}}), "readings of version 1"),
                         (json.dumps({"format": 7}), "not a detektiv pooling file"),
                         (json.dumps({"format": 1, "readings_version": READINGS_VERSION,
                                      "modes": {"open": {"model": {
                                          "signals": ["telepathy"], "intercept": 0,
                                          "weights": {"telepathy": 1}}}}}),
                          "names signals other than"),
                         (json.dumps({"format": 1, "readings_version": READINGS_VERSION,
                                      "modes": {"open": {"model": {
                                          "signals": ["alone"], "intercept": "x",
                                          "weights": {"alone": 1}}}}}),
                          "not a number")):
        path.write_text(content)
        pool, refused = load_pooling(path)
        assert pool is shipped_pooling() and refused is not None, content
        assert why in refused.message and str(path) in refused.message, refused.message
        assert "the shipped one is" in refused.message
    missing, refused = load_pooling(tmp_path / "absent.json")
    assert missing is shipped_pooling() and refused is not None
    assert "absent.json" in refused.message


def test_the_shipped_pool_knows_every_signal_and_says_where_it_was_fitted() -> None:
    pool = shipped_pooling()
    assert set(pool.models) == {"open", "document"}
    for fitted in pool.models.values():
        assert fitted.figures.get("fitted_on")
        assert set(fitted.full.signals) <= set(SIGNALS)
    assert [s.name for s in chosen(["rounds", "alone"])] == ["alone", "rounds"]


# ---- runs on scripted models ---------------------------------------------------------------

CLAIM = "The mill stands by the river Avon."


def judging(answers: Callable[[str], float]) -> Callable[[Chat], str]:
    """A detective that asks about the mill, reads the claim alone at 0.6 and each answer by
    `answers(its text)`."""
    def reply(messages: Chat) -> str:
        if is_judgement(messages):
            said = messages[-1]["content"]
            if "The witness was asked" not in said:
                return Judged(0.6)
            answer = said.split("The witness answered:", 1)[1].split("\n\n")[0]
            return Judged(answers(answer.strip()))
        system = messages[0]["content"]
        if system.startswith("You are a detective analysing"):
            return json.dumps({"gaps": [], "completeness_score": 95,
                               "requires_follow_up": False})
        if system.startswith("You are a detective auditing"):
            return json.dumps({"contradictions": [], "verdict": "undetermined",
                               "summary": "The witness was asked where the mill stands."})
        number = re.search(r"Write question (\d+)", messages[-1]["content"])
        return "Where does the mill stand?" if number is None or number.group(1) == "1" \
            else f"On which river does the mill stand, {number.group(1)}?"
    return reply


async def run_claim(paths: Paths, witness: Callable[[Chat], str],
                    answers: Callable[[str], float], stop_after_draws: int | None = None,
                    **settings: Any) -> tuple[Any, ScriptedModel, ScriptedModel]:
    with ScriptedModel(judging(answers)) as d, ScriptedModel(witness) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"],
                             **{"rounds_samples": 3, "rounds_temperature": 1.0, **settings})
        workspace = Workspace(paths, config)
        try:
            run = workspace.sessions.start(CLAIM, 5)
            drawn = 0
            async with aclosing(run.events()) as events:
                async for event in events:
                    drawn += isinstance(event, AnswerDrawn)
                    if stop_after_draws is not None and drawn == stop_after_draws:
                        break
            session = workspace.store.load(str(run.session.id))
        finally:
            await workspace.aclose()
    return session, d, w


def varying() -> Callable[[Chat], str]:
    told: list[int] = []

    def reply(messages: Chat) -> str:
        told.append(1)
        return f"It stands by the river number {len(told)}."
    return reply


async def test_a_question_is_answered_k_times_in_fresh_conversations_with_seeds(
        paths: Paths) -> None:
    session, _, w = await run_claim(paths, lambda _: "It stands by the river Avon.",
                                    lambda answer: 0.95)
    assert session.status == "completed"
    first = session.qa_pairs[0]
    assert len(first.samples) == 2 and first.judgement is not None
    assert first.judgement.samples == [0.95, 0.95, 0.95]
    asked = [b for b in w.bodies if b["messages"][-1]["content"] == "Where does the mill stand?"]
    assert len(asked) == 3 and all(b["temperature"] == 1.0 for b in asked)
    assert all([m["role"] for m in b["messages"]] == ["system", "user"] for b in asked)
    assert len({b["seed"] for b in asked}) == 3
    claim = session.claim
    assert claim is not None and claim.state == "held"
    assert set(claim.readings) == {"alone", "rounds"}
    assert session.audit_result is not None and session.audit_result.verdict == "true"


async def test_a_witness_that_answers_every_sample_differently_is_not_held(
        paths: Paths) -> None:
    # the answers vary; the detective reads the odd ones as support, the even ones against
    session, _, _ = await run_claim(
        paths, varying(),
        lambda answer: 0.95 if int(answer.rstrip(".").split()[-1]) % 2 else 0.05)
    rounds = [p for p in session.qa_pairs]
    assert rounds and all(p.judgement is not None and p.judgement.bearing == "silent"
                          and "disagree" in (p.judgement.why or "") for p in rounds)
    claim = session.claim
    assert claim is not None and claim.state == "unsure"
    assert session.audit_result is not None and session.audit_result.verdict == "undetermined"


@pytest.mark.parametrize("said", ["I'm sorry, but I can't discuss that topic.", "",
                                  "As a witness, I am unable to answer this question."])
async def test_a_witness_that_refuses_or_says_nothing_is_never_contradicted(
        paths: Paths, said: str) -> None:
    """Every sample refused, empty, or declined in other words: no evidence either way, never
    a contradiction, however a small judge would read it (here: false)."""
    session, d, _ = await run_claim(paths, lambda _: said, lambda answer: 0.02)
    assert all(p.judgement is not None and p.judgement.bearing == "silent"
               for p in session.qa_pairs)
    claim = session.claim
    assert claim is not None and claim.state == "unsure"
    assert session.audit_result is not None and session.audit_result.verdict == "undetermined"
    read = [b for b in d.bodies if is_judgement(b["messages"])
            and "The witness was asked" in b["messages"][-1]["content"]]
    assert read == []  # none of them was judged


async def test_more_samples_than_the_server_has_slots_queue_and_finish(paths: Paths) -> None:
    with ScriptedModel(judging(lambda _: 0.95)) as d, \
            ScriptedModel(lambda _: "It stands by the river Avon.") as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"],
                             rounds_samples=6, rounds_temperature=1.0)
        config.providers["wit"].replicas = []  # one endpoint
        config.providers["wit"].slots = 1
        workspace = Workspace(paths, config)
        try:
            run = workspace.sessions.start(CLAIM, 5)
            [event async for event in run.events()]
            session = workspace.store.load(str(run.session.id))
        finally:
            await workspace.aclose()
    assert session.status == "completed"
    judgement = session.qa_pairs[0].judgement
    assert judgement is not None and len(judgement.samples) == 6


async def test_a_run_killed_mid_round_resumes_with_the_answers_it_had_drawn(
        paths: Paths) -> None:
    session, _, w = await run_claim(paths, lambda _: "It stands by the river Avon.",
                                    lambda answer: 0.95, stop_after_draws=2)
    assert session.status == "cancelled" and session.qa_pairs == []
    drawing = session.drawing.get("0")
    assert drawing is not None and drawing.question == "Where does the mill stand?"
    assert len(drawing.answers) == 2
    with ScriptedModel(judging(lambda answer: 0.95)) as d, \
            ScriptedModel(lambda _: "It stands by the river Avon.") as w2:
        config = make_config({"det": d.url + "/v1", "wit": w2.url + "/v1"}, ["det"],
                             ["wit"], rounds_samples=3, rounds_temperature=1.0)
        workspace = Workspace(paths, config)
        try:
            resumed = workspace.sessions.resume(str(session.id))
            events = [event async for event in resumed.events()]
            after = workspace.store.load(str(session.id))
        finally:
            await workspace.aclose()
    # the question was not written again and only the third answer was drawn
    assert not any(b["messages"][-1]["content"].startswith("The interrogation so far")
                   or "Write question" in b["messages"][-1]["content"] for b in d.bodies)
    assert len([b for b in w2.bodies
                if b["messages"][-1]["content"] == "Where does the mill stand?"]) == 1
    pair = after.qa_pairs[0]
    assert len(pair.samples) == 2 and after.drawing == {}
    assert any(isinstance(e, PairCompleted) for e in events)
    assert after.status == "completed"


async def test_a_single_claim_stored_before_the_signals_resumes_from_its_rounds(
        paths: Paths) -> None:
    """A session of one claim stored before issue 72 (its rounds judged, no examined claim)
    loads, shows and resumes: its rounds are the rounds signal's first rounds, the detective's
    own reading is added, and the verdict is computed from both."""
    from engine.models.judgement import Judgement
    from engine.models.session import Hypothesis, InterrogationSession
    from engine.report.blocks import session_blocks
    from engine.storage.sessions import SessionStore
    from tests.support.factory import sample_pair

    store = SessionStore(paths.data_dir / "sessions")
    journal = store.create(CLAIM, 5)
    old = sample_pair(1, question="Where does the mill stand?",
                      answer="It stands by the river Avon.")
    old.judgement = Judgement(bearing="silent", p_true=0.5, source="logprobs")
    journal.session.qa_pairs.append(old)
    journal.session.status = "cancelled"
    journal.save()
    journal.close()
    loaded = store.load(str(journal.session.id))
    assert loaded.claim is None and len(loaded.qa_pairs) == 1
    assert session_blocks(loaded)  # it shows
    with ScriptedModel(judging(lambda answer: 0.95)) as d, \
            ScriptedModel(lambda _: "It stands by the river Avon.") as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"])
        workspace = Workspace(paths, config)
        try:
            resumed = workspace.sessions.resume(str(loaded.id))
            [event async for event in resumed.events()]
            after = workspace.store.load(str(loaded.id))
        finally:
            await workspace.aclose()
    assert after.status == "completed" and len(after.qa_pairs) == 2
    assert after.qa_pairs[0].question == "Where does the mill stand?"  # kept, not asked again
    assert after.claim is not None and set(after.claim.readings) == {"alone", "rounds"}
    assert after.audit_result is not None and after.audit_result.verdict == "true"
    assert InterrogationSession.model_validate_json(after.model_dump_json()) == after
    assert Hypothesis(text=CLAIM).text == after.hypothesis_text


async def test_a_question_begun_before_testimonies_goes_on_as_it_began(paths: Paths) -> None:
    """A hypothesis that asks, stored with rounds and no testimony: its rounds go on through
    the same round as every claim's, questioned for their gaps (the witness shown the earlier
    rounds, as it was), never judged, and it ends undetermined: it states no claim."""
    from engine.storage.sessions import SessionStore
    from tests.support.factory import sample_pair

    store = SessionStore(paths.data_dir / "sessions")
    journal = store.create("Where does the mill stand?", 5)
    journal.session.qa_pairs.append(sample_pair(1, question="Which river is it on?",
                                                answer="It stands by the river Avon."))
    journal.session.status = "cancelled"
    journal.save()
    journal.close()
    with ScriptedModel(judging(lambda answer: 0.95)) as d, \
            ScriptedModel(lambda _: "By the Avon, near the bridge.") as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"])
        workspace = Workspace(paths, config)
        try:
            resumed = workspace.sessions.resume(str(journal.session.id))
            [event async for event in resumed.events()]
            after = workspace.store.load(str(journal.session.id))
        finally:
            await workspace.aclose()
    assert after.status == "completed" and len(after.qa_pairs) == 2
    assert all(p.judgement is None for p in after.qa_pairs)
    assert after.audit_result is not None and after.audit_result.verdict == "undetermined"
    assert not [b for b in d.bodies if is_judgement(b["messages"])]
    witnessed = [b["messages"] for b in w.bodies]
    assert witnessed and [m["role"] for m in witnessed[0]][:3] == ["system", "user", "assistant"]


def test_testimonies_labelled_as_wholes_fit_the_pool_through_their_most_doubtful_claim() -> None:
    """A summary's label is the summary's, not its claims': the fit makes the summaries'
    P(false) — each its most doubtful claim's — most likely."""
    from engine.evals.fitting import _testimony_p_false, fit_testimonies

    rng = np.random.default_rng(3)
    rows = []
    for n in range(60):
        false = n % 2 == 1
        claims = [{"words": float(rng.uniform(0.6, 0.8)), "rounds": float(rng.uniform(0.6, 0.99))}
                  for _ in range(4)]
        if false:  # one claim the document does not hold: few of its words there
            claims[int(rng.integers(0, 4))]["words"] = float(rng.uniform(0.1, 0.3))
        rows.append((claims, not false))
    model = fit_testimonies(rows, ("words", "rounds"))
    assert model.weights["words"] > 0
    p = _testimony_p_false(np.array([model.intercept, model.weights["words"],
                                     model.weights["rounds"]]), rows, ("words", "rounds"))
    y = np.array([0 if label else 1 for _, label in rows])
    from engine.evals.metrics import auroc
    assert auroc(y, p) > 0.9
