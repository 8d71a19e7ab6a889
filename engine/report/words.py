"""The words: how a round, an analysis, a contradiction and a trail entry read.

The CLI's transcript, the Live view and the markdown export all take their lines from here, so
a wording changes in one place. Every function returns text safe for a terminal (model text
passes through `strip_control`); the front ends add only their layout (indent, markdown,
colour).
"""

from __future__ import annotations

from functools import singledispatch
from typing import TYPE_CHECKING

from engine.config.shipped import CAPABLE_MODEL
from engine.context.fit import span
from engine.interrogation.checks import NO_ANSWER
from engine.models.events import (
    Advice,
    AnswerCutOff,
    AnswerUnusable,
    ContextFitted,
    InterrogationEvent,
    TrailAdded,
)
from engine.models.judgement import Judgement
from engine.models.notes import LlmEntry, NoteEntry
from engine.models.session import ANSWER_CUT_OFF, AuditResult, Contradiction, GapAnalysis
from engine.models.trail import AuditTrailEntry, ContextFit
from engine.providers import FILTERED
from engine.report.cells import CAPABLE_MODEL_HINT, demonstration_note
from engine.text import one_line, strip_control

if TYPE_CHECKING:
    from engine.cache.models import CheckResult, Explanation

__all__ = [
    "ANSWER_CUT_OFF",
    "CAPABLE_MODEL_HINT",
    "NO_ANSWER",
    "NOTHING_ASKED_REASON",
    "answer_title",
    "check_line",
    "explanation_lines",
    "completeness",
    "context_summary",
    "contradiction",
    "cut_off_line",
    "demonstration_note",
    "fit_line",
    "follow_up",
    "in_transcript",
    "no_testimony",
    "no_usable_question",
    "note",
    "note_title",
    "round_title",
    "snapshot_line",
    "trail_line",
    "verdict_line",
    "invalid_audit_line",
    "comparisons_line",
    "document_cut",
    "judgement_line",
    "narrative_line",
    "settled_reason",
    "running_verdict",
    "phase_status",
    "DEMONSTRATION_VERDICT",
]

_PHASES = {"question": "asking", "answer": "answering", "judgement": "judging",
           "analysis": "analysing", "audit": "auditing", "testimony": "the witness testifies",
           "samples": "the witness answers again", "split": "taking the testimony apart",
           "claims": "examining the claims"}
_ROUND_PHASES = ("question", "answer", "judgement", "analysis")


def phase_status(phase: str, sequence: int) -> str:
    """What a run is doing in `phase` (of round `sequence`), as a status line says it:
    "round 3: judging…", "taking the testimony apart…"."""
    label = _PHASES.get(phase, phase)
    return f"round {sequence}: {label}…" if phase in _ROUND_PHASES else f"{label}…"

DEMONSTRATION_VERDICT = "a demonstration model's verdict: it means nothing"
"""Said beside every verdict a demonstration model spoke for the detective in."""
INVALID_AUDIT_CHARS = 600
"""Characters of an invalid audit shown in a transcript or export (the session keeps all)."""


LARGER_MODEL_HINT = ("an API key (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY) or a "
                     "larger model through Ollama")
"""What to give the detective when it already is the capable local model."""


def no_usable_question(label: str, attempts: int, problem: str, demonstration: bool) -> str:
    """Why a session failed when the detective asked nothing usable, and what to give it
    instead: the capable local model, or something larger when it already is that."""
    advice = (f"give the detective a larger model: {LARGER_MODEL_HINT}"
              if CAPABLE_MODEL in label.lower() else
              f"give the detective a capable model: {CAPABLE_MODEL_HINT}")
    return (f"the detective model {strip_control(label)} gave no usable question {attempts} "
            f"times (last: {problem})"
            + (" — it is a small demonstration model" if demonstration else "")
            + f"; {advice}")


NOTHING_ASKED_REASON = "nothing was asked"
"""How a run that asked the witness nothing says so, before the cause (its verdict's reason,
its end's line)."""


def no_testimony(rounds: int, label: str, demonstration: bool) -> str:
    """Why a session failed when the witness answered nothing in any round."""
    return (f"the witness model {strip_control(label)} gave no real answer in "
            f"{rounds} round{'s' if rounds != 1 else ''}, so there is nothing to audit"
            + (" — it is a small demonstration model" if demonstration else "")
            + "; give the witness another model with --witness")


