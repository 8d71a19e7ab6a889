"""The router's background health checks: one task that checks every provider now and then
every `interval` seconds, until stopped (`Router.start_health_checks`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

__all__ = ["HealthLoop"]

log = logging.getLogger(__name__)


class HealthLoop:
    """Runs `check` in the background: at `start`, then every `interval` s, until `stop`.
    A round that raises is logged and the loop goes on."""

    def __init__(self, check: Callable[[], Awaitable[object]]) -> None:
        self._check = check
        self.task: asyncio.Task[None] | None = None

    def start(self, interval: float) -> None:
        """Start it, unless it runs already."""
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._loop(interval), name="detektiv-health-checks")

    async def stop(self) -> None:
        """Stop it (waits for the task to end)."""
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self, interval: float) -> None:
        while True:
            try:
                await self._check()
            except Exception:  # the loop must outlive any one bad round
                log.exception("health round failed")
            await asyncio.sleep(interval)
