"""Measuring a prompt's tokens for `engine.context.budget`: exactly, by a bound, or as the
server's replies reported.

An exact count is two round trips to the server. A prompt whose UTF-8 bytes (and a chat
template's markers) are within half the limit goes without one: no tokenizer makes more tokens
than that (`byte_bound`, `counted="bounded"`). Once a server's counts have been taken
`CALIBRATION` times, a longer prompt whose estimate, times the largest exact-to-estimate ratio
seen and `BOUND_SLACK`, is within half the limit goes without one too: only a prompt nearer
the limit is counted, one such call in `RECOUNT` is counted all the same so the ratio keeps
being measured, and a server that refuses a prompt as too long is measured anew. A reply that
reports its prompt's tokens (llama.cpp's `usage`) is such a count, taken for free: a server
whose replies report is calibrated by them and never recounted (`measured`).

A gateway whose model's backends are all llama.cpp servers beside it has them count every
prompt (`Provider.counts_every_prompt`: no bound by earlier counts). A server that cannot
count (another gateway, a cloud API) has its prompts measured by an upper bound
(`tokens.bound`) until its replies report what a prompt took (`measured`); after one
reply by the worst of the last `RECENT` ratios reported, times `REPORTED_SLACK`; from the
second on by its texts and the chat template's fixed part as the replies showed them
(`_template`, `uncounted`): the texts at the worst recent ratio of the prompts' own text,
a schema sent as text beside them at the worst its own text showed (`schema_measure`).
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.context.tokens import (
    MESSAGE_OVERHEAD,
    bound,
    bound_messages,
    estimate,
    estimate_messages,
)
from engine.context.windows import forget, key_of, mark_inexact, transient
from engine.providers import Message

if TYPE_CHECKING:
    from engine.providers import Provider

__all__ = ["BOUND_SLACK", "CALIBRATION", "RECOUNT", "UNANSWERED", "byte_bound", "calibrated",
           "count_exactly", "forget_window", "measured", "refit_share", "schema_measure",
           "text_measure", "uncounted", "within_bound"]

log = logging.getLogger(__name__)


CALIBRATION = 8
"""A server's exact counts taken before its estimates are trusted within a measured bound."""
RECOUNT = 16
"""Of the calls a bound would do for, every RECOUNT-th is counted exactly all the same."""
BOUND_SLACK = 1.15
"""The bound: the estimate × the largest exact/estimate ratio seen × this."""
BOUND_SHARE = 0.5
"""A bound is trusted only within this share of the limit: a text unlike those measured
(code, another script) may be off the measured ratio by twice and still fit."""


@dataclass(slots=True)
class _Ratio:
    """What one server's exact counts say of the estimate."""

    counts: int = 0
    worst: float = 0.0
    bounded: int = 0
    reported: int = 0  # of `counts`, the ones a reply's usage gave
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))
    """The last `RECENT` ratios: what a reported bound goes by (`_reported_factor`)."""
    seen: deque[tuple[int, int, int, int]] = field(default_factory=lambda: deque(maxlen=SEEN))
    """(the texts' estimate, the estimate of the text added beside them, messages, tokens
    reported) of the last `SEEN` reported prompts, short ones too: what a template's fixed
    part and the ratios are learned from (`_template`)."""


_ratios: dict[tuple[str, str], _Ratio] = {}


def byte_bound(messages: Sequence[Message]) -> int:
    """A count no tokenizer exceeds: every token is at least one byte of the text (byte-level
    BPE; SentencePiece, whose unknown characters fall back to bytes), and a chat template
    adds at most `MESSAGE_OVERHEAD` around a message (and once more for the reply's header
    and a BOS)."""
    return sum(len(m.content.encode("utf-8")) + MESSAGE_OVERHEAD for m in messages) + \
        MESSAGE_OVERHEAD


def within_bound(provider: Provider, guess: int, limit: int, most: int) -> int | None:
    """An upper bound on the exact count of a prompt estimated at `guess` tokens and of at
    most `most` (`byte_bound`), when it is within `BOUND_SHARE` of `limit`: `most` itself
    (no count needed for a prompt that short, on any tokenizer), or what this server's
    counts measured (the smaller); None (count it exactly) when neither is within the share:
    until `CALIBRATION` counts, near the limit, and for every `RECOUNT`-th call the measured
    bound alone would do for."""
    share = limit * BOUND_SHARE
    ratio = _ratios.get(key_of(provider))
    by_ratio = math.ceil(guess * ratio.worst * BOUND_SLACK) \
        if ratio is not None and ratio.counts >= CALIBRATION else None
    if most <= share:
        return most if by_ratio is None else min(most, by_ratio)
    if ratio is None or by_ratio is None or by_ratio > share:
        return None
    ratio.bounded += 1
    if ratio.reported:  # its replies keep measuring the ratio: no count needs asking for that
        return by_ratio
    return None if ratio.bounded % RECOUNT == 0 else by_ratio


