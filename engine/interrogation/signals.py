"""The examination of a claim as a list of signals (issue 72, part 1): each a function of the
claim and the session's caller that returns a reading — P(true), what it read, its tokens —
pooled by one function (`engine.interrogation.pooling`).

    for signal in chosen(settings.signals):
        if signal.applies(case):
            reading = await signal.read(caller, case)      # a SignalReading

- `words` (with a document; no call): the claim's words the document lacks
  (`claims.unfound`), read as the share of such sentences in hallucinated HaluEval summaries
  (`WORDS_P_FALSE`).
- `alone` (without a document; one word): the detective's own reading of the claim, told only
  the question its testimony answers (`judgement.judge_alone`).
- `samples` (a testimony the witness gave, without a document; one word a sample): the claim
  read against each of the witness's answers to the same question drawn again
  (`Testimony.samples`), an answer that leaves the claim out counting 0.5 (SelfCheckGPT's
  signal).
- `rounds` (a question and its answers a round): the detective's questions about the claim,
  each answered `rounds_samples` times by the witness at `rounds_temperature` in fresh
  conversations, each answer judged (`interrogation.rounds`).

The first three are cheap: a testimony reads them for every claim first, and questions
(`rounds`) only the claims they leave in doubt, riskiest first, within its token budget
(`interrogation.testimony`). A new way of examining a claim is one class here and one entry
in `SIGNALS`; `[interrogation] signals` chooses among them, and a pooling fitted with it
(`detektiv eval ITEMS --fit`) weighs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engine.interrogation.calls import Caller, own_tokens, sampling_temperature
from engine.interrogation.checks import denial
from engine.interrogation.claims import adds_nothing, unfound
from engine.interrogation.judgement import (
    DECLINING_REASON,
    judge_alone,
    judge_sample,
    sample_problem,
)
from engine.interrogation.pooling import SIGNAL_NAMES
from engine.interrogation.rounds import Asking, Closed, one_round
from engine.interrogation.shapes import claim_closes, least_rounds
from engine.interrogation.verdict import compute, sampled_p_true
from engine.models.session import QuestionAnswerPair
from engine.models.testimony import Claim, SignalReading, words_p_false

__all__ = ["SIGNALS", "Case", "Signal", "chosen"]


@dataclass(frozen=True, slots=True)
class Case:
    """What a claim's signals read besides the caller: the claim, the question its testimony
    answers (`topic`: the witness gave the testimony, no document), the witness's answers to
    it drawn again, the document the witness holds, whether the claim is the session's own
    hypothesis, and the names its testimony gives things (`subject.aliases`)."""

    claim: Claim
    topic: str | None = None
    samples: tuple[str, ...] = ()
    document: str | None = None
    single: bool = False
    names: tuple[tuple[str, str], ...] = ()
    rounds_left: int | None = None
    """Rounds the claim may still take (None: the session's limit)."""
    spend: int | None = None
    """Tokens its rounds may still spend (None: no budget)."""
    pairs: list[QuestionAnswerPair] = field(default_factory=list)
    """Its rounds so far (a resume's, or an older session's rounds of its hypothesis)."""


class Signal(Protocol):
    """One way of reading a claim."""

    name: str
    cheap: bool
    """Read for every claim of a testimony before any is questioned."""

    def applies(self, case: Case) -> bool:
        """Whether this signal can read `case`'s claim at all."""

    async def read(self, caller: Caller, case: Case) -> SignalReading:
        """The reading (never raises for a model's nonsense: a reading with no P(true) and
        why)."""


class Words:
    """The document's words (rule 9's reading, pooled)."""

    name = "words"
    cheap = True

    def applies(self, case: Case) -> bool:
        return case.document is not None and not case.single

    async def read(self, caller: Caller, case: Case) -> SignalReading:
        assert case.document is not None
        missing = unfound(case.claim.text, case.document)
        return SignalReading(p_true=round(1 - words_p_false(len(missing)), 4), words=missing,
                             why=None if missing else "the document has all its words")


class Alone:
    """The detective's own reading, told only what the testimony answers."""

    name = "alone"
    cheap = True

    def applies(self, case: Case) -> bool:
        return case.document is None

    async def read(self, caller: Caller, case: Case) -> SignalReading:
        with own_tokens() as used:
            found = await judge_alone(caller, case.claim.text, case.topic)
        if isinstance(found, str):
            return SignalReading(why=found, tokens=used.total)
        return SignalReading(p_true=round(found.p_true, 4), tokens=used.total)


class Samples:
    """The claim read against the witness's answers to its testimony's question drawn again
    (SelfCheckGPT's signal): an answer that leaves the claim out counts 0.5, one that denies
    it (`checks.denial`) is never support."""

    name = "samples"
    cheap = True

    def applies(self, case: Case) -> bool:
        return case.document is None and case.topic is not None and bool(case.samples)

    async def read(self, caller: Caller, case: Case) -> SignalReading:
        assert case.topic is not None
        values: list[float] = []
        skipped: str | None = None
        with own_tokens() as used:
            for sample in case.samples:
                problem = sample_problem(sample, case.topic)
                if problem is not None:  # an empty, echoed or refused answer: no sample
                    skipped = skipped or problem
                    continue
                found = await judge_sample(caller, case.claim.text, case.topic, sample)
                if isinstance(found, str):
                    skipped = skipped or found
                    continue
                p_true = found.p_true
                if denial(sample, case.claim.text) is not None:
                    p_true = min(p_true, 0.5)
                values.append(sampled_p_true(p_true))
        if not values:
            return SignalReading(why=f"no sample to read it against ({skipped})"
                                 if skipped else "no sample", tokens=used.total)
        return SignalReading(p_true=round(sum(values) / len(values), 4), tokens=used.total,
                             values=[round(v, 4) for v in values])


class Rounds:
    """The sampled questioning (`interrogation.rounds`): rounds until their reading is
    decided (one round a fact of the claim first), no usable question comes, or the rounds
    or tokens allowed are spent; a testimony's claim also stops when the witness declines
    twice or says again what it said (a session's own hypothesis presses on to its limit,
    SPEC §1)."""

    name = "rounds"
    cheap = False

    def applies(self, case: Case) -> bool:
        return True

    async def read(self, caller: Caller, case: Case) -> SignalReading:
        settings, session = caller.settings, caller.session
        text = case.claim.text
        samples = session.consistency_samples if session.protocol == "consistency" \
            else settings.rounds_samples
        heat = _heat(caller, samples)
        if session.protocol == "consistency":
            heat = settings.consistency_temperature
        asking = Asking(claim=text, single=case.single,
                        number=None if case.single else case.claim.number,
                        samples=max(1, samples), temperature=heat, names=case.names,
                        analysed=case.topic is None)
        rounds = list(case.pairs)
        facts = least_rounds(text)
        most = len(rounds) + (case.rounds_left if case.rounds_left is not None
                              else session.iteration_limit)
        why: str | None = None
        with own_tokens() as used:
            while not claim_closes(text, rounds, settings.min_rounds, facts):
                why = None if case.single and case.topic is None else _stops(rounds, facts)
                if why is not None or len(rounds) >= most:
                    break
                if rounds and case.spend is not None and used.total >= case.spend:
                    why = "its token budget is spent"
                    break
                done = await one_round(caller, asking, rounds, len(rounds) + 1)
                if isinstance(done, Closed):
                    why = done.why
                    break
                rounds.append(done)
        computed = compute([(p.sequence, p.judgement) for p in rounds])
        values = [v for p in rounds if p.judgement is not None
                  for v in (p.judgement.samples or ([p.judgement.p_true]
                                                    if p.judgement.p_true is not None
                                                    else []))]
        if not computed.bore or computed.conflict:  # no evidence either way
            reason = computed.reason if computed.conflict else (
                why or computed.reason or "no round bore on it")
            return SignalReading(why=reason, tokens=used.total, values=values,
                                 conflict=computed.conflict)
        return SignalReading(p_true=round(1 - computed.probability_false, 4),
                             tokens=used.total, values=values, why=why)


def _stops(rounds: Sequence[QuestionAnswerPair], facts: int) -> str | None:
    """Why a testimony claim's questioning closes before its verdict is decided: the witness
    declined twice in a row, or said again what it had said."""
    if len(rounds) >= 2 and all(p.judgement is not None and p.judgement.why ==
                                DECLINING_REASON for p in rounds[-2:]):
        return f"{DECLINING_REASON}, twice: the claim is left open"
    if len(rounds) >= max(2, facts) and adds_nothing(
            rounds[-1].answer, rounds[-1].question, [p.answer for p in rounds[:-1]]):
        return "the witness said again what it had said: asking on adds nothing"
    return None


def _heat(caller: Caller, samples: int) -> float | None:
    """The rounds' sampling temperature: `rounds_temperature`, else `sampling_temperature`;
    None (the configured temperature, no seed) when the witness answers once: one draw has
    no spread to read, and at the configured temperature it is the witness's own answer."""
    settings = caller.settings
    if samples <= 1:
        return None
    return settings.rounds_temperature if settings.rounds_temperature is not None \
        else sampling_temperature(settings)


SIGNALS: dict[str, Signal] = {signal.name: signal for signal in
                              (Words(), Alone(), Samples(), Rounds())}
"""Every signal, in the order a claim's examination reads them (`pooling.SIGNAL_NAMES`)."""
assert tuple(SIGNALS) == SIGNAL_NAMES


def chosen(names: Sequence[str] | None) -> list[Signal]:
    """The signals `[interrogation] signals` names (all when None), in reading order."""
    wanted = set(SIGNAL_NAMES if names is None else names)
    return [signal for name, signal in SIGNALS.items() if name in wanted]

