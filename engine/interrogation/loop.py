"""An interrogation run (SPEC §1), as an async generator of typed events.

    journal = SessionStore(root).create(hypothesis, limit)
    async for event in Interrogation(router, journal, config.interrogation).run():
        match event:
            case QuestionDelta(text=text) | AnswerDelta(text=text): ...
            case JudgementReady(judgement=j, probability_false=p): ...
            case PairCompleted(pair=pair): ...       # stored before it is yielded
            case Finished(status=status): ...

Every step is a function of the session's caller (`interrogation.calls.Caller`) returning a
value; the caller journals each event and hands it to this generator's queue, which yields
it (`run`). What the run does:

- **A testimony** (the hypothesis asks, or states several sentences):
  `interrogation.testimony` — the witness's answer taken apart into claims, every claim
  examined by the signals, the result computed from the claims.
- **A single claim** (one sentence): examined as a testimony's claim is, by the same list of
  signals (`interrogation.signals`, `interrogation.examine`) — the detective's own reading,
  the sampled rounds (streamed here, each with the detective's gap analysis), the document's
  words where the witness holds one — pooled into its state and P(false), the verdict
  (`true` when held, `false` when contradicted or unsupported, else `undetermined`). The
  detective then writes the narrative (`interrogation.audit`), which cannot change it, and
  a sentence of it that states the opposite is shown marked (`audit.against_verdict`).
- **A hypothesis that states no claim**, from a session stored before testimonies (it has
  rounds): questioned for its gaps until the analysis is satisfied, `undetermined`.

A model's nonsense is named, never a result, and a rule of ours never fails a session: an
unusable question is asked for again (`interrogation.asking`; after `QUESTION_ATTEMPTS` the
questioning closes and the audit follows); an empty answer is kept as testimony (`no
answer`) and judged silent; a self-contradicting analysis is recorded and overruled; an
invalid narrative is asked again once, then stands in as "no audit" (the verdict stands).
Each retry counts in the session's `repairs`. A session with no real answer in any round
ends `undetermined` before its audit. Every event is recorded in the session's journal
before it is yielded. Cancelling the consumer (or closing the generator) stops both models
and stores the session as `cancelled`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path

from engine.config.models import InterrogationConfig
from engine.costs import Budget, CostLimitReached
from engine.errors import AllProvidersFailed, DetektivError, FailureFamily, failure_family
from engine.interrogation.audit import audit as narrative, nothing_to_audit
from engine.interrogation.calls import Caller
from engine.interrogation.checks import close_reason, may_close
from engine.interrogation.examine import claim_pairs, examine
from engine.interrogation.pooling import Mode, Pooling, load_pooling
from engine.interrogation.rounds import Asking, Closed, no_question, one_round
from engine.interrogation.signals import Case, chosen
from engine.interrogation.testimony import examine_testimony, is_testimony
from engine.interrogation.verdict import NO_CLAIM, Computed, states_no_claim
from engine.models.events import (
    Advice,
    AuditReady,
    ClaimExamined,
    Finished,
    InterrogationEvent,
    Phase,
    Started,
)
from engine.models.session import (
    AuditResult,
    QuestionAnswerPair,
    SessionStatus,
    VerdictValue,
    check_resumable,
    now,
)
from engine.models.testimony import Claim
from engine.models.trail import AuditTrailEntry
from engine.report.claims import testimony_reason
from engine.report.words import NOTHING_ASKED_REASON, demonstration_note, settled_reason
from engine.routing.router import Router
from engine.storage.journal import SessionJournal

__all__ = ["Interrogation", "claim_verdict"]

log = logging.getLogger(__name__)

_VERDICTS: dict[str, VerdictValue] = {"held": "true", "contradicted": "false",
                                      "unsupported": "false"}


def claim_verdict(claim: Claim, rounds: Sequence[QuestionAnswerPair]) -> Computed:
    """A single hypothesis's verdict from its examined claim: `true` when held, `false` when
    contradicted or unsupported, else `undetermined` (with why); the deciding rounds are
    those of its `rounds` that bore on it the verdict's way."""
    verdict = _VERDICTS.get(claim.state, "undetermined")
    p_false = claim.probability_false if claim.probability_false is not None else 0.5
    side = {"true": "supports", "false": "contradicts"}.get(verdict)
    deciding = [p.sequence for p in rounds if side is not None and p.judgement is not None
                and p.judgement.bearing == side]
    reason = "" if verdict != "undetermined" else (claim.why or "its readings leave it unsure")
    return Computed(verdict, p_false, deciding, reason)


