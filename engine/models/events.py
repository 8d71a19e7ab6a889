"""What an interrogation yields as it happens, and how each event is stored in events.jsonl.

Every event is a small frozen pydantic model with a `type` tag. The live stream carries one
`QuestionDelta`/`AnswerDelta` per token; the stored log batches consecutive deltas, so a
watcher replaying events.jsonl sees the same text in the same order in fewer, larger pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, TypeAdapter

from engine.errors import FailureFamily
from engine.models.event import Event, journal_line, read_journal_line
from engine.models.judgement import Judgement
from engine.models.session import (
    AuditResult,
    Drawing,
    GapAnalysis,
    QuestionAnswerPair,
    SessionStatus,
    VerdictValue,
)
from engine.models.testimony import Claim, Testimony
from engine.models.trail import AuditTrailEntry, ContextFit
from engine.models.usage import TokenTally

__all__ = [
    "Advice",
    "AnswerCutOff",
    "AnswerSampled",
    "AnswerDelta",
    "AnswerDrawn",
    "AnswerUnusable",
    "AuditReady",
    "Checkpoint",
    "ClaimExamined",
    "ClaimRead",
    "ClaimsSplit",
    "ContextFitted",
    "Delta",
    "Discarded",
    "Finished",
    "GapAnalysisReady",
    "InterrogationEvent",
    "JudgementReady",
    "PairCompleted",
    "Phase",
    "ProviderChosen",
    "QuestionDelta",
    "Reasoning",
    "Record",
    "Started",
    "TrailAdded",
    "decode_record",
    "encode_record",
]

Role = Literal["detective", "witness", "oracle", "agent"]
"""Who produced a piece of text: the two roles of an interrogation, and the oracles and the
case agent that come next."""
PhaseName = Literal["question", "answer", "judgement", "analysis", "audit", "testimony",
                    "samples", "split", "claims"]
"""`testimony`: the witness gives its testimony; `samples`: it answers the same question
again, told nothing (what each claim is read against); `split`: the detective takes it apart
into claims; `claims`: the claims are examined (their rounds run side by side)."""


class _Event(Event):
    """An interrogation's event (journaled to the session's events.jsonl)."""


class Started(_Event):
    """The run began (`resumed_after` = pairs already done when it is a resume)."""

    type: Literal["started"] = "started"
    session_id: str
    hypothesis: str
    iteration_limit: int
    resumed_after: int | None = None


class Phase(_Event):
    """What the run is doing now, in which round."""

    type: Literal["phase"] = "phase"
    phase: PhaseName
    sequence: int


class ProviderChosen(_Event):
    """`provider` (`"{name}:{model}"`) now plays `role`; `trial` on a half-open circuit."""

    type: Literal["provider"] = "provider"
    role: Role
    provider: str
    trial: bool = False


class Delta(_Event):
    """A piece of streamed text. The event log merges consecutive deltas of the same type whose
    other fields are equal (`merge_key`), so any new delta type is batched as it is. Each
    subclass declares `text` after its own fields (records keep `type` first)."""

    if TYPE_CHECKING:
        text: str

    def merge_key(self) -> tuple[object, ...]:
        """What must match for two deltas to be one piece of text: the type and every field
        but `text`."""
        return (type(self), *[v for k, v in self.__dict__.items() if k != "text"])


class QuestionDelta(Delta):
    """A piece of the detective's question, in order."""

    type: Literal["question_delta"] = "question_delta"
    sequence: int
    text: str


class AnswerDelta(Delta):
    """A piece of the witness's answer, in order."""

    type: Literal["answer_delta"] = "answer_delta"
    sequence: int
    text: str


class Reasoning(Delta):
    """A piece of a role's reasoning (a reasoning model's thinking before its reply), in
    order: `phase` is the call it belongs to, `sequence` its round (None for the audit). Kept
    apart from questions and answers: shown dimmed, exported only when asked for."""

    type: Literal["reasoning"] = "reasoning"
    role: Role
    phase: PhaseName
    sequence: int | None = None
    text: str


class AnswerCutOff(_Event):
    """The witness's answer of round `sequence` ended at its token limit, unfinished."""

    type: Literal["answer_cut_off"] = "answer_cut_off"
    sequence: int
    provider: str


class AnswerSampled(_Event):
    """Under the `consistency` protocol: answer `number` of `of` to round `sequence`'s
    question, asked anew (the first is the streamed one)."""

    type: Literal["answer_sampled"] = "answer_sampled"
    sequence: int
    number: int
    of: int
    provider: str
    text: str


class AnswerUnusable(_Event):
    """The witness's answer of round `sequence` is no real testimony (`problem`: `no answer`,
    an echo of the question). The round is kept and the detective presses on it."""

    type: Literal["answer_unusable"] = "answer_unusable"
    sequence: int
    provider: str
    problem: str


class Advice(_Event):
    """Something the user should know before trusting the run (a demonstration model plays
    the detective), with what to do about it."""

    type: Literal["advice"] = "advice"
    text: str


class ContextFitted(_Event):
    """A model call's prompt was fitted to its provider's window (every call has one)."""

    type: Literal["context_fitted"] = "context_fitted"
    fit: ContextFit


