"""Labelled claims for `detektiv eval`: read, checked and sampled.

    items = read_items(Path("claims.jsonl"))        # or a HaluEval-QA file
    chosen = sample(items, n=100, seed=7)           # whole groups: a HaluEval pair stays a pair

Two formats, told apart line by line:

- ours, one JSON object a line: `claim` (the statement tested), `label` (`true`/`false`, the
  JSON booleans, 1/0 or 1.0/0.0, or FEVER's `SUPPORTS`/`REFUTES`), and optionally `question`
  (what the claim answers), `answer` (the answer the claim gives, planted as the witness's
  own), `source` and `id`;
- HaluEval-QA's (`knowledge`, `question`, `right_answer`, `hallucinated_answer`): each row gives
  one true and one false claim, balanced by construction;
- HaluEval summarization's (`document`, `right_summary`, `hallucinated_summary`): each row gives
  two testimonies, its summaries, labelled true and false (a summary of several sentences is
  interrogated claim by claim: `engine.interrogation.testimony`);
- a testimony's claims already split and labelled one by one (`topic`, `claims`: a list of
  `{"claim": …, "label": …}`, and optionally `question`, `source` naming the reference the
  labels were checked against, `id`): each claim an item, the claims of one row a group
  (sampled together; the run's figures per claim, and per testimony: `EvalItem.group`).

A row's `document`, `context` or `knowledge` (the first present) is the item's document: only
`--mode document` gives it to the witness (`document_for`), every other mode drops it, and it
never reaches the detective. In that mode a row without one is refused by its line
(`check_documents`) before anything starts.

Open questions, unlabelled (a witness leaderboard, `detektiv eval QUESTIONS --compare A,B`):
a text file of one question a line, or JSON lines with a `question` field and no claim or
label (optionally `id` and a `document`). Each is an item whose label is None: the witness
answers it, its testimony is taken apart and examined claim by claim, and the run's figures
are the shares of its claims in each state.

A `.json` file may also hold one array of such objects, and a `.parquet` file (what the Hub's
HaluEval dataset is stored as) rows of HaluEval's columns. A line that fits neither format is a
`DatasetError` naming the line and what is wrong; nothing is half read.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from engine.errors import DatasetError
from engine.interrogation.claims import claim_for
from engine.jsondata import read_json
from engine.models.session import WitnessBrief, WitnessDocument, WitnessMode
from engine.models.witness import witness_document
from engine.storage.layout import stamp

__all__ = ["EvalItem", "ItemFile", "Items", "brief_for", "check_documents", "chosen_items",
           "claim_for", "document_for", "read_items", "sample"]

_TRUE = {"true", "1", "yes", "correct", "supports", "supported", "t", "y", "s", "right",
         "accurate", "factual"}
_FALSE = {"false", "0", "no", "incorrect", "hallucinated", "hallucination", "refutes",
          "refuted", "f", "n", "ns", "not supported", "unsupported", "contradicted", "wrong",
          "inaccurate", "non factual", "nonfactual"}
_NEITHER = {"not enough info", "nei", "unknown", "unverifiable", "ir", "irrelevant"}
"""Labels as sets write them, case, `_` and `-` aside: FEVER's SUPPORTS / REFUTES / NOT
ENOUGH INFO, FActScore's S / NS / IR, HaluEval's yes / no."""
_MAX_TEXT = 20_000


@dataclass(frozen=True, slots=True)
class EvalItem:
    """One labelled claim. `label` True: the claim is true; None: an open question, asked of
    the witness (its claims are examined, unlabelled). `group`: items sampled together (the
    two claims of one HaluEval row)."""

    key: str
    claim: str
    label: bool | None
    question: str | None = None
    answer: str | None = None
    source: str | None = None
    group: str = ""
    document: str | None = None
    """What the witness holds in `--mode document` (a row's document, context or knowledge)."""
    where: str = ""
    """Where the item is in its file (`claims.jsonl line 4`), for errors."""
    testimony: str | None = None
    """The testimony a split, labelled claim belongs to (its row's group): the run's figures
    are given per testimony too."""


def brief_for(item: EvalItem, mode: WitnessMode) -> WitnessBrief:
    """What the witness is given to stand behind for `item` (the label never is)."""
    return WitnessBrief(mode=mode, claim=item.claim, question=item.question,
                        answer=item.answer)


def document_for(item: EvalItem, mode: WitnessMode) -> WitnessDocument | None:
    """The document the witness holds for `item`: its own in `--mode document`, else none."""
    if mode != "document" or not item.document:
        return None
    return witness_document(item.where or item.key, item.document)


def check_documents(items: Iterable[EvalItem], mode: WitnessMode) -> None:
    """`DatasetError` naming the first item without a document, in `--mode document`."""
    if mode != "document":
        return
    for item in items:
        if not item.document:
            raise DatasetError(f"{item.where or item.key}: no document for --mode document "
                               "(a 'document', 'context' or 'knowledge' field)")


_DOCUMENT_FIELDS = ("document", "context", "knowledge")
_MAX_DOCUMENT = 2_000_000


def _document(row: dict[str, Any], where: str) -> str | None:
    for name in _DOCUMENT_FIELDS:
        value = row.get(name)
        if value in (None, ""):
            continue
        if not isinstance(value, str) or not value.strip():
            raise DatasetError(f"{where}: {name!r} must be text")
        if len(value) > _MAX_DOCUMENT:
            raise DatasetError(f"{where}: {name!r} is longer than {_MAX_DOCUMENT} characters")
        return value.strip()
    return None


def _text(value: Any, field: str, where: str, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        if not required and value in ("", None):
            return None
        raise DatasetError(f"{where}: {field!r} must be a non-empty string")
    if len(value) > _MAX_TEXT:
        raise DatasetError(f"{where}: {field!r} is longer than {_MAX_TEXT} characters")
    return value.strip()


def _label(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):  # 1 / 0 (1.0 / 0.0 from a
        return value == 1                                  # table's export), as sets write it
    said = " ".join(re.split(r"[\s_-]+", value.strip().lower())) \
        if isinstance(value, str) else None
    if said in _TRUE | _FALSE:
        return said in _TRUE
    if isinstance(value, str) and value.strip() in ("1.0", "0.0"):
        return value.strip() == "1.0"
    if said in _NEITHER:
        raise DatasetError(f"{where}: the label {value!r} is neither true nor false: leave "
                           "such claims out of the file")
    raise DatasetError(f"{where}: 'label' must be true or false (got {value!r:.80})")


def _from_row(row: Any, index: int, where: str) -> list[EvalItem]:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    if "right_answer" in row or "hallucinated_answer" in row:
        question = _text(row.get("question"), "question", where)
        right = _text(row.get("right_answer"), "right_answer", where)
        wrong = _text(row.get("hallucinated_answer"), "hallucinated_answer", where)
        assert question is not None and right is not None and wrong is not None
        group = f"row{index}"
        document = _document(row, where)
        return [EvalItem(f"{group}:{kind}", claim_for(question, answer), label, question,
                         answer, "halueval-qa", group, document, where)
                for kind, answer, label in (("right", right, True),
                                            ("hallucinated", wrong, False))]
    if "right_summary" in row or "hallucinated_summary" in row:
        right = _text(row.get("right_summary"), "right_summary", where)
        wrong = _text(row.get("hallucinated_summary"), "hallucinated_summary", where)
        assert right is not None and wrong is not None
        group = f"row{index}"
        document = _document(row, where)
        return [EvalItem(f"{group}:{kind}", summary, label, None, None,
                         "halueval-summarization", group, document, where)
                for kind, summary, label in (("right", right, True),
                                             ("hallucinated", wrong, False))]
    if "claims" in row and "claim" not in row:
        return _split_row(row, index, where)
    if "question" in row and "claim" not in row and "label" not in row:
        return [_question(row.get("question"), row, index, where)]
    if "claim" not in row:
        raise DatasetError(f"{where}: neither a claim ('claim', 'label') nor a HaluEval-QA row "
                           "('question', 'right_answer', 'hallucinated_answer'), a HaluEval "
                           "summarization row ('document', 'right_summary', "
                           "'hallucinated_summary') or a testimony's claims ('topic', "
                           "'claims')")
    claim = _text(row.get("claim"), "claim", where)
    assert claim is not None
    if "label" not in row:
        raise DatasetError(f"{where}: 'label' is missing")
    key = row.get("id")
    key = str(key) if isinstance(key, str | int) and str(key).strip() else f"line{index}"
    return [EvalItem(key, claim, _label(row["label"], where),
                     _text(row.get("question"), "question", where, required=False),
                     _text(row.get("answer"), "answer", where, required=False),
                     _text(row.get("source"), "source", where, required=False), key,
                     _document(row, where), where)]


def _question(text: Any, row: dict[str, Any], index: int, where: str) -> EvalItem:
    """An open question (unlabelled): the witness's answer to it is what is examined."""
    question = _text(text, "question", where)
    assert question is not None
    key = row.get("id")
    key = str(key) if isinstance(key, str | int) and str(key).strip() else f"q{index}"
    return EvalItem(key, question, None, question, None,
                    _text(row.get("source"), "source", where, required=False), key,
                    _document(row, where), where)


def read_questions(path: Path) -> list[EvalItem]:
    """The open questions of a text file, one a line (blank lines and `#` comments left out);
    `DatasetError` naming the line of one too long."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DatasetError(f"{path.name}: not UTF-8 text") from None
    except OSError as exc:
        raise DatasetError(f"{path.name}: cannot be read ({exc.strerror or exc})") from None
    items = [_question(line.strip(), {}, number, f"{path.name} line {number}")
             for number, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not items:
        raise DatasetError(f"{path.name}: no question in it")
    return items


_MOST_CLAIMS = 200


def _split_row(row: dict[str, Any], index: int, where: str) -> list[EvalItem]:
    """A testimony's claims, split and labelled: an item each, the row their group."""
    claims = row.get("claims")
    if not isinstance(claims, list) or not claims:
        raise DatasetError(f"{where}: 'claims' must be a non-empty list of "
                           "{\"claim\": …, \"label\": …}")
    if len(claims) > _MOST_CLAIMS:
        raise DatasetError(f"{where}: more than {_MOST_CLAIMS} claims in one row")
    key = row.get("id")
    group = str(key) if isinstance(key, str | int) and str(key).strip() else f"line{index}"
    _text(row.get("topic"), "topic", where)
    question = _text(row.get("question"), "question", where, required=False)
    source = _text(row.get("source"), "source", where, required=False)
    document = _document(row, where)
    items: list[EvalItem] = []
    for number, entry in enumerate(claims, start=1):
        place = f"{where}, claim {number}"
        if not isinstance(entry, dict):
            raise DatasetError(f"{place}: expected {{\"claim\": …, \"label\": …}}")
        # FActScore's atomic facts name it `text`
        claim = _text(entry.get("claim", entry.get("text")), "claim", place)
        assert claim is not None
        if "label" not in entry:
            raise DatasetError(f"{place}: 'label' is missing")
        items.append(EvalItem(f"{group}:{number}", claim, _label(entry["label"], place),
                              question, None, source, group, document, place, group))
    return items


def _rows(path: Path) -> Iterator[tuple[int, str, Any]]:
    """(1-based index, where, row) for every row of the file."""
    name = path.name
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        except Exception as exc:  # pyarrow names many kinds of damage
            raise DatasetError(f"{name}: not a readable Parquet file ({exc})") from None
        for index, row in enumerate(table.to_pylist(), start=1):
            yield index, f"{name} row {index}", row
        return
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM (a Windows tool's export) is no data
    except UnicodeDecodeError:
        raise DatasetError(f"{name}: not UTF-8 text") from None
    except OSError as exc:
        raise DatasetError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    if text.lstrip().startswith("["):
        try:
            rows = read_json(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{name}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        except ValueError as exc:  # nested too deeply
            raise DatasetError(f"{name}: not valid JSON ({exc})") from None
        for index, row in enumerate(rows, start=1):
            yield index, f"{name} item {index}", row
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            where = f"{name} line {number}"
            yield number, where, _line_row(line, where)


def _line_row(line: str, where: str) -> Any:
    """The JSON value of one line of a JSON-lines file; `DatasetError` naming `where`."""
    try:
        return read_json(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: not valid JSON ({exc.msg})") from None
    except ValueError as exc:  # nested too deeply
        raise DatasetError(f"{where}: not valid JSON ({exc})") from None


def read_items(path: Path) -> list[EvalItem]:
    """Every labelled claim in `path` (either format; see the module docstring)."""
    if not path.is_file():
        raise DatasetError(f"{path}: no such file (a JSONL file of labelled claims, or a "
                           "named dataset such as halueval-qa or demo)")
    items: list[EvalItem] = []
    seen: set[str] = set()
    for index, where, row in _rows(path):
        for item in _from_row(row, index, where):
            if item.key in seen:
                raise DatasetError(f"{where}: the id {item.key!r} is used twice")
            seen.add(item.key)
            _same_kind(items[0] if items else item, item, where)
            items.append(item)
    if not items:
        raise _no_claims(path)
    return items


def _same_kind(first: EvalItem, item: EvalItem, where: str) -> None:
    """`DatasetError` for an open question among labelled claims, or the reverse: a file
    holds one or the other."""
    if (first.label is None) != (item.label is None):
        kind = "an open question among labelled claims" if item.label is None else \
            "a labelled claim among open questions"
        raise DatasetError(f"{where}: {kind} (a file holds one or the other)")


def _no_claims(path: Path) -> DatasetError:
    return DatasetError(f"{path.name}: no labelled claims in it")


def sample(items: Iterable[EvalItem], n: int | None, seed: int) -> list[EvalItem]:
    """`n` claims (all when None or more than there are), drawn with `seed` a group at a time
    (the two claims of a HaluEval row stay together; a last group that would pass `n` is cut),
    then kept in the file's order."""
    items = list(items)
    if n is None or n >= len(items):
        return items
    if n < 1:
        raise DatasetError("--n must be at least 1")
    groups: dict[str, list[int]] = {}
    for position, item in enumerate(items):
        groups.setdefault(item.group or item.key, []).append(position)
    order = list(groups)
    random.Random(seed).shuffle(order)
    chosen: list[int] = []
    for group in order:
        chosen += groups[group][: n - len(chosen)]
        if len(chosen) >= n:
            break
    return [items[i] for i in sorted(chosen)]


class Items(Protocol):
    """The chosen claims of a run: counted, and read in the file's order (a list, or an
    `ItemFile` that holds none of them)."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[EvalItem]: ...


def chosen_items(path: Path, n: int | None, seed: int) -> Items:
    """The claims `sample(read_items(path), n, seed)` chooses, checked the same way: from a
    JSON-lines file as an `ItemFile` (an evaluation of 100,000 claims holds none of them),
    from a JSON array or a Parquet file (read whole anyway) as a list."""
    first = _leading(path)
    if first not in _NOT_TEXT:
        return sample(read_questions(path), n, seed)
    if first != b"[":
        return ItemFile(path, n, seed)
    return sample(read_items(path), n, seed)


_NOT_TEXT = (b"[", b"{", b"")
"""A file's first byte (`_leading`) when it holds no open questions: JSON, or nothing."""


def holds_questions(path: Path) -> bool:
    """Whether `path` is a text file of open questions, one a line: neither JSON (its first
    byte past white space and a BOM is no `[` or `{`), nor Parquet, nor empty."""
    return _leading(path) not in _NOT_TEXT


def _leading(path: Path) -> bytes:
    """The first byte that tells a file's kind (`_first_byte`); `[` (read whole) for a
    Parquet file or a path that is no file."""
    return _first_byte(path) if path.suffix != ".parquet" and path.is_file() else b"["


def _first_byte(path: Path) -> bytes:
    """The file's first byte that is not white space (nor a UTF-8 BOM)."""
    with path.open("rb") as handle:
        block = handle.read(4096).removeprefix(BOM)
        while block:
            stripped = block.lstrip()
            if stripped:
                return stripped[:1]
            block = handle.read(4096)
    return b""


BOM = "\ufeff".encode()
"""The UTF-8 byte order mark a Windows tool may put before the first line: no data."""


class ItemFile:
    """The chosen claims of a JSON-lines file, read again from it as they are needed.

    Made with one pass that checks every line as `read_items` does and keeps 8 bytes a row
    (its key's hash is kept only for that pass, to find an id used twice); `sample`'s choice
    is a byte a claim. Iterating reads the file again, in its order."""

    def __init__(self, path: Path, n: int | None, seed: int) -> None:
        self.path = path
        self._stamp = stamp(path)
        counts = bytearray()  # claims each row gives (1, or 2 for a HaluEval-QA row)
        keys = array("Q")
        first: EvalItem | None = None
        for _, where, items in self._rows():
            counts.append(len(items))
            keys.extend(_key_hash(item.key) for item in items)
            for item in items:
                first = first or item
                _same_kind(first, item, where)
        if _repeats(keys):  # an id twice (or, once in 10^9 runs, two hashes alike):
            read_items(path)  # the reader names the line, as it always has
        del keys
        total = sum(counts)
        if not total:
            raise _no_claims(path)
        self._chosen: bytearray | None = None
        self._length = total
        if n is not None and n < total:
            if n < 1:
                raise DatasetError("--n must be at least 1")
            firsts = array("Q", [0]) * len(counts)
            position = 0
            for row, count in enumerate(counts):
                firsts[row] = position
                position += count
            order = list(range(len(counts)))  # a row is a group: `sample`'s shuffle, as is
            random.Random(seed).shuffle(order)
            chosen = bytearray(total)
            taken = 0
            for row in order:
                for position in range(firsts[row], firsts[row] + counts[row]):
                    if taken < n:
                        chosen[position] = 1
                        taken += 1
                if taken >= n:
                    break
            self._chosen, self._length = chosen, taken

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[EvalItem]:
        if stamp(self.path) != self._stamp:
            raise DatasetError(f"{self.path.name}: changed since the run started; run the "
                               "command again to start from the file as it is now")
        position = 0
        for _, _, items in self._rows():
            for item in items:
                if self._chosen is None or self._chosen[position]:
                    yield item
                position += 1

    def _rows(self) -> Iterator[tuple[int, str, list[EvalItem]]]:
        name = self.path.name
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise DatasetError(f"{name}: cannot be read ({exc.strerror or exc})") from None
        with handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    line = (raw.removeprefix(BOM) if number == 1 else raw).decode("utf-8")
                except UnicodeDecodeError:
                    raise DatasetError(f"{name}: not UTF-8 text") from None
                if line.strip():
                    where = f"{name} line {number}"
                    yield number, where, _from_row(_line_row(line, where), number, where)


_SEEN_BITS = 1 << 24
"""The bitmap `_repeats` marks hashes in: 2 MB, whatever the file's size."""


def _repeats(hashes: array) -> bool:  # type: ignore[type-arg]
    """Whether a hash occurs twice, in constant memory beside `hashes` (8 bytes a key, where
    a set would take 70): a bitmap finds the few hashes that may be repeats, a count of
    those alone decides."""
    seen = bytearray(_SEEN_BITS // 8)
    maybe: dict[int, int] = {}
    for value in hashes:
        bit = value % _SEEN_BITS
        if seen[bit >> 3] & (1 << (bit & 7)):
            maybe[value] = 0
        seen[bit >> 3] |= 1 << (bit & 7)
    for value in hashes:
        if value in maybe:
            maybe[value] += 1
            if maybe[value] > 1:
                return True
    return False


def _key_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
