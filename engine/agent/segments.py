"""Prompt segments: the case agent's system prompt, composed per query type (seed 001).

    segments = load_segments()                    # AgentError naming a missing/empty file
    chosen = select_segments(segments, classification)   # by priority, conditions met
    system = "\n\n".join(s.content for s in chosen)

The registry is static (`REGISTRY`); the texts are `prompts/segments/*.md`, editable without
touching code. Every file must exist and hold text: the agent refuses to start otherwise, and
says which file, rather than run with half a prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.agent.classify import QueryClassification
from engine.context.tokens import estimate
from engine.errors import AgentError
from engine.paths import resource_dir

__all__ = ["REGISTRY", "PromptSegment", "load_segments", "select_segments"]

#: id → (file, priority, conditions); lower priorities come first.
REGISTRY: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "base": ("base.md", 0, ("always",)),
    "signals": ("signals.md", 1, ("always",)),
    "tools": ("tools.md", 2, ("always",)),
    "code": ("code.md", 10, ("query_type=code",)),
    "docs": ("docs.md", 10, ("query_type=documentation", "query_type=action")),
    "research": ("research.md", 10, ("query_type=research",)),
    "conversation": ("conversation.md", 10, ("query_type=conversational",)),
}


@dataclass(frozen=True, slots=True)
class PromptSegment:
    """One piece of the system prompt."""

    id: str
    content: str
    token_estimate: int
    conditions: tuple[str, ...]
    priority: int
    path: Path

    @property
    def always(self) -> bool:
        return "always" in self.conditions

    def applies(self, classification: QueryClassification) -> bool:
        return self.always or f"query_type={classification.query_type}" in self.conditions


def load_segments(directory: Path | None = None) -> list[PromptSegment]:
    """Every registered segment read from `directory` (default: the shipped
    `prompts/segments`), by priority. `AgentError` names the first file missing, unreadable
    or empty."""
    folder = directory or resource_dir("prompts") / "segments"
    out: list[PromptSegment] = []
    for segment_id, (filename, priority, conditions) in REGISTRY.items():
        path = folder / filename
        try:
            content = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise AgentError(f"prompt segment {segment_id!r} is missing: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise AgentError(f"prompt segment {segment_id!r} cannot be read: {path} "
                             f"({type(exc).__name__})") from None
        if not content:
            raise AgentError(f"prompt segment {segment_id!r} is empty: {path}")
        out.append(PromptSegment(segment_id, content, estimate(content), conditions, priority,
                                 path))
    out.sort(key=lambda s: (s.priority, s.id))
    return out


def select_segments(segments: list[PromptSegment],
                    classification: QueryClassification) -> list[PromptSegment]:
    """The segments whose conditions `classification` meets, by priority."""
    return [s for s in segments if s.applies(classification)]
