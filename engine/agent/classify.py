"""`QueryClassification`: what a question to the case agent is about, by rules (seed 001).

    classify_query("Which sessions tested vitamin B3?")
    # QueryClassification(query_type="documentation", needs_vault=True, confidence=0.75,
    #                     keywords_matched=["sessions", "tested"])

Each type has keywords (whole words or phrases, case-folded); the type with the most matches
wins, ties going to the earlier type in `PRECEDENCE` (an action or a web search must not be
mistaken for a vault lookup). No match at all is `documentation` with low confidence: the vault
(the user's sessions, notes and answers) is what the agent knows about. The needs_* flags come
from the seed's table, never from the keywords directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DERIVATION", "PRECEDENCE", "QueryClassification", "QueryType", "classify_query"]

QueryType = Literal["code", "documentation", "research", "conversational", "action"]

#: The seed's derivation table: type → (needs_code, needs_vault, needs_web).
DERIVATION: dict[QueryType, tuple[bool, bool, bool]] = {
    "code": (True, False, False),
    "documentation": (False, True, False),
    "research": (False, False, True),
    "conversational": (False, False, False),
    "action": (False, True, False),
}
PRECEDENCE: tuple[QueryType, ...] = ("action", "research", "code", "conversational",
                                     "documentation")

_KEYWORDS: dict[QueryType, tuple[str, ...]] = {
    "code": ("code", "function", "method", "class", "module", "implementation", "implemented",
             "source", "source code", "repository", "repo", "stack trace", "traceback",
             "exception", "compile", "bug", "refactor", "variable", "import", "def",
             "python", "file", "grep", "codebase", "api", "endpoint", "line"),
    "documentation": ("session", "sessions", "witness", "detective", "hypothesis",
                      "hypotheses", "audit", "audits", "contradiction", "contradictions",
                      "contradict", "contradicted", "gap", "gaps", "note", "notes",
                      "transcript", "oracle", "oracles", "case", "cases", "interrogation",
                      "interrogations", "tested", "said", "answered", "answer", "claimed",
                      "consistency", "summary", "decision", "decisions", "vault", "mention",
                      "mentions", "mentioned", "round", "rounds", "question", "questions"),
    "research": ("web", "internet", "online", "google", "search the web", "look up online",
                 "latest", "news", "current", "today", "wikipedia", "website", "url",
                 "browse", "published", "recent research", "study", "studies"),
    "conversational": ("thanks", "thank you", "ok", "okay", "hi", "hello", "great", "cool",
                       "got it", "what do you mean", "why", "and that one", "that one",
                       "the last one", "that session", "explain that", "go on", "more",
                       "tell me more", "yes", "no"),
    "action": ("create", "delete", "remove", "start", "run", "launch", "rename", "export",
               "write", "save", "add", "import", "resume", "stop", "cancel", "new session",
               "make a", "set"),
}


def _pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    ordered = sorted(words, key=len, reverse=True)  # "source code" before "source"
    return re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in ordered) + r")(?![\w-])",
                      re.IGNORECASE)


_PATTERNS = {kind: _pattern(words) for kind, words in _KEYWORDS.items()}
_IMPERATIVE = re.compile(r"^\s*(please\s+)?(create|delete|remove|start|run|launch|rename|"
                         r"export|write|save|add|import|resume|stop|cancel|make|set)\b",
                         re.IGNORECASE)
_QUESTION = re.compile(r"^\s*(which|what|where|when|who|how|did|does|do|is|are|was|were|"
                       r"list|show|find|summari[sz]e|compare)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class QueryClassification:
    """A question's type, what it needs searched, how sure the rules are, and why."""

    query_type: QueryType
    needs_code: bool
    needs_vault: bool
    needs_web: bool
    confidence: float
    keywords_matched: list[str] = field(default_factory=list)


def classify_query(query: str) -> QueryClassification:
    """The classification of `query`; see the module docstring."""
    scores: dict[QueryType, list[str]] = {}
    for kind, pattern in _PATTERNS.items():
        found = [m.group(1).lower() for m in pattern.finditer(query)]
        scores[kind] = list(dict.fromkeys(found))
    # an imperative opening is an action; a question opening is not (its verbs are not orders)
    if _IMPERATIVE.match(query):
        scores["action"] = ["(imperative)", *scores["action"]]
    elif _QUESTION.match(query):
        scores["action"] = []
    words = len(re.findall(r"\w+", query))
    if words > 6:  # "ok"/"why" inside a real question do not make it small talk
        scores["conversational"] = [w for w in scores["conversational"]
                                    if w in ("that session", "the last one", "that one")]
    best = max(PRECEDENCE, key=lambda kind: (len(scores[kind]), -PRECEDENCE.index(kind)))
    matched = scores[best]
    total = sum(len(v) for v in scores.values())
    if not matched:
        best, confidence = "documentation", 0.3
    else:
        confidence = round(min(0.95, 0.5 + 0.5 * len(matched) / max(total, 1)
                               * min(len(matched), 3) / 3), 2)
    code, vault, web = DERIVATION[best]
    return QueryClassification(best, code, vault, web, confidence, matched)
