"""What a claim is about, by rule: its subject, and the other names its testimony gives it
(issue 72: "the vitamin that is good for you" is not niacin).

    names = aliases("Vitamin B3, also known as niacin, is …")   # [("Vitamin B3", "niacin")]
    subject_problem("What is the vitamin that is good for you?", "Niacin is good for you",
                    names)            # "it does not name the claim's subject (Niacin) …"

A claim's **subject** is what stands before its first verb ("Niacin" in "Niacin can help
reduce …", "The Great Wall of China" in "The Great Wall of China is visible …"). Its **keys**
are what a question must say to be about it: its codes (a word with a digit or a single
capital letter: "B3", "D") and its least common word (by the English dictionary's counts:
"niacin", "Sahara" rather than "Desert", "Curie" rather than "Marie"), read in its head (the
words before "of": "Great Wall"). A question about the claim names every key of its subject,
or of one of the subject's other names that its testimony gives ("A, also known as B", "A,
also called B", "A (B)") — or asks for the subject by what the claim says of it, in two of
its words or more ("Which planet is the fourth from the Sun?" for "Mars is the fourth planet
from the Sun": the witness names the subject itself). A claim whose subject has no content
words ("It", "They") is not held to the rule: there is nothing to name. The witness answers
each question in a fresh conversation, so a question that does neither asks about something
else: "What is the name of the vitamin that is good for you?" (one word of "Niacin is good
for you") drew "Vitamin C".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.cache.spelling import frequency
from engine.interrogation.claims import content_words, stem
from engine.text import one_line

__all__ = ["DESCRIBED", "aliases", "fact_problem", "fact_words", "subject", "subject_keys",
           "subject_problem"]

_WORD = re.compile(r"[\w'’-]+")
DESCRIBED = 2
"""Words of what the claim says of its subject a question must carry to ask for the subject
without naming it."""
_AUX = frozenset("""is are was were has have had can could does do did will would may might
must shall should be been being""".split())
_PRONOUNS = frozenset("it its they their them he his she her this these those we you".split())
_NOT_VERBS = frozenset("this his its us as bus gas plus series species".split())
_CODE = re.compile(r"^(?:[A-Za-z]+\d[\w-]*|\d+[A-Za-z][\w-]*|[A-Z])$")
_ALIASES = (
    re.compile(r"(?P<a>[A-Z][\w’'-]*(?:\s+[\w’'-]+){0,3}?)\s*,?\s*\(?\s*(?:also|otherwise|more "
               r"commonly|commonly)\s+(?:known|called|referred to)\s+as\s+(?P<b>[\w’'-]+"
               r"(?:\s+[\w’'-]+){0,3}?)\s*(?:[),.;:]|\s+(?:is|was|are|were|has|and|which)\b)",
               re.I),
    re.compile(r"(?P<a>[A-Z][\w’'-]*(?:\s+[A-Z0-9][\w’'-]*){0,2})\s+\((?P<b>[^()]{2,40})\)"),
)
"""A testimony naming one thing two ways: "Vitamin B3, also known as niacin,", "niacin
(vitamin B3)"."""


_SETTING = re.compile(r"^\s*(?:in|at|on|during|after|before|by|for|from|with|since|under|over|"
                      r"as|of|among|across|throughout|within|without)\b[^,]{0,60},\s*", re.I)
"""A phrase that sets the scene before the subject ("At sea level, pure water boils …")."""


def subject(claim: str) -> str | None:
    """The words of `claim` before its first verb (an auxiliary, or a third-person verb such
    as "helps"), a phrase that sets the scene before them aside ("At sea level, …"); None
    when there is no verb past its first word."""
    words = _WORD.findall(_SETTING.sub("", claim, count=1))
    for index, word in enumerate(words[1:], start=1):
        low = word.lower().replace("’", "'")
        before = words[index - 1].lower()
        if low in _AUX or low.endswith("n't") or (
                word.islower() and len(low) > 3 and low.endswith("s") and
                low not in _NOT_VERBS and not low.endswith(("ss", "us", "is", "ous")) and
                before not in ("of", "the", "a", "an", "its", "their", "his", "her")):
            return " ".join(words[:index])
    return None


