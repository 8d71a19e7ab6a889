"""The verdict, computed from the rounds' judgements — never written by a model.

Each round ends with a judgement of that exchange alone (`engine.interrogation.judgement`):
P(true), the probability that the hypothesis is true given only that question and answer.
The rule (documented in docs/eval.md, tested on scripted servers):

1. **Bearing.** A round *supports* the hypothesis when its P(true) ≥ `LEANS` (0.6),
   *contradicts* it when P(true) ≤ 1 − `LEANS`, and is *silent* otherwise: no answer, the
   witness does not know, an answer about something else, or a judgement too unsure to lean.
   A silent round never counts, either way.
2. **Conflict.** When one round supports *decisively* (P(true) ≥ `DECISIVE`, 0.9) and another
   contradicts decisively (≤ 0.1), the witness said two incompatible things: `undetermined`.
3. **Weight.** Otherwise the verdict's log-odds are the mean log-odds of the rounds that bear
   (each P clipped to [0.01, 0.99]); P(false) = 1 − σ(mean). A head count of rounds plays no
   part, and a silent round cannot dilute a decisive one.
4. **Verdict.** `true` when P(false) ≤ 1 − `LEANS`, `false` when P(false) ≥ `LEANS`, else
   `undetermined`. No bearing round: `undetermined`, P(false) 0.5. The deciding rounds are the
   bearing rounds on the verdict's side.

Stopping (`settled`): once at least `min_rounds` (and one round a fact of the hypothesis,
`claim_facts`) are done and the verdict is decided (a round bears on it, no conflict), the
questioning closes: a claim the first answer bears on costs one round; silent, unsure or
cancelling rounds are pressed on, up to the limit. Measured on the 1.5B (notes/judgements.md,
bench-real's dev sample): rounds after one that bears drift to neighbouring facts, which the
judgement reads as evidence, and dilute the round that asked the key fact.

A hypothesis that asks ("Summarize the health benefits of Vitamin B3", a question) or
states several things is a **testimony** (`engine.interrogation.claims`): taken apart into
claims, each claim examined by the rule above in rounds of its own, then:

5. **A claim's state** is no longer this module's: a testimony's claim, and a single
   hypothesis alike, is examined by a list of signals (`engine.interrogation.signals`) whose
   readings are pooled by a fitted logistic model (`engine.interrogation.pooling`); its
   state follows from the pooled P(false) (`engine.interrogation.examine`). The rounds'
   own reading is rule 3's P(false) of its rounds, each round's P(true) the spread of the
   sampled answers' judgements (`engine.interrogation.rounds`).
6. **The testimony's verdict** (`testimony_verdict`): `false` as soon as one claim is
   contradicted (or unsupported); `true` when every checkable claim held; else
   `undetermined`, naming the claims that are unsure or were not examined. Its P(false) is the
   largest of its examined claims' — a testimony is as doubtful as its most doubtful claim,
   which keeps P(false) on the verdict's side of the claims' band whatever the number of
   claims. The deciding rounds are those that decided the false claims (for `false`) or every
   held claim.
7. **The consistency score** of a testimony (`testimony_score`): the share of examined
   claims that held, as 0–100, less `CONTRADICTION_PENALTY` for each claim contradicted or
   unsupported; 0 when none was examined. Reproducible from the stored claims.

(Rules 8–10 — the rounds pooled with the detective alone, the samples and the document's
words by equal weights, and the document's words' cut — were measured and replaced by the
fitted pool of issue 72: docs/benchmarks.md has their figures.)
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.models.judgement import Bearing, Judgement
from engine.models.session import CONTRADICTION_PENALTY, VerdictValue
from engine.models.testimony import Claim

__all__ = [
    "DECISIVE",
    "decisive",
    "LEANS",
    "NO_CLAIM",
    "Computed",
    "bearing_of",
    "claim_facts",
    "compute",
    "pooled",
    "sampled_p_true",
    "settled",
    "states_no_claim",
    "testimony_score",
    "testimony_verdict",
    "verdict_at",
]

LEANS = 0.6
"""P(true) from which a round supports the hypothesis (1 − it: contradicts), and P(false) from
which the verdict is `false` (1 − it: `true`)."""
DECISIVE = 0.9
"""P(true) from which a round is decisive (1 − it: decisive against): two decisive rounds on
opposite sides are a conflict."""
_EPSILON = 1e-9
"""Room for a stored P's rounding: a reading made 0.1 by rule is stored 0.1, and 1 − 0.9 is
0.0999…98 in floating point, which 0.1 is not at or below."""


def decisive(p_true: float, supports: bool) -> bool:
    """Whether `p_true` is decisive for (`supports`) or against the hypothesis: at or past
    `DECISIVE` (1 − it against), a stored value's rounding aside."""
    if supports:
        return p_true >= DECISIVE - _EPSILON
    return p_true <= 1 - DECISIVE + _EPSILON


