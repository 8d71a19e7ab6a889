"""The detective's two calls of a round besides its judgement, each a function of the
session's caller (`Caller`) returning a value: the question (`question`, from worked
examples, held to `interrogation.checks.question_problem`, asked again when unusable) and the
gap analysis (`analyse`, structured output; a self-contradiction is recorded and
overruled). A round (`interrogation.rounds`) runs them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from engine.context.budget import Prompt
from engine.errors import AllProvidersFailed, UnusableReplyError, WindowTooSmall
from engine.interrogation.calls import BY_RULE, Caller
from engine.interrogation.checks import (
    analysis_conflict,
    bare_question,
    budget_spent,
    distinct_gaps,
    question_problem,
)
from engine.interrogation.questions import (
    DEMONSTRATION_ATTEMPTS,
    QUESTION_ATTEMPTS,
    QUESTION_GRAMMAR,
    RETRY_TEMPERATURE,
    NoQuestion,
)
from engine.interrogation.shapes import rule_question
from engine.interrogation.transcript import gap_schema, protocol_note, transcript, transcript_prompt
from engine.models.events import Discarded, GapAnalysisReady, QuestionDelta
from engine.models.session import GapAnalysis, QuestionAnswerPair
from engine.models.trail import AuditTrailEntry
from engine.prompts import fill, load_prompt
from engine.providers import Message
from engine.report.words import no_usable_question

__all__ = ["BY_RULE", "Asked", "analyse", "question"]


@dataclass(frozen=True, slots=True)
class Asked:
    """A usable question and who wrote it (`BY_RULE` for a question made by rule)."""

    text: str
    provider: str


async def question(caller: Caller, sequence: int, subject: str,
                   rounds: list[QuestionAnswerPair], *, streamed: bool = False,
                   extra: Callable[[str], str | None] | None = None) -> Asked:
    """A usable question about `subject` (a claim; the session's hypothesis) after its own
    `rounds`; streamed as round `sequence`'s question when `streamed` (a session's own
    hypothesis: claims run side by side, unseen). An unusable one is asked for again of the
    same provider, told the rule it broke (in the user's turn); only the last attempt may
    go on to the chain's next provider. After `QUESTION_ATTEMPTS`, `NoQuestion` says why (a
    rule of ours: the questioning closes, the session does not fail). `extra`: a further
    rule of the caller's (a testimony's claim: the question must name its subject). A
    comparison is first asked in its open form, both ways, and a negation as "Is it true
    that …?", by rule, without a call (`shapes.rule_question`, asked by `BY_RULE`); a
    comparison's questions after them are held to asking which as well
    (`checks.question_problem`)."""
    session, settings = caller.session, caller.settings
    claim = not streamed
    hypothesis = subject
    pairs = rounds
    brief = None if claim else session.witness_brief
    claim_answer, claim_question = (brief.answer, brief.question) if brief else (None, None)
    system_template, turn = load_prompt("detective_question"), load_prompt("detective_turn")
    system = fill(system_template, HYPOTHESIS=hypothesis)
    focus = load_prompt("detective_focus_next" if pairs
                        else "detective_focus_first").strip()
    earlier = [pair.question for pair in pairs]
    made = rule_question(hypothesis, earlier)
    if made is not None:
        # a comparison (both ways) or a negation is first asked by rule: the 1.5B asked for
        # one side of a comparison (or both values), and negations as questions that
        # presuppose them
        if streamed:
            caller.emit(QuestionDelta(sequence=sequence, text=made))
        return Asked(made, BY_RULE)
    rejected: list[tuple[str, str]] = []

    def frame(text: str) -> list[Message]:
        return [Message("system", system), Message("user", fill(
            turn, TRANSCRIPT=text, SEQUENCE=sequence, LIMIT=session.iteration_limit,
            FOCUS=focus))]

    prompt: Prompt = transcript_prompt(
        caller.request(frame(transcript(pairs, analyses=True)),
                       settings.question_max_tokens, grammar=QUESTION_GRAMMAR),
        pairs, frame, analyses=True,
    )
    chain = caller.chain("detective")
    attempts = DEMONSTRATION_ATTEMPTS if chain and chain[0].is_demonstration \
        else QUESTION_ATTEMPTS
    for attempt in range(1, attempts + 1):
        last = attempt == attempts

        def accept(provider: str, text: str, finish_reason: str,
                   last: bool = last) -> str | None:
            problem = budget_spent("the detective", text, finish_reason) or \
                question_problem(text, hypothesis, earlier, (system_template, turn, focus),
                                 claim_answer, claim_question, claim) or \
                (extra(bare_question(text)) if extra is not None else None)
            if problem is None:
                return None
            rejected.append((caller.label(provider) or provider, problem))
            if last:  # the next provider of the chain may do better
                raise UnusableReplyError(provider, problem)
            return problem

        if last and (settings.temperature is not None
                     and settings.temperature < RETRY_TEMPERATURE):
            prompt = replace(prompt, request=replace(prompt.request,
                                                     temperature=RETRY_TEMPERATURE))
        tried = len(rejected)
        said = None
        try:
            said = await caller.call(prompt, "detective",
                                     streamed=sequence if streamed else None, accept=accept)
        except WindowTooSmall as exc:
            if attempt == 1 or len(rejected) != tried:
                raise
            # a retry of ours that fits no window closes the questioning, as its tries do
            raise NoQuestion(f"the retry of question {sequence} does not fit the context "
                             f"window ({exc.last_reason})") from None
        except AllProvidersFailed:
            if len(rejected) == tried:  # no model spoke nonsense: the providers failed
                raise
        else:
            if len(rejected) == tried:
                return Asked(bare_question(said.text), said.provider)
            label, problem = rejected[-1]
            caller.emit(Discarded(role="detective", provider=label, text=said.text,
                                  reason=problem))
            caller.trail(AuditTrailEntry(
                event="degenerate_output", role="detective", from_provider=label,
                reason=problem))
        label, problem = rejected[-1]
        if last:
            raise NoQuestion(no_usable_question(
                label, attempts, problem, caller.is_demonstration(label)))
        session.repairs += 1
        prompt = prompt.noted(fill(load_prompt("question_retry"), SEQUENCE=sequence,
                                   PROBLEM=problem))
    raise AssertionError("unreachable: the last attempt returns or raises")

async def analyse(caller: Caller, pending: QuestionAnswerPair, sequence: int,
                  earlier: list[QuestionAnswerPair]) -> GapAnalysis:
    """The detective's gap analysis of `pending` after the `earlier` rounds, emitted and
    returned; a self-contradiction is recorded (the loop's rule decides instead)."""
    session, settings = caller.session, caller.settings
    analysis_prompt = load_prompt("gap_analysis")
    note = protocol_note(session.protocol, session.consistency_samples)

    def analysis_frame(text: str) -> list[Message]:
        return [Message("system", fill(analysis_prompt, HYPOTHESIS=session.hypothesis_text,
                                       TRANSCRIPT=note + text)),
                Message("user", "Analyse the last answer.")]

    rounds = [*earlier, pending]
    request = transcript_prompt(
        caller.request(
            analysis_frame(transcript(rounds, analyses=False)),
            settings.analysis_max_tokens,
            gap_schema(settings.max_gaps, settings.analysis_max_tokens), "gap_analysis",
        ),
        rounds, analysis_frame, analyses=False,
        reshape=lambda reply: gap_schema(settings.max_gaps, reply),
    )
    made = await caller.structured(
        request, "gap analysis", lambda data: distinct_gaps(GapAnalysis.model_validate(data)),
        sequence)
    analysis: GapAnalysis
    if made.invalid is not None:  # the loop's rule asks on
        analysis = GapAnalysis(gaps=[], completeness_score=0, requires_follow_up=True,
                               invalid=made.invalid)
    else:
        analysis = made.value
    conflict = analysis_conflict(analysis)
    if conflict is not None:
        caller.trail(AuditTrailEntry(
            event="contradictory_analysis", role="detective",
            from_provider=made.said.provider,
            reason=f"the analysis of answer {sequence} contradicts itself: {conflict}; "
            "the loop's rule decides",
        ))
    caller.emit(GapAnalysisReady(sequence=sequence, analysis=analysis))
    return analysis
