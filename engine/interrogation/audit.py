"""The audit that ends an interrogation (`audit`, which the loop runs after its last round):
the detective's call over every round, what makes its reply valid (`validated`), and the audit
that stands in when it broke a rule twice (`undetermined_audit`)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from engine.interrogation.calls import SessionCalls, Turn
from engine.interrogation.checks import summary_problem, verdict_problem
from engine.interrogation.transcript import (
    audit_schema,
    protocol_note,
    transcript,
    transcript_prompt,
)
from engine.models.events import AuditReady, InterrogationEvent
from engine.models.session import (
    AuditResult,
    Comparison,
    Contradiction,
    QuestionAnswerPair,
    consistency_score,
)
from engine.prompts import fill, load_prompt
from engine.providers import Message
from engine.report.words import no_testimony

__all__ = ["audit", "deciding_note", "nothing_to_audit", "undetermined_audit", "validated"]


def _round_named(number: int, pairs: list[QuestionAnswerPair], what: str) -> None:
    """`ValueError` naming `what` when round `number` does not exist."""
    if not 1 <= number <= len(pairs):
        raise ValueError(f"{what} names round {number}, which does not exist")


def validated(value: Any, pairs: list[QuestionAnswerPair], prompt: str) -> AuditResult:
    """The audit `value` (the reply's JSON, held to its schema) says, or `ValueError` naming
    the rule it broke: a round that does not exist, a contradiction of a round with itself
    (allowed only where a round has sampled answers: the consistency protocol), a round with
    two stances, a boilerplate summary (one that repeats `prompt`), a verdict against its own
    probability or comparisons (`checks.verdict_problem`)."""
    found: list[Contradiction] = []
    for item in value["contradictions"]:
        first, second = item["questions"]
        for number in (first, second):
            _round_named(number, pairs, "a contradiction")
        if first == second and not pairs[first - 1].samples:
            raise ValueError(f"contradiction between Q{first} and itself")
        found.append(Contradiction(qa_pair_indexes=(first - 1, second - 1),
                                   description=item["description"]))
    compared: dict[int, str] = {}
    for item in value["comparisons"]:
        number = item["round"]
        _round_named(number, pairs, "the comparison")
        if compared.get(number, item["stance"]) != item["stance"]:
            raise ValueError(f"the comparisons give round {number} two stances")
        compared[number] = item["stance"]
    deciding = sorted(set(value["deciding_rounds"]))
    problem = summary_problem(value["summary"], (prompt,)) or verdict_problem(
        value["verdict"], value["probability_false"], deciding, pairs, compared)
    if problem is not None:
        raise ValueError(problem)
    remaining = list(pairs[-1].gap_analysis.gaps) if pairs else []
    return AuditResult(
        consistency_score=consistency_score(len(found), remaining),
        contradictions=found,
        remaining_gaps=remaining,
        summary=value["summary"].strip(),
        verdict=value["verdict"],
        probability_false=value["probability_false"],
        deciding_rounds=deciding,
        comparisons=[Comparison.model_validate({"round": n, "stance": stance})
                     for n, stance in sorted(compared.items())],
    )


def deciding_note(pairs: list[QuestionAnswerPair]) -> str:
    """What an audit's retry is told it may name as deciding."""
    answered = [pair.sequence for pair in pairs if pair.answered]
    return ("The rounds you may name as deciding (the witness answered in them): "
            + ", ".join(str(n) for n in answered) + "; none for 'undetermined'.")


def undetermined_audit(pairs: list[QuestionAnswerPair], why: str, invalid: str,
                       demonstration: bool) -> AuditResult:
    """The audit that stands in when the detective's broke a rule of ours twice: verdict
    `undetermined`, `why` as its reason, the invalid reply kept."""
    remaining = list(pairs[-1].gap_analysis.gaps) if pairs else []
    return AuditResult(
        consistency_score=consistency_score(0, remaining),
        remaining_gaps=remaining,
        summary=f"No verdict from the detective: {why}.",
        verdict="undetermined",
        rule_broken=why,
        invalid_reply=invalid or None,
        demonstration=demonstration,
    )


async def audit(calls: SessionCalls) -> AsyncGenerator[InterrogationEvent, None]:
    """Ask the detective for the audit of every round of `calls.session` (held to
    `validated`, asked again once with the rule it broke), store it and yield `AuditReady`;
    after a second miss, `undetermined_audit` stands in."""
    session = calls.session
    pairs = session.qa_pairs
    audited = Turn()
    prompt = load_prompt("audit")
    sampled = any(pair.samples for pair in pairs)
    note = protocol_note(session.protocol, session.consistency_samples)

    def frame(text: str) -> list[Message]:
        return [Message("system", fill(prompt, HYPOTHESIS=session.hypothesis_text,
                                       TRANSCRIPT=note + text)),
                Message("user", "Write the audit.")]

    budget = calls.settings.audit_max_tokens
    request = transcript_prompt(
        calls._request(frame(transcript(pairs, analyses=False)), budget,
                       audit_schema(len(pairs), budget, sampled), "audit"),
        pairs, frame, analyses=False, every_round=True,
        reshape=lambda reply: audit_schema(len(pairs), reply, sampled),
    )
    async for event in calls._structured(request, audited, "audit",
                                         lambda value: validated(value, pairs, prompt),
                                         allowed=deciding_note(pairs)):
        yield event
    demonstration = any(calls._is_demonstration(label) for label in
                        {audited.provider, *(p.provider_used.detective for p in pairs)})
    if audited.invalid is not None:
        result = undetermined_audit(pairs, f"the audit broke a rule twice: {audited.invalid}",
                                    audited.text, demonstration)
    else:
        result = audited.value
        result.demonstration = demonstration
    session.audit_result = result
    yield calls._emit(AuditReady(audit=result))


def nothing_to_audit(calls: SessionCalls, no_question: str | None) -> AuditResult | None:
    """The stand-in audit when the models gave nothing to audit (no usable question at all:
    `no_question` says why; or no real answer in any round): verdict `undetermined`, the rule
    of ours that closed the questioning as its reason. A model lost to our rules ends
    `completed` with its cause named; `failed` is for what really failed (providers,
    budget). None when there is testimony to audit."""
    pairs = calls.session.qa_pairs
    if no_question is not None and not pairs:
        why = no_question  # nothing was asked at all
        demonstration = calls._is_demonstration(calls._role_label("detective"))
    elif not any(pair.answered for pair in pairs):
        witness = calls._role_label("witness")
        demonstration = calls._is_demonstration(witness)
        why = no_testimony(len(pairs), witness, demonstration)
    else:
        return None
    return undetermined_audit(pairs, why, "", demonstration)
