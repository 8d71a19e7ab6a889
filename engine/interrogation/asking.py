"""The detective's two calls of a round besides its judgement, each a function of the
session's recorded calls (`SessionCalls`): the question (`question`, from worked examples,
held to `interrogation.checks.question_problem`, asked again when unusable) and the gap
analysis (`analyse`, structured output; a self-contradiction is recorded and overruled).
`Interrogation` (`interrogation.loop`) runs them in its rounds, a testimony's claims
(`interrogation.testimony`) in theirs."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import replace

from engine.context.budget import Prompt
from engine.errors import AllProvidersFailed, UnusableReplyError, WindowTooSmall
from engine.interrogation.calls import BY_RULE, SessionCalls, Turn
from engine.interrogation.checks import (
    analysis_conflict,
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
from engine.models.events import Discarded, GapAnalysisReady, InterrogationEvent, QuestionDelta
from engine.models.session import GapAnalysis, QuestionAnswerPair
from engine.models.trail import AuditTrailEntry
from engine.prompts import fill, load_prompt
from engine.providers import Message
from engine.report.words import no_usable_question

__all__ = ["BY_RULE", "analyse", "question"]


async def question(calls: SessionCalls, sequence: int, asked: Turn,
                   subject: str | None = None, rounds: list[QuestionAnswerPair] | None = None
                   ) -> AsyncGenerator[InterrogationEvent, None]:
    """Stream a usable question into `asked`. An unusable one is asked for again of the
    same provider, told the rule it broke (in the user's turn); only the last attempt may
    go on to the chain's next provider. After `QUESTION_ATTEMPTS`, `NoQuestion` says why
    (a rule of ours: the loop closes the questioning, it does not fail the session).
    `subject` and `rounds`: a testimony's claim and its own rounds, instead of the
    session's hypothesis and rounds (then nothing streams: the claims run side by
    side). A comparison is first asked in its open form, both ways, and a negation as "Is it
    true that …?", by rule, without a call (`shapes.rule_question`, asked by `BY_RULE`); a
    comparison's questions after them are held to asking which as well
    (`checks.question_problem`)."""
    session, settings = calls.session, calls.settings
    claim = subject is not None
    hypothesis = subject if subject is not None else session.hypothesis_text
    pairs = rounds if rounds is not None else session.qa_pairs
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
        asked.text, asked.provider = made, BY_RULE
        if not claim:
            yield calls._emit(QuestionDelta(sequence=sequence, text=made))
        return
    rejected: list[tuple[str, str]] = []

    def frame(text: str) -> list[Message]:
        return [Message("system", system), Message("user", fill(
            turn, TRANSCRIPT=text, SEQUENCE=sequence, LIMIT=session.iteration_limit,
            FOCUS=focus))]

    prompt: Prompt = transcript_prompt(
        calls._request(frame(transcript(pairs, analyses=True)),
                      settings.question_max_tokens, grammar=QUESTION_GRAMMAR),
        pairs, frame, analyses=True,
    )
    chain = calls._chain_configs("detective")
    attempts = DEMONSTRATION_ATTEMPTS if chain and chain[0].is_demonstration \
        else QUESTION_ATTEMPTS
    for attempt in range(1, attempts + 1):
        last = attempt == attempts

        def accept(provider: str, text: str, finish_reason: str,
                   last: bool = last) -> str | None:
            problem = budget_spent("the detective", text, finish_reason) or \
                question_problem(text, hypothesis, earlier, (system_template, turn, focus),
                                 claim_answer, claim_question, claim)
            if problem is None:
                return None
            rejected.append((calls._labels.get(provider, provider), problem))
            if last:  # the next provider of the chain may do better
                raise UnusableReplyError(provider, problem)
            return problem

        if last and (settings.temperature is not None
                     and settings.temperature < RETRY_TEMPERATURE):
            prompt = replace(prompt, request=replace(prompt.request,
                                                     temperature=RETRY_TEMPERATURE))
        tried = len(rejected)
        try:
            async for event in calls._call(prompt, "detective", asked,
                                          None if claim else sequence, accept):
                yield event
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
                return
            label, problem = rejected[-1]
            yield calls._emit(Discarded(role="detective", provider=label, text=asked.text,
                                       reason=problem))
            yield calls._trail(AuditTrailEntry(
                event="degenerate_output", role="detective", from_provider=label,
                reason=problem))
        label, problem = rejected[-1]
        if last:
            raise NoQuestion(no_usable_question(
                label, attempts, problem, calls._is_demonstration(label)))
        session.repairs += 1
        prompt = prompt.noted(fill(load_prompt("question_retry"), SEQUENCE=sequence,
                                   PROBLEM=problem))

async def analyse(calls: SessionCalls, pending: QuestionAnswerPair, sequence: int
                  ) -> AsyncGenerator[InterrogationEvent, None]:
    """The detective's gap analysis of `pending`; a self-contradiction is recorded (the
    loop's rule decides instead)."""
    session, settings = calls.session, calls.settings
    analysed = Turn()
    analysis_prompt = load_prompt("gap_analysis")
    note = protocol_note(session.protocol, session.consistency_samples)

    def analysis_frame(text: str) -> list[Message]:
        return [Message("system", fill(analysis_prompt, HYPOTHESIS=session.hypothesis_text,
                                       TRANSCRIPT=note + text)),
                Message("user", "Analyse the last answer.")]

    rounds = [*session.qa_pairs, pending]
    request = transcript_prompt(
        calls._request(
            analysis_frame(transcript(rounds, analyses=False)),
            settings.analysis_max_tokens,
            gap_schema(settings.max_gaps, settings.analysis_max_tokens), "gap_analysis",
        ),
        rounds, analysis_frame, analyses=False,
        reshape=lambda reply: gap_schema(settings.max_gaps, reply),
    )
    async for event in calls._structured(
        request, analysed, "gap analysis",
        lambda data: distinct_gaps(GapAnalysis.model_validate(data)), sequence
    ):
        yield event
    analysis: GapAnalysis
    if analysed.invalid is not None:  # the loop's rule asks on
        analysis = GapAnalysis(gaps=[], completeness_score=0, requires_follow_up=True,
                               invalid=analysed.invalid)
    else:
        analysis = analysed.value
    conflict = analysis_conflict(analysis)
    if conflict is not None:
        yield calls._trail(AuditTrailEntry(
            event="contradictory_analysis", role="detective",
            from_provider=analysed.provider,
            reason=f"the analysis of answer {sequence} contradicts itself: {conflict}; "
            "the loop's rule decides",
        ))
    yield calls._emit(GapAnalysisReady(sequence=sequence, analysis=analysis))
