"""An interrogation as blocks: what every front end shows of it, worded once.

    narration = Narration()
    for piece in narration.pieces(event):     # live events, or records replayed from a log
        match piece:
            case Block(kind, title, text, streaming, markdown): ...   # a new block
            case Append(text): ...            # more text of the streaming block
            case Void(line): ...              # the streaming block's text is void (failover)

The CLI printer (`run`, `resume`, `watch`) and the Live view render the same pieces, so they
say the same words; `session_blocks` narrates a stored session the same way for `show` and
the markdown export. A block's `text` is model text or
words from `engine.report.words`; a front end renders it as plain text (or markdown when
`markdown`), never as markup, and passes model text through `strip_control`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from engine.models.events import (
    AnswerCutOff,
    AnswerDelta,
    AnswerSampled,
    AnswerUnusable,
    AuditReady,
    ClaimExamined,
    ClaimsSplit,
    ContextFitted,
    Discarded,
    Finished,
    GapAnalysisReady,
    InterrogationEvent,
    JudgementReady,
    PairCompleted,
    Phase,
    ProviderChosen,
    QuestionDelta,
    Reasoning,
    Started,
    TrailAdded,
)
from engine.models.session import AuditResult, GapAnalysis, InterrogationSession, QuestionAnswerPair
from engine.models.testimony import Claim, Testimony
from engine.models.trail import ContextFit
from engine.report.claims import claim_line, marked_testimony
from engine.report.words import (
    ANSWER_CUT_OFF,
    comparisons_line,
    completeness,
    contradiction,
    cut_off_line,
    in_transcript,
    invalid_audit_line,
    judgement_line,
    narrative_line,
    note,
    round_title,
    running_verdict,
    summary_title,
    trail_line,
    verdict_line,
)

__all__ = ["Append", "Block", "BlockKind", "Calls", "Narration", "Piece", "Void", "analysis_lines",
           "audit_lines", "claim_round_blocks", "discarded_line", "finished_line",
           "reasoning_by_call", "reasoning_title", "session_blocks"]

BlockKind = Literal["heading", "question", "answer", "judgement", "analysis", "audit", "summary",
                    "mark", "note", "end", "reasoning", "claims", "testimony"]
"""`claims`: a testimony's claims, a line each with its state; `testimony`: the testimony
with each claim's mark after its sentence (`engine.report.claims`);
`mark`: a remark that is part of the transcript (an answer cut off, no answer);
`note`: an aside about how the run went (a failover, advice) — the CLI puts it on stderr;
`reasoning`: what a reasoning model thought before a reply (stored sessions, when asked)."""


@dataclass(frozen=True, slots=True)
class Block:
    """A new block: `streaming` ones get their text from the `Append`s that follow."""

    kind: BlockKind
    title: str = ""
    text: str = ""
    streaming: bool = False
    markdown: bool = False


@dataclass(frozen=True, slots=True)
class Append:
    """More text of the block being streamed."""

    text: str


@dataclass(frozen=True, slots=True)
class Void:
    """The text streamed into the current block is void; `line` says why."""

    line: str


Piece = Block | Append | Void


def analysis_lines(analysis: GapAnalysis) -> list[str]:
    """`completeness 60/100 · follow-up wanted`, then a line per gap."""
    return [completeness(analysis), *(f"- {gap.line}" for gap in analysis.gaps)]


def audit_lines(audit: AuditResult) -> list[str]:
    """The verdict, the consistency score, each contradiction and remaining gap."""
    verdict = verdict_line(audit)
    lines = [verdict] if verdict else []
    for extra in (narrative_line(audit), comparisons_line(audit), invalid_audit_line(audit)):
        if extra:
            lines.append(extra)
    lines.append(f"consistency {audit.consistency_score}/100")
    lines += [f"contradiction {contradiction(item)}" for item in audit.contradictions]
    lines += [f"remaining gap · {gap.line}" for gap in audit.remaining_gaps]
    return lines


def sample_title(number: int, of: int, provider: str) -> str:
    """`"Answer 2 of 3 · provider"`: the consistency protocol's further answers."""
    return f"Answer {number} of {of} · {provider}"


def discarded_line(provider: str, characters: int, reason: str) -> str:
    """What a reader is told when streamed text is voided by a failover."""
    return f"{characters} characters from {provider} discarded: {reason}"


def finished_line(session_id: str, status: str, reason: str | None) -> str:
    """`"Session 1a2b3c4d completed"`, or with `": why"` when it failed."""
    why = f": {reason}" if reason and status != "cancelled" else ""
    return f"Session {session_id[:8]} {status}{why}"


_STREAMS = {("detective", "question"): "question", ("witness", "answer"): "answer",
            ("witness", "testimony"): "testimony"}


def claims_block(testimony: Testimony) -> Block:
    """A testimony's claims (and the split's refused lines), a line each."""
    lines = [claim_line(claim) for claim in testimony.claims]
    lines += [f"refused: {line}" for line in testimony.refused]
    if testimony.problem:
        lines.append(testimony.problem)
    return Block("claims", "Claims", "\n".join(lines) or "no claims")


