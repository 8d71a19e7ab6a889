"""What a session's model calls used: tokens in and out, what they cost, what was estimated."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

__all__ = ["TokenTally"]


class TokenTally(BaseModel):
    """Tokens a session's model calls used, prompt and reply (as the providers reported them;
    `estimated` once any call had to be estimated: its prompt from the fit, its reply at four
    characters a token). `estimated` is derived from `estimated_calls` and stored beside it for
    readers of the JSON; a tally stored with only the flag loads as one estimated call."""

    model_config = ConfigDict(extra="forbid")

    prompt: Annotated[int, Field(ge=0)] = 0
    completion: Annotated[int, Field(ge=0)] = 0
    cached: Annotated[int, Field(ge=0)] = 0
    """Of `prompt`: tokens the providers read from their prompt cache."""
    reasoning: Annotated[int, Field(ge=0)] = 0
    """Of `completion`: tokens a reasoning model spent thinking (as reported)."""
    estimated_calls: Annotated[int, Field(ge=0)] = 0
    """How many calls had to be estimated (what tells a round's estimate from an earlier one)."""
    cost: Annotated[float, Field(ge=0)] = 0.0
    """What the priced calls cost (`[prices]`, per million tokens; this machine's models 0)."""
    unpriced: list[str] = Field(default_factory=list)
    """Providers that answered with no price configured: their calls are not in `cost`."""

    @model_validator(mode="before")
    @classmethod
    def _estimated_flag(cls, data: Any) -> Any:
        """The stored `estimated` is derived: dropped on load, a count where only it was."""
        if isinstance(data, dict) and "estimated" in data:
            data = dict(data)
            if data.pop("estimated") and not data.get("estimated_calls"):
                data["estimated_calls"] = 1  # stored before the count was kept
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def estimated(self) -> bool:
        return self.estimated_calls > 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def add(self, other: TokenTally) -> None:
        """Count `other` in too."""
        self.prompt += other.prompt
        self.completion += other.completion
        self.cached += other.cached
        self.reasoning += other.reasoning
        self.estimated_calls += other.estimated_calls
        self.cost += other.cost
        self.unpriced += [name for name in other.unpriced if name not in self.unpriced]

    def since(self, before: TokenTally) -> TokenTally:
        """What was counted after `before` (a copy of this tally taken earlier)."""
        return TokenTally(prompt=self.prompt - before.prompt,
                          completion=self.completion - before.completion,
                          cached=self.cached - before.cached,
                          reasoning=self.reasoning - before.reasoning,
                          estimated_calls=self.estimated_calls - before.estimated_calls,
                          cost=max(0.0, self.cost - before.cost),
                          unpriced=[n for n in self.unpriced if n not in before.unpriced])
