"""The response cache: loose on surface, strict on meaning, and every decision explained.

    cache = ResponseCache(SQLiteCacheStore(path))
    entry = cache.put("Is coffee bad for the heart?", "Not in moderation…")
    explanation, served = cache.lookup("is coffee bad for your heart")

Lookup, in order: a time-sensitive question is never answered from the cache → the exact
normalised question → a recorded variation → fuzzy candidates from the store's keyword index
(every keyword, or all but one), scored with rapidfuzz on their keywords, above `threshold`;
each candidate, best first, must then pass the meaning guard (`engine.cache.guard`). An
accepted fuzzy hit records the new wording as a variation, so the same wording is an
exact-speed hit next time. Only entries whose validation is PASSED under the current validator
version are served (an older one is validated again first); an invalidated or time-sensitive
entry never is. When the normaliser changes (`normalise.VERSION`), the store is reindexed on
open, so no entry is found by a form it no longer has.
"""

from __future__ import annotations

from dataclasses import dataclass

from rapidfuzz import fuzz

from engine.cache.guard import check_meaning
from engine.cache.models import CacheEntry, CheckResult, Explanation, Tier
from engine.cache.normalise import VERSION, keywords, normalise
from engine.cache.store import CacheStore, Candidate
from engine.cache.validate import VALIDATOR_VERSION, requires_realtime, validate
from engine.errors import ConfigError
from engine.models.session import now

__all__ = ["DEFAULT_THRESHOLD", "ResponseCache"]

DEFAULT_THRESHOLD = 80.0
"""Fuzzy score (rapidfuzz token_sort_ratio, 0–100: of the normalised questions or of their
keywords, whichever is higher) a candidate needs before the meaning guard looks at it."""
CANDIDATES = 50
"""Candidates a lookup scores, at most, from each query of the keyword index."""
GUARDED = 8
"""The nearest candidates above the threshold the guard checks; a miss costs no more."""
NEAREST = 3
MAX_KEYWORDS = 64
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


class ResponseCache:
    """See the module docstring."""

    def __init__(self, store: CacheStore, threshold: float = DEFAULT_THRESHOLD,
                 max_bytes: int = 10 * 1024 * 1024) -> None:
        self.store = store
        self.threshold = threshold
        self.max_bytes = max_bytes
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
                guard = check_meaning(question, candidate.question)
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
        rejected.sort(key=lambda item: -item[1])
        if any(score >= self.threshold for score, _ in scored):
            self.store.count("near_miss")
        self.store.count("miss")
        reason = "no entry" if not scored else \
            f"no candidate passed ({len(scored)} looked at; the nearest: {rejected[0][2]})" \
            if rejected else f"no candidate passed ({len(scored)} looked at)"
        return base.explain(False, reason, rejected=rejected), None

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
        if tier == "fuzzy" and norm not in entry.variations:
            # the new wording is recorded: the next time it is an exact-speed hit
            self.store.add_variation(entry.entry_id, entry.scope, norm)
        self.store.used(entry.entry_id)
        entry = entry.model_copy(update={"usage_count": entry.usage_count + 1,
                                         "last_used": now()})
        self.store.count("hit")
        reason = {"exact": "the same question", "variation": "a wording seen before",
                  "fuzzy": f"score {score:.0f} and every meaning check passed"}[tier]
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

    def stats(self) -> dict[str, int]:
        """Counters, entries and size in bytes."""
        counters = self.store.counters()
        return {"entries": self.store.total(), "bytes": self.store.size(),
                **{k: counters.get(k, 0) for k in ("hit", "miss", "near_miss", "guard_reject")}}
