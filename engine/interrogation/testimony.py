"""A testimony examined claim by claim (SPEC §1, "Testimony"; issues 53 and 72).

    audit = await examine_testimony(caller, pool)     # the loop's body for a testimony

1. **The testimony.** A hypothesis that asks is put to the witness as it is, told nothing
   more (holding its document, when the session gives it one): its answer, streamed like an
   answer and capped at `[interrogation] testimony_max_tokens`, is the testimony. A
   hypothesis of several sentences is the testimony itself. Either way it is stored as the
   session's first pair (`testimony`), a checkpoint. A testimony the witness gave (no
   document) is then drawn again `testimony_samples` times at `consistency_temperature`,
   told nothing, while the detective splits it (`_together`): the samples each claim is
   read against (the `samples` signal), kept with the claims.
2. **The split.** The detective takes it apart into claims from worked examples; each line
   is held to `engine.interrogation.claims` (refused lines are named and the split is asked
   for again once), placed on its sentence, and marked not checkable where it is; the
   sentences no claim stands on are split once more as a text of their own
   (`_split_left_out`), their claims merged in the order of the text. A sentence still left
   out, and a claim that leans on another sentence ("It …", "this deficiency", "the
   study"), is made to stand on its own by the detective, its referent named from the text
   (`_revised`: the self-contained revision of SAFE and VeriScore); nothing the testimony
   says is dropped. The claims are a checkpoint (`ClaimsSplit`).
3. **Every claim examined** (`_examine_all`), by the signals of
   `engine.interrogation.signals` through `engine.interrogation.examine`: first the cheap
   readings (the document's words, the detective alone, the samples) for every checkable
   claim; then the sampled rounds for the claims those leave in doubt or that they read both
   ways, riskiest first (the highest P(false) first), side by side within the servers'
   slots, while the testimony's tokens are within its budget (`claim_tokens` × its claims:
   `budget`); each claim's rounds stop once they pass `claim_tokens` of their own. A claim
   the budget leaves unquestioned keeps the state its cheap readings give, and says so.
   Only a claim reached after the whole budget went on the testimony, its split and the
   claims before it is `not examined`. Each reading is a checkpoint (`ClaimRead`), each
   claim's end too (`ClaimExamined`): a resume reads only what is missing.
4. **The result** is computed from the claims (`testimony_audit`): the verdict, the
   consistency score, the contradictions (pair 0, the testimony, against the round whose
   answer contradicted a claim), the unsure and not-checkable claims as the remaining gaps,
   and a summary of the claims. No model writes it.

A model's nonsense ends the testimony with its reason named, never `failed`: no testimony
(empty, an echo, "I don't know"), a split with no usable claim, a claim no question could be
written for (its state from its other readings, the reason given).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial

from engine.context.budget import Prompt
from engine.context.fit import Trim
from engine.context.tokens import MESSAGE_OVERHEAD
from engine.errors import WindowTooSmall
from engine.interrogation.calls import Caller, Said
from engine.interrogation.checks import answer_problem
from engine.interrogation.claims import (
    Segment,
    as_listed,
    claim_problem,
    left_out,
    locate,
    not_checkable,
    read_split,
    segments,
    testimony_source,
)
from engine.interrogation.examine import examine, in_doubt
from engine.interrogation.judgement import says_nothing
from engine.interrogation.pooling import Mode, Pooling
from engine.interrogation.rounds import witness_request
from engine.interrogation.signals import Case, chosen
from engine.interrogation.subject import aliases, subject
from engine.interrogation.transcript import cut_to_fit, witness_instructions
from engine.interrogation.verdict import testimony_score, testimony_verdict
from engine.models.events import (
    AnswerCutOff,
    ClaimExamined,
    ClaimsSplit,
    PairCompleted,
    Phase,
)
from engine.models.session import (
    AuditResult,
    Contradiction,
    Gap,
    GapAnalysis,
    InterrogationSession,
    ProvidersUsed,
    QuestionAnswerPair,
)
from engine.models.testimony import Claim, Testimony
from engine.models.trail import AuditTrailEntry
from engine.prompts import fill, load_prompt
from engine.providers import Message
from engine.report.claims import testimony_summary
from engine.report.words import document_cut
from engine.routing.slots import role_slots
from engine.text import one_line

__all__ = ["DEFAULT_CLAIM_CONCURRENCY", "GIVEN", "MOST_CLAIM_CONCURRENCY", "SPLIT_PENALTY",
           "budget", "examine_testimony", "is_testimony", "leans", "left_out_text",
           "listed_left_out", "split_turns", "testimony_audit"]

GIVEN = "(the testimony, as given to be checked)"
"""The question of the first pair when the hypothesis is itself the testimony."""
SPLIT_ATTEMPTS = 2
DEFAULT_CLAIM_CONCURRENCY = 2
"""Claims examined at once when no server says how many calls it takes. On the embedded
model, one (`role_slots`' `cores`): its four slots share two cores here, and the Vitamin B3
request took 150 s one claim at a time, 165 s two at a time, idle; with two busy processes
beside it, 235, 247 and 362 s at one, two and four (temperature 0, nine claims)."""
MOST_CLAIM_CONCURRENCY = 16


def is_testimony(session: InterrogationSession) -> bool:
    """Whether `session` is interrogated as a testimony: it has one already, or it has not
    begun and its hypothesis asks or states several things."""
    if session.testimony is not None or session.answer is not None:
        return True
    return not session.qa_pairs and testimony_source(session.hypothesis_text) is not None


def budget(settings_tokens: int, claims: Sequence[Claim]) -> int:
    """The tokens a testimony may spend, all told: `claim_tokens` for each claim that is
    not listed as not checkable (one at least)."""
    return settings_tokens * max(1, sum(c.state != "not checkable" for c in claims))


async def examine_testimony(caller: Caller, pool: Pooling) -> AuditResult:
    """The testimony's steps (the module docstring), each skipped when a checkpoint shows it
    done; the computed audit (the caller stores and emits it)."""
    session = caller.session
    if not session.qa_pairs:
        await _give(caller)
    # the sample while the detective splits (the split needs only the testimony, and a
    # server decodes the two side by side in less time than one after the other); a split
    # that gives no claim stops the sample: nothing will be read against it
    steps: list[Callable[[], Awaitable[None]]] = []
    if _to_sample(caller):
        steps.append(lambda: _sample(caller))
    if session.testimony is None or not session.testimony.split:
        steps.append(lambda: _split(caller))
    await _together(steps, stop=lambda: session.testimony is not None
                    and bool(session.testimony.problem))
    await _examine_all(caller, pool)
    return testimony_audit(session)


async def _together(works: Sequence[Callable[[], Awaitable[None]]],
                    stop: Callable[[], bool] | None = None) -> None:
    """`works` run as tasks side by side (their events go to the caller's sink as they
    come). The first exception one raises is raised here and the others are cancelled;
    once one has ended and `stop` says so, so are the rest."""
    tasks = [asyncio.ensure_future(work()) for work in works]
    try:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            if stop is not None and stop():
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                return
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# ---- 1. the testimony ----------------------------------------------------------------------

NO_ANALYSIS = GapAnalysis(gaps=[], completeness_score=0, requires_follow_up=True)
"""The first pair's analysis: a testimony is taken apart, not analysed whole."""


async def _give(caller: Caller) -> None:
    session, settings = caller.session, caller.settings
    hypothesis = session.hypothesis_text
    given = session.answer
    source = "witness" if given is not None else testimony_source(hypothesis) or "given"
    session.testimony = Testimony(source=source)
    caller.emit(Phase(phase="testimony", sequence=1))
    if given is not None:  # the witness's answer, made elsewhere: given, not asked
        said = Said(text=given, provider=session.answered_by or "given",
                    finish_reason="stop")
        problem = _answer_problem(said, hypothesis) or says_nothing(given)
        pair = QuestionAnswerPair(
            sequence=1, question=hypothesis, answer=given, gap_analysis=NO_ANALYSIS,
            provider_used=ProvidersUsed(detective="", witness=said.provider),
            answer_problem=problem, testimony=True)
        if problem is not None:
            session.testimony.problem = f"no testimony: {problem}"
    elif source == "given":
        pair = QuestionAnswerPair(
            sequence=1, question=GIVEN, answer=hypothesis, gap_analysis=NO_ANALYSIS,
            provider_used=ProvidersUsed(detective="", witness="given"), testimony=True)
    else:
        document = session.witness_document
        prompt, cut = witness_request(caller, hypothesis, settings.testimony_max_tokens)
        said = await caller.call(prompt, "witness", streamed=1)
        if cut and document is not None:
            caller.trail(AuditTrailEntry(event="document_cut", role="witness",
                                         reason=document_cut(document.name)))
        if said.cut_off:
            caller.emit(AnswerCutOff(sequence=1, provider=said.provider))
        problem = _answer_problem(said, hypothesis) or says_nothing(said.text)
        pair = QuestionAnswerPair(
            sequence=1, question=hypothesis, answer=said.text, gap_analysis=NO_ANALYSIS,
            provider_used=ProvidersUsed(detective="", witness=said.provider),
            answer_cut_off=said.cut_off, answer_problem=problem, testimony=True,
            usage=said.used)
        if problem is not None:
            session.testimony.problem = f"no testimony: {problem}"
    session.qa_pairs.append(pair)
    session.current_iteration = len(session.qa_pairs)
    caller.emit(PairCompleted(pair=pair, tokens=session.tokens.model_copy(deep=True),
                              repairs=session.repairs))


def _answer_problem(said: Said, question: str) -> str | None:
    """Why the witness's reply to `question` is no testimony (`checks.answer_problem`)."""
    return answer_problem(said.text, question, said.finish_reason, said.reasoning,
                          [witness_instructions(None)])


def _to_sample(caller: Caller) -> bool:
    """Whether the witness's answer is to be sampled again: it gave the testimony (`open`
    mode, no document), it was one, and no samples were drawn yet."""
    testimony = caller.session.testimony
    return (testimony is not None and testimony.source == "witness"
            and testimony.problem is None and testimony.samples is None
            and caller.session.witness_document is None
            and caller.settings.testimony_samples > 0)


async def _sample(caller: Caller) -> None:
    """The witness asked the testimony's question again `testimony_samples` times at
    `consistency_temperature`, told nothing (SelfCheckGPT's samples: the `samples` signal);
    kept with the testimony, the split's checkpoint."""
    session, settings = caller.session, caller.settings
    testimony = session.testimony
    assert testimony is not None
    caller.emit(Phase(phase="samples", sequence=1))
    prompt, _ = witness_request(caller, session.hypothesis_text, settings.testimony_max_tokens)
    drawn: list[str] = []
    for number in range(1, settings.testimony_samples + 1):
        said = await caller.call(caller.sampled(prompt, _sample_seed(session, number)),
                                 "witness", fit_for=1)
        drawn.append(said.text)
    testimony.samples = drawn


def _sample_seed(session: InterrogationSession, number: int) -> int:
    return (session.id.int + number) & 0x7FFFFFFF


# ---- 2. the split --------------------------------------------------------------------------

TESTIMONY_CUT = "\n[… the rest of the text did not fit]"


SPLIT_PENALTY = 0.5
"""The split's frequency penalty: at 0 the 1.5B fell into a loop of one claim after a few
good ones (8 of 8 lines past the ninth the same); at 0.5 it wrote nine distinct claims of the
Vitamin B3 answer in 102 tokens (measured on the development example, the issue's own)."""


def split_turns(template: str) -> tuple[str, list[tuple[str, str]]]:
    """A prompt of worked examples read: its rules (the system message) and its worked
    examples as (text, answer) pairs, each under a `### text` and a `### claims` line. A
    small model follows worked examples given as turns of the conversation far better than
    examples inside its instructions (measured: the 1.5B copied the text line by line
    otherwise)."""
    parts = re.split(r"^### (text|claims)\s*$", template, flags=re.MULTILINE)
    rules = parts[0].strip()
    examples: list[tuple[str, str]] = []
    pending: str | None = None
    for kind, body in zip(parts[1::2], parts[2::2], strict=False):
        if kind == "text":
            pending = body.strip()
        elif pending is not None:
            examples.append((pending, body.strip()))
            pending = None
    return rules, examples


def _split_prompt(caller: Caller, text: str, cut: list[bool]) -> Prompt:
    """The split's request (the rules, the worked examples as earlier turns, then the
    testimony), the testimony cut to the window when it does not fit whole."""
    rules, examples = split_turns(load_prompt("split_claims"))
    opening = [Message("system", rules)]
    for example, claims in examples:
        opening += [Message("user", example), Message("assistant", claims)]
    request = replace(caller.request([*opening, Message("user", text)],
                                     caller.settings.split_max_tokens),
                      frequency_penalty=SPLIT_PENALTY)

    def compose(limit: int, count: Callable[[str], int]) -> tuple[list[Message], Trim]:
        fixed = sum(count(m.content) + MESSAGE_OVERHEAD for m in opening) + MESSAGE_OVERHEAD
        keep, was_cut = cut_to_fit(text, limit - fixed, count, TESTIMONY_CUT)
        if was_cut and not cut:
            cut.append(True)
        return [*opening, Message("user", keep)], Trim(shortened=(1,) if was_cut else ())

    return Prompt(request=request, compose=compose)


def _claims_of(replies: Sequence[str], text: str, hypothesis: str
               ) -> tuple[list[Claim], list[str]]:
    """The claims split replies give (the split's, then what it was asked for of the
    sentences it left out), held to the rules, in the order of the sentences they stand on;
    and the refused lines, named."""
    parts = segments(text)
    claims: list[Claim] = []
    refused: list[str] = []
    for piece in (piece for reply in replies for piece in read_split(reply)):
        problem = claim_problem(piece.text, [c.text for c in claims], text, hypothesis)
        if problem is not None:
            refused.append(f"{one_line(piece.text, 120)} — {problem}")
            continue
        start, end = locate(piece.text, text, parts)
        why = not_checkable(piece.text, piece.marked)
        claims.append(Claim(number=len(claims) + 1, text=piece.text, start=start, end=end,
                            state="not checkable" if why else "pending", why=why))
    if len(replies) > 1:  # the later replies' claims take their places in the text
        claims = _in_text_order(claims)
    return claims, refused


async def _split(caller: Caller) -> None:
    session = caller.session
    testimony = session.testimony or Testimony(source="given")
    session.testimony = testimony
    pair = session.qa_pairs[0]
    if testimony.problem is None:
        caller.emit(Phase(phase="split", sequence=1))
        cut: list[bool] = []
        prompt = _split_prompt(caller, pair.answer, cut)
        best: tuple[list[Claim], list[str]] = ([], [])
        chosen_reply: str | None = None  # the reply `best` is of
        for attempt in range(1, SPLIT_ATTEMPTS + 1):
            try:
                said = await caller.call(prompt, "detective", fit_for=1, phase="analysis")
            except WindowTooSmall as exc:
                if attempt == 1:
                    raise
                # the retry is ours: the first split stands, not the session's end
                caller.trail(AuditTrailEntry(
                    event="error", role="detective", reason="the split's retry does not fit "
                    f"the context window; the first split stands: {exc.last_reason}"))
                break
            claims, refused = _claims_of([said.text], pair.answer, session.hypothesis_text)
            if attempt == 1 or len(claims) > len(best[0]):
                best, chosen_reply = (claims, refused), said.text
            if not refused or attempt == SPLIT_ATTEMPTS:
                break
            caller.trail(AuditTrailEntry(
                event="degenerate_output", role="detective", from_provider=said.provider,
                reason=f"the split gave {len(refused)} unusable line"
                f"{'s' if len(refused) != 1 else ''}, asking again: "
                + "; ".join(refused[:3])))
            session.repairs += 1
            problems = "\n".join(f"- {line}" for line in refused[:8])
            prompt = prompt.then(Message("assistant", said.text[:2000]),
                                 Message("user", fill(load_prompt("split_retry"),
                                                      PROBLEMS=problems)))
        left = left_out([(c.start, c.end) for c in best[0]], pair.answer) \
            if chosen_reply is not None and best[0] and not cut else []
        if left and chosen_reply is not None:
            again = await _split_left_out(caller, left)
            if again is not None:
                merged = _claims_of([chosen_reply, again], pair.answer,
                                    session.hypothesis_text)
                if len(merged[0]) > len(best[0]):  # else the first split stands
                    best = merged
        claims = await _revised(caller, best[0], pair.answer, session.hypothesis_text)
        if cut:
            caller.trail(AuditTrailEntry(
                event="document_cut", role="detective",
                reason="the testimony did not fit the detective's window whole: only its "
                "start was taken apart"))
        testimony.claims, testimony.refused = claims, best[1]
        if not testimony.claims:
            testimony.problem = "the split gave no usable claim" + (
                f" ({one_line(testimony.refused[0], 100)})" if testimony.refused else "")
    testimony.split = True
    caller.emit(ClaimsSplit(testimony=testimony.model_copy(deep=True)))


LEFT_OUT_MOST = 12
"""Sentences a split left out that are taken apart again, at most (the first ones)."""


def left_out_text(text: str, left: Sequence[Segment]) -> str:
    """What the split is given again for the sentences of `text` it `left` out: those
    sentences (the first `LEFT_OUT_MOST`), after the text's first sentence when that is not
    one of them (it names the subject that "she" and "it" stand for)."""
    first = segments(text)[:1]
    parts = [*(first if first and first[0] not in left else []), *left[:LEFT_OUT_MOST]]
    return " ".join(part.text for part in parts)


def listed_left_out(claims: list[Claim], text: str) -> list[Claim]:
    """`claims` with each sentence of `text` that none of them stands on (`left_out`) listed
    in its place as it is, to be examined: nothing the testimony says is dropped silently."""
    left = left_out([(c.start, c.end) for c in claims], text)
    return _in_text_order([*claims, *(Claim(
        number=1, text=as_listed(part.text), start=part.start, end=part.end,
        state="not checkable" if not_checkable(as_listed(part.text)) else "pending",
        why=not_checkable(as_listed(part.text))) for part in left)]) if left else claims


def _in_text_order(claims: list[Claim]) -> list[Claim]:
    """`claims` in the order of the sentences they stand on (one placed nowhere keeps its
    place after the claim before it; ties keep their order), numbered again."""
    placed, at = [], 0
    for n, claim in enumerate(claims):
        at = claim.start if claim.end else at
        placed.append((at, n, claim))
    placed.sort(key=lambda item: (item[0], item[1]))
    return [c.model_copy(update={"number": k}) for k, (_, _, c) in enumerate(placed, start=1)]


async def _split_left_out(caller: Caller, left: list[Segment]) -> str | None:
    """The split made again, as a new conversation, of the sentences the first split `left`
    out (`left_out_text`): its reply, or None when it does not fit (the first split stands).
    Measured on FActScore's development biographies: the 1.5B skipped whole sentences and
    paragraphs (a list of films, an award, the middle of a career) — fact coverage 0.611
    with one split, 0.705 with the second; asked in the same conversation instead ("you left
    these sentences out"), it mostly wrote its first list again (0.658)."""
    text = caller.session.qa_pairs[0].answer
    try:
        said = await caller.call(_split_prompt(caller, left_out_text(text, left), []),
                                 "detective", fit_for=1, phase="analysis")
    except WindowTooSmall as exc:
        caller.trail(AuditTrailEntry(
            event="error", role="detective", reason="the split of the sentences it left out "
            f"does not fit the context window; the first split stands: {exc.last_reason}"))
        return None
    return said.text


_LEANS = re.compile(
    r"^\s*(?:it|its|they|their|them|he|his|she|her|this|that|these|those|such)\b"
    r"|\b(?:this|these|that|those|such|the\s+same)\s+(?:[a-z]+\s+)?(?:deficiency|condition|"
    r"study|research|process|disease|vitamin|mineral|nutrient|effect|city|country|planet|"
    r"river|building|method|work|theory|discovery|invention|event|period|war|book|film|"
    r"compound|substance|element)\b|\bthe\s+(?:study|former|latter)\b",
    re.IGNORECASE)
"""A claim or sentence that leans on another: led by a pronoun ("It also lowers …"), or
naming its thing only by pointing back ("this deficiency", "the study")."""
REVISE_MOST = 12
"""Claims made to stand on their own, at most (the first ones in the text)."""
REVISE_CONTEXT = 1200
"""Characters of the text before a sentence the revision is shown (where its referent is)."""


def leans(claim: str) -> bool:
    """Whether `claim` leans on another sentence for what it is about (`_LEANS`)."""
    return _LEANS.search(claim) is not None


_PRONOUN = re.compile(r"^(It|He|She|They)\s+(?=[a-z])")
_POSSESSIVE = re.compile(r"^(Its|His|Her|Their)\s+(?=[a-z])")


def named_by_rule(claim: str, before: str) -> str | None:
    """`claim` with its leading pronoun ("It also lowers …", "Its rings …") replaced by the
    subject of the sentence before it (`subject.subject`), when that sentence has one that is
    no pronoun; else None (the detective is asked)."""
    parts = segments(before)
    if not parts:
        return None
    found = subject(parts[-1].text)
    if not found or found.split()[0].lower() in _PRONOUNS:
        return None
    named = found[0].upper() + found[1:]
    led = _PRONOUN.match(claim)
    if led is not None:
        return named + " " + claim[led.end():]
    owned = _POSSESSIVE.match(claim)
    if owned is not None:
        return f"{named}'s " + claim[owned.end():]
    return None


_PRONOUNS = frozenset("it its he his she her they their this that these those".split())


async def _revised(caller: Caller, claims: list[Claim], text: str, hypothesis: str
                   ) -> list[Claim]:
    """`claims` with every sentence of `text` none of them stands on listed in its place
    (`listed_left_out`), and each checkable claim that leans on another sentence made to
    stand on its own — a leading pronoun by rule (`named_by_rule`: the subject of the
    sentence before it), anything else by the detective (`prompts/revise_claim.md`, worked
    examples as turns), its referent named from the text — held to the split's rules, else
    kept as it was."""
    claims = listed_left_out(claims, text)
    revised: list[Claim] = []
    budget_left = REVISE_MOST
    for claim in claims:
        if claim.state != "pending" or not leans(claim.text) or budget_left <= 0:
            revised.append(claim)
            continue
        budget_left -= 1
        before = text[max(0, claim.start - REVISE_CONTEXT):claim.start].strip() if claim.end \
            else text[:REVISE_CONTEXT]
        made = named_by_rule(claim.text, before) or await _revise(caller, before, claim.text)
        if made is None:
            revised.append(claim)
            continue
        problem = claim_problem(made, [c.text for c in revised], text, hypothesis)
        if problem is not None or leans(made):
            caller.trail(AuditTrailEntry(
                event="degenerate_output", role="detective",
                reason=f"claim {claim.number}'s revision is unusable, kept as it was: "
                f"{one_line(made, 100)} — {problem or 'it still leans on another sentence'}"))
            revised.append(claim)
            continue
        revised.append(claim.model_copy(update={"text": made}))
    return revised


async def _revise(caller: Caller, context: str, sentence: str) -> str | None:
    """The detective's self-contained form of `sentence`, given the `context` before it;
    None when the call does not fit."""
    rules, examples = split_turns(load_prompt("revise_claim"))
    messages = [Message("system", rules)]
    for example, answer in examples:
        messages += [Message("user", example), Message("assistant", answer)]
    asked = fill(load_prompt("revise_claim_turn").strip(), CONTEXT=context or "(none)",
                 SENTENCE=sentence)
    request = caller.request([*messages, Message("user", asked)], 96)
    try:
        said = await caller.call(Prompt.whole(request), "detective", fit_for=1,
                                 phase="analysis")
    except WindowTooSmall:
        return None
    lines = [line.strip() for line in said.text.strip().splitlines() if line.strip()]
    return as_listed(lines[0]) if lines else None


# ---- 3. every claim examined ---------------------------------------------------------------

def _mode(caller: Caller) -> Mode:
    return "document" if caller.session.witness_document is not None else "open"


def _case(caller: Caller, claim: Claim, spend: int | None) -> Case:
    session = caller.session
    testimony = session.testimony
    assert testimony is not None
    document = session.witness_document
    witness = testimony.source == "witness"
    return Case(
        claim=claim,
        topic=session.hypothesis_text if witness and document is None else None,
        samples=tuple(testimony.samples or ()),
        document=document.text if document is not None else None,
        names=tuple(aliases(session.qa_pairs[0].answer)),
        rounds_left=caller.settings.claim_rounds,
        spend=spend,
        pairs=[p for p in session.qa_pairs if p.claim == claim.number])


async def _examine_all(caller: Caller, pool: Pooling) -> None:
    session, settings = caller.session, caller.settings
    testimony = session.testimony
    assert testimony is not None
    pending = [c for c in testimony.claims if c.state == "pending"]
    if not pending:
        return
    caller.emit(Phase(phase="claims", sequence=len(session.qa_pairs)))
    width = settings.claim_concurrency or await role_slots(
        caller.router, MOST_CLAIM_CONCURRENCY, DEFAULT_CLAIM_CONCURRENCY, cores=True)
    gate = asyncio.Semaphore(max(1, width))
    signals = chosen(settings.signals)
    mode = _mode(caller)
    allowed = budget(settings.claim_tokens, testimony.claims)
    cheap_only = [s for s in signals if s.cheap]

    def spent() -> int:
        return session.tokens.total

    def finish(claim: Claim, why: str | None = None) -> None:
        if why is not None:
            claim = claim.model_copy(update={"why": why})
        testimony.put(claim)
        caller.emit(ClaimExamined(claim=claim.model_copy(), tokens=session.tokens.model_copy(
            deep=True), repairs=session.repairs))

    async def cheap(claim: Claim) -> Claim | None:
        async with gate:
            if spent() >= allowed and not claim.readings:
                finish(claim.model_copy(update={
                    "state": "not examined", "why": _past_budget(allowed)}))
                return None
            read = await examine(caller, _case(caller, claim, None), cheap_only, pool, mode,
                                 dear=False)
            testimony.put(read.model_copy(update={"state": "pending"}))
            return read

    read = [c for c in await asyncio.gather(*(cheap(c) for c in pending)) if c is not None]
    dear = [s for s in signals if not s.cheap]
    if not dear:
        for claim in read:
            finish(claim)
        return
    doubtful = sorted((c for c in read if in_doubt(
        c.probability_false, {k: r.p_true for k, r in c.readings.items()}, mode) and not all(
        s.name in c.readings or not s.applies(_case(caller, c, None)) for s in dear)),
        key=lambda c: -(c.probability_false or 0.5))
    for claim in read:
        if claim not in doubtful:
            finish(claim)
    questioned = 0

    async def question(claim: Claim) -> None:
        nonlocal questioned
        async with gate:
            if spent() >= allowed:
                finish(claim, _unquestioned(claim, questioned, len(doubtful)))
                return
            questioned += 1
            spend = min(settings.claim_tokens, max(0, allowed - spent()))
            done = await examine(caller, _case(caller, claim, spend), signals, pool, mode)
            finish(done)

    await _together([partial(question, claim) for claim in doubtful])


def _past_budget(allowed: int) -> str:
    return (f"past the testimony's token budget ({allowed:,} tokens: [interrogation] "
            "claim_tokens for each claim) before its first reading")


def _unquestioned(claim: Claim, questioned: int, doubtful: int) -> str:
    base = claim.why or "its cheap readings leave it in doubt"
    return (f"{base}; not questioned: the testimony's token budget was spent after "
            f"{questioned} of the {doubtful} claims in doubt were")


# ---- 4. the result -------------------------------------------------------------------------

def testimony_audit(session: InterrogationSession) -> AuditResult:
    """The audit of a testimony, computed from its claims (the module docstring)."""
    testimony = session.testimony
    assert testimony is not None
    claims = testimony.claims
    pairs = session.qa_pairs
    computed = testimony_verdict(claims)
    contradictions: list[Contradiction] = []
    for claim in claims:
        if claim.state != "contradicted" or claim.deciding is None:
            continue
        pair = pairs[claim.deciding - 1]
        contradictions.append(Contradiction(
            qa_pair_indexes=(0, claim.deciding - 1),
            description=f"the testimony says \"{one_line(claim.text, 160)}\"; asked "
            f"\"{one_line(pair.question, 120)}\", the witness answered "
            f"\"{one_line(pair.answer, 160)}\""))
    gaps = [Gap(category="ambiguity", severity="medium",
                description=f"claim {c.number} unsure: {one_line(c.text, 200)}")
            for c in claims if c.state == "unsure"]
    gaps += [Gap(category="vagueness", severity="low",
                 description=f"claim {c.number} not checkable: {one_line(c.text, 200)}")
             for c in claims if c.state == "not checkable"]
    why = testimony.problem or computed.reason or None
    return AuditResult(
        consistency_score=testimony_score(claims),
        contradictions=contradictions,
        remaining_gaps=gaps,
        summary=testimony_summary(testimony, computed.verdict),
        verdict=computed.verdict,
        probability_false=computed.probability_false,
        deciding_rounds=list(computed.deciding),
        computed=True,
        undetermined_because=why if computed.verdict == "undetermined" else None,
    )

