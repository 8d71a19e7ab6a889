"""Scripted models for evaluation tests: a detective whose verdict on each claim is decided
in advance (by the labels, at random, never, or wrong on chosen items), and a witness that
answers every question in a few words. Both speak the real OpenAI wire on loopback
(`ScriptedModel`), so an evaluation runs through the whole engine and only the models'
words are fixed.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable
from typing import Any

from engine.evals.items import EvalItem
from engine.interrogation.claims import content_words
from engine.interrogation.shapes import positive
from engine.interrogation.subject import subject
from tests.support.scripted import Judged, is_judgement, judged_claim

Verdict = Callable[[str], tuple[str, float]]
"""claim → (verdict, probability-false)."""

_CLAIM = re.compile(r"(?:The hypothesis[^\n]*:|The claim:)\s*\n\s*\n(.*?)(?:\n\n|\s*$)", re.DOTALL)


def knows(items: Iterable[EvalItem], wrong: Iterable[str] = ()) -> Verdict:
    """Verdicts from the labels, except on the claims whose keys are in `wrong`. A negated
    claim is judged in its positive form (`shapes.positive`), whose truth is the other."""
    by_claim = {item.claim: (item, False) for item in items}
    by_claim |= {turned: (item, True) for item in items
                 if (turned := positive(item.claim)) is not None}
    flipped = set(wrong)

    def verdict(claim: str) -> tuple[str, float]:
        item, turned = by_claim[claim]
        true = (item.label != (item.key in flipped)) != turned
        return ("true", 0.05) if true else ("false", 0.95)

    return verdict


def coin(seed: int) -> Verdict:
    """A verdict at random, the same for a claim on every call."""

    def verdict(claim: str) -> tuple[str, float]:
        p = random.Random(f"{seed}:{claim}").random()
        return ("false", p) if p >= 0.5 else ("true", p)

    return verdict


def never(claim: str) -> tuple[str, float]:
    """Never decides."""
    return "undetermined", 0.5


def claim_of(messages: list[dict[str, Any]]) -> str:
    found = _CLAIM.search(messages[0]["content"] if messages else "")
    assert found, "no claim in the detective's prompt"
    return found.group(1).strip()


def _judged(value: str, p_false: float) -> Judged:
    """A judgement that makes `value` by the verdict rule: a decisive P(true) for a
    decided verdict, one half (silent) for `undetermined`."""
    if value == "undetermined":
        return Judged(0.5)
    return Judged(min(0.99, max(0.01, 1 - p_false)) if 0 < p_false < 1 else 1 - p_false)


def detective(verdict: Verdict) -> Callable[[list[dict[str, Any]]], str]:
    """A detective that asks numbered questions and judges each exchange (and the claim
    alone) so that the computed verdict is `verdict(claim)`; its narrative says nothing."""

    def reply(messages: list[dict[str, Any]]) -> str:
        system = messages[0]["content"] if messages else ""
        if system.startswith("You are a detective analysing"):
            return json.dumps({"gaps": [], "completeness_score": 95,
                               "requires_follow_up": False})
        if is_judgement(messages):
            return _judged(*verdict(judged_claim(messages)))
        if system.startswith("You are a detective auditing"):  # its reading is not used
            return json.dumps({"contradictions": [], "verdict": "undetermined",
                               "summary": "The witness held to its account."})
        found = re.search(r"Write question (\d+)", messages[-1]["content"])
        number = found.group(1) if found else "1"
        claim = system.rsplit("(for you only):", 1)[-1].strip()
        named = subject(claim)
        if named and "could not be used" not in messages[-1]["content"]:
            return f"Question {number}: what exactly do you remember about {named.lower()}?"
        # told that naming it states the claim's answer (a leading question): not named
        return f"Question {number}: what exactly do you remember about it?"

    return reply


def witness(messages: list[dict[str, Any]]) -> str:
    return "I remember it clearly; it is as I said."


# ---- witnesses compared (`detektiv eval --compare`) ---------------------------------------

Chat = list[dict[str, Any]]

TRUE = ["Tea contains caffeine.", "Paris is the capital of France.", "Water is wet.",
        "The sun is a star.", "Iron is a metal.", "Bees make honey."]
FALSE = ["The moon is made of cheese.", "Fish can climb trees.", "Snow is hot.",
         "Rome is in Peru."]
TESTIMONY = ("Tea contains caffeine. Tea is made from the leaves of Camellia sinensis. "
             "Green tea is not fermented.")
_NEGATED = {turned: f"{sentence}." for sentence in TESTIMONY.rstrip(".").split(". ")
            if (turned := positive(f"{sentence}.")) is not None}
"""The positive form a negated testimony claim is judged in, to the claim."""
QUESTIONS = ["What is tea made of?", "Does tea contain caffeine?", "How is green tea made?"]


def sleuth(messages: Chat) -> str:
    """Judges each exchange by the witness's last word: "WRONG" is against the claim (alone,
    with no exchange, it does not know); splits
    a testimony into its sentences; otherwise asks and analyses as the evaluations' detective
    does."""
    system = messages[0]["content"] if messages else ""
    if is_judgement(messages):
        said, claim = messages[-1]["content"], judged_claim(messages)
        negated = _NEGATED.get(claim)  # a negated claim is judged in its positive form
        claim = negated or claim
        if "Based only on the document" in said:  # the reference reads the document
            document = said.split("The document:", 1)[-1].split("\nClaim:", 1)[0]
            p_true = 0.95 if claim.rstrip(".") in document else 0.05
        elif "The witness was asked" not in said:
            return Judged(0.5)  # the detective alone does not know
        else:
            p_true = 0.05 if "WRONG" in said else 0.95
        return Judged(1 - p_true if negated else p_true)
    if system.startswith("You take a text apart"):
        return "\n".join(f"{n}. {s}." for n, s in enumerate(
            TESTIMONY.rstrip(".").split(". "), start=1))
    if "(for you only):" in system:
        return claim_question(system)
    return detective(never)(messages)


def claim_question(system: str) -> str:
    """A scripted detective's question for the testimony claim its `system` prompt names
    ("(for you only): …"): about its subject by name (else two of its content words), never
    all of what it says of it (that would state it: a leading question)."""
    claim = system.rsplit("(for you only):", 1)[-1].strip()
    named = subject(claim)  # its subject by name, never all of what the claim says of it
    about = named.lower() if named else ", ".join(content_words(claim)[:2])
    return f"What do you know of {about}, and what else?"


def standing(messages: Chat) -> str:
    if messages[-1]["content"].strip() in QUESTIONS:
        return TESTIMONY
    return "Yes, that is right, as I said."


def retracting(messages: Chat) -> str:
    if messages[-1]["content"].strip() in QUESTIONS:
        return TESTIMONY
    return "No, that is WRONG."
