"""A turn of the case agent as messages: fitted to a model's window, with no assistant turn
put in its mouth."""

from __future__ import annotations

from collections.abc import Callable

from engine.agent.signals import Signal
from engine.context.fit import DoesNotFit, Trim, shorten
from engine.context.tokens import MESSAGE_OVERHEAD
from engine.providers import Message

__all__ = ["alternate", "describe_signal", "fit_turn"]


def fit_turn(limit: int, count: Callable[[str], int], full_system: str, small_system: str,
         history: list[Message], question: str, run: list[Message]
         ) -> tuple[list[Message], Trim]:
    """The turn's messages within `limit` tokens. What gives way, in order: the oldest
    conversation turns; the oldest tool results of this run (each replaced by a line saying
    so; the newest kept); the question type's segment; the run's oldest exchanges (the
    newest kept, a line on the question says so); then the longest of the question's
    gathered results, the tool results and the model's replies of this run, cut to fit (head
    and tail kept). `DoesNotFit` after that."""
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
    while total() > limit and len(turns) > 2:  # the run's oldest exchanges, the newest kept
        turns = turns[2:]
        asked = Message("user", f"{question}\n\n{DROPPED}")
    shortened: list[int] = []
    spent: set[int] = set()  # cut as short as they go
    while total() > limit:  # then the longest of what was gathered, found and answered in
        # this run, head and tail kept (the question opens the first, a tool's name a result)
        said = [(len(m.content), i) for i, m in enumerate([asked, *turns]) if i not in spent]
        if not said:
            break
        longest, at = max(said)
        if longest <= LEAST_KEPT:
            break
        over = (total() - limit) * CHARS_A_TOKEN + CUT_SLACK
        target = [asked, *turns][at]
        cut = Message(target.role, shorten(target.content, max(LEAST_KEPT, longest - over)))
        if len(cut.content) >= longest:  # as short as it goes (its cut mark included)
            spent.add(at)
            continue
        if at == 0:
            asked = cut
        else:
            turns[at - 1] = cut
        shortened.append(at)
    needed = total()
    if needed > limit:
        raise DoesNotFit(needed, limit)
    return [system, *kept, asked, *turns], Trim(shortened=tuple(sorted(set(shortened))),
                                                   omitted=tuple(omitted))


DROPPED = ("[your earlier turns of this run and what they found were left out to fit the "
           "window; the newest is below]")
LEAST_KEPT = 120
"""Characters a gathered text or a tool result is never cut below (its question, its name)."""
CHARS_A_TOKEN = 4
CUT_SLACK = 64
"""Characters cut beyond the measured excess: the cut mark's own cost, and a round number."""


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
