"""The words of a testimony: how a claim, its state and the marked testimony read.

Every front end (the CLI's `run`, `watch` and `show`, the Live tab, the markdown export)
takes them from here. A state has a symbol as well as a colour, so it reads without colour
(`NO_COLOR`, a log, a screen reader).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.interrogation.pooling import SIGNAL_NAMES
from engine.models.session import InterrogationSession
from engine.models.testimony import Claim, ClaimState, Testimony
from engine.text import one_line, strip_control

__all__ = ["MARKS", "SEVERITY", "Findings", "MarkedPart", "claim_line", "claim_mark",
           "claim_row", "claims_tally", "findings", "marked_parts", "marked_testimony",
           "severest", "testimony_reason", "testimony_summary", "unfound_words"]

MARKS: dict[ClaimState, str] = {
    "pending": "…", "held": "✓", "contradicted": "✗", "unsupported": "⊘", "unsure": "?",
    "not checkable": "~", "not examined": "-",
}
"""Each state's symbol."""

SEVERITY: tuple[ClaimState, ...] = ("contradicted", "unsupported", "unsure", "pending", "held",
                                    "not examined", "not checkable")
"""The states, the most serious first: what a sentence several claims share is marked by."""


def severest(claims: Sequence[Claim]) -> Claim:
    """The claim of `claims` whose state is the most serious (`SEVERITY`)."""
    return min(claims, key=lambda c: SEVERITY.index(c.state))


_ORDER: tuple[ClaimState, ...] = ("held", "contradicted", "unsupported", "unsure",
                                  "not checkable", "not examined", "pending")


def claim_mark(claim: Claim) -> str:
    """`"✓3"`: the state's symbol and the claim's number."""
    return f"{MARKS[claim.state]}{claim.number}"


def claim_line(claim: Claim) -> str:
    """`"✓ 3 held · p(false) 0.08 · round 5 · alone 0.91 · samples 0.88 · rounds 0.80 ·
    Vitamin B3 …"`: one claim, with each signal's reading (P(true)) pooled into its P(false)
    (`engine.interrogation.signals`), the reading that decided it against its rounds, and the
    words its document lacks."""
    parts = [f"{MARKS[claim.state]} {claim.number} {claim.state}"]
    if claim.probability_false is not None:
        parts.append(f"p(false) {claim.probability_false:.2f}")
    if claim.deciding is not None:
        parts.append(f"round {claim.deciding}")
    read = [f"{name} {claim.readings[name].p_true:.2f}" for name in SIGNAL_NAMES
            if name in claim.readings and claim.readings[name].p_true is not None]
    if read:
        parts.append("p(true) " + ", ".join(read))
    if claim.decided_by is not None:
        parts.append(f"decided by {claim.decided_by}")
    if claim.unfound and claim.why != unfound_words(claim.unfound):
        parts.append(unfound_words(claim.unfound))
    if claim.why:
        parts.append(strip_control(claim.why))
    return " · ".join(parts) + f" · {one_line(strip_control(claim.text), 300)}"


def claim_row(claim: Claim) -> tuple[str, str]:
    """A claim in a list a line long: `("✓ 3 Niacin is vitamin B3.", "held 0.08")` — its mark,
    number and words (cut first where the line is short), then its state and P(false), which
    are never cut (`claim_line` has its readings)."""
    state = claim.state if claim.probability_false is None else \
        f"{claim.state} {claim.probability_false:.2f}"
    return f"{MARKS[claim.state]} {claim.number} {one_line(claim.text, None)}", state


def unfound_words(words: Sequence[str]) -> str:
    """`"the document has none of: prequel, trilogy"`: a claim's words its document lacks
    (`verdict`'s rule 9)."""
    return "the document has none of: " + ", ".join(strip_control(w) for w in words)


def claims_tally(claims: Sequence[Claim]) -> str:
    """`"3/8 held, 2 contradicted, 1 unsure"`: the claims' states counted (what the sessions
    list shows for a testimony)."""
    if not claims:
        return "no claims"
    counts = {state: sum(1 for c in claims if c.state == state) for state in _ORDER}
    parts = [f"{counts['held']}/{len(claims)} held"]
    parts += [f"{counts[state]} {state}" for state in _ORDER[1:] if counts[state]]
    return ", ".join(parts)


def testimony_summary(testimony: Testimony, verdict: str | None) -> str:
    """The summary computed from the claims (no model writes it)."""
    claims = testimony.claims
    if testimony.problem and not claims:
        return f"Nothing was examined: {strip_control(testimony.problem)}."
    lines = [f"The testimony was taken apart into {len(claims)} claim"
             f"{'s' if len(claims) != 1 else ''}: {claims_tally(claims)}."]
    for state, words in (("contradicted", "The witness's own answers contradicted"),
                         ("unsupported", "The document does not support"),
                         ("unsure", "Its answers did not settle")):
        found = [c for c in claims if c.state == state]
        if found:
            lines.append(f"{words}: " + "; ".join(
                f"claim {c.number} (\"{one_line(strip_control(c.text), 120)}\")"
                for c in found) + ".")
    if verdict is not None:
        lines.append(f"Verdict on the testimony: {verdict}.")
    return "\n\n".join(lines)


