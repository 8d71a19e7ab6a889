"""What counts as a usable reply, and when an interrogation may close: the rules of SPEC §1.

A model's nonsense is named, never dressed up as a result. Every rule here is plain code over
text, so the loop, the tests and the documentation share one definition:

- **A question** is unusable when it is empty, has no words, only repeats the hypothesis or an
  earlier question, echoes a prompt placeholder, a marker or the instructions it was given,
  imitates the transcript (answers of its own after `A1:`, or several `Q2:` questions; one
  label before one question is tolerated), or is not a question at all (no question mark, and
  no interrogative or imperative first word in English, German, Portuguese, Spanish or
  French), or asks yes or no (an English question opened by `is`, `does`, `can`… that names
  no alternatives: `YES_NO`).
- **An answer** that is empty, only repeats the question or its instructions, or writes
  transcript lines of its own (`Q2:`…) is kept as testimony, named (`no answer`, or what it
  did), and the detective presses on it.
- **A gap analysis contradicts itself** when it needs no follow-up yet rates completeness below
  `SELF_CONTRADICTION_LOW` (50), needs no follow-up yet names a high-severity gap, or rates
  completeness at `SELF_CONTRADICTION_HIGH` (90) or more with a high-severity gap.
- **The loop decides; the detective's flag is advice.** A hypothesis that states a claim
  closes when a judgement settles it (`engine.interrogation.verdict.settled`). One that states
  none may close (`completed`) only when all of these hold: at least `min_rounds` rounds were
  asked (never more than the limit), the detective needs no follow-up, the completeness is at
  least `satisfied_at`, and no high-severity gap remains (`may_close`). Otherwise it asks
  again, up to the limit (`limit-reached`). A wish to ask more is always followed.
- **An audit summary** is unusable when it is empty, echoes a placeholder or the instructions,
  or has fewer than `MIN_SUMMARY_WORDS` (5) words (a lone `Markdown:`).
- **A question leads** when it carries what it should ask about: the whole hypothesis (of
  three words or more) inside it, or the claim's answer (an evaluated claim's `answer`, when
  its words are not already in the question it answers). A leading question is unusable like
  the others.
- **A question is off the claim** (a testimony's claim, asked for its key fact) when it shares
  less than a fifth of the content words of a claim of four or more ("What is the capital
  city of London?" for "Princess Beatrice spent last night partying in London's hip
  Shoreditch"): its answer bears on something else, and was read against the claim.
  Unusable like the others.
- **A question asks about "the hypothesis" or "the claim"** (`UNSEEN`: "What is the key fact
  of the hypothesis?") unless the hypothesis itself speaks of one: the witness never sees
  the hypothesis, and answered about one of its own making. Unusable like the others.
- **An answer states the claim's own detail** (`states_claim_detail`) when the words it adds
  to the question are all the claim's (at least one; endings aside) and it negates nothing
  ("Cooler overnight temperatures." asked "What was the temperature like overnight?" for
  "Cooler overnight temperatures allowed fire crews to attack the blaze"): the witness said
  what the claim says, unprompted — a round that supports a testimony's claim, whatever the
  one-word judgement made of a partial answer (`engine.interrogation.judgement.judge`).

Breaking one of these rules is the model's nonsense, never the session's failure: the loop asks
again with the rule that was broken, and a second miss is named and stood in for
(`engine.interrogation.loop`). The verdict is no model's to break a rule with: it is computed
(`engine.interrogation.verdict`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from rapidfuzz import fuzz

from engine.interrogation.claims import content_words, segments, stem, words_read
from engine.interrogation.shapes import comparison, positive
from engine.providers import FILTERED
from engine.text import one_line

if TYPE_CHECKING:
    from engine.models.session import GapAnalysis, QuestionAnswerPair

__all__ = [
    "MARKERS",
    "MIN_SUMMARY_WORDS",
    "NO_ANSWER",
    "SELF_CONTRADICTION_HIGH",
    "SELF_CONTRADICTION_LOW",
    "YES_NO",
    "OFF_CLAIM_SHARE",
    "analysis_conflict",
    "copied_example",
    "distinct_gaps",
    "repeats_itself",
    "same_words",
    "answer_problem",
    "bare_question",
    "budget_spent",
    "close_reason",
    "may_close",
    "leading_problem",
    "off_the_claim",
    "question_problem",
    "states_claim_detail",
    "summary_problem",
]

NO_ANSWER = "no answer"
"""How an empty answer is named, in the transcript and to the detective (the same words as
`QuestionAnswerPair.answer_mark`)."""
MARKERS = ("(empty)", "(no answer)", "(no questions yet)")
"""Bracketed markers detektiv itself writes into prompts; a reply made of them is an echo."""
SELF_CONTRADICTION_LOW = 50
SELF_CONTRADICTION_HIGH = 90
MIN_SUMMARY_WORDS = 5
_SAME = 92.0
"""rapidfuzz ratio (0–100) from which two texts count as the same words."""
_SAME_WORD = 80.0
"""rapidfuzz ratio from which two words count as one, mistyped."""
_ECHO_SHARE = 0.6
"""Share of a reply's word 4-grams found in the instructions from which it is their echo."""

