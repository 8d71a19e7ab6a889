"""Validation of cached answers, and what is too time-sensitive to cache (SPEC §3).

An entry is served only when its `ValidationResult` is PASSED under the current
`VALIDATOR_VERSION`: bumping the version makes every entry be validated again before use.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.cache.lexicon import detect, lexicon
from engine.cache.models import CacheEntry, CheckResult, ValidationResult
from engine.cache.normalise import normalise

__all__ = ["VALIDATOR_VERSION", "requires_realtime", "validate"]

VALIDATOR_VERSION = 1
"""Bump when a check changes: entries validated under an older version are checked again."""

_REALTIME_PHRASES = re.compile(
    r"\b(?:(?:this|next|last) (?:week|weekend|month|year|morning|evening|season)|right now|"
    r"at the moment|as of|so far|(?:diese|dieses|diesen|naechste|naechsten|letzte|letzten) "
    r"(?:woche|wochenende|monat|jahr|saison)|im moment|zur zeit|(?:esta|este|nesta|neste|"
    r"proxima|proximo) (?:semana|fim de semana|mes|ano|momento)|ate agora|these days|"
    r"hoje em dia|heutzutage)\b")
_REFUSAL = re.compile(
    r"^\s*(?:i(?:'m| am) sorry|sorry,|i can(?:no|')t (?:help|answer|provide|assist)|"
    r"i(?:'m| am) (?:not able|unable) to|as an ai(?: language model)?|"
    r"(?:error|exception|traceback)\b|rate limit|quota exceeded|internal server error)",
    re.IGNORECASE,
)


_OFFICE_HOLDER = re.compile(
    r"\b(?:who (?:is|are) (?:the |our |their )?(?:current |new )?(?:president|prime minister|"
    r"ceo|chancellor|king|queen|pope|mayor|governor|leader|head|coach|manager|champion|"
    r"champions|chairman|chair|owner|secretary general|minister)|who (?:runs|leads|owns|"
    r"coaches|governs|rules)|wer (?:ist|sind) (?:der |die |das )?(?:aktuelle |neue )?"
    r"(?:praesident|praesidentin|kanzler|kanzlerin|bundeskanzler|bundeskanzlerin|"
    r"ministerpraesident|ministerpraesidentin|chef|chefin|trainer|trainerin|papst|koenig|"
    r"koenigin|buergermeister|buergermeisterin|meister|minister|ministerin)|quem e (?:o |a |os |"
    r"as )?(?:atual )?(?:presidente|primeiro ministro|primeira ministra|ceo|papa|rei|rainha|"
    r"prefeito|prefeita|governador|governadora|treinador|tecnico|campeao|campea|dono|dona|"
    r"ministro|ministra))\b")
"""Who holds an office now: the answer changes with the next election or season."""


def requires_realtime(question: str) -> bool:
    """Whether the answer depends on when it is asked (now, today, prices, weather, news… in
    the question's language; `engine.cache.lexicon`)."""
    text = normalise(question)
    words = text.split()
    realtime = lexicon(detect(words)).realtime
    return any(word in realtime for word in words) or bool(_REALTIME_PHRASES.search(text)) \
        or bool(_OFFICE_HOLDER.search(text))


def validate(entry: CacheEntry, schema: dict[str, Any] | None = None) -> ValidationResult:
    """The checks of an entry's answer; PASSED only when every one passes."""
    payload = entry.payload
    checks = [
        CheckResult(name="non_empty", passed=bool(payload.strip()),
                    detail="" if payload.strip() else "the answer is empty"),
        CheckResult(name="finished", passed=entry.finish_reason == "stop",
                    detail="" if entry.finish_reason == "stop" else
                    f"the answer ended with {entry.finish_reason!r} (cut off)"),
        CheckResult(name="not_refusal", passed=not _REFUSAL.search(payload),
                    detail="" if not _REFUSAL.search(payload) else
                    "the answer reads as a refusal or an error message"),
        CheckResult(name="not_realtime", passed=not entry.requires_realtime,
                    detail="" if not entry.requires_realtime else
                    "the question is time-sensitive"),
    ]
    if schema is not None:
        checks.append(_schema_check(payload, schema))
    failed = [c for c in checks if not c.passed]
    confidence = 1.0 - 0.25 * len(failed)
    return ValidationResult(status="FAILED" if failed else "PASSED", checks=checks,
                            confidence=max(0.0, confidence),
                            validator_version=VALIDATOR_VERSION)


def _schema_check(payload: str, schema: dict[str, Any]) -> CheckResult:
    import jsonschema

    try:
        jsonschema.validate(json.loads(payload), schema)
    except (ValueError, jsonschema.ValidationError) as exc:
        message = exc.message if isinstance(exc, jsonschema.ValidationError) else str(exc)
        return CheckResult(name="schema", passed=False, detail=f"not valid: {message}")
    return CheckResult(name="schema", passed=True)
