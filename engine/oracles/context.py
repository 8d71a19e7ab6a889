"""An oracle's context: a session's case file as text, fitted to a window (SPEC §4, §5).

    case = CaseContext.build(session, note_texts, answer_texts, include_history, limits)
    prompt = oracle_prompt(oracle, case, request)   # a `Prompt` the router fits per provider
    prompt.plan                                     # after fitting: what was kept, what cut

The material is frozen when `CaseContext` is built: consulting several oracles at once shows
each exactly the same notes, rounds and earlier answers. Fitting is arithmetic over token
estimates taken once per piece (no re-rendering per try), in this order until the prompt fits —
what the user wrote is kept longest:

1. earlier oracle answers shortened to one even cap, then left out oldest first;
2. interrogation rounds shortened to one even cap, then left out from the middle (the first and
   the newest stay longest), then all of them;
3. the audit shortened;
4. notes shortened to one even cap, then left out oldest first (the newest stays, shortened).

The oracle's own text is never cut; when it alone does not fit, `DoesNotFit`.

The text holds no clock time (when a note was imported says nothing about the case): the same
case file gives the same prompt, byte for byte, so a consultation can be repeated exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.context.budget import Prompt
from engine.context.fit import MARK_TOKENS, DoesNotFit, Trim, largest_cap, shorten, span
from engine.context.policy import Limits
from engine.context.tokens import MESSAGE_OVERHEAD
from engine.models.notes import ContextSnapshot, LlmEntry, NoteEntry
from engine.models.session import InterrogationSession
from engine.oracles.catalog import Oracle
from engine.providers import Message, StreamRequest
from engine.report.claims import claim_line
from engine.report.words import contradiction, round_title

__all__ = ["CaseContext", "ContextPlan", "Holder", "Piece", "oracle_prompt", "plan", "snapshot"]

MIN_CAP = 200
"""Characters a shortened piece keeps at least before pieces are left out instead."""
LAST_CAP = 48
"""The newest note is cut down to this before the prompt is declared too big."""


@dataclass(frozen=True, slots=True)
class Piece:
    """One note, round, audit or earlier answer: a heading and a body."""

    number: int
    header: str
    body: str

    def tokens(self, count: Callable[[str], int]) -> tuple[int, int]:
        """(tokens of the header, tokens of the body)."""
        return count(self.header) + 2, count(self.body)

    def render(self, cap: int | None) -> str:
        return f"{self.header}\n\n{shorten(self.body, cap).strip()}\n"


@dataclass(frozen=True, slots=True)
class CaseContext:
    """The frozen material of one or several consultations."""

    notes: tuple[Piece, ...]
    rounds: tuple[Piece, ...]
    audit: Piece | None
    answers: tuple[Piece, ...]
    """Earlier oracle answers included (after the oracle policy of context.toml)."""
    hypothesis: str | None
    include_history: bool
    dropped: tuple[str, ...] = ()
    """What was left out before any fitting (policy limits, unreadable files)."""

    @classmethod
    def build(
        cls,
        session: InterrogationSession,
        notes: Sequence[tuple[NoteEntry, str]],
        answers: Sequence[tuple[LlmEntry, str]],
        include_history: bool,
        limits: Limits | None = None,
        dropped: Sequence[str] = (),
    ) -> CaseContext:
        """The context of `session` with the given note and answer texts."""
        dropped_lines = list(dropped)
        note_pieces = tuple(
            Piece(entry.sequence, f"### Note {entry.sequence}: {entry.source} ({entry.kind})",
                  text)
            for entry, text in notes
        )
        rounds = tuple(
            Piece(pair.sequence, f"### {round_title(pair.sequence)}",
                  f"Question: {pair.question.strip()}\n\nAnswer: {pair.answer.strip()}"
                  + ("\n\n(the answer was cut off at its token limit)"
                     if pair.answer_cut_off else ""))
            for pair in session.qa_pairs
        )
        audit = None
        if session.audit_result is not None:
            result = session.audit_result
            lines = [f"Consistency score: {result.consistency_score}/100"]
            lines += [f"- Contradiction: {contradiction(c)}" for c in result.contradictions]
            lines += [f"- Remaining gap: {g.line}" for g in result.remaining_gaps]
            if session.testimony is not None:  # each claim of the testimony, with its state
                lines += ["", "Claims of the testimony (round 1):",
                          *(f"- {claim_line(c)}" for c in session.testimony.claims)]
            lines += ["", result.summary.strip()]
            audit = Piece(0, "### Audit", "\n".join(lines))
        answer_pieces: list[Piece] = []
        if include_history:
            chosen = list(answers)
            if limits is not None and not limits.enabled:
                if chosen:
                    dropped_lines.append("earlier oracle answers left out (context.toml: "
                                         "oracle.enabled = false)")
                chosen = []
            if limits is not None and len(chosen) > limits.max_turns:
                cut = chosen[: len(chosen) - limits.max_turns]
                dropped_lines.append(f"earlier answers {span([e.sequence for e, _ in cut])} "
                                     f"left out (context.toml: max_turns = {limits.max_turns})")
                chosen = chosen[len(cut):]
            budget = limits.max_chars if limits is not None else 0
            total = sum(len(text) for _, text in chosen)
            cap = None
            if budget and total > budget and chosen:
                cap = max(MIN_CAP, budget // len(chosen))
                dropped_lines.append(f"earlier answers shortened to {cap} characters each "
                                     f"(context.toml: max_chars = {budget})")
            answer_pieces = [
                Piece(entry.sequence, f"### {entry.oracle_name} (answer {entry.sequence})",
                      shorten(text, cap))
                for entry, text in chosen
            ]
        hypothesis = session.hypothesis.text if session.hypothesis is not None else None
        return cls(note_pieces, rounds, audit, tuple(answer_pieces), hypothesis,
                   include_history, tuple(dropped_lines))


@dataclass(slots=True)
class ContextPlan:
    """How much of each part a prompt carries; `render` writes the context text."""

    note_cap: int | None = None
    notes_left_out: list[int] = field(default_factory=list)
    round_cap: int | None = None
    rounds_left_out: list[int] = field(default_factory=list)
    audit_cap: int | None = None
    answer_cap: int | None = None
    answers_left_out: list[int] = field(default_factory=list)

    def lines(self, case: CaseContext) -> list[str]:
        """What was trimmed, one line each (the snapshot's `trimmed`)."""
        out = list(case.dropped)
        if self.answers_left_out:
            out.append(f"earlier answers {span(self.answers_left_out)} left out")
        if self.answer_cap is not None and _cut(case.answers, self.answer_cap,
                                                               self.answers_left_out):
            out.append(f"earlier answers shortened to {self.answer_cap} characters")
        if self.rounds_left_out:
            out.append(f"rounds {span(self.rounds_left_out)} left out")
        if self.round_cap is not None and _cut(case.rounds, self.round_cap,
                                                             self.rounds_left_out):
            out.append(f"rounds shortened to {self.round_cap} characters")
        if case.audit is not None and self.audit_cap is not None \
                and len(case.audit.body) > self.audit_cap:
            out.append(f"audit shortened to {self.audit_cap} characters")
        if self.notes_left_out:
            out.append(f"notes {span(self.notes_left_out)} left out")
        if self.note_cap is not None and _cut(case.notes, self.note_cap,
                                                           self.notes_left_out):
            out.append(f"notes shortened to {self.note_cap} characters")
        return out

    def sections(self, case: CaseContext) -> dict[str, str]:
        """The context's parts as text: notes, qa (interrogation and audit), answers."""
        notes = [p.render(self.note_cap) for p in case.notes
                 if p.number not in self.notes_left_out]
        rounds = [p.render(self.round_cap) for p in case.rounds
                  if p.number not in self.rounds_left_out]
        qa: list[str] = []
        if case.hypothesis is not None:
            qa.append(f"Hypothesis: {case.hypothesis.strip()}\n")
            if self.rounds_left_out:
                qa.append(f"(rounds {span(self.rounds_left_out)} left out for length)\n")
            qa += rounds
            if case.audit is not None:
                qa.append(case.audit.render(self.audit_cap))
        answers = [p.render(self.answer_cap) for p in case.answers
                   if p.number not in self.answers_left_out]
        return {
            "notes": "## Notes\n\n" + "\n".join(notes) if notes else "",
            "qa": "## Interrogation\n\n" + "\n".join(qa) if qa else "",
            "answers": "## Earlier oracle answers\n\n" + "\n".join(answers) if answers else "",
        }

    def render(self, case: CaseContext) -> str:
        parts = [text for text in self.sections(case).values() if text]
        if not parts:
            return "(The case file is empty: no notes, no interrogation yet.)\n"
        if self.notes_left_out and not any(p.number not in self.notes_left_out
                                           for p in case.notes):
            parts.insert(0, "(notes left out for length)\n")
        return "\n".join(parts)

    def included(self, case: CaseContext) -> tuple[int, int, int]:
        """(notes, rounds, earlier answers) the prompt carries."""
        return (len(case.notes) - len(self.notes_left_out),
                len(case.rounds) - len(self.rounds_left_out),
                len(case.answers) - len(self.answers_left_out))


def _cut(pieces: Sequence[Piece], cap: int, left_out: Sequence[int] = ()) -> bool:
    return any(len(p.body) > cap for p in pieces if p.number not in left_out)


class _Section:
    """One part's pieces with their token counts taken once, and its cost at a cap."""

    def __init__(self, pieces: Sequence[Piece], count: Callable[[str], int]) -> None:
        self.numbers = [p.number for p in pieces]
        self.sizes = [(*p.tokens(count), len(p.body)) for p in pieces]
        self.out: set[int] = set()

    def cost(self, cap: int | None) -> int:
        return sum(self.piece_cost(index, cap) for index, number in enumerate(self.numbers)
                   if number not in self.out)

    def piece_cost(self, index: int, cap: int | None) -> int:
        head, body, chars = self.sizes[index]
        if cap is None or chars <= cap:
            return head + body
        return head + -(-body * cap // max(chars, 1)) + MARK_TOKENS

    @property
    def longest(self) -> int:
        return max((chars for _, _, chars in self.sizes), default=0)


def plan(case: CaseContext, fixed: int, limit: int, count: Callable[[str], int]) -> ContextPlan:
    """The fullest `ContextPlan` whose estimate is within `limit` tokens, `fixed` being the
    oracle's own text and framing; `DoesNotFit` when not even the smallest form fits.

    Each piece is measured once; a try costs arithmetic over the pieces, not a rendering."""
    p = ContextPlan()
    notes, rounds = _Section(case.notes, count), _Section(case.rounds, count)
    audit = _Section((case.audit,) if case.audit is not None else (), count)
    answers = _Section(case.answers, count)
    base = fixed + 3 * 8 + 16  # section headings and the joins between pieces
    caps = {"note_cap": notes, "round_cap": rounds, "audit_cap": audit, "answer_cap": answers}
    costs = {name: section.cost(None) for name, section in caps.items()}

    def total() -> int:
        return base + sum(costs.values())

    def even_cap(attr: str, low: int = MIN_CAP) -> bool:
        """Set the largest even cap that fits; True when the prompt fits now."""
        section = caps[attr]
        others = total() - costs[attr]
        if section.longest <= low:
            return total() <= limit
        best = largest_cap(lambda cap: others + section.cost(cap) <= limit, low, section.longest)
        setattr(p, attr, best if best is not None else low)
        costs[attr] = section.cost(getattr(p, attr))
        return best is not None

    def leave_out(attr: str, index: int, left: list[int]) -> bool:
        section = caps[attr]
        number = section.numbers[index]
        costs[attr] -= section.piece_cost(index, getattr(p, attr))
        section.out.add(number)
        left.append(number)
        return total() <= limit

    if total() <= limit:
        return p
    # 1. earlier answers
    if case.answers:
        if even_cap("answer_cap"):
            return p
        for index in range(len(case.answers)):
            if leave_out("answer_cap", index, p.answers_left_out):
                return p
    # 2. rounds: shortened, then the middle left out, then the first, then the newest
    if case.rounds:
        if even_cap("round_cap"):
            return p
        last = len(case.rounds) - 1
        order = [*range(1, last), 0] + ([last] if last > 0 else [])
        for index in order:
            if leave_out("round_cap", index, p.rounds_left_out):
                return p
    # 3. the audit
    if case.audit is not None and even_cap("audit_cap"):
        return p
    # 4. notes: shortened, then the oldest left out; the newest cut down to LAST_CAP
    if case.notes:
        if even_cap("note_cap"):
            return p
        for index in range(len(case.notes) - 1):
            if leave_out("note_cap", index, p.notes_left_out):
                return p
        if even_cap("note_cap", LAST_CAP):
            return p
    raise DoesNotFit(total(), limit)


@dataclass(slots=True)
class Holder:
    """The plan of the newest fitting (the one that was sent: fitting ends on it)."""

    plan: ContextPlan | None = None


def oracle_prompt(
    oracle: Oracle, case: CaseContext, request: StreamRequest
) -> tuple[Prompt, Holder]:
    """A prompt the router fits to each provider, and where its last plan is kept."""
    holder = Holder()
    frame = oracle.render("")

    def compose(limit: int, count: Callable[[str], int]) -> tuple[list[Message], Trim]:
        fixed = count(frame) + MESSAGE_OVERHEAD
        chosen = plan(case, fixed, limit, count)
        holder.plan = chosen
        message = Message("user", oracle.render(chosen.render(case)))
        trim = Trim(shortened=tuple(x.number for x in case.rounds
                                    if chosen.round_cap is not None
                                    and len(x.body) > chosen.round_cap
                                    and x.number not in chosen.rounds_left_out),
                    omitted=tuple(chosen.rounds_left_out))
        return [message], trim

    return Prompt(request, compose), holder


def snapshot(case: CaseContext, chosen: ContextPlan | None, tokens: int | None,
             window: int | None) -> ContextSnapshot:
    """What a consultation was shown, for its `LlmEntry`."""
    chosen = chosen or ContextPlan()
    notes, rounds, answers = chosen.included(case)
    return ContextSnapshot(
        transcript_count=notes,
        llm_response_count=answers,
        include_llm_history=case.include_history,
        total_tokens_estimate=tokens,
        qa_count=rounds,
        audit_included=case.audit is not None,
        trimmed=chosen.lines(case),
        window=window,
    )
