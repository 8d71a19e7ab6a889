"""The detective/witness loop of SPEC §1, as an async generator of typed events.

    journal = SessionStore(root).create(hypothesis, limit)
    async for event in Interrogation(router, journal, config.interrogation).run():
        match event:
            case QuestionDelta(text=text) | AnswerDelta(text=text): ...
            case PairCompleted(pair=pair): ...       # stored before it is yielded
            case Finished(status=status): ...

Each round: the detective asks one question (streamed), the witness answers (streamed, seeing
only the questions and its own earlier answers), the detective returns a `GapAnalysis` in
structured output. The loop, not the detective, decides when to stop (`interrogation.checks`: at
least `min_rounds`, completeness at `satisfied_at`, no high-severity gap; else up to the
limit), then the detective audits the whole session and gives its verdict
(`interrogation.audit`). How often a question is asked for, and what holds a demonstration
model's, is `interrogation.questions`.

A model's nonsense is named, never a result, and a rule of ours never fails a session: an
unusable question is asked for again of the same provider (the problem said in the user's
turn, never as words put in the model's mouth; only the last try may go on to the next
provider), and after `QUESTION_ATTEMPTS` the questioning closes and the audit follows (the
session fails only when not one round was asked); an empty answer is kept as testimony (`no
answer`); a self-contradicting analysis is recorded and overruled; a structured reply that
fails validation (its schema, an empty or boilerplate summary, a verdict that contradicts
itself or its own comparisons) is asked again once with the rule it broke, and a second miss
stands in: an analysis as "completeness 0, follow-up needed", an audit as an `undetermined`
verdict that names the rule (the invalid reply kept). Each retry counts in the session's
`repairs`. A session with no real answer in any round fails before its audit. Every
event is recorded in the session's journal before it is yielded.
Cancelling the consumer (or closing the generator) stops both models and stores the session as
`cancelled`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import replace

from engine.config.models import InterrogationConfig
from engine.context.budget import Prompt
from engine.costs import Budget, CostLimitReached
from engine.errors import (
    AllProvidersFailed,
    DetektivError,
    FailureFamily,
    UnusableReplyError,
    failure_family,
)
from engine.interrogation.audit import audit as run_audit, nothing_to_audit
from engine.interrogation.calls import SessionCalls, Turn
from engine.interrogation.checks import (
    analysis_conflict,
    answer_problem,
    bare_question,
    budget_spent,
    close_reason,
    may_close,
    question_problem,
)
from engine.interrogation.questions import (
    DEMONSTRATION_ATTEMPTS,
    QUESTION_ATTEMPTS,
    QUESTION_GRAMMAR,
    RETRY_TEMPERATURE,
    NoQuestion,
)
from engine.interrogation.transcript import (
    gap_schema,
    protocol_note,
    transcript,
    transcript_prompt,
    witness_instructions,
    witness_messages,
    witness_opening,
    witness_prompt,
)
from engine.models.events import (
    Advice,
    AnswerCutOff,
    AnswerSampled,
    AnswerUnusable,
    AuditReady,
    Discarded,
    Finished,
    GapAnalysisReady,
    InterrogationEvent,
    PairCompleted,
    Phase,
    Started,
)
from engine.models.session import (
    GapAnalysis,
    ProvidersUsed,
    QuestionAnswerPair,
    SessionStatus,
    check_resumable,
    now,
)
from engine.models.trail import AuditTrailEntry
from engine.prompts import fill, load_prompt
from engine.providers import Message
from engine.report.words import demonstration_note, no_usable_question
from engine.routing.router import Router
from engine.storage.journal import SessionJournal

__all__ = ["Interrogation"]

log = logging.getLogger(__name__)


class Interrogation(SessionCalls):
    """One run of a session, new or resumed, over `router`, recorded in `journal`."""

    def __init__(
        self,
        router: Router,
        journal: SessionJournal,
        settings: InterrogationConfig,
        *,
        resumed: bool = False,
        budget: Budget | None = None,
    ) -> None:
        super().__init__(router, journal, settings, budget)
        self.resumed = resumed
        self._no_question: str | None = None
        """Why the questioning closed early: the detective gave no usable question."""

    def _finish(self, status: SessionStatus, reason: str | None,
                family: FailureFamily = "failed") -> InterrogationEvent:
        session = self.session
        session.status, session.end_time = status, now()
        session.error = reason if status == "failed" else None
        self.journal.save()
        return self._emit(Finished(status=status, reason=reason,
                                   family=family if status == "failed" else None,
                                   usage=session.tokens.model_copy(deep=True)))

    async def run(self) -> AsyncGenerator[InterrogationEvent, None]:
        """Run to the end; see the module docstring. Never raises for a model's failure: the
        session ends `failed` with the reason in `Finished` and the audit trail."""
        session, settings = self.session, self.settings
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
        demo = demonstration_note(self._chain_configs("detective"))
        if demo and not self.resumed:
            yield self._emit(Advice(text=demo))
        try:
            limit = session.iteration_limit
            while True:
                pairs = session.qa_pairs
                completed = may_close(pairs, limit, settings.satisfied_at, settings.min_rounds)
                if completed or len(pairs) >= limit:
                    break
                async with aclosing(self._round(len(pairs) + 1)) as events:
                    async for event in events:
                        yield event
                if self._no_question is not None:  # questioning closed by a rule of ours
                    completed = True
                    break
            unaudited = nothing_to_audit(self, self._no_question)
            yield self._emit(Phase(phase="audit", sequence=len(session.qa_pairs)))
            if unaudited is not None:  # a rule of ours closed it: named, never `failed`
                session.audit_result = unaudited
                yield self._emit(AuditReady(audit=unaudited))
            else:
                async with aclosing(run_audit(self)) as events:
                    async for event in events:
                        yield event
            audit = session.audit_result
            reason = (f"questioning closed after round {len(session.qa_pairs)}: "
                      f"{self._no_question}" if self._no_question
                      else close_reason(session.qa_pairs, limit, completed))
            if unaudited is not None:
                reason = f"nothing to audit, the verdict is undetermined: {unaudited.rule_broken}"
            elif audit is not None and audit.rule_broken:
                reason = f"{reason}; the verdict is undetermined: {audit.rule_broken}"
            yield self._finish("completed" if completed else "limit-reached", reason)
        except AllProvidersFailed as exc:
            yield self._trail(AuditTrailEntry(event="error", role=exc.role, reason=exc.message))
            yield self._finish("failed", exc.message, failure_family(exc))
        except CostLimitReached as exc:  # before a call, nothing half done: a clean stop
            yield self._trail(AuditTrailEntry(event="cost_limit", reason=exc.message))
            yield self._finish("cancelled", exc.message)
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

    async def _round(self, sequence: int) -> AsyncGenerator[InterrogationEvent, None]:
        session = self.session
        before = session.tokens.model_copy(deep=True)
        asked = Turn()
        yield self._emit(Phase(phase="question", sequence=sequence))
        try:
            async for event in self._question(sequence, asked):
                yield event
        except NoQuestion as exc:
            self._no_question = exc.message
            yield self._trail(AuditTrailEntry(event="degenerate_output", role="detective",
                                              reason=f"questioning closed: {exc.message}"))
            return
        question = bare_question(asked.text)

        yield self._emit(Phase(phase="answer", sequence=sequence))
        answered = Turn()
        witness, opening = witness_opening(session.witness_brief)
        request = witness_prompt(
            self._request([Message("system", witness),
                           *witness_messages(session.qa_pairs, question, opening)],
                          self.settings.answer_max_tokens),
            witness, session.qa_pairs, question, opening,
        )
        async for event in self._call(request, "witness", answered, sequence):
            yield event
        cut_off = answered.finish_reason == "length"
        if cut_off:
            yield self._emit(AnswerCutOff(sequence=sequence, provider=answered.provider))
        samples: list[str] = []
        if session.protocol == "consistency":  # the same question, asked anew
            hotter = max(self.settings.consistency_temperature,
                         self.settings.temperature or 0.0)
            again = replace(request, request=replace(request.request, temperature=hotter))
            for number in range(2, session.consistency_samples + 1):
                sampled = Turn()
                async for event in self._call(again, "witness", sampled, None,
                                              fit_for=sequence):
                    yield event
                samples.append(sampled.text)
                yield self._emit(AnswerSampled(
                    sequence=sequence, number=number, of=session.consistency_samples,
                    provider=sampled.provider, text=sampled.text))
        problem = answer_problem(answered.text, question, answered.finish_reason,
                                 answered.reasoning, [witness_instructions(session.witness_brief)])
        if problem is not None:  # testimony all the same: kept, named, pressed on
            yield self._emit(AnswerUnusable(sequence=sequence, provider=answered.provider,
                                            problem=problem))

        yield self._emit(Phase(phase="analysis", sequence=sequence))
        pending = QuestionAnswerPair.model_construct(
            sequence=sequence, question=question, answer=answered.text, answer_cut_off=cut_off,
            answer_problem=problem, samples=samples,
        )
        analysis: GapAnalysis | None = None
        async for event in self._analyse(pending, sequence):
            if isinstance(event, GapAnalysisReady):
                analysis = event.analysis
            yield event
        assert analysis is not None
        pair = QuestionAnswerPair(
            sequence=sequence,
            question=question,
            answer=answered.text,
            gap_analysis=analysis,
            provider_used=ProvidersUsed(detective=asked.provider, witness=answered.provider),
            answer_cut_off=cut_off,
            answer_problem=problem,
            usage=session.tokens.since(before),
            samples=samples,
        )
        session.qa_pairs.append(pair)
        session.current_iteration = len(session.qa_pairs)
        self.journal.save()  # the pair is durable before anyone is told it is complete
        yield self._emit(PairCompleted(pair=pair))

    async def _question(self, sequence: int, asked: Turn
                         ) -> AsyncGenerator[InterrogationEvent, None]:
        """Stream a usable question into `asked`. An unusable one is asked for again of the
        same provider, told the rule it broke (in the user's turn); only the last attempt may
        go on to the chain's next provider. After `QUESTION_ATTEMPTS`, `NoQuestion` says why
        (a rule of ours: the loop closes the questioning, it does not fail the session)."""
        session, settings = self.session, self.settings
        hypothesis = session.hypothesis_text
        brief = session.witness_brief
        claim_answer, claim_question = (brief.answer, brief.question) if brief else (None, None)
        system_template, turn = load_prompt("detective_question"), load_prompt("detective_turn")
        system = fill(system_template, HYPOTHESIS=hypothesis)
        earlier = [pair.question for pair in session.qa_pairs]
        rejected: list[tuple[str, str]] = []

        def frame(text: str) -> list[Message]:
            return [Message("system", system), Message("user", fill(
                turn, TRANSCRIPT=text, SEQUENCE=sequence, LIMIT=session.iteration_limit))]

        prompt: Prompt = transcript_prompt(
            self._request(frame(transcript(session.qa_pairs, analyses=True)),
                          settings.question_max_tokens, grammar=QUESTION_GRAMMAR),
            session.qa_pairs, frame, analyses=True,
        )
        chain = self._chain_configs("detective")
        attempts = DEMONSTRATION_ATTEMPTS if chain and chain[0].is_demonstration \
            else QUESTION_ATTEMPTS
        for attempt in range(1, attempts + 1):
            last = attempt == attempts

            def accept(provider: str, text: str, finish_reason: str,
                       last: bool = last) -> str | None:
                problem = budget_spent("the detective", text, finish_reason) or \
                    question_problem(text, hypothesis, earlier, (system_template, turn),
                                     claim_answer, claim_question)
                if problem is None:
                    return None
                rejected.append((self._labels.get(provider, provider), problem))
                if last:  # the next provider of the chain may do better
                    raise UnusableReplyError(provider, problem)
                return problem

            if last and (settings.temperature is not None
                         and settings.temperature < RETRY_TEMPERATURE):
                prompt = replace(prompt, request=replace(prompt.request,
                                                         temperature=RETRY_TEMPERATURE))
            tried = len(rejected)
            try:
                async for event in self._call(prompt, "detective", asked, sequence, accept):
                    yield event
            except AllProvidersFailed:
                if len(rejected) == tried:  # no model spoke nonsense: the providers failed
                    raise
            else:
                if len(rejected) == tried:
                    return
                label, problem = rejected[-1]
                yield self._emit(Discarded(role="detective", provider=label, text=asked.text,
                                           reason=problem))
                yield self._trail(AuditTrailEntry(
                    event="degenerate_output", role="detective", from_provider=label,
                    reason=problem))
            label, problem = rejected[-1]
            if last:
                raise NoQuestion(no_usable_question(
                    label, attempts, problem, self._is_demonstration(label)))
            session.repairs += 1
            prompt = prompt.noted(fill(load_prompt("question_retry"), SEQUENCE=sequence,
                                       PROBLEM=problem))

    async def _analyse(self, pending: QuestionAnswerPair, sequence: int
                       ) -> AsyncGenerator[InterrogationEvent, None]:
        """The detective's gap analysis of `pending`; a self-contradiction is recorded (the
        loop's rule decides instead)."""
        session, settings = self.session, self.settings
        analysed = Turn()
        analysis_prompt = load_prompt("gap_analysis")
        note = protocol_note(session.protocol, session.consistency_samples)

        def analysis_frame(text: str) -> list[Message]:
            return [Message("system", fill(analysis_prompt, HYPOTHESIS=session.hypothesis_text,
                                           TRANSCRIPT=note + text)),
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
        analysis: GapAnalysis
        if analysed.invalid is not None:  # the loop's rule asks on
            analysis = GapAnalysis(gaps=[], completeness_score=0, requires_follow_up=True,
                                   invalid=analysed.invalid)
        else:
            analysis = analysed.value
        conflict = analysis_conflict(analysis)
        if conflict is not None:
            yield self._trail(AuditTrailEntry(
                event="contradictory_analysis", role="detective",
                from_provider=analysed.provider,
                reason=f"the analysis of answer {sequence} contradicts itself: {conflict}; "
                "the loop's rule decides",
            ))
        yield self._emit(GapAnalysisReady(sequence=sequence, analysis=analysis))
