"""Budgets: how many tokens a provider takes, and fitting a prompt into them.

    fitted = await fit(provider, prompt)      # before every call the router makes
    fitted.request                            # what is sent: within the provider's window
    fitted.report                             # tokens used / window, how counted, what was cut

The window is `engine.context.windows`'s: configured, said by the server, or a default.

The reply's `max_tokens` is reserved (lowered to a third of a small window, and said so), plus
a margin: a few tokens when the provider counts exactly (llama.cpp's `/tokenize`, also behind a
gateway: `read_messages`, the prompt with a schema sent as text), a twentieth of the window
when it cannot. A provider that cannot count (another gateway, a cloud API) has its
prompts measured by an upper bound (`tokens.bound`: the estimate times the worst ratio
measured on real tokenizers, other scripts at their UTF-8 bytes), never by the estimate alone:
an estimate of 1,813 tokens was 2,710 on the server. A prompt that cannot fit beside the
reply's room lowers that room to what the window leaves (the report says so), down to
`MIN_REPLY`; below that it does not fit, and `DoesNotFit` names the context window and what
the prompt measured. Before that, a retry's additions give up their room (`Prompt.lighter`:
its quoted reply, then its notes), before any round is digested. A first prompt to a server
nothing has measured yet that only the a-priori bound refuses (the estimate fits) is sent all
the same where the server refuses an overflow: its refusal names its count, and the router
fits the prompt again to that.

How a prompt's tokens are measured (exact counts, bounds, what replies reported) is
`engine.context.measure`'s.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from engine.context.fit import DoesNotFit, Trim, shorten
from engine.context.measure import (
    BOUND_SLACK,
    byte_bound,
    calibrated,
    count_exactly,
    forget_window,
    measured,
    schema_measure,
    text_measure,
    uncounted,
    within_bound,
)
from engine.context.tokens import BOUND_PRIMER, MESSAGE_OVERHEAD, estimate, estimate_messages
from engine.context.windows import LEARNED, Window, WindowSource, window_of
from engine.providers import Message, StreamRequest

if TYPE_CHECKING:
    from engine.providers import Provider

__all__ = [
    "BOUND_SLACK",
    "Composer",
    "byte_bound",
    "FitReport",
    "FittedRequest",
    "Prompt",
    "fit",
    "forget_window",
    "measured",
]

log = logging.getLogger(__name__)

Counted = Literal["exact", "bounded", "estimate"]

EXACT_MARGIN = 16
ESTIMATE_MARGIN = 0.05
MIN_ESTIMATE_MARGIN = 64
SMALL_REPLY_SHARE = 3
"""A reply never takes more than a third of the window: the prompt needs the rest."""
QUOTED_SHORT = 120
"""Characters of a retry's quoted reply kept when the window is tight (head and tail)."""
UNSET_REPLY = 4096
"""Tokens kept for a reply whose request sets no `max_tokens` (sent as the limit only when a
small window lowers it)."""


