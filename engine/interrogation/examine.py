"""A claim's examination: a fold over its signals' readings, then one rule for its state —
the same for a session's own hypothesis and for each claim of a testimony (issue 72).

    claim = await examine(caller, case, signals, pool, "open")      # readings, state, P(false)

Each signal (`engine.interrogation.signals`) not yet read is read in turn and stored with the
claim, a checkpoint (`ClaimRead`): a resume reads only what is missing. Then `settle` pools
the readings (`engine.interrogation.pooling`) and gives the claim its state by this rule
(documented in docs/eval.md):

1. **Conflict.** Rounds that bore on the claim decisively both ways: `unsure`.
2. **Nothing read.** No signal read anything: `unsure`, P(false) 0.5.
3. **Never held against the evidence.** Where the rounds read the claim strongly one way
   (P(true) ≥ 0.75 or ≤ 0.25) and the claim's other readings, pooled without them, strongly
   the other, the claim is `unsure` with both shown — unless the pool, with its learned
   weights, is decisive all the same (P(false) ≤ 0.2 or ≥ 0.8): then the reading that pulled
   hardest its way is named as what decided (`Claim.decided_by`). **A denial is not outvoted
   on a user's own claim**: a session's single hypothesis, not a claim of the witness's own
   answer (no question it answers: `Case.topic`), whose rounds deny it strongly (P(true) ≤
   0.25: the witness's answers, drawn in fresh conversations, agree against it) is
   `contradicted`, P(false) the rounds', whatever the detective itself believes (on the
   simple claims' development sample, 2 of 2 such claims were false; on the witness's own
   claims, split from its answers, 7 of the 11 its rounds denied strongly were true — there
   the rule stays as above, whether the claim is a testimony's or, as in an evaluation of
   such claims, a session's own, issue 72).
4. **The band.** `held` below a pooled P(false) of 0.4, not held from 0.6 — `contradicted`,
   or with a document and no round against it `unsupported` (the document does not say it)
   — and `unsure` between (`UNSURE_BAND`). So a verdict and its P(false) always agree:
   `held` only below 0.5, `false` only above it.
5. **The witness's word.** Without a document, a claim is held or contradicted only when
   one of the witness's own readings (its samples, its rounds) leans that way (P(true) ≥ 0.6,
   or ≤ 0.4): the detective's own reading alone never decides a claim the witness was not
   heard on — a witness that declined every question, or said nothing of the claim, leaves
   it `unsure`, its pooled P(false) shown. (With a document, the document's words are the
   evidence of what it says.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from engine.interrogation.calls import Caller
from engine.interrogation.pooling import Mode, Pooled, Pooling
from engine.interrogation.signals import Case, Signal
from engine.interrogation.verdict import compute
from engine.models.events import ClaimRead
from engine.models.session import QuestionAnswerPair
from engine.models.testimony import Claim, ClaimState

__all__ = ["DOUBT", "OUTWEIGHS", "STRONG", "UNSURE_BAND", "WITNESS", "claim_pairs", "examine",
           "in_doubt", "settle", "users_claim", "witness_leans"]

UNSURE_BAND = 0.1
"""Half the band around 0.5 where a claim is `unsure` (rule 4)."""
STRONG = 0.25
"""How far from 0.5 a reading's P(true) is strong (rule 3)."""
OUTWEIGHS = 0.3
"""How far from 0.5 the pooled P(false) must be to decide against a strong reading of the
rounds (rule 3)."""


def claim_pairs(pairs: Sequence[QuestionAnswerPair], claim: Claim, single: bool
                ) -> list[QuestionAnswerPair]:
    """The rounds of `claim`: a testimony claim's own, or every round of a single
    hypothesis's session (the testimony's own pair aside)."""
    if single:
        return [p for p in pairs if p.claim is None and not p.testimony]
    return [p for p in pairs if p.claim == claim.number]


