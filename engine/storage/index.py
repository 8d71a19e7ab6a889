"""The session list's index (`Paths.session_index`, in the cache directory): one small line
per change of a session, so listing reads one file.

The index is a cache, never the truth: each line repeats what a session's metadata.json says
(the last line for a folder wins), appends are serialised with `flock` and written in one
`write`, and the store re-reads metadata.json wherever the index could be stale (a session it
does not know, or one it says is running). When the file holds far more lines than sessions it is
rewritten atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.jsondata import read_json
from engine.storage.atomic import atomic_write_bytes
from engine.storage.locks import is_locked

if TYPE_CHECKING:
    from engine.models.session import InterrogationSession

__all__ = ["SessionIndex", "SessionSummary", "newest_sessions", "summarize"]

_HYPOTHESIS_CHARS = 300
TAIL_BYTES = 512 * 1024
"""What `SessionIndex.tail` reads: the last ~1,000 rows, enough for a first screen."""
FIRST_TAIL_BYTES = 64 * 1024
"""`newest_sessions` reads this much of the index's end first (~250 rows), the whole
`TAIL_BYTES` only when that did not hold enough."""


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One row of the session list.

    `status` is the stored status, or `nothing-asked` (`InterrogationSession.asked_nothing`),
    or `interrupted` (stored as running, but no live process runs it), or `damaged` (its
    metadata.json cannot be read; `error` says why). `error` is also the line a failed
    session ended with.
    """

    dir: str
    id: str
    hypothesis: str
    status: str
    score: int | None
    started: str
    pairs: int
    iteration_limit: int
    error: str | None = None
    verdict: str | None = None
    """The audit's verdict (`true`, `false`, `undetermined`), None before one."""
    probability_false: float | None = None
    """The audit's probability that the hypothesis is false."""
    demonstration: bool = False
    """A demonstration model spoke for the detective: its verdict means nothing."""
    eval_run: str | None = None
    """The evaluation run the session was interrogated for (`detektiv eval`), else None."""
    tokens: int = 0
    """Tokens its model calls used, prompt and reply."""
    cost: float = 0.0
    """What they cost at the configured prices (`engine.costs`)."""
    unpriced: tuple[str, ...] = ()
    """Providers it used with no price configured (not in `cost`)."""
    claims: str | None = None
    """A testimony's claims counted by state ("3/8 held, 2 contradicted"), else None."""

    def with_status(self, status: str, error: str | None = None) -> SessionSummary:
        """A copy with another display status."""
        return replace(self, status=status, error=error)


def _tally(session: InterrogationSession) -> str:
    from engine.report.claims import claims_tally  # the words (imported when there are claims)

    assert session.testimony is not None
    return claims_tally(session.testimony.claims)


def summarize(directory: str, session: InterrogationSession) -> SessionSummary:
    """The index row for `session`."""
    audit = session.audit_result
    return SessionSummary(
        dir=directory,
        id=str(session.id),
        hypothesis=session.name[:_HYPOTHESIS_CHARS],
        status=session.shown_status,
        score=audit.consistency_score if audit else None,
        started=session.start_time.isoformat(),
        pairs=len(session.qa_pairs),
        iteration_limit=session.iteration_limit,
        error=session.error,
        verdict=audit.verdict if audit else None,
        probability_false=audit.probability_false if audit else None,
        demonstration=(audit.demonstration if audit else False) or session.demonstration,
        eval_run=session.eval_tag.run if session.eval_tag else None,
        tokens=session.tokens.total,
        cost=session.tokens.cost,
        unpriced=tuple(session.tokens.unpriced),
        claims=_tally(session)
        if session.testimony is not None and session.testimony.split else None,
    )


_FIELDS = tuple(SessionSummary.__dataclass_fields__)


def _fields(row: SessionSummary) -> dict[str, Any]:
    """`asdict(row)` without its deep copy (a row holds only plain values and one tuple)."""
    return {name: getattr(row, name) for name in _FIELDS}