PLAUSIBLE = 5
"""An exact count more than this many times off the estimate is not believed (a server that
answers /tokenize with an empty list would otherwise let any prompt through)."""


UNANSWERED = 3
"""Counts in a row a server left unanswered (no reply within the count's few seconds) before
its prompts are estimated from then on: one whose `/tokenize` hangs would otherwise hold
every call for its deadline."""
_unanswered: dict[tuple[str, str], int] = {}


async def count_exactly(provider: Provider, messages: Sequence[Message]) -> int | None:
    """The provider's exact count, or None: this call is estimated. A server that cannot
    count (an error status, a reply of the wrong shape, a count nobody could mean) is
    estimated from then on; one that did not answer this time is asked again next time,
    up to `UNANSWERED` times in a row."""
    key = key_of(provider)
    try:
        counted = await provider.count_tokens(messages)
    except Exception as exc:  # fall back to the estimate, and say so in the report
        log.info("%s: cannot count tokens: %s", provider.name, exc)
        if transient(exc):
            _unanswered[key] = _unanswered.get(key, 0) + 1
            if _unanswered[key] < UNANSWERED:
                return None
        counted = -1
    else:
        _unanswered.pop(key, None)
    guess = estimate_messages(messages)
    if counted is not None and _record(_ratios, provider, counted, guess):
        return counted
    if counted is not None and counted >= 0:
        log.info("%s: a count of %d tokens for about %d is not believed", provider.name,
                 counted, guess)
    mark_inexact(provider)
    return None


def _plausible(counted: int, guess: int) -> bool:
    """Whether a count of `counted` tokens could mean a prompt estimated at `guess`
    (`PLAUSIBLE`)."""
    return guess / PLAUSIBLE <= counted <= guess * PLAUSIBLE + 16


def _record(table: dict[tuple[str, str], _Ratio], provider: Provider, counted: int,
            guess: int) -> bool:
    """Count `counted` (a prompt estimated at `guess`) in `provider`'s ratio in `table`, unless
    nobody could mean it (more than `PLAUSIBLE` times off): whether it was counted."""
    if not _plausible(counted, guess):
        return False
    ratio = table.setdefault(key_of(provider), _Ratio())
    ratio.counts += 1
    ratio.worst = max(ratio.worst, counted / max(1, guess))
    ratio.recent.append(counted / max(1, guess))
    return True


def forget_window(provider: Provider, told: int | None = None) -> None:
    """Drop what was discovered about `provider` (`windows.forget`: its server rejected a
    prompt as too long) and what its counts measured: a bound may have been wrong."""
    _ratios.pop(key_of(provider), None)
    _reported.pop(key_of(provider), None)
    _unanswered.pop(key_of(provider), None)
    forget(provider, told)


_reported: dict[tuple[str, str], _Ratio] = {}
"""Per provider that cannot count: its prompts' tokens as its replies reported them, against
the estimate (`measured`)."""
REPORTED_CALIBRATION = 1
"""Replies whose reported prompt tokens are taken before they bound the estimate: one (on one
tokenizer, the texts measured here ranged from 0.93 to 1.24 times the estimate; the worst
ratio seen, `BOUND_SLACK` and the margin hold that, a refusal that names the count the rest)."""
RECENT = 8
"""Reported ratios a bound goes by: the worst of the last eight. One unusual prompt (a round
of emoji, a table of numbers) once padded every later prompt of a session by a third; it now
ages out. A prompt the server then refuses names its count, is fitted again to it, and starts
the measuring over."""
REPORTED_SLACK = 1.08
"""The bound of a provider whose replies report: the worst recent ratio they showed times this. A
ratio measured on the session's own prompts (the same templates, the same model) varies
little once the template's fixed part is taken out and the estimate reads whitespace and
spaced digits as tokenizers do: 0.89–0.96 over SmolLM2's LiteLLM sessions; a server that
refuses a prompt all the same has it fitted again to what its refusal says."""
MEASURED_FROM = 256
"""Estimated tokens a prompt needs for its reported count to measure the ratio: in a shorter
one, a template's fixed part (Qwen's and SmolLM2's default system prompts: 20–30 tokens)
weighs as much as the text."""


