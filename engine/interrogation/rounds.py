"""One round of questioning a claim, written once for a session's own hypothesis and for a
testimony's claims (issue 72, part 2: questioning that catches inventions).

    pair = await one_round(caller, asking, rounds, sequence)   # a QuestionAnswerPair, or
                                                               # `Closed`: why none was asked

The detective writes one question about the claim (`asking.question`, held to naming the
claim's subject: `subject.subject_problem`); the witness answers it `samples` times, each in
a fresh conversation (told nothing of the claim's earlier rounds; holding its document or its
planted first answer, when the session gives it one) at the sampling temperature, each draw
with a seed of its own where the server honours one; each answer is judged against the claim
alone (`judgement.judge`). A model asked again at temperature 0 repeats what it made up;
sampled, it varies it (Farquhar et al., Nature 2024): the round's reading is the spread of
those judgements, `round_p_true` — the mean of the answers' P(true), an answer silent on the
claim (no answer, "I don't know", a refusal) counting 0.5, unless the answers disagree (one
leans for the claim, P(true) ≥ 0.6, another against it, ≤ 0.4): then 0.5, silent, the
disagreement named. Answers that agree with each other and with the claim hold it; answers
that vary, or deny it, do not. A session's own hypothesis streams its round (the first answer as the
answer, the others as `AnswerSampled`) and has its gap analysis written by the detective;
a testimony's claim, examined beside the others, has it computed (`analysis_of`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from engine.context.budget import Prompt
from engine.interrogation.asking import Asked, analyse, question
from engine.interrogation.calls import Caller, Said, own_tokens
from engine.interrogation.checks import answer_problem
from engine.interrogation.judgement import judge
from engine.interrogation.questions import NoQuestion
from engine.interrogation.subject import fact_problem, subject_problem
from engine.interrogation.transcript import (
    witness_instructions,
    witness_opening,
    witness_prompt,
)
from engine.interrogation.verdict import LEANS, bearing_of, compute
from engine.models.events import (
    AnswerCutOff,
    AnswerDrawn,
    AnswerSampled,
    AnswerUnusable,
    JudgementReady,
    PairCompleted,
    Phase,
    QuestionDelta,
)
from engine.models.judgement import Judgement
from engine.models.session import (
    Drawing,
    Gap,
    GapAnalysis,
    ProvidersUsed,
    QuestionAnswerPair,
)
from engine.models.trail import AuditTrailEntry
from engine.providers import Message
from engine.report.words import document_cut
from engine.text import one_line

__all__ = ["NO_QUESTION", "Asking", "Closed", "analysis_of", "no_question", "one_round",
           "round_p_true", "witness_request"]

SILENT = 0.5
"""What an answer silent on the claim counts for in the round's reading."""


@dataclass(frozen=True, slots=True)
class Asking:
    """How a claim's rounds are put: the claim, whether it is the session's own hypothesis
    (streamed, analysed by the detective), its number in the testimony (None for the
    hypothesis), the answers drawn to each question and at what temperature, and the names
    its testimony gives its subject."""

    claim: str
    single: bool
    number: int | None
    samples: int
    temperature: float | None
    names: tuple[tuple[str, str], ...] = ()
    analysed: bool = True
    """A single hypothesis's rounds have their gap analysis written by the detective; False:
    computed from the judgement (an evaluation's claim of a testimony, examined as a
    testimony examines it)."""
    judged: bool = True
    """False: a hypothesis that states no claim (a session stored before testimonies): its
    rounds are questioned for their gaps, not judged."""
    conversation: bool = False
    """The witness is shown the earlier rounds (a session stored before testimonies goes on
    as it began); else each answer is a fresh conversation."""


@dataclass(frozen=True, slots=True)
class Closed:
    """No round was asked: why (a rule of ours, never a failure)."""

    why: str


NO_QUESTION = "no usable question: "
"""How a claim's rounds say that no usable question came (`Closed`), before the cause."""


def no_question(why: str | None) -> str | None:
    """The cause, when `why` says no usable question came; else None."""
    return why[len(NO_QUESTION):] if why and why.startswith(NO_QUESTION) else None


def round_p_true(values: Sequence[float | None]) -> float | None:
    """A round's reading from its answers' P(true) (None: an answer silent on the claim):
    their mean, silent ones at 0.5 — or 0.5 when they disagree (one for the claim, another
    against it: the witness varies what it says); None when every answer was silent."""
    if not values or all(v is None for v in values):
        return None
    if disagree(values):
        return SILENT
    return sum(SILENT if v is None else v for v in values) / len(values)


