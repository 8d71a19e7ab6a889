"""One timer for a stream's whole life: the deadline a provider's stream is awaited under.

`asyncio.timeout` made and left for every token schedules and cancels a timer each time (a
heap push, a handle, the task looked up): per token, the largest cost of a stream on the
client (issue 45). A `Deadline` keeps one timer and moves the deadline itself; the timer,
when it fires before the deadline (the deadline moved on since), sets itself again for the
new one. Waiting for a token costs two attribute writes.

The deadline is enforced only while the stream is awaited (`waiting`), never while the caller
handles an event: a slow consumer is not the provider's fault. When it passes during a wait,
the task is cancelled, as `asyncio.timeout` would; `expired` then tells the stream that the
cancellation (or whatever a library made of it) was the deadline's, and `uncancel` gives back
the one cancellation it asked for, so a cancellation asked by anyone else still stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["Deadline", "Speed", "fitted"]

ASK_TIMEOUT = 5.0
"""Seconds the server is given to say whether it is working."""


class Deadline:
    """The deadline of the stream awaited by the current task: `wait(when)` before each
    await, `done()` after it (and `returned_anyway()` when it returned past the deadline),
    `close()` once the stream is over."""

    def __init__(self, working: Callable[[], Awaitable[bool]] | None = None) -> None:
        """`working`: asked, when a deadline that may be waited on passes, whether the server
        is still working (then the deadline moves on by what it was, up to `until`)."""
        self._working = working
        self._until: float | None = None
        self._grace = 0.0
        self._asking: asyncio.Task[None] | None = None
        self.extended = 0
        """How many times a deadline was moved on because the server said it was working."""
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[object] | None = None
        self.when = 0.0
        self.waiting = False
        self.expired = False
        self._cancelling = 0
        self._timer: asyncio.TimerHandle | None = None
        self._at = 0.0  # when the timer is set for

    def wait(self, when: float, until: float | None = None) -> None:
        """The stream is about to be awaited, until `when` (the loop's clock) at the latest,
        by the current task (a stream may be read from one task, then another); past `when`,
        up to `until`, while the server says it is working."""
        self._task = asyncio.current_task(self._loop)
        self._until = until
        self._grace = max(1.0, when - self._loop.time())
        self.when = when
        self.waiting = True
        if self._timer is None or self._at > when:  # a timer set later would fire too late
            self._set(when)

    def done(self) -> None:
        """The await is over (an event came, or an error): the deadline no longer runs."""
        self.waiting = False

    def uncancel(self) -> bool:
        """After `expired`: take back the deadline's cancellation of the task. True when no
        other cancellation is pending (then the deadline alone stopped the wait)."""
        assert self._task is not None
        return self._task.uncancel() <= self._cancelling

    def returned_anyway(self) -> None:
        """After `expired`, the await returned all the same (a stream swallowed the deadline's
        cancellation and answered): the cancellation is taken back, as `asyncio.timeout` does
        when its body ends anyway, so neither a later error nor the task reads as cancelled
        by it."""
        self.expired = False
        self.uncancel()

    def close(self) -> None:
        """The stream is over: no timer is left behind."""
        self.waiting = False
        if self._asking is not None:
            self._asking.cancel()
            self._asking = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _set(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._at = when
        self._timer = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if not self.waiting or self._task is None:
            return  # the caller holds the stream: the next `wait` sets the timer again
        if self._loop.time() < self.when:
            self._set(self.when)  # the deadline moved on since the timer was set
            return
        if self._working is not None and self._until is not None and self.when < self._until:
            if self._asking is None:
                self._asking = self._loop.create_task(self._ask())
            return
        self._expire()

    async def _ask(self) -> None:
        """Whether the server is working: if so the deadline moves on, else it has passed."""
        assert self._working is not None
        try:
            working = await asyncio.wait_for(self._working(), ASK_TIMEOUT)
        except Exception:  # a server that cannot say is taken at its silence
            working = False
        finally:
            self._asking = None
        if not self.waiting or self._task is None:
            return  # the stream answered meanwhile
        now = self._loop.time()
        if now < self.when:  # a token came and a new deadline was set meanwhile
            self._set(self.when)
            return
        if working and self._until is not None:
            self.extended += 1
            self.when = min(now + self._grace, self._until)
            self._set(self.when)
            return
        self._expire()

    def _expire(self) -> None:
        assert self._task is not None
        self.expired = True
        self._cancelling = self._task.cancelling()
        self._task.cancel()


@dataclass(frozen=True, slots=True)
class Speed:
    """What a llama.cpp model was measured at, in tokens a second (llama.cpp's own `timings`
    of each reply, smoothed): reading the prompt, and writing the reply."""

    prompt: float
    reply: float

    def seconds(self, prompt_tokens: int, reply_tokens: int) -> float:
        """The time a request of that many tokens in and out takes at this speed."""
        return prompt_tokens / self.prompt + reply_tokens / self.reply

    def learned(self, timings: object) -> Speed:
        """This speed with one reply's `timings` taken in (half their weight each; a
        figure from too few tokens to mean anything is left out)."""
        if not isinstance(timings, dict):
            return self
        prompt, reply = self.prompt, self.reply
        if _number(timings.get("prompt_n")) >= 16 and _number(timings.get("prompt_per_second")):
            prompt = (prompt + _number(timings["prompt_per_second"])) / 2
        if _number(timings.get("predicted_n")) >= 8 and \
                _number(timings.get("predicted_per_second")):
            reply = (reply + _number(timings["predicted_per_second"])) / 2
        return Speed(prompt, reply)

    @classmethod
    def first(cls, timings: object) -> Speed | None:
        """The speed one reply's `timings` measured, or None when they say too little."""
        if not isinstance(timings, dict):
            return None
        prompt = _number(timings.get("prompt_per_second"))
        reply = _number(timings.get("predicted_per_second"))
        if _number(timings.get("predicted_n")) < 8 or not reply:
            return None
        return cls(prompt if _number(timings.get("prompt_n")) >= 16 and prompt else reply * 10,
                   reply)

    @staticmethod
    def taken(speed: Speed | None, timings: object) -> Speed | None:
        """`speed` with one reply's `timings` taken in (the first measure when None)."""
        return Speed.first(timings) if speed is None else speed.learned(timings)


def fitted(speed: Speed, prompt_chars: int, max_tokens: int | None, floor: float,
           cap: float) -> float:
    """Seconds a reply may take at `speed`: the prompt (a token for every three characters)
    and every token the reply may have (512 when unbounded), half again and 15 s more —
    never less than `floor` (the kind's default), never more than `cap` (its largest)."""
    needed = speed.seconds(prompt_chars // 3, max_tokens or 512) * 1.5 + 15
    return float(min(cap, max(floor, round(needed))))


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and value > 0 else 0.0
