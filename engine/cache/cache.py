"""The response cache: loose on surface, strict on meaning, and every decision explained.

    cache = ResponseCache(SQLiteCacheStore(path))
    entry = cache.put("Is coffee bad for the heart?", "Not in moderation…")
    explanation, served = cache.lookup("is coffee bad for your heart")

Lookup, in order: a time-sensitive question is never answered from the cache → the exact
normalised question → a recorded variation → fuzzy candidates from the store's keyword index
(every keyword, or all but one), scored with rapidfuzz on their keywords, above `threshold`;
each candidate, best first, must then pass the meaning guard (`engine.cache.guard`). An
accepted fuzzy hit records the new wording as a variation, so the same wording is an
exact-speed hit next time. When an embedding model is configured (the semantic tier,
`engine.cache.embeddings`), the nearest neighbours of the question's embedding are the last
candidates, each through the same meaning guard: similar vectors are not the same question ("Is
coffee good for the heart?" is nearer "…bad…" than any paraphrase). Only entries whose
validation is PASSED under the current validator version are served (an older one is
validated again first); an invalidated or time-sensitive entry never is. When the normaliser
changes (`normalise.VERSION`), the store is reindexed on open, so no entry is found by a form
it no longer has.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from rapidfuzz import fuzz

from engine.cache.contract import CacheStore, Candidate
from engine.cache.embeddings import Embedder, EmbeddingError
from engine.cache.guard import check_meaning
from engine.cache.models import CacheEntry, CheckResult, Explanation, Tier
from engine.cache.normalise import VERSION, keywords, normalise
from engine.cache.validate import VALIDATOR_VERSION, requires_realtime, validate
from engine.errors import ConfigError
from engine.models.session import now

__all__ = ["DEFAULT_THRESHOLD", "ResponseCache"]

DEFAULT_THRESHOLD = 80.0
"""Fuzzy score (rapidfuzz token_sort_ratio, 0–100: of the normalised questions or of their
keywords, whichever is higher) a candidate needs before the meaning guard looks at it."""
CANDIDATES = 50
"""Candidates a lookup scores, at most, from each query of the keyword index."""
GUARDED = 5
"""The nearest candidates above the threshold the guard checks; a miss costs no more."""
NEAREST = 3
MAX_KEYWORDS = 64
log = logging.getLogger(__name__)
"""Keywords indexed per entry (a long prompt's first ones)."""


def _validated(entry: CacheEntry) -> CacheEntry:
    """`entry` with its validation done now (under the current validator version)."""
    result = validate(entry)
    return entry.model_copy(update={"validation_metadata": result,
                                    "validated": result.status == "PASSED",
                                    "confidence": result.confidence})


@dataclass(frozen=True, slots=True)
class _Base:
    """What every explanation of one lookup repeats."""

    question: str
    normalised: str
    threshold: float

    def explain(self, hit: bool, reason: str, tier: Tier | None = None,
                score: float | None = None, entry_id: str | None = None,
                checks: list[CheckResult] | None = None,
                rejected: list[tuple[str, float, str]] | None = None) -> Explanation:
        return Explanation(question=self.question, normalised=self.normalised, hit=hit,
                           tier=tier, score=score, threshold=self.threshold,
                           entry_id=entry_id, checks=checks or [], reason=reason,
                           validator_version=VALIDATOR_VERSION,
                           rejected=(rejected or [])[:NEAREST])


def _keywords(question: str) -> list[str]:
    """The keywords an entry is indexed by (each once, a long prompt's first ones)."""
    return list(dict.fromkeys(keywords(question)))[:MAX_KEYWORDS]


def _rekeyed(entry: CacheEntry) -> CacheEntry:
    """`entry` under the current normaliser (`ResponseCache` reindexes a store with it)."""
    return entry.model_copy(update={"normalised": normalise(entry.question),
                                    "keywords": _keywords(entry.question)})


@dataclass
class _Vectors:
    """The embeddings of one scope, as read so far (the store's ids only grow)."""

    last: int = 0
    ids: list[str] = field(default_factory=list)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))