def testimony_reason(session: InterrogationSession) -> str:
    """Why a testimony's run ended as it did, in one line."""
    testimony = session.testimony
    if testimony is None:
        return "no testimony"
    if testimony.problem and not testimony.claims:
        return strip_control(testimony.problem)
    return (f"the testimony's {len(testimony.claims)} claim"
            f"{'s' if len(testimony.claims) != 1 else ''}: {claims_tally(testimony.claims)}")


@dataclass(frozen=True, slots=True)
class Findings:
    """What a session's examination found, as numbers and one paragraph (an Inspect score):
    its verdict and P(false), its claims counted by state, the share of its checkable
    claims held and not held (contradicted or unsupported), or the problem that left
    nothing examined."""

    verdict: str | None
    p_false: float | None
    counts: dict[str, int]
    checkable: int
    held_share: float | None
    contradicted_share: float | None
    problem: str | None
    explanation: str


_FOUND = (("contradicted", "Contradicted"), ("unsupported", "Unsupported by the document"),
          ("unsure", "Unsure"))


def findings(session: InterrogationSession) -> Findings:
    """`Findings` of `session`: a testimony's claims, or its one claim."""
    testimony = session.testimony
    claims = list(testimony.claims) if testimony is not None else (
        [session.claim] if session.claim is not None else [])
    audit = session.audit_result
    verdict = audit.verdict if audit is not None else None
    p_false = audit.probability_false if audit is not None else None
    counts: dict[str, int] = {state: n for state in _ORDER
              if (n := sum(1 for c in claims if c.state == state))}
    checkable = sum(1 for c in claims if c.state != "not checkable")
    problem = testimony.problem if testimony is not None and testimony.problem and \
        not claims else None
    if problem is None and session.status in ("failed", "cancelled", "interrupted"):
        problem = session.error or f"the session ended {session.status}"
    short = session.short_id
    if problem is not None or (audit is None and not claims):
        why = strip_control(problem or f"the session ended {session.status} with no verdict")
        return Findings(verdict, p_false, counts, checkable, None, None, why,
                        f"Nothing was examined: {why}. Session {short} "
                        f"(detektiv export {short}).")
    held = counts.get("held", 0)
    against = counts.get("contradicted", 0) + counts.get("unsupported", 0)
    parts = [f"Verdict {verdict or 'none'}" + (f" (p(false) {p_false:.2f})"
                                                if p_false is not None else "")
             + f": {claims_tally(claims)}."]
    for state, words in _FOUND:
        found = [c for c in claims if c.state == state]
        if found:
            parts.append(f"{words}: " + "; ".join(
                f"claim {c.number} \"{one_line(strip_control(c.text), 100)}\""
                + (f" (p(false) {c.probability_false:.2f})"
                   if c.probability_false is not None else "") for c in found) + ".")
    parts.append(f"Session {short} (detektiv export {short}).")
    return Findings(verdict, p_false, counts, checkable,
                    held / checkable if checkable else None,
                    against / checkable if checkable else None, None, " ".join(parts))


@dataclass(frozen=True, slots=True)
class MarkedPart:
    """A run of the testimony's text and the claims that stand on it (none: plain text)."""

    text: str
    claims: tuple[Claim, ...] = ()


def marked_parts(text: str, claims: Sequence[Claim]) -> list[MarkedPart]:
    """The testimony cut at its claims' spans, in order: each span with the claims placed
    on it (several claims may share one sentence). Claims with no place are left out (the
    claims list shows them)."""
    placed: dict[tuple[int, int], list[Claim]] = {}
    for claim in claims:
        if claim.end > claim.start and claim.end <= len(text):
            placed.setdefault((claim.start, claim.end), []).append(claim)
    parts: list[MarkedPart] = []
    at = 0
    for (start, end), found in sorted(placed.items()):
        if start < at:  # overlapping spans: the earlier one keeps the text
            parts[-1] = MarkedPart(parts[-1].text, (*parts[-1].claims, *found))
            continue
        if start > at:
            parts.append(MarkedPart(strip_control(text[at:start])))
        parts.append(MarkedPart(strip_control(text[start:end]), tuple(found)))
        at = end
    if at < len(text):
        parts.append(MarkedPart(strip_control(text[at:])))
    return parts


def marked_testimony(text: str, claims: Sequence[Claim]) -> str:
    """The testimony as plain text with each claim's mark after its sentence:
    `"… into energy. [✓1 ✗2]"`."""
    out: list[str] = []
    for part in marked_parts(text, claims):
        out.append(part.text)
        if part.claims:
            out.append(" [" + " ".join(claim_mark(c) for c in part.claims) + "]")
    return "".join(out)
