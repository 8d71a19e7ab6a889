"""Two claim shapes a small judge reads wrong, taken apart by rule: a comparison ("Lead is
denser than aluminium") and a negation ("The Earth does not orbit the Moon").

Measured on `bench/data/shapes-dev.jsonl` (the 1.5B in both roles): the detective asked
for one side of a comparison only ("What is the height of Mont Blanc?") and the judgement
read the answer as support, for a claim and for its reverse alike; given both densities
("aluminium 2.70 g/cm³, lead 11.34 g/cm³") it read "Aluminium is denser than lead" as
supported at 0.87. And a negated claim was read against its own negation: "The body that
orbits the other is the Moon" contradicted "The Earth does not orbit the Moon" (0.25). So:

- a comparison is first asked its open form, made here, both ways (`Comparison.questions`,
  "Which is denser, aluminium or lead?" then "lead or aluminium?", the sides in an order of
  their own; `rule_question`), and two answers naming opposite sides leave it undetermined
  (`by_position`, `claim_closes`); a later question must name both sides and ask which
  (`Comparison.asks_which`, what `checks.question_problem` holds the detective to), and an
  answer that names the side that wins is read by rule (`Comparison.winner`): the claim's
  own side supports it, the other contradicts it — whatever the one-word judgement said. A
  denied comparison ("Lead is not denser than aluminium") is asked its positive form and
  read the other way round;
- a negated claim is first asked "Is it true that the Earth does not orbit the Moon?"
  (`negation_question`; the 1.5B wrote questions that presuppose the negation), an answer
  that restates the claim or its positive form is read by rule (`restates`), and every
  judgement reads its positive form (`positive`: "The Earth does orbit the Moon") and is
  turned over: P(true) of the claim = 1 − P(true) of the positive.

Pure functions of the claim's and the answer's words; nothing here calls a model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.interrogation.claims import content_words, stem
from engine.interrogation.verdict import claim_facts, settled
from engine.models.session import QuestionAnswerPair

__all__ = ["Comparison", "asked_alone", "by_position", "comparison", "finished",
           "claim_closes", "least_rounds", "negation_question", "positive", "restates",
           "rule_question"]

_AUX = frozenset("is are was were has have had can could does do did will would".split())
_COMPARATIVE_WORDS = frozenset("more less fewer better worse further farther".split())
_NOT_VERBS = frozenset("this his its us as bus gas plus".split())
_INVERTING = frozenset("less fewer not no neither nor never both same equal equally "
                       "similar".split())
_WORD = re.compile(r"[\w'’-]+")
_ARTICLE = re.compile(r"^(The|A|An)\b")
_QUANTIFIERS = frozenset("nothing nobody everything everyone everybody no none few many most "
                         "some all each every any".split())
_NUMBER = re.compile(r"^\W*(?:\d|(?:one|two|three|four|five|six|seven|eight|nine|ten|"
                     r"hundred|thousand|million|billion|half|twice|a few|several)\b)", re.I)
"""A side that is a quantity ("more than 2 million", "more than half"): no comparison of two
things."""
_NOT_COMPARATIVE = frozenset("other either neither whether together however rather never ever "
                             "over under after water number member river paper power "
                             "summer winter letter matter order center centre".split())


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _is_comparative(word: str) -> bool:
    low = word.lower()
    return low in _COMPARATIVE_WORDS or (len(low) > 4 and low.endswith("er")
                                          and low not in _NOT_COMPARATIVE)


def _verb_at(words: list[str]) -> int | None:
    """Where a sentence's first verb stands (an auxiliary, or a third-person verb such as
    "travels"): the end of its subject. None when none is found past the first word. An
    auxiliary goes first ("A kilogram of feathers is heavier": "feathers" is no verb), and a
    word after "of", an article or a possessive is a noun ("the hearts of hummingbirds")."""
    for index, word in enumerate(words[1:], start=1):
        low = word.lower().replace("’", "'")
        if low in _AUX or low in ("cannot", "can't", "won't") or (
                low.endswith("n't") and low[:-3] in _AUX):  # "isn't", "doesn't"
            return index
    for index, word in enumerate(words[1:], start=1):
        low, before = word.lower(), words[index - 1].lower()
        if (word.islower() and len(low) > 3 and low.endswith("s") and low not in _NOT_VERBS
                and not low.endswith(("ss", "us", "is", "ous")) and before not in _NOUN_BEFORE
                and not before.endswith(("'s", "’s", "s'", "s’"))):
            return index
    return None


_NOUN_BEFORE = frozenset("of the a an its their his her my our your this that these those "
                         "some many most all".split())


def _side(text: str) -> str:
    """A side as it reads inside a question: a leading article in lower case, the sentence's
    end taken off."""
    text = text.strip().rstrip(".!;:").strip()
    return _ARTICLE.sub(lambda found: found.group(1).lower(), text)


def _uncapitalised(subject: str, other: str) -> str:
    """The claim's subject without the capital that only opens its sentence: when the other
    side is a common noun ("Gold is denser than silver" → "gold"), so that a claim and its
    reverse are asked the very same question. A name ("Russia", "NASA") keeps its capital."""
    bare = _BARE_ARTICLE.sub("", other)
    if subject[:1].isupper() and subject[1:2].islower() and bare[:1].islower():
        return subject[:1].lower() + subject[1:]
    return subject


_BARE_ARTICLE = re.compile(r"^(?:the|an?)\s+", re.I)


def _order(side: str) -> str:
    """A side's place in a question: its words in lower case, a leading article aside."""
    return _BARE_ARTICLE.sub("", side.casefold())


