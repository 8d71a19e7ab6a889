"""A session's model calls, recorded: `Caller`, the one object every step of an interrogation
is a function of.

    caller = Caller(router, journal, settings, sink=queue.put_nowait)
    said = await caller.call(prompt, "witness", streamed=3)     # a value: `Said`
    made = await caller.structured(prompt, "gap analysis", validate)

Each call is streamed through the router and collected once (`routing.collect.Reply`); its
router events become the session's events and audit-trail entries, each journaled before it
is handed to the run's `sink` (`emit`). Steps take the caller and return values: nothing is
filled in place. `Interrogation` (`interrogation.loop`) holds one and drains its sink."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import aclosing, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from engine.config.models import Config, InterrogationConfig
from engine.config.providers import ProviderConfig
from engine.context.budget import FitReport, Prompt
from engine.context.fit import shorten
from engine.costs import Budget, call_cost, price_for
from engine.errors import BadResponseError, WindowTooSmall
from engine.models.events import (
    AnswerDelta,
    ContextFitted,
    Discarded,
    InterrogationEvent,
    PhaseName,
    ProviderChosen,
    QuestionDelta,
    Reasoning,
    Role,
    TrailAdded,
)
from engine.models.trail import AuditTrailEntry, ContextFit
from engine.models.usage import TokenTally
from engine.prompts import fill, load_prompt
from engine.providers import (
    Message,
    ReasoningDelta,
    StreamRequest,
    TokenChoices,
    TokenDelta,
    Usage,
)
from engine.routing.collect import Reply
from engine.routing.events import Attempt, Fitted, PartialDiscarded, ProviderEvent
from engine.routing.router import Router
from engine.routing.structured import collect_json
from engine.storage.journal import SessionJournal

__all__ = ["BY_RULE", "RETRY_ECHO", "Caller", "Said", "Sink", "Structured", "count_tokens",
           "own_tokens", "sampling_temperature"]


@dataclass(frozen=True, slots=True)
class Said:
    """What one streamed call gave: the text, who gave it, why it ended."""

    text: str = ""
    provider: str = ""
    """Who answered (`"{provider}:{model}"`), "" when no provider did."""
    finish_reason: str = ""
    reasoning: str = ""
    """What a reasoning model thought before its reply (never part of `text`)."""
    choices: tuple[TokenChoices, ...] = ()
    """The reply's tokens with their log-probabilities, when asked for and sent."""
    used: TokenTally = field(default_factory=TokenTally)
    """What this call used (`count_tokens`), whatever ran beside it."""

    @property
    def cut_off(self) -> bool:
        """Whether the reply ended at its token limit."""
        return self.finish_reason == "length"


@dataclass(frozen=True, slots=True)
class Structured:
    """A structured call's outcome: the validated `value`, or `invalid` (the rule its reply
    broke twice; then `value` is None and `said` is the second invalid reply)."""

    value: Any
    said: Said
    invalid: str | None = None


Sink = Callable[[InterrogationEvent], None]
"""Where a run's events go once journaled (the queue its consumer drains)."""


BY_RULE = "detektiv:rule"
"""Who asked a question made by rule (`shapes.rule_question`), where a provider's label
stands."""

RETRY_ECHO = 400
"""Characters of an invalid structured reply shown back to the model with the error."""


MOST_TOKENS = 100_000_000
"""More tokens than one call can have (the largest windows hold 10 million): a count past it
is no count."""


_OWN: ContextVar[tuple[TokenTally, ...]] = ContextVar("detektiv_own_tokens", default=())


@contextmanager
def own_tokens() -> Iterator[TokenTally]:
    """A tally of the calls the running task makes within the block, besides the session's:
    a round's own tokens while other claims' rounds run beside it (the session's tally counts
    them all; a difference of it taken before and after would count theirs too). Blocks
    nest: a call counts in every tally open around it (a signal's, and its round's). Entered
    in a coroutine that runs as a task of its own, never across an async generator's
    yields."""
    tally = TokenTally()
    token = _OWN.set((*_OWN.get(), tally))
    try:
        yield tally
    finally:
        _OWN.reset(token)