async def examine(caller: Caller, case: Case, signals: Sequence[Signal], pool: Pooling,
                  mode: Mode, *, dear: bool = True) -> Claim:
    """`case.claim` with each of `signals` read that applies and has not read it yet (the
    dear ones only when `dear`), each stored as it comes; settled when `dear` (a testimony
    settles its claims after their cheap readings too, to know which to question)."""
    claim = case.claim
    for signal in signals:
        if signal.name in claim.readings or not signal.applies(case):
            continue
        if not signal.cheap and not dear:
            continue
        reading = await signal.read(caller, replace(case, claim=claim))
        claim = claim.model_copy(update={"readings": {**claim.readings, signal.name: reading}})
        caller.emit(ClaimRead(claim=claim.model_copy(deep=True), single=case.single))
    return settle(claim, claim_pairs(caller.session.qa_pairs, claim, case.single), pool,
                  mode, [s.name for s in signals], users=users_claim(case))


def users_claim(case: Case) -> bool:
    """Whether `case` is a user's own claim (rule 3's denial decides it): a session's own
    hypothesis that is no claim of the witness's answer to a question (`topic`) — a claim
    split from the witness's answer stays the witness's own when it is examined alone, as an
    evaluation of such claims does."""
    return case.single and case.topic is None


def settle(claim: Claim, rounds: Sequence[QuestionAnswerPair], pool: Pooling, mode: Mode,
           chosen: Sequence[str], users: bool = False) -> Claim:
    """`claim` with its state, P(false), deciding round and why, from its readings and its
    `rounds` (the module docstring's rule); `users`: a user's own claim (a session's
    hypothesis that no answer of the witness's stated)."""
    readings = claim.readings
    if claim.state not in ("pending", "held", "contradicted", "unsupported", "unsure"):
        return claim
    read = {name: r for name, r in readings.items() if name in chosen}
    present = [name for name in chosen if name in read]
    round_reading = read.get("rounds")
    computed = compute([(p.sequence, p.judgement) for p in rounds])
    if round_reading is not None and round_reading.conflict:
        pooled = pool.pooled(read, mode, present)
        return _with(claim, "unsure", pooled.p_false, None, computed.reason or
                     round_reading.why, None)
    if not any(r.p_true is not None for r in read.values()):
        said = next((r.why for r in read.values() if r.why), None)
        return _with(claim, "unsure", 0.5, None, said or "no signal read anything", None)
    pooled = pool.pooled(read, mode, present)
    p_false = pooled.p_false
    decided_by: str | None = None
    if round_reading is not None and round_reading.p_true is not None:
        others = {k: v for k, v in read.items() if k != "rounds"}
        rest = pool.pooled(others, mode, [c for c in present if c != "rounds"]) \
            if any(v.p_true is not None for v in others.values()) else None
        rounds_true = round_reading.p_true
        if rest is not None and _strong(rounds_true) and _strong(1 - rest.p_false) and \
                (rounds_true > 0.5) != (rest.p_false < 0.5):
            if users and rounds_true < 0.5:  # a denial is not outvoted (rule 3)
                return _with(claim, "contradicted", round(1 - rounds_true, 4),
                             _deciding(rounds, "contradicted"), (
                                 f"the witness's answers deny it (rounds p(true) "
                                 f"{rounds_true:.2f}) against the detective's own reading "
                                 f"(p(true) {1 - rest.p_false:.2f}): a denial is not "
                                 "outvoted"), "rounds")
            if abs(p_false - 0.5) < OUTWEIGHS:
                return _with(claim, "unsure", p_false, None, (
                    f"its rounds and its other readings disagree (rounds p(true) "
                    f"{rounds_true:.2f}, the others p(true) {1 - rest.p_false:.2f}): "
                    "neither outweighs the other"), None)
            decided_by = pooled.strongest("true" if p_false < 0.5 else "false")
    state: ClaimState
    if mode == "open" and abs(p_false - 0.5) > UNSURE_BAND and not witness_leans(
            {k: v.p_true for k, v in read.items()}, "true" if p_false < 0.5 else "false"):
        silent = round_reading.why if round_reading is not None and \
            round_reading.p_true is None and round_reading.why else None
        return _with(claim, "unsure", p_false, None, (
            f"the witness's own answers did not bear it {'out' if p_false < 0.5 else 'down'}"
            f" (p(false) {p_false:.2f} from the detective's own reading)"
            + (f"; its rounds: {silent}" if silent else "")), None)
    if p_false < 0.5 - UNSURE_BAND:
        state = "held"
    elif p_false > 0.5 + UNSURE_BAND:
        against = computed.verdict == "false" or computed.bore and any(
            p.judgement is not None and p.judgement.bearing == "contradicts" for p in rounds)
        state = "unsupported" if mode == "document" and not against else "contradicted"
    else:
        state = "unsure"
    deciding = _deciding(rounds, state)
    why = _why(state, pooled, decided_by, p_false)
    return _with(claim, state, p_false, deciding, why, decided_by)


