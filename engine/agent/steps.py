"""The case agent's steps, as its behaviour tree calls them (`engine.agent.tree.Steps`):
classify the question, compose the prompt, gather context, a model turn, parse the signal,
run the tools, decide. `AgentRun` (engine.agent.run) is the run around them: its events, its
stop, what is kept when it ends.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.agent.classify import QueryClassification, classify_query
from engine.agent.events import (
    AgentAttempt,
    AgentDelta,
    AgentEvent,
    AgentLog,
    AgentNote,
    AgentStarted,
    AgentStopped,
    FallbackDecided,
    NoSignal,
    ReferenceResolved,
    SignalInvalid,
    SignalParsed,
    StopReason,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    TurnStarted,
)
from engine.agent.prompt import alternate, describe_signal, fit_turn
from engine.agent.segments import PromptSegment, select_segments
from engine.agent.signals import Signal, parse_signal, strip_signal
from engine.agent.state import AgentSignalState, should_continue
from engine.agent.tools import WEB_TOOLS, Toolbox, ToolCall, parse_tool_calls, strip_tool_calls
from engine.agent.tree import AgentTree
from engine.agent.vault import search_words
from engine.context.budget import Prompt
from engine.context.conversations import ConversationTurn
from engine.context.fit import Trim
from engine.context.reference import find_mentions, resolve_reference
from engine.errors import DetektivError, WindowTooSmall
from engine.prompts import fill, load_prompt
from engine.providers import Done, Message, StreamRequest, TokenDelta
from engine.report.stream import stream_note
from engine.routing.collect import Reply
from engine.routing.events import Attempt

if TYPE_CHECKING:
    from engine.config.models import AgentConfig
    from engine.context.conversations import ConversationStore, ConversationTurn
    from engine.context.policy import ContextPolicy
    from engine.routing.router import Router

__all__ = ["AgentSteps"]

CLIENT_ID = "agent"
_ANAPHORA = re.compile(r"\b(that|this|the same|the last|the previous|the newest|the latest)"
                       r"\s+(session|case|one|interrogation)\b|\bthe last one\b",
                       re.IGNORECASE)
_WEB_LINE = ("web_search is not available here: if the question needs the web, end with a "
             "need_capability signal naming web_search.")


class AgentSteps:
    """The steps of one run; the state they share is set up by `AgentRun.__init__`."""

    def __init__(
        self,
        question: str,
        *,
        router: Router,
        role: str,
        settings: AgentConfig,
        segments: list[PromptSegment],
        toolbox: Toolbox,
        conversations: ConversationStore,
        conversation_id: str,
        history: list[ConversationTurn],
        policy: ContextPolicy,
        log_dir: Path,
        sessions: Callable[[], list[str]],
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.question = question
        self.router = router
        self.role = role
        self.settings = settings
        self.segments = segments
        self.toolbox = toolbox
        self.conversations = conversations
        self.conversation_id = conversation_id
        self.history = history
        self.policy = policy
        self.run_id = secrets.token_hex(4)
        self.log = AgentLog(log_dir, self.run_id)
        self._sessions = sessions
        self._close = close
        self.state = AgentSignalState()
        self.classification: QueryClassification | None = None
        self.chosen: list[PromptSegment] = []
        self.turn = 0
        self.reply = ""
        self.shown = ""
        self.answer = ""
        self.signal: Signal | None = None
        self.turn_error: str | None = None
        self.capability: ToolCall | None = None
        self.tool_results: list[str] = []
        self.mentioned: list[str] = []
        self.stop: AgentStopped | None = None
        self.reference_line = ""
        self._invalid: str | None = None
        self.gathered = ""
        self._messages: list[Message] = []
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self._tree: AgentTree | None = None

    def _emit(self, event: AgentEvent) -> None:
        self.log.write(event)
        self._queue.put_nowait(event)

    def _stopping(self, reason: StopReason, evidence: list[str], node: str) -> None:
        signals: list[str] = [s.type for s in self.state.signals_emitted]
        self.stop = AgentStopped(
            reason=reason,
            evidence=evidence,
            node=node,
            answer=self.answer,
            turns=self.turn,
            signals=signals,
        )
        if self._tree is not None:
            self._tree.set("stop", reason)

    def classify(self) -> bool:
        self.classification = c = classify_query(self.question)
        self.chosen = select_segments(self.segments, c)
        needs = [name for name, flag in (("code", c.needs_code), ("vault", c.needs_vault),
                                         ("web", c.needs_web)) if flag]
        assert self._tree is not None
        self._tree.set("classification", c)
        self._emit(
            AgentStarted(
                run_id=self.run_id,
                question=self.question,
                conversation_id=self.conversation_id,
                query_type=c.query_type,
                confidence=c.confidence,
                keywords=c.keywords_matched,
                needs=needs,
                segments=[s.id for s in self.chosen],
                turn_limit=self.settings.turn_limit,
            )
        )
        self._resolve_reference()
        return True

    def _resolve_reference(self) -> None:

        known = {name[-8:]: "session" for name in self._sessions()}
        mentions = find_mentions(self.question, known)
        self.mentioned += [m.entity for m in mentions]
        if mentions or not _ANAPHORA.search(self.question):
            return
        stored = self.conversations.reference(CLIENT_ID, self.conversation_id)
        resolution = resolve_reference(mentions, stored, self.policy.last_reference,
                                       turn_index=len(self.history))
        self._emit(
            ReferenceResolved(
                session=resolution.entity, source=resolution.source, reason=resolution.reason
            )
        )
        if resolution.entity is not None:
            self.reference_line = (f"(In this question, \"that session\" / \"the last one\" "
                                   f"is session {resolution.entity}.)")
            self.mentioned.append(resolution.entity)

    def compose(self) -> bool:
        assert self._tree is not None
        self._tree.set("segments", [s.id for s in self.chosen])
        return True

    def gather(self) -> Awaitable[None] | None:
        c = self.classification
        words = search_words(self.question)
        if c is None or not c.needs_vault or not words:
            return None
        return self._gather(ToolCall("search_vault", words))

    async def _gather(self, call: ToolCall) -> None:
        self._emit(ToolCalled(turn=0, name=call.name, argument=call.argument))
        result = await self.toolbox.run(call)
        self.gathered = result.fenced if result.ok else ""
        self._emit(
            ToolFinished(
                turn=0,
                name=call.name,
                argument=call.argument,
                ok=result.ok,
                summary=result.summary,
                truncated=result.truncated,
                output=result.text,
            )
        )

    def _system(self, segments: list[PromptSegment]) -> str:
        return "\n\n".join(fill(s.content, WEB=_WEB_LINE) for s in segments)

    def _prompt(self, tool_free: bool) -> Prompt:
        gathered = fill(load_prompt("agent_gathered").strip(), RESULTS=self.gathered) \
            if self.gathered else ""
        question = "\n\n".join(part for part in (self.question, self.reference_line, gathered)
                                if part)
        run = list(self._messages)
        if tool_free:
            run.append(Message("user", load_prompt("agent_last_turn").strip()))
        question, run = alternate(question, run)
        full_system = self._system(self.chosen)
        # what stays when the window is short: the segments every turn needs (a turn that may
        # call no tool needs no tool's description: 210 tokens of a 1,024-token window)
        small_system = self._system([s for s in self.chosen if s.always
                                     and not (tool_free and s.id == "tools")])
        history = [Message(t.role, t.content) for t in self.history]
        request = StreamRequest(
            messages=(Message("system", full_system), *history, Message("user", question),
                      *run),
            max_tokens=self.settings.max_tokens, temperature=self.settings.temperature)

        def compose(limit: int, count: Callable[[str], int]) -> tuple[list[Message], Trim]:
            return fit_turn(limit, count, full_system, small_system, history, question,
                            run)

        return Prompt(request=request, compose=compose)

    async def _stream(self, turn: int, tool_free: bool, reply: Reply) -> None:
        stream = self.router.stream(self._prompt(tool_free), role=self.role)
        async for event in reply.follow(stream):
            match event:
                case TokenDelta(text=text):
                    self._emit(AgentDelta(turn=turn, text=text))
                case Attempt(label=label):
                    self._emit(AgentAttempt(turn=turn, provider=label))
                case Done():
                    pass
                case _:
                    if (line := stream_note(event)) is not None:
                        self._emit(AgentNote(turn=turn, text=line))

    def model_turn(self) -> Awaitable[None]:
        self.turn += 1
        assert self._tree is not None
        self._tree.set("turn", self.turn)
        return self._model_turn(self.turn, self.turn >= self.settings.turn_limit)

    async def _model_turn(self, turn: int, tool_free: bool) -> None:
        self._emit(TurnStarted(turn=turn, limit=self.settings.turn_limit, tool_free=tool_free))
        reply = Reply()
        self.turn_error = None
        try:
            async with asyncio.timeout(self.settings.timeout):
                try:
                    await self._stream(turn, tool_free, reply)
                except WindowTooSmall:
                    if tool_free or reply.text:
                        raise
                    # its smallest prompt with the tools' instructions fits no window (a
                    # 1,024-token one behind a gateway's slack): this turn is the last one,
                    # answered from what was found, rather than a failure
                    self._emit(AgentNote(turn=turn, text="the window leaves no room for the "
                                         "tools' instructions: this turn answers from what "
                                         "was found"))
                    await self._stream(turn, True, reply)
        except TimeoutError:
            reply.finish_reason = "timeout"
            self._emit(AgentNote(turn=turn, text=f"the turn was stopped after "
                                 f"{self.settings.timeout:g} s ([agent] timeout)"))
            if not reply.text.strip():
                self.turn_error = f"no reply within {self.settings.timeout:g} s"
        except DetektivError as exc:
            self.turn_error = exc.message
        self.reply = reply.text
        self.shown = strip_tool_calls(strip_signal(self.reply)).strip()
        if self.shown:
            self.answer = self.shown
        if self.reply:  # an empty reply is no turn: nothing is put in the model's mouth
            self._messages.append(Message("assistant", self.reply))
        assert self._tree is not None
        self._tree.set("reply", self.reply)
        self._emit(
            TurnEnded(
                turn=turn,
                text=self.reply,
                shown=self.shown,
                finish=reply.finish_reason or "stop",
                provider=reply.label,
            )
        )

    def parse_signal(self) -> bool:
        parsed = parse_signal(self.reply)
        self.signal = parsed.signal
        if parsed.signal is not None:
            self.state.on_signal(parsed.signal)
            self._emit(SignalParsed(turn=self.turn, signal=parsed.signal, step=parsed.step or "xml",
                                    notes=list(parsed.notes)))
        else:
            if parsed.invalid:
                self._emit(
                    SignalInvalid(
                        turn=self.turn,
                        reason=parsed.invalid,
                        raw=parsed.raw[:2000],
                        step=parsed.step,
                    )
                )
            self.state.on_turn_without_signal()
            self._emit(
                NoSignal(turn=self.turn, turns_without_signal=self.state.turns_without_signal)
            )
        self._invalid = parsed.invalid
        assert self._tree is not None
        self._tree.set("signal", parsed.signal)
        return True

    def tools(self) -> Awaitable[None] | None:
        self.tool_results = []
        self.capability = None
        calls = parse_tool_calls(self.reply)
        assert self._tree is not None
        self._tree.set("tool_calls", [(c.name, c.argument) for c in calls])
        if not calls or self.turn_error:
            return None
        if self.turn >= self.settings.turn_limit:
            self._emit(AgentNote(turn=self.turn, text="tool calls in the summary turn are not run"))
            return None
        if self.signal is not None and self.signal.type != "need_turn":
            self._emit(
                AgentNote(
                    turn=self.turn, text=f"tool calls after a {self.signal.type} signal are not run"
                )
            )
            return None
        web = next((c for c in calls if c.name in WEB_TOOLS), None)
        if web is not None:
            self.capability = web
            self._emit(ToolCalled(turn=self.turn, name=web.name, argument=web.argument))
            return None
        return self._run_tools(calls)

    async def _run_tools(self, calls: list[ToolCall]) -> None:
        for call in calls:
            self._emit(ToolCalled(turn=self.turn, name=call.name, argument=call.argument))
            result = await self.toolbox.run(call)
            self.mentioned += [s for s in result.sessions if call.name == "read_session"]
            self.tool_results.append(result.fenced)
            self._emit(
                ToolFinished(
                    turn=self.turn,
                    name=call.name,
                    argument=call.argument,
                    ok=result.ok,
                    summary=result.summary,
                    truncated=result.truncated,
                    output=result.text,
                )
            )

    def decide(self) -> bool:
        turn, signal, limit = self.turn, self.signal, self.settings.turn_limit
        state = self.state
        if self.turn_error:
            return self._stop("error", [f"turn {turn}: {self.turn_error}"])
        if self.capability is not None:
            return self._stop("need_capability", [
                f"turn {turn}: the model called {self.capability.name!r} "
                f"({self.capability.argument!r})",
                "web search is not available in this build"])
        if signal is not None and signal.type != "need_turn":
            return self._stop(signal.type, [f"turn {turn}: {describe_signal(signal)}"])
        if signal is not None and state.stuck:
            reasons = "; ".join(repr(r) for r in state.reasons)
            return self._stop("stuck", [
                f"turns {turn - state.consecutive_same_reason + 1}–{turn}: need_turn "
                f"{state.consecutive_same_reason} times with the same reason",
                f"reasons: {reasons}"])
        if turn >= limit:
            last = f"; its signal: {describe_signal(signal)}" if signal else "; it gave no signal"
            return self._stop("turn_limit", [f"turn {turn} of {limit} was the tool-free "
                                             f"summary{last}"])
        if signal is None and not self.tool_results and state.needs_fallback:
            verdict = should_continue(self.shown)
            self._emit(FallbackDecided(turn=turn, go_on=verdict.go_on, reason=verdict.reason))
            if not verdict.go_on:
                return self._stop("fallback_stop", [
                    f"turns {turn - state.turns_without_signal + 1}–{turn} gave no signal",
                    f"fallback classifier: {verdict.reason}"])
        self._messages.append(Message("user", self._next_message()))
        return True

    def _next_message(self) -> str:
        if self.tool_results:
            return fill(load_prompt("agent_tool_results").strip(),
                        RESULTS="\n\n".join(self.tool_results))
        if self.signal is None:
            why = self._invalid or "no signal block"
            return fill(load_prompt("agent_no_signal").strip(), WHY=why)
        return load_prompt("agent_go_on").strip()

    def _stop(self, reason: StopReason, evidence: list[str]) -> bool:
        self._stopping(reason, evidence, "decide")
        return False
