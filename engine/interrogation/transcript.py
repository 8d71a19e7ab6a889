"""What the models are shown: the prompts filled in, the transcript, the reply schemas.

Prompts are files in `prompts/` (editable without touching code); `{{NAME}}` placeholders are
filled here. The witness sees only the questions and its own answers, never an analysis.

Every transcript a model is shown is a `Prompt` fitted to the window of the provider about to
receive it (`engine.context`): what is stored is never trimmed, only what is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from engine.context.budget import Prompt
from engine.context.fit import (
    DoesNotFit,
    Plan,
    RoundCost,
    Trim,
    plan_all_rounds,
    plan_rounds,
    shorten,
    span,
)
from engine.context.tokens import MESSAGE_OVERHEAD
from engine.models.session import ANSWER_CUT_OFF, QuestionAnswerPair, WitnessBrief
from engine.prompts import fill, load_prompt
from engine.providers import Message, StreamRequest
from engine.text import one_line

__all__ = [
    "audit_schema",
    "cut_to_fit",
    "digest",
    "gap_schema",
    "protocol_note",
    "transcript",
    "transcript_prompt",
    "witness_instructions",
    "witness_messages",
    "witness_opening",
    "witness_prompt",
]

_CATEGORIES = ["missing_information", "ambiguity", "inconsistency", "vagueness"]


def gap_schema(max_gaps: int, max_tokens: int) -> dict[str, Any]:
    """The JSON schema a gap analysis must satisfy; descriptions are bounded so that
    `max_gaps` of them fit in `max_tokens` (about 3 characters a token)."""
    length = max(40, min(400, (max_tokens - 60) * 3 // max_gaps - 60))
    gap = {
        "type": "object",
        "properties": {
            "category": {"enum": _CATEGORIES},
            "description": {"type": "string", "minLength": 1, "maxLength": length},
            "severity": {"enum": ["low", "medium", "high"]},
        },
        "required": ["category", "description", "severity"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "gaps": {"type": "array", "items": gap, "maxItems": max_gaps},
            "completeness_score": {"type": "integer", "minimum": 0, "maximum": 100},
            "requires_follow_up": {"type": "boolean"},
        },
        "required": ["gaps", "completeness_score", "requires_follow_up"],
        "additionalProperties": False,
    }


def audit_schema(pairs: int, max_tokens: int, sampled: bool = False) -> dict[str, Any]:
    """The JSON schema of the audit reply (the narrative: the verdict is computed from the
    rounds' judgements, `engine.interrogation.verdict`); question numbers run from 1 to
    `pairs`. `verdict` is the auditor's own reading, shown beside the computed one where they
    differ, never used.

    Lengths follow the token budget (about 3 characters a token), so a model that fills every
    field still finishes its JSON within `max_tokens`.
    """
    number = {"type": "integer", "minimum": 1, "maximum": max(pairs, 1)}
    contradiction = {
        "type": "object",
        "properties": {
            "questions": {"type": "array", "items": number, "minItems": 2, "maxItems": 2},
            "description": {"type": "string", "minLength": 1, "maxLength": 300},
        },
        "required": ["questions", "description"],
        "additionalProperties": False,
    }
    # two rounds a contradiction; with `sampled` (the consistency protocol) also one round's
    # own answers
    couples = pairs * (pairs + 1) // 2 if sampled else pairs * (pairs - 1) // 2
    most = min(10, couples, max(0, (max_tokens - 140) // 200))
    summary = max(100, min(8000, (max_tokens - 60 - most * 120) * 3))
    return {
        "type": "object",
        "properties": {
            "contradictions": {"type": "array", "items": contradiction, "maxItems": most},
            "summary": {"type": "string", "minLength": 1, "maxLength": summary},
            "verdict": {"enum": ["true", "false", "undetermined"]},
        },
        "required": ["contradictions", "summary", "verdict"],
        "additionalProperties": False,
    }


def _round_lines(
    pair: QuestionAnswerPair, analyses: bool, cap: int | None = None, qcap: int | None = None
) -> str:
    marks = [ANSWER_CUT_OFF] if pair.answer_cut_off else []
    if pair.answer_mark:  # an empty one reads "(no answer)"
        marks.append(pair.answer_mark)
    lines = [f"Q{pair.sequence}: {shorten(pair.question, qcap)}"]
    answers = [pair.answer, *pair.samples]
    for number, answer in enumerate(answers, start=1):
        label = f"A{pair.sequence}" + (f" ({number} of {len(answers)})" if pair.samples else "")
        lines.append(f"{label}: {shorten(answer, cap) or '(no answer)'}"
                     + ("".join(f" [{mark}]" for mark in marks) if number == 1 else ""))
    if analyses:  # a round shortened to fit has its gaps shortened as a digest's are
        gaps = DIGEST_GAP if cap is not None or qcap is not None else None
        lines.append(f"Analysis of A{pair.sequence}: {_analysis_line(pair, gaps)}")
    return "\n".join(lines)


def _analysis_line(pair: QuestionAnswerPair, gap_chars: int | None = None) -> str:
    analysis = getattr(pair, "gap_analysis", None)  # a round being analysed has none yet
    if analysis is None:
        return "not analysed yet"
    gaps = "; ".join(
        f"[{g.severity}] {g.category}: {one_line(g.description, gap_chars)}" for g in analysis.gaps
    )
    return f"completeness {analysis.completeness_score}/100" + (
        f"; gaps: {gaps}" if gaps else "; no gaps"
    )


def digest(pair: QuestionAnswerPair) -> str:
    """Round `pair` in one line, for the detective: the question, the completeness, the gaps.
    Built by code, never by a model."""
    return (f"Q{pair.sequence} (digest): {one_line(pair.question, DIGEST_QUESTION)} | "
            + _analysis_line(pair, DIGEST_GAP))


def _witness_digest(pair: QuestionAnswerPair) -> str:
    return (f"Q{pair.sequence}: {one_line(pair.question, DIGEST_QUESTION)} | you answered: "
            + one_line(pair.answer or "(no answer)", DIGEST_ANSWER))


DIGEST_QUESTION = 160
DIGEST_GAP = 90
DIGEST_ANSWER = 120


def _left_out(numbers: Iterable[int]) -> str:
    return f"(rounds {span(list(numbers))} are left out here, to fit the context window)"


def _omitted_cost(count: Callable[[str], int]) -> Callable[[int], int]:
    return lambda k: count(_left_out(range(2, 2 + 2 * k, 2))) + 1


def transcript(pairs: Iterable[QuestionAnswerPair], analyses: bool) -> str:
    """Every round whole (the stored session's full text)."""
    text = "\n\n".join(_round_lines(pair, analyses) for pair in pairs)
    return text or "(no questions yet)"


def protocol_note(protocol: str, samples: int) -> str:
    """What the detective is told before a transcript of the `consistency` protocol (the
    answers side by side, and what their agreement means); empty for `cross-exam`."""
    if protocol != "consistency":
        return ""
    return fill(load_prompt("consistency_note"), SAMPLES=samples).strip() + "\n\n"


def _costs(
    pairs: Sequence[QuestionAnswerPair], analyses: bool, count: Callable[[str], int]
) -> list[RoundCost[QuestionAnswerPair]]:
    return [
        RoundCost(
            item=pair, number=pair.sequence, question=pair.question, answer=pair.answer,
            whole=partial(_round_lines, pair, analyses), digest=partial(digest, pair),
            count=count, extra=1,  # the blank line between rounds
        )
        for pair in pairs
    ]


def _render(plan: Plan[QuestionAnswerPair], analyses: bool) -> str:
    parts: list[str] = []
    left_out: list[int] = []
    for cost, mode, cap, qcap in plan.rounds:
        if mode == "omitted":
            left_out.append(cost.number)
            continue
        if left_out:
            parts.append(_left_out(left_out))
            left_out = []
        pair = cost.item
        parts.append(digest(pair) if mode == "digest" else _round_lines(pair, analyses, cap, qcap))
    if left_out:
        parts.append(_left_out(left_out))
    return "\n\n".join(parts) or "(no questions yet)"


def transcript_prompt(
    request: StreamRequest,
    pairs: Sequence[QuestionAnswerPair],
    frame: Callable[[str], list[Message]],
    *,
    analyses: bool,
    every_round: bool = False,
    reshape: Callable[[int], dict[str, Any]] | None = None,
) -> Prompt:
    """A prompt whose messages are `frame(transcript)`, the transcript fitted to the limit:
    the first and newest rounds whole and the middle digested, or (`every_round`, the audit)
    every round with its answer shortened evenly. The frame (the hypothesis, the instructions)
    is always sent whole."""

    def compose(limit: int, count: Callable[[str], int]) -> tuple[list[Message], Trim]:
        fixed = sum(count(m.content) + MESSAGE_OVERHEAD for m in frame(""))
        rounds = _costs(pairs, analyses, count)
        try:
            if every_round:
                plan = plan_all_rounds(rounds, limit - fixed)
            else:
                plan = plan_rounds(rounds, limit - fixed, _omitted_cost(count))
        except DoesNotFit as exc:  # said of the whole prompt: the frame too
            raise DoesNotFit(exc.needed + fixed, limit) from None
        return frame(_render(plan, analyses)), plan.trim

    return Prompt(request=request, compose=compose, reshape=reshape)


UNANSWERED = "(An earlier question you gave no answer to: {question})"
"""How a question the witness left unanswered is carried into its next turn."""


def _exchanges(rounds: Iterable[tuple[str, str]], question: str) -> list[Message]:
    """User and assistant turns for (question, answer) rounds, then `question`. A round with no
    answer gets no assistant turn (no words are put in the model's mouth): its question is
    carried into the next user turn, said to be unanswered."""
    messages: list[Message] = []
    carried: list[str] = []
    for asked, answer in rounds:
        if not answer.strip():
            carried.append(UNANSWERED.format(question=asked))
            continue
        messages += [Message("user", "\n\n".join([*carried, asked])),
                     Message("assistant", answer)]
        carried = []
    return [*messages, Message("user", "\n\n".join([*carried, question]))]


def witness_messages(pairs: Iterable[QuestionAnswerPair], question: str,
                     opening: Sequence[Message] = ()) -> list[Message]:
    """The witness's side of the conversation: `opening` (a planted first exchange), the
    questions and its own answers, then the new question. Never an analysis."""
    return [*opening, *_exchanges(((pair.question, pair.answer) for pair in pairs), question)]


def witness_instructions(brief: WitnessBrief | None) -> str:
    """The witness's instructions as written, the claim left out (an answer that restates the
    claim it defends is testimony, not an echo)."""
    return load_prompt("witness_defend" if brief is not None and brief.mode == "defend"
                       else "witness")


def witness_opening(brief: WitnessBrief | None) -> tuple[str, list[Message]]:
    """The witness's system prompt and the turns before the first question, for a session
    with `brief` (an evaluation's claim) or without. `planted`: the neutral prompt, and the
    claim as the witness's own answer to its question; `defend`: told it asserted the claim;
    `open`: nothing but the neutral prompt.
    The claim is data: filled in once, never scanned again for placeholders."""
    if brief is None or brief.mode in ("open", "document"):
        return load_prompt("witness"), []
    if brief.mode == "defend":
        return fill(load_prompt("witness_defend"), CLAIM=brief.claim), []
    question = brief.question or load_prompt("witness_planted_question").strip()
    answer = brief.answer or brief.claim
    return load_prompt("witness"), [Message("user", question), Message("assistant", answer)]


DOCUMENT_CUT = "\n[… the rest of the document did not fit]"
"""What ends a witness's document cut to fit its window."""


def cut_to_fit(text: str, room: int, count: Callable[[str], int], tail: str,
               frame: Callable[[str], str] = lambda text: text) -> tuple[str, bool]:
    """`frame(text)` within `room` tokens: whole, or `frame` of the text's start followed by
    `tail` (the estimate, then 10 % less a try, until it fits); and whether it was cut. What
    a witness's document and a testimony too long for the window are fitted by."""
    block = frame(text)
    needed = count(block)
    if needed <= room:
        return block, False
    keep = int(len(text) * max(0, room) / max(needed, 1))
    for _ in range(12):
        block = frame(text[:keep] + tail)
        if count(block) <= room or keep == 0:
            break
        keep = keep * 9 // 10
    return block, True


def fit_document(document: str, room: int, count: Callable[[str], int]) -> tuple[str, bool]:
    """The witness's document block (`prompts/witness_document.md`, the text filled in once)
    within `room` tokens: whole, or its start with `DOCUMENT_CUT`; and whether it was cut."""
    template = load_prompt("witness_document")
    return cut_to_fit(document, room, count, DOCUMENT_CUT,
                      lambda text: fill(template, DOCUMENT=text))


def witness_prompt(
    request: StreamRequest, system: str, pairs: Sequence[QuestionAnswerPair], question: str,
    opening: Sequence[Message] = (), document: str | None = None,
    cut: list[bool] | None = None,
) -> Prompt:
    """The witness's conversation fitted to the limit: `opening` and its first and newest
    exchanges whole, the ones between recalled in one line each in the system message (still
    no analysis). With `document`, the witness holds it in its system prompt, given at most
    three quarters of the room the rounds leave (its start when it does not fit: `cut` gets
    True)."""

    def compose(limit: int, count: Callable[[str], int]) -> tuple[list[Message], Trim]:
        recall = "\n\nEarlier in this interview (shortened to fit the context window):\n"
        fixed = count(system) + count(recall) + count(question) + 3 * MESSAGE_OVERHEAD
        fixed += sum(count(m.content) + MESSAGE_OVERHEAD for m in opening)
        head = system
        if document is not None:
            room = limit - fixed
            rounds_need = sum(count(_exchange(p, None, None)) + 2 * MESSAGE_OVERHEAD
                              for p in pairs)
            block, was_cut = fit_document(document, room - min(rounds_need, room // 4), count)
            head = f"{system.rstrip()}\n\n{block}"
            fixed += count(block)
            if cut is not None and was_cut:
                cut.append(True)
        rounds = [
            RoundCost(
                item=pair, number=pair.sequence, question=pair.question, answer=pair.answer,
                whole=partial(_exchange, pair), digest=partial(_witness_digest, pair),
                count=count, extra=2 * MESSAGE_OVERHEAD,
            )
            for pair in pairs
        ]
        try:
            plan = plan_rounds(rounds, limit - fixed, _omitted_cost(count))
        except DoesNotFit as exc:  # said of the whole prompt: its instructions too
            raise DoesNotFit(exc.needed + fixed, limit) from None
        recalled: list[str] = []
        left_out: list[int] = []
        whole: list[tuple[str, str]] = []
        for cost, mode, cap, qcap in plan.rounds:
            pair = cost.item
            if mode == "whole":
                whole.append((shorten(pair.question, qcap), shorten(pair.answer, cap)))
            elif mode == "digest":
                recalled.append(_witness_digest(pair))
            else:
                left_out.append(pair.sequence)
        if left_out:
            recalled.append(_left_out(left_out))
        head += recall + "\n".join(recalled) if recalled else ""
        return [Message("system", head), *opening, *_exchanges(whole, question)], plan.trim

    return Prompt(request=request, compose=compose)


def _exchange(pair: QuestionAnswerPair, cap: int | None, qcap: int | None) -> str:
    return f"{shorten(pair.question, qcap)}\n{shorten(pair.answer, cap) or '(no answer)'}"
