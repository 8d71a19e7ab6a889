"""The session store: one folder per session under `data_dir/sessions/`.

    cache_dir/sessions-index.jsonl         one line per change (see `engine.storage.index`)
    sessions/
      2026-11-22_14-30-22_1a2b3c4d/
        metadata.json                      the whole session, replaced atomically when it is
                                           made, run again and ended (`journal`'s rule)
        events.jsonl                       every event, numbered, append-only: a running
                                           session's completed rounds are read from here
        lock                               flock-ed by the process running the session
        transcripts/001_call.txt           notes (SPEC §4), each written before its entry
        llm_responses/001_sceptic.txt      oracle answers, each written before its entry

A session stored as running whose lock nobody holds was left by a process that died: it lists
as `interrupted` and `SessionStore.open` (resume) takes it over. A damaged file is reported with
its path and never rewritten; the other sessions are unaffected.

Two writers may share metadata.json: the process running the interrogation (it owns the
interrogation's fields) and any process adding a note or an oracle answer (`update`, which owns
the case-file fields: title, notes, llm_entries, ui_preferences). Both replace the file under
the case lock (a `flock` on the folder), and each takes the other's fields from the file on
disk, so neither loses what the other wrote.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from engine.errors import SessionBusy, SessionCorrupt, SessionError, SessionNotFound
from engine.models.events import PairCompleted, Record
from engine.models.session import EvalTag, Hypothesis, InterrogationSession, WitnessBrief
from engine.paths import Paths
from engine.storage.atomic import TEMP_PREFIX, atomic_write_text, write_new_synced
from engine.storage.eventlog import EventLogWriter, EventTail, read_events
from engine.storage.index import SessionIndex, SessionSummary, summarize
from engine.storage.journal import SessionJournal
from engine.storage.layout import (
    DIR_NAME,
    EVENTS,
    LOCK,
    METADATA,
    case_locked,
    check_length,
    fold,
    is_locked,
    load_metadata,
    load_session,
    sweep_temp_files,
)

__all__ = ["SessionStore"]

T = TypeVar("T")

class SessionStore:
    """Creates, lists, loads, resumes, follows and deletes sessions under `root`."""

    def __init__(self, root: Path, index: Path | None = None) -> None:
        """`index`: where the session list's index lives (a cache: `Paths.session_index`);
        default `root/index.jsonl`. One found there is moved to `index` (earlier versions)."""
        self.root = root
        self.index = SessionIndex(index or root / "index.jsonl")
        if index is not None:
            self.index.adopt(root / "index.jsonl")

    @classmethod
    def of(cls, paths: Paths) -> SessionStore:
        """The store of `paths`: sessions in the data directory, their index in the cache."""
        return cls(paths.data_dir / "sessions", paths.session_index)

    def _lock(self, directory: Path) -> int:
        fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionBusy(
                f"session {directory.name} is being run by another detektiv process"
            ) from None
        return fd

    def create(
        self,
        hypothesis: str,
        iteration_limit: int,
        *,
        detective: list[str] | None = None,
        witness: list[str] | None = None,
        on_record: Callable[[Record], None] | None = None,
        brief: WitnessBrief | None = None,
        tag: EvalTag | None = None,
        ident: uuid.UUID | None = None,
        settings: dict[str, Any] | None = None,
    ) -> SessionJournal:
        """A new running session, stored at once (metadata, index, lock held); `ident`: its
        id chosen beforehand (an evaluation records it before the session exists);
        `settings`: more of its fields (its protocol, document, prompts), stored with it, as
        nothing else is until the run ends (the journal's rule)."""
        session = InterrogationSession(
            id=ident or uuid.uuid4(),
            hypothesis=Hypothesis(text=hypothesis),
            iteration_limit=iteration_limit,
            detective=detective or [],
            witness=witness or [],
            witness_brief=brief,
            eval_tag=tag,
            **(settings or {}),
        )
        directory, fd = self._new_folder(session)
        journal = SessionJournal(
            self, directory, session, fd, EventLogWriter(directory / EVENTS, 1, on_record),
            fresh=True)
        self.index.append(summarize(directory.name, session))
        return journal

    def _new_folder(self, session: InterrogationSession,
                    locked: bool = True) -> tuple[Path, int]:
        """`{local start time}_{id8}` with its metadata.json, and the fd of its held lock
        (-1 when not `locked`). Built under a temporary name and renamed into place, so a
        kill at any moment leaves either no folder or a whole one, never a folder without
        its metadata (which a rerun could not take over, and a new folder would collide
        with)."""
        stamp = session.start_time.astimezone().strftime("%Y-%m-%d_%H-%M-%S")
        directory = self.root / f"{stamp}_{session.short_id}"
        try:
            staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=self.root))
        except FileNotFoundError:  # the first session here (or the folder was removed)
            self.root.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=self.root))
        fd = -1
        try:
            if locked:  # the lock's inode moves with the folder: held from the first moment
                fd = self._lock(staging)
            # written in place: the folder is what appears whole or not at all
            write_new_synced(staging / METADATA, session.model_dump_json(indent=1).encode())
            if directory.exists():
                raise SessionError(f"a session folder {directory.name} exists already")
            os.rename(staging, directory)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return directory, fd

    def create_notes(self, title: str, iteration_limit: int) -> InterrogationSession:
        """A new case file with no interrogation yet (status `notes`), stored at once."""
        session = InterrogationSession(title=title, status="notes",
                                       iteration_limit=iteration_limit)
        directory, _ = self._new_folder(session, locked=False)
        self.index.append(summarize(directory.name, session))
        return session

    def begin(
        self,
        ref: str,
        hypothesis: str,
        iteration_limit: int,
        *,
        detective: list[str] | None = None,
        witness: list[str] | None = None,
        on_record: Callable[[Record], None] | None = None,
        settings: dict[str, Any] | None = None,
    ) -> SessionJournal:
        """Start the interrogation of a notes-only session (its notes stay); `settings` as
        for `create`."""
        directory = self.resolve(ref)
        fd = self._lock(directory)
        try:
            session = load_metadata(directory / METADATA)
            if session.status != "notes":
                raise SessionError(f"session {session.short_id} already has an interrogation "
                                   f"({session.status})")
            session.hypothesis = Hypothesis(text=hypothesis)
            session.status = "running"
            session.iteration_limit = iteration_limit
            session.detective = detective or []
            session.witness = witness or []
            for name, value in (settings or {}).items():
                setattr(session, name, value)
            journal = SessionJournal(
                self, directory, session, fd, EventLogWriter(directory / EVENTS, 1, on_record)
            )
            journal.save()
        except BaseException:
            os.close(fd)
            raise
        return journal

    def update(self, ref: str, change: Callable[[InterrogationSession, Path], T]) -> T:
        """Change a session's case file: `change(session, folder)` runs under the case lock on
        the session as stored, and may write files in the folder first; the session is then
        replaced atomically (unless `change` raised). Works while an interrogation runs."""
        directory = self.resolve(ref)
        path = directory / METADATA
        with case_locked(directory):
            session = load_metadata(path)
            result = change(session, directory)
            atomic_write_text(path, session.model_dump_json(indent=1))
        self.index.append(summarize(directory.name, session))
        return result

    def case_text(self, ref: str, folder: str, filename: str) -> str:
        """The text of one note (`transcripts`) or answer (`llm_responses`) file."""
        directory = self.resolve(ref)
        path = directory / folder / filename
        if os.sep in filename or filename.startswith("."):
            raise SessionCorrupt(path, "not a file name of the session")
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SessionCorrupt(path, f"unreadable: {exc.strerror}") from None

    def open(
        self, ref: str, on_record: Callable[[Record], None] | None = None
    ) -> SessionJournal:
        """Take over a stored session to continue it (it must not be running elsewhere)."""
        directory = self.resolve(ref)
        fd = self._lock(directory)
        try:
            sweep_temp_files(directory)
            session = load_metadata(directory / METADATA)
            records = self._checked_events(directory, session)
            fold(session, records)
            log = EventLogWriter(directory / EVENTS, len(records) + 1, on_record)
        except BaseException:
            os.close(fd)
            raise
        logged = {r.event.pair.sequence for r in records if isinstance(r.event, PairCompleted)}
        for pair in session.qa_pairs:  # killed between saving a pair and logging it
            if pair.sequence not in logged:
                log.append(PairCompleted(pair=pair))
        return SessionJournal(self, directory, session, fd, log)

    def _checked_events(
        self, directory: Path, session: InterrogationSession
    ) -> list[Record]:
        records = read_events(directory / EVENTS)
        check_length(directory, len(records), session)
        return records

    def directories(self) -> list[str]:
        """Every session folder name, oldest first."""
        try:
            names = [
                entry.name
                for entry in os.scandir(self.root)
                if DIR_NAME.match(entry.name) and entry.is_dir()
            ]
        except FileNotFoundError:
            return []
        return sorted(names)

    def resolve(self, ref: str) -> Path:
        """The folder of the session `ref` names: a folder name, an id, or an id prefix."""
        ref = ref.strip().lower()
        if not ref:
            raise SessionNotFound("no session id given")
        if DIR_NAME.match(ref) and (self.root / ref).is_dir():  # a folder name: no listing needed
            return self.root / ref
        names = self.directories()
        if ref in names:
            return self.root / ref
        matches = [n for n in names if n[-8:].startswith(ref[:8])]
        if len(ref) > 8:  # a longer prefix or a whole UUID: check it against the stored ids
            rows, _ = self.index.read()
            matches = [
                n for n in matches
                if (rows[n].id if n in rows else self._id_of(n)).startswith(ref)
            ]
        if len(matches) == 1:
            return self.root / matches[0]
        if not matches:
            raise SessionNotFound(f"no session matches {ref!r} (see `detektiv sessions`)")
        raise SessionNotFound(
            f"{ref!r} matches {len(matches)} sessions: {', '.join(matches[:5])}; give more of "
            "the id"
        )

    def _id_of(self, name: str) -> str:
        try:
            return str(load_metadata(self.root / name / METADATA).id)
        except SessionCorrupt:
            return ""

    def load(self, ref: str) -> InterrogationSession:
        """The stored session (its status as stored: see `is_live` for interrupted ones), with
        the rounds a running one completed (`layout.load_session`)."""
        return load_session(self.resolve(ref))

    def events(self, ref: str) -> list[Record]:
        """Every event recorded so far; `SessionCorrupt` when the log is damaged."""
        directory = self.resolve(ref)
        return self._checked_events(directory, load_metadata(directory / METADATA))

    def is_live(self, ref: str) -> bool:
        """True while a process is running the session."""
        return is_locked(self.resolve(ref))

    def list(self) -> list[SessionSummary]:
        """Every session, newest first, from the index; metadata.json is read only where the
        index may be stale. Damaged sessions are listed with status `damaged`."""
        self.root.mkdir(parents=True, exist_ok=True)
        names = self.directories()
        rows, lines = self.index.read()
        heal: list[SessionSummary] = []
        listed: list[SessionSummary] = []
        for name in names:
            row = rows.get(name)
            # stale: not indexed, running with nobody running it, or failed without its reason
            # (an index written before rows carried it): metadata.json says, and heals the row
            if row is None or (row.status == "running" and not is_locked(self.root / name)) \
                    or (row.status == "failed" and row.error is None):
                directory = self.root / name
                try:
                    fresh = summarize(name, load_session(directory))
                except SessionCorrupt as exc:
                    listed.append(_damaged(name, row, exc.message))
                    continue
                if fresh != row:
                    heal.append(fresh)
                row = fresh
                if row.status == "running" and not is_locked(directory):
                    sweep_temp_files(directory)
                    row = row.with_status("interrupted")
            listed.append(row)
        self.index.append(*heal)
        if lines > 2 * len(names) + 100:
            self.index.compact(set(names))
        listed.sort(key=lambda r: (r.started, r.dir), reverse=True)
        return listed

    def version(self, running: Iterable[str] = ()) -> tuple[int, ...]:
        """What changes whenever `list` would: the index (every write adds a row), the
        sessions folder (a folder made or removed), and, for the folders in `running` (listed
        as running), whether a process still holds each. Two listings with the same version
        are the same (a file edited by hand aside)."""
        found: list[int] = []
        for path in (self.index.path, self.root):
            try:
                stat = os.stat(path)
            except OSError:
                found += [0, 0, 0]
                continue
            found += [stat.st_mtime_ns, stat.st_size, stat.st_ino]
        found += [is_locked(self.root / name) for name in running]
        return tuple(found)

    def sweep(self) -> None:
        """Remove temp files left in the store's root by a killed write, and folders a killed
        `create` left half built (`layout.sweep_temp_files`)."""
        if self.root.is_dir():
            sweep_temp_files(self.root)

    def delete(self, ref: str) -> None:
        """Remove a session (refused while it runs)."""
        directory = self.resolve(ref)
        fd = self._lock(directory)
        try:
            trash = directory.with_name(f".deleted-{directory.name}")
            directory.rename(trash)
        finally:
            os.close(fd)
        self.index.append({"dir": directory.name, "deleted": True})
        shutil.rmtree(trash, ignore_errors=True)

    async def follow(
        self, ref: str, poll_interval: float = 0.05
    ) -> AsyncGenerator[Record, None]:
        """Every event so far, then new ones as they are written, until the run ends.

        Ends after a `finished` event that is the last in the log, or when no live process is
        running the session any more (it was killed: the caller reports it as interrupted).
        """
        directory = self.resolve(ref)
        session = load_metadata(directory / METADATA)
        tail = EventTail(directory / EVENTS)
        last: Record | None = None
        first = True
        while True:
            records = tail.poll()
            if first:
                first = False
                check_length(directory, tail.last_n, session)
            for record in records:
                yield record
                last = record
            if records:
                continue
            if last is not None and last.event.type == "finished":
                return
            if not is_locked(directory):
                for record in tail.poll():  # written just before the process let go
                    yield record
                return
            await asyncio.sleep(poll_interval)


def _damaged(name: str, row: SessionSummary | None, error: str) -> SessionSummary:
    if row is not None:
        return row.with_status("damaged", error)
    return SessionSummary(name, name[-8:], "", "damaged", None, "", 0, 0, error)