def verdict_line(audit: AuditResult) -> str | None:
    """`"verdict: false · p(false) 0.82 · computed from round 2"`; None before verdicts."""
    if audit.verdict is None:
        return None
    line = f"verdict: {audit.verdict}"
    if audit.probability_false is not None:
        line += f" · p(false) {audit.probability_false:.2f}"
    if audit.deciding_rounds:
        rounds = audit.deciding_rounds
        line += (f" · {'computed from' if audit.computed else 'decided by'} "
                 f"round{'s' if len(rounds) > 1 else ''} " + ", ".join(str(n) for n in rounds))
    if audit.undetermined_because:
        line += f" · {strip_control(audit.undetermined_because)}"
    elif audit.rule_broken and not audit.computed:
        line += f" · no verdict from the detective: {strip_control(audit.rule_broken)}"
    if audit.demonstration:
        line += f" · {DEMONSTRATION_VERDICT}"
    return line


def narrative_line(audit: AuditResult) -> str | None:
    """The auditor's own reading where it differs from the computed verdict, and a sentence
    of its summary that states the opposite of the verdict (shown beside it, marked, never
    used), else None."""
    if not audit.computed:
        return None
    parts = []
    if audit.narrative_verdict not in (None, audit.verdict):
        parts.append(f"the auditor's own reading: {audit.narrative_verdict} (the verdict is "
                     "computed from the readings, not written by a model)")
    if audit.narrative_against:
        parts.append(f"the summary says \"{one_line(strip_control(audit.narrative_against), 160)}"
                     f"\" — contradicted by the verdict ({audit.verdict})")
    return "; ".join(parts) or None


def summary_title(audit: AuditResult) -> str:
    """The summary's title: marked when the model's text states the opposite of the verdict
    (`AuditResult.narrative_against`)."""
    return "Summary (contradicted by the verdict: it is the model's text)" \
        if audit.narrative_against else "Summary"


def judgement_line(judgement: Judgement) -> str:
    """`"judgement: supports · p(true) 0.97 (log-probabilities)"`, or why a round is
    silent."""
    line = f"judgement: {judgement.bearing}"
    if judgement.p_true is not None:
        source = {"logprobs": "log-probabilities", "stated": "stated"}.get(judgement.source)
        line += f" · p(true) {judgement.p_true:.2f}" + (f" ({source})" if source else "")
    if judgement.spread is not None:
        line += f" · spread {judgement.spread:.2f} over {len(judgement.samples)} answers"
    if judgement.why:
        line += f" · {strip_control(judgement.why)}"
    return line


def running_verdict(verdict: str, probability_false: float,
                    demonstration: bool = False) -> str:
    """The verdict the rounds make so far: `"so far: true · p(false) 0.04"`, and that it
    means nothing when a demonstration model judged."""
    line = f"so far: {verdict} · p(false) {probability_false:.2f}"
    return f"{line} · {DEMONSTRATION_VERDICT}" if demonstration else line


def settled_reason(rounds: int) -> str:
    """Why the questioning closed on a decisive judgement."""
    return (f"a decisive judgement settled it after {rounds} "
            f"round{'s' if rounds != 1 else ''}")


def document_cut(name: str) -> str:
    """Said in the session when the witness's document did not fit its window whole."""
    return (f"the witness's document {strip_control(name)!r} did not fit its context window: "
            "only its start was given")


def comparisons_line(audit: AuditResult) -> str | None:
    """`"answers against the hypothesis: round 1 agrees · round 2 unrelated"`, or None."""
    if not audit.comparisons:
        return None
    return "answers against the hypothesis: " + " · ".join(
        f"round {c.round} {c.stance}" for c in audit.comparisons)


def invalid_audit_line(audit: AuditResult) -> str | None:
    """The detective's invalid audit, kept and shown (never used), or None."""
    if not audit.invalid_reply:
        return None
    return ("the detective's audit as it wrote it (not used): "
            + one_line(strip_control(audit.invalid_reply), INVALID_AUDIT_CHARS))