class Interrogation:
    """One run of a session, new or resumed, over `router`, recorded in `journal`."""

    def __init__(
        self,
        router: Router,
        journal: SessionJournal,
        settings: InterrogationConfig,
        *,
        resumed: bool = False,
        budget: Budget | None = None,
        pool: Pooling | None = None,
    ) -> None:
        self.caller = Caller(router, journal, settings, budget)
        self.resumed = resumed
        self._pool = pool

    async def run(self) -> AsyncGenerator[InterrogationEvent, None]:
        """Run to the end; see the module docstring. Never raises for a model's failure: the
        session ends `failed` with the reason in `Finished` and the audit trail."""
        queue: asyncio.Queue[InterrogationEvent | None] = asyncio.Queue()
        self.caller.sink = queue.put_nowait
        task = asyncio.ensure_future(self._run(queue))
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            self.caller.journal.close()

    def _finish(self, status: SessionStatus, reason: str | None,
                family: FailureFamily = "failed") -> None:
        session = self.caller.session
        session.status, session.end_time = status, now()
        session.error = reason if status == "failed" else None
        self.caller.journal.save()
        self.caller.emit(Finished(status=status, reason=reason,
                                  family=family if status == "failed" else None,
                                  usage=session.tokens.model_copy(deep=True)))

    def _pooling(self) -> Pooling:
        """The pool this run weighs readings by: the run's, the configured file, or the
        shipped one (a configured file that cannot be used is named once, in the trail)."""
        if self._pool is not None:
            return self._pool
        configured = self.caller.settings.pooling
        pool, refused = load_pooling(Path(configured).expanduser() if configured else None)
        if refused is not None:
            self.caller.emit(Advice(text=refused.message))
        self._pool = pool
        return pool

    async def _run(self, queue: asyncio.Queue[InterrogationEvent | None]) -> None:
        caller = self.caller
        session = caller.session
        try:
            if self.resumed:
                check_resumable(session)
                previous = session.status
                session.status, session.end_time, session.error = "running", None, None
                session.audit_result = None
                caller.trail(AuditTrailEntry(
                    event="resumed",
                    reason=f"resumed after round {len(session.qa_pairs)} "
                    + ("(the process running it had died)" if previous == "running"
                       else f"(was {previous})"),
                ))
                caller.journal.save()
            caller.emit(Started(
                session_id=str(session.id),
                hypothesis=session.hypothesis_text,
                iteration_limit=session.iteration_limit,
                resumed_after=len(session.qa_pairs) if self.resumed else None,
            ))
            demo = demonstration_note(caller.chain("detective"))
            if demo and not session.demonstration:
                session.demonstration = True  # on the disk before any verdict is shown
                caller.journal.save()
            if demo and not self.resumed:
                caller.emit(Advice(text=demo))
            if is_testimony(session):
                await self._testimony()
            elif states_no_claim(session.hypothesis_text):
                await self._no_claim()
            else:
                await self._single()
        except AllProvidersFailed as exc:
            caller.trail(AuditTrailEntry(event="error", role=exc.role, reason=exc.message))
            self._finish("failed", exc.message, failure_family(exc))
        except CostLimitReached as exc:  # before a call, nothing half done: a clean stop
            caller.trail(AuditTrailEntry(event="cost_limit", reason=exc.message))
            self._finish("cancelled", exc.message)
        except asyncio.CancelledError:
            self._finish("cancelled", "stopped by the user")
            raise
        except Exception as exc:  # a bug must not lose the session: store it as failed
            log.exception("interrogation %s failed", session.id)
            reason = exc.message if isinstance(exc, DetektivError) else \
                f"internal error: {type(exc).__name__} (details in the log)"
            self._finish("failed", reason)
        finally:
            queue.put_nowait(None)

    # ---- a testimony ------------------------------------------------------------------------

    async def _testimony(self) -> None:
        caller = self.caller
        session = caller.session
        audit = await examine_testimony(caller, self._pooling())
        chain = caller.chain("detective")  # the split's, at least
        audit.demonstration = bool(chain and chain[0].is_demonstration) or any(
            caller.is_demonstration(label) for pair in session.qa_pairs
            for label in (pair.provider_used.detective, pair.provider_used.witness))
        session.audit_result = audit
        caller.emit(Phase(phase="audit", sequence=len(session.qa_pairs)))
        caller.emit(AuditReady(audit=audit))
        self._finish("completed", testimony_reason(session))

    # ---- a single claim ---------------------------------------------------------------------

    def _mode(self) -> Mode:
        return "document" if self.caller.session.witness_document is not None else "open"

    async def _single(self) -> None:
        caller, settings = self.caller, self.caller.settings
        session = caller.session
        claim = session.claim or Claim(number=1, text=session.hypothesis_text)
        pairs = claim_pairs(session.qa_pairs, claim, single=True)
        document = session.witness_document
        limit = session.iteration_limit
        # an evaluation's claim of a testimony (its question given) is examined as a
        # testimony examines its claims: `claim_rounds`, each round's analysis computed
        rounds = limit if session.topic is None else min(limit, settings.claim_rounds)
        case = Case(claim=claim, topic=session.topic, samples=tuple(session.samples or ()),
                    document=document.text if document is not None else None, single=True,
                    rounds_left=max(0, rounds - len(pairs)), pairs=pairs)
        examined = await examine(caller, case, chosen(settings.signals), self._pooling(),
                                 self._mode())
        session.claim = examined
        caller.emit(ClaimExamined(claim=examined.model_copy(),
                                  tokens=session.tokens.model_copy(deep=True),
                                  repairs=session.repairs, single=True))
        computed = claim_verdict(examined, claim_pairs(session.qa_pairs, examined, True))
        questioned = examined.readings.get("rounds")
        asked_none = no_question(questioned.why if questioned is not None else None)
        caller.emit(Phase(phase="audit", sequence=len(session.qa_pairs)))
        unaudited = nothing_to_audit(caller, asked_none) if not session.qa_pairs or \
            not any(p.answered for p in session.qa_pairs) else None
        if unaudited is not None:  # a rule of ours closed it: named, never `failed`
            result = unaudited
            if (session.qa_pairs or examined.readings) and (
                    computed.verdict != "undetermined" or not session.witness_unasked):
                result = _verdict_of(result, computed)
        else:
            result = await narrative(caller, computed)
        session.audit_result = result
        caller.emit(AuditReady(audit=result))
        settled = computed.verdict != "undetermined"
        self._finish("completed" if settled or len(session.qa_pairs) < limit
                     else "limit-reached", self._reason(asked_none, result,
                                                        unaudited is not None))

    def _reason(self, asked_none: str | None, audit: AuditResult, unaudited: bool) -> str:
        """Why the run ended as it did, in one line (`asked_none`: why no usable question
        came, when none did; `unaudited`: the models gave nothing to audit)."""
        pairs = self.caller.session.qa_pairs
        if unaudited:
            opening = NOTHING_ASKED_REASON if self.caller.session.witness_unasked \
                else "nothing to audit"
            return f"{opening}, the verdict is {audit.verdict}: {audit.rule_broken}"
        if asked_none is not None:
            reason = f"questioning closed after round {len(pairs)}: {asked_none}"
        elif audit.verdict in ("true", "false"):
            reason = settled_reason(len(pairs))
        else:
            reason = close_reason(pairs, self.caller.session.iteration_limit, False)
        if audit.rule_broken:
            reason += f"; {audit.rule_broken}"
        if audit.undetermined_because and audit.undetermined_because not in reason:
            reason += f"; the verdict is undetermined: {audit.undetermined_because}"
        return reason

    # ---- a hypothesis that states no claim (stored before testimonies) ----------------------

    async def _no_claim(self) -> None:
        caller, settings = self.caller, self.caller.settings
        session = caller.session
        limit = session.iteration_limit
        asking = Asking(claim=session.hypothesis_text, single=True, number=None, samples=1,
                        temperature=None, judged=False, conversation=True)
        why: str | None = None
        while not may_close(session.qa_pairs, limit, settings.satisfied_at,
                            settings.min_rounds) and len(session.qa_pairs) < limit:
            done = await one_round(caller, asking, list(session.qa_pairs),
                                   len(session.qa_pairs) + 1)
            if isinstance(done, Closed):
                why = no_question(done.why)
                break
        computed = Computed("undetermined", 0.5, reason=NO_CLAIM)
        caller.emit(Phase(phase="audit", sequence=len(session.qa_pairs)))
        unaudited = nothing_to_audit(caller, why)
        result = unaudited if unaudited is not None else await narrative(caller, computed)
        session.audit_result = result
        caller.emit(AuditReady(audit=result))
        completed = why is not None or may_close(session.qa_pairs, limit,
                                                 settings.satisfied_at, settings.min_rounds)
        reason = (f"{NOTHING_ASKED_REASON}: {why}" if not session.qa_pairs else
                  f"questioning closed after round {len(session.qa_pairs)}: {why}") if why \
            else close_reason(session.qa_pairs, limit, completed)
        self._finish("completed" if completed else "limit-reached", reason)


def _verdict_of(result: AuditResult, computed: Computed) -> AuditResult:
    """A stand-in audit with the verdict its claim's readings computed (they may decide it
    where no round could be asked)."""
    result.verdict, result.probability_false = computed.verdict, computed.probability_false
    result.deciding_rounds, result.computed = list(computed.deciding), True
    result.undetermined_because = computed.reason or result.undetermined_because
    return result
