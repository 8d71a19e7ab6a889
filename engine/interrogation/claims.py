"""A testimony's text taken apart: when a hypothesis is a testimony, the split's rules, and
where each claim stands in the text. Plain code over text, so the loop, the tests and the
documentation share one definition.

- **A testimony** (`testimony_source`): a hypothesis that asks (`verdict.states_no_claim`: a
  question, "Summarize …") is answered by the witness, and that answer is the testimony; a
  hypothesis of two sentences or more (`sentences`) is itself the testimony. A single
  sentence is a single claim, interrogated as before.
- **The split** is the detective's: one claim a line, from worked examples
  (`prompts/split_claims.md`). `read_split` takes the lines apart (bullets, numbers and a
  `[not checkable]` mark read off); `claim_problem` refuses a line that is no statement,
  that repeats another claim, or that has content words found in neither the testimony nor
  the hypothesis (a fact the splitter added; naming what "it" stands for with words of the
  testimony is fine). A refused line is named; the split is asked for again once with what
  was wrong.
- **Not checkable** (`not_checkable`): opinion, advice, or a statement too vague to check —
  kept and listed, never examined, never dropped silently.
- **Spans** (`locate`): each claim is placed on the sentence (or list item) of the testimony
  that shares most of its content words, so it can be marked where it stands.
- **Words the document lacks** (`unfound`): with a document, the claim's words of five
  letters or more (and its numbers) that no word of the document matches, endings aside —
  the grounding reading of `verdict`'s rule 9.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from engine.interrogation.verdict import states_no_claim
from engine.models.testimony import TestimonySource

__all__ = ["Piece", "Segment", "adds_nothing", "as_listed", "claim_for", "claim_problem",
           "content_words",
           "left_out", "locate", "not_checkable", "read_split", "segments", "sentences",
           "stem", "testimony_source", "unfound", "words_read"]

def claim_for(question: str, answer: str) -> str:
    """The claim an answer to a question makes, as the detective reads it (an answer of one
    statement: an evaluation's, a scorer's)."""
    return f'The answer to the question "{question.strip()}" is: {answer.strip()}'


_ABBREVIATIONS = frozenset("""mr mrs ms dr prof st sr jr vs etc e.g i.e approx no fig
inc ltd co corp dept est jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.m p.m
""".split())
_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s+|$)")


@dataclass(frozen=True, slots=True)
class Segment:
    """A sentence or list item of a text, with its offsets."""

    start: int
    end: int
    text: str


def segments(text: str) -> list[Segment]:
    """The sentences and list items of `text`, in order, with their offsets: a full stop,
    question or exclamation mark before white space and a word that is not in lower case
    ends one, unless it ends a known abbreviation ("Dr.", "e.g."), an initial ("J. R. R.
    Tolkien") or a list's number ("1."); a line break ends one only where a line ends a
    sentence or a heading (":"), before a blank line or a list item — a hard-wrapped sentence
    is one sentence."""
    found: list[Segment] = []
    for begin, body in _blocks(text):
        start = 0
        for end in _END.finditer(body):
            before = body[start:end.start()].split()
            last = before[-1].lower().rstrip(".") if before else ""
            if end.group().startswith(".") and (last in _ABBREVIATIONS or
                                                (len(last) == 1 and last.isalpha()) or
                                                (len(before) == 1 and last.isdigit())):
                continue  # "Dr.", an initial, a list's "1."
            following = body[end.end():].lstrip()[:1]
            if following.islower():
                continue  # 'The answer to "Where?" is: …' goes on after its question mark
            _add(found, text, begin + start, begin + end.end())
            start = end.end()
        _add(found, text, begin + start, begin + len(body))
    return found


_ITEM = re.compile(r"^\s*(?:[-*•·–]|\(?\d{1,3}[.)]|#{1,6})\s")


def _blocks(text: str) -> list[tuple[int, str]]:
    """(offset, text) of the runs of lines a line break does not end (see `segments`)."""
    lines = [(m.start(), m.group()) for m in re.finditer(r"[^\n]*", text) if m.group() or
             m.start() < len(text)]
    blocks: list[tuple[int, str]] = []
    for offset, line in lines:
        if not line.strip():
            continue
        if blocks:
            at, body = blocks[-1]
            ends = body.rstrip()[-1:] in (".", "!", "?", ":", "…") or \
                body.rstrip().endswith(("**", '."', '?"'))
            joined = text[at + len(body):offset]
            if not ends and "\n\n" not in joined and not _ITEM.match(line) and \
                    len(_WORD.findall(body)) > 3:
                blocks[-1] = (at, text[at:offset + len(line)])
                continue
        blocks.append((offset, line))
    return blocks


def _add(found: list[Segment], text: str, start: int, end: int) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if re.search(r"\w", text[start:end]):
        found.append(Segment(start, end, text[start:end]))


def sentences(text: str) -> int:
    """How many sentences `text` has that state something (a heading of three words or fewer
    — "Benefits:" — is not one)."""
    return sum(1 for s in segments(text) if _states(s))


def _states(part: Segment) -> bool:
    """Whether a sentence or list item states something (`sentences`)."""
    return len(_WORD.findall(part.text)) > 3 or part.text.rstrip()[-1:] in ".!?"


def left_out(spans: Sequence[tuple[int, int]], text: str) -> list[Segment]:
    """The sentences of `text` that state something (`sentences`; a line that leads in to
    a list, "Its benefits include:", does not) and hold none of the claims placed at `spans`
    (`locate`'s offsets): what a split left out."""
    taken = {start for start, end in spans if end}
    return [part for part in segments(text) if part.start not in taken and _states(part)
            and not part.text.rstrip().endswith(":")]


def testimony_source(hypothesis: str) -> TestimonySource | None:
    """`witness` when the hypothesis asks (the witness's answer is the testimony), `given` when
    it states two sentences or more, None for a single claim (interrogated as before)."""
    if states_no_claim(hypothesis):
        return "witness"
    if sentences(hypothesis) >= 2:
        return "given"
    return None


_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset("""a an the and or but nor of in on at to for from by with without into onto
about above below over under between among through during before after since until than
then as is are was were be been being am has have had having do does did done will would
shall should can could may might must it its it's this that these those there here their
they them he him his she her hers we us our you your i me my mine not no yes also very more
most less least much many some any all each every other such own same so too just only
which who whom whose what when where why how one ones both either neither
""".split())
_BULLET = re.compile(r"^\s*(?:[-*•·–]+|\(?\d{1,3}[.)]|\(?[a-z][.)])\s+", re.IGNORECASE)
_MARK = re.compile(r"^\s*\[\s*not\s+checkable\s*\]\s*:?\s*", re.IGNORECASE)


def stem(word: str) -> str:
    """A word cut to its first five letters: "campaigned" and "campaign" alike (the rules
    that compare a question's, a claim's and an answer's words, give or take an ending)."""
    return word[:5] if len(word) > 5 else word


_NOT = re.compile(r"(?:\b(?:wo|ca|sha))?n['\u2019]t\b", re.IGNORECASE)
"""A negation written short ("weren't", "doesn’t"; "won't", "can't", "shan't" whole): read
as "not", so that "weren" is no word of its own (the document may say "were not")."""


def content_words(text: str) -> list[str]:
    """The words of `text` that carry content (lower case, stop words and single letters
    left out; digits kept; "weren't" read as "were not")."""
    return [w for w in (m.lower() for m in _WORD.findall(_NOT.sub(" not", text)))
            if w not in _STOP and (len(w) > 1 or w.isdigit())]


@dataclass(frozen=True, slots=True)
class Piece:
    """One line of the split: the claim's text and whether the split marked it not
    checkable."""

    text: str
    marked: bool


_HEADING = re.compile(r"^(?:\*\*)?((?:[A-Z0-9][\w'-]*\s*){1,5})(?:\*\*)?\s*:\s*(?:\*\*)?\s*(?=\S)")
"""A list item's heading before its sentence ("**Energy Production**: Niacin helps …")."""


_EMPHASIS = re.compile(r"\*\*|__|`")


def as_listed(sentence: str) -> str:
    """A sentence of a testimony as a claims list shows it: without its list marker and its
    markdown emphasis ("2. **Skin Health**: Niacin …" → "Skin Health: Niacin …"); its span
    still marks it where it stands."""
    return _EMPHASIS.sub("", _BULLET.sub("", sentence)).strip() or sentence.strip()


def read_split(reply: str) -> list[Piece]:
    """The claims a split reply lists, a line each (bullets, numbers and a list item's
    heading read off; blank lines and a line that introduces the list — "Claims:" — left
    out)."""
    pieces: list[Piece] = []
    for raw in reply.splitlines():
        line = raw.strip().strip("*_`").strip()
        line = _BULLET.sub("", line).strip().strip("*_`").strip()
        marked = bool(_MARK.match(line))
        line = _MARK.sub("", line).strip()
        if not line or (line.endswith(":") and len(_WORD.findall(line)) <= 4):
            continue
        heading = _HEADING.match(line)
        if heading and len(_WORD.findall(line[heading.end():])) >= 3:
            line = line[heading.end():].strip()
        pieces.append(Piece(line.replace("**", ""), marked))
    return pieces


UNFOUND_LETTERS = 5
"""How long a word must be to count as one the document lacks (`unfound`): shorter ones are
mostly a paraphrase's ("says", "led", "hits"), the longer ones carry what a summary adds."""


_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve "
                 "thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty").split()
_SPELLED = {word: str(number) for number, word in enumerate(_NUMBER_WORDS)}
_THOUSANDS = re.compile(r"(?<=\d)[,.\u202f\u00a0'](?=\d{3}(?!\d))")
"""A thousands separator between digits ("1,000", "1.000", "1 000"): read as "1000"."""


def _joined(text: str) -> list[str]:
    """`text`'s content words, a number with thousands separators as one ("1,000": "1000")."""
    return content_words(_THOUSANDS.sub("", text))


def words_read(text: str) -> list[str]:
    """`text`'s content words, a number with thousands separators as one, and a number
    from zero to twenty also as its word ("5" and "five" match either way)."""
    words = _joined(text)
    return words + [_SPELLED[w] for w in words if w in _SPELLED] + [
        _NUMBER_WORDS[int(w)] for w in words if w.isdigit() and int(w) < len(_NUMBER_WORDS)]


def unfound(claim: str, document: str) -> list[str]:
    """The words of `claim` of `UNFOUND_LETTERS` letters or more, and its numbers, that no word
    of `document` matches, endings aside (`_known`; "1,000" is "1000", "5" is "five"), in the
    claim's order, each once."""
    known = set(words_read(document))
    found: list[str] = []
    for word in _joined(claim):
        if (word.isdigit() or len(word) >= UNFOUND_LETTERS) and word not in found \
                and not _known(word, known):
            found.append(word)
    return found


def _known(word: str, known: set[str]) -> bool:
    """`word` is in `known`, give or take an ending ("carbs" / "carbohydrates" is not; "cells"
    / "cell" is)."""
    if word in known:
        return True
    if word.isdigit():
        return False
    start = word[:max(4, len(word) - 3)]
    return any(other.startswith(start) or word.startswith(other[:max(4, len(other) - 3)])
               for other in known if not other.isdigit() and abs(len(other) - len(word)) <= 4)


def adds_nothing(answer: str, question: str, earlier: Sequence[str]) -> bool:
    """Whether `answer` (to `question`) says nothing that the `earlier` answers of the same
    claim did not: each content word it adds to its question's is one of theirs. Asked
    again, told nothing, a model says again what it said ("… is vitamin B12", five rounds
    running, each question worded anew): a repetition, not evidence, so the claim's
    questioning closes."""
    if not earlier:
        return False
    asked = set(content_words(question))
    said = {w for text in earlier for w in content_words(text)}
    return all(_known(word, said) for word in content_words(answer)
               if not _known(word, asked))


def claim_problem(claim: str, earlier: Sequence[str], testimony: str, hypothesis: str
                  ) -> str | None:
    """Why `claim` is refused (see the module docstring), or None."""
    words = _WORD.findall(claim)
    if len(words) < 3 or claim.rstrip().endswith(("?", ":")):
        return "it is no statement"
    if len(segments(claim)) > 1:
        return "it is more than one sentence: one fact a claim"
    mine = _joined(claim)
    if not mine:
        return "it is no statement"
    # a number the testimony writes otherwise ("eighteen" for 18, "1,000") is its own
    known = set(words_read(testimony)) | set(words_read(hypothesis))
    added = [w for w in dict.fromkeys(mine) if not _known(w, known)]
    if added:
        return (f"it adds words the testimony does not have ({', '.join(added[:4])}): "
                "a claim says only what the testimony says")
    for number, other in enumerate(earlier, start=1):
        if _repeats(mine, _joined(other)):
            return f"it repeats claim {number}"
    return None


def _repeats(mine: list[str], theirs: list[str]) -> bool:
    """The same content words both ways, give or take an ending ("Niacin helps the kidney"
    and "Niacin helps the immune system" are two claims; "Niacin lowers cholesterol" and
    "Niacin lowers the cholesterol" one), and the same numbers."""
    if [w for w in mine if w.isdigit()] != [w for w in theirs if w.isdigit()]:
        return False
    mine_set, theirs_set = set(mine), set(theirs)
    return all(_known(w, theirs_set) for w in mine_set) and \
        all(_known(w, mine_set) for w in theirs_set)


_ADVICE = re.compile(
    r"\b(?:should|ought to|it is (?:important|recommended|advisable|best)|(?:talk|speak) to|"
    r"consult|never forget|make sure|be sure to|it'?s (?:important|best)|"
    r"recommended|advis(?:e|able))\b", re.IGNORECASE)
_OPINION = re.compile(
    r"\b(?:i (?:think|believe|feel)|in my (?:opinion|view)|beautiful|wonderful|amazing|"
    r"fascinating|interesting|delicious|kindness|lovely|remarkable|"
    r"incredible|stunning|breathtaking)\b", re.IGNORECASE)
_VAGUE = re.compile(
    r"\b(?:a (?:variety|range|number|wide range|host) of|various|numerous|"
    r"(?:many|several|some) (?:other )?(?:ways|things|benefits|aspects|factors|reasons)|"
    r"and (?:more|so on)|etc)\b", re.IGNORECASE)


def not_checkable(claim: str, marked: bool = False) -> str | None:
    """Why `claim` cannot be checked (advice, an opinion, too vague), or None. The split's
    own `[not checkable]` (`marked`) is not taken on its word: the 1.5B put it before plain
    facts ("Vitamin B3 deficiency can lead to fatigue"), so only these rules decide."""
    if _ADVICE.search(claim):
        return "advice, not a fact"
    if _OPINION.search(claim):
        return "an opinion, not a fact"
    if _VAGUE.search(claim):
        return "too vague to check"
    return None


def locate(claim: str, text: str, parts: Sequence[Segment] | None = None
           ) -> tuple[int, int]:
    """Where `claim` stands in `text`: the offsets of the sentence or list item that shares
    most of its content words (ties: the first), or (0, 0) when none shares any."""
    parts = segments(text) if parts is None else parts
    mine = set(content_words(claim))
    best: tuple[float, int, int] = (0.0, 0, 0)
    for part in parts:
        theirs = set(content_words(part.text))
        shared = sum(1 for w in mine if _known(w, theirs))
        if not shared:
            continue
        score = shared + fuzz.token_set_ratio(claim.lower(), part.text.lower()) / 1000
        if score > best[0]:
            best = (score, part.start, part.end)
    return best[1], best[2]
