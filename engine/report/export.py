"""Sessions as markdown (for people) or JSON (loads back into an equal session)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.costs import usage_line
from engine.interrogation.pooling import SIGNAL_NAMES
from engine.models.notes import LlmEntry, NoteEntry
from engine.models.session import InterrogationSession
from engine.models.testimony import Claim
from engine.report.blocks import Block, Calls, session_blocks
from engine.report.claims import MARKS
from engine.report.words import (
    DEMONSTRATION_VERDICT,
    answer_title,
    context_summary,
    fit_line,
    note_title,
    snapshot_line,
    trail_line,
    verdict_line,
)
from engine.text import counted, strip_control

__all__ = ["claims_table", "to_json", "to_markdown"]

MAX_FIT_LINES = 8
"""Trimmed calls a report lists (the newest); the summary line counts them all."""


def to_json(session: InterrogationSession, document: bool = False) -> str:
    """The whole session as JSON, schema version included (model text kept verbatim); the
    witness's document's text only with `document` (its name, size and sha256 always)."""
    if session.witness_document is not None and not document:
        session = session.model_copy(update={"witness_document": session.witness_document
                                              .model_copy(update={"text": None})})
    return session.model_dump_json(indent=2) + "\n"


def document_line(session: InterrogationSession) -> str | None:
    """`"Witness document: report.md · 12,480 characters · sha256 1a2b…"`, or None."""
    held = session.witness_document
    if held is None:
        return None
    return (f"Witness document: {strip_control(held.name)} · {held.size:,} characters · "
            f"sha256 {held.sha256[:16]}…")


def _quote(text: str) -> str:
    """Model text as a markdown block quote, control characters removed."""
    clean = strip_control(text).strip() or "(no answer)"
    return "\n".join(f"> {line}" if line else ">" for line in clean.splitlines())


def _markdown(block: Block) -> list[str]:
    """One block of `session_blocks` as markdown lines."""
    title, text = strip_control(block.title).strip(), block.text
    match block.kind:
        case "heading":
            return ["", f"## {title}"]
        case "question" | "answer":
            return ["", f"**{title}**", "", _quote(text)]
        case "analysis" | "judgement":
            first, *rest = text.splitlines() or [""]
            return ["", f"**{title}:** {strip_control(first)}",
                    *(["", *(strip_control(line) for line in rest)] if rest else [])]
        case "audit":
            return ["", *(f"- {strip_control(line)}" for line in text.splitlines()), ""]
        case "summary":
            return [f"**{title}**", "", strip_control(text).strip()]
        case "reasoning":
            return ["", f"_{title}_", "", _quote(text)]
        case "claims":
            return ["", f"**{title}**", "",
                    *(f"- {strip_control(line)}" for line in text.splitlines())]
        case "testimony":
            return ["", f"**{title}**", "", _quote(text)]
        case _:  # a mark: an answer cut off, an unusable answer
            return ["", f"_({strip_control(text)})_"]


def _cell(text: str) -> str:
    return strip_control(text).replace("|", "\\|").replace("\n", " ").strip()


def claims_table(claims: Sequence[Claim]) -> list[str]:
    """A testimony's claims as a markdown table: number, state (its symbol too), P(false),
    the deciding round, each signal's P(true) (the signals any claim was read by, in reading
    order), the words its document lacks (with a document), the claim."""
    signals = [name for name in SIGNAL_NAMES if any(name in c.readings for c in claims)]
    document = any(c.unfound is not None for c in claims)
    extra = " not in the document |" if document else ""
    heads = "".join(f" {name} p(true) |" for name in signals)
    lines = [f"| # | state | p(false) | round |{heads}{extra} claim |",
             "|---|---|---|---|" + "---|" * len(signals) + ("---|" if document else "")
             + "---|"]

    def cell(p: float | None) -> str:
        return "" if p is None else f"{p:.2f}"

    for claim in claims:
        words = f" {_cell(', '.join(claim.unfound or ()))} |" if document else ""
        read = "".join(f" {cell(claim.reading(name))} |" for name in signals)
        lines.append(f"| {claim.number} | {MARKS[claim.state]} {claim.state} | "
                     f"{cell(claim.probability_false)} | {claim.deciding or ''} |{read}{words} "
                     f"{_cell(claim.text)} |")
    return lines


def to_markdown(
    session: InterrogationSession,
    status: str | None = None,
    notes: list[tuple[NoteEntry, str]] | None = None,
    answers: list[tuple[LlmEntry, str]] | None = None,
    reasoning: Calls | None = None,
    document: bool = False,
) -> str:
    """A readable report: the notes, every question and answer, gaps per round, the audit,
    the oracle answers, the trail. `status` overrides the stored one for display
    (`interrupted`); `notes` and `answers` are the case file's texts (entries alone when not
    given); `reasoning` (`engine.report.blocks.reasoning_by_call`) puts each call's reasoning
    before its reply; with `document`, the witness's document's text too."""
    hypothesis = session.hypothesis
    heading = (f"# Interrogation: {strip_control(hypothesis.text).strip()}" if hypothesis
               else f"# Case: {strip_control(session.name).strip()}")
    out = [heading, ""]
    if session.title and hypothesis:
        out.append(f"- Case: {strip_control(session.title).strip()}")
    out += [
        f"- Session: `{session.id}`",
        f"- Status: {status or session.status}",
        f"- Started: {session.start_time.isoformat(timespec='seconds')}",
    ]
    if session.end_time:
        out.append(f"- Ended: {session.end_time.isoformat(timespec='seconds')}")
    testimony = session.testimony
    if hypothesis and testimony is not None:
        examined = sum(1 for claim in testimony.claims if claim.examined)
        out.append(f"- Testimony: {len(testimony.claims)} claims, {examined} examined, in "
                   f"{counted(len(session.qa_pairs), 'round')} (round 1 the testimony; at "
                   f"most {session.iteration_limit} a claim)")
    elif hypothesis:
        out.append(f"- Rounds: {len(session.qa_pairs)} of at most {session.iteration_limit}")
        out.append(f"- Usage: {usage_line(session.tokens)}")
    else:
        out.append("- No interrogation yet")
    out.append(f"- Notes: {len(session.notes)} · oracle answers: {len(session.llm_entries)}")
    held = document_line(session)
    if held is not None:
        out.append(f"- {held}")
        if document and session.witness_document and session.witness_document.text:
            out += ["", "## The witness's document", "", _quote(session.witness_document.text)]
    note_texts: list[tuple[NoteEntry, str | None]] = (
        [(e, None) for e in session.notes] if notes is None else list(notes))
    if note_texts:
        out += ["", "## Notes"]
        for note, content in note_texts:
            out += ["", f"### {note_title(note)}", ""]
            if content is not None:
                out.append(_quote(content))
    if session.audit_result:
        verdict = verdict_line(session.audit_result)
        if verdict:
            out.append(f"- {verdict[:1].upper()}{verdict[1:]}")
        out.append(f"- Consistency {session.audit_result.consistency_score}/100")
    if session.error:
        out.append(f"- Error: {strip_control(session.error)}")
    if session.demonstration or (session.audit_result and session.audit_result.demonstration):
        out.append(f"- Detective: a demonstration model; {DEMONSTRATION_VERDICT}")
    for block in session_blocks(session, reasoning):  # the rounds and the audit, as shown
        out += _markdown(block)
    if session.testimony is not None and session.testimony.claims:
        out += ["", "## Claims", "", *claims_table(session.testimony.claims)]
    answer_texts: list[tuple[LlmEntry, str | None]] = (
        [(e, None) for e in session.llm_entries] if answers is None else list(answers))
    if answer_texts:
        out += ["", "## Oracle answers"]
        for answer, content in answer_texts:
            out += ["", f"### {answer_title(answer)}", "", f"- {snapshot_line(answer)}"]
            if content is not None:
                out += ["", _quote(content)]
    rounds = [pair for pair in session.qa_pairs if pair.usage]
    if rounds:
        out += ["", "## Costs", ""]
        out += [f"- Round {pair.sequence}{' (the testimony)' if pair.testimony else ''}: "
                f"{usage_line(pair.usage)}" for pair in rounds if pair.usage]
        out.append("- Prices per million tokens from `[prices]` in the config; a model on this "
                   "machine costs nothing")
    if session.prompts:
        out += ["", "## Prompts", ""]
        out += [f"- {name}: {strip_control(use)}" for name, use in session.prompts.items()]
    summary = context_summary(session.context_fits)
    if summary:
        out += ["", "## Context", "", summary]
        trimmed = [fit for fit in session.context_fits if fit.trimmed]
        if trimmed:
            out.append("")
            if len(trimmed) > MAX_FIT_LINES:
                out.append(f"- {len(trimmed) - MAX_FIT_LINES} earlier trimmed calls, then:")
            out += [f"- {fit_line(fit)}" for fit in trimmed[-MAX_FIT_LINES:]]
    if session.audit_trail:
        out += ["", "## Audit trail", ""]
        for entry in session.audit_trail:
            out.append(f"- {entry.timestamp.isoformat(timespec='seconds')} {trail_line(entry)}")
    return "\n".join(out) + "\n"
