"""Each round's judgement: the detective sees only the hypothesis and one exchange, and says
whether the hypothesis is true *given that answer* — one word, its probability read from the
first true/false token's log-probabilities where the wire gives them (P(true) = p(true) /
(p(true) + p(false)) over the alternatives at that place), else the model's stated
probability. What a small model can do reliably; the verdict is computed from the
judgements (`engine.interrogation.verdict`).

    request = one_word(messages, settings, logprobs=True)   # what to ask
    reading = read_word(reply.choices, reply.text)          # P(true) and the word, or None

The interrogation's calls (`judge`, journaled like every call of a session) and the
detective-alone baseline (`engine.evals.baselines`) read a probability the same way, so an
evaluation compares protocols, not ways of reading a probability. Reasoning models: the
probability is read after the thinking, from the answer's tokens only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.config.models import InterrogationConfig
from engine.context.budget import Prompt
from engine.context.fit import shorten
from engine.interrogation.calls import Caller
from engine.interrogation.checks import (
    DENIES_REASON,
    MIXED_REASON,
    answer_problem,
    budget_spent,
    denial,
    states_claim_detail,
)
from engine.interrogation.shapes import Comparison, comparison, finished, positive, restates
from engine.interrogation.transcript import witness_instructions
from engine.interrogation.verdict import bearing_of, decisive, pooled
from engine.models.judgement import Judgement, ProbabilitySource
from engine.prompts import fill, load_prompt
from engine.providers import Message, StreamRequest, TokenChoices
from engine.routing.router import Router

__all__ = ["TOP_LOGPROBS", "Plan", "Reading", "does_not_know", "exchange", "gives_logprobs",
           "judge", "judge_alone", "judge_sample", "judgement_messages", "one_word", "read",
           "read_stated", "read_word", "sample_problem", "says_nothing", "says_one_word",
           "topic_evidence"]

TOP_LOGPROBS = 10
"""Alternatives asked for at each token of a one-word judgement."""
THINKING_BUDGET = 1024
"""The reply budget a judgement is asked again with when a reasoning model spent its first
budget thinking."""
STATED_DETAIL = 0.8
"""The P(true) at least of an answer that states the claim's own detail
(`checks.states_claim_detail`): it supports the claim, not decisively (the one-word judgement
read partial answers of this kind as contradictions: "Dave Clark", asked the boyfriend's name,
against a claim naming him and a place)."""
STATED_REASON = "the answer states the claim's own detail"
CHOSEN = 0.9
"""The P(true) at least (1 − it: at most) of an answer that names a comparison's winner
(`shapes.Comparison.winner`), or restates a negated claim (its positive form:
`shapes.restates`): the witness's own choice, read by rule — the one-word judgement read
"aluminium 2.70 g/cm³, lead 11.34 g/cm³" as supporting "Aluminium is denser than lead"
(0.87), a claim and its reverse alike as supported, and "Yes, gold does not rust." at 0.48
against "Gold does not rust"."""
CHOSEN_REASON = "the answer names the side the comparison's claim says wins (read by rule)"
OTHER_REASON = "the answer names the other side of the comparison (read by rule)"
DENIED_REASON = "the answer names the side the claim denies wins (read by rule)"
NEGATION_REASON = "the answer restates the negation (read by rule)"
POSITIVE_REASON = "the answer states what the negation denies (read by rule)"
ANSWER_CHARS = 4000
"""Most characters of an answer a judgement reads (its start: where the fact is)."""

_TRUE = frozenset({"true", "tru", "tr"})
_FALSE = frozenset({"false", "fals", "fal", "fa"})
_STRIP = " \t\n\"'*_`.,:;!()[]<>"


def _word(token: str) -> str:
    return token.strip(_STRIP).lower()


@dataclass(frozen=True, slots=True)
class Reading:
    """What a judgement's reply says: P(true), from where, and the word or number."""

    p_true: float
    source: ProbabilitySource
    word: str