_YES_NO = frozenset("is are was were am do does did can could has have had will would shall "
                    "should may might must isn aren wasn doesn didn".split())
"""English words that open a yes/no question (one that names no alternatives: "Is 2 or 4 the
only even prime?" names them and is open enough)."""
YES_NO = ("it is a yes/no question: ask an open one that makes the witness state the fact "
          "(what, which, who, when, where, how many)")

_WORD = re.compile(r"\w+", re.UNICODE)
_PLACEHOLDER = re.compile(r"\{\{\s*[A-Z_][A-Z0-9_]*\s*\}\}")
_LABELS = re.compile(r"^\s*(?:\*\*)?(Q|A|Question|Answer)\s*\d+\s*(?:\*\*)?\s*:", re.M | re.I)
_QUESTION_MARKS = ("?", "？", "¿", "؟")
_OPENERS = frozenset("""
what who whom whose which when where why how is are was were am do does did can could would
will should shall may might must has have had tell describe explain name list give state say
please according in on at by for from to if whether compare define identify clarify specify
confirm provide walk outline estimate
was wer wen wem wessen welche welcher welches wann wo woher wohin warum wieso weshalb wie ist
sind war waren hat haben hatte kann können konnte wird werden würde soll sollte gibt nennen
nenne beschreiben beschreibe erklären erkläre
o que quem qual quais quando onde por porque como quanto quantos quantas é são foi foram tem
pode podem diga descreva explique
qué quién cuál cuáles cuándo dónde cómo cuánto cuántos es son fue hay puede dime describe
explica
que qui quel quelle quels quelles quand où pourquoi comment combien est sont était peut
décrivez expliquez
""".split())


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _near(word: str, others: set[str]) -> bool:
    """`word` is in `others`, give or take a typo."""
    return word in others or any(fuzz.ratio(word, other) >= _SAME_WORD for other in others
                                 if abs(len(other) - len(word)) <= 2)


def _same(a: Sequence[str], b: Sequence[str]) -> bool:
    """The same words, give or take a typo; never when a number differs ("in 1881" and "in
    1882" are two questions), nor when a word of either has no near twin in the other ("What
    is the largest planet?" does not repeat "Saturn is the largest planet": it asks for the
    word it leaves out)."""
    if not a or not b:
        return False
    if [w for w in a if w.isdigit()] != [w for w in b if w.isdigit()]:
        return False
    left, right = " ".join(a), " ".join(b)
    if left == right:
        return True
    if fuzz.ratio(left, right) < _SAME:
        return False
    mine, theirs = set(a), set(b)
    return all(_near(w, theirs) for w in mine) and all(_near(w, mine) for w in theirs)


def same_words(a: str, b: str) -> bool:
    """Whether two texts are the same words, give or take a typo (`_same`)."""
    return _same(_words(a), _words(b))


def _grams(words: Sequence[str], n: int = 4) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


_QUOTED = re.compile(r'"[^"]{0,400}"|“[^”]{0,400}”')
"""A quoted span of an instruction: a worked example or a phrase shown, not instruction prose
(a question shaped like a worked example is what the examples are for)."""


def _echoes(words: Sequence[str], instructions: Iterable[str]) -> bool:
    """Whether `words` are mostly lifted from the instructions' own prose (4 words or more;
    quoted examples are not prose)."""
    if len(words) < 4:
        return False
    mine = _grams(words)
    for text in instructions:
        theirs = _grams(_words(_QUOTED.sub(" ", _PLACEHOLDER.sub(" ", text))))
        if theirs and len(mine & theirs) >= _ECHO_SHARE * len(mine):
            return True
    return False


LOOP_SHARE = 0.4
"""At most this share of distinct word 3-grams, a text of eight words or more repeats
itself."""