def disagree(values: Sequence[float | None]) -> bool:
    """Whether one answer leans for the claim and another against it."""
    known = [v for v in values if v is not None]
    return bool(known) and max(known) >= LEANS and min(known) <= 1 - LEANS


def witness_request(caller: Caller, question: str, max_tokens: int,
                    rounds: Sequence[QuestionAnswerPair] = (), brief: bool = False
                    ) -> tuple[Prompt, list[bool]]:
    """The witness asked `question` in a conversation of its own: the neutral prompt (or, for
    the session's own hypothesis with `brief`, the evaluation's planted opening or defence),
    its document when the session gives it one, and only `rounds` before it (the testimony
    asks with none). The list gets True when the document was cut to fit."""
    session = caller.session
    system, opening = witness_opening(session.witness_brief if brief else None)
    document = session.witness_document
    cut: list[bool] = []
    messages = [Message("system", system), *opening]
    prompt = witness_prompt(caller.request([*messages, Message("user", question)], max_tokens),
                            system, list(rounds), question, opening,
                            document.text if document is not None else None, cut)
    return prompt, cut


def _seed(caller: Caller, claim: str, sequence: int, draw: int) -> int:
    """A draw's seed: the same session, claim, round and draw always draw alike (an
    evaluation repeated is repeated), different draws differ."""
    key = f"{caller.session.id}:{claim}:{sequence}:{draw}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big") & 0x7FFFFFFF


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


