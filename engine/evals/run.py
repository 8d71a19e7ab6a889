"""An evaluation run: every item a real interrogation, run concurrently, resumable.

    run = await workspace.evals.start(EvalRequest(dataset="demo"), runs=3, baselines=True)
    async for event in run.events():
        match event:
            case EvalStarted(total=total, skipped=skipped): ...
            case EvalItemDone(result=result, done=done, failed=failed, tokens=tokens): ...
            case EvalFinished(status=status): ...

Each item is put to the witness (`planted` or `defend`, `WitnessBrief`) and interrogated
through the workspace's sessions like any other run: stored, tagged with the run
(`EvalTag`), openable in the app. Its computed verdict and probability-false are the result.
`runs` repeats are independent interrogations (sampled at the configured temperature: at 0
they can only repeat each other). Baselines on the same items, models and router: the
detective judging the claim alone (`direct`), and the witness asked once "Are you sure?"
with the detective judging that exchange (`are-you-sure`; both in `engine.evals.baselines`).

All of it goes through one router of the run's own (rate limits, fallback and circuit
breakers apply across items; the response cache is bypassed: a repeat must not be served
the first one's answers). `concurrency` items run at once (default: the slots the witness
and detective servers report, else 4). Rerunning the same request finds the same folder
(`engine.evals.folder`) and skips what is finished; an item whose session was cut short by a
kill resumes that session.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol as Interface

from engine.errors import (
    AllProvidersFailed,
    DetektivError,
    SessionError,
    SessionNotFound,
)
from engine.evals.baselines import Baselines
from engine.evals.folder import EvalKind, EvalResult, EvalRunInfo, RunFolder
from engine.evals.items import EvalItem, Items, brief_for, document_for
from engine.evals.selfcheck import score as selfcheck
from engine.interrogation.claims import testimony_source
from engine.interrogation.judgement import sample_problem
from engine.memory import give_back_memory
from engine.models.event import Event
from engine.models.events import InterrogationEvent
from engine.models.session import (
    EvalTag,
    InterrogationSession,
    Protocol,
    WitnessMode,
)
from engine.models.usage import TokenTally

if TYPE_CHECKING:
    from engine.config.models import InterrogationConfig
    from engine.costs import Budget
    from engine.routing.router import Router

__all__ = [
    "DEFAULT_CONCURRENCY",
    "EvalEvent",
    "EvalFinished",
    "EvalItemDone",
    "EvalRequest",
    "EvalRun",
    "EvalStarted",
    "run_id",
]


class SessionRun(Interface):
    """A session taken to be run, as the sessions an evaluation is handed give it
    (`engine.workspace.sessions.Run`)."""

    settings: InterrogationConfig | None
    budget: Budget | None

    @property
    def session(self) -> InterrogationSession: ...

    def events(self) -> AsyncGenerator[InterrogationEvent, None]: ...


@dataclass(frozen=True, slots=True)
class Sessions:
    """What an evaluation needs of the sessions it runs, handed to it by the workspace (its
    `Sessions.start`, `Sessions.resume` and the store's `load`): the evaluation floor never
    reaches up for the workspace itself."""

    start: Callable[..., SessionRun]
    resume: Callable[..., SessionRun]
    load: Callable[[str], InterrogationSession]

log = logging.getLogger(__name__)

TRIM_EVERY = 256
"""Items after which the freed C heap is given back (`engine.memory`)."""

PROTOCOL_KIND: dict[Protocol, EvalKind] = {"cross-exam": "interrogation",
                                          "consistency": "consistency"}
"""The results kind each interrogation protocol is judged as."""
KIND_PROTOCOL: dict[str, Protocol] = {kind: protocol for protocol, kind in PROTOCOL_KIND.items()}

DEFAULT_CONCURRENCY = 4
"""Items at once when no server says how many it serves."""


@dataclass(frozen=True, slots=True)
class EvalRequest:
    """What to evaluate: the items (dataset, sample) and how (mode, models, rounds). Two
    requests that are equal here are the same run (its folder and what it finished)."""

    dataset: str
    n: int | None = None
    seed: int = 0
    mode: WitnessMode = "planted"
    detective: tuple[str, ...] = ()
    witness: tuple[str, ...] = ()
    limit: int | None = None


def run_id(request: EvalRequest, checksum: str, limit: int) -> str:
    """The run's id: a digest of the dataset's bytes and everything that shapes a result
    (not `runs`, `baselines` or `concurrency`: those add to a run or speed it)."""
    key = json.dumps({"checksum": checksum, "n": request.n, "seed": request.seed,
                      "mode": request.mode, "detective": list(request.detective),
                      "witness": list(request.witness), "limit": limit}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:10]


class EvalStarted(Event):
    """The run began: `total` units of work (items × repeats, plus baselines), `skipped`
    of them finished by an earlier run."""

    type: Literal["eval_started"] = "eval_started"
    run: str
    total: int
    skipped: int
    concurrency: int
    demonstration: bool = False


class EvalItemDone(Event):
    """One unit finished (stored in results.jsonl before this is yielded)."""

    type: Literal["eval_item_done"] = "eval_item_done"
    result: EvalResult
    done: int
    """Units finished so far, this run's and the skipped ones."""
    failed: int
    total: int
    tokens: int
    """Tokens used by this run so far."""
    elapsed: float
    waited: float = 0.0
    """Seconds this run's calls have waited so far for a rate limit or a free replica."""


class EvalFinished(Event):
    """The run ended: `completed` (every unit has a result) or `cancelled`."""

    type: Literal["eval_finished"] = "eval_finished"
    run: str
    status: Literal["completed", "cancelled"]
    done: int
    failed: int
    total: int


EvalEvent = EvalStarted | EvalItemDone | EvalFinished


@dataclass(frozen=True, slots=True)
class Unit:
    item: EvalItem
    kind: EvalKind
    repeat: int = 1


@dataclass(slots=True)
class _Tally:
    done: int = 0
    failed: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)


