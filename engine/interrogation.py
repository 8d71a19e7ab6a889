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

from engine.casefile import (
    audit_schema,
    gap_schema,
    transcript,
    transcript_prompt,
    witness_messages,
    witness_prompt,
)
from engine.config import InterrogationConfig
from engine.context.budget import FitReport, Prompt
from engine.context.fit import shorten
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
    ContextFitted,
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
    ContextFit,
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
from engine.router import Attempt, Fitted, PartialDiscarded, ProviderEvent, Router
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
RETRY_ECHO = 400
"""Characters of an invalid structured reply shown back to the model with the error."""
EMPTY_RETRIES = 2
"""Times an empty question is asked for again before the session fails."""
RETRY_TEMPERATURE = 0.8
"""The temperature the last of those retries uses at least (the configured one when
higher); the first keeps the configured one."""


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
            hypothesis=session.hypothesis_text,
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
        self, messages: list[Message], max_tokens: int,
        schema: dict[str, Any] | None = None, name: str = "answer",
    ) -> StreamRequest:
        """The unfitted request: every round whole (what a window large enough is sent)."""
        return StreamRequest(
            messages=tuple(messages),
            schema=schema,
            schema_name=name,
            max_tokens=max_tokens,
            temperature=self.settings.temperature,
        )

    async def _round(self, sequence: int) -> AsyncGenerator[InterrogationEvent, None]:
        session, settings = self.session, self.settings
        hypothesis = session.hypothesis_text
        yield self._emit(Phase(phase="question", sequence=sequence))
        asked = _Turn()
        system = fill(load_prompt("detective_question"), HYPOTHESIS=hypothesis)
        turn = load_prompt("detective_turn")

        def frame(text: str) -> list[Message]:
            return [Message("system", system), Message("user", fill(
                turn, TRANSCRIPT=text, SEQUENCE=sequence, LIMIT=session.iteration_limit,
            ))]

        request: Prompt = transcript_prompt(
            self._request(frame(transcript(session.qa_pairs, analyses=True)),
                          settings.question_max_tokens),
            session.qa_pairs, frame, analyses=True,
        )
        try:
            async for event in self._call(request, "detective", asked, sequence, _nonempty):
                yield event
        except AllProvidersFailed as exc:
            # Models do reply with nothing now and then (a small one ends its turn at once, a
            # reasoning one spends its budget thinking): ask again, saying so; the last time
            # sampled (at temperature 0 a model that said nothing twice says nothing again).
            if not any(why.endswith(_EMPTY) for _, why in exc.failures):
                raise
            request = request.then(
                Message("assistant", "(empty)"),
                Message("user", fill(load_prompt("empty_question"), SEQUENCE=sequence)),
            )
            for attempt in range(1, EMPTY_RETRIES + 1):
                if attempt == EMPTY_RETRIES and (settings.temperature is not None
                                                 and settings.temperature < RETRY_TEMPERATURE):
                    request = replace(request, request=replace(
                        request.request, temperature=RETRY_TEMPERATURE))
                yield self._trail(AuditTrailEntry(event="error", role="detective",
                                                  reason=f"{_EMPTY}, asking again"))
                try:
                    async for event in self._call(request, "detective", asked, sequence,
                                                  _nonempty):
                        yield event
                    break
                except AllProvidersFailed as again:
                    empty = any(why.endswith(_EMPTY) for _, why in again.failures)
                    if not empty or attempt == EMPTY_RETRIES:
                        raise
        question = asked.text.strip()

        yield self._emit(Phase(phase="answer", sequence=sequence))
        answered = _Turn()
        witness = load_prompt("witness")
        request = witness_prompt(
            self._request([Message("system", witness),
                           *witness_messages(session.qa_pairs, question)],
                          settings.answer_max_tokens),
            witness, session.qa_pairs, question,
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
        analysis_prompt = load_prompt("gap_analysis")

        def analysis_frame(text: str) -> list[Message]:
            return [Message("system", fill(analysis_prompt, HYPOTHESIS=hypothesis,
                                           TRANSCRIPT=text)),
                    Message("user", "Analyse the last answer.")]

        rounds = [*session.qa_pairs, pending]
        request = transcript_prompt(
            self._request(
                analysis_frame(transcript(rounds, analyses=False)),
                settings.analysis_max_tokens,
                gap_schema(settings.max_gaps, settings.analysis_max_tokens), "gap_analysis",
            ),
            rounds, analysis_frame, analyses=False,
            reshape=lambda reply: gap_schema(settings.max_gaps, reply),
        )
        async for event in self._structured(
            request, analysed, "gap analysis", GapAnalysis.model_validate, sequence
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
        audit_prompt = load_prompt("audit")

        def frame(text: str) -> list[Message]:
            return [Message("system", fill(audit_prompt, HYPOTHESIS=session.hypothesis_text,
                                           TRANSCRIPT=text)),
                    Message("user", "Write the audit.")]

        request = transcript_prompt(
            self._request(frame(transcript(pairs, analyses=False)),
                          self.settings.audit_max_tokens,
                          audit_schema(len(pairs), self.settings.audit_max_tokens), "audit"),
            pairs, frame, analyses=False, every_round=True,
            reshape=lambda reply: audit_schema(len(pairs), reply),
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
        self, request: Prompt, turn: _Turn, what: str, validate: Callable[[Any], Any],
        sequence: int | None = None,
    ) -> AsyncGenerator[InterrogationEvent, None]:
        """A detective call whose reply must be valid JSON; retried once with the error."""
        schema = request.request.schema
        assert schema is not None
        for attempt in (1, 2):
            async for event in self._call(request, "detective", turn, None, fit_for=sequence):
                yield event
            try:
                turn.value = validate(collect_json(turn.provider, turn.text,
                                                   turn.finish_reason, schema))
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
            request = request.then(
                # the invalid reply is shown again only in part: it is there to point at the
                # error, and all of it would take the window from the transcript
                Message("assistant", shorten(turn.text, RETRY_ECHO) or "(empty)"),
                Message("user", fill(load_prompt("validation_retry"), ERROR=detail)),
            )

    async def _call(
        self,
        request: Prompt,
        role: Role,
        turn: _Turn,
        sequence: int | None,
        accept: Callable[[str, str, str], None] | None = None,
        fit_for: int | None = None,
    ) -> AsyncGenerator[InterrogationEvent, None]:
        """Stream one call over the role's chain; deltas only when `sequence` is given (the
        round the call belongs to is `fit_for` when no delta is wanted)."""
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
                    case Fitted(_, report):
                        yield self._fitted(role, sequence or fit_for, report)
                    case Done(finish_reason):
                        turn.text, turn.finish_reason = "".join(parts), finish_reason

    def _fitted(self, role: Role, sequence: int | None, report: FitReport) -> InterrogationEvent:
        trim = report.trim
        fit = ContextFit(
            role=role, sequence=sequence, provider=report.provider, used=report.used,
            window=report.window, window_source=report.window_source, counted=report.counted,
            reply=report.reply,
            asked_reply=report.asked_reply if report.reply_lowered else None,
            digested=list(trim.digested), shortened=list(trim.shortened),
            omitted=list(trim.omitted),
        )
        self.session.context_fits.append(fit)
        return self._emit(ContextFitted(fit=fit))

    def _label(self, name: str | None) -> str | None:
        return None if name is None else self._labels.get(name, name)

