"""The baselines an evaluation compares interrogation with, on the same items and router:
the detective judging the claim alone, and the witness asked once "Are you sure?" with the
detective judging that exchange, read as a round's judgement is and made a verdict by the
same rule (`engine.interrogation.verdict`); in `--mode open`, for a testimony's claim, the
claim read against the witness's answers to the testimony's question drawn again (`sampled`,
SelfCheckGPT's signal, as a session reads it); and, in `--mode document`, the detective
reading the witness's document itself (`reader`, a reference row)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import TYPE_CHECKING

from engine.config.models import InterrogationConfig
from engine.evals.items import EvalItem, brief_for, document_for
from engine.interrogation.calls import check_budget, count_tokens, sampling_temperature
from engine.interrogation.judgement import (
    Ask,
    Plan,
    Reading,
    exchange,
    gives_logprobs,
    sample_problem,
    topic_evidence,
)
from engine.interrogation.transcript import witness_opening
from engine.interrogation.verdict import bearing_of, compute, sampled_p_true
from engine.models.judgement import Judgement
from engine.models.session import WitnessMode
from engine.models.usage import TokenTally
from engine.prompts import fill, load_prompt
from engine.providers import Message, StreamRequest
from engine.routing.collect import Reply

if TYPE_CHECKING:
    from engine.costs import Budget
    from engine.routing.router import Accept, Router

__all__ = ["Baselines", "are_you_sure", "sure_evidence"]


def are_you_sure() -> str:
    """The follow-up a witness is asked (`prompts/eval_are_you_sure.md`: "Are you sure?")."""
    return load_prompt("eval_are_you_sure").strip()


def sure_evidence(question: str, answer: str, reply: str) -> str:
    """What the detective reads after "Are you sure?": the witness asked `question`, its
    `answer`, then "Are you sure?" and its `reply`."""
    return fill(load_prompt("eval_evidence"), QUESTION=question, ANSWER=answer or "(no answer)",
                SURE=are_you_sure(), REPLY=reply or "(no answer)")


class Baselines:
    """The calls of one baseline unit over `router`, their tokens added to `tally`; with
    `budget` (`--max-cost`), each call is checked against it first (`CostLimitReached`) and
    what it cost is spent from it."""

    def __init__(self, router: Router, settings: InterrogationConfig, mode: WitnessMode,
                 tally: TokenTally, budget: Budget | None = None) -> None:
        self.router = router
        self.settings = settings
        self.mode = mode
        self.repairs = 0
        """Verdicts asked for again because they broke a rule."""
        self.tally = tally
        self.budget = budget

    async def _complete(self, request: StreamRequest, role: str,
                        accept: Accept | None = None) -> Reply:
        if self.budget is not None:
            check_budget(self.budget, self.router, role, request)
        reply = Reply()
        try:
            async for _ in reply.follow(self.router.stream(request, role, accept)):
                pass
        finally:  # what streamed before a failure is counted as well
            count_tokens(self.tally, reply, self.router.config, self.budget)
        return reply

    def _ask(self, messages: tuple[Message, ...]) -> StreamRequest:
        return StreamRequest(messages=messages, max_tokens=self.settings.answer_max_tokens,
                             temperature=self.settings.temperature)

    async def are_you_sure(self, item: EvalItem) -> str:
        """The witness's first answer and its reply to "Are you sure?", as evidence."""
        system, opening = witness_opening(brief_for(item, self.mode))
        document = document_for(item, self.mode)
        if document is not None:  # the witness holds its document here too
            system = f"{system.rstrip()}\n\n" + fill(load_prompt("witness_document"),
                                                      DOCUMENT=document.text)
        messages = [Message("system", system), *opening]
        if opening:
            asked, answered = opening[0].content, opening[1].content
        else:  # defend or open: the witness states its answer first
            asked = item.question or load_prompt("eval_state_claim").strip()
            first = await self._complete(
                self._ask((*messages, Message("user", asked))), "witness")
            answered = first.text.strip()
            if answered:
                messages += [Message("user", asked), Message("assistant", answered)]
        sure = are_you_sure()
        messages.append(Message("user", sure if answered else f"{asked}\n\n{sure}"))
        reply = await self._complete(self._ask(tuple(messages)), "witness")
        return sure_evidence(asked, answered, reply.text.strip())

    async def verdict(self, claim: str, evidence: str = "", ask: Ask = "judgement_direct"
                      ) -> tuple[str, float | None]:
        """The detective's verdict on `claim` given `evidence` (empty: the claim alone), read
        as a round's judgement is (`engine.interrogation.judgement.Plan`: one word, its
        probability from log-probabilities where the wire gives them, else stated) and made a
        verdict by the same rule (`engine.interrogation.verdict`). A reply that says neither
        is `undetermined` with no probability."""
        reading = await self.reading(claim, evidence, ask)
        if reading is None:
            return "undetermined", None
        return _verdict_of(reading.p_true)

    async def reading(self, claim: str, evidence: str = "", ask: Ask = "judgement_direct"
                      ) -> Reading | None:
        """The detective's reading of `claim` given `evidence` (`verdict`), or None when its
        reply said neither true nor false."""
        plan = Plan(claim, evidence, ask, self.settings, gives_logprobs(self.router))
        while (request := plan.request) is not None:
            reply = await self._complete(request, "detective")
            plan.took(reply.text, reply.choices, reply.finish_reason or "", reply.reasoning)
        return None if isinstance(plan.reading, str) else plan.reading

    async def draw(self, question: str, times: int | None = None) -> list[str]:
        """The witness's answers to `question`, drawn `times` times (default
        `testimony_samples`) as a session draws a testimony's samples: told nothing, at the
        sampling temperature, each with a seed of its own, with the testimony's reply cap
        (`engine.interrogation.testimony`)."""
        system, _ = witness_opening(None)
        request = StreamRequest(messages=(Message("system", system), Message("user", question)),
                                max_tokens=self.settings.testimony_max_tokens,
                                temperature=sampling_temperature(self.settings))
        count = self.settings.testimony_samples if times is None else times
        return [(await self._complete(replace(request, seed=_seed(question, n)),
                                      "witness")).text for n in range(1, count + 1)]

    async def sampled(self, item: EvalItem, samples: list[str]) -> tuple[str, float | None]:
        """The claim read against the witness's `samples` (`draw`) of the question its
        testimony answers, as a session reads a testimony's claim (`judgement.judge_sample`,
        `verdict.sampled_p_true`: the mean of the samples' P(true)); no probability when no
        sample gave a reading (an empty, echoed or refused sample is not read:
        `judgement.sample_problem`)."""
        question = item.question or ""
        found = [await self.reading(item.claim, exchange(question, sample), "judgement_word")
                 for sample in samples if sample_problem(sample, question) is None]
        values = [sampled_p_true(r.p_true) for r in found if r is not None]
        if not values:
            return "undetermined", None
        return _verdict_of(sum(values) / len(values))

    async def alone(self, item: EvalItem) -> tuple[str, float | None]:
        """The detective alone: the claim with nothing else — or, for a claim of a testimony
        the witness gave in `open` mode, told the question the testimony answers, as a
        testimony's claim is read in a session (`judgement.judge_alone`)."""
        asked = item.question if item.testimony is not None and self.mode == "open" else None
        return await self.verdict(item.claim, topic_evidence(asked))

    async def reader(self, item: EvalItem) -> tuple[str, float | None]:
        """The reference row of `--mode document`: the detective reading the witness's
        document itself (what a user interrogating a system cannot do)."""
        evidence = fill(load_prompt("judgement_document"), DOCUMENT=item.document or "")
        return await self.verdict(item.claim, evidence, "judgement_reader")


def _seed(question: str, number: int) -> int:
    """A draw's seed: the same question drawn again in a rerun is drawn alike."""
    digest = hashlib.sha256(f"{question}:{number}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _verdict_of(p_true: float) -> tuple[str, float]:
    """One reading's verdict and P(false), by the rule a round's judgement follows
    (`engine.interrogation.verdict`)."""
    computed = compute([(1, Judgement(bearing=bearing_of(p_true), p_true=p_true))])
    return computed.verdict, computed.probability_false