def claim_round_blocks(pair: QuestionAnswerPair, claim: str) -> list[Block]:
    """A testimony claim's round as shown (the transcript, and the Live tab's pane of one
    claim's rounds): its heading (`"Claim 4 · Q7"` and the claim), question, answer (with its
    samples' agreement), and judgement."""
    rounds = [
        Block("heading", f"Claim {pair.claim} · Q{pair.sequence}", claim),
        Block("question", f"Question · {pair.provider_used.detective}", pair.question,
              markdown=True),
        Block("answer", f"Answer · {pair.provider_used.witness}", pair.answer,
              markdown=True)]
    if pair.answer_mark:
        rounds.append(Block("mark", text=pair.answer_mark))
    if pair.judgement is not None:
        rounds.append(Block("judgement", f"Judgement {pair.sequence}",
                            judgement_line(pair.judgement)))
    return rounds


class Narration:
    """One interrogation's events in, pieces out; keeps what the words depend on (the
    round limit, the phase, the rounds already shown)."""

    def __init__(self) -> None:
        self.session_id = ""
        self.limit: int | None = None
        self.phase = ""
        self.status: str | None = None
        """The final status, once `Finished` is seen."""
        self.reason: str | None = None
        self.analysed: set[int] = set()
        self.testimony = ""
        """The testimony's text, once its pair is seen."""
        self.claims: dict[int, Claim] = {}
        """The testimony's claims by number, with their states so far."""
        self.answer_fit: ContextFit | None = None
        """How the witness's latest call was fitted: a cut answer says when its room was
        lowered to fit the window."""

    def pieces(self, event: InterrogationEvent) -> list[Piece]:
        """What `event` adds to the transcript (often nothing)."""
        match event:
            case Started(session_id=sid, hypothesis=text, iteration_limit=limit,
                         resumed_after=after):
                self.session_id, self.limit = sid, limit
                if after is not None:
                    return [Block("heading", f"Session {sid[:8]} resumed after round {after}")]
                self.analysed.clear()
                return [Block("heading", f"Session {sid[:8]} · up to {limit} rounds"),
                        Block("heading", "Hypothesis", text)]
            case Phase(phase=phase, sequence=sequence):
                self.phase = phase
                if phase == "question":
                    return [Block("heading", round_title(sequence, self.limit))]
                if phase == "audit":
                    return [Block("heading", "Audit")]
                if phase == "testimony":
                    return [Block("heading", "Testimony")]
                if phase == "samples":
                    return [Block("heading", "Samples", "the witness answers the question "
                                  "again, told nothing…")]
                if phase == "split":
                    return [Block("heading", "Claims", "the detective takes the testimony "
                                  "apart…")]
                if phase == "claims":
                    return [Block("heading", "Examining the claims")]
            case ProviderChosen(role=role, provider=provider):
                kind = _STREAMS.get((role, self.phase))
                if kind == "question":
                    return [Block("question", f"Question · {provider}", streaming=True,
                                  markdown=True)]
                if kind == "answer":
                    return [Block("answer", f"Answer · {provider}", streaming=True,
                                  markdown=True)]
                if kind == "testimony":
                    return [Block("answer", f"Testimony · {provider}", streaming=True,
                                  markdown=True)]
            case Discarded(provider=provider, text=text, reason=reason) \
                    if self.phase == "claims":  # nothing of a claim's rounds streams
                return [Block("note", text=discarded_line(provider, len(text), reason))]
            case ClaimsSplit(testimony=testimony):
                self.claims = {claim.number: claim for claim in testimony.claims}
                return [claims_block(testimony)]
            case ClaimExamined(claim=claim):
                self.claims[claim.number] = claim
                return [Block("judgement", f"Claim {claim.number}", claim_line(claim))]
            case PairCompleted(pair=pair) if pair.testimony:
                self.testimony = pair.answer
                self.analysed.add(pair.sequence)
                if self.phase == "testimony" and pair.provider_used.witness != "given":
                    return []  # streamed already
                title = "Testimony · " + (pair.provider_used.witness or "witness")
                heading = [] if self.phase == "testimony" else [Block("heading", "Testimony")]
                given: list[Piece] = [*heading,
                                      Block("answer", title, pair.answer, markdown=True)]
                if pair.answer_problem:
                    given.append(Block("mark", text=pair.answer_problem))
                return given
            case PairCompleted(pair=pair) if pair.claim is not None:
                self.analysed.add(pair.sequence)
                examined = self.claims.get(pair.claim)
                return list(claim_round_blocks(pair, examined.text if examined else ""))
            case QuestionDelta(text=text) | AnswerDelta(text=text):
                return [Append(text)]
            case AnswerCutOff():
                return [Block("mark", text=cut_off_line(self.answer_fit))]
            case AnswerUnusable(problem=problem):
                return [Block("mark", text=problem)]
            case AnswerSampled(number=number, of=of, provider=provider, text=text):
                return [Block("answer", sample_title(number, of, provider), text,
                              markdown=True)]
            case Discarded(provider=provider, text=text, reason=reason):
                return [Void(discarded_line(provider, len(text), reason))]
            case TrailAdded(entry=entry):
                return [Block("note", text=trail_line(entry))] if in_transcript(entry) else []
            case JudgementReady(judgement=judgement, sequence=sequence, verdict=verdict,
                                probability_false=p_false, demonstration=demo):
                return [Block("judgement", f"Judgement {sequence}", judgement_line(judgement)
                              + "\n" + running_verdict(verdict, p_false, demo))]
            case GapAnalysisReady(analysis=analysis, sequence=sequence):
                self.analysed.add(sequence)
                return [self._analysis(analysis, sequence)]
            case AuditReady(audit=audit):
                marked = [Block("testimony", "The testimony, marked",
                                marked_testimony(self.testimony, list(self.claims.values())))
                          ] if self.testimony and self.claims else []
                return [*marked, Block("audit", "Findings", "\n".join(audit_lines(audit))),
                        Block("summary", summary_title(audit), audit.summary, markdown=True)]
            case Finished(status=status, reason=reason):
                self.status, self.reason = status, reason
                return [Block("end", text=finished_line(self.session_id, status, reason))]
            case PairCompleted(pair=pair) if pair.sequence not in self.analysed:
                # a log without the round's stream (re-logged after a crash): the whole pair
                self.analysed.add(pair.sequence)
                pieces: list[Piece] = [
                    Block("heading", round_title(pair.sequence, self.limit)),
                    Block("question", f"Question · {pair.provider_used.detective}",
                          pair.question, markdown=True),
                    Block("answer", f"Answer · {pair.provider_used.witness}", pair.answer,
                          markdown=True)]
                if pair.answer_cut_off:
                    pieces.append(Block("mark", text=ANSWER_CUT_OFF))
                if pair.answer_mark:  # an empty one says so itself
                    pieces.append(Block("mark", text=pair.answer_mark))
                of = len(pair.samples) + 1
                pieces += [Block("answer", sample_title(number, of, pair.provider_used.witness),
                                 text, markdown=True)
                           for number, text in enumerate(pair.samples, start=2)]
                if pair.judgement is not None:
                    pieces.append(Block("judgement", f"Judgement {pair.sequence}",
                                        judgement_line(pair.judgement)))
                return [*pieces, self._analysis(pair.gap_analysis, pair.sequence)]
            case PairCompleted():
                pass
            case _:  # any other event: its one line from engine.report.words, if it has one
                if isinstance(event, ContextFitted) and event.fit.role == "witness":
                    self.answer_fit = event.fit
                line = note(event)
                if line:
                    return [Block("note", text=line)]
        return []

    @staticmethod
    def _analysis(analysis: GapAnalysis, sequence: int) -> Block:
        return Block("analysis", f"Gap analysis {sequence}",
                     "\n".join(analysis_lines(analysis)))