_QUIET_IN_TRANSCRIPT = frozenset({"partial_discarded", "resumed"})
"""Trail entries a transcript shows otherwise (struck-through text, a "resumed" note)."""


def round_title(sequence: int, limit: int | None = None) -> str:
    """`"Round 3 of 10"`, or `"Round 3"` when the limit is not known."""
    return f"Round {sequence}" + (f" of {limit}" if limit else "")


def follow_up(analysis: GapAnalysis) -> str:
    """Whether the detective wants another question."""
    return "follow-up needed" if analysis.requires_follow_up else "no follow-up needed"


def completeness(analysis: GapAnalysis) -> str:
    """`"completeness 40/100 · follow-up needed"`."""
    return f"completeness {analysis.completeness_score}/100 · {follow_up(analysis)}"


def contradiction(item: Contradiction) -> str:
    """`"Q2 vs Q4: what conflicts"` (question numbers from 1); `"Q2's answers: …"` for one
    round's answers that disagree (the consistency protocol)."""
    first, second = (index + 1 for index in item.qa_pair_indexes)
    where = f"Q{first}'s answers" if first == second else f"Q{first} vs Q{second}"
    return f"{where}: {strip_control(item.description).strip()}"


def in_transcript(entry: AuditTrailEntry) -> bool:
    """Whether a transcript (the CLI's, the Live view) shows the entry as a note."""
    return entry.event not in _QUIET_IN_TRANSCRIPT


def trail_line(entry: AuditTrailEntry, role: bool = True) -> str:
    """`"provider switch (detective) a → b: why"`; without the role when `role` is False."""
    return (entry.event.replace("_", " ")
            + (f" ({entry.role})" if role and entry.role else "")
            + (f" {entry.route}" if entry.route else "")
            + f": {strip_control(entry.reason)}")


COUNTED = {"exact": "counted exactly", "bounded": "at most (bounded by earlier counts)",
           "estimate": "estimated"}
"""How a fitted prompt's tokens were counted, in words."""


def fit_line(fit: ContextFit) -> str:
    """`"context (detective, a:m): 1890/2048 tokens, exact · rounds 2–5 digested"`."""
    parts = [f"context ({fit.role}, {strip_control(fit.provider)}): {fit.used}/{fit.window} "
             f"tokens, {COUNTED[fit.counted]}"]
    for numbers, what in ((fit.digested, "digested"), (fit.shortened, "shortened"),
                          (fit.omitted, "left out")):
        if numbers:
            parts.append(f"round{'s' if len(numbers) > 1 else ''} {span(numbers)} {what}")
    if fit.asked_reply and fit.reply < fit.asked_reply:
        parts.append(f"reply {fit.reply} of {fit.asked_reply} tokens")
    return " · ".join(parts)


def context_summary(fits: list[ContextFit]) -> str | None:
    """One line over a session's calls: how many, how many were trimmed, the fullest."""
    if not fits:
        return None
    fullest = max(fits, key=lambda f: f.used / f.window)
    trimmed = sum(1 for f in fits if f.trimmed)
    exact = sum(1 for f in fits if f.counted == "exact")
    bounded = sum(1 for f in fits if f.counted == "bounded")
    lowered = sum(1 for f in fits if f.asked_reply)
    return (f"{len(fits)} model call{'s' if len(fits) != 1 else ''} fitted to their windows"
            f" ({exact} counted exactly" + (f", {bounded} bounded by earlier counts"
                                             if bounded else "")
            + f"), {trimmed} with rounds trimmed"
            + (f", {lowered} with a smaller reply budget" if lowered else "")
            + f"; fullest {fullest.used}/{fullest.window} tokens ({fullest.role}, "
            f"{strip_control(fullest.provider)})")


@singledispatch
def note(event: InterrogationEvent | object) -> str | None:
    """The one line a transcript shows for an event that is a note rather than text (None:
    nothing to show). A new event type registers its formatter here, and the CLI and the Live
    view show it without a change of their own."""
    return None


@note.register
def _cut_off(event: AnswerCutOff) -> str | None:
    return ANSWER_CUT_OFF


