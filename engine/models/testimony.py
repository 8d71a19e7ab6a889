"""A testimony taken apart (SPEC §1, "Testimony"): what is stored of it in a session.

A hypothesis that asks (a question, "Summarize …") is answered by the witness, told nothing
more: that answer is the testimony. A hypothesis of two sentences or more is itself the
testimony. Either way the testimony is the session's first pair (`qa_pairs[0]`, marked
`testimony`), so a contradiction can name it as pair 0 against the round whose answer
contradicted one of its claims. The detective splits it into `Claim`s, each examined like a
single hypothesis in rounds of its own (pairs marked with the claim's number); the states and
the testimony's verdict are computed (`engine.interrogation.verdict`), never written by a
model.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CLAIM_STATES", "Claim", "ClaimState", "Testimony", "TestimonySource"]

ClaimState = Literal["pending", "held", "contradicted", "unsupported", "unsure",
                     "not checkable", "not examined"]
"""`pending`: not examined yet (or cut short by a kill: a resume examines it); `held`: the
witness, asked openly, said what the claim says; `contradicted`: it said otherwise;
`unsupported` (the witness holds a document): it could not support the claim from its
document — what a hallucination in a summary is; `unsure`: its answers did not settle it;
`not checkable`: an opinion, advice, or too vague to check, listed and never examined;
`not examined`: past `[interrogation] max_claims`."""
CLAIM_STATES: tuple[ClaimState, ...] = ("pending", "held", "contradicted", "unsupported",
                                        "unsure", "not checkable", "not examined")
TestimonySource = Literal["witness", "given"]
"""`witness`: the witness's answer to the hypothesis; `given`: the hypothesis itself (a pasted
answer, a summary, `--file`)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Claim(_Model):
    """One short, self-contained claim of the testimony, with where it stands in it."""

    number: Annotated[int, Field(ge=1)]
    """Its place in the split, from 1."""
    text: Annotated[str, Field(min_length=1)]
    start: Annotated[int, Field(ge=0)] = 0
    """Where the part of the testimony it came from begins (a character offset)."""
    end: Annotated[int, Field(ge=0)] = 0
    """Where that part ends (exclusive); `start == end`: no place was found for it."""
    state: ClaimState = "pending"
    why: str | None = None
    """Why it is not checkable, unsure or not examined, in a few words."""
    probability_false: Annotated[float, Field(ge=0, le=1)] | None = None
    """P(the claim is false), computed from its rounds' judgements once examined."""
    deciding: int | None = None
    """The pair (its sequence, from 1) whose answer decided the claim's state."""
    direct_p_true: Annotated[float, Field(ge=0, le=1)] | None = None
    """The detective's own reading of the claim, with no testimony — told only the question
    the testimony answers, when the witness gave it (`open` only): a signal that does not
    rest on the witness repeating itself, shown beside the claim."""
    sampled_p_true: Annotated[float, Field(ge=0, le=1)] | None = None
    """The claim read against each of the witness's sampled answers to the testimony's
    question (`Testimony.samples`), their mean P(true): SelfCheckGPT's signal, a fact the
    witness made up does not come back when it answers again (`open` only)."""
    rounds_p_false: Annotated[float, Field(ge=0, le=1)] | None = None
    """P(false) from its rounds alone, before the other readings were pooled in (`verdict`'s
    rules 8 and 10; None when no round bore on it), shown beside the claim."""
    unfound: list[str] | None = None
    """Its words of five letters or more, and its numbers, that the witness's document nowhere
    has (`document` only; None without one): three or more make it `unsupported` without
    rounds (`verdict`'s rule 9), fewer are shown beside it."""

    @property
    def examined(self) -> bool:
        """Whether its examination ended with a state of its own."""
        return self.state in ("held", "contradicted", "unsupported", "unsure")


class Testimony(_Model):
    """The testimony's claims and how they came to be (its text is `qa_pairs[0].answer`)."""

    source: TestimonySource
    claims: list[Claim] = Field(default_factory=list)
    split: bool = False
    """Whether the detective's split is done (its claims are then fixed)."""
    refused: list[str] = Field(default_factory=list)
    """Lines of the split refused by rule, each with why ("… — it repeats claim 2")."""
    problem: str | None = None
    """Why there is nothing to examine (no testimony, no claim), when so."""
    samples: list[str] | None = None
    """The witness's answers to the testimony's question drawn again above temperature 0,
    told nothing (`[interrogation] testimony_samples`); None until drawn."""

    def put(self, claim: Claim) -> None:
        """Store `claim` in the place of the claim of its number (its examination ended)."""
        for index, stored in enumerate(self.claims):
            if stored.number == claim.number:
                self.claims[index] = claim
