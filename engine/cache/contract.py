"""The `CacheStore` contract every backend of the response cache keeps (SPEC §3), and what
the backends share: the candidate query plan, merging a duplicate, reading an entry back.

The contract, for every backend (the same contract tests run against each):

- one entry per (scope, normalised question): `put` of a duplicate updates it in place;
- `find` by normalised question or by a recorded variation, within one scope;
- `candidates` returns at most `limit` light rows (id, question, normalised form, keywords:
  never the whole entry) holding every keyword of the question, or (`loose`) all but one
  and not all (a mistyped or a missing word), unranked (the caller scores them), from an
  index (never a scan of every entry), so a miss stays under a millisecond at 100k entries;
- what a lookup writes (counters, an entry's use) is buffered in memory and written at most
  once a second, and on `flush`, `close` and before every read that shows it;
- `reindex` rewrites every entry's normalised form and keywords when the normaliser changes
  (`normaliser` in the store's meta), so no entry is matched by a form it no longer has;
- writes are atomic and safe from several processes at once: none is lost, none fails with
  "database is locked";
- `size` is the database's real size in bytes; `evict_to` removes least-recently-used entries.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NamedTuple

from engine.cache.models import CacheEntry

__all__ = ["ENTRIES", "SCHEMA_VERSION", "CacheStore", "Candidate", "entry_from_row", "merge",
           "query_plan"]

SCHEMA_VERSION = 2
FLUSH_SECONDS = 1.0
RAREST = 4
"""Keywords a candidate query asks for at most: the question's rarest ones. A common word
("what") in an AND over 100k entries costs milliseconds, and the meaning guard checks every
word anyway."""
SELECTIVE = 25
"""Rarer keywords are added to a query until it should hold no more entries than this."""
ENTRIES = ""
"""The keyword counts' own row: how many entries there are (no keyword is empty)."""


def _rarest(known: list[str], frequency: dict[str, int], total: int) -> list[str]:
    """The rarest keywords, until the entries holding them all should be few (their shares
    taken as independent)."""
    chosen: list[str] = []
    expected = float(total)
    for word in known[:RAREST]:
        if chosen and expected <= SELECTIVE:
            break
        chosen.append(word)
        expected *= frequency[word] / max(1, total)
    return chosen


def query_plan(words: list[str], frequency: dict[str, int], loose: bool,
               ) -> tuple[list[list[str]], list[str] | None] | None:
    """(groups, excluded): the entries to fetch hold every keyword of one group and not every
    keyword of `excluded`; None when no entry can be a candidate. From the rarest keywords
    (`frequency`: how many entries hold each, `ENTRIES` how many there are): those with every
    keyword hold the rarest ones; those with all but one hold all but one of the rarest and
    the next, or all of the rarest when the missing word is one no entry has (mistyped)."""
    known = sorted((w for w in set(words) if frequency.get(w, 0) > 0),
                   key=lambda w: (frequency[w], w))
    unknown = len(set(words)) - len(known)
    if not known or unknown > 1:
        return None
    rare = _rarest(known, frequency, frequency.get(ENTRIES, 0))
    if not loose:
        return ([rare], None) if unknown == 0 else None
    if unknown == 1:
        return [rare], None
    wider = known[:len(rare) + 1]
    if len(wider) < 2:
        return None
    return [[w for w in wider if w != left] for left in wider], wider


class Candidate(NamedTuple):
    """What a lookup scores and checks before it reads a whole entry."""

    entry_id: str
    question: str
    normalised: str
    keywords: str


