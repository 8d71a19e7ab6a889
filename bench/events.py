"""What the one stream contract costs per token: router events through `Reply` (the collector)
into typed events (`AgentDelta`, `OracleDelta`, `QuestionDelta`: the one pydantic event base),
against a bare loop that only joins the text, in one run.

    python bench/events.py

A token from a fast local model arrives every ~8 ms (128 tok/s); the cost here is per token.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.agent.events import AgentDelta  # noqa: E402
from engine.models.events import QuestionDelta  # noqa: E402
from engine.oracles.events import OracleDelta  # noqa: E402
from engine.providers import Done, TokenDelta  # noqa: E402
from engine.routing.collect import Reply  # noqa: E402
from engine.routing.events import Attempt, RouterEvent  # noqa: E402

TOKENS = 50_000
ROUNDS = 5


@dataclass(frozen=True, slots=True)
class _Plain:
    """What an agent delta was before the one event base: a slotted dataclass."""

    turn: int
    text: str


async def _events() -> AsyncIterator[RouterEvent]:
    yield Attempt("p", "p:model")
    for _ in range(TOKENS):
        yield TokenDelta("tok ")
    yield Done("stop")


async def bare() -> str:
    parts: list[str] = []
    async for event in _events():
        if type(event) is TokenDelta:
            parts.append(event.text)
            _Plain(1, event.text)
    return "".join(parts)


async def collected(kind: str) -> str:
    reply = Reply()
    async for event in reply.follow(_events()):
        if type(event) is TokenDelta:
            if kind == "agent":
                AgentDelta(turn=1, text=event.text)
            elif kind == "oracle":
                OracleDelta(oracle_id="abcd1234", text=event.text)
            else:
                QuestionDelta(sequence=1, text=event.text)
    return reply.text


def measure(factory: object) -> float:
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        asyncio.run(factory())  # type: ignore[operator]
        samples.append((time.perf_counter() - start) / TOKENS * 1e6)
    return statistics.median(samples)


def main() -> None:
    base = measure(bare)
    print(f"events: {TOKENS:,} tokens, median of {ROUNDS}, microseconds per token")
    print(f"  bare loop + slotted dataclass   {base:6.2f} us   1.00x")
    for kind in ("agent", "oracle", "question"):
        ours = measure(lambda kind=kind: collected(kind))
        print(f"  Reply + {kind:8} event (pydantic) {ours:6.2f} us   {ours / base:4.2f}x   "
              f"(+{ours - base:.2f} us a token; a token every ~8,000 us at 128 tok/s)")


if __name__ == "__main__":
    main()