def read_word(choices: Sequence[TokenChoices], text: str) -> Reading | None:
    """P(true) from the first answer token that is "true" or "false" (any case, quoted or
    not): the alternatives' probability mass at that place, true against false. A side
    missing from the alternatives is taken at the least likely alternative listed (its
    probability is at most that). None when no token says either."""
    for place in choices:
        if _word(place.token) not in _TRUE | _FALSE:
            continue
        sides: dict[bool, list[float]] = {True: [], False: []}
        for token, logprob in place.top:
            word = _word(token)
            if word in _TRUE or word in _FALSE:
                sides[word in _TRUE].append(logprob)
        floor = min(logprob for _, logprob in place.top)
        yes = _log_mass(sides[True]) if sides[True] else floor
        no = _log_mass(sides[False]) if sides[False] else floor
        return Reading(_probability(yes - no), "logprobs", text.strip()[:40])
    return None


def _log_mass(logprobs: list[float]) -> float:
    """log(Σ exp(lp)), without the underflow of summing the probabilities themselves (a server
    may send -1000 for every alternative: their probabilities are all 0.0 as floats)."""
    top = max(logprobs)
    return top + math.log(sum(math.exp(lp - top) for lp in logprobs))


def _probability(log_odds: float) -> float:
    """P from log(P / (1 - P)), for any finite log-odds."""
    if log_odds < -700:  # math.exp overflows past ~709
        return 0.0
    return 1 / (1 + math.exp(-log_odds))


_MARKDOWN = re.compile(r"[*_`#>]+")
_LABEL = r"(?:(?:final\s+)?(?:answer|probability|judgement|judgment|verdict|score|" \
    r"likelihood|confidence|p\(true\)|p)\s*[:=]\s*)?"
_STATED = re.compile(
    r"^" + _LABEL + r"(\d{1,3}(?:\.\d+)?)\s*(%|/\s*100|out\s+of\s+100|percent)?\s*[.!]?$",
    re.IGNORECASE)
_WORD = re.compile(r"^" + _LABEL + r"(true|false)\b", re.IGNORECASE)


_LABEL_ONLY = re.compile(_LABEL + r"$", re.IGNORECASE)


def _first_line(text: str) -> str:
    """The reply's first line with content, markdown marks taken out; a line that is only a
    label ("Answer:") is read with the line after it."""
    label = ""
    for line in text.splitlines():
        line = _MARKDOWN.sub("", line).strip()
        if not line:
            continue
        if not label and _LABEL_ONLY.match(line) and line.endswith((":", "=")):
            label = line + " "
            continue
        return label + line
    return label.strip()


def read_stated(text: str) -> Reading | None:
    """P(true) from a stated probability: a number standing alone on the reply's first line
    (as a percentage, 0–100; a fraction when it is at most 1, written with a point), with
    `%`, `/100`, "out of 100" or "percent" after it or a label before it ("Probability:
    80"), markdown aside. None for anything else: prose that holds a number ("point 1 holds
    as stated") is no probability."""
    found = _STATED.match(_first_line(text))
    if found is None:
        return None
    value = float(found.group(1))
    if value <= 1 and "." in found.group(1) and not found.group(2):
        value *= 100
    if not 0 <= value <= 100:
        return None
    return Reading(value / 100, "stated", text.strip()[:40])


def says_one_word(text: str) -> bool:
    """Whether a one-word judgement's reply is one: "true" or "false" first on its first
    line, possibly in markdown, after "Answer:" or the like, with punctuation or a reason
    after it ("False. The witness names Rome."). Prose that mentions the word later ("It
    is not true that …") is not."""
    return _WORD.match(_first_line(text)) is not None


_UNKNOWING = re.compile(
    r"\b(?:i (?:do not|don't|don’t) know|i am not sure|i'm not sure|i’m not sure|"
    r"i (?:do not|don't) have (?:any )?(?:information|data|knowledge)|"
    r"i (?:cannot|can't|can’t) (?:say|tell|answer|determine|recall)|"
    r"no (?:information|record) (?:about|on|of)|not (?:aware|certain) of|"
    # a witness holding a document: that the document does not say is no evidence either way
    # (HaluEval rows: "… is not mentioned in the given document" read as a contradiction)
    r"(?:is|are|was|were) not (?:mentioned|stated|given|specified|provided) in the "
    r"(?:given |provided )?(?:document|text|passage)|"
    r"the (?:given |provided )?(?:document|text|passage) (?:does not|doesn't|doesn’t) "
    r"(?:say|mention|state|specify|provide|contain|give))\b", re.IGNORECASE)
_SHORT = 30
"""Words an answer that says it does not know may have and still say nothing else."""


