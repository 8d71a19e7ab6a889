"""A round's judgement and the verdict computed from them (SPEC §1, issue 44): what is stored
in each round and in the audit. The rule that makes them is `engine.interrogation.verdict`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Bearing", "Judgement", "ProbabilitySource"]

Bearing = Literal["supports", "contradicts", "silent"]
"""How one exchange bears on the hypothesis: `silent` when the answer does not address it
(no answer, "I don't know", an answer about something else, a judgement too unsure to lean),
never a contradiction."""
ProbabilitySource = Literal["logprobs", "stated", "none"]
"""Where a judgement's probability came from: the detective's token log-probabilities, its
stated probability (a wire without them: Anthropic, Gemini, Ollama's native API), or nowhere
(no call was needed, or its reply could not be read)."""


class Judgement(BaseModel):
    """The detective's judgement of one exchange alone: given only the hypothesis, the
    question and this answer, how likely is the hypothesis true?"""

    model_config = ConfigDict(extra="forbid")

    bearing: Bearing
    p_true: Annotated[float, Field(ge=0, le=1)] | None = None
    """P(the hypothesis is true | this exchange); None when nothing could be read."""
    source: ProbabilitySource = "none"
    why: str | None = None
    """Why a round is silent ("no answer", "the witness does not know", "unsure")."""
    word: str | None = None
    """What the detective replied (its one word, or its stated number), as it wrote it."""
    samples: list[Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=list)
    """Under the consistency protocol: P(true) of each answer judged, the first included
    (`p_true` is their pooled value)."""

    @property
    def spread(self) -> float | None:
        """How far the sampled answers' judgements lie apart (max − min), when sampled."""
        if len(self.samples) < 2:
            return None
        return max(self.samples) - min(self.samples)
