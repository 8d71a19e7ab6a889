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

5. **A claim's state** (`claim_state`): `held` when its verdict is `true`, `contradicted`
   when `false`; otherwise `unsure`. With a document (the witness holds one) the verdict is
   rule 10's, and a claim `false` with no round against it is `unsupported` (the document
   does not say it: what a hallucination in a summary is); where the document's words were
   not read, a claim its rounds leave undecided is `unsupported`, its P(false) raised to at
   least `LEANS`. A conflict stays `unsure` either way.
6. **The testimony's verdict** (`testimony_verdict`): `false` as soon as one claim is
   contradicted (or unsupported); `true` when every checkable claim held; else
   `undetermined`, naming the claims that are unsure or were not examined. Its P(false) is the
   largest of its examined claims' — a testimony is as doubtful as its most doubtful claim,
   which keeps P(false) on the verdict's side of the claims' cut whatever the number of
   claims (`LEANS`; with a document, rule 10's `FAITHLESS_AT`). The
   deciding rounds are those that decided the false claims (for `false`) or every held claim.
7. **The consistency score** of a testimony (`testimony_score`): the share of examined
   claims that held, as 0–100, less `CONTRADICTION_PENALTY` for each claim contradicted or
   unsupported; 0 when none was examined. Reproducible from the stored claims.

8. **The detective alone, and the witness sampled** (`with_alone`, a testimony's claims without
   a document): the claim's P(true) from its rounds is pooled with the detective's own reading
   of the claim with no testimony (`Claim.direct_p_true`) — told only the question the testimony
   answers, when the witness gave it — and, when the witness gave the testimony, with the claim
   read against each of the witness's answers to the same question drawn again at
   `consistency_temperature` (`Claim.sampled_p_true`, the mean of `testimony_samples` readings,
   each made a verdict by rule 1 as a round's is: an answer that leaves the claim out is silent,
   0.5) — as the mean of their log-odds, each weighing the same, before rule 5: so a claim the
   witness repeats but that does not come back when it answers again, or that the detective
   doubts, is not `held` on the witness's word alone. A claim no round bore on stays `unsure`
   (the witness said nothing when asked; the pooled P(false) still ranks it), and a conflict
   stays a conflict. Chosen on the development claims (bench/data/testimony-dev.jsonl, 53, 13
   false, the 1.5B; `bench/claim_readings.py`; docs/benchmarks.md), AUROC of P(false): the
   rounds 0.70; the detective alone 0.77, told the question 0.82; the sampled answers alone 0.86
   with four samples, 0.88 with one or two (SelfCheckGPT's finding: a fact the witness made up
   varies between samples); the rounds with the detective told the question 0.80, all three
   pooled 0.875 with one sample (the default: the cheaper of a tie), 0.877 with two, 0.86 with
   three or four (accuracy 0.75) — then, once, on the test claims: 0.83 against 0.72 without the
   samples. Where the witness answers the claim's own key-fact question again at that
   temperature (the consistency protocol's samples) it scored 0.68 on 23 of the claims: the
   question's samples repeat the invention, the whole answer's do not. The witness's reply to
   "Are you sure?" after its whole testimony was measured too and left out: the 1.5B answers
   "Yes, I am sure" to everything (0.73). A witness asked again at temperature 0 mostly repeats
   what it made up, which the rounds cannot see.
9. **The document's words** (`unfound_p_false`, a testimony's claims with a document): the
   claim's words of five letters or more, and its numbers, that no word of the document
   matches, endings aside (`claims.unfound`, `Claim.unfound`, shown beside the claim). A claim
   with `UNFOUND_AT` (3) or more of them is `unsupported` without rounds — the document does
   not say it, whatever a witness holding it answers — its P(false) the share of such
   sentences that stood in hallucinated summaries (0.78 with three, 0.87 with four or more).
   Fewer are only shown. Chosen on HaluEval summarization's development rows (the 1,500 at
   the development end of `make bench-real`'s shuffle, 3,000 summaries, no model called;
   `bench/summary_grounding.py`): a summary's largest count in one sentence ranks the
   hallucinated summaries at AUROC 0.80, and "three or more" scores 0.74. On the 40
   development summaries examined (`make bench-real --dev`), 16 claims had three or more: 13
   in hallucinated summaries, 7 of them `held` by the 1.5B holding the document
   ("Firefighters were aided by a sudden downpour of rain") and 2 `unsure`, and 3 in right
   summaries, each already contradicted by its rounds. Shorter words are left out: a right
   summary's paraphrase is mostly in them ("says", "hits", "led").
