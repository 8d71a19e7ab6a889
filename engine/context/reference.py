"""`last_reference`: the entity a conversation last talked about, and when a later turn may
lean on it (seed 004: "text first, context second"). Pure functions, no I/O.

    mentions = find_mentions("and what did that session conclude?", known_sessions)
    resolved = resolve_reference(mentions, stored, policy.last_reference, turn_index=7)
    resolved.entity, resolved.source, resolved.reason

- An entity the current text names always wins (`source="text"`).
- The text names several: ambiguous; nothing is resolved, and the stored one is not used.
- The text names none: the stored one fills in only when the policy is on, its kind is
  allowed, and it is at most `max_age_turns` turns old (`source="context"`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from engine.context.policy import ReferencePolicy

__all__ = [
    "LastReference",
    "Mention",
    "Resolution",
    "find_mentions",
    "remember",
    "resolve_reference",
]


@dataclass(frozen=True, slots=True)
class LastReference:
    """The entity last talked about in a conversation."""

    entity: str
    kind: str
    intent: str | None
    updated_at: float
    turn_index: int


@dataclass(frozen=True, slots=True)
class Mention:
    """An entity named in a text."""

    entity: str
    kind: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """Which entity a turn is about, where that came from, and why."""

    entity: str | None
    kind: str | None
    source: Literal["text", "context", "none"]
    reason: str

    @property
    def used_context(self) -> bool:
        return self.source == "context"


_WORD = re.compile(r"[\w.-]+")


def find_mentions(text: str, known: Mapping[str, str], min_prefix: int = 8) -> list[Mention]:
    """The known entities (`entity → kind`) that `text` names: a whole word equal to one
    (case-insensitive), or a prefix of at least `min_prefix` characters of exactly one (a
    session's short id). In order of first mention, each once."""
    lowered = {entity.lower(): (entity, kind) for entity, kind in known.items()}
    found: dict[str, Mention] = {}
    for word in _WORD.findall(text.lower()):
        word = word.strip(".-")
        hit = lowered.get(word)
        if hit is None and len(word) >= min_prefix:
            matches = [value for key, value in lowered.items() if key.startswith(word)]
            hit = matches[0] if len(matches) == 1 else None
        if hit is not None and hit[0] not in found:
            found[hit[0]] = Mention(*hit)
    return list(found.values())


def resolve_reference(
    mentions: Sequence[Mention],
    stored: LastReference | None,
    policy: ReferencePolicy,
    turn_index: int,
) -> Resolution:
    """The entity the turn at `turn_index` is about (see the module docstring)."""
    distinct = list(dict.fromkeys(mentions))
    if len(distinct) == 1:
        named = distinct[0]
        return Resolution(named.entity, named.kind, "text", "named in the text")
    if len(distinct) > 1:
        names = ", ".join(m.entity for m in distinct)
        return Resolution(None, None, "none", f"ambiguous: the text names {names}")
    if not policy.enabled:
        return Resolution(None, None, "none", "last_reference is off in the policy")
    if stored is None:
        return Resolution(None, None, "none", "nothing was talked about before")
    if stored.kind not in policy.allowed_entities:
        return Resolution(None, None, "none", f"a {stored.kind} is not an allowed entity")
    age = turn_index - stored.turn_index
    if age < 0:
        return Resolution(None, None, "none", "the stored reference is from a later turn")
    if age > policy.max_age_turns:
        return Resolution(None, None, "none",
                          f"the last reference is {age} turns old (at most "
                          f"{policy.max_age_turns})")
    return Resolution(stored.entity, stored.kind, "context",
                      f"from turn {stored.turn_index}, {age} turn{'s' if age != 1 else ''} ago")


def remember(
    stored: LastReference | None,
    resolution: Resolution,
    turn_index: int,
    now: float,
    intent: str | None = None,
) -> LastReference | None:
    """The reference to keep after a turn: the entity it was about, else the one kept."""
    if resolution.entity is None or resolution.kind is None:
        return stored
    return LastReference(resolution.entity, resolution.kind, intent, now, turn_index)
