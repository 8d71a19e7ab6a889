"""The baselines an evaluation compares interrogation with, on the same items and router:
the detective judging the claim alone, and the witness asked once "Are you sure?" with the
detective judging that exchange. The judge's verdict is held to the same rule as the audit's
(`interrogation.checks.probability_problem`): a contradicting reply is unusable, never a
result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.config.models import InterrogationConfig
from engine.evals.items import EvalItem, brief_for
from engine.interrogation.calls import check_budget, count_tokens
from engine.interrogation.checks import probability_problem
from engine.interrogation.transcript import witness_opening
from engine.models.session import WitnessMode
from engine.models.usage import TokenTally
from engine.prompts import fill, load_prompt
from engine.providers import Message, StreamRequest
from engine.routing.collect import Reply
from engine.routing.structured import collect_json

if TYPE_CHECKING:
    from engine.costs import Budget
    from engine.routing.router import Accept, Router

__all__ = ["JUDGE_MAX_TOKENS", "VERDICT_SCHEMA", "Baselines"]

JUDGE_MAX_TOKENS = 160

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["true", "false", "undetermined"]},
        "probability_false": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["verdict", "probability_false"],
    "additionalProperties": False,
}


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
        sure = load_prompt("eval_are_you_sure").strip()
        messages.append(Message("user", sure if answered else f"{asked}\n\n{sure}"))
        reply = await self._complete(self._ask(tuple(messages)), "witness")
        return fill(load_prompt("eval_evidence"), QUESTION=asked,
                    ANSWER=answered or "(no answer)", SURE=sure,
                    REPLY=reply.text.strip() or "(no answer)")

    async def verdict(self, claim: str, evidence: str) -> tuple[str, float | None]:
        """The detective's verdict on `claim` given `evidence` (empty: the claim alone). A
        verdict that breaks a rule (against its own probability) is asked for again once with
        the rule, as in an interrogation's audit; a second miss is `undetermined` with no
        probability (`repairs` counts the retries)."""
        found: dict[str, tuple[str, float]] = {}
        broken: list[str] = []

        def accept(provider: str, text: str, finish_reason: str) -> str | None:
            value = collect_json(provider, text, finish_reason, VERDICT_SCHEMA)
            verdict, probability = value["verdict"], float(value["probability_false"])
            problem = probability_problem(verdict, probability)
            if problem is not None:
                broken.append(problem)
                return problem
            found[provider] = (verdict, probability)
            return None

        messages: tuple[Message, ...] = (
            Message("system", fill(load_prompt("eval_judge"), CLAIM=claim, EVIDENCE=evidence)),
            Message("user", "Give your verdict."))
        for attempt in (1, 2):
            request = StreamRequest(messages=messages, schema=VERDICT_SCHEMA,
                                    schema_name="verdict", max_tokens=JUDGE_MAX_TOKENS,
                                    temperature=self.settings.temperature)
            reply = await self._complete(request, "detective", accept)
            assert reply.provider is not None
            if reply.provider in found:
                return found[reply.provider]
            if attempt == 1:
                self.repairs += 1
                retry = fill(load_prompt("validation_retry"), ERROR=broken[-1])
                messages = (*messages, Message("assistant", reply.text),
                            Message("user", retry))
        return "undetermined", None