def _root(word: str) -> str:
    """A word without a plural's or a verb's ending, cut to five letters ("rusts", "rust")."""
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            word = word[:-len(ending)]
            break
    return word[:5]


@dataclass(frozen=True, slots=True)
class Comparison:
    """A claim that `subject` wins over `other` on `predicate` ("is denser", "has a larger
    area")."""

    subject: str
    other: str
    predicate: str
    marker: str
    """The word that must come with a side in an answer for the rule to read it: the
    claim's comparative ("denser", "larger"; "inhabitants" for "more inhabitants")."""
    negated: bool = False
    """The claim denies the comparison ("Lead is not denser than aluminium"): `predicate` is
    its positive form, asked as it is, and the side that wins it contradicts the claim."""

    @property
    def question(self) -> str:
        """The open form of the comparison: "Which is denser, aluminium or lead?". The sides
        are named in an order of their own (alphabetical, articles aside), not the claim's, so
        a claim and its reverse are asked the same question and the answer cannot follow the
        claim's wording: in the claim's order, a witness that leans to the side named first
        (a small model's habit) would lean towards whatever is claimed."""
        return self.questions[0]

    @property
    def questions(self) -> tuple[str, str]:
        """The open form asked both ways: `question`, then its sides swapped ("Which is
        denser, lead or aluminium?"). The 1.5B names the side asked first: on the development
        and test comparisons it named the same side both ways for 10 of 15 pairs (9 right)
        and the side asked first both times for the other 5 — which, asked one way only,
        decided a claim and its reverse by the order of the question."""
        theirs = _side(self.other)
        first, second = sorted((_uncapitalised(_side(self.subject), theirs), theirs),
                               key=_order)
        return (f"Which {self.predicate}, {first} or {second}?",
                f"Which {self.predicate}, {second} or {first}?")

    def _own(self) -> tuple[set[str], set[str]]:
        """The stems of each side's content words that the other side lacks."""
        mine = {stem(w) for w in content_words(self.subject)}
        theirs = {stem(w) for w in content_words(self.other)}
        return mine - theirs, theirs - mine

    def asks_which(self, question: str) -> bool:
        """Whether `question` names both sides (a word of each that the other lacks, when they
        have one) and asks which ("Which is higher, X or Y?"): not one side's value, nor both
        values to compare ("What is the density of lead compared to aluminium?" — the judge
        then compares the numbers, and the 1.5B does that wrong)."""
        mine, theirs = self._own()
        asked = {stem(w) for w in content_words(question)}
        named = (not mine or bool(mine & asked)) and (not theirs or bool(theirs & asked))
        return named and bool(_WHICH.search(question))

    def winner(self, answer: str) -> bool | None:
        """Whether `answer` says the claim's subject wins (True), the other side does
        (False), or neither by rule (None: the judgement reads it). Read: "X is denser than
        Y" (the claim's marker before "than", a side before it, nothing that turns it over:
        less, not, both, the same…), or one side named alone beside the marker ("Lead is the
        denser one"), or a short answer that is only one side's name ("Lead.")."""
        mine, theirs = self._own()
        if not mine or not theirs:
            return None  # the sides share every word ("World War I", "World War II")
        words = [w.lower() for w in _words(answer)]
        inverting = _INVERTING - {w.lower() for w in _words(self.predicate)}
        if any(w in inverting or w.endswith(("n't", "n’t")) for w in words):
            return None
        marker = stem(self.marker.lower())
        sides = [(i, stem(w) in mine) for i, w in enumerate(words)
                 if stem(w) in mine or stem(w) in theirs]
        if not sides:
            return None
        has_marker = any(stem(w) == marker for w in words)
        if "than" in words:
            than = words.index("than")
            # the marker stands before "than", as far back as the claim's own words after it
            # reach ("closer to the Sun than": four words)
            reach = 3 + len(_words(self.predicate))
            if not any(stem(w) == marker for w in words[max(0, than - reach):than]):
                return None
            before = [is_mine for i, is_mine in sides if i < than]
            after = [is_mine for i, is_mine in sides if i > than]
            if not before or not after or before[-1] == after[0]:
                return None
            chosen = before[-1]
        else:
            named = {is_mine for _, is_mine in sides}
            if len(named) != 1:
                return None
            if not has_marker and len(content_words(answer)) > 4:
                return None  # a side named in passing is no choice
            chosen = named.pop()
        return chosen != self.negated