SEEN = 32
"""Reported prompts a template's fixed part is learned from."""
ONE_PROMPT_FIXED = 6
"""The fixed part a template is taken to add a message while one prompt alone was reported
(one count cannot tell the fixed part from the ratio): between the 5 of ChatML's special
tokens (SmolLM2, Qwen) and the 11 of a template whose markers its vocabulary lacks (Gemma 3
behind LiteLLM). Replayed on the gateway benchmark's replies, each session measured afresh:
6 kept SmolLM2's second prompts within 20 % of their count where 8 did not (94 % of calls);
a short second prompt on Gemma may then be a few tokens under (128 for 134), which the
estimate's margin holds."""


def measured(provider: Provider, messages: Sequence[Message], prompt_tokens: object,
             counts: bool = False, added: str = "") -> None:
    """A reply of `provider` reported `prompt_tokens` for the prompt `messages` and `added`,
    the text the provider put in beside them (a schema sent as text: left out of the
    estimate, 260 tokens of it made a 309-token estimate of a 573-token prompt read as a
    ratio of 1.85, which then padded every prompt after it by twice).

    Of a provider that cannot count: the measure that bounds its estimates once
    `REPORTED_CALIBRATION` replies have said (the estimate times the worst recent ratio times
    `BOUND_SLACK`, above `bound_messages` too when that is what was measured). Of one that
    can (`counts`: llama.cpp, whose `prompt_tokens` is the whole prompt, its cached part
    included): an exact count taken for free, which calibrates `within_bound` as a count
    asked for would, and keeps measuring its ratio, so none is asked for that alone."""
    if not isinstance(prompt_tokens, int) or isinstance(prompt_tokens, bool):
        return
    beside = estimate(added) if added else 0
    guess = estimate_messages(messages) + beside
    if not counts and _plausible(prompt_tokens, guess):
        texts = sum(estimate(m.content) for m in messages)
        _reported.setdefault(key_of(provider), _Ratio()).seen.append(
            (texts, beside, len(messages), prompt_tokens))
    if guess < MEASURED_FROM:  # shorter: a template's fixed part would pass for the ratio
        return
    if not counts:
        _record(_reported, provider, prompt_tokens, guess)
    elif _record(_ratios, provider, prompt_tokens, guess):
        _ratios[key_of(provider)].reported += 1


def refit_share(used: int, needed: int | None, told: int | None) -> float:
    """The share of its room a prompt refused as too long is fitted to again: all of it for
    the window the refusal named (`told`), a quarter less when it named none; lower by how far
    the server's count of the refused prompt (`needed`) was above ours (`used`: a gateway's
    model counts differently), unless that count is more than twice ours (of something else:
    not believed)."""
    if needed and used < needed <= 2 * used:
        return used / needed * 0.95
    return 1.0 if told else 0.75


def text_measure(provider: Provider) -> Callable[[str], int]:
    """How a text of a provider that cannot count is measured: `bound` until its replies
    measured the estimate, then the estimate times the worst recent ratio of the prompts' own
    text (`_template`; after one reply, of the whole prompt) and `REPORTED_SLACK`, never above
    the text's bytes, which no tokenizer exceeds."""
    return _times(_text_factor(provider, added=False))


def schema_measure(provider: Provider) -> Callable[[str], int]:
    """How a schema sent as text beside a prompt (`Provider.schema_prompt`) is measured: as
    `text_measure`, at the worst ratio such text showed once a reply measured it (JSON
    Schema's braces and quotes: 0.88 of the estimate on SmolLM2, where the prompts' prose
    showed up to 1.09; one ratio for both took a schema prompt for a quarter more)."""
    return _times(_text_factor(provider, added=True))


def _times(factor: float | None) -> Callable[[str], int]:
    """`bound`, or the estimate times `factor`, never above the text's bytes."""
    if factor is None:
        return bound
    return lambda text: min(len(text.encode("utf-8")), math.ceil(estimate(text) * factor))


def _text_factor(provider: Provider, added: bool) -> float | None:
    """What a text's estimate is multiplied by (`REPORTED_SLACK` in it), once a prompt long
    enough to measure it was reported (`_reported_factor`): the template's ratio for the
    prompts' texts or for the text added beside them; None before (measured by `bound`)."""
    factor = _reported_factor(provider)
    return _factor_of(factor, _template_of(provider) if factor is not None else None, added)