class EvalRun:
    """A run ready to go; `events()` runs it (cancel the reading task to stop it: finished
    units stay, the sessions under way are stored `cancelled` and resume next time)."""

    def __init__(self, sessions: Sessions, settings: InterrogationConfig, folder: RunFolder,
                 info: EvalRunInfo, items: Items, router: Router, *, runs: int,
                 baselines: bool, concurrency: int, retry_failed: bool = False,
                 protocols: tuple[Protocol, ...] = ("cross-exam",)) -> None:
        self.sessions = sessions
        self.settings = settings
        self.folder = folder
        self.info = info
        self.items = items
        self.router = router
        self.runs = runs
        self.baselines = baselines
        self.concurrency = concurrency
        self.retry_failed = retry_failed
        self.protocols = protocols
        self.budget: Budget | None = None
        """`--max-cost`, shared by every unit: once the next call would pass it, that unit
        stops `cancelled` ("cost limit") and no further unit starts (the run is then
        `cancelled`; the same command with a larger budget goes on)."""
        self._drawn: dict[str, asyncio.Future[list[str]]] = {}
        """Each testimony's samples (`Baselines.draw`), drawn once for all its claims' units
        by the first that needs them (on this event loop, the run's one owner)."""

    @property
    def id(self) -> str:
        return self.info.id

    def _sampled(self, item: EvalItem) -> bool:
        """Whether `item` is a claim of a testimony the witness gave (`open` mode), whose
        question the witness answers again: its session reads it against those samples."""
        settings = self.settings
        return item.testimony is not None and bool(item.question) and \
            self.info.mode == "open" and testimony_source(item.claim) != "given" and \
            max(settings.testimony_samples, settings.rounds_samples) > 0

    def _draws(self) -> int:
        """Answers drawn again for each testimony: the sessions read the first
        `testimony_samples`; SelfCheckGPT reads `rounds_samples` of them (as many answers as
        the sampled rounds draw a question)."""
        settings = self.settings
        return max(settings.testimony_samples, settings.rounds_samples)

    def waited(self) -> float:
        """Seconds calls of this run's providers have waited for a rate limit or a free
        replica (`ReplicatedProvider.waited`), in all."""
        return sum(float(getattr(p, "waited", 0.0)) for p in self.router.providers.values())

    def units(self) -> Iterator[Unit]:
        for item in self.items:
            for protocol in self.protocols:
                for repeat in range(1, self.runs + 1):
                    yield Unit(item, PROTOCOL_KIND[protocol], repeat)
            if self.baselines and item.label is not None:  # a question has no claim yet
                if self.info.mode == "document":  # elsewhere the sessions read it (`alone`)
                    yield Unit(item, "direct")
                if testimony_source(item.claim) != "given":  # a summary states no one answer
                    yield Unit(item, "are-you-sure")          # to ask "Are you sure?" of
                if self.info.mode == "document":
                    yield Unit(item, "reader")
                elif self._sampled(item):
                    yield Unit(item, "selfcheck")  # SelfCheckGPT's scorer on the samples

    async def events(self) -> AsyncGenerator[EvalEvent, None]:
        """Run every unit not finished yet, `concurrency` at once; see the module docstring.
        The router is closed at the end."""
        # what was finished before: a key and a flag each (the items themselves are read
        # from the file as the workers take them, so a run holds only those in flight)
        finished = {key: result.failed for key, result in self.folder.latest().items()}

        def to_do(unit: Unit) -> bool:
            """Not finished before, or failed and `--retry-failed`."""
            failed = finished.get((unit.item.key, unit.kind, unit.repeat))
            return failed is None or (self.retry_failed and failed)

        tally = _Tally()
        total = todo = 0
        for unit in self.units():
            total += 1
            if to_do(unit):
                todo += 1
            else:
                tally.done += 1
                tally.failed += int(finished[(unit.item.key, unit.kind, unit.repeat)])
        skipped = tally.done
        yield EvalStarted(run=self.id, total=total, skipped=skipped,
                          concurrency=self.concurrency, demonstration=self.info.demonstration)
        sessions = self.folder.sessions()
        queue: asyncio.Queue[EvalResult] = asyncio.Queue()
        pending = (unit for unit in self.units() if to_do(unit))

        budget = self.budget

        async def worker() -> None:
            for unit in pending:  # one shared iterator: each unit taken once
                if budget is not None and budget.stopped:
                    return  # the cost limit: no further unit starts
                result = await self._unit(unit, sessions)
                if budget is not None and budget.stopped and result.failed:
                    return  # stopped by the limit: not a result (rerunning judges it)
                self.folder.add_result(result)
                await queue.put(result)

        workers = [asyncio.create_task(worker()) for _ in range(max(1, self.concurrency))]
        status: Literal["completed", "cancelled"] = "cancelled"
        try:
            for _ in range(todo):
                getter = asyncio.ensure_future(queue.get())
                waiting = {getter, *[w for w in workers if not w.done()]}
                while not getter.done():
                    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                    for task in workers:  # a worker that died of a bug must not hang us
                        if task.done() and not task.cancelled() and task.exception():
                            getter.cancel()
                            raise task.exception()  # type: ignore[misc]
                    waiting = {getter, *[w for w in workers if not w.done()]}
                    if waiting == {getter} and queue.empty() and not getter.done():
                        break  # every worker stopped early (the cost limit)
                if not getter.done():
                    getter.cancel()
                    break
                result = getter.result()
                tally.done += 1
                tally.failed += int(result.failed)
                tally.tokens += result.tokens
                if tally.done % TRIM_EVERY == 0:
                    give_back_memory()
                yield EvalItemDone(result=result, done=tally.done, failed=tally.failed,
                                   total=total, tokens=tally.tokens,
                                   elapsed=time.monotonic() - tally.started,
                                   waited=self.waited())
            else:
                status = "completed"
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await self.router.aclose()
            info = self.info.model_copy(update={"updated": datetime.now(UTC)})
            self.folder.save_info(info)
        yield EvalFinished(run=self.id, status=status, done=tally.done, failed=tally.failed,
                           total=total)

    # ---- one unit -------------------------------------------------------------------------

    async def _unit(self, unit: Unit, sessions: dict[tuple[str, str, int], str]
                    ) -> EvalResult:
        started = time.monotonic()
        try:
            if unit.kind in KIND_PROTOCOL:
                return await self._interrogate(unit, sessions, started)
            return await self._baseline(unit, started)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not stop the other items: named, counted
            log.exception("evaluation unit %s failed", unit)
            reason = exc.message if isinstance(exc, DetektivError) else \
                f"internal error: {type(exc).__name__} (details in the log)"
            return self._result(unit, "failed", error=reason,
                                seconds=time.monotonic() - started)

    def _result(self, unit: Unit, status: str, **values: Any) -> EvalResult:
        return EvalResult(item=unit.item.key, kind=unit.kind, repeat=unit.repeat,
                          label=unit.item.label, claim=unit.item.claim, status=status,
                          testimony=unit.item.testimony, **values)

    async def _interrogate(self, unit: Unit, sessions: dict[tuple[str, str, int], str],
                           started: float) -> EvalResult:
        parts = self.sessions
        ref = sessions.pop((unit.item.key, unit.kind, unit.repeat), None)  # used once
        session: InterrogationSession | None = None
        ident: uuid.UUID | None = None
        if ref is not None:
            try:
                session = parts.load(ref)
            except SessionNotFound:  # recorded, then killed before it was created
                ident = uuid.UUID(ref)
            except SessionError:  # damaged since: interrogated anew
                session = None
        run: SessionRun
        if session is not None:
            ended = session.status in ("completed", "limit-reached") or (
                session.status == "failed" and not self.retry_failed)
            if ended:  # killed after its session ended, before its result was written
                return self._from_session(unit, session, _duration(session))
            run = parts.resume(str(session.id), router=self.router)
        else:
            if ident is None:  # recorded before it exists: a kill in between loses nothing
                ident = uuid.uuid4()
                self.folder.add_session(unit.item.key, unit.repeat, str(ident), unit.kind)
            info = self.info
            settings = self.settings
            topic, samples = None, None
            if self._sampled(unit.item):  # what a session of the testimony reads it against
                topic = unit.item.question
                if settings.testimony_samples > 0:
                    drawn = await self._samples(unit.item, Baselines(
                        self.router, settings, info.mode, TokenTally(), self.budget))
                    samples = drawn[:settings.testimony_samples]
            run = parts.start(
                unit.item.claim, info.limit, info.detective, info.witness,
                brief=brief_for(unit.item, info.mode),
                tag=EvalTag(run=info.id, item=unit.item.key, repeat=unit.repeat),
                router=self.router, ident=ident, protocol=KIND_PROTOCOL[unit.kind],
                document=document_for(unit.item, info.mode), topic=topic, samples=samples,
            )
        run.budget = self.budget
        settings = self.settings
        if settings.claim_concurrency == 0:  # the items fill the servers' slots already: a
            # testimony's claims one at a time, or items × claims oversubscribe them (calls
            # queued past their first-token timeout fail the item)
            run.settings = settings.model_copy(update={"claim_concurrency": 1})
        async for _ in run.events():
            pass
        result = self._from_session(unit, run.session, time.monotonic() - started)
        if result.claims is not None and self.info.mode == "document" and unit.item.document:
            result = await self._reference(unit, run.session, result)
        return result

    def _from_session(self, unit: Unit, session: InterrogationSession,
                      seconds: float) -> EvalResult:
        if unit.item.label is None:
            return self._counted(unit, session, seconds)
        audit = session.audit_result
        if session.status in ("completed", "limit-reached") and audit is not None \
                and audit.verdict is not None:
            readings, claim_readings = _readings(session)
            return self._result(unit, session.status, verdict=audit.verdict,
                                probability_false=audit.probability_false,
                                rounds=len(session.qa_pairs), tokens=session.tokens.total,
                                cost=session.tokens.cost, unpriced=session.tokens.unpriced,
                                seconds=seconds, session=str(session.id),
                                repairs=session.repairs, rule_broken=audit.rule_broken,
                                readings=readings, claim_readings=claim_readings)
        return self._result(unit, "failed", rounds=len(session.qa_pairs),
                            repairs=session.repairs,
                            tokens=session.tokens.total, cost=session.tokens.cost,
                            unpriced=session.tokens.unpriced, seconds=seconds,
                            session=str(session.id),
                            error=session.error or f"the session ended {session.status} "
                            "without a verdict")

    def _counted(self, unit: Unit, session: InterrogationSession, seconds: float
                 ) -> EvalResult:
        """An open question's result: its testimony's claims counted by state (None, and the
        item failed, when the session ended without its claims examined)."""
        testimony = session.testimony
        spent = {"rounds": len(session.qa_pairs), "tokens": session.tokens.total,
                 "cost": session.tokens.cost, "unpriced": session.tokens.unpriced,
                 "seconds": seconds, "session": str(session.id), "repairs": session.repairs}
        if session.status not in ("completed", "limit-reached") or testimony is None or \
                not testimony.claims:
            why = session.error or (testimony.problem if testimony else None) or \
                f"the session ended {session.status} with no claim examined"
            return self._result(unit, "failed", error=why, **spent)
        counts = Counter(claim.state for claim in testimony.claims)
        audit = session.audit_result
        return self._result(unit, session.status, claims=dict(counts),
                            verdict=audit.verdict if audit else None,
                            probability_false=audit.probability_false if audit else None,
                            **spent)

    async def _reference(self, unit: Unit, session: InterrogationSession,
                         result: EvalResult) -> EvalResult:
        """`--mode document`: each checkable claim of the witness's testimony read against the
        question's document by one reference for every witness — the detective holding the
        document (`Baselines.reader`), never the witness grading itself."""
        assert session.testimony is not None
        tally = TokenTally()
        judge = Baselines(self.router, self.settings, "document", tally,
                          self.budget)
        read: Counter[str] = Counter()
        for claim in session.testimony.claims:
            if claim.state in ("not checkable", "not examined"):
                continue
            item = EvalItem(f"{unit.item.key}:{claim.number}", claim.text, None,
                            document=unit.item.document)
            try:
                verdict, _ = await judge.reader(item)
            except DetektivError as exc:
                return result.model_copy(update={
                    "claims": None, "status": "failed",
                    "error": f"the reference could not read claim {claim.number}: "
                             f"{exc.message}"})
            read[{"true": "supported", "false": "not supported"}.get(verdict, "unsure")] += 1
        return result.model_copy(update={"reference": dict(read),
                                         "tokens": result.tokens + tally.total,
                                         "cost": result.cost + tally.cost})

    # ---- baselines ------------------------------------------------------------------------

    async def _baseline(self, unit: Unit, started: float) -> EvalResult:
        tally = TokenTally()
        evidence = ""
        judge = Baselines(self.router, self.settings,
                          self.info.mode, tally, self.budget)
        try:
            if unit.kind == "reader":
                verdict, probability = await judge.reader(unit.item)
            elif unit.kind == "selfcheck":
                samples = await self._samples(unit.item, judge)
                verdict, probability = await selfcheck(self.router, unit.item.claim, [
                    s for s in samples if sample_problem(s, unit.item.question or "") is None])
            elif unit.kind == "sampled":  # runs before issue 72
                samples = await self._samples(unit.item, judge)
                verdict, probability = await judge.sampled(unit.item, samples)
            elif unit.kind == "are-you-sure":
                evidence = await judge.are_you_sure(unit.item)
                verdict, probability = await judge.verdict(unit.item.claim, evidence,
                                                           "judgement_word")
            else:
                verdict, probability = await judge.alone(unit.item)
        except (AllProvidersFailed, DetektivError) as exc:
            return self._result(unit, "failed", tokens=tally.total, cost=tally.cost,
                                unpriced=tally.unpriced, error=exc.message,
                                repairs=judge.repairs, seconds=time.monotonic() - started)
        return self._result(unit, "completed", verdict=verdict, probability_false=probability,
                            tokens=tally.total, cost=tally.cost, unpriced=tally.unpriced,
                            repairs=judge.repairs, rule_broken=(
                                "the detective's judgement said neither true nor false"
                                if probability is None else None),
                            seconds=time.monotonic() - started)

    async def _samples(self, item: EvalItem, judge: Baselines) -> list[str]:
        """The samples of `item`'s testimony: drawn by `judge` for the first of its claims
        that asks (its tokens counted there), awaited by the others; a draw that failed is
        drawn again by the next claim that asks."""
        key = item.testimony or item.key
        drawn = self._drawn.get(key)
        if drawn is None or (drawn.done() and (drawn.cancelled() or drawn.exception())):
            drawn = asyncio.get_running_loop().create_future()
            self._drawn[key] = drawn
            try:
                drawn.set_result(await judge.draw(item.question or "", self._draws()))
            except asyncio.CancelledError:  # the run is stopping: its other units with it
                drawn.cancel()
                raise
            except Exception as exc:
                drawn.set_exception(exc)
                drawn.exception()  # retrieved: the claims that await it raise it themselves
                raise
        return await asyncio.shield(drawn)


def _readings(session: InterrogationSession
              ) -> tuple[dict[str, float | None] | None, list[dict[str, float | None]] | None]:
    """What each signal read of the session's claim (a single claim), or of each examined
    claim of its testimony (a summary): P(true), None where it read nothing."""
    if session.claim is not None:
        return {name: r.p_true for name, r in session.claim.readings.items()}, None
    if session.testimony is not None:
        return None, [{name: r.p_true for name, r in c.readings.items()}
                      for c in session.testimony.claims if c.examined and c.readings]
    return None, None


def _duration(session: InterrogationSession) -> float:
    if session.end_time is None:
        return 0.0
    return max(0.0, (session.end_time - session.start_time).total_seconds())