10. **The rounds pooled with the document's words** (`with_words`, a testimony's claims with
   a document's text, fewer than `UNFOUND_AT` such words): the words' count is a reading of
   its own — P(false) 0.24 with none, 0.46 with one, 0.66 with two (`words_p_false`: the
   share of HaluEval's development sentences with that count that stood in hallucinated
   summaries, rule 9's table) — pooled with the rounds' P(false) as the mean of their
   log-odds, each weighing the same (as rule 8 pools); a claim no round bore on takes the
   words' reading alone. The claim is `contradicted` (a round contradicted it) or
   `unsupported` (none did) at a pooled P(false) of `FAITHLESS_AT` (0.7) or more, else
   `held`: with a document the question is whether the document says it, and both readings
   answer that. A conflict stays `unsure`. Why: on the development summaries examined, the
   1.5B's rounds contradicted as many claims of right summaries as of hallucinated ones among
   the claims whose words the document all has (7 and 9), and left more claims of right
   summaries `unsupported` by rule 5 (7 against 4) — noise that, over ~5 claims a summary,
   called 11 of 15 right test summaries false; the words' count is what told them apart (a
   right summary's claims: two in three with no such word; a hallucinated one's: one in
   three). The cut 0.7 lies between two words (0.66) and three (0.78), so the words alone
   keep rule 9's cut, chosen on 3,000 development summaries; a round moves a claim across it
   only decisively — against it at P(false) ≥ 0.945 with no such word, ≥ 0.865 with one,
   ≥ 0.74 with two. Replayed on the 40 development summaries' sessions (no model call: the
   rule reads the stored rounds and words): accuracy 0.575 → 0.675, AUROC 0.56 → 0.74 (cut
   0.75 the same, 0.6 0.650, 0.8 0.625).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.models.judgement import Bearing, Judgement
from engine.models.session import CONTRADICTION_PENALTY, VerdictValue
from engine.models.testimony import Claim, ClaimState