Composer = Callable[[int, Callable[[str], int]], tuple[list[Message], Trim]]
"""Builds the messages within a limit of tokens, as measured by the given count; raises
`DoesNotFit` when it cannot."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """A request before it is fitted: `compose` builds its messages for a given limit.

    `request` carries everything else (schema, max_tokens, temperature, timeouts); its
    messages are the unfitted ones. `reshape(reply_tokens)` gives the schema for a lowered
    reply budget. `extra` messages are appended whole after the composed ones (a retry)."""

    request: StreamRequest
    compose: Composer | None = None
    reshape: Callable[[int], dict[str, Any]] | None = None
    extra: tuple[Message, ...] = ()
    note: str = ""
    """Text added, after a blank line, to the last message (a user turn): a retry's reason,
    said without a turn of its own (strict chat templates want user and assistant to
    alternate) and without putting words in the model's mouth."""

    @classmethod
    def whole(cls, request: StreamRequest) -> Prompt:
        """A prompt sent as it is, or not at all."""
        return cls(request)

    def then(self, *messages: Message) -> Prompt:
        """The same prompt with `messages` appended (kept whole)."""
        return replace(self, extra=(*self.extra, *messages))

    def noted(self, note: str) -> Prompt:
        """The same prompt with `note` added to its last message (replacing an earlier note)."""
        return replace(self, note=note.strip())

    def messages(self, limit: int, count: Callable[[str], int]) -> tuple[list[Message], Trim]:
        """The messages within `limit` tokens; `DoesNotFit` when impossible.

        A retry's additions give up their room first (`lighter`): the heaviest form that fits
        with no round cut is sent; when every form needs rounds cut, the lightest one is."""
        forms = self.lighter()
        short: DoesNotFit | None = None
        kept: tuple[list[Message], Trim] | None = None
        for form in forms:
            try:
                kept = form._messages(limit, count)
            except DoesNotFit as exc:
                short = short if short is not None and short.needed <= exc.needed else exc
                continue
            if not kept[1]:
                return kept
        if kept is not None:
            return kept
        assert short is not None
        raise short

    def lighter(self) -> list[Prompt]:
        """This prompt, then its lighter forms, in the order they give up room: the retry's
        quoted reply shortened to its opening, then left out (what was said to the model stays
        as a note), then the notes cut to their first sentence. A prompt with no additions has
        one form."""
        if not self.extra and not self.note:
            return [self]
        forms = [self]
        quoted = tuple(Message(m.role, shorten(m.content, QUOTED_SHORT))
                       if m.role == "assistant" else m for m in self.extra)
        if quoted != self.extra:
            forms.append(replace(self, extra=quoted))
        said = [m.content.strip() for m in self.extra if m.role != "assistant"]
        note = "\n\n".join([*said, self.note] if self.note else said)
        if self.extra:
            forms.append(replace(self, extra=(), note=note))
        first = _first_sentence(note)
        if first != note:
            forms.append(replace(self, extra=(), note=first))
        return forms

    def _messages(self, limit: int, count: Callable[[str], int]
                  ) -> tuple[list[Message], Trim]:
        tail = list(self.extra)
        fixed = sum(count(m.content) + MESSAGE_OVERHEAD for m in tail)
        if self.note:
            fixed += count(self.note) + 1
        if self.compose is None:
            messages = self._noted([*self.request.messages, *tail])
            needed = sum(count(m.content) + MESSAGE_OVERHEAD for m in messages)
            if needed > limit:
                raise DoesNotFit(needed, limit)
            return messages, Trim()
        try:
            composed, trim = self.compose(limit - fixed, count)
        except DoesNotFit as exc:  # said of the whole prompt: the additions too
            raise DoesNotFit(exc.needed + fixed, limit) from None
        return self._noted([*composed, *tail]), trim

    def _noted(self, messages: list[Message]) -> list[Message]:
        if not self.note or not messages:
            return messages
        last = messages[-1]
        return [*messages[:-1], Message(last.role, f"{last.content.rstrip()}\n\n{self.note}")]


_SENTENCE = re.compile(r"\S.*?[.!?](?=\s|$)", re.DOTALL)


def _first_sentence(text: str) -> str:
    """`text`'s first sentence, its lines joined (all of it when no sentence ends)."""
    found = _SENTENCE.search(text)
    return " ".join(found.group(0).split()) if found else text


@dataclass(frozen=True, slots=True)
class FitReport:
    """How one call was fitted: the `context_fitted` event's figures."""

    provider: str
    used: int
    window: int
    window_source: WindowSource
    counted: Counted
    reply: int
    asked_reply: int | None
    trim: Trim = field(default_factory=Trim)

    @property
    def reply_lowered(self) -> bool:
        return self.asked_reply is not None and self.reply < self.asked_reply


@dataclass(frozen=True, slots=True)
class FittedRequest:
    """The request to send, and how it was fitted."""

    request: StreamRequest
    report: FitReport