_DECLINING = re.compile(
    r"\bi(?: (?:cannot|can't|can’t|won't|won’t|will not|must not|am unable to|am not able to|"
    r"am not allowed to|am not permitted to)|(?:'m|’m) (?:unable|not able|not allowed|"
    r"not permitted) to) (?:discuss|help|assist|provide|comment|answer|talk|share|engage|"
    r"respond|fulfil|fulfill|comply|support|give|offer|go into)|"
    r"\bi (?:must|have to|need to) (?:decline|refrain)|\bi(?: am|'m|’m) not going to "
    r"(?:discuss|answer|comment|talk)", re.IGNORECASE)
_GOES_ON = re.compile(r"\b(?:but|however|though|although|that said)\b", re.IGNORECASE)
"""After a refusal: the witness answers all the same ("I can't give medical advice, but niacin
helps …")."""
UNKNOWING_REASON = "the witness says it does not know"
DECLINING_REASON = "the witness declines to answer"


def does_not_know(answer: str) -> bool:
    """Whether `answer` only says the witness does not know (a short answer that says so):
    silent, never evidence either way."""
    return len(answer.split()) <= _SHORT and _UNKNOWING.search(answer) is not None


def says_nothing(answer: str) -> str | None:
    """Why `answer`, a short one, is no evidence either way — it only says the witness does
    not know, or declines to answer ("I'm sorry, but I can't discuss that."; a small judge
    read such a refusal as the claim's contradiction) — or None. The one rule for a round's
    answer, a testimony and a sampled answer."""
    if len(answer.split()) > _SHORT:
        return None
    declined = _DECLINING.search(answer)
    if declined is not None and not _GOES_ON.search(answer, declined.end()):
        return DECLINING_REASON
    return UNKNOWING_REASON if does_not_know(answer) else None


def sample_problem(sample: str, question: str) -> str | None:
    """Why a sampled answer to `question` is nothing to read a claim against: no answer, an
    echo (`checks.answer_problem`), or only "I don't know" or a refusal (`says_nothing`) — a
    small judge reads a claim against an empty or refused answer as its contradiction. The
    one rule for a session's samples and an evaluation's."""
    return answer_problem(sample, question, instructions=[witness_instructions(None)]) \
        or says_nothing(sample)


Ask = str
"""Which one-word question a judgement asks: `judgement_word` (given an exchange),
`judgement_direct` (the claim alone), `judgement_reader` (given a document)."""


def judgement_messages(hypothesis: str, evidence: str, stated_probability: bool,
                       ask: Ask = "judgement_word") -> tuple[Message, ...]:
    """The judgement's conversation: the claim and `evidence` (one exchange, a document, or
    nothing), then the one-word question `ask` or (without log-probabilities) the question
    for a stated probability. The texts are data: filled in once."""
    question = load_prompt("judgement_stated" if stated_probability else ask).strip()
    turn = fill(load_prompt("judgement_claim"), EVIDENCE=evidence.strip(), CLAIM=hypothesis,
                ASK=question)
    return Message("system", load_prompt("judgement").strip()), Message("user", turn.strip())


def exchange(question: str, answer: str) -> str:
    """One exchange as a judgement's evidence."""
    return fill(load_prompt("judgement_exchange"), QUESTION=question,
                ANSWER=shorten(answer, ANSWER_CHARS))


def one_word(messages: tuple[Message, ...], settings: InterrogationConfig, logprobs: bool,
             budget: int | None = None) -> StreamRequest:
    """The judgement's request: a short reply at the configured temperature, with the
    log-probabilities of its tokens when `logprobs`."""
    return StreamRequest(messages=messages, max_tokens=budget or settings.judgement_max_tokens,
                         temperature=settings.temperature,
                         top_logprobs=TOP_LOGPROBS if logprobs else None)


