"""Work on threads, and a shutdown that waits for it before the stores close.

A Textual thread worker that is cancelled stops being *awaited* at once, but its thread runs
on: cancelling the Cache tab's refresh does not stop the `SELECT` it is in. So quitting used
to close the workspace's stores while a worker still read them (a segmentation fault on
SQLite). Every piece of work the app runs on a thread goes through here instead:

    @in_background("cache-list")         # a screen method run as a tracked thread worker
    def refresh_entries(self) -> None: …

    rows = await self.host.background.call(store.list)   # from an async worker

`Background` counts the threads in flight; on unmount the app cancels its workers, awaits
them, then `drain()`s (no new thread work starts, the running ones are waited for) and only
then closes the workspace. A thread still running after the drain's deadline meets
`StoreClosed` (engine.storage.shared), never a freed handle.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar, cast

from textual import work

from tui.host import host

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.worker import Worker

__all__ = ["Background", "in_background"]

log = logging.getLogger(__name__)

P = ParamSpec("P")
N = TypeVar("N", bound="DOMNode")
T = TypeVar("T")


class ShuttingDown(Exception):
    """Thread work asked for while the app drains: it is not started."""


class Background:
    """The app's thread work in flight (see the module docstring)."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._running = 0
        self.draining = False

    def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Call `fn` on this thread, counted; `ShuttingDown` once the app drains."""
        with self._idle:
            if self.draining:
                raise ShuttingDown
            self._running += 1
        try:
            return fn(*args, **kwargs)
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    async def call(self, fn: Callable[[], T]) -> T:
        """`fn` on a thread of the loop's executor, counted (for an async worker)."""
        return await asyncio.to_thread(self.run, fn)

    @property
    def running(self) -> int:
        return self._running

    async def drain(self, timeout: float) -> int:
        """Start no more thread work and wait (without blocking the event loop: a thread may
        be waiting on `call_from_thread`) until none runs, or `timeout` seconds; how many
        still run."""
        with self._idle:
            self.draining = True

        def wait() -> int:
            with self._idle:
                self._idle.wait_for(lambda: self._running == 0, timeout)
                return self._running

        return await asyncio.to_thread(wait)


def in_background(group: str) -> Callable[[Callable[Concatenate[N, P], None]],
                                          Callable[Concatenate[N, P], Worker[None]]]:
    """A method run as an exclusive thread worker of `group`, counted by the app's
    `Background` (errors go to the funnel; work asked for during shutdown is skipped)."""

    def decorate(method: Callable[Concatenate[N, P], None],
                 ) -> Callable[Concatenate[N, P], Worker[None]]:
        @functools.wraps(method)
        def tracked(node: N, *args: P.args, **kwargs: P.kwargs) -> None:
            try:
                host(node.app).background.run(method, node, *args, **kwargs)
            except ShuttingDown:
                return
            except Exception:
                if getattr(node, "is_attached", True):
                    raise  # to the funnel
                # its screen was closed while this ran (the app quitting): nobody is left to
                # show the result to, or the error
                log.info("%s: work for a closed screen dropped", method.__qualname__,
                         exc_info=True)

        return cast("Callable[Concatenate[N, P], Worker[None]]",
                    work(exclusive=True, thread=True, group=group, exit_on_error=False)(tracked))

    return decorate