def subject_keys(name: str) -> set[str]:
    """What a question must say to name `name` (the module docstring): its codes and its
    least common content word, lower case; empty when it has no content words."""
    head = re.split(r"\s+of\s+", name, maxsplit=1)[0]
    codes = {w.lower() for w in _WORD.findall(head) if _CODE.match(w)}
    words = [w for w in content_words(head) if w not in _PRONOUNS and w not in codes
             and not any(ch.isdigit() for ch in w)]
    if not words:
        return codes
    counts = [(frequency(w) or 0, n, w) for n, w in enumerate(words)]
    return codes | {min(counts)[2]}


def aliases(testimony: str) -> list[tuple[str, str]]:
    """The pairs of names `testimony` gives one thing (the module docstring), in order."""
    found: list[tuple[str, str]] = []
    for pattern in _ALIASES:
        for match in pattern.finditer(testimony):
            a, b = match.group("a").strip(), match.group("b").strip()
            if a and b and a.lower() != b.lower() and content_words(b):
                found.append((a, b))
    return found


def _names(name: str, pairs: Sequence[tuple[str, str]]) -> list[str]:
    """`name` and the other names `pairs` give what it names (both ways)."""
    keys = subject_keys(name)
    names = [name]
    for a, b in pairs:
        for one, other in ((a, b), (b, a)):
            if keys and keys <= subject_keys(one) | _words_of(one) and other not in names:
                names.append(other)
    return names


def _words_of(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _says(question: str, keys: set[str]) -> bool:
    said = _words_of(question)
    stems = {stem(w) for w in said}
    return all(key in said or stem(key) in stems for key in keys)


def subject_problem(question: str, claim: str, pairs: Sequence[tuple[str, str]] = (),
                    answer: str | None = None) -> str | None:
    """Why `question` is not about `claim`'s subject (it names none of the keys of the
    subject or of its other names in `pairs`), or None. `answer`: what the claim answers (an
    evaluated claim's): a subject that is that answer ("Saturn is the largest planet") is
    not held to the rule — naming it would lead the witness."""
    found = subject(claim)
    if found is None or not subject_keys(found):
        return None
    if answer is not None and subject_keys(found) <= _words_of(answer):
        return None
    names = _names(found, pairs)
    if any(_says(question, subject_keys(name)) for name in names):
        return None
    said = {stem(w) for w in _words_of(question)}
    own = {stem(w) for w in content_words(found)}
    described = [w for w in dict.fromkeys(content_words(claim)) if stem(w) not in own]
    if sum(1 for w in described if stem(w) in said) >= DESCRIBED:
        return None  # it asks for the subject by what the claim says of it
    named = " or ".join(repr(one_line(name, 40)) for name in names[:3])
    return (f"it does not name the claim's subject ({named}) nor ask for it by what the "
            "claim says of it: the witness answers it in a fresh conversation, so ask about "
            "the subject by name")


_WEAK = frozenset("""help helps helped helping play plays played role roles known important
also various many several including include includes used use uses make makes made making has
have had can may might one main major well key part kind type way ways""".split())
"""Words that say little of what a claim asserts ("helps", "plays a role", "known for")."""


def fact_words(claim: str) -> list[str]:
    """What the claim says of its subject, in content words (the subject's own, and words
    that say little, aside): "convert, carbohydrates, glucose" in "Niacin helps convert
    carbohydrates into glucose"."""
    found = subject(claim)
    if found is None:
        return []
    own = {stem(w) for w in content_words(found)}
    rest = claim[len(found):] if claim.startswith(found) else claim
    return [w for w in dict.fromkeys(content_words(rest))
            if stem(w) not in own and w not in _WEAK]


def fact_problem(question: str, claim: str, pairs: Sequence[tuple[str, str]] = ()
                 ) -> str | None:
    """Why `question` states the claim's fact instead of asking for it — it names the
    subject and carries every word of what the claim says of it (`fact_words`): the witness,
    asked "What is the role of niacin in the conversion of carbohydrates into glucose?",
    only had to agree, and sampled again agreed again — or None. A comparison and a
    negation are asked by rule."""
    from engine.interrogation.shapes import comparison, positive

    if comparison(claim) is not None or positive(claim) is not None:
        return None
    found, words = subject(claim), fact_words(claim)
    if found is None or not words or not subject_keys(found):
        return None
    names = _names(found, pairs)
    if not any(_says(question, subject_keys(name)) for name in names):
        return None  # it asks for the subject: the witness says it
    said = {stem(w) for w in _words_of(question)}
    if not all(stem(w) in said for w in words):
        return None
    return ("it states the claim's fact inside the question (" + ", ".join(words[:4]) +
            "): leave out what the witness should say, and ask for it")