class CacheStore(ABC):
    """See the module docstring for the contract. Subclasses call `_init_buffers` first."""

    def _init_buffers(self) -> None:
        self._pending_counts: Counter[str] = Counter()
        self._pending_uses: dict[str, tuple[int, float]] = {}
        self._buffer_lock = threading.Lock()
        self._flushed = time.monotonic()

    @abstractmethod
    def put(self, entry: CacheEntry) -> CacheEntry:
        """Store `entry`, or update the one with its scope and normalised question (keeping
        that one's id, creation time and usage); the stored entry."""

    @abstractmethod
    def save(self, entry: CacheEntry) -> None:
        """Write back an entry read from the store (usage, variations, validation)."""

    @abstractmethod
    def get(self, entry_id: str) -> CacheEntry | None:
        """The entry with this id or unique id prefix."""

    @abstractmethod
    def find(self, scope: str, normalised: str) -> tuple[CacheEntry, str] | None:
        """(entry, "exact" | "variation") for a normalised question in `scope`."""

    @abstractmethod
    def candidates(self, scope: str, keywords: list[str], limit: int = 50,
                   loose: bool = False) -> list[Candidate]:
        """Entries of `scope` holding every keyword, or all but one (see the contract)."""

    @abstractmethod
    def put_vector(self, entry_id: str, scope: str, model: str, vector: bytes) -> None:
        """Store the embedding of an entry's question (by the embedding model `model`)."""

    @abstractmethod
    def vectors(self, scope: str, model: str, after: int = 0,
                ) -> list[tuple[int, str, bytes]]:
        """(id, entry id, vector) of the entries of `scope` embedded by `model`, stored after
        id `after`, in the order stored (ids only grow: a reader keeps what it read)."""

    @abstractmethod
    def add_variation(self, entry_id: str, scope: str, normalised: str) -> None:
        """Record another wording of an entry's question (found by it from now on)."""

    @abstractmethod
    def delete(self, entry_id: str) -> bool:
        """Remove an entry; False when there was none."""

    @abstractmethod
    def entries(self, search: str = "", limit: int = 1000) -> list[CacheEntry]:
        """Entries, most recently used first, whose question contains `search`."""

    @abstractmethod
    def total(self) -> int:
        """How many entries there are."""

    def count(self, name: str, by: int = 1) -> None:
        """Add to a counter (hit, miss, near_miss, guard_reject): buffered."""
        with self._buffer_lock:
            self._pending_counts[name] += by
        self._maybe_flush()

    def used(self, entry_id: str) -> None:
        """An entry was served now: its use counted and its last use moved (buffered)."""
        with self._buffer_lock:
            uses, _ = self._pending_uses.get(entry_id, (0, 0.0))
            self._pending_uses[entry_id] = (uses + 1, time.time())
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if time.monotonic() - self._flushed >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Write what is buffered."""
        with self._buffer_lock:
            counts, self._pending_counts = self._pending_counts, Counter()
            uses, self._pending_uses = self._pending_uses, {}
            self._flushed = time.monotonic()
        if counts or uses:
            self._write_buffered(counts, uses)

    @abstractmethod
    def _write_buffered(self, counts: Counter[str], uses: dict[str, tuple[int, float]],
                        ) -> None:
        """Add `counts` to the counters and `uses` ({entry id: (uses, last used)}) to the
        entries, in one transaction."""

    @abstractmethod
    def counters(self) -> dict[str, int]:
        """Every counter (what is buffered written first)."""

    @abstractmethod
    def meta(self, key: str) -> str | None:
        """A value of the store's meta table."""

    @abstractmethod
    def reindex(self, key: str, value: str, rewrite: Callable[[CacheEntry], CacheEntry],
                ) -> int:
        """Every entry through `rewrite` (its normalised form and keywords redone; recorded
        variations dropped), then meta `key` set to `value`, in one transaction that one
        process at a time runs; an entry whose new form another holds is dropped (the more
        recently used kept). How many entries were rewritten."""

    @abstractmethod
    def size(self) -> int:
        """Bytes the database takes."""

    @abstractmethod
    def evict_to(self, target: int) -> int:
        """Remove least-recently-used entries until `size() <= target`; how many."""

    @abstractmethod
    def close(self) -> None:
        """Write what is buffered and release the connection."""


def merge(old: CacheEntry | None, new: CacheEntry) -> CacheEntry:
    """`new` stored over `old` (the same scope and question): `old`'s id, creation time and
    usage kept, variations joined."""
    if old is None:
        return new
    return new.model_copy(update={
        "entry_id": old.entry_id, "created_at": old.created_at,
        "usage_count": old.usage_count,
        "variations": sorted({*old.variations, *new.variations}),
    })


def entry_from_row(data: str, uses: int, last_used: float) -> CacheEntry:
    """An entry as stored, with the uses and last use written since it was (`used`)."""
    entry = CacheEntry.model_validate_json(data)
    if not uses and last_used <= entry.last_used.timestamp():
        return entry
    return entry.model_copy(update={
        "usage_count": entry.usage_count + uses,
        "last_used": max(entry.last_used, datetime.fromtimestamp(last_used, UTC))})