_CLIP = 0.01
NO_CLAIM = "the hypothesis states no claim to judge"


def _logit(p: float) -> float:
    p = min(1 - _CLIP, max(_CLIP, p))
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def pooled(probabilities: Sequence[float]) -> float:
    """Several judgements of one thing as one P(true): their mean log-odds."""
    return _sigmoid(sum(_logit(p) for p in probabilities) / len(probabilities))


def bearing_of(p_true: float) -> Bearing:
    """How a judgement of P(true) = `p_true` bears on the hypothesis (rule 1)."""
    if p_true >= LEANS:
        return "supports"
    if p_true <= 1 - LEANS:
        return "contradicts"
    return "silent"


@dataclass(frozen=True, slots=True)
class Computed:
    """The verdict the rule makes of a session's judgements so far."""

    verdict: VerdictValue
    probability_false: float
    deciding: list[int] = field(default_factory=list)
    """The rounds (from 1) that decided it."""
    reason: str = ""
    """Why it is `undetermined` (none bears, a conflict, the rounds cancel out); else ""."""
    conflict: bool = False
    bore: bool = True
    """Whether any round bore on the hypothesis (False: every round was silent)."""


def compute(judgements: Sequence[tuple[int, Judgement | None]]) -> Computed:
    """The verdict of (round, judgement) pairs (see the module docstring)."""
    bearing = [(n, j) for n, j in judgements
               if j is not None and j.bearing != "silent" and j.p_true is not None]
    if not bearing:
        return Computed("undetermined", 0.5, reason="no round bore on the hypothesis: every "
                        "answer was silent on it", bore=False)
    sure_for = [n for n, j in bearing if j.p_true is not None and decisive(j.p_true, True)]
    sure_against = [n for n, j in bearing
                    if j.p_true is not None and decisive(j.p_true, False)]
    if sure_for and sure_against:
        return Computed("undetermined", 0.5, reason=(
            f"the rounds conflict: round {sure_for[0]} supports the hypothesis and round "
            f"{sure_against[0]} contradicts it, both decisively"), conflict=True)
    p_true = pooled([j.p_true for _, j in bearing if j.p_true is not None])
    p_false = round(1 - p_true, 4)
    verdict = verdict_at(p_false)
    if verdict == "undetermined":
        return Computed(verdict, p_false, reason=(
            "the rounds that bear on the hypothesis cancel each other out"))
    side = "supports" if verdict == "true" else "contradicts"
    return Computed(verdict, p_false, [n for n, j in bearing if j.bearing == side])


def verdict_at(p_false: float) -> VerdictValue:
    """The verdict P(false) makes (rule 4): `true` at ≤ 1 − `LEANS`, `false` at ≥ `LEANS`."""
    if p_false <= 1 - LEANS:
        return "true"
    if p_false >= LEANS:
        return "false"
    return "undetermined"


