"""Model text in prompts: placeholders filled once, JSON in prose, cut-off answers marked.

Whole interrogations through the fault proxy: scripted replies where a test needs exact text
(an answer with placeholders in it, a cut-off answer, JSON wrapped in prose), the real server
for the rest. What is checked is what the server received and what was stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine import Paths
from engine.models.events import AnswerCutOff, Finished, PairCompleted
from engine.models.session import ANSWER_CUT_OFF
from engine.prompts import fill, fill_tokens
from engine.report.export import to_markdown
from engine.storage.sessions import SessionStore
from tests.support.faults import FaultProxy
from tests.support.interrogation import interrogate, make_config
from tests.support.scripted import Judged
from tui.cli.printer import TranscriptPrinter

PLACEHOLDERS = ("{{HYPOTHESIS}}", "{{TRANSCRIPT}}", "{{SEQUENCE}}", "{{LIMIT}}", "{{SCHEMA}}",
                "{{ERROR}}", "{{CONTEXT}}")
EVERY = " ".join(PLACEHOLDERS)


def gap(follow_up: bool, description: str = "the year is missing") -> str:
    """An analysis that asks for more (40/100), or one that lets the loop close (90/100)."""
    return json.dumps({"gaps": [{"category": "vagueness", "description": description,
                                 "severity": "low"}],
                       "completeness_score": 40 if follow_up else 90,
                       "requires_follow_up": follow_up})


AUDIT = json.dumps({"contradictions": [], "summary": "The witness said little of substance.",
                    "verdict": "undetermined"})
SILENT_THEN_DECISIVE = [Judged(0.5), Judged(0.95)]
"""Round 1 judged silent (the loop asks again), round 2 decisive (it closes)."""
QUESTIONS = {"q1": ("When was the tower built?", "stop"),
             "q2": ("Who built the tower?", "stop")}
"""Questions that name the subject of "The tower is old" (a question that does not is
refused: the witness answers each one in a fresh conversation)."""


def test_fill_is_one_pass() -> None:
    template = "H: {{HYPOTHESIS}} / T: {{TRANSCRIPT}} / N: {{SEQUENCE}} / {{UNKNOWN}}"
    filled = fill(template, HYPOTHESIS="about {{TRANSCRIPT}}", TRANSCRIPT="A1: {{SEQUENCE}}",
                  SEQUENCE=2)
    assert filled == "H: about {{TRANSCRIPT}} / T: A1: {{SEQUENCE}} / N: 2 / {{UNKNOWN}}"
    assert fill_tokens("[[C]] and [[C]]", {"[[C]]": "{{CONTEXT}} [[C]]"}) == \
        "{{CONTEXT}} [[C]] and {{CONTEXT}} [[C]]"


async def run(proxy: FaultProxy, paths: Paths, store: SessionStore, hypothesis: str,
              limit: int = 5, temperature: float | None = None) -> tuple[list[Any], str]:
    # the rounds read alone: each test scripts the calls of its rounds in order
    config = make_config({"via": proxy.url}, ["via"], ["via"], min_rounds=1,
                         temperature=temperature, signals=["rounds"])
    events, directory = await interrogate(config, paths, store, hypothesis, limit)
    return list(events), directory.name


def sent(proxy: FaultProxy, index: int) -> str:
    """Everything the server was shown in request `index`, as one text."""
    body = json.loads(proxy.requests[index])
    return "\n".join(m["content"] for m in body["messages"])


async def test_placeholders_in_model_and_user_text_reach_the_model_as_typed(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    hypothesis = f"Hypothesis with {EVERY}"
    answer = f"The witness quotes {EVERY}."
    proxy.scripts |= QUESTIONS | {
        "answer": (answer, "stop"),
        "gap1": (gap(True, f"gap quoting {EVERY}"), "stop"),
        "gap2": (gap(False), "stop"),
        "audit": (AUDIT, "stop"),
    }
    # q1, a1, judgement 1, analysis 1, q2, a2 (the real model), judgement 2, analysis 2, audit
    proxy.judgement = list(SILENT_THEN_DECISIVE)
    proxy.plan = ["script:q1", "script:answer", "script:gap1", "script:q2", "pass",
                  "script:gap2", "script:audit"]
    events, _ = await run(proxy, paths, SessionStore(tmp_path / "s"), hypothesis)
    assert isinstance(events[-1], Finished) and events[-1].status == "completed", events[-1]

    judgement1 = sent(proxy, 2)  # the hypothesis and the answer as typed, once each
    assert judgement1.count(hypothesis) == 1 and judgement1.count(answer) == 1
    question2 = sent(proxy, 4)  # the detective's prompt for question 2
    assert question2.count(hypothesis) == 1  # the hypothesis verbatim, placeholders included
    assert answer in question2 and f"gap quoting {EVERY}" in question2
    assert question2.count("Q1:") == 1  # the transcript went in once
    assert "Write question 2 of at most 5" in question2
    analysis1 = sent(proxy, 3)
    assert analysis1.count(hypothesis) == 1 and answer in analysis1
    witness2 = json.loads(proxy.requests[5])["messages"]  # a fresh conversation
    assert [m["role"] for m in witness2] == ["system", "user"]
    assert witness2[1]["content"] == QUESTIONS["q2"][0]
    assert hypothesis in sent(proxy, 8) and answer in sent(proxy, 8)


async def test_structured_replies_wrapped_in_prose_or_fences_are_accepted(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    proxy.scripts |= QUESTIONS | {
        "gap": (f"Here is the analysis you asked for:\n```json\n{gap(False)}\n```\nThanks!",
                "stop"),
        "audit": (f"Sure. {AUDIT} Let me know if you need more.", "stop"),
    }
    proxy.scripts["a1"] = ("In 1889, for the world's fair.", "stop")
    proxy.judgement = Judged(0.95)
    proxy.plan = ["script:q1", "script:a1", "script:gap", "script:audit"]
    store = SessionStore(tmp_path / "s")
    events, directory = await run(proxy, paths, store, "The tower was built in 1889")
    assert isinstance(events[-1], Finished) and events[-1].status == "completed"
    session = store.load(directory)
    assert not [t for t in session.audit_trail if t.event == "error"]
    assert len(proxy.requests) == 5  # no retry was needed (the judgement is the fifth)
    assert session.audit_result is not None
    assert session.audit_result.summary == "The witness said little of substance."


async def test_an_answer_cut_off_at_the_token_limit_is_marked_everywhere(
    proxy: FaultProxy, paths: Paths, tmp_path: Path, capsys: Any
) -> None:
    proxy.scripts |= QUESTIONS | {
        "cut": ("The tower was built in", "length"),
        "gap1": (gap(True), "stop"),
        "gap2": (gap(False), "stop"),
        "audit": (AUDIT, "stop"),
    }
    proxy.scripts["a2"] = ("Gustave Eiffel's company built it.", "stop")
    proxy.judgement = list(SILENT_THEN_DECISIVE)
    proxy.plan = ["script:q1", "script:cut", "script:gap1", "script:q2", "script:a2",
                  "script:gap2", "script:audit"]
    store = SessionStore(tmp_path / "s")
    events, directory = await run(proxy, paths, store, "The tower is old")
    assert isinstance(events[-1], Finished) and events[-1].status == "completed"
    cut = [e for e in events if isinstance(e, AnswerCutOff)]
    assert [e.sequence for e in cut] == [1]
    pairs = [e.pair for e in events if isinstance(e, PairCompleted)]
    assert [p.answer_cut_off for p in pairs] == [True, False]
    # the detective is told, in the analysis of that answer and in the next question's prompt
    assert f"A1: The tower was built in [{ANSWER_CUT_OFF}]" in sent(proxy, 3)
    assert f"A1: The tower was built in [{ANSWER_CUT_OFF}]" in sent(proxy, 4)
    # stored, exported, shown
    session = store.load(directory)
    assert session.qa_pairs[0].answer_cut_off and not session.qa_pairs[1].answer_cut_off
    report = to_markdown(session)
    assert report.count(ANSWER_CUT_OFF) == 1
    assert report.index(ANSWER_CUT_OFF) < report.index("## Round 2")
    printer = TranscriptPrinter()
    for event in events:
        printer.show(event)
    assert capsys.readouterr().out.count(ANSWER_CUT_OFF) == 1


def test_a_new_event_type_needs_only_its_class_and_one_formatter(capsys: Any) -> None:
    """The front ends fall back on `engine.report.words.note` for any event they do not know."""
    from typing import Literal

    from engine.models.events import _Event
    from engine.report import words as report

    class OracleConsulted(_Event):
        type: Literal["oracle_consulted"] = "oracle_consulted"
        oracle: str

    @report.note.register(OracleConsulted)
    def _(event: OracleConsulted) -> str | None:
        return f"consulted the {event.oracle}"

    TranscriptPrinter().show(OracleConsulted(oracle="sceptic"))  # type: ignore[arg-type]
    assert "detektiv: consulted the sceptic" in capsys.readouterr().err
    assert report.note(object()) is None


async def test_a_sessions_own_hypothesis_is_read_as_judged_even_when_the_answer_repeats_it(
    proxy: FaultProxy, paths: Paths, tmp_path: Path
) -> None:
    """"States the claim's own detail" is a testimony claim's rule only: for a session's own
    hypothesis (an evaluated claim names both alternatives) the judgement stands as read."""
    proxy.scripts |= {"q1": ("Where does the tower stand?", "stop"),
                      "a1": ("The tower stands in Paris.", "stop"),
                      "gap": (gap(False), "stop"), "audit": (AUDIT, "stop")}
    proxy.judgement = Judged(0.3)
    proxy.plan = ["script:q1", "script:a1", "script:gap", "script:audit"]
    store = SessionStore(tmp_path / "s")
    events, directory = await run(proxy, paths, store, "The tower stands in Paris")
    assert isinstance(events[-1], Finished) and events[-1].status == "completed"
    judgement = store.load(directory).qa_pairs[0].judgement
    assert judgement is not None and judgement.p_true == 0.3
    from engine.interrogation.checks import states_claim_detail  # the rule would have held

    assert states_claim_detail("Where does the tower stand?", "The tower stands in Paris.",
                               "The tower stands in Paris")
