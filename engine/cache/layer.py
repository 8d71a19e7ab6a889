"""Where the cache sits: before the router calls a provider, per role (SPEC §3).

A cached answer is served only where the same request would have gone: the **scope** is an
exact fingerprint of the role, the provider chain, and every message before the last (the
system prompt and the earlier context); only the last message, the question, is matched
loosely. Structured requests (a schema) are never cached. A question longer than
`FUZZY_CHARS` (an oracle's whole case file) is matched exactly only.

Roles, by `[cache]`: `ask` (the router's `default` role) and `oracle` on, `witness` and
`detective` off, unless configured otherwise.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.cache.cache import ResponseCache
    from engine.cache.models import CacheEntry, Explanation
    from engine.config.models import CacheConfig
    from engine.providers import StreamRequest

__all__ = ["CacheLayer", "cache_role"]

log = logging.getLogger(__name__)

FUZZY_CHARS = 2000


def cache_role(role: str) -> str:
    """The `[cache]` switch that governs a router role."""
    if role == "default":
        return "ask"
    if role.startswith("oracle"):
        return "oracle"
    return role


class CacheLayer:
    """The router's access to the cache; a cache that cannot be opened is left off (logged)."""

    def __init__(self, settings: CacheConfig, open_cache: Callable[[], ResponseCache]) -> None:
        self.settings = settings
        self._open = open_cache
        self._cache: ResponseCache | None = None
        self._broken = False

    def applies(self, role: str, request: StreamRequest) -> bool:
        """Whether requests of `role` like this one go through the cache: never a structured
        reply, nor a sampled draw (a seed asks for a draw of its own, which a served answer
        is not)."""
        if not self.settings.enabled or self._broken or request.schema is not None \
                or request.seed is not None:
            return False
        return bool(getattr(self.settings, cache_role(role), False))

    def _get(self) -> ResponseCache | None:
        if self._cache is None and not self._broken:
            try:
                self._cache = self._open()
            except Exception as exc:  # the cache is an optimisation: never a failure
                log.warning("response cache unavailable, left off: %s", exc)
                self._broken = True
        return self._cache

    @staticmethod
    def scope(role: str, chain: list[str], request: StreamRequest) -> tuple[str, str]:
        """(scope, question) of a request."""
        *earlier, last = request.messages
        material = json.dumps([cache_role(role), chain,
                               [(m.role, m.content) for m in earlier]], ensure_ascii=False)
        digest = hashlib.sha256(material.encode("utf-8")).hexdigest()[:24]
        return f"{cache_role(role)}:{digest}", last.content

    def _lookup(self, role: str, chain: list[str], request: StreamRequest,
                ) -> tuple[Explanation, CacheEntry | None] | None:
        cache = self._get()
        if cache is None:
            return None
        scope, question = self.scope(role, chain, request)
        if len(question) > FUZZY_CHARS:
            return cache.lookup_exact(question, scope)
        return cache.lookup(question, scope)

    async def lookup(self, role: str, chain: list[str], request: StreamRequest,
                     ) -> tuple[Explanation, CacheEntry | None] | None:
        """What the cache holds for this request, off the event loop (one thread hop: a
        lookup takes well under a millisecond, the hop is most of its cost)."""
        return await asyncio.to_thread(self._lookup, role, chain, request)

    async def store(self, role: str, chain: list[str], request: StreamRequest, answer: str,
                    provider: str, finish_reason: str) -> None:
        cache = await asyncio.to_thread(self._get)
        if cache is None or not answer.strip():
            return
        scope, question = self.scope(role, chain, request)
        try:
            await asyncio.to_thread(cache.put, question, answer, scope=scope,
                                    provider=provider, finish_reason=finish_reason,
                                    detect_realtime=len(question) <= FUZZY_CHARS)
        except Exception as exc:  # never lose the answer over the cache
            log.warning("could not cache an answer: %s", exc)
