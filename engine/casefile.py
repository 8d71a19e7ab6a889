"""What the models are shown: the prompts filled in, the transcript, the reply schemas.

Prompts are files in `prompts/` (editable without touching code); `{{NAME}}` placeholders are
filled here. The witness sees only the questions and its own answers, never an analysis.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.models.session import ANSWER_CUT_OFF, QuestionAnswerPair
from engine.providers import Message

__all__ = ["audit_schema", "gap_schema", "transcript", "witness_messages"]

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


def audit_schema(pairs: int, max_tokens: int) -> dict[str, Any]:
    """The JSON schema of the audit reply; question numbers run from 1 to `pairs`.

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
    most = min(10, pairs * (pairs - 1) // 2, max(0, (max_tokens - 100) // 200))
    summary = max(100, min(8000, (max_tokens - 60 - most * 120) * 3))
    return {
        "type": "object",
        "properties": {
            "contradictions": {"type": "array", "items": contradiction, "maxItems": most},
            "summary": {"type": "string", "minLength": 1, "maxLength": summary},
        },
        "required": ["contradictions", "summary"],
        "additionalProperties": False,
    }


def transcript(pairs: Iterable[QuestionAnswerPair], analyses: bool) -> str:
    lines: list[str] = []
    for pair in pairs:
        lines.append(f"Q{pair.sequence}: {pair.question}")
        lines.append(f"A{pair.sequence}: {pair.answer or '(no answer)'}"
                     + (f" [{ANSWER_CUT_OFF}]" if pair.answer_cut_off else ""))
        if analyses:
            analysis = pair.gap_analysis
            gaps = "; ".join(
                f"[{g.severity}] {g.category}: {g.description}" for g in analysis.gaps
            )
            lines.append(
                f"Analysis of A{pair.sequence}: completeness {analysis.completeness_score}/100"
                + (f"; gaps: {gaps}" if gaps else "; no gaps")
            )
        lines.append("")
    return "\n".join(lines).strip() or "(no questions yet)"


def witness_messages(pairs: Iterable[QuestionAnswerPair], question: str) -> list[Message]:
    """The witness's side of the conversation: the questions and its own answers, then the new
    question. Never an analysis."""
    history: list[Message] = []
    for pair in pairs:
        history += [Message("user", pair.question),
                    Message("assistant", pair.answer or "(no answer)")]
    return [*history, Message("user", question)]
