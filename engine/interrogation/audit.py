"""The audit that ends an interrogation (`audit`, which the loop runs after its last round).

The verdict is computed from the rounds' judgements (`verdict_for`, the rule in
`engine.interrogation.verdict`), never written by a model. The detective's audit call writes
the narrative — the summary, the contradictions between answers, and its own one-word
reading — which can no longer change the verdict: where its reading differs, the report shows
both, and nothing is "repaired". A narrative that breaks a rule of ours twice (rounds that do
not exist, a boilerplate summary, JSON off its schema) is replaced by a stand-in that says so
(`undetermined_audit` for the narrative; the verdict stands)."""

from __future__ import annotations

import re
from typing import Any

from engine.interrogation.calls import Caller
from engine.interrogation.checks import narrative_stances, same_words, summary_problem
from engine.interrogation.transcript import (
    audit_schema,
    protocol_note,
    transcript,
    transcript_prompt,
)
from engine.interrogation.verdict import NO_CLAIM, Computed, compute, states_no_claim
from engine.models.session import (
    AuditResult,
    Contradiction,
    InterrogationSession,
    QuestionAnswerPair,
    consistency_score,
)
from engine.prompts import fill, load_prompt
from engine.providers import Message
from engine.report.words import NOTHING_ASKED_REASON, no_testimony

__all__ = ["against_verdict", "audit", "nothing_to_audit", "undetermined_audit", "validated",
           "verdict_for", "with_verdict"]


def _round_named(number: int, pairs: list[QuestionAnswerPair], what: str) -> None:
    """`ValueError` naming `what` when round `number` does not exist."""
    if not 1 <= number <= len(pairs):
        raise ValueError(f"{what} names round {number}, which does not exist")


def verdict_for(session: InterrogationSession) -> Computed:
    """The verdict the session's judgements make (a hypothesis that states no claim:
    `undetermined`, `NO_CLAIM`)."""
    if states_no_claim(session.hypothesis_text):
        return Computed("undetermined", 0.5, reason=NO_CLAIM)
    return compute([(pair.sequence, pair.judgement) for pair in session.qa_pairs])


def with_verdict(result: AuditResult, computed: Computed) -> AuditResult:
    """`result` (the narrative) with the computed verdict in its verdict fields."""
    result.verdict, result.probability_false = computed.verdict, computed.probability_false
    result.deciding_rounds, result.computed = list(computed.deciding), True
    result.undetermined_because = computed.reason or None
    return result


def against_verdict(result: AuditResult) -> AuditResult:
    """`result` with `narrative_against` set where its summary states the opposite of its
    computed verdict (`checks.narrative_stance`): a model writes the narrative and cannot
    overturn the verdict, so such a sentence is shown marked, never taken. An undetermined
    verdict has no opposite."""
    opposite = {"true": "false", "false": "true"}.get(result.verdict or "")
    against = [text for stance, text in narrative_stances(result.summary) if stance == opposite]
    if against:
        result.narrative_against = against[0]
    return result


def validated(value: Any, pairs: list[QuestionAnswerPair], prompt: str) -> AuditResult:
    """The narrative `value` (the reply's JSON, held to its schema) says, or `ValueError`
    naming the rule it broke: a round that does not exist, a contradiction of a round with
    itself (allowed only where a round has sampled answers: the consistency protocol), one
    between two answers of the same words, one listed twice, a boilerplate summary (one that
    repeats `prompt`)."""
    found: list[Contradiction] = []
    listed: set[tuple[str, ...]] = set()
    for item in value["contradictions"]:
        first, second = item["questions"]
        for number in (first, second):
            _round_named(number, pairs, "a contradiction")
        if first == second and not pairs[first - 1].samples:
            raise ValueError(f"contradiction between Q{first} and itself")
        if first != second and same_words(pairs[first - 1].answer, pairs[second - 1].answer):
            raise ValueError(f"contradiction between Q{first} and Q{second}, whose answers "
                             "are the same words")
        # the same words twice is one contradiction listed twice, whichever rounds it
        # names; without words, the same rounds twice
        said = tuple(re.findall(r"\w+", item["description"].casefold())) or \
            tuple(str(n) for n in sorted((first, second)))
        if said in listed:
            raise ValueError(f"it lists the contradiction {item['description'][:48]!r} twice")
        listed.add(said)
        found.append(Contradiction(qa_pair_indexes=(first - 1, second - 1),
                                   description=item["description"]))
    problem = summary_problem(value["summary"], (prompt,))
    if problem is not None:
        raise ValueError(problem)
    remaining = list(pairs[-1].gap_analysis.gaps) if pairs else []
    return AuditResult(
        consistency_score=consistency_score(len(found), remaining),
        contradictions=found,
        remaining_gaps=remaining,
        summary=value["summary"].strip(),
        narrative_verdict=value["verdict"],
    )


