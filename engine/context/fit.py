"""Fitting rounds into a token limit: pure code, no model call, no I/O.

A round (a question with its answer) is never split: it is sent whole (its answer perhaps
shortened, head and tail kept, the cut marked), as a one-line digest, or not at all. Two
shapes, both decided here and rendered by the caller:

- `plan_rounds` (the detective's question and gap analysis, the witness's history): the first
  round and the newest rounds whole, the rounds between as digests; when even that does not fit,
  digests are left out oldest first, then the answers of the first and newest rounds shortened,
  then the first round left out, then the newest round digested, then left out: only the
  prompt's frame (its instructions and the hypothesis) is indispensable.
- `plan_all_rounds` (the audit): every round is there; answers are shortened to one even cap
  (the longest that fits), then questions too. Nothing is left out.

`count` is the token measure of a rendered piece (an estimate: `engine.context.tokens`); the
caller checks the whole prompt once more with an exact count where there is one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from engine.errors import DetektivError

__all__ = [
    "DoesNotFit",
    "Plan",
    "largest_cap",
    "RoundCost",
    "Trim",
    "plan_all_rounds",
    "plan_rounds",
    "shorten",
    "span",
]

T = TypeVar("T")
Mode = Literal["whole", "digest", "omitted"]

CUT_MARK = " […{n} chars cut…] "
MIN_ANSWER = 48
"""The shortest an answer is cut to (characters), head and tail together."""
MIN_QUESTION = 80
MIN_ANSWER_ALL = 16
MIN_QUESTION_ALL = 40
"""The same, for the audit: every round must be there, however briefly."""


class DoesNotFit(DetektivError):
    """Even the smallest form of the prompt needs more tokens than the limit. Given the
    window it was fitted to, the message names the context window, and what the reply kept."""

    def __init__(self, needed: int, limit: int, *, window: int | None = None,
                 source: str = "", provider: str = "", reply: int | None = None) -> None:
        left = max(0, limit)  # a reply's room larger than the window leaves nothing, not -209
        if window is None:
            message = f"the prompt needs at least {needed} tokens, {left} available"
        else:
            whose = f"{provider}'s context window" if provider else "the context window"
            said = f" ({WINDOW_SOURCES.get(source, source)})" if source else ""
            kept = f" beside {reply} kept for the reply" if reply else ""
            message = (f"the prompt needs at least {needed} tokens; {whose} of {window} "
                       f"tokens{said} leaves {left} for it{kept}")
        super().__init__(message)
        self.needed = needed
        self.limit = limit
        self.window = window


WINDOW_SOURCES = {"config": "as configured", "server": "as the server said",
                  "model": "known for the model", "default": "a default: set context_window"}
"""Where a window came from, as an error says it."""


@dataclass(frozen=True, slots=True)
class Trim:
    """What was left out of a prompt for it to fit (round numbers, or turn numbers)."""

    digested: tuple[int, ...] = ()
    """Rounds sent as a one-line digest."""
    shortened: tuple[int, ...] = ()
    """Rounds whose answer (or question) was shortened."""
    omitted: tuple[int, ...] = ()
    """Rounds or turns not sent at all."""

    def __bool__(self) -> bool:
        return bool(self.digested or self.shortened or self.omitted)


def span(numbers: Sequence[int]) -> str:
    """`"2–5, 7"`: numbers as ranges."""
    parts: list[str] = []
    ordered = sorted(numbers)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}–{ordered[j]}")
        i = j + 1
    return ", ".join(parts)


def shorten(text: str, cap: int | None) -> str:
    """`text` cut to about `cap` characters: its head and tail, the cut marked between."""
    if cap is None or len(text) <= cap:
        return text
    head = (cap * 2) // 3
    tail = cap - head
    cut = len(text) - head - tail
    return text[:head].rstrip() + CUT_MARK.format(n=cut) + text[len(text) - tail :].lstrip()


MARK_TOKENS = 9
"""What the cut mark costs, about (`CUT_MARK` with its number)."""


def _part(tokens: int, chars: int, cap: int | None) -> int:
    if cap is None or chars <= cap:
        return tokens
    return -(-tokens * cap // max(chars, 1)) + MARK_TOKENS


@dataclass(slots=True)
class RoundCost(Generic[T]):
    """One round for the planner: how it renders, and what each form costs.

    Texts are counted once; a shortened answer costs its share of the answer's tokens (the
    caller's final count of the whole prompt catches the difference)."""

    item: T
    number: int
    question: str
    answer: str
    whole: Callable[[int | None, int | None], str]
    """The round whole, with (answer cap, question cap) in characters (None: uncut)."""
    digest: Callable[[], str]
    count: Callable[[str], int]
    extra: int = 0
    """Tokens the whole form costs beyond its text (message framing, separators)."""
    _counts: dict[str, int] = field(default_factory=dict)

    @property
    def answer_chars(self) -> int:
        return len(self.answer)

    @property
    def question_chars(self) -> int:
        return len(self.question)

    def _measure(self, what: str) -> int:
        found = self._counts.get(what)
        if found is None:
            if what == "whole":
                found = self.count(self.whole(None, None))
            elif what == "digest":
                found = self.count(self.digest())
            else:
                found = self.count(self.answer if what == "answer" else self.question)
            self._counts[what] = found
        return found

    def floor(self) -> int:
        """About the least the whole form can cost (an estimate piece covers at most 8
        characters, but for long runs of whitespace): enough to see that a transcript cannot
        fit whole without measuring every round. Only ever skips work, never decides a fit."""
        return len(self.whole(None, None)) // 8 + self.extra

    def cost(self, mode: Mode, cap: int | None = None, qcap: int | None = None) -> int:
        if mode == "omitted":
            return 0
        if mode == "digest":
            return self._measure("digest") + 1
        whole = self._measure("whole") + self.extra
        if cap is not None and cap < len(self.answer):
            answer = self._measure("answer")
            whole += _part(answer, len(self.answer), cap) - answer
        if qcap is not None and qcap < len(self.question):
            question = self._measure("question")
            whole += _part(question, len(self.question), qcap) - question
        return whole