def repeats_itself(words: Sequence[str]) -> bool:
    """Whether `words` loop ("A question 10, A question 10. A question 10, …"): eight words or
    more, and at most `LOOP_SHARE` of their word 3-grams distinct. A model stuck in a loop,
    like an empty reply, says nothing."""
    if len(words) < 8:
        return False
    grams = [tuple(words[i:i + 3]) for i in range(len(words) - 2)]
    return len(set(grams)) <= LOOP_SHARE * len(grams)


_BOILERPLATE = frozenset("""
answer answers answered question questions asked witness witnesses detective hypothesis
response responses reply replies interrogation round rounds summary audit session given
provided above following based regarding the this that these those
""".split())
"""Words a summary says nothing with: one made only of them restates the task ("The answer
to the question")."""


def distinct_gaps(analysis: GapAnalysis) -> GapAnalysis:
    """`analysis` when each gap says something and is listed once; `ValueError` (the
    structured call then asks again) naming a gap without a word ("3.03.3.3.1"), or one
    listed twice, same words with case and punctuation aside."""
    seen: set[tuple[str, ...]] = set()
    for gap in analysis.gaps:
        if not any(ch.isalpha() for ch in gap.description):
            raise ValueError(f"the gap {one_line(gap.description, 24)!r} says nothing: "
                             "describe what is missing in words")
        key = tuple(_words(gap.description))
        if key in seen:
            raise ValueError(f"it lists the gap {one_line(gap.description, 48)!r} twice: list "
                             "each gap once")
        seen.add(key)
    return analysis


def copied_example(text: str, hypothesis: str, instructions: Iterable[str]) -> str | None:
    """The worked example of the `instructions` (a quoted span) that `text` copies, or None.
    A copy carries at least two of the example's content words the hypothesis does not have,
    and either holds the example's whole run of words ("The hypothesis to be investigated:
    "An octopus has ten arms." …"), or has no content word of its own beside the example's
    and the hypothesis's with fewer than half of them the hypothesis's ("Who wrote the novel
    Don Quixote?" asked about Vitamin B3). A question whose words come from the hypothesis is
    never one ("Who wrote Don Quixote?" for a claim about Cervantes), nor one with a word of
    its own ("What is the capital city of Australia?" beside the example about Canada)."""
    mine = [_singular(w) for w in content_words(text)]
    theirs = {_singular(w) for w in content_words(hypothesis)}
    if not mine or 2 * sum(w in theirs for w in mine) >= len(mine):
        return None  # its words are mostly the hypothesis's
    words = _words(text)
    for instruction in instructions:
        for found in _QUOTED.finditer(_PLACEHOLDER.sub(" ", instruction)):
            example = found.group(0).strip('"“”')
            shown = {_singular(w) for w in content_words(example)}
            if len((set(mine) & shown) - theirs) < 2:
                continue
            run = _words(example)
            if (len(run) >= 3 and _contains(words, run)) or set(mine) <= shown | theirs:
                return example
    return None