def undetermined_audit(pairs: list[QuestionAnswerPair], why: str, invalid: str,
                       demonstration: bool) -> AuditResult:
    """The audit that stands in when there is nothing to audit, or when the detective's
    narrative broke a rule of ours twice: `why` as its reason, the invalid reply kept. Its
    verdict is `undetermined` until `with_verdict` gives it the computed one."""
    remaining = list(pairs[-1].gap_analysis.gaps) if pairs else []
    return AuditResult(
        consistency_score=consistency_score(0, remaining),
        remaining_gaps=remaining,
        summary=f"No audit from the detective: {why}.",
        verdict="undetermined",
        rule_broken=why,
        invalid_reply=invalid or None,
        demonstration=demonstration,
    )


async def audit(caller: Caller, computed: Computed) -> AuditResult:
    """The detective's narrative of every round of the session (held to `validated`, asked
    again once with the rule it broke), with the `computed` verdict in its verdict fields:
    the session's audit (the caller stores and emits it)."""
    session = caller.session
    pairs = session.qa_pairs
    prompt = load_prompt("audit")
    sampled = any(pair.samples for pair in pairs)
    note = protocol_note(session.protocol, session.consistency_samples)

    def frame(text: str) -> list[Message]:
        return [Message("system", fill(prompt, HYPOTHESIS=session.hypothesis_text,
                                       TRANSCRIPT=note + text)),
                Message("user", "Write the audit.")]

    budget = caller.settings.audit_max_tokens
    request = transcript_prompt(
        caller.request(frame(transcript(pairs, analyses=False)), budget,
                       audit_schema(len(pairs), budget, sampled), "audit"),
        pairs, frame, analyses=False, every_round=True,
        reshape=lambda reply: audit_schema(len(pairs), reply, sampled),
    )
    made = await caller.structured(request, "audit",
                                   lambda value: validated(value, pairs, prompt))
    demonstration = any(caller.is_demonstration(label) for label in
                        {made.said.provider, *(p.provider_used.detective for p in pairs)})
    if made.invalid is not None:
        result = undetermined_audit(pairs, f"the audit broke a rule twice: {made.invalid}",
                                    made.said.text, demonstration)
    else:
        result = made.value
        result.demonstration = demonstration
    return against_verdict(with_verdict(result, computed))


def nothing_to_audit(caller: Caller, no_question: str | None) -> AuditResult | None:
    """The stand-in audit when the models gave nothing to audit (no usable question at all:
    `no_question` says why; or no real answer in any round): verdict `undetermined`, the rule
    of ours that closed the questioning as its reason. A model lost to our rules ends
    `completed` with its cause named; `failed` is for what really failed (providers,
    budget). None when there is testimony to audit."""
    pairs = caller.session.qa_pairs
    asked = True
    if no_question is not None and not pairs:
        why, asked = no_question, False  # nothing was asked at all
        demonstration = caller.is_demonstration(caller.role_label("detective"))
    elif not any(pair.answered for pair in pairs):
        witness = caller.role_label("witness")
        demonstration = caller.is_demonstration(witness)
        why = no_testimony(len(pairs), witness, demonstration)
    else:
        return None
    result = undetermined_audit(pairs, why, "", demonstration)
    return with_verdict(result, Computed("undetermined", 0.5, reason=why if asked else
                                         f"{NOTHING_ASKED_REASON}: {why}"))
