"""Honest endings (issue 20): the loop decides, nonsense is named, the audit gives a verdict.

Whole interrogations through the fault proxy in front of the real llama.cpp server: the
detective's and the witness's words are scripted where the test is about them (the tiny model's
words are never relied on), everything else is the real wire, router, journal and store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import Paths
from engine.interrogation.loop import Interrogation
from engine.models.events import Advice, AnswerUnusable, Finished
from engine.report.export import to_json, to_markdown
from engine.routing.router import Router
from engine.storage.sessions import SessionStore
from tests.support.faults import FaultProxy
from tests.support.interrogation import interrogate as run_interrogation, make_config
from tui.cli.printer import TranscriptPrinter


def gap(score: int, follow_up: bool, severity: str = "low") -> tuple[str, str]:
    return json.dumps({"gaps": [{"category": "vagueness", "description": "the year is vague",
                                 "severity": severity}],
                       "completeness_score": score, "requires_follow_up": follow_up}), "stop"


def audit(verdict: str = "false", p: float = 0.8, deciding: list[int] | None = None,
          summary: str = "The witness placed the boiling point below 100 degrees.",
          stance: str | None = None) -> tuple[str, str]:
    rounds = [1] if deciding is None else deciding
    stance = stance or {"true": "agrees", "false": "contradicts"}.get(verdict, "unrelated")
    comparisons = [{"round": n, "stance": stance} for n in rounds or [1]]
    return json.dumps({"comparisons": comparisons, "contradictions": [], "summary": summary,
                       "verdict": verdict,
                       "probability_false": p,
                       "deciding_rounds": [1] if deciding is None else deciding}), "stop"


SCRIPTS = {
    "q1": ("At what temperature does water boil on Everest?", "stop"),
    "q2": ("Which pressure did you assume there?", "stop"),
    "q3": ("How was that measured?", "stop"),
    "q4": ("Who else measured it?", "stop"),
    "q5": ("When was that?", "stop"),
    "a1": ("About 70 degrees Celsius.", "stop"),
    "a2": ("Roughly a third of an atmosphere.", "stop"),
    "a3": ("With a thermometer in an open pot.", "stop"),
    "a4": ("A team of climbers.", "stop"),
    "a5": ("In 1953.", "stop"),
    "empty": ("", "stop"),
}


async def interrogate(proxy: FaultProxy, paths: Paths, store: SessionStore, limit: int = 5,
                      hypothesis: str = "Water boils at 100 degrees Celsius everywhere.",
                      **settings: Any) -> tuple[list[Any], str]:
    config = make_config({"via": proxy.url}, ["via"], ["via"], **settings)
    events, directory = await run_interrogation(config, paths, store, hypothesis, limit)
    return list(events), directory.name


async def test_no_follow_up_at_zero_is_advice_the_loop_overrules_for_min_rounds(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    proxy.scripts |= SCRIPTS | {"g0": gap(0, False), "g90": gap(90, False),
                                "audit": audit(deciding=[1, 3])}
    proxy.plan = ["script:q1", "script:a1", "script:g0",
                  "script:q2", "script:a2", "script:g90",
                  "script:q3", "script:a3", "script:g90", "script:audit"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store)
    final = events[-1]
    assert isinstance(final, Finished) and final.status == "completed", final
    assert final.reason == ("the detective was satisfied after 3 rounds (completeness "
                            "90/100, no high-severity gap)")
    session = store.load(directory)
    assert len(session.qa_pairs) == 3  # min_rounds, though round 1 said "no follow-up"
    conflicts = [t for t in session.audit_trail if t.event == "contradictory_analysis"]
    assert len(conflicts) == 1 and "answer 1 contradicts itself" in conflicts[0].reason
    assert "0/100" in conflicts[0].reason
    assert session.audit_result is not None
    assert (session.audit_result.verdict, session.audit_result.probability_false,
            session.audit_result.deciding_rounds) == ("false", 0.8, [1, 3])


async def test_below_satisfied_at_or_with_a_high_gap_it_asks_up_to_the_limit(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    proxy.scripts |= SCRIPTS | {"g70": gap(70, False), "high": gap(95, False, "high"),
                                "audit": audit("undetermined", 0.5, [])}
    proxy.plan = ["script:q1", "script:a1", "script:g70", "script:q2", "script:a2",
                  "script:high", "script:q3", "script:a3", "script:g70", "script:q4",
                  "script:a4", "script:high", "script:q5", "script:a5", "script:g70",
                  "script:audit"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, limit=5, min_rounds=1)
    final = events[-1]
    assert isinstance(final, Finished) and final.status == "limit-reached", final
    assert final.reason == "the limit of 5 rounds was reached"
    session = store.load(directory)
    assert len(session.qa_pairs) == 5
    conflicts = [t for t in session.audit_trail if t.event == "contradictory_analysis"]
    assert len(conflicts) == 2  # no follow-up with a high gap, twice: recorded, overruled
    assert session.audit_result is not None and session.audit_result.verdict == "undetermined"


async def test_an_unusable_question_is_asked_again_without_words_in_the_models_mouth(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    hypothesis = "Water boils at 100 degrees Celsius everywhere."
    proxy.scripts |= SCRIPTS | {"echo": (hypothesis, "stop"), "marker": ("(empty)", "stop"),
                                "g90": gap(90, False), "audit": audit()}
    proxy.plan = ["script:empty", "script:echo", "script:q1", "script:a1", "script:g90",
                  "script:audit"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, min_rounds=1,
                                          hypothesis=hypothesis)
    assert isinstance(events[-1], Finished) and events[-1].status == "completed", events[-1]
    session = store.load(directory)
    assert session.qa_pairs[0].question == SCRIPTS["q1"][0]
    degenerate = [t.reason for t in session.audit_trail if t.event == "degenerate_output"]
    assert degenerate == ["the question is empty", "it only repeats the hypothesis"]
    first, second, third = (json.loads(proxy.requests[i]) for i in range(3))
    for retry, problem in ((second, "the question is empty"),
                           (third, "it only repeats the hypothesis")):
        roles = [m["role"] for m in retry["messages"]]
        assert roles == ["system", "user"], roles  # no planted assistant turn
        assert retry["messages"][-1]["content"].endswith(
            f"could not be used as question 1: {problem}. Write question\n1 now: one open, "
            "neutral question to the witness about the subject of the\nhypothesis, that does "
            "not state the hypothesis or its answer, ending with a question mark,\nand nothing "
            "else.")
    assert first["temperature"] == second["temperature"] == 0 and third["temperature"] == 0.8
    # the model's nonsense did not count against the server
    config = make_config({"via": proxy.url}, ["via"], ["via"])
    router = Router(config, paths, persist=False)
    assert router.states["via"].consecutive_failures == 0
    await router.aclose()


async def test_three_unusable_questions_end_undetermined_with_the_cause_named(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    """A model lost to our rules is never `failed`: the session ends `completed`, its verdict
    `undetermined`, the rule it broke as the reason (failed is for providers, budget)."""
    proxy.scripts |= SCRIPTS | {"marker": ("(empty)", "stop"), "prose": ("Markdown:", "stop")}
    proxy.plan = ["script:empty", "script:marker", "script:prose"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store)
    final = events[-1]
    cause = ("the detective model via:gemma gave no usable question 3 times (last: it is not "
             "a question); give the detective a capable model: ")
    assert isinstance(final, Finished) and final.status == "completed"
    assert final.reason is not None
    assert final.reason.startswith(f"nothing to audit, the verdict is undetermined: {cause}")
    assert "demonstration" not in final.reason  # not the embedded model
    session = store.load(directory)
    assert session.status == "completed" and session.error is None
    audit = session.audit_result
    assert session.qa_pairs == [] and audit is not None and audit.verdict == "undetermined"
    assert audit.rule_broken is not None and audit.rule_broken.startswith(cause)
    assert len(proxy.requests) == 3  # no audit was asked for


async def test_an_empty_answer_is_testimony_shown_once_and_pressed_on(
    proxy: FaultProxy, paths: Paths, tmp_path: Path, capsys: Any
) -> None:
    proxy.scripts |= SCRIPTS | {"g40": gap(40, True), "g90": gap(90, False),
                                "audit": audit(deciding=[2])}
    proxy.plan = ["script:q1", "script:empty", "script:g40", "script:q2", "script:a2",
                  "script:g90", "script:audit"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, min_rounds=2)
    assert isinstance(events[-1], Finished) and events[-1].status == "completed", events[-1]
    unusable = [e for e in events if isinstance(e, AnswerUnusable)]
    assert [(e.sequence, e.problem) for e in unusable] == [(1, "no answer")]
    session = store.load(directory)
    assert session.qa_pairs[0].answer == "" and not session.qa_pairs[0].answered
    assert session.qa_pairs[1].answered
    # the detective was told, and pressed on: question 2's prompt says so
    question2 = json.loads(proxy.requests[3])["messages"]
    assert "A1: (no answer)" in question2[-1]["content"]
    # the witness is not shown an answer it never gave: no assistant turn, the question it
    # left unanswered carried into its next one
    witness2 = json.loads(proxy.requests[4])["messages"]
    assert [m["role"] for m in witness2] == ["system", "user"]
    assert witness2[1]["content"] == (f"(An earlier question you gave no answer to: "
                                      f"{SCRIPTS['q1'][0]})\n\n{SCRIPTS['q2'][0]}")
    printer = TranscriptPrinter()
    for event in events:
        printer.show(event)
    out = capsys.readouterr().out
    assert out.count("(no answer)") == 1


async def test_an_audit_that_breaks_a_rule_twice_ends_completed_and_undetermined(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    """Our rule broken twice is the model's nonsense, never the session's failure: the rounds
    and the invalid audit are kept, the verdict is undetermined and names the rule."""
    proxy.scripts |= SCRIPTS | {"g90": gap(90, False), "bad": audit(summary="Markdown:")}
    proxy.plan = ["script:q1", "script:a1", "script:g90", "script:bad", "script:bad"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, min_rounds=1)
    final = events[-1]
    assert isinstance(final, Finished) and final.status == "completed", final
    assert final.reason is not None
    assert final.reason.endswith("; the verdict is undetermined: the audit broke a rule "
                                 "twice: the summary is boilerplate ('Markdown:', fewer than "
                                 "5 words)")
    retry = json.loads(proxy.requests[4])["messages"]
    assert retry[-2] == {"role": "assistant", "content": proxy.scripts["bad"][0]}
    assert retry[-1]["content"].startswith(
        "That reply broke a rule: the summary is boilerplate ('Markdown:', fewer than 5 "
        "words). The rounds you may name as deciding (the witness answered in them): 1; none "
        "for 'undetermined'.")
    session = store.load(directory)
    assert session.status == "completed" and session.error is None
    assert len(session.qa_pairs) == 1
    result = session.audit_result
    assert result is not None and result.verdict == "undetermined"
    assert result.probability_false is None and result.deciding_rounds == []
    assert result.rule_broken is not None and "summary is boilerplate" in result.rule_broken
    assert result.invalid_reply == proxy.scripts["bad"][0]
    # shown: the export names the rule and keeps the invalid audit
    text = to_markdown(session)
    assert "summary is boilerplate" in text and "Markdown:" in text


@pytest.mark.parametrize(("verdict", "p", "deciding", "rule", "stance"), [
    ("true", 0.1, [1], "the verdict 'true' does not follow from your comparisons (round 1 "
     "contradicts): they make it 'false'; keep the comparisons and give that verdict with its "
     "deciding rounds and a probability to match", "contradicts"),
    ("false", 0.9, [1], "the verdict 'false' does not follow from your comparisons (round 1 "
     "unrelated): they make it 'undetermined'", "unrelated"),
    ("true", 0.9, [1], "the verdict 'true' contradicts a probability-false of 0.90", None),
    ("false", 0.9, [], "the verdict 'false' names no round that decided it", None),
    ("false", 0.9, [3], "the answer does not match the schema at ", None),
    ("undetermined", 1.0, [], "the verdict 'undetermined' contradicts a probability-false of "
     "1.00", None),
])
async def test_every_broken_verdict_rule_is_asked_again_and_repaired(
    proxy: FaultProxy, paths: Paths, tmp_path: Path, verdict: str, p: float,
    deciding: list[int], rule: str, stance: str | None,
) -> None:
    proxy.scripts |= SCRIPTS | {"g90": gap(90, False),
                                "bad": audit(verdict, p, deciding, stance=stance),
                                "good": audit("false", 0.8, [1])}
    proxy.plan = ["script:q1", "script:a1", "script:g90", "script:bad", "script:good"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, min_rounds=1)
    assert isinstance(events[-1], Finished) and events[-1].status == "completed"
    retry = json.loads(proxy.requests[4])["messages"][-1]["content"]
    assert retry.startswith(f"That reply broke a rule: {rule}")
    session = store.load(directory)
    assert session.audit_result is not None and session.audit_result.verdict == "false"
    assert session.audit_result.rule_broken is None
    repairs = [t.reason for t in session.audit_trail if t.event == "error"]
    assert len(repairs) == 1 and repairs[0].startswith(f"invalid audit, asking again: {rule}")


async def test_no_real_answer_in_any_round_ends_undetermined_without_an_audit(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    proxy.scripts |= SCRIPTS | {"g90": gap(90, False)}
    proxy.plan = ["script:q1", "script:empty", "script:g90"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, min_rounds=1)
    final = events[-1]
    cause = ("the witness model via:gemma gave no real answer in 1 round, so there is nothing "
             "to audit; give the witness another model with --witness")
    assert isinstance(final, Finished) and final.status == "completed"
    assert final.reason == f"nothing to audit, the verdict is undetermined: {cause}"
    session = store.load(directory)
    assert session.audit_result is not None and session.audit_result.rule_broken == cause
    assert len(session.qa_pairs) == 1  # the round is kept
    assert len(proxy.requests) == 3  # no audit was asked for


async def test_a_verdict_that_contradicts_itself_is_asked_again(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    proxy.scripts |= SCRIPTS | {"g90": gap(90, False), "odd": audit("true", 0.9),
                                "good": audit("false", 0.85)}
    proxy.plan = ["script:q1", "script:a1", "script:g90", "script:odd", "script:good"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, min_rounds=1)
    assert isinstance(events[-1], Finished) and events[-1].status == "completed"
    session = store.load(directory)
    errors = [t.reason for t in session.audit_trail if t.event == "error"]
    assert errors == ["invalid audit, asking again: the verdict 'true' contradicts a "
                      "probability-false of 0.90"]
    audit_result = session.audit_result
    assert audit_result is not None and audit_result.verdict == "false"
    # shown everywhere: the report and the JSON export
    report = to_markdown(session)
    assert "- verdict: false · p(false) 0.85 · decided by round 1" in report
    assert "- Verdict: false · p(false) 0.85 · decided by round 1" in report
    exported = json.loads(to_json(session))["audit_result"]
    assert (exported["verdict"], exported["probability_false"], exported["deciding_rounds"]) \
        == ("false", 0.85, [1])


async def test_the_embedded_detective_is_called_a_demonstration_model(
    paths: Paths, tmp_path: Path
) -> None:
    """The default config (no key, no Ollama): the run says what the detective is."""
    from engine import Config
    from engine.config.load import _implicit_providers

    config = Config()
    _implicit_providers(config, {})
    router = Router(config, paths, persist=False)
    store = SessionStore(tmp_path / "s")
    journal = store.create("Ice floats on water.", 5)
    run = Interrogation(router, journal, config.interrogation).run()
    try:
        events = [await run.__anext__(), await run.__anext__()]
    finally:
        await run.aclose()
        await router.aclose()
    advice = events[1]
    assert isinstance(advice, Advice)
    from engine.config.providers import default_local_model

    assert advice.text.startswith(f"the detective is the embedded {default_local_model()}, a "
                                  "small demonstration model")
    assert "detektiv models pull" in advice.text