async def fit(
    provider: Provider, prompt: Prompt | StreamRequest, shrink: float = 1.0,
    told: int | None = None,
) -> FittedRequest:
    """`prompt` built within `provider`'s window; raises `DoesNotFit` when impossible.

    After the server refused a prompt as too long: `told` is the window its error named (it
    wins over anything else), else the prompt's share is scaled by `shrink`."""
    if isinstance(prompt, StreamRequest):
        prompt = Prompt.whole(prompt)
    window = await window_of(provider)
    if told is not None and told < window.tokens:
        window = replace(window, tokens=told, source="server", said_by=LEARNED)
    asked = prompt.request.max_tokens
    reply = min(asked or UNSET_REPLY, max(1, window.tokens // SMALL_REPLY_SHARE))
    try:
        return await _fit(provider, prompt, window, reply, shrink)
    except DoesNotFit as exc:
        short = exc
    # the prompt alone needs more than the window leaves it beside the reply's room: the reply
    # gets what is left (the report says it was lowered), down to `MIN_REPLY`
    room, least = reply, min(reply, MIN_REPLY)
    for step in range(4):  # each try measures the prompt anew and aims from that; the last
        # one gives the reply the least room (what the error then says was tried)
        deficit = math.ceil(max(0, short.needed - short.limit) / max(shrink, 0.01))
        lower = least if step == 3 else max(least, room - deficit - 8)
        if lower >= room:
            break
        room = lower
        try:
            return await _fit(provider, prompt, window, room, shrink)
        except DoesNotFit as exc:
            short = exc
    if told is None and shrink == 1.0 and not window.exact and not calibrated(provider) \
            and provider.refuses_overflow:
        # nothing measured this server yet: the a-priori bound (the worst tokenizer's ratio)
        # refused a prompt the estimate fits. It is sent by the estimate: a server that then
        # refuses it names its count, and it is fitted again to that (never refused here on
        # a guess: a 663-token prompt the backend answers was)
        try:
            return await _fit(provider, prompt, window, room, shrink, optimistic=True)
        except DoesNotFit:
            pass
    raise DoesNotFit(short.needed, short.limit, window=window.tokens, source=window.source,
                     provider=provider.label, reply=room)


MIN_REPLY = 32
"""The fewest tokens a reply's room is lowered to, to make room for the prompt."""


async def _fit(provider: Provider, prompt: Prompt, window: Window, reply: int,
               shrink: float, optimistic: bool = False) -> FittedRequest:
    """`fit` with the reply's room decided; `optimistic`: a provider that cannot count has
    its prompt measured by the plain estimate, not the bound."""
    request = prompt.request
    asked = request.max_tokens
    # a reasoning budget the provider asks for is spent before the reply (Anthropic adds it
    # to max_tokens): the window keeps room for both
    thinking = min(provider.config.reasoning_budget or 0, window.tokens // 2)
    schema = prompt.reshape(reply) if prompt.reshape is not None else request.schema

    def budget(exact: bool) -> tuple[int, int]:
        """(tokens the messages may take, tokens the schema costs), for the way this call is
        counted. The margin follows the count (exact, or an estimate); the schema's cost
        follows the server (`Provider.schema_is_text`): llama.cpp, vLLM and Ollama, also
        behind a gateway, turn the schema into a grammar, not text (charging it left 88 tokens
        of a 1024-token window for the prompt); the anthropic kind and vendors' APIs send it
        as text: estimated."""
        margin = EXACT_MARGIN if exact else max(
            MIN_ESTIMATE_MARGIN, int(window.tokens * ESTIMATE_MARGIN))  # the bound's slack
        schema_cost = schema_measure(provider)(provider.schema_prompt(schema)) \
            if schema is not None and not window.exact else 0
        limit = int((window.tokens - reply - thinking - margin - schema_cost) * shrink)
        if limit <= 0:  # the reply's room (and the margin) take the whole window
            raise DoesNotFit(estimate_messages(prompt.request.messages[-1:]), limit)
        return limit, schema_cost

    counted: Counted = "exact" if window.exact else "estimate"
    limit, schema_cost = budget(window.exact)
    target = limit
    most = 0  # the largest prompt measured: what a prompt that cannot be cut needs
    for _ in range(5):
        # composed by the estimate where the server will count, else by the upper bound
        measure = estimate if counted != "estimate" or optimistic else text_measure(provider)
        # the reply's header (3 tokens), or what `_uncounted` adds to the texts' measures
        header = 3 if counted != "estimate" else BOUND_PRIMER
        try:
            messages, trim = prompt.messages(target - header, measure)
        except DoesNotFit as exc:  # said of the whole prompt (its template too, as `used`
            # counts it) against the room the window leaves it: measured, not limit + 1
            raise DoesNotFit(max(exc.needed + header, most), limit) from None
        used: int | None = None
        within = within_bound(provider, estimate_messages(messages), limit, byte_bound(messages)) \
            if counted != "estimate" and not window.every else None
        if within is not None:
            used, counted = within, "bounded"
        elif counted != "estimate":
            counted = "exact"
            used = await count_exactly(provider, provider.read_messages(messages, schema))
            if used is None:  # the server could not count after all: estimate, with margin
                counted = "estimate"
                limit, schema_cost = budget(False)
                target = min(target, limit)
                continue
        if used is None:  # nobody counts: an upper bound, as measured
            used = estimate_messages(messages) if optimistic else uncounted(provider, messages)
        if not trim:
            most = max(most, used)
        if used <= limit:
            fitted = replace(
                request,
                messages=tuple(messages),
                max_tokens=reply if asked is not None or reply < UNSET_REPLY else None,
                schema=schema,
            )
            return FittedRequest(fitted, FitReport(
                provider=provider.label, used=used + schema_cost, window=window.tokens,
                window_source=window.source, counted=counted, reply=reply, asked_reply=asked,
                trim=trim,
            ))
        # the estimate was short of the real count: aim lower by the ratio, and try again
        target = min(target - 1, target * limit // used - 8)
        if target <= 0:
            break
    raise DoesNotFit(used if used is not None else limit + 1, limit)