@dataclass(frozen=True, slots=True)
class Plan(Generic[T]):
    """Per round: its form and caps, in order; plus the marker for rounds left out."""

    rounds: tuple[tuple[RoundCost[T], Mode, int | None, int | None], ...]
    trim: Trim
    tokens: int


def _trim(rounds: Sequence[tuple[RoundCost[T], Mode, int | None, int | None]]) -> Trim:
    return Trim(
        digested=tuple(r.number for r, mode, _, _ in rounds if mode == "digest"),
        shortened=tuple(
            r.number for r, mode, cap, qcap in rounds
            if mode == "whole" and ((cap is not None and cap < r.answer_chars)
                                    or (qcap is not None and qcap < r.question_chars))
        ),
        omitted=tuple(r.number for r, mode, _, _ in rounds if mode == "omitted"),
    )


def _total(
    rounds: Sequence[tuple[RoundCost[T], Mode, int | None, int | None]],
    omitted_cost: Callable[[int], int],
) -> int:
    left_out = sum(1 for _, mode, _, _ in rounds if mode == "omitted")
    return sum(r.cost(mode, cap, qcap) for r, mode, cap, qcap in rounds) + (
        omitted_cost(left_out) if left_out else 0
    )


def largest_cap(fits: Callable[[int], bool], low: int, high: int) -> int | None:
    """The largest cap in [low, high] for which `fits` holds (it is monotone), else None."""
    if not fits(low):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def plan_rounds(
    rounds: Sequence[RoundCost[T]], limit: int, omitted_cost: Callable[[int], int]
) -> Plan[T]:
    """The first and newest rounds whole, the middle digested, within `limit` tokens (see the
    module docstring for what gives way first). `omitted_cost(k)` is what the line saying that
    k rounds were left out costs. Raises `DoesNotFit` when not even the line that says every
    round was left out fits."""
    n = len(rounds)
    if n == 0:
        return Plan((), Trim(), 0)

    def plan(modes: list[Mode], cap: int | None = None, qcap: int | None = None) -> list[
        tuple[RoundCost[T], Mode, int | None, int | None]
    ]:
        return [
            (r, m, cap if m == "whole" else None, qcap if m == "whole" else None)
            for r, m in zip(rounds, modes, strict=True)
        ]

    def done(chosen: list[tuple[RoundCost[T], Mode, int | None, int | None]]) -> Plan[T]:
        return Plan(tuple(chosen), _trim(chosen), _total(chosen, omitted_cost))

    everything = plan(["whole"] * n)
    if sum(r.floor() for r in rounds) <= limit and _total(everything, omitted_cost) <= limit:
        return done(everything)
    # first and last whole, the middle digested; then newest middle rounds promoted
    whole: Mode = "whole"
    middle: list[Mode] = ["digest"] * max(0, n - 2)
    modes: list[Mode] = [whole, *middle, whole] if n > 1 else [whole]
    total = _total(plan(modes), omitted_cost)
    if total <= limit:
        for i in range(n - 2, 0, -1):  # counted by difference: no re-adding of every round
            grown = total + rounds[i].cost("whole") - rounds[i].cost("digest")
            if grown > limit:
                break
            modes[i], total = "whole", grown
        return done(plan(modes))
    # digests left out, oldest first
    for i in range(1, n - 1):
        # rounds 2..i+1 are out now: one more for the line that says so, one digest less
        total += (omitted_cost(i) - (omitted_cost(i - 1) if i > 1 else 0)
                  - rounds[i].cost("digest"))
        modes[i] = "omitted"
        if total <= limit:
            return done(plan(modes))
    # the first and last answers shortened evenly; then the first round left out too
    starts: list[list[Mode]] = [["whole"], ["omitted"]] if n > 1 else [[]]
    for first in starts:
        left_out: list[Mode] = ["omitted"] * max(0, n - 2)
        modes = [*first, *left_out, whole]
        longest = max(r.answer_chars for r, m in zip(rounds, modes, strict=True) if m == "whole")

        def fits(c: int, modes: list[Mode] = modes) -> bool:
            return _total(plan(modes, c), omitted_cost) <= limit

        cap = largest_cap(fits, min(MIN_ANSWER, longest), max(longest, MIN_ANSWER))
        if cap is not None:
            return done(plan(modes, cap))
    # the newest round alone, its question shortened too
    low = min(MIN_ANSWER, rounds[-1].answer_chars)
    longest_q = rounds[-1].question_chars

    def fits_question(q: int) -> bool:
        return _total(plan(modes, low, q), omitted_cost) <= limit

    qcap = largest_cap(fits_question, min(MIN_QUESTION, longest_q), max(longest_q, MIN_QUESTION))
    if qcap is not None:
        return done(plan(modes, low, qcap))
    # the newest round as a digest, then left out too: the prompt's frame (the instructions,
    # the hypothesis) is all a call needs, and a round of emoji is 4 tokens a character by
    # the bound: a session is never failed by one long round
    last: list[Mode] = ["omitted"] * (n - 1)
    for newest in ("digest", "omitted"):
        smallest = plan([*last, newest])
        if _total(smallest, omitted_cost) <= limit:
            return done(smallest)
    raise DoesNotFit(_total(plan(["omitted"] * n), omitted_cost), limit)


