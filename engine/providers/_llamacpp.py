"""llama.cpp's own endpoints beside the OpenAI-compatible ones: the slot's window and exact
token counts. Used by the `local` kind (its in-process server) and by `openai` providers that
point at a llama.cpp server. (What other servers say of a model: `_gateway`.)

- `GET /props` → `default_generation_settings.n_ctx` (the context one slot gives a request);
  `GET /slots` → `[0].n_ctx` when /props does not say.
- `POST /apply-template {messages}` → `{prompt}`, the chat template applied, then
  `POST /tokenize {content, add_special, parse_special}` → `{tokens}`: the prompt exactly as
  the chat endpoint will see it.

Whatever a server answers is checked: anything but the expected shape is `None` (window) or a
`ValueError` (count), and the caller falls back to its defaults and estimates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from engine.jsondata import read_json
from engine.providers._events import Message
from engine.providers._reading import bounded, said_json

__all__ = ["api_root", "count_chat_tokens", "slot_count", "slot_window", "slots_working",
           "window_value"]

_TIMEOUT = httpx.Timeout(5.0)
_MAX_WINDOW = 10_000_000


def api_root(base_url: str) -> str:
    """`http://host:port/v1` → `http://host:port` (llama.cpp's own endpoints sit at the root)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def window_value(value: Any) -> int | None:
    """`value` when it is a window a server could mean (a positive int up to 10 million)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _MAX_WINDOW:
        return value
    return None


async def slot_window(
    client: httpx.AsyncClient, root: str, headers: Mapping[str, str]
) -> int | None:
    """The context window of one slot of the llama.cpp server at `root`; None when the server
    does not say (not llama.cpp, or the endpoints are off)."""
    props = await said_json(client, "GET", f"{root}/props", headers)
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        if isinstance(settings, dict) and window_value(settings.get("n_ctx")):
            return window_value(settings.get("n_ctx"))
    slots = await said_json(client, "GET", f"{root}/slots", headers)
    if isinstance(slots, list) and slots and isinstance(slots[0], dict):
        return window_value(slots[0].get("n_ctx"))
    return None


async def slot_count(
    client: httpx.AsyncClient, root: str, headers: Mapping[str, str]
) -> int | None:
    """How many requests the llama.cpp server at `root` serves at once (`/props`
    `total_slots`); None when it does not say."""
    props = await said_json(client, "GET", f"{root}/props", headers)
    value = props.get("total_slots") if isinstance(props, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 4096:
        return value
    return None


async def slots_working(
    client: httpx.AsyncClient, root: str, headers: Mapping[str, str]
) -> bool:
    """Whether a slot of the llama.cpp server at `root` is processing a request (`/slots`:
    `is_processing`), ours or another process's; False when it does not say."""
    slots = await said_json(client, "GET", f"{root}/slots", headers)
    return isinstance(slots, list) and any(
        isinstance(slot, dict) and slot.get("is_processing") is True for slot in slots)


async def count_chat_tokens(
    client: httpx.AsyncClient, root: str, headers: Mapping[str, str], messages: Sequence[Message]
) -> int:
    """The exact prompt tokens of `messages` on the llama.cpp server at `root`."""
    body = {"messages": [{"role": m.role, "content": m.content} for m in messages]}
    response = await bounded(client, "POST", f"{root}/apply-template", "server", json=body,
                             headers=dict(headers), timeout=_TIMEOUT)
    response.raise_for_status()
    prompt = read_json(response.content).get("prompt")
    if not isinstance(prompt, str):
        raise ValueError("/apply-template gave no prompt")
    response = await bounded(
        client, "POST", f"{root}/tokenize", "server",
        json={"content": prompt, "add_special": True, "parse_special": True},
        headers=dict(headers), timeout=_TIMEOUT,
    )
    response.raise_for_status()
    tokens = read_json(response.content).get("tokens")
    if not isinstance(tokens, list):
        raise ValueError("/tokenize gave no token list")
    return len(tokens)