@dataclass(frozen=True, slots=True)
class Semantic:
    """The semantic tier's settings: the embedding model, the cosine a neighbour needs, how
    many neighbours the guard checks."""

    embedder: Embedder
    similarity: float = 0.8
    neighbours: int = 5


class ResponseCache:
    """See the module docstring."""

    def __init__(self, store: CacheStore, threshold: float = DEFAULT_THRESHOLD,
                 max_bytes: int = 10 * 1024 * 1024, semantic: Semantic | None = None) -> None:
        self.store = store
        self.threshold = threshold
        self.max_bytes = max_bytes
        self.semantic = semantic
        self._vectors: dict[str, _Vectors] = {}
        self._vectors_lock = threading.Lock()
        if store.meta("normaliser") != VERSION:
            store.reindex("normaliser", VERSION, _rekeyed)

    def put(self, question: str, answer: str, *, scope: str = "", realtime: bool = False,
            template: bool = False, provider: str | None = None,
            finish_reason: str = "stop", detect_realtime: bool = True) -> CacheEntry:
        """Store an answer (a duplicate question updates its entry); validated now. A
        time-sensitive question is stored, never served. `detect_realtime` False: only
        `realtime` says so (a whole case file is not a question about today)."""
        if not question.strip():
            raise ConfigError("the question is empty")
        entry = CacheEntry(
            question=question.strip(), normalised=normalise(question), scope=scope,
            keywords=_keywords(question), payload=answer, response_template=template,
            requires_realtime=realtime or (detect_realtime and requires_realtime(question)),
            provider_used=provider, finish_reason=finish_reason,
        )
        stored = self.store.put(_validated(entry))
        if self.semantic is not None and detect_realtime and not stored.requires_realtime:
            vector = self._embed(stored.question)
            if vector is not None:
                self.store.put_vector(stored.entry_id, scope, self.semantic.embedder.name,
                                      vector.tobytes())
        if self.store.size() > self.max_bytes:
            self.store.evict_to(int(self.max_bytes * 0.9))
        return stored

    def _servable(self, entry: CacheEntry) -> tuple[CacheEntry, str | None]:
        """(the entry, validated again when its validator is older; why it cannot be served)."""
        meta = entry.validation_metadata
        if meta is None or meta.validator_version != VALIDATOR_VERSION:
            entry = _validated(entry)
            self.store.save(entry)
            meta = entry.validation_metadata
            assert meta is not None
        if entry.invalidated:
            return entry, "the entry was invalidated"
        if entry.requires_realtime:
            return entry, "the question is time-sensitive: never served from the cache"
        if meta.status != "PASSED":
            failed = next((c for c in meta.checks if not c.passed), None)
            return entry, f"validation {meta.status}: {failed.detail if failed else '?'}"
        return entry, None

    def lookup(self, question: str, scope: str = "") -> tuple[Explanation, CacheEntry | None]:
        """The entry to serve for `question` in `scope`, or None; always with why."""
        norm = normalise(question)
        base = _Base(question, norm, self.threshold)
        if requires_realtime(question):
            self.store.count("miss")
            return base.explain(False, "the question is time-sensitive: never answered from "
                                "the cache"), None
        found = self.store.find(scope, norm)
        if found is not None:
            entry, tier = found
            return self._serve(entry, "exact" if tier == "exact" else "variation", 100.0, [],
                               base, None)
        words = keywords(question)
        mine = " ".join(dict.fromkeys(words))
        scored: list[tuple[float, Candidate]] = []
        rejected: list[tuple[str, float, str]] = []
        guarded = 0
        # every keyword first; all but one (a mistyped word) only when none of those passed
        # and they were not too many to look at all (a question of common words)
        for loose in (False, True):
            fetched = self.store.candidates(scope, words, CANDIDATES, loose=loose)
            near = sorted(((max(fuzz.token_sort_ratio(mine, c.keywords),
                                fuzz.token_sort_ratio(norm, c.normalised)), c)
                           for c in fetched), key=lambda pair: -pair[0])
            scored += near
            for score, candidate in near:
                if score < self.threshold or guarded == GUARDED:
                    rejected.append((candidate.question, score, f"score {score:.0f} below "
                                     f"{self.threshold:.0f}" if score < self.threshold else
                                     f"not checked: {GUARDED} nearer ones were"))
                    continue
                guarded += 1
                guard = check_meaning(question, candidate.question, candidate.normalised)
                if not guard.passed:
                    failed = guard.rejected_by
                    rejected.append((candidate.question, score,
                                     f"{failed.name}: {failed.detail}" if failed else "guard"))
                    self.store.count("guard_reject")
                    continue
                chosen = self.store.get(candidate.entry_id)
                if chosen is None:  # deleted meanwhile
                    continue
                checks = [CheckResult(name=c.name, passed=c.passed, detail=c.detail)
                          for c in guard.checks]
                return self._serve(chosen, "fuzzy", score, checks, base, rejected)
            if len(fetched) == CANDIDATES:
                break
        if self.semantic is not None:
            seen = {candidate.entry_id for _, candidate in scored}
            served = self._nearest(question, scope, seen, base, rejected)
            if served is not None:
                return served
        rejected.sort(key=lambda item: -item[1])
        if any(score >= self.threshold for score, _ in scored):
            self.store.count("near_miss")
        self.store.count("miss")
        reason = "no entry" if not rejected else \
            f"no candidate passed ({len(rejected)} looked at; the nearest: {rejected[0][2]})"
        return base.explain(False, reason, rejected=rejected), None

    def _embed(self, text: str) -> np.ndarray | None:
        """`text`'s embedding, or None (logged) when the model fails: the tier is skipped."""
        assert self.semantic is not None
        try:
            vector: np.ndarray = self.semantic.embedder.embed([text])[0]
            return vector
        except EmbeddingError as exc:
            log.warning("semantic tier skipped: %s", exc)
            return None

    def _index(self, scope: str) -> _Vectors:
        """The scope's embeddings, with any stored since the last look added."""
        assert self.semantic is not None
        with self._vectors_lock:
            known = self._vectors.setdefault(scope, _Vectors())
            rows = self.store.vectors(scope, self.semantic.embedder.name, known.last)
            if rows:
                fresh = np.stack([np.frombuffer(vec, dtype=np.float32) for _, _, vec in rows])
                if known.matrix.size and fresh.shape[1] != known.matrix.shape[1]:
                    known.ids, known.matrix = [], np.zeros((0, 0), np.float32)
                known.matrix = fresh if not known.matrix.size else \
                    np.concatenate([known.matrix, fresh])
                known.ids += [entry_id for _, entry_id, _ in rows]
                known.last = rows[-1][0]
            return known

    def _nearest(self, question: str, scope: str, seen: set[str], base: _Base,
                 rejected: list[tuple[str, float, str]],
                 ) -> tuple[Explanation, CacheEntry | None] | None:
        """The semantic tier: the nearest neighbours of `question`'s embedding not looked at
        yet, each through the meaning guard; the served one, or None."""
        assert self.semantic is not None
        index = self._index(scope)
        if not index.ids:
            return None
        vector = self._embed(question)
        if vector is None or vector.shape[0] != index.matrix.shape[1]:
            return None
        similarity = index.matrix @ vector
        order = np.argsort(-similarity)[: self.semantic.neighbours + len(seen)]
        checked = 0
        for position in order:
            cosine = float(similarity[position])
            entry_id = index.ids[position]
            if cosine < self.semantic.similarity or checked == self.semantic.neighbours:
                break
            if entry_id in seen:
                continue
            seen.add(entry_id)
            checked += 1
            entry = self.store.get(entry_id)
            if entry is None:  # deleted since
                continue
            guard = check_meaning(question, entry.question)
            if not guard.passed:
                failed = guard.rejected_by
                rejected.append((entry.question, round(cosine * 100, 1),
                                 f"semantic tier, cosine {cosine:.2f}; "
                                 f"{failed.name}: {failed.detail}" if failed else "guard"))
                self.store.count("guard_reject")
                continue
            checks = [CheckResult(name=c.name, passed=c.passed, detail=c.detail)
                      for c in guard.checks]
            return self._serve(entry, "semantic", round(cosine * 100, 1), checks, base,
                               rejected)
        return None

    def lookup_exact(self, question: str, scope: str = "",
                     ) -> tuple[Explanation, CacheEntry | None]:
        """`lookup` by the exact and variation tiers only (a long prompt: no fuzzy tier)."""
        norm = normalise(question)
        base = _Base(question, norm, self.threshold)
        found = self.store.find(scope, norm)
        if found is None:
            self.store.count("miss")
            return base.explain(False, "no entry (matched exactly only)"), None
        entry, tier = found
        return self._serve(entry, "exact" if tier == "exact" else "variation", 100.0, [], base,
                           None)

    def _serve(self, entry: CacheEntry, tier: Tier, score: float, checks: list[CheckResult],
               base: _Base, rejected: list[tuple[str, float, str]] | None,
               ) -> tuple[Explanation, CacheEntry | None]:
        entry, problem = self._servable(entry)
        if problem is not None:
            self.store.count("near_miss")
            self.store.count("miss")
            return base.explain(False, f"matched ({tier}) but {problem}", tier, score,
                                entry.entry_id, checks, rejected), None
        norm = base.normalised
        if tier in ("fuzzy", "semantic") and norm not in entry.variations:
            # the new wording is recorded: the next time it is an exact-speed hit
            self.store.add_variation(entry.entry_id, entry.scope, norm)
        self.store.used(entry.entry_id)
        entry = entry.model_copy(update={"usage_count": entry.usage_count + 1,
                                         "last_used": now()})
        self.store.count("hit")
        reason = {"exact": "the same question", "variation": "a wording seen before",
                  "fuzzy": f"score {score:.0f} and every meaning check passed",
                  "semantic": f"found by the semantic tier (cosine {score / 100:.2f}) and "
                              "every meaning check passed"}[tier]
        return base.explain(True, reason, tier, score, entry.entry_id, checks, rejected), entry

    def invalidate(self, entry_id: str) -> CacheEntry:
        """Never serve this entry again (it stays listed)."""
        entry = self._get(entry_id)
        entry = entry.model_copy(update={"invalidated": True, "validated": False})
        self.store.save(entry)
        return entry

    def delete(self, entry_id: str) -> None:
        """Remove an entry."""
        self.store.delete(self._get(entry_id).entry_id)

    def _get(self, entry_id: str) -> CacheEntry:
        entry = self.store.get(entry_id)
        if entry is None:
            raise ConfigError(f"no cache entry matches {entry_id!r} (see `detektiv cache list`)")
        return entry

    def entries(self, search: str = "", limit: int = 1000) -> list[CacheEntry]:
        """The entries whose question contains `search` (all when empty), at most `limit`."""
        return self.store.entries(search, limit=limit)

    def get(self, ref: str) -> CacheEntry | None:
        """The entry `ref` (its id or the start of it), else None."""
        return self.store.get(ref)

    def export(self, fmt: Literal["json", "csv"] = "json") -> str:
        """Every entry as the one export format: JSON (each entry whole, what `detektiv cache
        import` reads back) or CSV (id, question, payload, status, uses, last used)."""
        entries = self.store.entries(limit=10_000_000)
        if fmt == "json":
            return json.dumps([e.model_dump(mode="json") for e in entries],
                              ensure_ascii=False, indent=1) + "\n"
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["entry_id", "question", "payload", "status", "usage_count",
                         "last_used"])
        for e in entries:
            status = e.validation_metadata.status if e.validation_metadata else ""
            writer.writerow([e.entry_id, e.question, e.payload, status, e.usage_count,
                             e.last_used.isoformat()])
        return out.getvalue()

    def close(self) -> None:
        """Close its store."""
        self.store.close()

    def stats(self) -> dict[str, int]:
        """Counters, entries and size in bytes."""
        counters = self.store.counters()
        return {"entries": self.store.total(), "bytes": self.store.size(),
                **{k: counters.get(k, 0) for k in ("hit", "miss", "near_miss", "guard_reject")}}