def plan_all_rounds(rounds: Sequence[RoundCost[T]], limit: int) -> Plan[T]:
    """Every round, whole; answers shortened to one even cap (then questions) when they do not
    all fit in `limit` tokens. Raises `DoesNotFit` when even the shortest form is too long."""

    def plan(cap: int | None, qcap: int | None = None) -> list[
        tuple[RoundCost[T], Mode, int | None, int | None]
    ]:
        return [(r, "whole", cap, qcap) for r in rounds]

    def total(cap: int | None, qcap: int | None = None) -> int:
        return sum(r.cost("whole", cap, qcap) for r in rounds)

    def done(cap: int | None, qcap: int | None = None) -> Plan[T]:
        chosen = plan(cap, qcap)
        return Plan(tuple(chosen), _trim(chosen), total(cap, qcap))

    if total(None) <= limit:
        return done(None)
    longest = max((r.answer_chars for r in rounds), default=0)
    cap = largest_cap(lambda c: total(c) <= limit, min(MIN_ANSWER_ALL, longest),
                       max(longest, MIN_ANSWER_ALL))
    if cap is not None:
        return done(cap)
    low_answer = min(MIN_ANSWER_ALL, longest)
    longest_q = max((r.question_chars for r in rounds), default=0)
    qcap = largest_cap(lambda q: total(low_answer, q) <= limit,
                        min(MIN_QUESTION_ALL, longest_q), max(longest_q, MIN_QUESTION_ALL))
    if qcap is not None:
        return done(low_answer, qcap)
    raise DoesNotFit(total(low_answer, min(MIN_QUESTION_ALL, longest_q)), limit)