Calls = dict[tuple[str, int | None], tuple[str, str]]
"""Reasoning by call: (phase, round) → (role, what it thought)."""


def reasoning_by_call(events: Iterable[InterrogationEvent]) -> Calls:
    """The reasoning a session's events hold, joined by call (its retries and samples in
    order): what `session_blocks` puts before each question, answer, analysis and audit."""
    found: Calls = {}
    for event in events:
        if isinstance(event, Reasoning):
            key = (event.phase, event.sequence)  # the audit's has no round
            role, text = found.get(key, (event.role, ""))
            found[key] = (role, text + event.text)
    return found


def reasoning_title(role: str) -> str:
    """`"Reasoning · detective"`."""
    return f"Reasoning · {role}"


_CALLS = frozenset({"question", "answer", "judgement", "analysis", "audit"})
"""The blocks that are a call's reply: that call's reasoning (its phase is the block's kind)
goes before the first of them."""


def session_blocks(session: InterrogationSession, reasoning: Calls | None = None
                   ) -> list[Block]:
    """A stored session's rounds and audit as the blocks a live run showed (what `show` and
    the markdown export render): the same narration, fed the stored rounds; with
    `reasoning` (`reasoning_by_call`), each call's reasoning before its reply."""
    narration = Narration()
    narration.limit = session.iteration_limit
    blocks: list[Block] = []

    def add(pieces: list[Piece], sequence: int | None) -> None:
        placed: set[str] = set()
        for piece in pieces:
            if not isinstance(piece, Block):
                continue
            phase = piece.kind
            if reasoning and phase in _CALLS and phase not in placed:
                placed.add(phase)
                found = reasoning.get((phase, sequence))
                if found and found[1].strip():
                    blocks.append(Block("reasoning", reasoning_title(found[0]), found[1]))
            blocks.append(piece)

    for pair in session.qa_pairs:
        add(narration.pieces(PairCompleted(pair=pair)), pair.sequence)
        if pair.testimony and session.testimony is not None:
            add(narration.pieces(ClaimsSplit(testimony=session.testimony)), None)
    if session.audit_result is not None:
        add(narration.pieces(Phase(phase="audit", sequence=len(session.qa_pairs))), None)
        add(narration.pieces(AuditReady(audit=session.audit_result)), None)
    return blocks
