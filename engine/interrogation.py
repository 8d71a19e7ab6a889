"""The detective/witness loop of SPEC §1, as an async generator of typed events.

    journal = SessionStore(root).create(hypothesis, limit)
    async for event in Interrogation(router, journal, config.interrogation).run():
        match event:
            case QuestionDelta(text=text) | AnswerDelta(text=text): ...
            case PairCompleted(pair=pair): ...       # stored before it is yielded
            case Finished(status=status): ...

Each round: the detective asks one question (streamed), the witness answers (streamed, seeing
only the questions and its own earlier answers), the detective returns a `GapAnalysis` in
structured output. The loop ends when the detective needs no follow-up (`completed`) or at the
limit (`limit-reached`), then the detective audits the whole session. A structured reply that
fails validation is asked again once, with the error; a second failure fails the session.
Every event is recorded in the session's journal before it is yielded. Cancelling the consumer
(or closing the generator) stops both models and stores the session as `cancelled`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any

from engine.casefile import audit_schema, gap_schema, transcript, witness_messages
from engine.config import InterrogationConfig
from engine.errors import (
    AllProvidersFailed,
    BadResponseError,
    DetektivError,
    InterrogationFailed,
)
from engine.models.events import (
    AnswerCutOff,
    AnswerDelta,
    AuditReady,
    Discarded,
    Finished,
    GapAnalysisReady,
    InterrogationEvent,
    PairCompleted,
    Phase,
    ProviderChosen,
    QuestionDelta,
    Role,
    Started,
    TrailAdded,
)
from engine.models.session import (
    AuditResult,
    AuditTrailEntry,
    Contradiction,
    GapAnalysis,
    ProvidersUsed,
    QuestionAnswerPair,
    SessionStatus,
    check_resumable,
    consistency_score,
    now,
)
from engine.prompts import fill, load_prompt
from engine.providers import Done, Message, StreamRequest, TokenDelta
from engine.router import Attempt, PartialDiscarded, ProviderEvent, Router
from engine.storage.sessions import SessionJournal
from engine.structured import collect_json

__all__ = ["Interrogation"]

log = logging.getLogger(__name__)

@dataclass(slots=True)
class _Turn:
    """The outcome of one streamed call: the text, who gave it, why it ended."""

    text: str = ""
    provider: str = ""
    finish_reason: str = ""
    value: Any = None


_EMPTY = "the question is empty"


def _nonempty(provider: str, text: str, finish_reason: str) -> None:
    if not text.strip():
        raise BadResponseError(provider, _EMPTY)


class Interrogation:
    """One run of a session, new or resumed, over `router`, recorded in `journal`."""

    def __init__(
        self,
        router: Router,
        journal: SessionJournal,
        settings: InterrogationConfig,
        *,
        resumed: bool = False,
    ) -> None:
        self.router = router
        self.journal = journal
        self.session = journal.session
        self.settings = settings
        self.resumed = resumed
        self._labels = {name: p.label for name, p in router.providers.items()}

    def _emit(self, event: InterrogationEvent) -> InterrogationEvent:
        self.journal.record(event)
        return event

    def _trail(self, entry: AuditTrailEntry) -> InterrogationEvent:
        self.session.audit_trail.append(entry)
        return self._emit(TrailAdded(entry=entry))

    def _finish(self, status: SessionStatus, reason: str | None) -> InterrogationEvent:
        session = self.session
        session.status, session.end_time = status, now()
        session.error = reason if status == "failed" else None
        self.journal.save()
        return self._emit(Finished(status=status, reason=reason))

    async def run(self) -> AsyncGenerator[InterrogationEvent, None]:
        """Run to the end; see the module docstring. Never raises for a model's failure: the
        session ends `failed` with the reason in `Finished` and the audit trail."""
        session = self.session
        if self.resumed:
            check_resumable(session)
            previous = session.status
            session.status, session.end_time, session.error = "running", None, None
            session.audit_result = None
            yield self._trail(AuditTrailEntry(
                event="resumed",
                reason=f"resumed after round {len(session.qa_pairs)} "
                + ("(the process running it had died)" if previous == "running"
                   else f"(was {previous})"),
            ))
            self.journal.save()
        yield self._emit(Started(
            session_id=str(session.id),
            hypothesis=session.hypothesis.text,
            iteration_limit=session.iteration_limit,
            resumed_after=len(session.qa_pairs) if self.resumed else None,
        ))
        try:
            while True:
                pairs = session.qa_pairs
                if pairs and not pairs[-1].gap_analysis.requires_follow_up:
                    status: SessionStatus = "completed"
                    break
                if len(pairs) >= session.iteration_limit:
                    status = "limit-reached"
                    break
                async with aclosing(self._round(len(pairs) + 1)) as events:
                    async for event in events:
                        yield event
            yield self._emit(Phase(phase="audit", sequence=len(session.qa_pairs)))
            async with aclosing(self._audit()) as events:
                async for event in events:
                    yield event
            yield self._finish(status, None)
        except (AllProvidersFailed, InterrogationFailed) as exc:
            if isinstance(exc, AllProvidersFailed):  # an invalid reply is in the trail already
                yield self._trail(AuditTrailEntry(event="error", role=exc.role,
                                                  reason=exc.message))
            yield self._finish("failed", exc.message)
        except (asyncio.CancelledError, GeneratorExit):
            self._finish("cancelled", "stopped by the user")
            raise
        except Exception as exc:  # a bug must not lose the session: store it as failed
            log.exception("interrogation %s failed", session.id)
            reason = exc.message if isinstance(exc, DetektivError) else \
                f"internal error: {type(exc).__name__} (details in the log)"
            yield self._finish("failed", reason)
        finally:
            self.journal.close()

    def _request(
        self, system: str, messages: list[Message], max_tokens: int,
        schema: dict[str, Any] | None = None, name: str = "answer",
    ) -> StreamRequest:
        return StreamRequest(
            messages=(Message("system", system), *messages),
            schema=schema,
            schema_name=name,
            max_tokens=max_tokens,
            temperature=self.settings.temperature,
        )

    async def _round(self, sequence: int) -> AsyncGenerator[InterrogationEvent, None]:
        session, settings = self.session, self.settings
        hypothesis = session.hypothesis.text
        yield self._emit(Phase(phase="question", sequence=sequence))
        asked = _Turn()
        request = self._request(
            fill(load_prompt("detective_question"), HYPOTHESIS=hypothesis),
            [Message("user", fill(
                load_prompt("detective_turn"),
                TRANSCRIPT=transcript(session.qa_pairs, analyses=True),
                SEQUENCE=sequence,
                LIMIT=session.iteration_limit,
            ))],
            settings.question_max_tokens,
        )
        try:
            async for event in self._call(request, "detective", asked, sequence, _nonempty):
                yield event
        except AllProvidersFailed as exc:
            # Models do reply with nothing now and then (a small one ends its turn at once, a
            # reasoning one spends its budget thinking): ask once more, saying so.
            if not any(why.endswith(_EMPTY) for _, why in exc.failures):
                raise
            yield self._trail(AuditTrailEntry(event="error", role="detective",
                                              reason=f"{_EMPTY}, asking again"))
            request = replace(request, messages=(
                *request.messages,
                Message("assistant", "(empty)"),
                Message("user", fill(load_prompt("empty_question"), SEQUENCE=sequence)),
            ))
            async for event in self._call(request, "detective", asked, sequence, _nonempty):
                yield event
        question = asked.text.strip()

        yield self._emit(Phase(phase="answer", sequence=sequence))
        answered = _Turn()
        request = self._request(
            load_prompt("witness"), witness_messages(session.qa_pairs, question),
            settings.answer_max_tokens,
        )
        async for event in self._call(request, "witness", answered, sequence):
            yield event
        cut_off = answered.finish_reason == "length"
        if cut_off:
            yield self._emit(AnswerCutOff(sequence=sequence, provider=answered.provider))

        yield self._emit(Phase(phase="analysis", sequence=sequence))
        pending = QuestionAnswerPair.model_construct(
            sequence=sequence, question=question, answer=answered.text, answer_cut_off=cut_off
        )
        analysed = _Turn()
        request = self._request(
            fill(load_prompt("gap_analysis"), HYPOTHESIS=hypothesis,
                  TRANSCRIPT=transcript([*session.qa_pairs, pending], analyses=False)),
            [Message("user", "Analyse the last answer.")],
            settings.analysis_max_tokens,
            gap_schema(settings.max_gaps, settings.analysis_max_tokens),
            "gap_analysis",
        )
        async for event in self._structured(
            request, analysed, "gap analysis", GapAnalysis.model_validate
        ):
            yield event
        analysis: GapAnalysis = analysed.value
        yield self._emit(GapAnalysisReady(sequence=sequence, analysis=analysis))
        pair = QuestionAnswerPair(
            sequence=sequence,
            question=question,
            answer=answered.text,
            gap_analysis=analysis,
            provider_used=ProvidersUsed(detective=asked.provider, witness=answered.provider),
            answer_cut_off=cut_off,
        )
        session.qa_pairs.append(pair)
        session.current_iteration = len(session.qa_pairs)
        self.journal.save()  # the pair is durable before anyone is told it is complete
        yield self._emit(PairCompleted(pair=pair))

    async def _audit(self) -> AsyncGenerator[InterrogationEvent, None]:
        session = self.session
        pairs = session.qa_pairs
        audited = _Turn()
        request = self._request(
            fill(load_prompt("audit"), HYPOTHESIS=session.hypothesis.text,
                  TRANSCRIPT=transcript(pairs, analyses=False)),
            [Message("user", "Write the audit.")],
            self.settings.audit_max_tokens,
            audit_schema(len(pairs), self.settings.audit_max_tokens), "audit",
        )

        def validate(value: Any) -> tuple[list[Contradiction], str]:
            found: list[Contradiction] = []
            for item in value["contradictions"]:
                first, second = item["questions"]
                if first == second:
                    raise ValueError(f"contradiction between Q{first} and itself")
                if not (1 <= first <= len(pairs) and 1 <= second <= len(pairs)):
                    raise ValueError(f"Q{max(first, second)} does not exist")
                found.append(Contradiction(
                    qa_pair_indexes=(first - 1, second - 1), description=item["description"]
                ))
            if not value["summary"].strip():
                raise ValueError("the summary is empty")
            return found, value["summary"].strip()

        async for event in self._structured(request, audited, "audit", validate):
            yield event
        contradictions, summary = audited.value
        remaining = list(pairs[-1].gap_analysis.gaps) if pairs else []
        audit = AuditResult(
            consistency_score=consistency_score(len(contradictions), remaining),
            contradictions=contradictions,
            remaining_gaps=remaining,
            summary=summary,
        )
        session.audit_result = audit
        yield self._emit(AuditReady(audit=audit))

    async def _structured(
        self, request: StreamRequest, turn: _Turn, what: str, validate: Callable[[Any], Any]
    ) -> AsyncGenerator[InterrogationEvent, None]:
        """A detective call whose reply must be valid JSON; retried once with the error."""
        assert request.schema is not None
        for attempt in (1, 2):
            async for event in self._call(request, "detective", turn, None):
                yield event
            try:
                turn.value = validate(collect_json(turn.provider, turn.text,
                                                   turn.finish_reason, request.schema))
                return
            except (BadResponseError, ValueError) as exc:
                detail = exc.detail if isinstance(exc, BadResponseError) else str(exc)
                detail = detail.splitlines()[0] if detail else type(exc).__name__
            yield self._trail(AuditTrailEntry(
                event="error", role="detective", from_provider=turn.provider,
                reason=f"invalid {what}" + (", asking again" if attempt == 1 else "")
                + f": {detail}",
            ))
            if attempt == 2:
                raise InterrogationFailed(
                    f"the {what} from {turn.provider} was still invalid after a retry: {detail}"
                )
            request = replace(request, messages=(
                *request.messages,
                Message("assistant", turn.text or "(empty)"),
                Message("user", fill(load_prompt("validation_retry"), ERROR=detail)),
            ))

    async def _call(
        self,
        request: StreamRequest,
        role: Role,
        turn: _Turn,
        sequence: int | None,
        accept: Callable[[str, str, str], None] | None = None,
    ) -> AsyncGenerator[InterrogationEvent, None]:
        """Stream one call over the role's chain; deltas only when `sequence` is given."""
        delta = QuestionDelta if role == "detective" else AnswerDelta
        parts: list[str] = []
        label = self._label
        async with aclosing(self.router.stream(request, role, accept)) as events:
            async for event in events:
                match event:
                    case TokenDelta(text):
                        parts.append(text)
                        if sequence is not None and text:
                            yield self._emit(delta(sequence=sequence, text=text))
                    case Attempt(_, provider_label, trial):
                        parts, turn.provider = [], provider_label
                        yield self._emit(ProviderChosen(
                            role=role, provider=provider_label, trial=trial
                        ))
                    case PartialDiscarded(provider, text, reason):
                        yield self._emit(Discarded(
                            role=role, provider=self._labels.get(provider, provider), text=text,
                            reason=reason,
                        ))
                        yield self._trail(AuditTrailEntry(
                            event="partial_discarded", role=role,
                            from_provider=label(provider),
                            reason=f"{len(text)} characters discarded: {reason}",
                        ))
                    case ProviderEvent(kind, from_provider, to_provider, reason):
                        yield self._trail(AuditTrailEntry(
                            event=kind, role=role, from_provider=label(from_provider),
                            to_provider=label(to_provider), reason=reason,
                        ))
                    case Done(finish_reason):
                        turn.text, turn.finish_reason = "".join(parts), finish_reason

    def _label(self, name: str | None) -> str | None:
        return None if name is None else self._labels.get(name, name)

