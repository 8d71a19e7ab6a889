"""Sample sessions for tests and benchmarks: one factory instead of a copy in every file."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from engine.models.events import Finished, InterrogationEvent, PairCompleted, Started
from engine.models.session import (
    Gap,
    GapAnalysis,
    Hypothesis,
    InterrogationSession,
    ProvidersUsed,
    QuestionAnswerPair,
    now,
)
from engine.storage.sessions import SessionStore

__all__ = ["case_session", "recorded_session", "sample_pair", "sample_session",
           "stored_session"]


def sample_pair(
    n: int,
    *,
    question: str | None = None,
    answer: str = "an answer",
    gaps: Sequence[Gap] | None = None,
    severity: str = "high",
    completeness: int = 50,
    follow_up: bool = True,
    when: datetime | None = None,
    detective: str = "d:m",
    witness: str = "w:m",
) -> QuestionAnswerPair:
    """Round `n`: by default one `severity` vagueness gap, completeness 50, follow-up wanted."""
    if gaps is None:
        gaps = [Gap(category="vagueness", description=f"gap {n}",
                    severity=severity)]  # type: ignore[arg-type]
    return QuestionAnswerPair(
        sequence=n,
        question=f"question {n}?" if question is None else question,
        answer=answer,
        timestamp=when or now(),
        gap_analysis=GapAnalysis(gaps=list(gaps), completeness_score=completeness,
                                 requires_follow_up=follow_up),
        provider_used=ProvidersUsed(detective=detective, witness=witness),
    )


def sample_session(pairs: int = 2, *, hypothesis: str = "The sky is green",
                   **extra: Any) -> InterrogationSession:
    """A session of `pairs` sample rounds (not stored); `extra` sets any other field."""
    return InterrogationSession(
        hypothesis=Hypothesis(text=hypothesis),
        iteration_limit=extra.pop("iteration_limit", 5),
        qa_pairs=extra.pop("qa_pairs", None) or [sample_pair(i + 1) for i in range(pairs)],
        **extra,
    )


def stored_session(store: SessionStore, hypothesis: str = "h", pairs: int = 1) -> str:
    """A completed session of `pairs` rounds written through the store, its events logged;
    returns its folder name."""
    journal = store.create(hypothesis, 5)
    for n in range(1, pairs + 1):
        pair = sample_pair(n, question=f"q{n}", answer=f"a{n}", gaps=[], completeness=10)
        journal.session.qa_pairs.append(pair)
        journal.save()
        journal.record(PairCompleted(pair=pair))
    journal.session.status = "completed"
    journal.save()
    journal.record(Finished(status="completed"))
    journal.close()
    return journal.directory.name


def recorded_session(store: SessionStore, events: Sequence[InterrogationEvent],
                     pairs: Sequence[QuestionAnswerPair] = (), hypothesis: str = "h",
                     status: str = "cancelled") -> str:
    """A session whose log holds `Started`, then `events`, then `Finished(status)`, with
    `pairs` stored; returns its folder name."""
    journal = store.create(hypothesis, 5)
    journal.record(Started(session_id=str(journal.session.id), hypothesis=hypothesis,
                           iteration_limit=5))
    for event in events:
        journal.record(event)
    journal.session.qa_pairs.extend(pairs)
    journal.session.status = status  # type: ignore[assignment]
    journal.save()
    journal.record(Finished(status=status))  # type: ignore[arg-type]
    journal.close()
    return journal.directory.name


def case_session(store: SessionStore, hypothesis: str, rounds: Sequence[tuple[str, str]],
                 *, gaps: Sequence[str] = (), audit: str | None = None,
                 contradiction: str | None = None, answer: tuple[str, str] | None = None
                 ) -> str:
    """A completed session with the given (question, answer) rounds, the first round's gaps,
    an audit (summary and one contradiction), and an oracle `answer` (name, text), written
    through the store as the app writes them; returns its folder name."""
    from engine.models.notes import ContextSnapshot, LlmEntry
    from engine.models.session import AuditResult, Contradiction
    from engine.storage.atomic import atomic_write_text
    from engine.storage.layout import RESPONSES_DIR

    journal = store.create(hypothesis, 5)
    for n, (question, reply) in enumerate(rounds, 1):
        found = [Gap(category="vagueness", description=g, severity="high")  # type: ignore[arg-type]
                 for g in (gaps if n == 1 else ())]
        journal.session.qa_pairs.append(sample_pair(n, question=question, answer=reply,
                                                    gaps=found))
    if audit is not None:
        journal.session.audit_result = AuditResult(
            consistency_score=60, summary=audit,
            contradictions=[Contradiction(qa_pair_indexes=(0, 1), description=contradiction)]
            if contradiction else [])
    journal.session.status = "completed"
    journal.save()
    journal.close()
    name = journal.directory.name
    if answer is not None:
        oracle, text = answer

        def save(session: InterrogationSession, directory: Any) -> None:
            atomic_write_text(directory / RESPONSES_DIR / f"001_{oracle}.txt", text)
            session.llm_entries.append(LlmEntry(
                sequence=1, created_at=now(), oracle_name=oracle, oracle_id="0" * 8,
                response_filename=f"001_{oracle}.txt",
                context_snapshot=ContextSnapshot(transcript_count=0, llm_response_count=0,
                                                 include_llm_history=True)))

        store.update(name, save)
    return name
