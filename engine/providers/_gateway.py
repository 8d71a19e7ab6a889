"""What a server in front of a model says about it, where llama.cpp's own endpoints are absent:
gateways (LiteLLM's proxy), OpenRouter, vLLM, Ollama's OpenAI-compatible route.

- the window: `/models` (`context_length`: OpenRouter; `max_model_len`: vLLM), LiteLLM's
  `/model/info` (or `/v1/model/info`: `model_info.max_input_tokens` of the entry whose
  `model_name` is the model; where LiteLLM does not know it, the `/props` of a llama.cpp
  backend it names on its own host or on loopback), Ollama's `POST /api/show`;
- the prompt's exact count: where every backend of the model is such a llama.cpp server, its
  `/apply-template` and `/tokenize` (`backend_count`), as for a llama.cpp server asked
  directly — the gateway passes the messages on as they are;
- whether the model answers: LiteLLM's `GET /health?model=NAME` makes a real call to each of
  the model's backends and says which answered (`/health/readiness` only says that the proxy
  is up).

Whatever a server answers is checked: anything but the expected shape is None, and the caller
falls back to what it knew (a default window, a listing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from engine.config.providers import is_loopback
from engine.errors import ProviderError, RequestError, ServerError
from engine.providers._events import HealthCheck, Message
from engine.providers._llamacpp import api_root, count_chat_tokens, slot_window, window_value
from engine.providers._reading import said_json

if TYPE_CHECKING:
    from engine.providers._base import Provider

__all__ = ["GatewayWindow", "backend_count", "gateway_window", "listed_or_checked",
           "litellm_health", "listed_window"]

_SHOWN = 200
"""Characters of a backend's error shown from LiteLLM's health report (its first line)."""


async def listed_window(
    client: httpx.AsyncClient, base_url: str, model: str, headers: Mapping[str, str]
) -> int | None:
    """The window `model`'s entry in the server's `/models` list names: `context_length`
    (OpenRouter, and its `top_provider`), `max_model_len` (vLLM)."""
    listing = await said_json(client, "GET", f"{base_url.rstrip('/')}/models", headers)
    entries = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") == model:
            top = entry.get("top_provider")
            return (window_value(entry.get("max_model_len"))
                    or window_value(entry.get("context_length"))
                    or (window_value(top.get("context_length")) if isinstance(top, dict)
                        else None))
    return None


@dataclass(frozen=True, slots=True)
class GatewayWindow:
    """What the gateway at a root said: the window (None: it does not know), and whether it
    is LiteLLM's proxy (its `/model/info` answered)."""

    tokens: int | None
    litellm: bool
    by: str = ""
    """Where the window was read: `/models`, `/model/info`, a backend's `/props`,
    `/api/show`."""
    counters: tuple[str, ...] = ()
    """The API roots of the llama.cpp servers behind the model, when every backend of it is
    one (a call may go to any): what counts its prompts exactly (`backend_count`)."""


async def _litellm_info(client: httpx.AsyncClient, root: str, model: str,
                        headers: Mapping[str, str]) -> GatewayWindow | None:
    for path in ("/model/info", "/v1/model/info"):
        info = await said_json(client, "GET", f"{root}{path}", headers)
        entries = info.get("data") if isinstance(info, dict) else None
        if not isinstance(entries, list):
            continue
        ours = [entry for entry in entries if isinstance(entry, dict)
                and entry.get("model_name") == model and isinstance(entry.get("model_info"), dict)]
        known = [w for entry in ours
                 if (w := window_value(entry["model_info"].get("max_input_tokens"))) is not None]
        backends = await _backends(client, root, ours)
        counters = tuple(base for base, _ in backends) if len(backends) == len(ours) else ()
        by = path
        if not known:  # LiteLLM does not know it: a llama.cpp backend beside the proxy may say
            known = [window for _, window in backends]
            by = "its backend's /props"
        # a model group of several backends: a call may go to any of them
        return GatewayWindow(min(known) if known else None, True, by if known else "",
                             counters)
    return None


_BACKENDS = 4
"""The most backends of one model asked about themselves."""