def _factor_of(factor: float | None, template: Template | None, added: bool) -> float | None:
    """`_text_factor` from the whole prompt's `factor` and the `template` measured."""
    if template is None:  # nothing measured yet (short prompts alone measure nothing)
        return factor
    return (template.added if added and template.added is not None else template.ratio) \
        * REPORTED_SLACK


def _template_of(provider: Provider) -> Template | None:
    """`_template` of what `provider`'s replies reported."""
    return _template(_reported[key_of(provider)].seen)


def calibrated(provider: Provider) -> bool:
    """Whether a provider that cannot count has had its prompts measured by its replies."""
    return _reported_factor(provider) is not None


def _reported_factor(provider: Provider) -> float | None:
    """What the estimate of a provider that cannot count is multiplied by, once its replies
    have measured it: the worst of the last `RECENT` ratios they showed, times
    `REPORTED_SLACK`."""
    ratio = _reported.get(key_of(provider))
    if ratio is None or ratio.counts < REPORTED_CALIBRATION:
        return None
    return max(ratio.recent) * REPORTED_SLACK


@dataclass(frozen=True, slots=True)
class Template:
    """What a server's reported prompts say of its chat template (`_template`)."""

    fixed: int
    """Tokens the template adds a message (the reply's header counted as one more)."""
    ratio: float
    """The prompts' texts: tokens to estimate, after the fixed part."""
    added: float | None
    """A text sent beside the messages (a schema as text), the same; None until one was."""


def _template(seen: Sequence[tuple[int, int, int, int]]) -> Template | None:
    """What a server's reported prompts say of its chat template and its tokenizer, or None
    until two prompts were reported.

    The fixed part is the one (0 to `MESSAGE_OVERHEAD`) under which the reported prompts'
    text ratios agree best — a wrong one makes the short prompts' ratios stray from the long
    ones' — the larger one when several agree alike (one prompt agrees with any). Under it,
    the texts' ratio is the largest of the last `RECENT` prompts with nothing beside them
    (of all prompts, until one had nothing beside it), and the added text's the largest of
    the last `RECENT` with something beside them, after their texts at the median of those
    ratios. Measured through LiteLLM on SmolLM2: 14 tokens for two messages and 25 for four
    (ChatML's markers, about 5 a message), where `estimate_messages` assumes 34 and 58; the
    prompts' text at 0.93–1.09 of the estimate, JSON Schema at 0.88–0.90."""
    if not seen:
        return None
    plain = [(texts, messages, tokens) for texts, beside, messages, tokens in seen
             if not beside]
    whole = [(texts + beside, messages, tokens) for texts, beside, messages, tokens in seen]
    shown = plain if len(plain) >= 2 else whole
    agreeing: tuple[float, int] | None = (1.0, ONE_PROMPT_FIXED) if len(seen) == 1 else None
    for fixed in range(MESSAGE_OVERHEAD, -1, -1) if agreeing is None else ():
        ratios = [(tokens - fixed * (messages + 1)) / max(1, texts)
                  for texts, messages, tokens in shown]
        if min(ratios) <= 0:
            continue
        spread = max(ratios) / min(ratios)
        if agreeing is None or spread < agreeing[0] - 1e-9:
            agreeing = (spread, fixed)
    if agreeing is None:
        return None
    fixed = agreeing[1]
    ratios = [(tokens - fixed * (messages + 1)) / max(1, texts)
              for texts, messages, tokens in (plain or whole)[-RECENT:]]
    usual = statistics.median(ratios)
    beside = [(tokens - fixed * (messages + 1) - usual * texts) / added
              for texts, added, messages, tokens in seen if added][-RECENT:]
    return Template(fixed, max(ratios), max(beside) if beside and max(beside) > 0 else None)


def uncounted(provider: Provider, messages: Sequence[Message]) -> int:
    """What a prompt of a provider that cannot count is taken to use: `bound_messages` until
    its replies measured the estimate; after one reply, the whole prompt's estimate (a
    template's markers in it, as when it was measured) times `_reported_factor`; from the
    second, its texts and the template's fixed part as the replies showed them (`_template`:
    the estimate's assumed template took a 58-token prompt for 81), never above the bound."""
    factor = _reported_factor(provider)
    if factor is None:
        return bound_messages(messages)
    template = _template_of(provider)  # taken once: the bound's measure comes from it too
    most = bound_messages(messages, _times(_factor_of(factor, template, added=False)))
    if template is None:
        return min(most, math.ceil(estimate_messages(messages) * factor))
    texts = sum(estimate(m.content) for m in messages)
    return min(most, math.ceil((texts * template.ratio + template.fixed * (len(messages) + 1))
                               * REPORTED_SLACK))