__all__ = [
    "DECISIVE",
    "decisive",
    "LEANS",
    "NO_CLAIM",
    "Computed",
    "bearing_of",
    "claim_facts",
    "ALONE_DECIDED",
    "claim_state",
    "compute",
    "pooled",
    "sampled_p_true",
    "settled",
    "states_no_claim",
    "testimony_score",
    "testimony_verdict",
    "UNFOUND_AT",
    "unfound_p_false",
    "verdict_at",
    "with_alone",
    "FAITHLESS_AT",
    "with_words",
    "WORDS_ALONE",
    "WORDS_DECIDED",
    "words_p_false",
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


ALONE_DECIDED = "decided with the detective's own reading of the claim: no round bore its way"


def sampled_p_true(p_true: float) -> float:
    """One sampled answer's reading of a claim made a P(true) by rule 1, as a round's is:
    an answer that leaves the claim out (silent) counts 0.5 (rule 8)."""
    return round(1 - compute([(1, Judgement(bearing=bearing_of(p_true), p_true=p_true))])
                 .probability_false, 4)


def with_alone(computed: Computed, alone_p_true: float | None,
               sampled_p_true: float | None = None) -> Computed:
    """`computed` (a claim's rounds) pooled with the detective's own reading of the claim
    and with its reading against the witness's sampled answers (rule 8); as it is without
    either, or when its rounds conflict."""
    readings = [p for p in (alone_p_true, sampled_p_true) if p is not None]
    if not readings or computed.conflict:
        return computed
    log_odds = (_logit(1 - computed.probability_false) + sum(map(_logit, readings))) / (
        1 + len(readings))
    p_false = round(1 - _sigmoid(log_odds), 4)
    if not computed.bore:
        return Computed("undetermined", p_false, reason=computed.reason, bore=False)
    verdict = verdict_at(p_false)
    if verdict == computed.verdict:  # the same side: the same deciding rounds
        return Computed(verdict, p_false, list(computed.deciding), computed.reason)
    if verdict == "undetermined":
        return Computed(verdict, p_false, reason="its rounds and the detective's own reading "
                        "of it disagree")
    return Computed(verdict, p_false, reason=ALONE_DECIDED)  # no round is on its side


def claim_state(computed: Computed, document: bool) -> tuple[ClaimState, float]:
    """A claim's state and P(false) from its computed verdict (rules 5 and 10): with a
    document, a claim `false` with no round against it is `unsupported` (the document does
    not say it), and one its rounds leave undecided is too (when the words were not read:
    rule 10 decides the others)."""
    if computed.verdict == "true":
        return "held", computed.probability_false
    if computed.verdict == "false":
        if document and not computed.deciding:
            return "unsupported", computed.probability_false
        return "contradicted", computed.probability_false
    if document and not computed.conflict:
        return "unsupported", round(max(LEANS, computed.probability_false), 4)
    return "unsure", computed.probability_false


UNFOUND_AT = 3
"""Words the document lacks from which a claim is `unsupported` without rounds (rule 9)."""
_WORDS_P_FALSE = (0.24, 0.46, 0.66, 0.78, 0.87)
"""P(false) of a claim with none, one, two, three, four or more words its document lacks:
the share of HaluEval summarization's development sentences with that count that stood in
hallucinated summaries (rules 9 and 10)."""
FAITHLESS_AT = 0.7
"""With a document, the pooled P(false) from which a claim is not held (rule 10)."""
WORDS_DECIDED = "decided by the document's words with its rounds (rule 10): no round is on its side"
WORDS_ALONE = "decided by the document's words alone (rule 10): no round bore on it"


def words_p_false(words: int) -> float:
    """The reading of a claim with `words` words its document lacks, as a P(false)."""
    return _WORDS_P_FALSE[min(max(words, 0), len(_WORDS_P_FALSE) - 1)]


def unfound_p_false(words: int) -> float | None:
    """P(false) of a claim with `words` words its document lacks, when that makes it
    `unsupported` (rule 9); None below `UNFOUND_AT`."""
    return words_p_false(words) if words >= UNFOUND_AT else None


def with_words(computed: Computed, words: int) -> Computed:
    """`computed` (a claim's rounds) pooled with the reading of its `words` words that the
    document lacks (rule 10): `false` at a pooled P(false) ≥ `FAITHLESS_AT`, else `true`; as it
    is when its rounds conflict."""
    if computed.conflict:
        return computed
    p_words = words_p_false(words)
    p_false = round(1 - pooled([1 - computed.probability_false, 1 - p_words])
                    if computed.bore else p_words, 4)
    verdict: VerdictValue = "false" if p_false >= FAITHLESS_AT - _EPSILON else "true"
    if verdict == computed.verdict:  # the same side: the same deciding rounds
        return Computed(verdict, p_false, list(computed.deciding), computed.reason)
    if verdict == "false":
        return Computed(verdict, p_false, reason=WORDS_DECIDED if computed.bore else
                        WORDS_ALONE, bore=computed.bore)
    if computed.verdict == "false":
        reason = (f"its rounds leaned against it (p(false) {computed.probability_false:.2f}), "
                  "not enough with the document's words (rule 10)")
    elif computed.bore:
        reason = "its rounds did not decide it; the document has its words (rule 10)"
    else:
        reason = "no round bore on it; the document has its words (rule 10)"
    return Computed(verdict, p_false, reason=reason, bore=computed.bore)


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
