"""The interrogation entities of SPEC §1 (seed 002): what a session is, as stored and exported.

The consistency score is computed here, not by a model, so it can be recomputed from any
stored session:

    score = max(0, 100 - 10 × contradictions - gap penalty)
    gap penalty = Σ over the remaining gaps of GAP_WEIGHTS[severity]  (high 15, medium 8, low 3)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.errors import SessionError
from engine.models.judgement import Judgement
from engine.models.notes import LlmEntry, NoteEntry, UIPreferences
from engine.models.testimony import Claim, Testimony
from engine.models.trail import AuditTrailEntry, ContextFit, now
from engine.models.usage import TokenTally
from engine.text import strip_control

__all__ = [
    "ANSWER_CUT_OFF",
    "check_resumable",
    "CONTRADICTION_PENALTY",
    "GAP_WEIGHTS",
    "SCHEMA_VERSION",
    "AuditResult",
    "Contradiction",
    "EvalTag",
    "Gap",
    "GapAnalysis",
    "Hypothesis",
    "InterrogationSession",
    "ProvidersUsed",
    "QuestionAnswerPair",
    "SessionStatus",
    "NOTHING_ASKED",
    "SHOWN_STATUSES",
    "VerdictValue",
    "WitnessBrief",
    "WitnessDocument",
    "PROTOCOLS",
    "Protocol",
    "unknown_protocols",
    "WitnessMode",
    "STANCES",
    "Comparison",
    "Stance",
    "consistency_score",
    "now",
]

SCHEMA_VERSION = 2
"""Version of the stored session format (metadata.json and the JSON export). Version 1 (before
notes and oracle consultations) still loads: the fields it lacks take their defaults."""

#: Points one remaining gap costs the consistency score, by severity.
GAP_WEIGHTS: dict[str, int] = {"high": 15, "medium": 8, "low": 3}
#: Points one contradiction costs the consistency score.
CONTRADICTION_PENALTY = 10

SessionStatus = Literal["notes", "running", "completed", "failed", "limit-reached", "cancelled"]
"""`notes`: a case file whose interrogation has not been started yet."""
NOTHING_ASKED = "nothing-asked"
"""The status a user reads for a run stored `completed` or `limit-reached` that asked the
witness nothing (`InterrogationSession.asked_nothing`): no verdict came from evidence."""
SHOWN_STATUSES = ("running", "completed", "limit-reached", NOTHING_ASKED, "failed",
                  "cancelled", "interrupted", "notes", "damaged")
"""Every status a session is listed with: the stored ones, `nothing-asked`, `interrupted`
(stored running, no process runs it) and `damaged` (its metadata cannot be read)."""
VerdictValue = Literal["true", "false", "undetermined"]
"""The verdict on the hypothesis (computed from the rounds' judgements)."""
GapCategory = Literal["missing_information", "ambiguity", "inconsistency", "vagueness"]
Severity = Literal["low", "medium", "high"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hypothesis(_Model):
    """What the interrogation sets out to test."""

    text: Annotated[str, Field(min_length=1)]
    created_at: datetime = Field(default_factory=now)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the hypothesis is empty")
        return value


class Gap(_Model):
    """One thing the witness left missing, ambiguous, inconsistent or vague."""

    category: GapCategory
    description: Annotated[str, Field(min_length=1)]
    severity: Severity

    @property
    def line(self) -> str:
        """`"high · vagueness: …"`, safe for a terminal (control characters removed)."""
        return f"{self.severity} · {self.category}: {strip_control(self.description).strip()}"


class GapAnalysis(_Model):
    """The detective's verdict on one answer."""

    gaps: list[Gap] = Field(default_factory=list)
    completeness_score: Annotated[int, Field(ge=0, le=100)]
    requires_follow_up: bool
    invalid: str | None = None
    """Set when the detective gave no valid analysis twice: the rule it broke. The analysis is
    then a stand-in (completeness 0, follow-up needed) and the loop's rule asks on."""


class ProvidersUsed(_Model):
    """`"{provider}:{model}"` that played each role in one round."""

    detective: str
    witness: str


ANSWER_CUT_OFF = "the answer was cut off at the token limit"
"""How a cut-off answer is marked, for the user and for the detective alike."""


class QuestionAnswerPair(_Model):
    """One completed round: question, answer, and the detective's analysis of it."""

    sequence: Annotated[int, Field(ge=1)]
    question: Annotated[str, Field(min_length=1)]
    answer: str
    timestamp: datetime = Field(default_factory=now)
    gap_analysis: GapAnalysis
    provider_used: ProvidersUsed
    answer_cut_off: bool = False
    """The witness's answer ended at its token limit (`finish_reason: length`): it is only the
    first part of what the witness would have said."""
    answer_problem: str | None = None
    """Why the answer is no real testimony (`"no answer"`, `"the answer only repeats the
    question"`), None for a real answer. The round is kept: the detective presses on it."""
    usage: TokenTally | None = None
    """The round's tokens and cost (its question, answer and analysis calls)."""
    samples: list[str] = Field(default_factory=list)
    """The `consistency` protocol's further answers to the same question, each asked anew
    (`answer` is the first); empty under `cross-exam`."""
    judgement: Judgement | None = None
    """The detective's judgement of this exchange alone (None: a hypothesis that states no
    claim, or a session from before judgements)."""
    claim: Annotated[int, Field(ge=1)] | None = None
    """The testimony's claim this round examined (its number), None outside a testimony."""
    testimony: bool = False
    """This pair is the testimony itself (`qa_pairs[0]`): the hypothesis asked and the
    witness's answer, or the testimony as given."""

    @property
    def answered(self) -> bool:
        """Whether the witness gave a real answer in this round."""
        return self.answer_problem is None and bool(self.answer.strip())

    @property
    def answer_mark(self) -> str | None:
        """The answer's problem as shown beside it; None when there is none, or when an empty
        answer says it itself ("(no answer)")."""
        if self.answer.strip() or self.answer_problem != "no answer":
            return self.answer_problem
        return None


class Drawing(_Model):
    """A round of a claim under way: its question and the witness's answers drawn so far
    (each draw a checkpoint, so a kill mid-round resumes with them: `interrogation.rounds`)."""

    round: Annotated[int, Field(ge=1)]
    """The claim's own round number (its first is 1)."""
    question: Annotated[str, Field(min_length=1)]
    asked_by: str = ""
    """Who wrote the question (`"{provider}:{model}"`)."""
    answers: list[str] = Field(default_factory=list)
    providers: list[str] = Field(default_factory=list)
    finish_reasons: list[str] = Field(default_factory=list)


class Contradiction(_Model):
    """Two answers that cannot both be true; indexes are 0-based into `qa_pairs` (the same
    index twice: one round's answers disagree, under the consistency protocol)."""

    qa_pair_indexes: tuple[int, int]
    description: Annotated[str, Field(min_length=1)]


Stance = Literal["agrees", "contradicts", "unrelated"]
"""How one answer stands to the hypothesis, in the audit's comparison."""
STANCES: tuple[Stance, ...] = ("agrees", "contradicts", "unrelated")


class Comparison(_Model):
    """The audit's reading of one round: does its answer agree with the hypothesis?"""

    round: Annotated[int, Field(ge=1)]
    stance: Stance


class AuditResult(_Model):
    """The audit of a whole session: the reproducible consistency score, and the detective's
    verdict on the hypothesis (its judgement, in structured fields of its own; sessions
    audited before verdicts existed load with them unset)."""

    consistency_score: Annotated[int, Field(ge=0, le=100)]
    contradictions: list[Contradiction] = Field(default_factory=list)
    remaining_gaps: list[Gap] = Field(default_factory=list)
    summary: Annotated[str, Field(min_length=1)]
    verdict: VerdictValue | None = None
    """`true`, `false` or `undetermined`: does the hypothesis hold?"""
    probability_false: Annotated[float, Field(ge=0, le=1)] | None = None
    """The detective's probability that the hypothesis is false (0–1)."""
    deciding_rounds: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)
    """The rounds (numbered from 1) whose answers decided the verdict."""
    comparisons: list[Comparison] = Field(default_factory=list)
    """Each answer the detective set against the hypothesis before its verdict."""
    rule_broken: str | None = None
    """Set when the detective's audit broke a rule of detektiv's twice (no deciding round, a
    verdict against its probability, JSON that misses the schema…): the verdict is then
    `undetermined` and this is why."""
    invalid_reply: str | None = None
    """The audit that broke the rule, as the detective wrote it (kept, shown, never used)."""
    demonstration: bool = False
    """A demonstration model spoke for the detective in this session: its verdict means
    nothing."""
    computed: bool = False
    """The verdict was computed from the rounds' judgements (`engine.interrogation.verdict`),
    not written by the detective (sessions from before judgements: False)."""
    undetermined_because: str | None = None
    """Why a computed verdict is `undetermined` (no round bore on it, a conflict, no claim)."""
    narrative_verdict: VerdictValue | None = None
    """The auditor's own one-word reading, beside its summary: shown next to the computed
    verdict where it differs, never used."""
    narrative_against: str | None = None
    """A sentence of the summary that states the opposite of the computed verdict ("The
    hypothesis is true." beside `false`), set when there is one: the summary is shown marked
    as contradicted by the verdict (`interrogation.audit.against_verdict`)."""


def consistency_score(contradictions: int, remaining_gaps: list[Gap]) -> int:
    """The audit's consistency score (see the module docstring for the formula)."""
    penalty = sum(GAP_WEIGHTS[gap.severity] for gap in remaining_gaps)
    return max(0, 100 - CONTRADICTION_PENALTY * contradictions - penalty)


Protocol = Literal["cross-exam", "consistency"]
"""How a session questions its witness: `cross-exam`, one answer a question (the default);
`consistency`, each question put to the witness several times (SelfCheckGPT's finding: a
model that knows a fact says it the same way each time, one that makes it up does not), the
answers judged side by side."""
PROTOCOLS: tuple[Protocol, ...] = ("cross-exam", "consistency")


def unknown_protocols(names: Iterable[str]) -> str | None:
    """Why `names` are no protocols to run (`"unknown protocol 'x' (known: …)"`), or None."""
    unknown = [name for name in names if name not in PROTOCOLS]
    if not unknown:
        return None
    return (f"unknown protocol {', '.join(repr(name) for name in unknown)} "
            f"(known: {', '.join(PROTOCOLS)})")


WitnessMode = Literal["planted", "defend", "open", "document"]
"""How an evaluated claim is put to the witness (`detektiv eval --mode`); `document`: told
nothing, like `open`, but holding the item's document (`WitnessDocument`)."""


class WitnessBrief(_Model):
    """A claim the witness is made to stand behind before its first question (an evaluation's
    item): `planted`, its own first answer to `question` under the neutral witness prompt;
    `defend`, told it asserted `claim` and must defend it consistently; `open`, nothing: the
    witness is not primed, and the detective finds out what it knows. Given alike for true
    and false claims: nothing in it tells the label."""

    mode: WitnessMode
    claim: Annotated[str, Field(min_length=1)]
    """What the detective tests (the session's hypothesis)."""
    question: str | None = None
    """The question the claim answers (planted: the witness's first user turn)."""
    answer: str | None = None
    """The witness's planted first answer (planted; else the claim itself)."""


class WitnessDocument(_Model):
    """A document the witness holds (`--witness-document`, a case's notes, an evaluation
    item's knowledge): given in its system prompt, fitted to its window; the detective never
    sees it."""

    name: Annotated[str, Field(min_length=1)]
    size: Annotated[int, Field(ge=0)]
    """Its length in characters."""
    sha256: str
    text: str | None
    """The document itself; None in an export that left it out (the default)."""


class EvalTag(_Model):
    """Which evaluation run, item and repeat a session was interrogated for."""

    run: str
    item: str
    repeat: Annotated[int, Field(ge=1)] = 1


class InterrogationSession(_Model):
    """A whole interrogation, as stored in metadata.json and exported as JSON."""

    schema_version: Literal[1, 2] = 2
    id: uuid.UUID = Field(default_factory=uuid.uuid4)
    title: str | None = None
    """The case's name (`detektiv new TITLE`); None: the hypothesis names it."""
    hypothesis: Hypothesis | None = None
    """None only while the status is `notes` (no interrogation yet)."""
    start_time: datetime = Field(default_factory=now)
    end_time: datetime | None = None
    status: SessionStatus = "running"
    iteration_limit: Annotated[int, Field(ge=5, le=20)]
    current_iteration: Annotated[int, Field(ge=0)] = 0
    """Rounds completed so far (equals `len(qa_pairs)`)."""
    qa_pairs: list[QuestionAnswerPair] = Field(default_factory=list)
    audit_result: AuditResult | None = None
    audit_trail: list[AuditTrailEntry] = Field(default_factory=list)
    protocol: Protocol = "cross-exam"
    consistency_samples: Annotated[int, Field(ge=2, le=10)] = 3
    """Answers to each question under the `consistency` protocol (fixed when it starts)."""
    repairs: int = 0
    """Replies asked for again because they broke a rule of detektiv's (an unusable question,
    an invalid analysis or audit): a measure of how hard the models found the rules."""
    detective: list[str] = Field(default_factory=list)
    """The detective chain asked for (`--detective`), empty for the configured one."""
    witness: list[str] = Field(default_factory=list)
    """The witness chain asked for (`--witness`), empty for the configured one."""
    error: str | None = None
    """Why the session failed, in one line."""
    demonstration: bool = False
    """A demonstration model played the detective when a run of it started: every verdict of
    it, the running one and a failed session's included, says it means nothing."""
    events_recorded: Annotated[int, Field(ge=0)] = 0
    """How many events events.jsonl held when this was saved (finds a truncated log)."""
    context_fits: list[ContextFit] = Field(default_factory=list)
    """How each model call was fitted to its window, in order."""
    notes: list[NoteEntry] = Field(default_factory=list)
    """Notes and transcripts the user typed or imported, in order (`transcripts/`)."""
    llm_entries: list[LlmEntry] = Field(default_factory=list)
    """Oracle consultations, in order (`llm_responses/`)."""
    ui_preferences: UIPreferences = Field(default_factory=UIPreferences)
    witness_brief: WitnessBrief | None = None
    """A claim the witness stands behind from the start (an evaluation's item), else None."""
    witness_document: WitnessDocument | None = None
    """The document the witness holds, else None."""
    testimony: Testimony | None = None
    """The testimony taken apart into claims, when the hypothesis asks or states several
    things (`engine.models.testimony`), else None."""
    drawing: dict[str, Drawing] = Field(default_factory=dict)
    """Rounds under way, by claim ("0": the session's own hypothesis): what a resume goes on
    from (empty once each round is stored)."""
    claim: Claim | None = None
    """A single-sentence hypothesis examined as a claim (its signals' readings, its state and
    pooled P(false): `engine.interrogation.examine`), else None (a testimony's claims are in
    `testimony`; sessions from before issue 72 have only their rounds)."""
    topic: str | None = None
    """The question the hypothesis answers, when it is a claim of a testimony examined on its
    own (an evaluation's labelled claim): what the detective alone is told, and what the
    witness's `samples` answer."""
    samples: list[str] | None = None
    """The witness's answers to `topic` drawn again, given with an evaluation's claim (one
    draw a testimony, shared by its claims)."""
    answer: str | None = None
    """The witness's answer to the hypothesis, given with it rather than asked (an answer made
    elsewhere: an Inspect sample's output): the session's testimony, as if the witness had
    given it, so its claims are read against the witness's answers drawn again."""
    answered_by: str | None = None
    """Who gave `answer` (where a witness's name is shown), else "given"."""
    eval_tag: EvalTag | None = None
    """The evaluation run this session belongs to, else None."""
    tokens: TokenTally = Field(default_factory=TokenTally)
    """Tokens used by the session's model calls."""
    prompts: dict[str, str] = Field(default_factory=dict)
    """The prompts its last run used: name → "shipped sha256:…" or "user PATH sha256:…" (a
    verdict can be reproduced with the same prompt files)."""

    @field_validator("schema_version")
    @classmethod
    def _upgrade(cls, value: int) -> Literal[1, 2]:
        return 2  # version 1 lacks only fields that have defaults: it is version 2 as read

    @model_validator(mode="after")
    def _check(self) -> InterrogationSession:
        if self.hypothesis is None and self.status != "notes":
            raise ValueError(f"a {self.status} session needs a hypothesis")
        if self.title is None and self.hypothesis is None:
            raise ValueError("a session needs a title or a hypothesis")
        for index, pair in enumerate(self.qa_pairs, start=1):
            if pair.sequence != index:
                raise ValueError(f"qa_pairs[{index - 1}] has sequence {pair.sequence}")
        if self.audit_result is not None:
            for contradiction in self.audit_result.contradictions:
                if not all(0 <= i < len(self.qa_pairs) for i in contradiction.qa_pair_indexes):
                    raise ValueError("a contradiction refers to a QA pair that does not exist")
            if any(n > len(self.qa_pairs) for n in self.audit_result.deciding_rounds):
                raise ValueError("the verdict names a round that does not exist")
        return self

    @property
    def short_id(self) -> str:
        """The first 8 characters of the id, as used in the folder name."""
        return str(self.id)[:8]

    @property
    def name(self) -> str:
        """What the session is called: its title, else its hypothesis."""
        if self.title:
            return self.title
        return self.hypothesis.text if self.hypothesis is not None else ""

    @property
    def witness_unasked(self) -> bool:
        """Whether the witness has not been asked anything yet: no round, no answer drawn for
        the claim, no testimony."""
        if self.testimony is not None or self.qa_pairs:
            return False
        return self.claim is None or "samples" not in self.claim.readings

    @property
    def asked_nothing(self) -> bool:
        """Whether the run ended (`completed` or `limit-reached`) without asking the witness
        anything (`witness_unasked`: the detective gave no usable question)."""
        return self.status in ("completed", "limit-reached") and self.witness_unasked

    @property
    def shown_status(self) -> str:
        """The status a user reads (`NOTHING_ASKED` where it applies; see
        `engine.workspace.sessions.Sessions.status` for `interrupted`)."""
        return NOTHING_ASKED if self.asked_nothing else self.status

    @property
    def hypothesis_text(self) -> str:
        """The hypothesis; `SessionError` for a notes-only session (no interrogation)."""
        if self.hypothesis is None:
            raise SessionError(f"session {self.short_id} has no interrogation yet")
        return self.hypothesis.text


def check_resumable(session: InterrogationSession) -> None:
    """Raise `SessionError` unless the session can be continued."""
    if session.status == "notes":
        raise SessionError(
            f"session {session.short_id} has no interrogation yet; start one with: "
            f"detektiv run --session {session.short_id} \"HYPOTHESIS\""
        )
    if session.status in ("completed", "limit-reached"):
        raise SessionError(
            f"session {session.short_id} already ended ({session.status}); nothing to resume"
        )