SUBJECT_WORDS = 8
"""The most words a comparison's subject has: a longer one is a clause, not a side."""
_WHICH = re.compile(r"\b(?:which|who|whose)\b", re.I)
_THAN = re.compile(r"\s+than\s+", re.I)


def comparison(claim: str) -> Comparison | None:
    """The comparison `claim` makes, or None: one sentence "X <verb> <comparative …> than Y"
    (one "than"), X a thing of at most `SUBJECT_WORDS` words and Y no quantity ("more than 2
    million" compares no two things). Order in time ("X began before Y") is left out: "He
    moved to Paris after the war" reads the same way and compares nothing. A comparison
    denied in its verb ("X is not denser than Y", "X doesn't weigh more than Y") is taken in
    its positive form and marked `negated`; a negation anywhere else makes it no comparison
    read here (the negation's own rules read it). A trailing auxiliary of the other side
    ("than Earth is") is no part of it."""
    text = claim.strip().rstrip(".!").strip()
    if re.search(r"[.!?;]\s", text):
        return None  # one sentence only
    parts = _THAN.split(text)
    if len(parts) == 2:
        left, right = parts
        spans = list(_WORD.finditer(left))
        words = [span.group(0) for span in spans]
        at = _verb_at(words)
        if at is not None and at > 1 and words[at - 1].lower() == "never":
            at -= 1  # "Gold never weighs more": the predicate's negation
        if at is None or at > SUBJECT_WORDS or not right.strip() or _NUMBER.match(right):
            return None
        predicate_words = words[at:]
        markers = [w for w in predicate_words if _is_comparative(w)]
        if not markers:
            return None
        marker = markers[-1]
        if marker.lower() in ("more", "less", "fewer"):  # "more inhabitants": the noun
            place = predicate_words.index(marker)
            after = predicate_words[place + 1:]
            if after:
                marker = after[0]
            elif place == 0 or predicate_words[place - 1].lower() in _AUX:
                return None  # "Paris is more than a city"
            # else "Gold weighs more than silver": the comparative itself is the marker
        subject, predicate = left[:spans[at].start()].strip(), left[spans[at].start():].strip()
        if not content_words(subject) or words[0].lower() in _QUANTIFIERS:
            return None  # "Nothing is better than rest" names no side
        if "," in subject or _CLAUSE.search(subject):
            return None  # "Lead, which does not rust, is …": the verb may be the clause's
        right = _TRAILING_AUX.sub("", right.strip())
        if _SETTING.match(" " + right):
            return None  # "… more common in Europe than in Asia": one thing in two settings
        setting = _SETTING.search(right)
        if setting is not None and content_words(right[:setting.start()]):
            # "faster than light in air": the setting is the comparison's, not the side's
            predicate = f"{predicate} {right[setting.start():].strip()}"
            right = right[:setting.start()].strip()
        denied = positive(predicate)
        if _UNFLIPPABLE.search(predicate) or denied is None and (
                _NEGATION.search(predicate) or _NEGATING.search(predicate)):
            return None  # a negation that does not turn over ("neither … nor")
        if not content_words(right):
            return None  # "… denser than ???": no other side named
        if _words(right)[0].lower() in _PRONOUNS:
            return None  # "… faster in water than it does in air": one thing in two places
        if _NEGATING.search(subject) or _NEGATING.search(right):
            return None  # "Lead that is not pure is …": a clause's negation, not the verb's
        if denied is not None:
            return Comparison(subject, right, denied, marker, negated=True)
        return Comparison(subject, right, predicate, marker)
    return None


