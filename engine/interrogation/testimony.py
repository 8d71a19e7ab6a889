"""A testimony interrogated claim by claim (SPEC §1, "Testimony"; issue 53).

    async for event in examine_testimony(interrogation):   # the loop's body for a testimony
        ...

1. **The testimony.** A hypothesis that asks is put to the witness as it is, told nothing
   more (holding its document, when the session gives it one): its answer, streamed like an
   answer and capped at `[interrogation] testimony_max_tokens`, is the testimony. A
   hypothesis of several sentences is the testimony itself. Either way it is stored as the
   session's first pair (`testimony`), a checkpoint. A testimony the witness gave (no
   document) is then drawn again `testimony_samples` times at `consistency_temperature`,
   told nothing, while the detective splits it (`_side_by_side`): the samples each
   claim is read against (rule 8), kept with the claims.
2. **The split.** The detective takes it apart into claims from worked examples; each line
   is held to `engine.interrogation.claims` (refused lines are named and the split is asked
   for again once), placed on its sentence, and marked not checkable where it is; the
   sentences no claim stands on are split once more as a text of their own
   (`_split_left_out`, while fewer than `max_claims` claims are to be examined), their
   claims merged in the order of the text, and a sentence still left out is listed as it
   stands, not examined (`listed_left_out`); claims past `max_claims` are not examined.
   The claims are a checkpoint (`ClaimsSplit`).
3. **Each claim examined** as a single hypothesis (`examine_claim`): a key-fact question,
   the witness answering told nothing (it never sees its testimony again, so it cannot just
   repeat it), the judgement read from log-probabilities, round after round until the
   claim's verdict is decided or `--limit` rounds are spent; in `open` mode the detective's
   own reading of the claim (told the question the testimony answers, when there is one) is
   recorded beside it and pooled with the rounds (rule 8 of `engine.interrogation.verdict`);
   with a document, the claim's words the document lacks are recorded beside it, and three
   or more make it `unsupported` without rounds (rule 9).
   Each round's gap analysis is computed from its judgement (no model call: `analysis_of`).
   Claims run side by side within the providers' slots; each ends with `ClaimExamined`, a
   checkpoint, so a resume examines only the claims without a state.
4. **The result** is computed from the claims (`testimony_audit`): the verdict, the
   consistency score, the contradictions (pair 0, the testimony, against the round whose
   answer contradicted a claim), the unsure and not-checkable claims as the remaining gaps,
   and a summary of the claims. No model writes it.

A model's nonsense ends the testimony with its reason named, never `failed`: no testimony
(empty, an echo, "I don't know"), a split with no usable claim, a claim no question could be
written for (its state `unsure`, the reason given).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import replace
from functools import partial

from engine.context.budget import Prompt
from engine.context.fit import Trim
from engine.context.tokens import MESSAGE_OVERHEAD
from engine.errors import WindowTooSmall
from engine.interrogation.asking import question as ask_question
from engine.interrogation.calls import SessionCalls, Turn, own_tokens
from engine.interrogation.checks import answer_problem, bare_question
from engine.interrogation.claims import (
    Segment,
    adds_nothing,
    as_listed,
    claim_problem,
    left_out,
    locate,
    not_checkable,
    read_split,
    segments,
    testimony_source,
    unfound,
)
from engine.interrogation.judgement import (
    DECLINING_REASON,
    Reading,
    judge,
    judge_alone,
    judge_sample,
    sample_problem,
    says_nothing,
)
from engine.interrogation.questions import NoQuestion
from engine.interrogation.shapes import asked_alone, claim_closes, least_rounds
from engine.interrogation.transcript import (
    cut_to_fit,
    witness_instructions,
    witness_opening,
    witness_prompt,
)
from engine.interrogation.verdict import (
    claim_state,
    compute,
    sampled_p_true,
    testimony_score,
    testimony_verdict,
    unfound_p_false,
    with_alone,
    with_words,
)
from engine.models.events import (
    AnswerCutOff,
    ClaimExamined,
    ClaimsSplit,
    InterrogationEvent,
    PairCompleted,
    Phase,
)
from engine.models.judgement import Judgement
from engine.models.session import (
    AuditResult,
    Contradiction,
    Gap,
    GapAnalysis,
    InterrogationSession,
    ProvidersUsed,
    QuestionAnswerPair,
)
from engine.models.testimony import Claim, Testimony
from engine.models.trail import AuditTrailEntry
from engine.prompts import fill, load_prompt
from engine.providers import Message
from engine.report.claims import testimony_summary, unfound_words
from engine.report.words import document_cut
from engine.routing.slots import role_slots
from engine.text import one_line

__all__ = ["GIVEN", "analysis_of", "examine_claim", "examine_testimony", "is_testimony",
           "testimony_audit"]

GIVEN = "(the testimony, as given to be checked)"
"""The question of the first pair when the hypothesis is itself the testimony."""
SPLIT_ATTEMPTS = 2
DEFAULT_CLAIM_CONCURRENCY = 2
"""Claims examined at once when no server says how many calls it takes. On the embedded
model, one (`role_slots`' `cores`): its four slots share two cores here, and the Vitamin B3
request took 150 s one claim at a time, 165 s two at a time, idle; with two busy processes
beside it, 235, 247 and 362 s at one, two and four (temperature 0, nine claims)."""
MOST_CLAIM_CONCURRENCY = 16


def is_testimony(session: InterrogationSession) -> bool:
    """Whether `session` is interrogated as a testimony: it has one already, or it has not
    begun and its hypothesis asks or states several things."""
    if session.testimony is not None:
        return True
    return not session.qa_pairs and testimony_source(session.hypothesis_text) is not None


async def examine_testimony(calls: SessionCalls) -> AsyncGenerator[InterrogationEvent, None]:
    """The testimony's steps (the module docstring), each skipped when a checkpoint shows it
    done; ends with the computed audit stored in the session (the caller emits it)."""
    session = calls.session
    if not session.qa_pairs:
        async with aclosing(_give(calls)) as events:
            async for event in events:
                yield event
    # the sample while the detective splits (the split needs only the testimony, and a
    # server decodes the two side by side in less time than one after the other); a split
    # that gives no claim stops the sample: nothing will be read against it
    steps = [*([_sample] if _to_sample(calls) else []),
             *([_split] if session.testimony is None or not session.testimony.split else [])]
    async with aclosing(_side_by_side(
            [partial(_drained, step(calls)) for step in steps],
            stop=lambda: session.testimony is not None and bool(session.testimony.problem))
            ) as events:
        async for event in events:
            yield event
    async with aclosing(_examine_all(calls)) as events:
        async for event in events:
            yield event
    session.audit_result = testimony_audit(session)


# ---- 1. the testimony ----------------------------------------------------------------------

NO_ANALYSIS = GapAnalysis(gaps=[], completeness_score=0, requires_follow_up=True)
"""The first pair's analysis: a testimony is taken apart, not analysed whole."""


async def _give(calls: SessionCalls) -> AsyncGenerator[InterrogationEvent, None]:
    session, settings = calls.session, calls.settings
    hypothesis = session.hypothesis_text
    source = testimony_source(hypothesis) or "given"
    session.testimony = Testimony(source=source)
    yield calls._emit(Phase(phase="testimony", sequence=1))
    if source == "given":
        pair = QuestionAnswerPair(
            sequence=1, question=GIVEN, answer=hypothesis, gap_analysis=NO_ANALYSIS,
            provider_used=ProvidersUsed(detective="", witness="given"), testimony=True)
    else:
        answered = Turn()
        document = session.witness_document
        cut: list[bool] = []
        request = _witness_request(calls, hypothesis, [], settings.testimony_max_tokens, cut)
        async for event in calls._call(request, "witness", answered, 1):
            yield event
        if cut and document is not None:
            yield calls._trail(AuditTrailEntry(event="document_cut", role="witness",
                                               reason=document_cut(document.name)))
        cut_off = answered.finish_reason == "length"
        if cut_off:
            yield calls._emit(AnswerCutOff(sequence=1, provider=answered.provider))
        problem = _answer_problem(answered, hypothesis)
        problem = problem or says_nothing(answered.text)
        pair = QuestionAnswerPair(
            sequence=1, question=hypothesis, answer=answered.text, gap_analysis=NO_ANALYSIS,
            provider_used=ProvidersUsed(detective="", witness=answered.provider),
            answer_cut_off=cut_off, answer_problem=problem, testimony=True,
            usage=answered.used)
        if problem is not None:
            session.testimony.problem = f"no testimony: {problem}"
    session.qa_pairs.append(pair)
    session.current_iteration = len(session.qa_pairs)
    yield calls._emit(PairCompleted(pair=pair, tokens=session.tokens.model_copy(deep=True),
                                    repairs=session.repairs))


def _witness_request(calls: SessionCalls, question: str, rounds: list[QuestionAnswerPair],
                     max_tokens: int, cut: list[bool] | None = None) -> Prompt:
    """The witness asked `question`, told nothing more: the neutral prompt, its document when
    the session gives it one (`cut` gets True when the document was cut to fit), and only
    `rounds` before it (a claim's own; none for the testimony)."""
    witness, _ = witness_opening(None)
    document = calls.session.witness_document
    return witness_prompt(
        calls._request([Message("system", witness), Message("user", question)], max_tokens),
        witness, rounds, question, (), document.text if document is not None else None, cut)


def _answer_problem(answered: Turn, question: str) -> str | None:
    """Why the witness's reply to `question` is no testimony (`checks.answer_problem`)."""
    return answer_problem(answered.text, question, answered.finish_reason, answered.reasoning,
                          [witness_instructions(None)])


def _to_sample(calls: SessionCalls) -> bool:
    """Whether the witness's answer is to be sampled again: it gave the testimony (`open`
    mode, no document), it was one, and no samples were drawn yet."""
    testimony = calls.session.testimony
    return (testimony is not None and testimony.source == "witness"
            and testimony.problem is None and testimony.samples is None
            and calls.session.witness_document is None and calls.settings.testimony_samples > 0)


async def _sample(calls: SessionCalls) -> AsyncGenerator[InterrogationEvent, None]:
    """The witness asked the testimony's question again `testimony_samples` times at
    `consistency_temperature`, told nothing (SelfCheckGPT's samples: rule 8 of
    `engine.interrogation.verdict`); kept with the testimony, the split's checkpoint."""
    session, settings = calls.session, calls.settings
    testimony = session.testimony
    assert testimony is not None
    yield calls._emit(Phase(phase="samples", sequence=1))
    again = calls._sampled(_witness_request(calls, session.hypothesis_text, [],
                                            settings.testimony_max_tokens))
    drawn: list[str] = []
    for _ in range(settings.testimony_samples):
        sampled = Turn()
        async for event in calls._call(again, "witness", sampled, None, fit_for=1):
            yield event
        drawn.append(sampled.text)
    testimony.samples = drawn


Emit = Callable[[InterrogationEvent], None]


async def _drained(steps: AsyncGenerator[InterrogationEvent, None], emit: Emit) -> None:
    """Each event of `steps` handed to `emit`: a step of the testimony run as a task."""
    async with aclosing(steps) as events:
        async for event in events:
            emit(event)


async def _side_by_side(works: Sequence[Callable[[Emit], Awaitable[None]]],
                        stop: Callable[[], bool] | None = None
                        ) -> AsyncGenerator[InterrogationEvent, None]:
    """`works` run as tasks side by side, each handing its events to the `emit` it is given;
    their events yielded as they come. The first exception one raises is raised here (the
    run's own handler names it) and the others are cancelled; once one has ended and `stop`
    says so, so are the rest."""
    queue: asyncio.Queue[InterrogationEvent | BaseException | None] = asyncio.Queue()

    async def run(work: Callable[[Emit], Awaitable[None]]) -> None:
        try:
            await work(queue.put_nowait)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            queue.put_nowait(exc)
        finally:
            queue.put_nowait(None)

    tasks = [asyncio.create_task(run(work)) for work in works]
    try:
        running = len(tasks)
        while running:
            item = await queue.get()
            if item is None:
                running -= 1
                if stop is not None and stop():
                    for task in tasks:
                        task.cancel()
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# ---- 2. the split --------------------------------------------------------------------------

TESTIMONY_CUT = "\n[… the rest of the text did not fit]"


SPLIT_PENALTY = 0.5
"""The split's frequency penalty: at 0 the 1.5B fell into a loop of one claim after a few
good ones (8 of 8 lines past the ninth the same); at 0.5 it wrote nine distinct claims of the
Vitamin B3 answer in 102 tokens (measured on the development example, the issue's own)."""


def split_turns(template: str) -> tuple[str, list[tuple[str, str]]]:
    """`prompts/split_claims.md` read: its rules (the system message) and its worked examples
    as (text, claims) pairs, each under a `### text` and a `### claims` line. A small model
    follows worked examples given as turns of the conversation far better than examples
    inside its instructions (measured: the 1.5B copied the text line by line otherwise)."""
    parts = re.split(r"^### (text|claims)\s*$", template, flags=re.MULTILINE)
    rules = parts[0].strip()
    examples: list[tuple[str, str]] = []
    pending: str | None = None
    for kind, body in zip(parts[1::2], parts[2::2], strict=False):
        if kind == "text":
            pending = body.strip()
        elif pending is not None:
            examples.append((pending, body.strip()))
            pending = None
    return rules, examples


def _split_prompt(calls: SessionCalls, text: str, cut: list[bool]) -> Prompt:
    """The split's request (the rules, the worked examples as earlier turns, then the
    testimony), the testimony cut to the window when it does not fit whole."""
    rules, examples = split_turns(load_prompt("split_claims"))
    opening = [Message("system", rules)]
    for example, claims in examples:
        opening += [Message("user", example), Message("assistant", claims)]
    request = replace(calls._request([*opening, Message("user", text)],
                                     calls.settings.split_max_tokens),
                      frequency_penalty=SPLIT_PENALTY)

    def compose(limit: int, count: Callable[[str], int]) -> tuple[list[Message], Trim]:
        fixed = sum(count(m.content) + MESSAGE_OVERHEAD for m in opening) + MESSAGE_OVERHEAD
        keep, was_cut = cut_to_fit(text, limit - fixed, count, TESTIMONY_CUT)
        if was_cut and not cut:
            cut.append(True)
        return [*opening, Message("user", keep)], Trim(shortened=(1,) if was_cut else ())

    return Prompt(request=request, compose=compose)


def _claims_of(replies: Sequence[str], text: str, hypothesis: str, most: int
               ) -> tuple[list[Claim], list[str]]:
    """The claims split replies give (the split's, then what it was asked for of the
    sentences it left out), held to the rules, in the order of the sentences they stand on;
    and the refused lines, named."""
    parts = segments(text)
    claims: list[Claim] = []
    refused: list[str] = []
    for piece in (piece for reply in replies for piece in read_split(reply)):
        problem = claim_problem(piece.text, [c.text for c in claims], text, hypothesis)
        if problem is not None:
            refused.append(f"{one_line(piece.text, 120)} — {problem}")
            continue
        start, end = locate(piece.text, text, parts)
        why = not_checkable(piece.text, piece.marked)
        claims.append(Claim(number=len(claims) + 1, text=piece.text, start=start, end=end,
                            state="not checkable" if why else "pending", why=why))
    if len(replies) > 1:  # the later replies' claims take their places in the text
        claims = _in_text_order(claims)
    examined = 0
    for claim in claims:
        if claim.state == "pending":
            examined += 1
            if examined > most:
                claim.state = "not examined"
                claim.why = f"past the first {most} claims ([interrogation] max_claims)"
    return claims, refused


async def _split(calls: SessionCalls) -> AsyncGenerator[InterrogationEvent, None]:
    session = calls.session
    testimony = session.testimony or Testimony(source="given")
    session.testimony = testimony
    pair = session.qa_pairs[0]
    if testimony.problem is None:
        yield calls._emit(Phase(phase="split", sequence=1))
        cut: list[bool] = []
        prompt = _split_prompt(calls, pair.answer, cut)
        best: tuple[list[Claim], list[str]] = ([], [])
        chosen: str | None = None  # the reply `best` is of
        for attempt in range(1, SPLIT_ATTEMPTS + 1):
            turn = Turn()
            try:
                async for event in calls._call(prompt, "detective", turn, None, fit_for=1,
                                               phase="analysis"):
                    yield event
            except WindowTooSmall as exc:
                if attempt == 1:
                    raise
                # the retry is ours: the first split stands, not the session's end
                yield calls._trail(AuditTrailEntry(
                    event="error", role="detective", reason="the split's retry does not fit "
                    f"the context window; the first split stands: {exc.last_reason}"))
                break
            claims, refused = _claims_of([turn.text], pair.answer, session.hypothesis_text,
                                         calls.settings.max_claims)
            if attempt == 1 or len(claims) > len(best[0]):
                best, chosen = (claims, refused), turn.text
            if not refused or attempt == SPLIT_ATTEMPTS:
                break
            yield calls._trail(AuditTrailEntry(
                event="degenerate_output", role="detective", from_provider=turn.provider,
                reason=f"the split gave {len(refused)} unusable line"
                f"{'s' if len(refused) != 1 else ''}, asking again: "
                + "; ".join(refused[:3])))
            session.repairs += 1
            problems = "\n".join(f"- {line}" for line in refused[:8])
            prompt = prompt.then(Message("assistant", turn.text[:2000]),
                                 Message("user", fill(load_prompt("split_retry"),
                                                      PROBLEMS=problems)))
        left = left_out([(c.start, c.end) for c in best[0]], pair.answer) \
            if chosen is not None and best[0] and not cut else []
        if left and chosen is not None and sum(
                c.state == "pending" for c in best[0]) < calls.settings.max_claims:
            again = Turn()
            async with aclosing(_split_left_out(calls, left, again)) as events:
                async for event in events:
                    yield event
            merged = _claims_of([chosen, again.text], pair.answer, session.hypothesis_text,
                                calls.settings.max_claims)
            if len(merged[0]) > len(best[0]):  # else the first split stands
                best = merged
        if left:
            best = (listed_left_out(best[0], pair.answer), best[1])
        if cut:
            yield calls._trail(AuditTrailEntry(
                event="document_cut", role="detective",
                reason="the testimony did not fit the detective's window whole: only its "
                "start was taken apart"))
        testimony.claims, testimony.refused = best
        if not testimony.claims:
            testimony.problem = "the split gave no usable claim" + (
                f" ({one_line(testimony.refused[0], 100)})" if testimony.refused else "")
    testimony.split = True
    yield calls._emit(ClaimsSplit(testimony=testimony.model_copy(deep=True)))


LEFT_OUT_MOST = 12
"""Sentences a split left out that are taken apart again, at most (the first ones)."""


def left_out_text(text: str, left: Sequence[Segment]) -> str:
    """What the split is given again for the sentences of `text` it `left` out: those
    sentences (the first `LEFT_OUT_MOST`), after the text's first sentence when that is not
    one of them (it names the subject that "she" and "it" stand for)."""
    first = segments(text)[:1]
    parts = [*(first if first and first[0] not in left else []), *left[:LEFT_OUT_MOST]]
    return " ".join(part.text for part in parts)


def listed_left_out(claims: list[Claim], text: str) -> list[Claim]:
    """`claims` with each sentence of `text` that none of them stands on (`left_out`) listed
    in its place as it is, not examined: nothing the testimony says is dropped silently. (The
    split is asked again for such sentences only while fewer than `max_claims` claims are to
    be examined: past that, their claims would not be examined either.)"""
    left = left_out([(c.start, c.end) for c in claims], text)
    return _in_text_order([*claims, *(Claim(
        number=1, text=as_listed(part.text), start=part.start, end=part.end,
        state="not examined",
        why="the split left this sentence out") for part in left)]) if left else claims


def _in_text_order(claims: list[Claim]) -> list[Claim]:
    """`claims` in the order of the sentences they stand on (one placed nowhere keeps its
    place after the claim before it; ties keep their order), numbered again."""
    placed, at = [], 0
    for n, claim in enumerate(claims):
        at = claim.start if claim.end else at
        placed.append((at, n, claim))
    placed.sort(key=lambda item: (item[0], item[1]))
    return [c.model_copy(update={"number": k}) for k, (_, _, c) in enumerate(placed, start=1)]


async def _split_left_out(calls: SessionCalls, left: list[Segment], turn: Turn
                          ) -> AsyncGenerator[InterrogationEvent, None]:
    """The split made again, as a new conversation, of the sentences the first split `left`
    out (`left_out_text`); its reply goes to `turn` (none when it does not fit: the first
    split stands). Measured on FActScore's development biographies: the 1.5B skipped whole
    sentences and paragraphs (a list of films, an award, the middle of a career) — fact
    coverage 0.611 with one split, 0.705 with the second; asked in the same conversation
    instead ("you left these sentences out"), it mostly wrote its first list again (0.658)."""
    text = calls.session.qa_pairs[0].answer
    try:
        async for event in calls._call(_split_prompt(calls, left_out_text(text, left), []),
                                       "detective", turn, None, fit_for=1, phase="analysis"):
            yield event
    except WindowTooSmall as exc:
        yield calls._trail(AuditTrailEntry(
            event="error", role="detective", reason="the split of the sentences it left out "
            f"does not fit the context window; the first split stands: {exc.last_reason}"))


# ---- 3. each claim examined ----------------------------------------------------------------

def analysis_of(judgement: Judgement | None, claim: str) -> GapAnalysis:
    """A claim round's gap analysis, computed from its judgement: supports → none; silent →
    missing information (or ambiguity, when the judgement leaned neither way); contradicts →
    inconsistency. No model call (the model-written analysis cost 2.2× the answer)."""
    text = one_line(claim, 200)
    if judgement is None or judgement.bearing == "silent":
        unsure = judgement is not None and judgement.p_true is not None
        gap = Gap(category="ambiguity" if unsure else "missing_information",
                  description=f"the answer does not settle: {text}", severity="medium")
        return GapAnalysis(gaps=[gap], completeness_score=30, requires_follow_up=True)
    if judgement.bearing == "contradicts":
        gap = Gap(category="inconsistency",
                  description=f"the answer contradicts the testimony's claim: {text}",
                  severity="high")
        return GapAnalysis(gaps=[gap], completeness_score=100, requires_follow_up=False)
    return GapAnalysis(gaps=[], completeness_score=100, requires_follow_up=False)


async def examine_claim(calls: SessionCalls, claim: Claim,
                        emit: Callable[[InterrogationEvent], None]) -> Claim:
    """Examine `claim` (module docstring, step 3); every event goes to `emit`, each completed
    round is stored as a pair of the session (a checkpoint). Returns the claim with its state;
    the caller stores it."""
    session, settings = calls.session, calls.settings
    limit = session.iteration_limit
    document = session.witness_document
    rounds = [p for p in session.qa_pairs if p.claim == claim.number]  # a resume's
    facts = least_rounds(claim.text)
    claim = claim.model_copy()
    if document is not None and document.text is not None:
        claim.unfound = unfound(claim.text, document.text)
        p_false = unfound_p_false(len(claim.unfound))
        if p_false is not None and not rounds:  # rule 9: the document does not say it
            claim.state, claim.probability_false, claim.deciding = "unsupported", p_false, None
            claim.why = unfound_words(claim.unfound)
            return claim
    if document is None and claim.direct_p_true is None:
        found: list[Reading | str] = []
        testimony = session.testimony
        topic = session.hypothesis_text if testimony is not None and \
            testimony.source == "witness" else None
        async for event in judge_alone(calls, claim.text, found, topic):
            emit(event)
        if isinstance(found[0], Reading):
            claim.direct_p_true = round(found[0].p_true, 4)
    samples = session.testimony.samples if session.testimony is not None else None
    if document is None and samples and claim.sampled_p_true is None:
        readings: list[float] = []
        for sample in samples:
            if sample_problem(sample, session.hypothesis_text) is not None:
                continue  # an empty, echoed or refused answer is no sample to read against
            read: list[Reading | str] = []
            async for event in judge_sample(calls, claim.text, session.hypothesis_text,
                                            sample, read):
                emit(event)
            if isinstance(read[0], Reading):
                readings.append(sampled_p_true(read[0].p_true))
        if readings:
            claim.sampled_p_true = round(sum(readings) / len(readings), 4)
    why: str | None = None
    while len(rounds) < limit:
        if claim_closes(claim.text, rounds, settings.min_rounds, facts):
            break
        if len(rounds) >= 2 and all(p.judgement is not None and p.judgement.why ==
                                    DECLINING_REASON for p in rounds[-2:]):
            why = f"{DECLINING_REASON}, twice: the claim is left open"
            break
        if len(rounds) >= max(2, facts) and adds_nothing(
                rounds[-1].answer, rounds[-1].question, [p.answer for p in rounds[:-1]]):
            why = "the witness said again what it had said: asking on adds nothing"
            break
        number = len(rounds) + 1
        asked = Turn()
        with own_tokens() as used:  # the round's calls, not those of the claims beside it
            try:
                async for event in ask_question(calls, number, asked, claim.text, rounds):
                    emit(event)
            except NoQuestion as exc:
                why = f"no usable question: {one_line(exc.message, 160)}"
                emit(calls._trail(AuditTrailEntry(
                    event="degenerate_output", role="detective",
                    reason=f"claim {claim.number}: questioning closed: {exc.message}")))
                break
            question = bare_question(asked.text)
            answered = Turn()
            told = [] if asked_alone(claim.text, question) else rounds
            request = _witness_request(calls, question, told, min(
                settings.answer_max_tokens, settings.claim_answer_max_tokens))
            async for event in calls._call(request, "witness", answered, None):
                emit(event)
            problem = _answer_problem(answered, question)
            judged: list[Judgement] = []
            async for event in judge(calls, None, question, [answered.text], judged,
                                     named=problem, hypothesis=claim.text,
                                     cut_off=answered.finish_reason == "length"):
                emit(event)
        judgement = judged[0]
        pair = QuestionAnswerPair(
            sequence=len(session.qa_pairs) + 1, question=question, answer=answered.text,
            gap_analysis=analysis_of(judgement, claim.text),
            provider_used=ProvidersUsed(detective=asked.provider, witness=answered.provider),
            answer_cut_off=answered.finish_reason == "length", answer_problem=problem,
            usage=used, judgement=judgement, claim=claim.number)
        # numbered as it is stored: the claims' rounds interleave, each a checkpoint
        session.qa_pairs.append(pair)
        session.current_iteration = len(session.qa_pairs)
        rounds.append(pair)
        emit(calls._emit(PairCompleted(pair=pair, tokens=session.tokens.model_copy(deep=True),
                                       repairs=session.repairs)))
    own = compute([(p.sequence, p.judgement) for p in rounds])
    claim.rounds_p_false = own.probability_false if own.bore and not own.conflict else None
    if claim.unfound is not None:  # rule 10: the rounds and the document's words
        computed = with_words(own, len(claim.unfound))
    else:
        computed = with_alone(own, claim.direct_p_true, claim.sampled_p_true)
    state, p_false = claim_state(computed, document is not None)
    claim.state, claim.probability_false = state, p_false
    claim.deciding = computed.deciding[0] if computed.deciding else (
        rounds[-1].sequence if rounds and state == "unsupported" else None)
    claim.why = why or computed.reason or None
    if state in ("held", "contradicted") and claim.deciding is not None:
        claim.why = None  # its round says why
    if not rounds and why is not None and claim.unfound is None:
        claim.state, claim.probability_false = "unsure", 0.5
    return claim


async def _examine_all(calls: SessionCalls) -> AsyncGenerator[InterrogationEvent, None]:
    session = calls.session
    testimony = session.testimony
    assert testimony is not None
    pending = [c for c in testimony.claims if c.state == "pending"]
    if not pending:
        return
    yield calls._emit(Phase(phase="claims", sequence=len(session.qa_pairs)))
    width = calls.settings.claim_concurrency or await role_slots(
        calls.router, MOST_CLAIM_CONCURRENCY, DEFAULT_CLAIM_CONCURRENCY, cores=True)
    gate = asyncio.Semaphore(max(1, width))

    async def one(claim: Claim, emit: Emit) -> None:
        async with gate:
            done = await examine_claim(calls, claim, emit)
        testimony.put(done)
        emit(calls._emit(ClaimExamined(
            claim=done.model_copy(), tokens=session.tokens.model_copy(deep=True),
            repairs=session.repairs)))

    async with aclosing(_side_by_side([partial(one, claim) for claim in pending])) as events:
        async for event in events:
            yield event


# ---- 4. the result -------------------------------------------------------------------------

def testimony_audit(session: InterrogationSession) -> AuditResult:
    """The audit of a testimony, computed from its claims (the module docstring)."""
    testimony = session.testimony
    assert testimony is not None
    claims = testimony.claims
    pairs = session.qa_pairs
    computed = testimony_verdict(claims)
    contradictions: list[Contradiction] = []
    for claim in claims:
        if claim.state != "contradicted" or claim.deciding is None:
            continue
        pair = pairs[claim.deciding - 1]
        contradictions.append(Contradiction(
            qa_pair_indexes=(0, claim.deciding - 1),
            description=f"the testimony says \"{one_line(claim.text, 160)}\"; asked "
            f"\"{one_line(pair.question, 120)}\", the witness answered "
            f"\"{one_line(pair.answer, 160)}\""))
    gaps = [Gap(category="ambiguity", severity="medium",
                description=f"claim {c.number} unsure: {one_line(c.text, 200)}")
            for c in claims if c.state == "unsure"]
    gaps += [Gap(category="vagueness", severity="low",
                 description=f"claim {c.number} not checkable: {one_line(c.text, 200)}")
             for c in claims if c.state == "not checkable"]
    why = testimony.problem or computed.reason or None
    return AuditResult(
        consistency_score=testimony_score(claims),
        contradictions=contradictions,
        remaining_gaps=gaps,
        summary=testimony_summary(testimony, computed.verdict),
        verdict=computed.verdict,
        probability_false=computed.probability_false,
        deciding_rounds=list(computed.deciding),
        computed=True,
        undetermined_because=why if computed.verdict == "undetermined" else None,
    )