def settled(judgements: Sequence[tuple[int, Judgement | None]], rounds: int,
            min_rounds: int, facts: int) -> bool:
    """Whether the questioning may close after `rounds` rounds: enough rounds, and a decided
    verdict (the module docstring)."""
    if rounds < max(min_rounds, facts):
        return False
    return compute(judgements).verdict != "undetermined"


_ASKS = frozenset("""summarize summarise explain describe list compare discuss tell write give
analyse analyze evaluate outline name show find please""".split())
"""Words that open a request, not a statement (a question ends in "?")."""


def states_no_claim(hypothesis: str) -> bool:
    """Whether `hypothesis` asks for something ("Summarize …", a question) instead of
    stating a fact that can be true or false."""
    text = hypothesis.strip()
    if text.endswith("?"):
        return True
    words = re.findall(r"[^\W\d_]+", text.lower())
    return bool(words) and words[0] in _ASKS


_VERBS = frozenset("""is are was were has have had lies lie lay flows flow borders border
contains contain orbits orbit won wrote invented discovered founded became lived died sits
runs uses belongs speaks produces began ended made makes holds held covers spans reaches
reached stands stood remains remained measures weighs equals means includes consists
""".split())
_AND = re.compile(r",?\s+(?:and|but|while)\s+([^\W\d_]+)", re.IGNORECASE)


def claim_facts(hypothesis: str) -> int:
    """How many facts `hypothesis` states, as its clauses joined by "and" with a verb of
    their own ("P is the capital of Q and lies on R": 2; "salt and pepper are spices": 1);
    each gets a round of its own before the questioning may close (a comparison is asked
    both ways first: `shapes.least_rounds`)."""
    return 1 + sum(1 for found in _AND.finditer(hypothesis)
                   if found.group(1).lower() in _VERBS)


def sampled_p_true(p_true: float) -> float:
    """One sampled answer's reading of a claim made a P(true) by rule 1, as a round's is:
    an answer that leaves the claim out (silent) counts 0.5."""
    return round(1 - compute([(1, Judgement(bearing=bearing_of(p_true), p_true=p_true))])
                 .probability_false, 4)


def testimony_verdict(claims: Sequence[Claim]) -> Computed:
    """The testimony's verdict from its claims' states (rule 6)."""
    examined = [c for c in claims if c.examined and c.probability_false is not None]
    checkable = [c for c in claims if c.state != "not checkable"]
    if not examined:
        reason = "no claim of the testimony could be checked" if not checkable else \
            "no claim of the testimony was examined"
        return Computed("undetermined", 0.5, reason=reason)
    p_false = round(max(c.probability_false or 0.0 for c in examined), 4)
    false = [c for c in examined if c.state in ("contradicted", "unsupported")]
    if false:
        return Computed("false", p_false, sorted({c.deciding for c in false if c.deciding}))
    open_ = [c for c in checkable if c.state != "held"]
    if not open_:
        return Computed("true", p_false, sorted({c.deciding for c in examined
                                                 if c.deciding}))
    unsure = [c.number for c in open_ if c.state == "unsure"]
    left = [c.number for c in open_ if c.state in ("not examined", "pending")]
    parts = []
    if unsure:
        parts.append(f"{_claims(unsure)} unsure")
    if left:
        parts.append(f"{_claims(left)} not examined")
    return Computed("undetermined", p_false, reason="; ".join(parts))


def _claims(numbers: Sequence[int]) -> str:
    listed = ", ".join(str(n) for n in numbers)
    return f"claim {listed} is" if len(numbers) == 1 else f"claims {listed} are"


def testimony_score(claims: Sequence[Claim]) -> int:
    """The testimony's consistency score (rule 7)."""
    examined = [c for c in claims if c.examined]
    if not examined:
        return 0
    held = sum(1 for c in examined if c.state == "held")
    against = sum(1 for c in examined if c.state in ("contradicted", "unsupported"))
    return max(0, round(100 * held / len(examined)) - CONTRADICTION_PENALTY * against)
