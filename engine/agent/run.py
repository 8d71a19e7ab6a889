"""One run of the case agent: a question answered over turns, under the behaviour tree.

    run = await workspace.agent("Which sessions mention Paris?")
    async for event in run.events():      # typed events (engine.agent.events); the last one
        ...                               # is always AgentStopped, with reason and evidence
    task.cancel()                         # cancel the task reading it: the run stops with
                                          # `cancelled` (logged, and in `run.stop`)

Each turn sends: the system prompt (segments for the question's type), the conversation's
earlier turns (the `agent` policy of context.toml), the question, then this run's replies and
the tool results given back. `decide` stops the run — always with a reason and its evidence —
on a terminal signal, on the same need_turn reason three times (`stuck`), on a request for web
search (`need_capability`), after the tool-free summary turn (`turn_limit`), when the fallback
classifier says a run without signals is done (`fallback_stop`), on a failed turn (`error`) or
when its task is cancelled. The question is stored in the conversation before the first call;
the answer after the stop.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from engine.agent.events import (
    AgentEvent,
    AgentNote,
    NodeChanged,
)
from engine.agent.steps import CLIENT_ID, AgentSteps
from engine.agent.tree import AgentTree
from engine.context.conversations import ConversationTurn
from engine.context.reference import Mention, Resolution, remember
from engine.errors import DetektivError

if TYPE_CHECKING:
    from engine.context.conversations import ConversationTurn

__all__ = ["CLIENT_ID", "AgentRun"]

class AgentRun(AgentSteps):
    """A question to the case agent, ready to run (see the module docstring)."""

    # ---- running ---------------------------------------------------------------------------

    async def events(self) -> AsyncIterator[AgentEvent]:
        """Run to the stop, yielding every event as it comes; the last is `AgentStopped`."""
        tree = self._tree = AgentTree(self.run_id, self, lambda: self._queue.put_nowait(None))
        tree.set("question", self.question)
        node = ""
        if self.log.problem:
            yield AgentNote(turn=0, text=self.log.problem)
        try:
            while True:
                tree.tick()
                if tree.node != node:
                    node = tree.node
                    self._emit(NodeChanged(node=node, path=tree.path))
                while not self._queue.empty():
                    item = self._queue.get_nowait()
                    if item is not None:
                        yield item
                if not tree.running or self.stop is not None:
                    break
                item = await self._queue.get()
                if item is not None:
                    yield item
            while not self._queue.empty():
                item = self._queue.get_nowait()
                if item is not None:
                    yield item
            if self.stop is None:
                self._stopping("error", [f"node {node!r} failed without a stop"], node)
            assert self.stop is not None
            self._finish()
            yield self.stop
        finally:
            if self.stop is None:  # its task was cancelled, or its reader went away: the log
                # still says how it ended, and `stop` tells a front end what to show
                self._stopping("cancelled", ["the run was cancelled"], node)
                self._finish()
            tree.close()
            self.log.close()
            if self._close is not None:
                await self._close()

    def _finish(self) -> None:
        """Log the stop, keep the answer in the conversation, remember the session talked
        about."""

        assert self.stop is not None
        self.log.write(self.stop)
        try:
            if self.answer:
                index = self.conversations.append(
                    CLIENT_ID, self.conversation_id,
                    ConversationTurn("assistant", self.answer,
                                     meta={"stop": self.stop.reason, "run": self.run_id}))
            else:
                index = len(self.history) + 1
            talked = list(dict.fromkeys(self.mentioned))
            if len(talked) == 1:
                mention = Mention(talked[0], "session")
                resolution = Resolution(mention.entity, mention.kind, "text", "named")
                stored = self.conversations.reference(CLIENT_ID, self.conversation_id)
                kept = remember(stored, resolution, index, time.time(), "agent")
                self.conversations.set_reference(CLIENT_ID, self.conversation_id, kept)
        except DetektivError:  # the conversation store is memory, not the run's result
            pass

