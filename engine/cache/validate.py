"""Validation of cached answers, and what is too time-sensitive to cache (SPEC §3).

An entry is served only when its `ValidationResult` is PASSED under the current
`VALIDATOR_VERSION`: bumping the version makes every entry be validated again before use.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from engine.cache.lexicon import detect, lexicon
from engine.cache.models import CacheEntry, CheckResult, ValidationResult
from engine.cache.normalise import normalise
from engine.jsondata import read_json

__all__ = ["VALIDATOR_VERSION", "requires_realtime", "validate"]

VALIDATOR_VERSION = 4
"""Bump when a check changes: entries validated under an older version are checked again."""

_REALTIME_PHRASES = re.compile(
    r"\b(?:(?:this|next|last) (?:week|weekend|month|year|morning|evening|night|season)|"
    r"right now|at the moment|(?:temperature|temperatur|temperatura) (?:outside|draussen|"
    r"la fora)|as of|so far|these days|what time is it|exchange rates?|"
    r"how (?:is|are) (?:\w+ ){1,5}doing|when (?:is|does|do|are) the next|"
    r"how much (?:does|do|is|are) (?:\w+ ){1,6}cost|who (?:is|are) (?:leading|winning|ahead)|"
    r"(?:diese|dieses|diesen|naechste|naechsten|letzte|letzten) "
    r"(?:woche|wochenende|monat|jahr|saison|nacht)|im moment|zur zeit|immer noch|"
    r"wie steht es|was gibt es neues|was kostet|wann (?:ist|kommt|faehrt|beginnt|startet) "
    r"(?:der|die|das) naechste|"
    r"(?:esta|este|nesta|neste|proxima|proximo) (?:semana|fim de semana|mes|ano|momento)|"
    r"no momento|ate agora|hoje em dia|previsao do tempo|quanto custa|heutzutage|"
    r"quando (?:e|sai|chega|comeca) o proximo|como (?:esta|estao) (?:o|a|os|as) "
    r"(?:tempo|transito|jogo|placar|mercado))\b")
_POSSESSIVE = frozenset("the our their its his her your my what which".split())
_PREPOSITIONS = frozenset("""
of for per on at in to from near like about over by with today now tomorrow outside
von fuer im am auf in nach zum zur bei ueber aus heute jetzt morgen der des
de do da dos das por em no na nos nas para sobre hoje agora amanha
""".split())
_CONTEXT: dict[str, str] = {
    **dict.fromkeys("current".split(), "current"),
    **dict.fromkeys("price prices preis preise preco precos".split(), "price"),
    **dict.fromkeys("live".split(), "live"),
    **dict.fromkeys("score scores".split(), "score"),
    **dict.fromkeys("weather wetter forecast vorhersage wettervorhersage previsao tempo".split(),
                    "weather"),
    **dict.fromkeys("""traffic traffic_jam traffic_jams verkehr transito stau staus
                    engarrafamento engarrafamentos congestionamento congestionamentos""".split(),
                    "traffic"),
    **dict.fromkeys("news nachrichten noticias headlines schlagzeilen".split(), "news"),
    **dict.fromkeys("yet noch".split(), "yet"),
    **dict.fromkeys("ainda".split(), "ainda"),
    **dict.fromkeys("morgen".split(), "morgen"),
    **dict.fromkeys("recent recente recentes".split(), "recent"),
}
"""Words about now in some places only, and the rule (`_about_now`) that reads them there."""
_DETERMINERS = frozenset("""
the these those our their its his her your my die der den des dem os as o a seus suas nossos
""".split())
_INDEFINITE = frozenset("a an any ein eine einen einem einer um uma uns umas".split())
_TRAFFIC_JAM = re.compile(r"\btraffic (jams?)\b")
"""A traffic jam is traffic (and "jam" alone is fruit)."""
_ASKS_IF_ANY = re.compile(r"(?:is there|are there|gibt es|ha|existe|existem|tem)\b")
_PLURALS = frozenset("""
prices preise precos traffic_jams staus engarrafamentos congestionamentos
""".split())
"""Read in general when no article stands before them ("Why do prices rise?", "What causes
traffic jams?"), unless the question asks whether there are any."""
_LIVE_THINGS = frozenset("""
score scores stream streams streaming coverage results result updates update feed blog ticker
traffic news data odds tv broadcast match game games
""".split())
_NOT_A_TIME = {
    "current": frozenset("""account accounts assets liabilities ratio density source flow limit
    limits sensor transformer loop draw meter mirror""".split()),
    "recent": frozenset("graduate graduates grad grads hire hires".split()),
    "traffic": frozenset("network web internet website site air data im".split()),
    "ainda": frozenset("mais menos melhor pior assim que".split()),
    "morgen": frozenset("am jeden guten heute".split()),
}


def _about_now(rule: str, word: str, before: str, after: str, asks_if_any: bool) -> bool:
    """Whether `word` of `_CONTEXT` asks about now between `before` and `after` (the words
    either side of it; "" at either end) in a question that does (`asks_if_any`: is there,
    gibt es, há) or does not ask whether there is one."""
    if word in _PLURALS and before not in _DETERMINERS and not asks_if_any:
        return False
    if rule == "current":  # "the current president", "current events"; never a noun
        return (before in _POSSESSIVE and after not in ("", *_PREPOSITIONS)
                and after not in _NOT_A_TIME["current"]) or after in ("events", "affairs")
    if rule == "price":  # "the price of gold", "the bitcoin price"; not "price elasticity"
        return after in _PREPOSITIONS or (after == "" and before not in _PREPOSITIONS)
    if rule == "live":  # "live results"; not "I live in", "a live wire"
        return after in _LIVE_THINGS
    if rule == "score":  # "the score of the game"; not "a credit score"
        return before in ("the", "live", "latest") and (after == "" or after in _PREPOSITIONS)
    if rule in ("weather", "traffic", "news"):  # "the weather in Rome"; not "weather affects",
        # nor any jam at all ("Wie entsteht ein Stau?"), unless asking whether there is one
        return (after == "" or after in _PREPOSITIONS) and before not in _NOT_A_TIME.get(
            rule, ()) and (before not in _INDEFINITE or asks_if_any)
    if rule == "yet":  # "released yet?", "lebt er noch?"; not "simple yet effective"
        return after == ""
    if rule in ("ainda", "recent"):
        return after not in _NOT_A_TIME[rule]
    if rule == "morgen":  # tomorrow; not "am Morgen" (in the morning)
        return before not in _NOT_A_TIME["morgen"]
    return False


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
    """Whether the answer depends on when it is asked: a word about now wherever it stands
    (now, today, latest… in the question's language; `engine.cache.lexicon`), a phrase
    (this week, how much does … cost, when is the next…), who holds an office, or a word
    that is about now where it stands (the current president, the price of gold, the weather
    in Rome) and not elsewhere (a current account, price elasticity, I live in). An office or
    a price in a year gone by ("the mayor of Chicago in 2011") is history; since a year
    ("seit 2021"), or in a year to come, it is not."""
    text = normalise(question)
    words = text.split()
    realtime = lexicon(detect(words)).realtime
    if any(word in realtime for word in words) or _REALTIME_PHRASES.search(text):
        return True
    if _in_the_past(words):  # "the mayor of Chicago in 2011", "the price of gold in 1980"
        return False
    if _OFFICE_HOLDER.search(text):
        return True
    padded = ["", *_TRAFFIC_JAM.sub(r"traffic_\1", " ".join(words)).split(), ""]
    asks_if_any = _ASKS_IF_ANY.match(text) is not None
    return any(_about_now(_CONTEXT[word], word, padded[i - 1], padded[i + 1], asks_if_any)
               for i, word in enumerate(padded) if word in _CONTEXT)


_YEAR = re.compile(r"1[89][0-9]{2}|2[0-9]{3}")
_SINCE = frozenset("since after from seit nach ab desde apos depois".split())
"""Before a year, they reach from it to now ("the mayor since 2011")."""
_IN = frozenset("in during im waehrend em no na durante year jahr ano".split())
"""Before a year, they make it the time asked about ("in 2011"); a year is also the last word
("the mayor of chicago 2011"). Elsewhere it may be an amount ("the price of 1999 shares")."""


def _in_the_past(words: list[str]) -> bool:
    """Whether the question names a year (`_IN`), each one before this one: its answer stays
    what it was then, whoever holds the office now. A number that may be an amount, or a year
    a term started in ("since 2011"), is none."""
    this_year = datetime.now(UTC).year
    numbers = [(i, w) for i, w in enumerate(words) if w.isdigit()]
    years = [int(w) for i, w in numbers if _YEAR.fullmatch(w)
             and (i == 0 or words[i - 1] not in _SINCE)
             and (i == len(words) - 1 or (i > 0 and words[i - 1] in _IN))]
    return bool(years) and len(years) == len(numbers) and all(y < this_year for y in years)


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
        jsonschema.validate(read_json(payload), schema)
    except (ValueError, jsonschema.ValidationError) as exc:
        message = exc.message if isinstance(exc, jsonschema.ValidationError) else str(exc)
        return CheckResult(name="schema", passed=False, detail=f"not valid: {message}")
    return CheckResult(name="schema", passed=True)
