"""The detective/witness loop of SPEC §1, as an async generator of typed events.

    journal = SessionStore(root).create(hypothesis, limit)
    async for event in Interrogation(router, journal, config.interrogation).run():
        match event:
            case QuestionDelta(text=text) | AnswerDelta(text=text): ...
            case JudgementReady(judgement=j, probability_false=p): ...
            case PairCompleted(pair=pair): ...       # stored before it is yielded
            case Finished(status=status): ...

Each round is made of calls a small model can make (issue 44): the detective asks one open
question for the hypothesis's key fact (`interrogation.asking`, from worked examples), the
witness answers (streamed, seeing only the questions and its own earlier answers, and its
document when it holds one), the detective judges that exchange alone — is the hypothesis
true given this answer? — one word, its probability read from log-probabilities
(`interrogation.judgement`), and writes its gap analysis. The **verdict is computed** from the
judgements (`interrogation.verdict`), never written by a model; the questioning closes once a
round's judgement settles it (at least `min_rounds`, one round a fact), else goes on up to the
limit. A hypothesis that states no claim is questioned for its gaps until the analysis is
satisfied, and ends `undetermined`. The audit then writes the narrative
(`interrogation.audit`), which cannot change the verdict.

A model's nonsense is named, never a result, and a rule of ours never fails a session: an
unusable question is asked for again (`interrogation.asking`; after `QUESTION_ATTEMPTS` the
questioning closes and the audit follows; the session fails only when not one round was
asked); an empty answer is kept as testimony (`no answer`) and judged silent; a
self-contradicting analysis is recorded and overruled; an invalid narrative is asked again
once, then stands in as "no audit" (the verdict stands). Each retry counts in the session's
`repairs`. A session with no real answer in any round ends `undetermined` before its audit.
Every event is recorded in the session's journal before it is yielded.
Cancelling the consumer (or closing the generator) stops both models and stores the session as
`cancelled`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing

from engine.config.models import InterrogationConfig
from engine.costs import Budget, CostLimitReached
from engine.errors import AllProvidersFailed, DetektivError, FailureFamily, failure_family
from engine.interrogation.asking import analyse, question as ask_question
from engine.interrogation.audit import audit as run_audit, nothing_to_audit
from engine.interrogation.calls import SessionCalls, Turn
from engine.interrogation.checks import answer_problem, bare_question, close_reason, may_close
from engine.interrogation.judgement import judge
from engine.interrogation.questions import NoQuestion
from engine.interrogation.shapes import asked_alone, claim_closes, least_rounds
from engine.interrogation.testimony import examine_testimony, is_testimony
from engine.interrogation.transcript import (
    witness_instructions,
    witness_messages,
    witness_opening,
    witness_prompt,
)
from engine.interrogation.verdict import compute, states_no_claim
from engine.models.events import (
    Advice,
    AnswerCutOff,
    AnswerSampled,
    AnswerUnusable,
    AuditReady,
    Finished,
    GapAnalysisReady,
    InterrogationEvent,
    JudgementReady,
    PairCompleted,
    Phase,
    Started,
)
from engine.models.judgement import Judgement
from engine.models.session import (
    GapAnalysis,
    ProvidersUsed,
    QuestionAnswerPair,
    SessionStatus,
    check_resumable,
    now,
)
from engine.models.trail import AuditTrailEntry
from engine.providers import Message
from engine.report.claims import testimony_reason
from engine.report.words import demonstration_note, document_cut, settled_reason
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
        self._no_claim = states_no_claim(self.session.hypothesis_text)
        """The hypothesis states no claim: its rounds are not judged."""
        self._facts = least_rounds(self.session.hypothesis_text)

    def _finish(self, status: SessionStatus, reason: str | None,
                family: FailureFamily = "failed") -> InterrogationEvent:
        session = self.session
        session.status, session.end_time = status, now()
        session.error = reason if status == "failed" else None
        self.journal.save()
        return self._emit(Finished(status=status, reason=reason,
                                   family=family if status == "failed" else None,
                                   usage=session.tokens.model_copy(deep=True)))

    def _judgements(self) -> list[tuple[int, Judgement | None]]:
        return [(pair.sequence, pair.judgement) for pair in self.session.qa_pairs]

    def _demonstration_judged(self) -> bool:
        """Whether a demonstration model speaks for the detective in this session."""
        return self.session.demonstration or self._is_demonstration(
            self._role_label("detective"))

    def _closes(self) -> bool:
        """Whether the questioning may close now (the loop's rule, not the model's flag)."""
        pairs, settings = self.session.qa_pairs, self.settings
        if self._no_claim:
            return may_close(pairs, self.session.iteration_limit, settings.satisfied_at,
                             settings.min_rounds)
        return claim_closes(self.session.hypothesis_text, pairs, settings.min_rounds,
                            self._facts)

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
        demo = demonstration_note(self._chain_configs("detective"))
        if demo and not session.demonstration:
            session.demonstration = True  # on the disk before any verdict is shown
            self.journal.save()
        if demo and not self.resumed:
            yield self._emit(Advice(text=demo))
        try:
            if is_testimony(session):
                async with aclosing(examine_testimony(self)) as events:
                    async for event in events:
                        yield event
                audit = session.audit_result
                assert audit is not None
                chain = self._chain_configs("detective")  # the split's, at least
                audit.demonstration = bool(chain and chain[0].is_demonstration) or any(
                    self._is_demonstration(label) for pair in session.qa_pairs
                    for label in (pair.provider_used.detective, pair.provider_used.witness))
                yield self._emit(Phase(phase="audit", sequence=len(session.qa_pairs)))
                yield self._emit(AuditReady(audit=audit))
                yield self._finish("completed", testimony_reason(session))
                return
            limit = session.iteration_limit
            while True:
                completed = self._closes()
                if completed or len(session.qa_pairs) >= limit:
                    break
                async with aclosing(self._round(len(session.qa_pairs) + 1)) as events:
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
            yield self._finish("completed" if completed else "limit-reached",
                               self._reason(completed, unaudited is not None))
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

    def _reason(self, completed: bool, unaudited: bool) -> str:
        """Why the run ended as it did, in one line."""
        session = self.session
        audit, pairs, limit = session.audit_result, session.qa_pairs, session.iteration_limit
        if unaudited and audit is not None:
            return f"nothing to audit, the verdict is undetermined: {audit.rule_broken}"
        if self._no_question:
            reason = f"questioning closed after round {len(pairs)}: {self._no_question}"
        elif self._no_claim or not completed:
            reason = close_reason(pairs, limit, completed)
        else:
            reason = settled_reason(len(pairs))
        if audit is not None and audit.rule_broken:
            reason += f"; {audit.rule_broken}"
        if audit is not None and audit.undetermined_because:
            reason += f"; the verdict is undetermined: {audit.undetermined_because}"
        return reason

    async def _round(self, sequence: int) -> AsyncGenerator[InterrogationEvent, None]:
        session = self.session
        before = session.tokens.model_copy(deep=True)
        asked = Turn()
        yield self._emit(Phase(phase="question", sequence=sequence))
        try:
            async for event in ask_question(self, sequence, asked):
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
        document = session.witness_document
        cut: list[bool] = []
        told = [] if asked_alone(session.hypothesis_text, question) else session.qa_pairs
        request = witness_prompt(
            self._request([Message("system", witness),
                           *witness_messages(told, question, opening)],
                          self.settings.answer_max_tokens),
            witness, told, question, opening,
            document.text if document is not None else None, cut,
        )
        async for event in self._call(request, "witness", answered, sequence):
            yield event
        if cut and not any(e.event == "document_cut" for e in session.audit_trail):
            assert document is not None
            yield self._trail(AuditTrailEntry(event="document_cut", role="witness",
                                              reason=document_cut(document.name)))
        cut_off = answered.finish_reason == "length"
        if cut_off:
            yield self._emit(AnswerCutOff(sequence=sequence, provider=answered.provider))
        samples: list[str] = []
        if session.protocol == "consistency":  # the same question, asked anew
            again = self._sampled(request)
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

        judgement: Judgement | None = None
        if not self._no_claim:
            yield self._emit(Phase(phase="judgement", sequence=sequence))
            judged: list[Judgement] = []
            async for event in judge(self, sequence, question, [answered.text, *samples],
                                     judged, named=problem,
                                     cut_off=answered.finish_reason == "length"):
                yield event
            judgement = judged[0]
            so_far = compute([*self._judgements(), (sequence, judgement)])
            yield self._emit(JudgementReady(sequence=sequence, judgement=judgement,
                                            verdict=so_far.verdict,
                                            probability_false=so_far.probability_false,
                                            demonstration=self._demonstration_judged()))

        yield self._emit(Phase(phase="analysis", sequence=sequence))
        pending = QuestionAnswerPair.model_construct(
            sequence=sequence, question=question, answer=answered.text, answer_cut_off=cut_off,
            answer_problem=problem, samples=samples,
        )
        analysis: GapAnalysis | None = None
        async for event in analyse(self, pending, sequence):
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
            judgement=judgement,
        )
        session.qa_pairs.append(pair)
        session.current_iteration = len(session.qa_pairs)
        # the round's checkpoint: on the disk before anyone is told (the journal's rule 2)
        yield self._emit(PairCompleted(pair=pair, tokens=session.tokens.model_copy(deep=True),
                                       repairs=session.repairs))