_CLAUSE = re.compile(r"\b(?:which|who|whom|whose)\b", re.I)
_SETTING = re.compile(r"\s+(?:in|at|on|by|under|during|within|when|while|near)\s+", re.I)
"""Where a comparison holds ("in air", "at sea level"), after the other side."""
_PRONOUNS = frozenset("it they he she we you i one".split())
_TRAILING_AUX = re.compile(r"\s+(?:is|are|was|were|does|do|did|has|have|had|can|could)\s*$",
                           re.I)


_NEGATION = re.compile(
    r"\b(?:(?P<aux>does|do|did|is|are|was|were|has|have|had|can|could|will|would|should|"
    r"must|may|might)\s+not|(?P<short>does|do|did|is|are|was|were|has|have|had|could|would|"
    r"should|must)n[’']t|(?P<cannot>cannot|can[’']t)|(?P<wont>won[’']t)|(?P<no>has|have|had)"
    r"\s+no|(?P<there>there\s+(?:is|are|was|were))\s+no|(?P<never>never))\b", re.I)
_UNFLIPPABLE = re.compile(r"\b(?:not only|no longer|no one|nothing|nobody|none|nowhere|"
                          r"neither|nor|without)\b", re.I)


def positive(claim: str) -> str | None:
    """`claim` with its one negation taken out ("does not orbit" → "does orbit", "cannot fly"
    → "can fly", "has no moons" → "has moons", "there are no snakes" → "there are snakes"),
    or None: no negation, more than one, or one
    that does not turn over by taking it out ("not only", "no longer", "nobody")."""
    if _UNFLIPPABLE.search(claim):
        return None
    found = list(_NEGATION.finditer(claim))
    if len(found) != 1:
        return None
    match = found[0]
    if match.group("aux"):
        replacement = match.group("aux")
    elif match.group("short"):
        replacement = match.group("short")
    elif match.group("cannot"):
        replacement = "can" if match.group(0)[0].islower() else "Can"
    elif match.group("wont"):
        replacement = "will" if match.group(0)[0].islower() else "Will"
    elif match.group("no"):
        replacement = match.group("no")
    elif match.group("there"):  # "There are no snakes in Ireland" → "There are snakes …"
        replacement = match.group("there")
    else:  # "never": "X never won" → "X won"
        replacement = ""
    rest = claim[match.end():]
    if match.group("aux") or match.group("short"):  # "does not have any moons" → "does have moons"
        rest = re.sub(r"^(\s+(?:have|has|had))?\s+any\b", r"\1", rest)
    text = claim[:match.start()] + replacement + rest
    return re.sub(r"\s{2,}", " ", text).strip()


def negation_question(claim: str) -> str | None:
    """The question a negated claim is first asked: "Is it true that penguins cannot fly?";
    None when the claim is no negation `positive` turns over. Measured on the twelve
    development negations (the 1.5B as witness, each answer read by `restates` or the
    judgement): the detective's own questions presupposed the negation ("What is the key
    fact that makes it impossible for eagles to fly?") and got 5 right; the yes/no question
    of the positive form ("Can penguins fly?") got 8 — the witness said yes to 10 of 12 —
    and this one 10 (it said yes to 6, no to 6; AUROC 0.92 against 0.82)."""
    if positive(claim) is None:
        return None
    text = claim.strip().rstrip(".!").strip()
    if text.split(" ", 1)[0].lower() in _FUNCTION_WORDS:  # "There are …", "In Ireland …"
        text = text[:1].lower() + text[1:]
    return f"Is it true that {_side(text)}?" if text else None


_FUNCTION_WORDS = frozenset("there in on at it this that these those some most all many "
                            "during after before".split())
"""A sentence's first word that is never a name: no capital inside the question."""


_YES_NO = re.compile(r"^\W*(?:yes|no|correct|true|false|indeed)\b\W*", re.I)
_FRAMED = re.compile(r"^\W*it(?:\s+is|[’']s)\s+(not\s+)?(?:true|correct)\s+that\s+", re.I)
_SENTENCE_END = re.compile(r"[.!?;](?:\s|$)")
_NEGATING = re.compile(r"\b(?:not|no|never|cannot|none|neither|nor|without)\b|n[’']t\b", re.I)


