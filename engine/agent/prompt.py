"""A turn of the case agent as messages: fitted to a model's window, with no assistant turn
put in its mouth."""

from __future__ import annotations

from collections.abc import Callable

from engine.agent.signals import Signal
from engine.context.fit import DoesNotFit, Trim
from engine.context.tokens import MESSAGE_OVERHEAD
from engine.providers import Message

__all__ = ["alternate", "describe_signal", "fit_turn"]


def fit_turn(limit: int, count: Callable[[str], int], full_system: str, small_system: str,
         history: list[Message], question: str, run: list[Message]
         ) -> tuple[list[Message], Trim]:
    """The turn's messages within `limit` tokens. What gives way, in order: the oldest
    conversation turns; the oldest tool results of this run (each replaced by a line saying
    so; the newest kept); the question type's segment. `DoesNotFit` after that."""
    def cost(message: Message) -> int:
        return count(message.content) + MESSAGE_OVERHEAD

    system = Message("system", full_system)
    asked = Message("user", question)
    turns = list(run)
    kept = list(history)
    omitted: list[int] = []

    def total() -> int:
        return sum(cost(m) for m in (system, *kept, asked, *turns))

    while total() > limit and kept:
        kept.pop(0)
        omitted.append(len(history) - len(kept))
    results = [i for i, m in enumerate(turns) if m.role == "user"][:-1]
    for index in results:
        if total() <= limit:
            break
        turns[index] = Message("user", "[these tool results were left out to fit the "
                                       "window; call the tool again if you need them]")
    if total() > limit and small_system != full_system:
        system = Message("system", small_system)
    needed = total()
    if needed > limit:
        raise DoesNotFit(needed, limit)
    return [system, *kept, asked, *turns], Trim(omitted=tuple(omitted))


def describe_signal(signal: Signal) -> str:
    return f"signal {signal.type} (confidence {signal.confidence:.2f}): {signal.fields_text()}"


def alternate(question: str, run: list[Message]) -> tuple[str, list[Message]]:
    """The question and the turns after it with user turns that follow each other (after an
    empty reply, which gets no turn of its own) joined into one: strict chat templates want
    user and assistant to alternate."""
    turns: list[Message] = []
    for message in run:
        if message.role == "user" and not turns:
            question = f"{question}\n\n{message.content}"
        elif message.role == "user" and turns[-1].role == "user":
            turns[-1] = Message("user", f"{turns[-1].content}\n\n{message.content}")
        else:
            turns.append(message)
    return question, turns