async def _backends(client: httpx.AsyncClient, root: str,
                    entries: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(API root, slot window) of the llama.cpp servers behind `entries` (their `api_base`),
    asked only where the backend is on the gateway's own host or on loopback (a gateway in
    front of `detektiv local-server`), without the gateway's key; one that does not say is
    left out, and so are all past the first `_BACKENDS`."""
    gateway_host = urlsplit(root).hostname
    found = []
    for entry in entries[:_BACKENDS]:
        params = entry.get("litellm_params")
        base = params.get("api_base") if isinstance(params, dict) else None
        host = urlsplit(base).hostname if isinstance(base, str) else None
        if host is None or not (host == gateway_host or is_loopback(host)):
            continue
        try:
            window = await slot_window(client, api_root(str(base)), {})
        except httpx.HTTPError:
            continue
        if window is not None:
            found.append((api_root(str(base)), window))
    return found


async def backend_count(client: httpx.AsyncClient, counters: tuple[str, ...],
                        messages: Sequence[Message]) -> int:
    """The exact prompt tokens of `messages` on the llama.cpp servers behind a gateway
    (`GatewayWindow.counters`): the most any of them counts, as a call may go to any."""
    return max([await count_chat_tokens(client, base, {}, messages) for base in counters])


async def _ollama_window(client: httpx.AsyncClient, root: str, model: str,
                         headers: Mapping[str, str]) -> int | None:
    from engine.providers._ollama import ollama_window  # the Ollama kind's own reading

    shown = await said_json(client, "POST", f"{root}/api/show", headers, {"model": model})
    return ollama_window(shown) if isinstance(shown, dict) and "model_info" in shown else None


async def gateway_window(client: httpx.AsyncClient, base_url: str, root: str, model: str,
                         headers: Mapping[str, str]) -> GatewayWindow:
    """The window of `model` as the server at `base_url` (its API root `root`) says it, asked
    in the order of the module docstring; the first that names one wins."""
    listed = await listed_window(client, base_url, model, headers)
    litellm = await _litellm_info(client, root, model, headers)
    if listed is not None:
        return GatewayWindow(listed, litellm is not None, "/models",
                             litellm.counters if litellm is not None else ())
    if litellm is not None:
        return litellm
    shown = await _ollama_window(client, root, model, headers)
    return GatewayWindow(shown, False, "/api/show" if shown is not None else "")


async def litellm_health(client: httpx.AsyncClient, root: str, model: str,
                         headers: Mapping[str, str], timeout: float = 30.0
                         ) -> tuple[bool, str] | None:
    """LiteLLM's own check of `model` (a real call to each of its backends): (answered, what
    it said in one line); None when the proxy gave no such report."""
    report = await said_json(client, "GET", f"{root}/health", headers, params={"model": model},
                             timeout=timeout, statuses=(200, 503))  # 503: none up
    if not isinstance(report, dict):
        return None
    healthy, unhealthy = report.get("healthy_count"), report.get("unhealthy_count")
    if not isinstance(healthy, int) or not isinstance(unhealthy, int):
        return None
    if healthy:
        return True, (f"LiteLLM's check: {healthy} of {healthy + unhealthy} backend"
                      f"{'s' if healthy + unhealthy != 1 else ''} answered")
    errors: list[str] = [entry["error"] for entry in report.get("unhealthy_endpoints") or []
                         if isinstance(entry, dict) and isinstance(entry.get("error"), str)]
    lines = [line.strip() for line in errors[0].splitlines() if line.strip()] if errors else []
    said = lines[0][:_SHOWN] if lines else "no backend for this model"
    return False, f"LiteLLM's check: no backend answered — {said}"


async def listed_or_checked(provider: Provider, client: httpx.AsyncClient, root: str,
                            headers: Mapping[str, str], listed: str, litellm: bool
                            ) -> tuple[str, HealthCheck]:
    """The health of a provider whose model list answered (`listed` says so), behind a server
    that may be a gateway: LiteLLM's own check where its `health_check` allows and the server
    is LiteLLM's proxy (`litellm`), else the listing alone (`list`: shown as `listed`). A
    backend LiteLLM found dead raises a `ServerError` whose `check` is `gateway`."""
    mode = provider.config.health_check
    if mode == "list" or (mode == "auto" and not litellm):
        return listed, "list"
    said = await litellm_health(client, root, provider.config.model, headers)
    if said is None:
        if mode == "auto":
            return listed, "list"
        error: ProviderError = RequestError(
            provider.name, f"health_check = \"gateway\": {root}/health gave no LiteLLM report "
            "of the model (not LiteLLM's proxy?)")
    else:
        answered, text = said
        if answered:
            return text, "gateway"
        error = ServerError(provider.name, text)
    error.check = "gateway"  # type: ignore[attr-defined]
    raise error