class Discarded(_Event):
    """The text streamed for `role` since the last `ProviderChosen` is void (failover)."""

    type: Literal["discarded"] = "discarded"
    role: Role
    provider: str
    text: str
    reason: str


class TrailAdded(_Event):
    """An entry was added to the session's audit trail."""

    type: Literal["trail"] = "trail"
    entry: AuditTrailEntry


class GapAnalysisReady(_Event):
    """The detective's analysis of the answer of round `sequence`."""

    type: Literal["analysis"] = "analysis"
    sequence: int
    analysis: GapAnalysis


class JudgementReady(_Event):
    """Round `sequence`'s judgement, and the verdict the rounds make so far (computed by
    `engine.interrogation.verdict`: what the Live header shows as the running P(false))."""

    type: Literal["judgement"] = "judgement"
    sequence: int
    judgement: Judgement
    verdict: VerdictValue
    probability_false: float
    demonstration: bool = False
    """A demonstration model judged: the running verdict means nothing, and says so."""


class PairCompleted(_Event):
    """A round is complete and durably stored: this record is the round's checkpoint (see
    `engine.storage.journal`), so it carries the session's running totals too."""

    type: Literal["pair"] = "pair"
    pair: QuestionAnswerPair
    tokens: TokenTally | None = None
    """The session's tokens and cost once the round was stored (None in logs written while
    metadata.json was replaced at every round)."""
    repairs: int | None = None
    """The session's repairs so far (None as for `tokens`)."""


class AnswerDrawn(_Event):
    """One of the witness's answers to a claim's question was drawn (a checkpoint: the round
    so far, `drawing`, so a kill mid-round resumes with the answers already drawn). `claim`:
    the testimony claim's number, None for the session's own hypothesis."""

    type: Literal["answer_drawn"] = "answer_drawn"
    claim: int | None = None
    drawing: Drawing


class ClaimsSplit(_Event):
    """The testimony is taken apart: its claims, fixed from now on (a checkpoint, like a
    completed round: on the disk before it is shown)."""

    type: Literal["claims_split"] = "claims_split"
    testimony: Testimony


class ClaimExamined(_Event):
    """Claim `claim.number`'s examination ended with its state (a checkpoint: a resume
    examines only the claims without one)."""

    type: Literal["claim_examined"] = "claim_examined"
    claim: Claim
    tokens: TokenTally | None = None
    """The session's tokens and cost once the claim was stored."""
    repairs: int | None = None
    single: bool = False
    """The claim is the session's own hypothesis (`InterrogationSession.claim`)."""


class ClaimRead(_Event):
    """A signal read a claim (`engine.interrogation.signals`): the claim with its readings so
    far, its state still open (a checkpoint: a resume reads only the signals still missing).
    `single`: the claim is the session's own hypothesis (`InterrogationSession.claim`)."""

    type: Literal["claim_read"] = "claim_read"
    claim: Claim
    single: bool = False


class AuditReady(_Event):
    """The audit of the whole session."""

    type: Literal["audit"] = "audit"
    audit: AuditResult


class Finished(_Event):
    """The run ended with `status`; `reason` says why when it failed or was cancelled."""

    type: Literal["finished"] = "finished"
    status: SessionStatus
    reason: str | None = None
    family: FailureFamily | None = None
    """For a failed run, its exit code family (`engine.exit_family`): `connection` when its
    providers could not be reached, `timeout` when they did not answer in time."""
    usage: TokenTally | None = None
    """The session's tokens and cost at the end (None in logs written before costs)."""


InterrogationEvent = (
    Started
    | Phase
    | ProviderChosen
    | QuestionDelta
    | AnswerDelta
    | Reasoning
    | AnswerCutOff
    | AnswerSampled
    | AnswerDrawn
    | AnswerUnusable
    | Advice
    | ContextFitted
    | Discarded
    | TrailAdded
    | GapAnalysisReady
    | JudgementReady
    | PairCompleted
    | ClaimsSplit
    | ClaimExamined
    | ClaimRead
    | AuditReady
    | Finished
)

Checkpoint = (PairCompleted, ClaimsSplit, ClaimExamined, ClaimRead, AnswerDrawn)
"""The events that are checkpoints: synced to the disk before they are shown, and folded into
a running session's metadata when it is read (`engine.storage.layout.fold`)."""

_ADAPTER: TypeAdapter[InterrogationEvent] = TypeAdapter(
    Annotated[InterrogationEvent, Field(discriminator="type")]
)


@dataclass(frozen=True, slots=True)
class Record:
    """One line of events.jsonl: the event, its number (1, 2, …) and when it was written."""

    n: int
    at: float
    event: InterrogationEvent


def encode_record(record: Record) -> bytes:
    """The JSON line (with its newline) for `record`."""
    return journal_line(record.n, record.at, record.event)


def decode_record(line: bytes | str) -> Record:
    """Parse one JSON line; raises `ValueError` when it is not a valid record."""
    return Record(*read_journal_line(line, _ADAPTER.validate_python))
