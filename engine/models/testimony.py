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

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["CLAIM_STATES", "SIGNAL_NAMES", "WORDS_P_FALSE", "Claim", "ClaimState",
           "SignalName", "SignalReading", "Testimony", "TestimonySource", "words_p_false"]

ClaimState = Literal["pending", "held", "contradicted", "unsupported", "unsure",
                     "not checkable", "not examined"]
"""`pending`: not examined yet (or cut short by a kill: a resume examines it); `held`: the
witness, asked openly, said what the claim says; `contradicted`: it said otherwise;
`unsupported` (the witness holds a document): it could not support the claim from its
document — what a hallucination in a summary is; `unsure`: its answers did not settle it;
`not checkable`: an opinion, advice, or too vague to check, listed and never examined;
`not examined`: past the testimony's token budget (`[interrogation] claim_tokens`) before
its first reading."""
CLAIM_STATES: tuple[ClaimState, ...] = ("pending", "held", "contradicted", "unsupported",
                                        "unsure", "not checkable", "not examined")
TestimonySource = Literal["witness", "given"]
"""`witness`: the witness's answer to the hypothesis; `given`: the hypothesis itself (a pasted
answer, a summary, `--file`)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


SignalName = Literal["words", "alone", "samples", "rounds"]
"""The ways a claim is examined (`engine.interrogation.signals`), in reading order."""
SIGNAL_NAMES: tuple[SignalName, ...] = ("words", "alone", "samples", "rounds")

WORDS_P_FALSE = (0.24, 0.46, 0.66, 0.78, 0.87)
"""P(false) of a claim with none, one, two, three, four or more words its document lacks:
the share of HaluEval summarization's development sentences with that count that stood in
hallucinated summaries (`bench/summary_grounding.py`, 3,000 summaries): the `words` signal's
reading."""


def words_p_false(words: int) -> float:
    """The `words` signal's reading of a claim with `words` words its document lacks, as a
    P(false)."""
    return WORDS_P_FALSE[min(max(words, 0), len(WORDS_P_FALSE) - 1)]


class SignalReading(_Model):
    """What one signal read of a claim (`engine.interrogation.signals`): P(true), or none and
    why; stored with the claim, shown beside it, pooled into its P(false)."""

    p_true: Annotated[float, Field(ge=0, le=1)] | None = None
    """P(the claim is true) by this signal alone; None: it read nothing (`why`)."""
    why: str | None = None
    """Why it read nothing, or what it read, in a few words."""
    tokens: Annotated[int, Field(ge=0)] = 0
    """The tokens its calls used."""
    values: list[Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=list)
    """Each answer's or sample's P(true), where it read several."""
    words: list[str] | None = None
    """The words signal: the claim's words the document lacks."""
    conflict: bool = False
    """The rounds: two answers bore on it decisively, one each way (no reading: the claim
    stays `unsure`)."""


def _migrated(data: Any) -> Any:
    """A claim stored before its readings were a list of signals (issue 72): its pooled
    readings as they were stored, by signal."""
    if not isinstance(data, dict) or not {"direct_p_true", "sampled_p_true", "rounds_p_false",
                                          "unfound"} & data.keys():
        return data
    data = dict(data)
    readings = dict(data.get("readings") or {})
    alone, sampled = data.pop("direct_p_true", None), data.pop("sampled_p_true", None)
    rounds, unfound = data.pop("rounds_p_false", None), data.pop("unfound", None)
    if alone is not None:
        readings.setdefault("alone", {"p_true": alone})
    if sampled is not None:
        readings.setdefault("samples", {"p_true": sampled})
    if rounds is not None:
        readings.setdefault("rounds", {"p_true": round(1 - rounds, 4)})
    if unfound is not None:
        readings.setdefault("words", {"p_true": round(1 - words_p_false(len(unfound)), 4),
                                      "words": unfound})
    data["readings"] = readings
    return data


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
    readings: dict[str, SignalReading] = Field(default_factory=dict)
    """What each signal read of it (`engine.interrogation.signals`: `words`, `alone`,
    `samples`, `rounds`), pooled into `probability_false` (`engine.interrogation.pooling`);
    a checkpoint as each arrives, so a resume reads only what is missing. Claims stored
    before issue 72 load with their readings made from the fields they had."""
    decided_by: str | None = None
    """The signal that decided the claim's state against its rounds, when one did (the pool's
    learned weights outweighed a strong reading of the other side); None otherwise."""

    _migrate = model_validator(mode="before")(_migrated)

    @property
    def unfound(self) -> list[str] | None:
        """Its words of five letters or more, and its numbers, that the witness's document
        nowhere has (the `words` signal; None without a document)."""
        words = self.readings.get("words")
        return words.words if words is not None else None

    def reading(self, signal: str) -> float | None:
        """The P(true) `signal` read, if it read one."""
        found = self.readings.get(signal)
        return found.p_true if found is not None else None

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
