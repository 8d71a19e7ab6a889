"""Provider rows: what `detektiv providers` and the Providers tab show of each provider, built
once from the configuration and what the router remembers (its health checks included).

A row's words (`health`, `circuit`, `latency`, `checked`) are the front ends' cells; `to_json`
is `providers --json`. Model and server text is cleaned (`strip_control`); a URL never shows a
user:password part.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from engine.config.models import Config
from engine.context.windows import Window
from engine.providers._events import health_word
from engine.routing.breaker import ProviderState
from engine.text import strip_control

__all__ = ["ProviderRow", "provider_rows", "public_url"]


def public_url(url: str | None) -> str | None:
    """A base URL without any user:password part."""
    if url is None or "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('@', 1)[1]}"


def _ago(when: float | None, now: float) -> str:
    if when is None:
        return "never"
    seconds = max(0, int(now - when))
    return f"{seconds} s ago" if seconds < 120 else f"{seconds // 60} min ago"


@dataclass(frozen=True, slots=True)
class ProviderRow:
    """One provider as a user sees it."""

    name: str
    kind: str
    model: str
    priority: int
    enabled: bool
    origin: str
    demonstration: bool
    base_url: str | None
    state: ProviderState | None
    window: Window | None = None
    """Its context window and where that came from, when it was asked (`providers`)."""

    @property
    def window_text(self) -> str:
        """`"1,024 (llama.cpp's /props)"`, or "" when not asked."""
        if self.window is None:
            return ""
        return f"{self.window.tokens:,} ({self.window.describe()})"

    @property
    def health(self) -> str:
        """`ok`, `listed` (only a model list answered), `down`, `disabled`, or `–` before any
        check."""
        if not self.enabled:
            return "disabled"
        if self.state is None or self.state.last_health_ok is None:
            return "–"
        return health_word(self.state.last_health_ok, self.state.last_health_by)

    @property
    def check(self) -> str:
        """What the last health check asked (`engine.providers.HealthCheck`: the model's own
        server, a model list, a gateway's check of its backends, a 1-token request), or ""
        before any."""
        state = self.state
        if not self.enabled or state is None or state.last_health_ok is None:
            return ""
        return state.last_health_by or ""

    @property
    def status(self) -> str:
        """The router's word for it (`healthy`, `degraded`, …), `disabled` or `–`."""
        if self.state is not None:
            return self.state.status.value
        return "disabled" if not self.enabled else "–"

    @property
    def circuit(self) -> str:
        return self.state.circuit.value.replace("_", "-") if self.state else "–"

    @property
    def latency(self) -> str:
        ms = self.state.last_health_latency_ms if self.state else None
        return "" if ms is None else f"{ms:.0f} ms"

    @property
    def detail(self) -> str:
        """The last health check's detail, else the last error."""
        state = self.state
        if state is None:
            return ""
        return strip_control(state.last_health_detail or state.last_error or "")

    def checked(self, now: float | None = None) -> str:
        """`"12 s ago"`, `"3 min ago"` or `"never"`."""
        return _ago(self.state.last_health_check if self.state else None,
                    time.time() if now is None else now)

    def to_json(self) -> dict[str, Any]:
        state = self.state
        checked = state is not None and state.last_health_check is not None
        return {
            "name": self.name, "kind": self.kind, "model": self.model,
            "priority": self.priority, "enabled": self.enabled, "origin": self.origin,
            "demonstration": self.demonstration, "base_url": self.base_url,
            "window": None if self.window is None else {
                "tokens": self.window.tokens, "source": self.window.source,
                "said_by": self.window.describe(), "counted_exactly": self.window.exact},
            "status": state.status.value if state else None,
            "circuit": state.circuit.value if state else None,
            "consecutive_failures": state.consecutive_failures if state else None,
            "rate_limited_until": state.rate_limited_until if state else None,
            "last_error": strip_control(state.last_error)
            if state and state.last_error else None,
            "health": None if not checked or state is None or not self.enabled else {
                "ok": bool(state.last_health_ok),
                "word": self.health,
                "check": state.last_health_by,
                "latency_ms": state.last_health_latency_ms,
                "detail": strip_control(state.last_health_detail or ""),
                "checked_at": state.last_health_check,
            },
        }


def provider_rows(config: Config, states: dict[str, ProviderState] | None,
                  windows: dict[str, Window] | None = None) -> list[ProviderRow]:
    """Every configured provider by priority, with the router's state of it (None: no
    router yet) and its window when asked (`windows`)."""
    return [
        ProviderRow(name, pc.kind, pc.model, pc.priority, pc.enabled, pc.origin,
                    pc.is_demonstration, public_url(pc.base_url),
                    states.get(name) if states is not None else None,
                    (windows or {}).get(name))
        for name, pc in sorted(config.providers.items(), key=lambda item: item[1].priority)
    ]