def _count(value: object) -> int | None:
    """A token count a server reported, if it is one (a hostile or odd server may send a
    string, a negative number, a float or an absurd number: then the count is estimated)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MOST_TOKENS:
        return value
    return None


def count_tokens(tally: TokenTally, reply: Reply, config: Config | None = None,
                 budget: Budget | None = None) -> None:
    """Add one call's tokens to `tally`: as the provider reported them, else estimated (the
    prompt as fitted, the reply and its reasoning at four characters a token); with `config`,
    its cost at the answering provider's price (`engine.costs`), also spent from `budget`.
    What a provider streamed before it failed (a timeout, a cut, a failover) is counted too,
    estimated: it was generated, and a paid API bills it. An answer served from the response
    cache used no tokens."""
    if reply.cached:
        return
    for partial in reply.discarded:
        fits = [fit.used for fit in reply.fits if fit.provider == partial.provider]
        _add(tally, partial.provider, fits[-1] if fits else 0, (len(partial.text) + 3) // 4,
             None, config, budget, estimated=True)
    if not reply.done:  # stopped mid-stream: what streamed, unless a discard counted it
        last = reply.discarded[-1] if reply.discarded else None
        voided = last is not None and last.provider == reply.provider and \
            last.text == reply.text
        if voided or not (reply.text or reply.reasoning or reply.usage):
            return
    usage = reply.usage
    prompt = _count(usage.prompt_tokens) if usage is not None else None
    completion = _count(usage.completion_tokens) if usage is not None else None
    estimated = prompt is None or completion is None
    if prompt is None:
        prompt = reply.fits[-1].used if reply.fits else 0
    if completion is None:
        completion = (len(reply.text) + len(reply.reasoning) + 3) // 4
    _add(tally, reply.provider, prompt, completion, usage, config, budget, estimated)


def _add(tally: TokenTally, name: str | None, prompt: int, completion: int,
         usage: Usage | None, config: Config | None, budget: Budget | None,
         estimated: bool) -> None:
    """Count one call of provider `name` in `tally` (and its cost)."""
    cached = _count(usage.cached_tokens) if usage is not None else None
    written = _count(usage.cache_write_tokens) if usage is not None else None
    thought = _count(usage.reasoning_tokens) if usage is not None else None
    tally.estimated_calls += estimated
    tally.prompt += prompt
    tally.completion += completion
    tally.cached += min(cached or 0, prompt)
    tally.reasoning += min(thought or 0, completion)
    if config is None or name is None:
        return
    price = price_for(config, name)
    if price is None:
        if name not in tally.unpriced:
            tally.unpriced.append(name)
        return
    cost = call_cost(price, prompt, completion, cached or 0, written or 0)
    tally.cost += cost
    if budget is not None:
        budget.spend(cost)


def check_budget(budget: Budget, router: Router, role: str, request: StreamRequest,
                 extra_chars: int = 0) -> None:
    """`CostLimitReached` when `request` (and `extra_chars` more of prompt) may pass `budget`
    on the role's chain: the check made before every call of a run."""
    chars = sum(len(m.content) for m in request.messages) + extra_chars
    budget.check(chars, request.max_tokens or 0,
                 [price_for(router.config, name) for name in router.chain(role)])


def sampling_temperature(settings: InterrogationConfig) -> float:
    """The temperature the witness is sampled at (the consistency protocol's answers, a
    testimony's samples, `eval`'s): `consistency_temperature`, or the configured temperature
    when that is higher."""
    return max(settings.consistency_temperature, settings.temperature or 0.0)


