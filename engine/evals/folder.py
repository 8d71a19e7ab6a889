"""An evaluation run's folder, `data/evals/RUN/`, written so a kill at any moment loses
nothing and a rerun does nothing twice.

- `run.json`: what was asked (`EvalRunInfo`), replaced atomically;
- `sessions.jsonl`: `{"item", "repeat", "session"}` the moment an item's session is created,
  so a rerun resumes that session instead of starting another;
- `results.jsonl`: one `EvalResult` a line, appended (one write) once an item's session has
  ended. A line of a unit with no session (a baseline) is fsynced: it is the only record of
  the answer. One with a session is not: that session's end is on the disk already, and a
  rerun that finds the session ended and no line makes the line from it again (`EvalRun`).
  A torn last line (a kill mid-write) is cut off when the folder is opened again; where a key
  has two lines (a failed item tried again) the last one counts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.errors import DatasetError
from engine.jsondata import read_json
from engine.models.session import VerdictValue, WitnessMode
from engine.storage.atomic import atomic_write_text

__all__ = ["EvalKind", "EvalResult", "EvalRunInfo", "RunFolder", "list_runs"]

EvalKind = Literal["interrogation", "consistency", "direct", "are-you-sure", "reader",
                   "selfcheck", "sampled"]
"""How an item was judged: a whole interrogation (`interrogation`: the cross-examination;
`consistency`: the consistency protocol), or a baseline (the detective on the claim alone,
in document mode — elsewhere the sessions read it themselves; the witness asked once "Are
you sure?"; SelfCheckGPT's prompt scorer; `sampled`: runs before issue 72)."""

INFO, SESSIONS, RESULTS = "run.json", "sessions.jsonl", "results.jsonl"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EvalResult(_Model):
    """One item judged once: a line of results.jsonl."""

    item: str
    kind: EvalKind = "interrogation"
    repeat: Annotated[int, Field(ge=1)] = 1
    label: bool | None
    """True: the claim is true; None: an open question (its claims are counted instead)."""
    claim: str
    status: str
    """How the judging ended: `completed`, `limit-reached` or `failed`."""
    verdict: VerdictValue | None = None
    """None: no verdict was reached (the item failed)."""
    probability_false: Annotated[float, Field(ge=0, le=1)] | None = None
    rounds: int = 0
    tokens: int = 0
    cost: float = 0.0
    """What its calls cost at the configured prices (`engine.costs`)."""
    unpriced: list[str] = Field(default_factory=list)
    """Providers that answered with no price configured."""
    seconds: float = 0.0
    session: str | None = None
    error: str | None = None
    repairs: int = 0
    """Replies asked for again because they broke a rule of detektiv's."""
    rule_broken: str | None = None
    """Set when a rule stayed broken after its retry: the verdict is `undetermined` for it."""
    testimony: str | None = None
    """The testimony the item's claim belongs to (split, labelled claims), else None."""
    claims: dict[str, int] | None = None
    """An open question's: how many of the witness's claims ended in each state (`held`,
    `contradicted`, `unsure`, `not checkable`, …)."""
    readings: dict[str, Annotated[float, Field(ge=0, le=1)] | None] | None = None
    """A labelled claim's interrogation: what each signal read of it (P(true); None: it read
    nothing), as its session stored them (`engine.interrogation.signals`)."""
    claim_readings: list[dict[str, Annotated[float, Field(ge=0, le=1)] | None]] | None = None
    """A labelled testimony's interrogation (a summary): each examined claim's readings."""
    reference: dict[str, int] | None = None
    """An open question in `--mode document`: how many of the witness's checkable claims the
    reference (the detective holding the document) read as `supported`, `not supported` or
    `unsure`."""

    @property
    def key(self) -> tuple[str, str, int]:
        return self.item, self.kind, self.repeat

    @property
    def failed(self) -> bool:
        """No verdict (a labelled claim), no claim counted (an open question)."""
        if self.label is None:
            return self.claims is None
        return self.verdict is None


class EvalRunInfo(_Model):
    """What an evaluation run was asked to do (run.json)."""

    id: str
    dataset: str
    """As given: a named dataset or a path."""
    dataset_file: str
    checksum: str
    n: int | None = None
    seed: int = 0
    mode: WitnessMode = "planted"
    detective: list[str] = Field(default_factory=list)
    witness: list[str] = Field(default_factory=list)
    limit: int = 10
    items: int = 0
    runs: int = 1
    """The most repeats asked for so far."""
    baselines: bool = False
    """Whether baselines were ever asked for."""
    protocols: list[str] = Field(default_factory=lambda: ["cross-exam"])
    """The interrogation protocols ever asked for (each its own system)."""
    detective_label: str = ""
    witness_label: str = ""
    demonstration: bool = False
    """The detective was a demonstration model: its verdicts mean nothing."""
    pooling: str | None = None
    """The pooling file the run's sessions weighed their readings by (`[interrogation]
    pooling`), None for the shipped one."""
    comparison: str | None = None
    """The witness comparison this run is one witness of (`detektiv eval --compare`): the
    runs with the same comparison put the same items to their witnesses, judged alike."""
    created: datetime = Field(default_factory=lambda: datetime.now(UTC))
    updated: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @property
    def witness_name(self) -> str:
        """The witness as asked for (`--witness`, `--compare`), else the provider that
        played it."""
        return self.witness[0] if self.witness else self.witness_label


def _lines(path: Path) -> Iterator[str]:
    if not path.exists():
        return
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.endswith("\n"):
                yield line


def _cut_torn_line(path: Path) -> None:
    """Drop a last line a kill left without its newline."""
    if not path.exists() or not path.stat().st_size:
        return
    with path.open("rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        data = handle.read()
        handle.truncate(data.rfind(b"\n") + 1)


class RunFolder:
    """See the module docstring."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def exists(self) -> bool:
        return (self.directory / INFO).is_file()

    def info(self) -> EvalRunInfo:
        path = self.directory / INFO
        try:
            return EvalRunInfo.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, ValidationError) as exc:
            raise DatasetError(f"evaluation run {self.directory.name}: {path.name} cannot be "
                               f"read ({type(exc).__name__})") from None

    def save_info(self, info: EvalRunInfo) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.directory / INFO, info.model_dump_json(indent=2) + "\n")

    def open(self) -> None:
        """Make the logs appendable again after a kill (torn last lines cut)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        _cut_torn_line(self.directory / SESSIONS)
        _cut_torn_line(self.directory / RESULTS)

    def _append(self, name: str, data: dict[str, object], synced: bool = True) -> None:
        line = json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
        fd = os.open(self.directory / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            if synced:
                os.fsync(fd)
        finally:
            os.close(fd)

    def add_session(self, item: str, repeat: int, session: str,
                    kind: EvalKind = "interrogation") -> None:
        row: dict[str, object] = {"item": item, "repeat": repeat, "session": session}
        if kind != "interrogation":
            row["kind"] = kind
        self._append(SESSIONS, row)

    def sessions(self) -> dict[tuple[str, str, int], str]:
        """The session of each (item, kind, repeat) interrogated so far (a line without a
        kind, written before protocols, is the cross-examination's)."""
        found: dict[tuple[str, str, int], str] = {}
        for line in _lines(self.directory / SESSIONS):
            try:
                row = read_json(line)
                key = (str(row["item"]), str(row.get("kind", "interrogation")),
                       int(row["repeat"]))
                found[key] = str(row["session"])
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
        return found

    def add_result(self, result: EvalResult) -> None:
        """Append `result` (fsynced only when no session holds it: the module docstring)."""
        self._append(RESULTS, result.model_dump(mode="json"), synced=result.session is None)

    def results(self) -> Iterator[EvalResult]:
        """Every result line in order (a line that cannot be read is skipped)."""
        for line in _lines(self.directory / RESULTS):
            try:
                yield EvalResult.model_validate_json(line)
            except ValidationError:
                continue

    def latest(self) -> dict[tuple[str, str, int], EvalResult]:
        """The last result of each (item, kind, repeat)."""
        return {result.key: result for result in self.results()}


def list_runs(root: Path) -> list[EvalRunInfo]:
    """Every readable evaluation run under `root`, newest first."""
    runs: list[EvalRunInfo] = []
    if not root.is_dir():
        return runs
    for directory in root.iterdir():
        folder = RunFolder(directory)
        if folder.exists:
            try:
                runs.append(folder.info())
            except DatasetError:
                continue
    return sorted(runs, key=lambda info: info.updated, reverse=True)
