"""One wording: what a live run shows and what `show` / the export render of the stored
session come from the same narration (`engine.report.blocks`)."""

from __future__ import annotations

import re
from pathlib import Path

from engine.models.events import (
    AnswerDelta,
    AuditReady,
    Finished,
    GapAnalysisReady,
    InterrogationEvent,
    PairCompleted,
    Phase,
    ProviderChosen,
    QuestionDelta,
    Started,
)
from engine.report.blocks import Append, Block, Narration, Void, session_blocks
from engine.report.export import to_markdown
from tests.support.app import fixed_session


def _live_events(session) -> list[InterrogationEvent]:  # type: ignore[no-untyped-def]
    events: list[InterrogationEvent] = [Started(
        session_id=str(session.id), hypothesis=session.hypothesis.text,
        iteration_limit=session.iteration_limit)]
    for pair in session.qa_pairs:
        n = pair.sequence
        events += [
            Phase(phase="question", sequence=n),
            ProviderChosen(role="detective", provider=pair.provider_used.detective),
            *(QuestionDelta(sequence=n, text=part)  # token by token, spaces kept
              for part in re.findall(r"\S+\s*", pair.question)),
            Phase(phase="answer", sequence=n),
            ProviderChosen(role="witness", provider=pair.provider_used.witness),
            AnswerDelta(sequence=n, text=pair.answer),
            Phase(phase="analysis", sequence=n),
            GapAnalysisReady(sequence=n, analysis=pair.gap_analysis),
            PairCompleted(pair=pair),
        ]
    assert session.audit_result is not None
    return [*events, Phase(phase="audit", sequence=len(session.qa_pairs)),
            AuditReady(audit=session.audit_result), Finished(status="completed")]


def _settle(pieces: list[Block | Append | Void]) -> list[tuple[str, str, str]]:
    """The blocks as a reader ends up seeing them: streamed text joined into its block."""
    blocks: list[list[str]] = []
    for piece in pieces:
        match piece:
            case Block(kind=kind, title=title, text=text):
                blocks.append([kind, title, text])
            case Append(text=text):
                blocks[-1][2] += text
            case Void():
                blocks.pop()
    return [(kind, title, text) for kind, title, text in blocks]


def test_show_says_what_the_live_run_said(tmp_path: Path) -> None:
    session = fixed_session(tmp_path, 1)
    narration = Narration()
    live = _settle([p for e in _live_events(session) for p in narration.pieces(e)])
    stored = _settle(list(session_blocks(session)))
    # every round, analysis and audit block of the stored session is one the live run showed,
    # word for word (the live run adds its session heading, hypothesis and closing line)
    assert stored and all(block in live for block in stored)
    kinds = [kind for kind, _, _ in stored]
    assert kinds == ["heading", "question", "answer", "analysis", "heading", "audit", "summary"]
    question = next(b for b in stored if b[0] == "question")
    assert question[2] == session.qa_pairs[0].question  # the deltas joined back whole


def test_the_export_renders_the_session_blocks(tmp_path: Path) -> None:
    session = fixed_session(tmp_path, 2)
    report = to_markdown(session)
    for kind, title, text in _settle(list(session_blocks(session))):
        if kind in ("heading", "question", "answer"):
            assert title in report
        if kind in ("analysis", "audit"):
            for line in text.splitlines():
                assert line.split(" ", 1)[-1] in report


def test_no_usable_question_advises_a_model_the_detective_is_not_already() -> None:
    from engine.report.words import no_usable_question

    small = no_usable_question("via:gemma", 3, "it is not a question", False)
    assert "give the detective a capable model: detektiv models pull qwen2.5-coder-1.5b" in small
    capable = no_usable_question("local:qwen2.5-coder-1.5b", 3, "it is not a question", False)
    assert "models pull" not in capable
    assert capable.endswith("give the detective a larger model: an API key (OPENAI_API_KEY, "
                            "ANTHROPIC_API_KEY, GEMINI_API_KEY) or a larger model through Ollama")