def restates(answer: str, claim: str) -> bool | None:
    """Whether `answer` restates a negated `claim` (True: "Yes, penguins cannot fly."), its
    positive form (False: "No, eagles can fly.", "Iron rusts."), or neither (None: the
    judgement reads it). Read from the answer's first sentence, a leading yes or no left
    aside (the sentence says which it means), and "it is true that" (or "it is not true that",
    which turns it over): its content words are all the claim's, endings aside, at least two
    of them, in the claim's order, and it negates (the claim) or does not (the positive
    form).
    The 1.5B judged "Yes, gold does not rust." at 0.48 and "Yes, a spider is not an insect." at
    0.55 against "Gold does not rust", "A spider is not an insect"."""
    if positive(claim) is None:
        return None
    first = _SENTENCE_END.split(_YES_NO.sub("", answer.strip()), maxsplit=1)[0]
    framed = _FRAMED.match(first)  # "it is (not) true that …": the question's own words
    if framed is not None:
        inner = restates(first[framed.end():], claim)
        return None if inner is None else inner != bool(framed.group(1))
    said = [_root(w) for w in content_words(_NEGATING.sub(" ", first))]
    claimed = [_root(w) for w in content_words(_NEGATING.sub(" ", claim))]
    if len(set(said)) < 2 or not set(said) <= set(claimed):
        return None
    if _in_order(said) != [w for w in _in_order(claimed) if w in said]:
        return None  # "The Moon orbits the Earth" is no form of "The Earth does not orbit …"
    return bool(_NEGATING.search(first))


def finished(text: str) -> str:
    """`text` up to the end of its last finished sentence ("" when none ended): what a reply
    cut off at its token limit says for certain."""
    ends = list(_SENTENCE_END.finditer(text))
    return text[:ends[-1].start() + 1] if ends else ""


def _in_order(words: list[str]) -> list[str]:
    """`words` in order, each once (where it first stands)."""
    return list(dict.fromkeys(words))


def rule_question(claim: str, earlier: Sequence[str]) -> str | None:
    """The next question of `claim` made by rule after the questions `earlier`, or None (the
    detective writes it): a comparison's open form both ways (`Comparison.questions`), one
    after the other; a negation's "Is it true that …?" first."""
    found = comparison(claim)
    if found is not None:
        asked = found.questions
        return asked[len(earlier)] if tuple(earlier) == asked[:len(earlier)] \
            and len(earlier) < len(asked) else None
    return None if earlier else negation_question(claim)


def asked_alone(claim: str, question: str) -> bool:
    """Whether `question` is put to the witness in a conversation of its own, with no earlier
    round before it: a comparison's questions by rule (`Comparison.questions`). Asked the other
    way with its first answer in the conversation, the 1.5B said that answer again — "Which is
    larger, the Pacific Ocean or the Atlantic Ocean?" drew "The Atlantic Ocean is larger than
    the Pacific Ocean." in both orders (the shapes test sample) — so the swap tested nothing."""
    found = comparison(claim)
    return found is not None and question.strip() in found.questions


def claim_closes(claim: str, rounds: Sequence[QuestionAnswerPair], min_rounds: int,
                 least: int) -> bool:
    """Whether the questioning of `claim` may close after `rounds` (its own): its verdict is
    settled (`verdict.settled`, after `least` rounds: `least_rounds`), or a comparison's
    two rule questions drew opposite sides (`by_position`)."""
    return settled([(p.sequence, p.judgement) for p in rounds], len(rounds), min_rounds,
                   least) or by_position(claim, [(p.question, p.answer) for p in rounds])


def least_rounds(claim: str) -> int:
    """The rounds `claim` is asked before its questioning may close: one a fact
    (`verdict.claim_facts`), and a comparison both ways (`Comparison.questions`)."""
    facts = claim_facts(claim)
    return max(facts, 2) if comparison(claim) is not None else facts


def by_position(claim: str, exchanges: Sequence[tuple[str, str]]) -> bool:
    """Whether a comparison's two rule questions (`Comparison.questions`, the first two of
    `exchanges`: question and answer) drew opposite sides — the witness named the side asked
    first, or changed its mind: either way its answers say nothing about the claim, and
    asking more in other words draws the same habit. The rounds conflict (rule 2 of
    `verdict`): the questioning closes, `undetermined`."""
    found = comparison(claim)
    if found is None or len(exchanges) < 2:
        return False
    (first, said), (second, then) = exchanges[:2]
    if (first, second) != found.questions:
        return False
    one, other = found.winner(said), found.winner(then)
    return one is not None and other is not None and one != other