def cut_off_line(fit: ContextFit | None) -> str:
    """`ANSWER_CUT_OFF`, and why the limit was what it was when the window lowered the
    reply's room (`fit`: how the answer's call was fitted)."""
    if fit is None or not fit.asked_reply or fit.reply >= fit.asked_reply:
        return ANSWER_CUT_OFF
    return (f"{ANSWER_CUT_OFF} ({fit.reply} tokens, lowered from {fit.asked_reply} to fit "
            f"{strip_control(fit.provider)}'s context window of {fit.window:,})")


@note.register
def _advice(event: Advice) -> str | None:
    return event.text


@note.register
def _unusable(event: AnswerUnusable) -> str | None:
    return event.problem


@note.register
def _trail(event: TrailAdded) -> str | None:
    return trail_line(event.entry) if in_transcript(event.entry) else None


@note.register
def _fitted(event: ContextFitted) -> str | None:
    return fit_line(event.fit) if event.fit.trimmed else None


def note_title(entry: NoteEntry) -> str:
    """`"Note 2 · call.vtt (imported, 1,204 chars, 2026-11-22 14:30)"`."""
    when = entry.received_at.astimezone().strftime("%Y-%m-%d %H:%M")
    return (f"Note {entry.sequence} · {strip_control(entry.source)} ({entry.kind}, "
            f"{entry.characters:,} chars, {when})")


def answer_title(entry: LlmEntry) -> str:
    """`"Answer 3 · Sceptic (local:gemma-3-270m, 2026-11-22 14:31)"`."""
    when = entry.created_at.astimezone().strftime("%Y-%m-%d %H:%M")
    by = f"{strip_control(entry.provider_used)}, " if entry.provider_used else ""
    cut = {"length": ", cut at its token limit", "content_filter": f", {FILTERED}",
           "timeout": ", cut at the time limit"}.get(entry.finish_reason, "")
    return f"Answer {entry.sequence} · {strip_control(entry.oracle_name)} ({by}{when}{cut})"


def snapshot_line(entry: LlmEntry) -> str:
    """What the oracle was shown: `"shown 3 notes, 5 rounds and the audit, 1 earlier
    answer (history on) · ~1,850 tokens of 8,192"` and what was trimmed."""
    shot = entry.context_snapshot
    parts = [f"{shot.transcript_count} note{'s' if shot.transcript_count != 1 else ''}",
             f"{shot.qa_count} round{'s' if shot.qa_count != 1 else ''}"]
    if shot.audit_included:
        parts.append("the audit")
    history = (f"{shot.llm_response_count} earlier answer"
               f"{'s' if shot.llm_response_count != 1 else ''} (history on)"
               if shot.include_llm_history else "no earlier answers (history off)")
    line = f"shown {', '.join(parts)}, {history}"
    if shot.total_tokens_estimate is not None:
        line += f" · ~{shot.total_tokens_estimate:,} tokens"
        if shot.window:
            line += f" of {shot.window:,}"
    if shot.trimmed:
        line += " · trimmed: " + "; ".join(shot.trimmed)
    return line


def check_line(check: CheckResult) -> str:
    """`"  ✓ negation"` or `"  ✗ antonyms: opposites: good/bad"` (a guard or validation check)."""
    detail = f": {strip_control(check.detail)}" if check.detail else ""
    return f"  {'✓' if check.passed else '✗'} {check.name}{detail}"


def explanation_lines(why: Explanation) -> list[str]:
    """What a cache lookup decided and why: the verdict, the tier, every meaning check, the
    nearest rejected candidates (`detektiv cache match` and the Cache tab's why box)."""
    lines = [f"{'HIT' if why.hit else 'MISS'}: {strip_control(why.reason)}"]
    if why.tier == "semantic":
        lines.append(f"tier semantic · cosine {(why.score or 0) / 100:.2f} · entry "
                     f"{why.entry_id} · validator v{why.validator_version}")
    elif why.tier:
        lines.append(f"tier {why.tier} · score {why.score or 0:.0f} · threshold "
                     f"{why.threshold:.0f} · entry {why.entry_id} · validator "
                     f"v{why.validator_version}")
    lines += [check_line(check) for check in why.checks]
    lines += [f"  rejected {strip_control(question)!r} (score {score:.0f}): "
              f"{strip_control(reason)}" for question, score, reason in why.rejected]
    return lines