class SessionIndex:
    """Append-only JSON lines; see the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_path = path.parent / f".{path.stem}.lock"

    def adopt(self, old: Path) -> None:
        """Take over the index an earlier version kept at `old` (beside the sessions), unless
        this one exists already; the old file is gone either way. Losing it costs only a
        slower listing: the store rebuilds what the index lacks."""
        if not old.exists():
            return
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                try:
                    os.replace(old, self.path)  # same file system: atomic
                except OSError:  # another file system: copied, then the old one removed
                    shutil.copyfile(old, self.path)
        for stale in (old, old.parent / f".{old.stem}.lock"):
            with contextlib.suppress(OSError):
                stale.unlink()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the cache folder is new, or was cleared: made again
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def append(self, *rows: SessionSummary | dict[str, Any]) -> None:
        """Add rows (a dict `{"dir": …, "deleted": true}` marks a deletion)."""
        if not rows:
            return
        lines = b"".join(
            json.dumps(_fields(row) if isinstance(row, SessionSummary) else row,
                       ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
            for row in rows
        )
        with self._locked():
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    lines = b"\n" + lines  # a writer was killed mid-line: keep ours apart
                os.write(fd, lines)
            finally:
                os.close(fd)

    def read(self) -> tuple[dict[str, SessionSummary], int]:
        """The latest row per folder, and how many lines the file has."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}, 0
        lines = data.splitlines()
        return _rows(lines), len(lines)

    def tail(self, size: int | None = None) -> tuple[dict[str, SessionSummary], bool]:
        """The latest row per folder among the last `size` bytes of the file (default
        `TAIL_BYTES`: the sessions made or changed last, as appends go to the end), and
        whether that was the whole file."""
        size = TAIL_BYTES if size is None else size
        try:
            with self.path.open("rb") as handle:
                end = handle.seek(0, os.SEEK_END)
                start = max(0, end - size)
                handle.seek(start)
                data = handle.read()
        except FileNotFoundError:
            return {}, True
        lines = data.splitlines()
        if start > 0 and lines:
            lines = lines[1:]  # the first may be cut
        return _rows(lines), start == 0

    def compact(self, keep: set[str]) -> None:
        """Rewrite the file with one line per folder in `keep` (atomic; under the lock, so an
        append from another process is never lost)."""
        with self._locked():
            rows, _ = self.read()
            data = b"".join(
                json.dumps(asdict(row), ensure_ascii=False, separators=(",", ":")).encode()
                + b"\n"
                for name, row in sorted(rows.items())
                if name in keep
            )
            atomic_write_bytes(self.path, data)


def _rows(lines: list[bytes]) -> dict[str, SessionSummary]:
    """The latest row per folder among index `lines` (a deletion drops it)."""
    rows: dict[str, SessionSummary] = {}
    for line in lines:
        try:
            raw = read_json(line)
            if raw.get("deleted"):
                rows.pop(raw["dir"], None)
            else:
                raw["unpriced"] = tuple(raw.get("unpriced", ()))
                rows[raw["dir"]] = SessionSummary(**raw)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # a torn or foreign line: the folder is re-read from metadata.json
    return rows


def newest_sessions(index: Path, root: Path, count: int) -> tuple[list[SessionSummary], bool]:
    """The newest sessions as the index's last lines give them (`SessionIndex.tail`), without
    listing the store or loading a model: what a screen shows first while the store lists
    everything (100,000 sessions take seconds). A row whose folder is gone is left out; one
    that says running with nobody holding its lock reads `interrupted`. Returns the rows
    (newest first, at most `count`) and whether they are every session there is."""
    found: list[SessionSummary] = []
    whole = False
    for size in (min(FIRST_TAIL_BYTES, TAIL_BYTES), TAIL_BYTES):  # a short read first
        rows, whole = SessionIndex(index).tail(size)
        found = []
        # newest first; the folders looked at (a stat each) only until `count` are found
        for row in sorted(rows.values(), key=lambda r: (r.started, r.dir), reverse=True):
            if len(found) > count:
                break
            directory = root / row.dir
            if not directory.is_dir():
                continue
            if row.status == "running" and not is_locked(directory):
                row = row.with_status("interrupted")
            found.append(row)
        if whole or len(found) > count:
            break
    return found[:count], whole and len(found) <= count