class Caller:
    """The calls of one run of a session over `router`, recorded in `journal`; events go to
    `sink` (set by whoever drains them) once journaled."""

    def __init__(self, router: Router, journal: SessionJournal,
                 settings: InterrogationConfig, budget: Budget | None = None,
                 sink: Sink | None = None) -> None:
        self.router = router
        self.journal = journal
        self.session = journal.session
        self.settings = settings
        self.budget = budget
        """`--max-cost`: checked before every call (shared by an evaluation's sessions)."""
        self.sink = sink
        self._labels = {name: p.label for name, p in router.providers.items()}

    # ---- events ---------------------------------------------------------------------------

    def emit(self, event: InterrogationEvent) -> InterrogationEvent:
        """Journal `event`, then hand it to the sink: the journal's rule (nothing is shown
        before it is on the disk)."""
        self.journal.record(event)
        if self.sink is not None:
            self.sink(event)
        return event

    def trail(self, entry: AuditTrailEntry) -> InterrogationEvent:
        """Add `entry` to the session's audit trail, as an event."""
        self.session.audit_trail.append(entry)
        return self.emit(TrailAdded(entry=entry))

    # ---- who plays what -------------------------------------------------------------------

    def chain(self, role: str) -> list[ProviderConfig]:
        """The configurations of the providers that play `role`, in order."""
        return [self.router.providers[name].config for name in self.router.chain(role)]

    def label(self, name: str | None) -> str | None:
        """A provider's label (`"{provider}:{model}"`) by its name."""
        return None if name is None else self._labels.get(name, name)

    def role_label(self, role: Role) -> str:
        """Who played `role` last (`"{provider}:{model}"`), else the chain's first."""
        if self.session.qa_pairs:
            used = self.session.qa_pairs[-1].provider_used
            label = used.detective if role == "detective" else used.witness
            if label and label not in (BY_RULE, "given"):  # by rule: the chain's model judged
                return label
        chain = self.router.chain(role)
        return self._labels.get(chain[0], chain[0]) if chain else role

    def is_demonstration(self, label: str) -> bool:
        """Whether the provider labelled `label` runs a model shipped for demonstration."""
        return any(p.label == label and p.config.is_demonstration
                   for p in self.router.providers.values())

    # ---- requests -------------------------------------------------------------------------

    def request(
        self, messages: list[Message], max_tokens: int,
        schema: dict[str, Any] | None = None, name: str = "answer",
        grammar: str | None = None,
    ) -> StreamRequest:
        """The unfitted request at the configured temperature: every round whole (what a
        window large enough is sent); `grammar` holds a demonstration model to the reply's
        form."""
        return StreamRequest(
            messages=tuple(messages),
            schema=schema,
            schema_name=name,
            max_tokens=max_tokens,
            temperature=self.settings.temperature,
            demonstration_grammar=grammar,
        )

    def sampled(self, prompt: Prompt, seed: int | None = None,
                temperature: float | None = None) -> Prompt:
        """`prompt` asked anew to sample the witness, at `temperature` (default:
        `sampling_temperature`) and with `seed` where the server honours one."""
        heat = sampling_temperature(self.settings) if temperature is None else temperature
        return replace(prompt, request=replace(prompt.request, temperature=heat, seed=seed))

    # ---- calls ----------------------------------------------------------------------------

    async def call(
        self,
        prompt: Prompt,
        role: Role,
        *,
        streamed: int | None = None,
        accept: Callable[[str, str, str], str | None] | None = None,
        fit_for: int | None = None,
        phase: PhaseName | None = None,
    ) -> Said:
        """Stream one call over the role's chain: its text as deltas of round `streamed` when
        given (else the round it belongs to is `fit_for`), its reasoning as the `phase` call
        when the rest does not tell; what it said. Raises what the router raises
        (`AllProvidersFailed`, `WindowTooSmall`) and `CostLimitReached` before the call."""
        if self.budget is not None:
            extra = sum(len(m.content) for m in prompt.extra) + len(prompt.note)
            check_budget(self.budget, self.router, role, prompt.request, extra)
        reply = Reply()
        provider = ""
        used = TokenTally()
        try:
            async with aclosing(self._routed(reply, prompt, role, streamed, accept, fit_for,
                                             phase)) as labels:
                async for label in labels:
                    provider = label
        finally:  # what streamed before a failure is counted as well
            count_tokens(self.session.tokens, reply, self.router.config, self.budget)
            for own in (used, *_OWN.get()):  # spent from the budget once, above
                count_tokens(own, reply, self.router.config)
        return Said(text=reply.text, provider=provider, finish_reason=reply.finish_reason or "",
                    reasoning=reply.reasoning, choices=tuple(reply.choices), used=used)

    async def structured(
        self, prompt: Prompt, what: str, validate: Callable[[Any], Any],
        sequence: int | None = None, allowed: str = "",
    ) -> Structured:
        """A detective call whose reply must be valid JSON and keep its rules (`validate`
        raises `ValueError` naming the rule); asked again once with the rule it broke and
        `allowed` (what it may name). A second miss is the model's, not the session's: the
        outcome is `invalid` (the rule) with no value, and the caller decides what stands
        in."""
        schema = prompt.request.schema
        assert schema is not None
        detail = ""
        said = Said()
        for attempt in (1, 2):
            try:
                said = await self.call(prompt, "detective", fit_for=sequence)
            except WindowTooSmall as exc:
                if attempt == 1:  # the call itself fits no window: the caller's to say
                    raise
                # the retry is ours: it ends, not the session (the rule decides instead)
                self.trail(AuditTrailEntry(
                    event="error", role="detective", from_provider=said.provider,
                    reason=f"the {what}'s retry does not fit the context window; the rule "
                    f"decides instead: {exc.last_reason}"))
                return Structured(None, said, f"{detail}; its retry did not fit the "
                                  "context window")
            try:
                value = validate(collect_json(said.provider, said.text, said.finish_reason,
                                              schema))
                return Structured(value, said)
            except (BadResponseError, ValueError) as exc:
                detail = exc.detail if isinstance(exc, BadResponseError) else str(exc)
                detail = detail.splitlines()[0] if detail else type(exc).__name__
            self.trail(AuditTrailEntry(
                event="error", role="detective", from_provider=said.provider,
                reason=f"invalid {what}" + (", asking again" if attempt == 1 else
                                            " again; the rule decides instead")
                + f": {detail}",
            ))
            if attempt == 2:
                break
            self.session.repairs += 1
            retry = fill(load_prompt("validation_retry"),
                         ERROR=f"{detail}. {allowed}" if allowed else detail)
            if said.text.strip():
                # the invalid reply is shown again only in part: it is there to point at the
                # error, and all of it would take the window from the transcript
                prompt = prompt.then(Message("assistant", shorten(said.text, RETRY_ECHO)),
                                     Message("user", retry))
            else:  # nothing to show back: no words are put in the model's mouth
                prompt = prompt.noted(retry)
        return Structured(None, said, detail)

    async def _routed(
        self, reply: Reply, prompt: Prompt, role: Role, streamed: int | None,
        accept: Callable[[str, str, str], str | None] | None, fit_for: int | None,
        named: PhaseName | None = None,
    ) -> AsyncGenerator[str, None]:
        """The router's events of one call, taken by `reply`, emitted as the session's
        events; yields the label of each provider that answers."""
        delta = QuestionDelta if role == "detective" else AnswerDelta
        label = self.label
        phase: PhaseName = named or ("answer" if role == "witness" else "question"
                                     if streamed is not None else "analysis"
                                     if fit_for is not None else "audit")
        async for event in reply.follow(self.router.stream(prompt, role, accept)):
            match event:
                case TokenDelta(text) if streamed is not None and text:
                    self.emit(delta(sequence=streamed, text=text))
                case ReasoningDelta(text) if text:
                    self.emit(Reasoning(role=role, phase=phase,
                                        sequence=streamed or fit_for, text=text))
                case Attempt(_, provider_label, trial):
                    self.emit(ProviderChosen(role=role, provider=provider_label, trial=trial))
                    yield provider_label
                case PartialDiscarded(provider, text, reason):
                    self.emit(Discarded(role=role, provider=label(provider) or provider,
                                        text=text, reason=reason))
                    self.trail(AuditTrailEntry(
                        event="partial_discarded", role=role, from_provider=label(provider),
                        reason=f"{len(text)} characters discarded: {reason}",
                    ))
                case ProviderEvent(kind, from_provider, to_provider, reason):
                    self.trail(AuditTrailEntry(
                        event=kind, role=role, from_provider=label(from_provider),
                        to_provider=label(to_provider), reason=reason,
                    ))
                case Fitted(_, report):
                    self._fitted(role, streamed or fit_for, report)

    def _fitted(self, role: Role, sequence: int | None, report: FitReport) -> None:
        trim = report.trim
        fit = ContextFit(
            role=role, sequence=sequence, provider=report.provider, used=report.used,
            window=report.window, window_source=report.window_source, counted=report.counted,
            reply=report.reply,
            asked_reply=report.asked_reply if report.reply_lowered else None,
            digested=list(trim.digested), shortened=list(trim.shortened),
            omitted=list(trim.omitted),
        )
        self.session.context_fits.append(fit)
        self.emit(ContextFitted(fit=fit))
