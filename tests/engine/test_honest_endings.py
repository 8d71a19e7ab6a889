"""Honest endings (issues 20, 44): the loop decides, nonsense is named, the verdict is computed.

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
from tests.support.scripted import Judged
from tui.cli.printer import TranscriptPrinter


def gap(score: int, follow_up: bool, severity: str = "low") -> tuple[str, str]:
    return json.dumps({"gaps": [{"category": "vagueness", "description": "the year is vague",
                                 "severity": severity}],
                       "completeness_score": score, "requires_follow_up": follow_up}), "stop"


def audit(verdict: str = "false",
          summary: str = "The witness placed the boiling point below 100 degrees.",
          contradictions: list[dict[str, Any]] | None = None) -> tuple[str, str]:
    """The detective's narrative: its summary, contradictions and own one-word reading."""
    return json.dumps({"contradictions": contradictions or [], "summary": summary,
                       "verdict": verdict}), "stop"


SCRIPTS = {
    "q1": ("At what temperature does water boil on Everest?", "stop"),
    "q2": ("At which pressure does water boil at 70 degrees Celsius?", "stop"),
    "q3": ("How is the boiling point of water measured?", "stop"),
    "q4": ("Who measured the boiling point of water on Everest?", "stop"),
    "q5": ("When was the boiling point of water first measured?", "stop"),
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
    # the rounds' own endings, read alone (each test scripts its calls in order)
    config = make_config({"via": proxy.url}, ["via"], ["via"],
                         **{"signals": ["rounds"], **settings})
    events, directory = await run_interrogation(config, paths, store, hypothesis, limit)
    return list(events), directory.name


async def test_an_unusable_question_is_asked_again_without_words_in_the_models_mouth(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    hypothesis = "Water boils at 100 degrees Celsius everywhere."
    proxy.scripts |= SCRIPTS | {"echo": (hypothesis, "stop"), "marker": ("(empty)", "stop"),
                                "g90": gap(90, False), "audit": audit()}
    proxy.judgement = Judged(0.05)
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
            f"could not be used as question 1: {problem}. Write question\n1 now, the way the "
            "worked examples do: leave out what the hypothesis says and ask\nfor it, starting "
            "with What, Which, Who, When, Where or How many, addressed to the witness as\n"
            "\"you\"; one open question ending with a question mark, and nothing else.")
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
    assert final.reason.startswith(f"nothing was asked, the verdict is undetermined: {cause}")
    assert "demonstration" not in final.reason  # not the embedded model
    session = store.load(directory)
    assert session.status == "completed" and session.error is None
    # what a user reads: nothing was asked, never "completed" as if examined
    assert session.shown_status == "nothing-asked"
    assert [row.status for row in store.list()] == ["nothing-asked"]
    audit = session.audit_result
    assert session.qa_pairs == [] and audit is not None and audit.verdict == "undetermined"
    assert audit.rule_broken is not None and audit.rule_broken.startswith(cause)
    assert audit.undetermined_because is not None
    assert audit.undetermined_because.startswith(f"nothing was asked: {cause}")
    assert len(proxy.requests) == 3  # no audit was asked for


async def test_an_empty_answer_is_testimony_shown_once_and_pressed_on(
    proxy: FaultProxy, paths: Paths, tmp_path: Path, capsys: Any
) -> None:
    proxy.scripts |= SCRIPTS | {"g40": gap(40, True), "g90": gap(90, False), "audit": audit()}
    proxy.judgement = Judged(0.05)  # round 1 is silent without a call: nothing was said
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
    # the witness answers each question in a fresh conversation: never shown an answer it
    # never gave, nor the earlier questions
    witness2 = json.loads(proxy.requests[4])["messages"]
    assert [m["role"] for m in witness2] == ["system", "user"]
    assert witness2[1]["content"] == SCRIPTS["q2"][0]
    printer = TranscriptPrinter()
    for event in events:
        printer.show(event)
    out = capsys.readouterr().out
    assert out.count("(no answer)") == 1


async def test_a_narrative_that_breaks_a_rule_twice_is_named_and_the_verdict_stands(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    """Our rule broken twice is the model's nonsense, never the session's failure: the rounds
    and the invalid narrative are kept, the rule is named, and the computed verdict stands."""
    proxy.scripts |= SCRIPTS | {"g90": gap(90, False), "bad": audit(summary="Markdown:")}
    proxy.judgement = Judged(0.05)
    proxy.plan = ["script:q1", "script:a1", "script:g90", "script:bad", "script:bad"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, min_rounds=1)
    final = events[-1]
    assert isinstance(final, Finished) and final.status == "completed", final
    assert final.reason == ("a decisive judgement settled it after 1 round; the audit broke a "
                            "rule twice: the summary is boilerplate ('Markdown:', fewer than 5 "
                            "words)")
    retry = json.loads(proxy.requests[5])["messages"]  # q, a, judgement, analysis, audit
    assert retry[-2] == {"role": "assistant", "content": proxy.scripts["bad"][0]}
    assert retry[-1]["content"].startswith(
        "That reply broke a rule: the summary is boilerplate ('Markdown:', fewer than 5 "
        "words)")
    session = store.load(directory)
    assert session.status == "completed" and session.error is None
    assert len(session.qa_pairs) == 1
    result = session.audit_result
    assert result is not None and result.verdict == "false" and result.computed
    assert result.probability_false == 0.95 and result.deciding_rounds == [1]
    assert result.rule_broken is not None and "summary is boilerplate" in result.rule_broken
    assert result.invalid_reply == proxy.scripts["bad"][0]
    # shown: the export names the rule and keeps the invalid narrative
    text = to_markdown(session)
    assert "summary is boilerplate" in text and "Markdown:" in text


@pytest.mark.parametrize(("contradictions", "rule"), [
    ([{"questions": [1, 3], "description": "two years"}],
     "the answer does not match the schema at "),
    (None, "the summary is boilerplate ('Markdown:', fewer than 5 words)"),
])
async def test_every_broken_narrative_rule_is_asked_again_and_repaired(
    proxy: FaultProxy, paths: Paths, tmp_path: Path,
    contradictions: list[dict[str, Any]] | None, rule: str,
) -> None:
    proxy.scripts |= SCRIPTS | {"g90": gap(90, False),
                                "bad": audit(contradictions=contradictions) if contradictions
                                else audit(summary="Markdown:"),
                                "good": audit("false")}
    proxy.judgement = Judged(0.05)
    proxy.plan = ["script:q1", "script:a1", "script:g90", "script:bad", "script:good"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, min_rounds=1)
    assert isinstance(events[-1], Finished) and events[-1].status == "completed"
    retry = json.loads(proxy.requests[5])["messages"][-1]["content"]
    assert retry.startswith(f"That reply broke a rule: {rule}")
    session = store.load(directory)
    assert session.audit_result is not None and session.audit_result.verdict == "false"
    assert session.audit_result.rule_broken is None
    repairs = [t.reason for t in session.audit_trail if t.event == "error"]
    assert len(repairs) == 1 and repairs[0].startswith(f"invalid audit, asking again: {rule}")


async def test_no_real_answer_in_any_round_ends_undetermined_without_an_audit(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    """Every round silent (no answer: judged without a call), pressed on to the limit."""
    proxy.scripts |= SCRIPTS | {"g90": gap(90, False)}
    proxy.plan = [step for n in range(1, 6) for step in (f"script:q{n}", "script:empty",
                                                         "script:g90")]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, min_rounds=1)
    final = events[-1]
    cause = ("the witness model via:gemma gave no real answer in 5 rounds, so there is nothing "
             "to audit; give the witness another model with --witness")
    assert isinstance(final, Finished) and final.status == "limit-reached"
    assert final.reason == f"nothing to audit, the verdict is undetermined: {cause}"
    session = store.load(directory)
    assert session.audit_result is not None and session.audit_result.rule_broken == cause
    assert len(session.qa_pairs) == 5  # the rounds are kept
    assert all(p.judgement is not None and p.judgement.why == "no answer"
               for p in session.qa_pairs)
    assert len(proxy.requests) == 15  # no judgement and no audit was asked for


async def test_a_narrative_that_reads_otherwise_is_shown_beside_the_verdict_never_repaired(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    proxy.scripts |= SCRIPTS | {"g90": gap(90, False), "odd": audit("true")}
    proxy.judgement = Judged(0.15)  # leans against: not decisive, and enough to settle it
    proxy.plan = ["script:q1", "script:a1", "script:g90", "script:odd"]
    store = SessionStore(tmp_path / "s")
    events, directory = await interrogate(proxy, paths, store, min_rounds=1)
    assert isinstance(events[-1], Finished) and events[-1].status == "completed"
    session = store.load(directory)
    assert len(session.qa_pairs) == 1  # a round that bears on it settles it
    assert not [t for t in session.audit_trail if t.event == "error"]  # nothing "repaired"
    audit_result = session.audit_result
    assert audit_result is not None and audit_result.verdict == "false"
    assert audit_result.narrative_verdict == "true"
    # shown everywhere: the report and the JSON export
    report = to_markdown(session)
    assert "- verdict: false · p(false) 0.85 · computed from round 1" in report
    assert "- Verdict: false · p(false) 0.85 · computed from round 1" in report
    assert "the auditor's own reading: true (the verdict is computed" in report
    assert "judgement: contradicts · p(true) 0.15 (log-probabilities)" in report
    exported = json.loads(to_json(session))["audit_result"]
    assert (exported["verdict"], exported["probability_false"], exported["deciding_rounds"],
            exported["narrative_verdict"]) == ("false", 0.85, [1], "true")


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


async def test_a_demonstration_detectives_running_verdict_and_failed_export_say_so(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    """The running verdict of a round a demonstration model judged says it means nothing,
    and so does the export of the session when it then fails (it has no audit to say it)."""
    from engine.models.events import JudgementReady
    from engine.report.words import DEMONSTRATION_VERDICT

    proxy.scripts |= SCRIPTS | {"g40": gap(40, True)}
    proxy.judgement = Judged(0.3)
    proxy.plan = ["script:q1", "script:a1", "script:g40", "500", "500", "500", "500"]
    config = make_config({"via": proxy.url}, ["via"], ["via"], min_rounds=3)
    config.providers["via"].model = "smollm2-135m"  # a demonstration model, served here
    assert config.providers["via"].is_demonstration
    store = SessionStore(tmp_path / "s")
    events, directory = await run_interrogation(config, paths, store,
                                                "Water boils at 100 degrees everywhere.", 5)
    from engine.report.blocks import Block, Narration

    judged = [e for e in events if isinstance(e, JudgementReady)]
    assert judged and all(e.demonstration for e in judged)
    shown = [piece for piece in Narration().pieces(judged[0]) if isinstance(piece, Block)]
    assert shown[0].text.endswith(f"so far: false · p(false) 0.70 · {DEMONSTRATION_VERDICT}")
    final = events[-1]
    assert isinstance(final, Finished) and final.status == "failed", final
    session = store.load(directory.name)
    assert session.demonstration and session.audit_result is None
    report = to_markdown(session)
    assert f"- Detective: a demonstration model; {DEMONSTRATION_VERDICT}" in report
    assert json.loads(to_json(session))["demonstration"] is True
    from engine.storage.index import summarize

    assert summarize(directory.name, session).demonstration