class Plan:
    """The calls one judgement takes, the one rule for every caller (a round's judgement, the
    baselines): the one word with log-probabilities where the detective's first provider
    gives them (asked again with `THINKING_BUDGET` when a reasoning model spent its budget
    thinking), else — or when the provider that answered sent none — the stated probability.

        plan = Plan(claim, evidence, ask, settings, logprobs)
        while (request := plan.request) is not None:
            reply = <call request>
            plan.took(reply.text, reply.choices, reply.finish_reason, reply.reasoning)
        plan.reading      # a Reading, or why there is none (str)

    A negated claim is judged in its positive form and the reading turned over
    (`shapes.positive`: a small judge reads "The Earth does not orbit the Moon" against its
    own negation).
    """

    def __init__(self, claim: str, evidence: str, ask: Ask, settings: InterrogationConfig,
                 logprobs: bool) -> None:
        turned = positive(claim)
        self._turned = turned is not None
        self._claim = turned if turned is not None else claim
        self._evidence, self._ask, self._settings = evidence, ask, settings
        self._stage = "word" if logprobs else "stated"
        self.reading: Reading | str = "no judgement was asked for"
        self.request: StreamRequest | None = self._build()

    def _build(self, budget: int | None = None) -> StreamRequest:
        stated = self._stage == "stated"
        return one_word(judgement_messages(self._claim, self._evidence, stated, self._ask),
                        self._settings, not stated, budget)

    def took(self, text: str, choices: Sequence[TokenChoices], finish_reason: str,
             reasoning: str) -> None:
        """Account for the reply to `request`; sets the next `request`, or None when done."""
        if self._stage == "stated":
            found = self._turn(read_stated(text))
            self.reading = found if found is not None else (
                f"the detective's judgement is no probability ({text.strip()[:40]!r})")
            self.request = None
        elif (self._stage == "word" and reasoning.strip()
              and budget_spent("the detective", text, finish_reason, reasoning)):
            self._stage = "word again"  # a reasoning model: its budget went on thinking
            self.request = self._build(THINKING_BUDGET)
        elif choices:
            found = self._turn(read_word(choices, text) if says_one_word(text) else None)
            self.reading = found if found is not None else (
                f"the detective said neither true nor false in one word "
                f"({text.strip()[:40]!r})")
            self.request = None
        else:  # the provider that answered sends no log-probabilities
            self._stage = "stated"
            self.request = self._build()

    def _turn(self, reading: Reading | None) -> Reading | None:
        """The reading of a negated claim's positive form, turned over."""
        if reading is None or not self._turned:
            return reading
        return replace(reading, p_true=1 - reading.p_true,
                       word=f"{reading.word} (of the positive form, turned over)")


def gives_logprobs(router: Router) -> bool:
    """Whether the detective chain's first provider sends log-probabilities."""
    chain = router.chain("detective")
    return bool(chain) and router.providers[chain[0]].gives_logprobs


async def read(caller: Caller, hypothesis: str, evidence: str, ask: Ask = "judgement_word",
               fit_for: int | None = None) -> Reading | str:
    """One judgement of `evidence`, recorded (`Plan`): the `Reading`, or why there is
    none."""
    plan = Plan(hypothesis, evidence, ask, caller.settings, gives_logprobs(caller.router))
    while (request := plan.request) is not None:
        said = await caller.call(Prompt.whole(request), "detective", fit_for=fit_for,
                                 phase="judgement")
        plan.took(said.text, said.choices, said.finish_reason, said.reasoning)
    return plan.reading


def _shape_rule(answer: str, claim: str, compared: Comparison | None
                ) -> tuple[bool, str] | None:
    """Whether `answer` holds `claim` by a shape's rule, and why: the side a comparison's
    answer names (`Comparison.winner`), or a negation restated or denied
    (`shapes.restates`); None when no rule reads it (a cut-off reply is read up to its last
    finished sentence: `answer` may be empty)."""
    if not answer:
        return None
    if compared is not None:
        holds = compared.winner(answer)
        if holds is None:
            return None
        if compared.negated:  # the claim's own side winning is what it denies
            return holds, OTHER_REASON if holds else DENIED_REASON
        return holds, CHOSEN_REASON if holds else OTHER_REASON
    says = restates(answer, claim)
    return None if says is None else (says, NEGATION_REASON if says else POSITIVE_REASON)