def _singular(word: str) -> str:
    """`word` without a plural's `s` ("arms" and "arm" are one word here)."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") \
        else word


def _marker_only(text: str) -> bool:
    rest = text
    for marker in MARKERS:
        rest = rest.replace(marker, " ")
    return not _words(rest) and rest != text


def _contains(words: Sequence[str], part: Sequence[str]) -> bool:
    """Whether `part` occurs in `words` as a run of whole words."""
    n = len(part)
    return n > 0 and any(list(words[i:i + n]) == list(part) for i in range(len(words) - n + 1))


_UNSEEN = re.compile(r"\b(?:the|this|that)\s+(?:hypothesis|claim)\b", re.I)
UNSEEN = ("it asks about the hypothesis, which the witness never sees: ask about its subject "
          "by name")
"""A question about "the hypothesis" or "the claim" ("What is the key fact of the
hypothesis?", the 1.5B on "4 is an even prime number"): the witness answered about a
hypothesis of its own making ("… the temperature is 20 degrees Celsius")."""


def leading_problem(words: Sequence[str], hypothesis: str, answer: str | None = None,
                    asked: str | None = None) -> str | None:
    """How a question's `words` carry the hypothesis or the claim's `answer` (to the question
    `asked`), or None. A hypothesis of fewer than three words ("Dogs bark": "What makes dogs
    bark?" asks fairly), or an answer whose words are all in the question it answers ("Which
    is older, X or Y?" — "X"), is never counted; three are ("What is the key fact that bats
    are birds?" drew "… is that they are mammals", read as support)."""
    claim = _words(hypothesis)
    if len(claim) >= 3 and _contains(words, claim):
        return "it states the whole hypothesis inside the question: a leading question"
    if answer:
        given = _words(answer)
        if given and not set(given) <= set(_words(asked or "")) and _contains(words, given):
            return (f"it states the claim's answer ({one_line(answer, 40)!r}) inside the "
                    "question: a leading question")
    return None


def question_problem(
    text: str, hypothesis: str, earlier: Sequence[str], instructions: Iterable[str] = (),
    answer: str | None = None, asked: str | None = None, claim: bool = False,
) -> str | None:
    """Why `text` is no usable question (see the module docstring), or None. `answer`: the
    claim's answer to the question `asked`, when the hypothesis is an evaluated claim.
    `claim`: the hypothesis is a testimony's claim, asked for its key fact only (a question
    off it is refused; a session's own hypothesis may be probed from another side)."""
    stripped = text.strip()
    if not stripped:
        return "the question is empty"  # a budget spent thinking: `budget_spent` says so
    if _marker_only(stripped):
        return f"it only echoes the marker {one_line(stripped, 40)!r}"
    if _PLACEHOLDER.search(stripped):
        return "it echoes a prompt placeholder"
    labels = [found.group(1).lower() for found in _LABELS.finditer(stripped)]
    bare = bare_question(stripped)  # "Q5: Which …?" repeats "Which …?", and asks yes or no
    words = _words(bare)            # as the bare question it is stored as
    if not words:
        return "it has no words"
    if repeats_itself(words):
        return "it repeats itself over and over: degenerate output"
    if _same(words, _words(hypothesis)):
        return "it only repeats the hypothesis"
    for number, question in enumerate(earlier, start=1):
        if _same(words, _words(question)):
            return f"it repeats question {number}"
    if any(label in ("a", "answer") for label in labels) or len(labels) > 1:
        # one "Question 2:" before a question is a habit, not a fault; answers it wrote for
        # the witness, or several questions, are the transcript imitated
        return "it writes transcript lines (Q1:, A1:) instead of one question"
    if _echoes(words, instructions):
        return "it echoes the instructions it was given"
    example = copied_example(bare, hypothesis, instructions)
    if example is not None:
        return (f"it copies a worked example of its instructions ({one_line(example, 48)!r}), "
                "not the hypothesis")
    if not any(mark in bare for mark in _QUESTION_MARKS) and words[0] not in _OPENERS:
        return "it is not a question"
    if _UNSEEN.search(bare) and not _UNSEEN.search(hypothesis):
        return UNSEEN
    compared = comparison(hypothesis)
    if compared is not None and not compared.asks_which(bare):
        return (f"it asks about one side of a comparison: name both sides and ask which "
                f"({compared.question!r})")
    leading = leading_problem(words, hypothesis, answer, asked)
    if leading is None and words[0] in _YES_NO and "or" not in words:
        return YES_NO
    return leading or (off_the_claim(bare, hypothesis) if claim else None)


OFF_CLAIM_SHARE = 0.2
"""Below this share of a hypothesis's content words, a question is about something else."""


class _Words:
    """A text's content words, to ask whether a word is among them, give or take an ending
    ("campaigned", "campaign") or a typo."""

    def __init__(self, text: str) -> None:
        self.words = set(words_read(text))  # a number either way: "18" is "eighteen"
        self._stems = {stem(w) for w in self.words}

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and (stem(word) in self._stems
                                          or _near(word, self.words))


def off_the_claim(question: str, hypothesis: str) -> str | None:
    """Why `question` asks about something beside `hypothesis` (module docstring), or None."""
    claim = set(content_words(hypothesis))
    if len(claim) < 4:
        return None
    asked = _Words(question)
    shared = sum(1 for word in claim if word in asked)
    if shared < OFF_CLAIM_SHARE * len(claim):
        return (f"it asks about something beside the hypothesis (it shares {shared} of its "
                f"{len(claim)} content words): ask for its key fact")
    return None


_NEGATING = frozenset("""not no never none nobody nothing neither nor cannot without nicht
kein keine nie não nunca nem""".split())


def states_claim_detail(question: str, answer: str, claim: str) -> bool:
    """Whether `answer` adds to `question` only words of `claim` (at least one, endings
    aside) and negates nothing: the witness stated the claim's own detail (module
    docstring)."""
    said = _words(answer)
    if any(word in _NEGATING or word.endswith("n't") for word in said):
        return False
    asked, claimed = _Words(question), _Words(claim)
    added = [word for word in words_read(answer) if word not in asked]
    return bool(added) and all(word in claimed for word in added)


DENIAL_SHARE = 0.5
"""The share of a claim's content words (two at least) a sentence of an answer shares to be
about the claim's own predicate, in `denial`."""
_DENYING = frozenset("not no never none nothing neither nor cannot".split())
_SHORT_NOT = re.compile(r"\w(?:n['’]t)\b", re.I)
"""A negation written short: "can't", "doesn’t"."""
_NOT_A_DENIAL = re.compile(r"\bnot\s+only\b|\bno\s+(?:doubt|wonder)\b", re.I)
_CLAUSES = re.compile(r"[;:]\s+|,?\s+\b(?:but|whereas|while|although|though|yet)\b\s+", re.I)
"""Where a sentence's clauses part: "Paris is not the largest city, but it is the capital"
negates one thing and affirms another."""
MIXED_REASON = "the answer both denies and affirms the claim: never support"
DENIES_REASON = "the answer denies the claim: never support"


def _denies(sentence: str) -> bool:
    """Whether `sentence` negates what it says ("does not directly affect", "cannot"), "not
    only" and "no doubt" aside."""
    text = _NOT_A_DENIAL.sub(" ", sentence)
    return _SHORT_NOT.search(text) is not None or any(word in _DENYING for word in _words(text))


def denial(answer: str, claim: str) -> str | None:
    """How `answer` negates the claim's own predicate: `"denies"` when a sentence about the
    claim (one that shares `DENIAL_SHARE` of its content words) negates it and none affirms
    it, `"mixed"` when one negates and another affirms it ("However, niacin does not directly
    affect the symptoms of Pernicious Anemia. … niacin can help alleviate some of the
    symptoms"), else None. Never support, either: a small judge read the affirming sentence
    alone (issue 72). A negated claim is read by its own rule (`shapes.restates`)."""
    if positive(claim) is not None:
        return None
    claimed = set(content_words(claim))
    if len(claimed) < 2:
        return None
    need = max(2, math.ceil(DENIAL_SHARE * len(claimed)))
    denied = affirmed = False
    for clause in (c for part in segments(answer) for c in _CLAUSES.split(part.text)):
        said = _Words(clause)
        if sum(1 for word in claimed if word in said) < need:
            continue
        if _denies(clause):
            denied = True
        else:
            affirmed = True
    if denied:
        return "mixed" if affirmed else "denies"
    return None


_HEDGE = r"(?:(?:likely|probably|indeed|entirely|largely|mostly|generally|clearly|therefore|" \
    r"thus|in fact)\s+)?"
_SAYS_TRUE = re.compile(
    r"\b(?:is|was|are|were|be|appears?\s+to\s+be|seems?\s+to\s+be|remains?)\s+" + _HEDGE +
    r"(?:true|correct|accurate|valid|confirmed|supported|established|verified)\b"
    r"|\b(?:holds|held)\s+(?:true|up)\b|\bestablished\s+that\b|\bconfirm(?:s|ed)\s+that\b",
    re.I)
_SAYS_FALSE = re.compile(
    r"\b(?:is|was|are|were|be|appears?\s+to\s+be|seems?\s+to\s+be)\s+" + _HEDGE +
    r"(?:false|incorrect|inaccurate|invalid|refuted|wrong|untrue|unsupported|disproven|"
    r"not\s+(?:true|correct|accurate|valid|supported|confirmed|established))\b"
    r"|\b(?:does|did)\s+not\s+hold\b|\bcontradict(?:s|ed)\s+the\s+(?:hypothesis|claim)\b"
    r"|\brefut(?:es|ed)\b", re.I)


def narrative_stances(summary: str) -> list[tuple[str, str]]:
    """What a narrative says of the hypothesis's truth, sentence by sentence: each sentence
    that calls it true (`"true"`: "The hypothesis is true", "the witness established that
    …") or false (`"false"`: "… is incorrect", "… does not hold"), with its text; a sentence
    that says both is left out."""
    found = []
    for part in segments(summary):
        text = _NOT_A_DENIAL.sub(" ", part.text)
        says_true = _SAYS_TRUE.search(text) is not None
        says_false = _SAYS_FALSE.search(text) is not None
        if says_true != says_false:
            found.append(("true" if says_true else "false", part.text.strip()))
    return found


_LEADING_LABEL = re.compile(r"^\s*(?:\*\*)?(?:Q|Question)\s*\d+\s*(?:\*\*)?\s*:\s*(?:\*\*)?\s*",
                            re.I)


def bare_question(text: str) -> str:
    """A usable question without the labels a model puts before it ("Q3:", "**Question 3:**",
    even twice): what is stored and shown back, so a label is not copied from round to
    round."""
    stripped = text.strip()
    while (found := _LEADING_LABEL.match(stripped)) and found.end() < len(stripped):
        stripped = stripped[found.end():]
    return stripped


def budget_spent(who: str, text: str, finish_reason: str, reasoning: str = "") -> str | None:
    """How a reply cut at its token limit before any text is named: `who` (the witness, the
    detective) spent its whole budget thinking. None for any other reply."""
    if text.strip() or finish_reason != "length":
        return None
    if reasoning.strip():
        return f"{who} spent its whole token budget thinking and gave no reply"
    return f"{who} spent its whole token budget before any reply"


def answer_problem(answer: str, question: str, finish_reason: str = "",
                   reasoning: str = "", instructions: Iterable[str] = ()) -> str | None:
    """Why a witness's answer is no real testimony (`NO_ANSWER`, a budget spent thinking, an
    echo of the question or of its `instructions`, the transcript imitated, the provider's
    content filter), or None."""
    stripped = answer.strip()
    if finish_reason == "content_filter":
        return FILTERED
    spent = budget_spent("the witness", answer, finish_reason, reasoning)
    if spent is not None:
        return spent
    if not stripped or not _words(stripped) or _marker_only(stripped):
        return NO_ANSWER
    words = _words(stripped)
    if _same(words, _words(question)):
        return "the answer only repeats the question"
    if any(found.group(1).lower() in ("q", "question") for found in _LABELS.finditer(stripped)):
        return "the answer writes transcript lines (Q2:, A2:) instead of an answer"
    if _echoes(words, instructions):
        return "the answer only repeats its instructions"
    return None


def summary_problem(summary: str, instructions: Iterable[str] = ()) -> str | None:
    """Why an audit summary is empty or boilerplate, or None."""
    stripped = summary.strip()
    if not stripped:
        return "the summary is empty"
    if _PLACEHOLDER.search(stripped):
        return "the summary echoes a prompt placeholder"
    words = _words(stripped)
    if len(words) < MIN_SUMMARY_WORDS:
        return (f"the summary is boilerplate ({one_line(stripped, 40)!r}, fewer than "
                f"{MIN_SUMMARY_WORDS} words)")
    if not [w for w in content_words(stripped) if w not in _BOILERPLATE]:
        return (f"the summary is boilerplate ({one_line(stripped, 40)!r} only restates the "
                "task)")
    if repeats_itself(words):
        return "the summary repeats itself over and over: degenerate output"
    if _echoes(words, instructions):
        return "the summary only repeats the instructions"
    return None


def analysis_conflict(analysis: GapAnalysis) -> str | None:
    """How a gap analysis contradicts itself, or None."""
    score = analysis.completeness_score
    high = sum(1 for gap in analysis.gaps if gap.severity == "high")
    if not analysis.requires_follow_up and score < SELF_CONTRADICTION_LOW:
        return f"it needs no follow-up yet rates completeness {score}/100"
    if not analysis.requires_follow_up and high:
        return "it needs no follow-up yet names a high-severity gap"
    if score >= SELF_CONTRADICTION_HIGH and high:
        return f"it rates completeness {score}/100 yet names a high-severity gap"
    return None


def may_close(
    pairs: Sequence[QuestionAnswerPair], limit: int, satisfied_at: int, min_rounds: int
) -> bool:
    """Whether the session may end `completed` after its last round (the loop's rule)."""
    if not pairs or len(pairs) < min(min_rounds, limit):
        return False
    last = pairs[-1].gap_analysis
    return (not last.requires_follow_up
            and last.completeness_score >= satisfied_at
            and not any(gap.severity == "high" for gap in last.gaps))


def close_reason(pairs: Sequence[QuestionAnswerPair], limit: int, completed: bool) -> str:
    """Why the loop stopped asking: the detective's satisfaction (`completed`), or the limit."""
    if not completed:
        return f"the limit of {limit} rounds was reached"
    rounds, score = len(pairs), pairs[-1].gap_analysis.completeness_score
    return (f"the detective was satisfied after {rounds} round{'s' if rounds != 1 else ''} "
            f"(completeness {score}/100, no high-severity gap)")