WITNESS = ("samples", "rounds")
"""The readings that are the witness's own word (rule 5)."""


def witness_leans(readings: Mapping[str, float | None], side: str) -> bool:
    """Whether one of the witness's own readings (signal → P(true)) leans to `side`
    (`"true"`: P(true) ≥ 0.6, `"false"`: ≤ 0.4)."""
    for name in WITNESS:
        found = readings.get(name)
        if found is None:
            continue
        if (found >= 0.5 + UNSURE_BAND) if side == "true" else (found <= 0.5 - UNSURE_BAND):
            return True
    return False


DOUBT = 0.4
"""A claim whose cheap readings pool within this of 0.5 (P(false) 0.1–0.9) is in doubt: a
testimony questions it (rounds), budget allowing. Only a claim its cheap readings settle
decisively is held or refused without asking the witness."""


def in_doubt(p_false: float | None, readings: Mapping[str, float | None], mode: Mode) -> bool:
    """Whether a claim's cheap readings (signal → P(true), pooled to `p_false`) leave it in
    doubt: pooled within `DOUBT` of 0.5, read strongly both ways, or (without a document)
    not borne out by the witness's own word yet (rule 5: the rounds may)."""
    if p_false is None or abs(p_false - 0.5) < DOUBT:
        return True
    if mode == "open" and not witness_leans(readings, "true" if p_false < 0.5 else "false"):
        return True
    values = [v for v in readings.values() if v is not None]
    return bool(values) and max(values) >= 0.75 and min(values) <= 0.25


def _strong(p_true: float) -> bool:
    return abs(p_true - 0.5) >= STRONG


def _deciding(rounds: Sequence[QuestionAnswerPair], state: ClaimState) -> int | None:
    """The round whose answer bore the claim's way (the first such): a held claim's
    supporting round, a false claim's contradicting one."""
    side = {"held": "supports", "contradicted": "contradicts",
            "unsupported": "contradicts"}.get(state)
    for pair in rounds:
        if side is not None and pair.judgement is not None and pair.judgement.bearing == side:
            return pair.sequence
    return None


def _why(state: ClaimState, pooled: Pooled, decided_by: str | None, p_false: float
         ) -> str | None:
    if decided_by is not None:
        return (f"decided by its {decided_by} reading, against its rounds (the pool's "
                f"learned weights: p(false) {p_false:.2f})")
    if state == "unsure":
        return f"its readings pooled leave it unsure (p(false) {p_false:.2f})"
    return None


def _with(claim: Claim, state: ClaimState, p_false: float, deciding: int | None,
          why: str | None, decided_by: str | None) -> Claim:
    return claim.model_copy(update={"state": state, "probability_false": round(p_false, 4),
                                    "deciding": deciding, "why": why,
                                    "decided_by": decided_by})
