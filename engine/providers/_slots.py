"""A server's slots, held inside detektiv: a call is sent only when the server has room for it.

A llama.cpp server with two slots that is sent six requests answers two and queues four, their
streams open and silent; a deadline that started when they were sent ran out while they
waited ("no token for 30 s": seven of eleven evaluation items failed so). Here a call waits for
a slot before it is sent, and its deadlines start when it is sent (`Provider.stream`).

How many slots a server has, first found: `slots` in the provider's configuration; what the
server says (llama.cpp's `/props` `total_slots`, the `local` kind's `parallel`); unknown, one
for a server on this machine (a local server answers one request at a time unless it says
otherwise) and no limit for a remote API. Every provider of this process that names the same
server shares its slots (`key`: the detective and the witness on one `local-server`, the
consistency protocol's three samples, an evaluation's concurrent items). A call cancelled
while it waits leaves the queue; the queue is first come, first served.

Slots another process keeps busy are not ours to hold: the server queues our call, and the
deadline asks the server whether it is working before calling it dead (`Deadline`,
`Provider.server_working`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.providers._base import Provider

__all__ = ["SlotGate", "gate_of"]

log = logging.getLogger(__name__)

ASK_TIMEOUT = 10.0
"""Seconds a server is given to say its slots (no longer than a call's first deadline)."""


@dataclass(slots=True)
class SlotGate:
    """One server's slots in this event loop: `limit` calls in flight at once (None: no
    limit), the rest waiting first come, first served. The limit is asked of the server only
    when a second call comes while one is in flight: calls one after another never wait, and
    cost the server no question."""

    limit: int | None = None
    known: bool = False
    in_flight: int = 0
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)
    _finding: asyncio.Task[int | None] | None = None
    _held: dict[asyncio.Task[object], int] = field(default_factory=dict)
    """Slots held per task: a provider that wraps another over the same server (a layer, a
    test's counting wrapper) streams the inner one in the same task, in the slot it holds."""

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self, provider: Provider | None = None,
                      timeout: float = ASK_TIMEOUT) -> asyncio.Task[object] | None:
        """A slot, once one is free (the limit found first when this is the second call in
        flight); a caller cancelled while it waits leaves the queue. Returns what
        `release` is given back (the task that holds it)."""
        task = asyncio.current_task()
        if task is not None and task in self._held:  # nested in a slot this task holds
            self._held[task] += 1
            return task
        await self._take(provider, timeout)
        if task is not None:
            self._held[task] = 1
        return task

    async def _take(self, provider: Provider | None, timeout: float) -> None:
        if not self.known and self.in_flight and provider is not None:
            if self._finding is None:
                self._finding = asyncio.get_running_loop().create_task(
                    _found(provider, timeout))
            limit = await asyncio.shield(self._finding)
            if not self.known:
                self.limit, self.known = limit, True
        if self.limit is None or (self.in_flight < self.limit and not self._waiters):
            self.in_flight += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # the slot is handed over by `release`, already counted
        except BaseException:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.done() and not waiter.cancelled():  # handed over as it was cancelled
                self._hand_over()
            raise

    def release(self, task: asyncio.Task[object] | None = None) -> None:
        """Give back the slot `acquire` gave `task` (the outermost of a task's nested ones):
        to the first caller waiting, else free."""
        if task is not None and task in self._held:
            self._held[task] -= 1
            if self._held[task]:
                return
            del self._held[task]
        self._hand_over()

    def _hand_over(self) -> None:
        while self._waiters:
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)  # the slot passes on, still counted
                return
        self.in_flight = max(0, self.in_flight - 1)


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, SlotGate]] = \
    weakref.WeakKeyDictionary()
"""Per event loop (a gate's waiters belong to one): a loop that ends takes its gates along."""


def gate_of(provider: Provider) -> SlotGate | None:
    """The gate of `provider`'s server in the running loop (see the module docstring); None
    when the provider has no server of its own to hold. A configured `slots` is its limit
    from the start."""
    key = provider.slot_key()
    if key is None:
        return None
    gates = _loops.setdefault(asyncio.get_running_loop(), {})
    gate = gates.get(key)
    if gate is None:
        configured = provider.config.slots
        gate = gates[key] = SlotGate(configured, known=configured is not None)
    return gate


async def _found(provider: Provider, timeout: float) -> int | None:
    """The server's slots as it says them; unknown: one on this machine, else no limit."""
    try:
        limit = await asyncio.wait_for(provider.slots(), timeout)
    except Exception as exc:  # a server that cannot say has the default
        log.info("%s: slots not found: %s", provider.name, exc)
        limit = None
    if limit is None and provider.on_this_machine:
        limit = 1
    log.info("%s: %s slot%s", provider.name, limit or "unlimited", "" if limit == 1 else "s")
    return limit


def forget_gates() -> None:
    """Drop every gate (a test that starts servers again on the same ports)."""
    _loops.clear()
