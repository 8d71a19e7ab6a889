"""Token log-probabilities as the OpenAI-compatible wire carries them (OpenAI, llama.cpp,
vLLM, Ollama's `/v1`, LiteLLM): a choice's `logprobs.content`, one entry a token, each with
its `token`, `logprob` and `top_logprobs` alternatives. Read leniently: an entry that is not
what it should be (a string for a number, a NaN or an infinity, a missing token) is left out,
never an error, since the answer itself is still whole; a hostile list is read only up to
`MOST_CHOICES`."""

from __future__ import annotations

import math
from typing import Any

from engine.providers._events import TokenChoices

__all__ = ["MOST_ALTERNATIVES", "MOST_CHOICES", "token_choices", "wants_logprobs"]

MOST_CHOICES = 4096
"""Token entries read from one chunk: a server sending more is not answering one delta."""
MOST_ALTERNATIVES = 20
"""Alternatives kept a token (OpenAI's own limit for `top_logprobs`)."""


def _logprob(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    if not math.isfinite(number) or number > 0:  # a probability above 1 is no probability,
        return None  # and -inf (a token masked out, as a grammar does) is no alternative
    return number


def _entry(item: object) -> tuple[str, float] | None:
    if not isinstance(item, dict):
        return None
    token, logprob = item.get("token"), _logprob(item.get("logprob"))
    if not isinstance(token, str) or logprob is None:
        return None
    return token, logprob


def token_choices(logprobs: object) -> list[TokenChoices]:
    """The `TokenChoices` of a choice's `logprobs` object (`{"content": [...]}`), in order;
    an empty list for anything else."""
    content: Any = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return []
    found: list[TokenChoices] = []
    for item in content[:MOST_CHOICES]:
        chosen = _entry(item)
        if chosen is None:
            continue
        raw = item.get("top_logprobs")
        top = [entry for entry in (_entry(alt) for alt in raw[:MOST_ALTERNATIVES])
               if entry is not None] if isinstance(raw, list) else []
        if chosen not in top:
            top.insert(0, chosen)
        found.append(TokenChoices(chosen[0], chosen[1], tuple(top)))
    return found


def wants_logprobs(body: dict[str, Any], top: int | None) -> None:
    """Ask for `top` alternatives a token in an OpenAI-compatible request `body`."""
    if top:
        body["logprobs"] = True
        body["top_logprobs"] = max(1, min(top, MOST_ALTERNATIVES))
