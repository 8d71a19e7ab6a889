"""Consulting oracles: one or several, concurrently, on one frozen case context (SPEC §4).

    consultation = await workspace.cases.consultation(ref, ["sceptic", "visionary"])
    consultation.preview()                       # the final prompts and their parts' tokens
    async for event in consultation.events():    # typed events of every oracle, interleaved
        match event: case OracleDelta(oracle_id=..., text=...): ...   # (engine.oracles.events)

Each oracle runs in a task of its own under `LLM_TIMEOUT_SECONDS` (the router's fallback
inside that bound). Its answer is stored when it ends: the text to
`llm_responses/{seq:03d}_{slug}.txt` first, atomically, then its `LlmEntry` in metadata.json,
atomically, both under the session's case lock (sequence numbers never collide, across
processes too). A process killed before that leaves the session as it was; killed between the
two writes, it leaves an answer file without an entry, which the next answer's file replaces.
An answer cut by the timeout is kept, marked `timeout`; an empty one is an error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.context.budget import fit
from engine.context.tokens import estimate
from engine.errors import AllProvidersFailed, DetektivError
from engine.models.notes import LlmEntry
from engine.models.session import InterrogationSession, now
from engine.oracles.catalog import Oracle
from engine.oracles.context import CaseContext, ContextPlan, Holder, oracle_prompt, snapshot
from engine.oracles.events import (
    OracleAttempt,
    OracleDelta,
    OracleEvent,
    OracleFailed,
    OracleNote,
    OracleSaved,
)
from engine.prompts import load_prompt
from engine.providers import FILTERED, Done, StreamRequest, TokenDelta
from engine.report.stream import CUT_AT_LIMIT, context_trim_note, stream_note
from engine.routing.collect import Reply
from engine.routing.events import Attempt, Fitted
from engine.storage.atomic import atomic_write_text
from engine.storage.layout import RESPONSES_DIR

if TYPE_CHECKING:
    from engine.context.budget import Prompt
    from engine.routing.router import Router
    from engine.storage.sessions import SessionStore

__all__ = ["Consultation", "Preview", "PreviewPart"]


@dataclass(frozen=True, slots=True)
class PreviewPart:
    """Tokens (estimated) one part of a final prompt takes."""

    name: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Preview:
    """An oracle's final prompt as it would be sent to `provider`, with its parts' sizes."""

    oracle: Oracle
    provider: str
    prompt: str
    parts: tuple[PreviewPart, ...]
    total: int
    window: int
    trimmed: tuple[str, ...]
    warnings: tuple[str, ...]


@dataclass(slots=True)
class _Job:
    oracle: Oracle
    prompt: Prompt
    holder: Holder
    role: str
    reply: Reply = field(default_factory=Reply)


EMPTY_RETRY_TEMPERATURES = (0.8, 0.8, 1.0)
"""Temperatures an empty answer is asked for again at, in turn."""


class Consultation:
    """Several oracles, one session, one frozen context; see the module docstring."""

    def __init__(
        self,
        store: SessionStore,
        ref: str,
        session: InterrogationSession,
        case: CaseContext,
        router: Router,
        oracles: list[tuple[Oracle, str]],
        max_tokens: int,
        timeout: float,
        own_router: bool,
    ) -> None:
        """`ref`: the session's folder name; `oracles`: each with the router role whose
        chain answers it."""
        self.store = store
        self.ref = ref
        self.session = session
        self.case = case
        self.router = router
        self.timeout = timeout
        self._own_router = own_router
        self.jobs: list[_Job] = []
        whole = ContextPlan().render(case)
        for oracle, role in oracles:
            # the unfitted prompt: what the cache keys on (fitting composes the one sent)
            request = StreamRequest.of(
                oracle.render(whole), max_tokens=oracle.max_tokens or max_tokens,
                temperature=oracle.temperature,
            )
            prompt, holder = oracle_prompt(oracle, case, request)
            self.jobs.append(_Job(oracle, prompt, holder, role))

    @property
    def oracles(self) -> list[Oracle]:
        """The oracles consulted, in the order asked."""
        return [job.oracle for job in self.jobs]

    async def preview(self) -> list[Preview]:
        """Each oracle's final prompt, fitted to the first provider of its chain."""
        out: list[Preview] = []
        for job in self.jobs:
            chain = self.router.chain(job.role)
            if not chain:
                raise AllProvidersFailed(job.role, [])
            name = chain[0]
            fitted = await fit(self.router.providers[name], job.prompt)
            text = fitted.request.messages[-1].content
            chosen = job.holder.plan
            assert chosen is not None
            sections = chosen.sections(self.case)
            parts = [PreviewPart("oracle text", estimate(job.oracle.render("")))]
            parts += [PreviewPart(label, estimate(sections[key])) for key, label in
                      (("notes", "notes"), ("qa", "Q&A"), ("answers", "earlier responses"))]
            out.append(Preview(job.oracle, name, text, tuple(parts), fitted.report.used,
                               fitted.report.window, tuple(chosen.lines(self.case)),
                               job.oracle.warnings))
        return out

    async def aclose(self) -> None:
        """Release the router this consultation built for itself (after `preview` alone;
        `events` does it when it ends)."""
        if self._own_router:
            self._own_router = False
            await self.router.aclose()

    async def events(self) -> AsyncIterator[OracleEvent]:
        """Consult every oracle concurrently; yields their events as they come. Cancelling
        the iteration cancels every call (nothing half is stored)."""
        queue: asyncio.Queue[OracleEvent | None] = asyncio.Queue()
        tasks = [asyncio.create_task(self._run(job, queue)) for job in self.jobs]
        running = len(tasks)
        try:
            while running:
                event = await queue.get()
                if event is None:
                    running -= 1
                    continue
                yield event
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.aclose()

    async def _run(self, job: _Job, queue: asyncio.Queue[OracleEvent | None]) -> None:
        oid = job.oracle.id
        try:
            try:
                saved = await self._consult(job, queue)
            except DetektivError as exc:
                await queue.put(OracleFailed(oracle_id=oid, error=exc.message))
            except Exception as exc:  # a bug must not take the other oracles down
                logging.getLogger(__name__).exception("oracle %s failed", job.oracle.name)
                await queue.put(
                    OracleFailed(oracle_id=oid, error=f"internal error: {type(exc).__name__}")
                )
            else:
                await queue.put(saved)
        finally:
            await queue.put(None)

    async def _consult(self, job: _Job, queue: asyncio.Queue[OracleEvent | None]) -> OracleEvent:
        oid = job.oracle.id
        timed_out = False
        # an empty answer is asked for again with a nudge ("your reply was empty…", added to
        # the user's turn), sampled: measured on the bundled model, the nudge halves the empty
        # answers, and a model that said nothing greedily says nothing again
        temperatures = (job.prompt.request.temperature, *EMPTY_RETRY_TEMPERATURES)
        try:
            async with asyncio.timeout(self.timeout):
                for attempt, temperature in enumerate(temperatures):
                    prompt = job.prompt if attempt == 0 else replace(
                        job.prompt, request=replace(job.prompt.request, temperature=temperature)
                    ).noted(load_prompt("empty_oracle"))  # said to it, not put in its mouth
                    await self._stream(job, prompt, queue)
                    if job.reply.text.strip():
                        break
                    if attempt + 1 < len(temperatures):
                        await queue.put(
                            OracleNote(
                                oracle_id=oid,
                                text="the answer was empty; asking again "
                                f"(temperature {temperatures[attempt + 1]:g})",
                            )
                        )
        except TimeoutError:
            timed_out = True
            if not job.reply.text.strip():
                return OracleFailed(
                    oracle_id=oid,
                    error=f"no answer within {self.timeout:g} s (LLM_TIMEOUT_SECONDS)",
                )
            await queue.put(
                OracleNote(
                    oracle_id=oid,
                    text=f"stopped after {self.timeout:g} s "
                    "(LLM_TIMEOUT_SECONDS); the partial answer is kept",
                )
            )
        reply = job.reply  # the attempt that answered: its provider, fit and ending
        finish = "timeout" if timed_out else reply.finish_reason \
            if reply.finish_reason in ("length", "content_filter") else "stop"
        label = reply.label
        tokens, window = (reply.fits[-1].used, reply.fits[-1].window) if reply.fits \
            else (None, None)
        text = reply.text
        if not text.strip():
            return OracleFailed(
                oracle_id=oid, error="the oracle's answer was empty; nothing was stored"
            )
        if finish == "length":
            await queue.put(OracleNote(oracle_id=oid, text=CUT_AT_LIMIT))
        elif finish == "content_filter":
            await queue.put(OracleNote(oracle_id=oid, text=f"stopped: {FILTERED}"))
        shot = snapshot(self.case, job.holder.plan, tokens, window)
        oracle = job.oracle

        def save(session: InterrogationSession, directory: Path) -> LlmEntry:
            sequence = max((e.sequence for e in session.llm_entries), default=0) + 1
            filename = f"{sequence:03d}_{oracle.slug}.txt"
            atomic_write_text(directory / RESPONSES_DIR / filename, text)
            entry = LlmEntry(sequence=sequence, created_at=now(), oracle_name=oracle.name,
                             oracle_id=oracle.id, response_filename=filename,
                             context_snapshot=shot, provider_used=label,
                             finish_reason=finish)
            session.llm_entries.append(entry)
            return entry

        # a cancellation now must not tear the two writes apart: finish them, then stop
        task = asyncio.ensure_future(asyncio.to_thread(self.store.update, self.ref, save))
        try:
            entry = await asyncio.shield(task)
        except asyncio.CancelledError:
            await task
            raise
        return OracleSaved(oracle_id=oid, entry=entry, text=text)

    async def _stream(self, job: _Job, prompt: Prompt,
                      queue: asyncio.Queue[OracleEvent | None]) -> None:
        oid = job.oracle.id
        job.reply = reply = Reply()
        async for event in reply.follow(self.router.stream(prompt, role=job.role)):
            match event:
                case TokenDelta(text=text):
                    await queue.put(OracleDelta(oracle_id=oid, text=text))
                case Attempt(label=name):
                    await queue.put(OracleAttempt(oracle_id=oid, provider=name))
                case Fitted(report=report):
                    lines = job.holder.plan.lines(self.case) if job.holder.plan else []
                    if lines:
                        await queue.put(
                            OracleNote(oracle_id=oid, text=context_trim_note(report.window, lines))
                        )
                case Done():
                    pass
                case _:
                    if (line := stream_note(event)) is not None:
                        await queue.put(OracleNote(oracle_id=oid, text=line))