async def judge(caller: Caller, sequence: int | None, question: str,
                answers: Sequence[str], named: str | None = None,
                hypothesis: str | None = None, cut_off: bool = False) -> Judgement:
    """The judgement of round `sequence`: each of `answers` (one; more when the witness was
    sampled) given `question`, pooled. An answer that is no testimony (`named`: what the
    round already found wrong with the first), or only says the witness does not know, is
    silent without a call, the problem its reason. `hypothesis`: a testimony's claim,
    instead of the session's hypothesis; an answer that states that claim's own detail
    (`checks.states_claim_detail`) then supports it at least at `STATED_DETAIL`, unless it
    was cut off at the token limit (`cut_off`, the first answer): half a sentence states
    nothing. (A session's own hypothesis is read as measured before: an evaluated claim such
    as HaluEval's names both alternatives of its question, so an answer naming the other one
    would add only the claim's words.) A comparison's answer that names its winner is read
    by rule, before any of that (`CHOSEN`), and so is an answer that restates a negated
    claim or its positive form (`shapes.restates`). An answer that negates the claim's own
    predicate (`checks.denial`) is never support: its P(true) is at most 0.5."""
    claim = hypothesis is not None
    hypothesis = hypothesis if hypothesis is not None else caller.session.hypothesis_text
    compared = comparison(hypothesis)
    readings: list[Reading] = []
    why: str | None = None
    stated, ruled = False, None
    for number, answer in enumerate(answers):
        problem = (named if number == 0 else None) or answer_problem(answer, question)
        problem = problem or says_nothing(answer)
        if problem is not None:
            why = why or problem
            continue
        found = await read(caller, hypothesis, exchange(question, answer), fit_for=sequence)
        if isinstance(found, str):
            why = why or found
            continue
        reading = found
        cut = number == 0 and cut_off
        # a cut-off answer is read by these rules up to its last finished sentence
        said = finished(answer) if cut else answer
        shaped = _shape_rule(said, hypothesis, compared)
        if shaped is not None:  # what the answer says decides, not the word's reading
            holds, because = shaped
            reading = replace(reading, p_true=max(reading.p_true, CHOSEN) if holds
                              else min(reading.p_true, 1 - CHOSEN))
            ruled = ruled or because
        else:
            denied = denial(said, hypothesis) if said else None
            if denied is not None and reading.p_true > 0.5:
                reading = replace(reading, p_true=0.5)  # never support: at most silent
                ruled = ruled or (MIXED_REASON if denied == "mixed" else DENIES_REASON)
            elif claim and reading.p_true < STATED_DETAIL and not cut and denied is None \
                    and states_claim_detail(question, answer, hypothesis):
                reading = replace(reading, p_true=STATED_DETAIL)  # its words are the claim's
                stated = True
        readings.append(reading)
    if not readings:
        return Judgement(bearing="silent", why=why or "no answer")
    values = [r.p_true for r in readings]
    p_true = pooled(values) if len(values) > 1 else values[0]
    bearing = bearing_of(p_true)
    reason = ruled if ruled in (MIXED_REASON, DENIES_REASON) else (
        "unsure: the judgement leans neither way" if bearing == "silent" else
        ruled or (STATED_REASON if stated else None))
    if decisive(max(values), True) and decisive(min(values), False):  # SelfCheckGPT's signal
        bearing, reason = "silent", (f"the sampled answers disagree (spread "
                                     f"{max(values) - min(values):.2f}): the witness is unsure")
    return Judgement(
        bearing=bearing, p_true=round(p_true, 4), source=readings[0].source,
        word=readings[0].word, why=reason,
        samples=[round(v, 4) for v in values] if len(answers) > 1 else [])


async def judge_alone(caller: Caller, claim: str, question: str | None = None
                      ) -> Reading | str:
    """The detective's own reading of `claim`, given nothing — or only the `question` the
    claim's testimony answers (`prompts/judgement_topic.md`) — (the "detective alone"
    baseline's call, recorded in the session): the `Reading`, or why there is none."""
    return await read(caller, claim, topic_evidence(question), "judgement_direct")


async def judge_sample(caller: Caller, claim: str, question: str, sample: str
                       ) -> Reading | str:
    """`claim` read against one of the witness's sampled answers to `question` (the
    testimony's question asked again: `Testimony.samples`), as a round's answer is read
    ("based only on the witness's answer"): the `Reading`, or why there is none."""
    return await read(caller, claim, exchange(question, sample), "judgement_word")


def topic_evidence(question: str | None) -> str:
    """What the detective alone is told beside a claim: the question its testimony answers,
    or nothing."""
    return fill(load_prompt("judgement_topic"), QUESTION=question) if question else ""