async def one_round(caller: Caller, asking: Asking, rounds: list[QuestionAnswerPair],
                    sequence: int) -> QuestionAnswerPair | Closed:
    """Round `sequence` of `asking.claim` after its own `rounds` (the module docstring): the
    pair, stored and checkpointed, or why none was asked."""
    session, settings = caller.session, caller.settings
    single = asking.single
    with own_tokens() as used:  # the round's calls, not those of the claims beside it
        if single:
            caller.emit(Phase(phase="question", sequence=sequence))
        key = str(asking.number or 0)
        under_way = session.drawing.get(key)
        if under_way is not None and under_way.round != len(rounds) + 1:
            under_way = None  # a round of another time (its pair stored after all)
        if under_way is not None:  # a resume: its question and the answers drawn so far
            asked = Asked(under_way.question, under_way.asked_by)
            if single:
                caller.emit(QuestionDelta(sequence=sequence, text=asked.text))
        else:
            chain = caller.chain("detective")
            # a demonstration model only shows the loop: held to naming the subject, it
            # would mostly close the questioning instead
            answer = session.witness_brief.answer if single and session.witness_brief \
                else None
            named = None if chain and chain[0].is_demonstration else (
                lambda text: subject_problem(text, asking.claim, asking.names, answer)
                or fact_problem(text, asking.claim, asking.names))
            try:
                asked = await question(caller, sequence, asking.claim, rounds,
                                       streamed=single, extra=named)
            except NoQuestion as exc:
                where = f"claim {asking.number}: " if asking.number is not None else ""
                caller.trail(AuditTrailEntry(
                    event="degenerate_output", role="detective",
                    reason=f"{where}questioning closed: {exc.message}"))
                return Closed(NO_QUESTION + exc.message)
        if single:
            caller.emit(Phase(phase="answer", sequence=sequence))
        cap = settings.answer_max_tokens if single else min(
            settings.answer_max_tokens, settings.claim_answer_max_tokens)
        prompt, cut = witness_request(caller, asked.text, cap,
                                      rounds if asking.conversation else (), brief=single)
        drawing = under_way or Drawing(round=len(rounds) + 1, question=asked.text,
                                       asked_by=asked.provider)
        answers = [Said(text=text, provider=provider, finish_reason=reason)
                   for text, provider, reason in zip(drawing.answers, drawing.providers,
                                                     drawing.finish_reasons, strict=False)]
        for draw in range(len(answers) + 1, asking.samples + 1):
            if asking.temperature is not None:
                drawn = caller.sampled(prompt, _seed(caller, asking.claim, sequence, draw),
                                       asking.temperature)
            else:
                drawn = prompt
            said = await caller.call(drawn, "witness",
                                     streamed=sequence if single and draw == 1 else None,
                                     fit_for=sequence)
            answers.append(said)
            if single and draw > 1:
                caller.emit(AnswerSampled(sequence=sequence, number=draw, of=asking.samples,
                                          provider=said.provider, text=said.text))
            if asking.samples > 1:  # each draw a checkpoint: a kill keeps what was drawn
                drawing = drawing.model_copy(update={
                    "answers": [*drawing.answers, said.text],
                    "providers": [*drawing.providers, said.provider],
                    "finish_reasons": [*drawing.finish_reasons, said.finish_reason]})
                session.drawing[key] = drawing
                caller.emit(AnswerDrawn(claim=asking.number, drawing=drawing))
        if cut and not any(e.event == "document_cut" for e in session.audit_trail):
            document = session.witness_document
            assert document is not None
            caller.trail(AuditTrailEntry(event="document_cut", role="witness",
                                         reason=document_cut(document.name)))
        first = answers[0]
        if single and first.cut_off:
            caller.emit(AnswerCutOff(sequence=sequence, provider=first.provider))
        brief = session.witness_brief if single else None
        problem = answer_problem(first.text, asked.text, first.finish_reason, first.reasoning,
                                 [witness_instructions(brief)])
        if single and problem is not None:  # testimony all the same: kept, named, pressed on
            caller.emit(AnswerUnusable(sequence=sequence, provider=first.provider,
                                       problem=problem))
        judgement: Judgement | None = None
        if asking.judged:
            if single:
                caller.emit(Phase(phase="judgement", sequence=sequence))
            judgement = _round_judgement([
                await judge(caller, sequence if single else None, asked.text, [said.text],
                            named=problem if n == 0 else None,
                            hypothesis=None if single and asking.analysed
                            else asking.claim, cut_off=said.cut_off)
                for n, said in enumerate(answers)])
        earlier = [p for p in session.qa_pairs if single]
        if single and judgement is not None:
            so_far = compute([*((p.sequence, p.judgement) for p in rounds),
                              (sequence, judgement)])
            caller.emit(JudgementReady(sequence=sequence, judgement=judgement,
                                       verdict=so_far.verdict,
                                       probability_false=so_far.probability_false,
                                       demonstration=_demonstration(caller)))
        if single and asking.analysed:
            caller.emit(Phase(phase="analysis", sequence=sequence))
            pending = QuestionAnswerPair.model_construct(
                sequence=sequence, question=asked.text, answer=first.text,
                answer_cut_off=first.cut_off, answer_problem=problem,
                samples=[a.text for a in answers[1:]])
            analysis = await analyse(caller, pending, sequence, earlier)
        else:
            analysis = analysis_of(judgement, asking.claim)
    pair = QuestionAnswerPair(
        sequence=len(session.qa_pairs) + 1, question=asked.text, answer=first.text,
        gap_analysis=analysis,
        provider_used=ProvidersUsed(detective=asked.provider, witness=first.provider),
        answer_cut_off=first.cut_off, answer_problem=problem, usage=used,
        samples=[a.text for a in answers[1:]], judgement=judgement, claim=asking.number)
    # numbered as it is stored: a testimony's claims' rounds interleave, each a checkpoint
    session.drawing.pop(str(asking.number or 0), None)
    session.qa_pairs.append(pair)
    session.current_iteration = len(session.qa_pairs)
    caller.emit(PairCompleted(pair=pair, tokens=session.tokens.model_copy(deep=True),
                              repairs=session.repairs))
    return pair


def _round_judgement(judged: Sequence[Judgement]) -> Judgement:
    """The round's judgement from each answer's (`round_p_true`): its reading, with each
    answer's P(true) kept (`samples`); silent when every answer was."""
    if len(judged) == 1:
        return judged[0]
    values = [j.p_true if j.bearing != "silent" or j.p_true is not None else None
              for j in judged]
    p_true = round_p_true(values)
    if p_true is None:
        return Judgement(bearing="silent", why=judged[0].why or "no answer",
                         samples=[])
    bearing = bearing_of(p_true)
    first = next(j for j in judged if j.p_true is not None)
    spread = [v for v in values if v is not None]
    why = next((j.why for j in judged if j.why and j.bearing != "silent"), None)
    if disagree(values):
        why = (f"the sampled answers disagree (spread {max(spread) - min(spread):.2f}): the "
               "witness is unsure")
    elif bearing == "silent":
        why = "unsure: the answers lean neither way"
    return Judgement(bearing=bearing, p_true=round(p_true, 4), source=first.source,
                     word=first.word, why=why,
                     samples=[round(SILENT if v is None else v, 4) for v in values])


def _demonstration(caller: Caller) -> bool:
    """Whether a demonstration model speaks for the detective in this session."""
    return caller.session.demonstration or caller.is_demonstration(
        caller.role_label("detective"))
