"""`AgentSignalState` (seed 001) and the fallback classifier for turns without a signal.

    state = AgentSignalState()
    state.on_signal(signal)          # need_turn with the same reason again: consecutive + 1
    state.on_turn_without_signal()   # turns_without_signal + 1, the reason count back to 0
    state.stuck                      # the same need_turn reason 3 times in a row
    state.needs_fallback             # 3 turns in a row without a signal

"The same reason" is judged on normalised text (case, punctuation, accents and spacing folded)
by word-bigram Jaccard similarity ≥ 0.85, so "I need the audit." and "i need the audit" are the
same, and a model that rewords one word of a long reason is still going round in circles.

The fallback classifier (`should_continue`) replaces the seed's BERT model with a rule: a reply
that announces work still to do ("let me search…", "next I will…", a trailing colon) goes on;
an empty one, or one that reads as a finished answer, stops. It is deterministic, costs
nothing, and its agreement with a labelled set is measured by the tests.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from engine.agent.signals import Signal

__all__ = [
    "FALLBACK_AFTER",
    "SAME_REASON",
    "STUCK_AFTER",
    "AgentSignalState",
    "FallbackDecision",
    "same_reason",
    "should_continue",
]

STUCK_AFTER = 3
FALLBACK_AFTER = 3
SAME_REASON = 0.85
"""Word-bigram Jaccard similarity from which two reasons count as the same."""


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return re.findall(r"[a-z0-9]+", folded)


def _bigrams(words: list[str]) -> set[tuple[str, ...]]:
    if len(words) < 2:
        return {tuple(words)} if words else set()
    return {(a, b) for a, b in zip(words, words[1:], strict=False)}


def same_reason(a: str, b: str, threshold: float = SAME_REASON) -> bool:
    """Whether two need_turn reasons say the same (see the module docstring)."""
    left, right = _words(a), _words(b)
    if left == right:
        return True
    x, y = _bigrams(left), _bigrams(right)
    if not x or not y:
        return False
    return len(x & y) / len(x | y) >= threshold


@dataclass
class AgentSignalState:
    """Signals across one run's turns, with the seed's transitions."""

    signals_emitted: list[Signal] = field(default_factory=list)
    last_signal: Signal | None = None
    consecutive_same_reason: int = 0
    turns_without_signal: int = 0
    reasons: list[str] = field(default_factory=list)
    """The need_turn reasons of the current run of the same reason (the stuck evidence)."""

    def on_signal(self, signal: Signal) -> None:
        self.signals_emitted.append(signal)
        if signal.type == "need_turn":
            reason = signal.fields.get("reason", "")
            previous = self.last_signal
            if previous is not None and previous.type == "need_turn" and \
                    same_reason(previous.fields.get("reason", ""), reason):
                self.consecutive_same_reason += 1
                self.reasons.append(reason)
            else:
                self.consecutive_same_reason = 1
                self.reasons = [reason]
        self.last_signal = signal
        self.turns_without_signal = 0

    def on_turn_without_signal(self) -> None:
        self.turns_without_signal += 1
        self.consecutive_same_reason = 0
        self.reasons = []

    @property
    def stuck(self) -> bool:
        return self.consecutive_same_reason >= STUCK_AFTER

    @property
    def needs_fallback(self) -> bool:
        return self.turns_without_signal >= FALLBACK_AFTER


@dataclass(frozen=True, slots=True)
class FallbackDecision:
    """The fallback classifier's verdict on a reply, and the words that decided it."""

    go_on: bool
    reason: str


_GO_ON = re.compile(
    r"\b(let me|let's|i will|i'll|i am going to|i'm going to|i need to|i should|next,? i|"
    r"first,? i|i must|we need to|need to (?:check|look|search|read|find|verify)|"
    r"still need|not yet|searching|looking (?:at|into|for)|checking|to be continued|"
    r"then i will|before answering)\b", re.IGNORECASE)
_DONE = re.compile(
    r"\b(in summary|to summari[sz]e|in conclusion|in short|overall|the answer is|"
    r"therefore|so,? the|that'?s all|to conclude|final answer|in total|these are|"
    r"the sessions? (?:that|which)|no sessions?|none of the|i could not find|"
    r"i found|i have found|there (?:is|are) no)\b", re.IGNORECASE)


def should_continue(reply: str) -> FallbackDecision:
    """Whether a run whose last turns had no signal should take another turn; see the module
    docstring. Ties stop: a run that cannot tell must not loop."""
    text = reply.strip()
    if not text:
        return FallbackDecision(False, "the reply is empty")
    go_on = [m.group(0).lower() for m in _GO_ON.finditer(text)]
    done = [m.group(0).lower() for m in _DONE.finditer(text)]
    tail = text.rstrip("`*_ \n")
    if tail.endswith((":", "...", "…")):
        go_on.append(f"ends with {tail[-1]!r}")
    last = re.split(r"(?<=[.!?])\s+", tail)[-1]
    if _GO_ON.search(last):
        go_on.append("announces work in its last sentence")
    if len(go_on) > len(done):
        return FallbackDecision(True, "announces more work: " + ", ".join(dict.fromkeys(go_on)))
    if done:
        return FallbackDecision(False, "reads as an answer: " + ", ".join(dict.fromkeys(done)))
    if go_on:
        return FallbackDecision(False, "as much answer as announced work: "
                                + ", ".join(dict.fromkeys(go_on)))
    return FallbackDecision(False, "announces no further work")
