"""The case file around an interrogation (SPEC §4, seed 000): notes and oracle consultations.

A session keeps, besides its interrogation, the **notes** the user typed or imported (each one a
file in `transcripts/` and a `NoteEntry` in metadata.json) and the answers of the **oracles**
it consulted (each one a file in `llm_responses/` and an `LlmEntry` recording exactly what the
oracle was shown). The file is written first, then the entry: an entry always has its file.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ContextSnapshot", "LlmEntry", "NoteEntry", "NoteKind", "UIPreferences"]

NoteKind = Literal["typed", "imported"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoteEntry(_Model):
    """One note or transcript of the session (the seed's AudioEntry, generalised)."""

    sequence: Annotated[int, Field(ge=1)]
    received_at: datetime
    filename: str
    """The file in the session's `transcripts/` folder (`{seq:03d}_{slug}.{ext}`)."""
    kind: NoteKind
    source: str
    """Where it came from: the imported file's name, or the title of a typed note."""
    characters: Annotated[int, Field(ge=0)]
    """Length of the stored text."""


class ContextSnapshot(_Model):
    """What an oracle was shown, recorded with its answer (for auditability)."""

    transcript_count: Annotated[int, Field(ge=0)]
    """Notes included."""
    llm_response_count: Annotated[int, Field(ge=0)]
    """Earlier oracle answers included."""
    include_llm_history: bool
    total_tokens_estimate: Annotated[int, Field(ge=0)] | None = None
    """The prompt's size in tokens, as estimated (or counted) when it was fitted."""
    qa_count: Annotated[int, Field(ge=0)] = 0
    """Interrogation rounds included (whole or shortened)."""
    audit_included: bool = False
    trimmed: list[str] = Field(default_factory=list)
    """What was shortened or left out to fit the window, one line each (empty: all whole)."""
    window: int | None = None
    """The context window the prompt was fitted to, in tokens."""


class LlmEntry(_Model):
    """One oracle consultation: its answer's file and the context it was given."""

    sequence: Annotated[int, Field(ge=1)]
    created_at: datetime
    oracle_name: Annotated[str, Field(min_length=1)]
    oracle_id: str
    response_filename: str
    """The file in the session's `llm_responses/` folder (`{seq:03d}_{oracle-slug}.txt`)."""
    context_snapshot: ContextSnapshot
    provider_used: str | None = None
    """`provider:model` that answered."""
    finish_reason: str = "stop"
    """`stop`; `length` (cut at its token limit) or `timeout` (cut at LLM_TIMEOUT_SECONDS):
    the answer is the part that arrived."""


class UIPreferences(_Model):
    """Per-session preferences a front end keeps in metadata.json."""

    include_llm_history: bool = True
    """Earlier oracle answers go into the next consultation's context."""
