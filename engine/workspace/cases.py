"""The workspace's cases part (SPEC §4): notes, oracles and consultations.

    workspace.cases.new_case(title) / add_note(ref, text, source) / import_notes(ref, files)
    consultation = await workspace.cases.consultation(ref, ["sceptic"])
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from engine.errors import ConfigError, NoteRefused, OracleError, SessionCorrupt
from engine.models.notes import NoteEntry
from engine.models.session import now
from engine.oracles.catalog import ORACLE_TEMPLATE, OracleCatalog
from engine.oracles.consult import Consultation
from engine.oracles.context import CaseContext
from engine.oracles.notes import read_note_file, typed_note
from engine.paths import resource_dir
from engine.storage.atomic import atomic_write_text
from engine.storage.layout import NOTES_DIR, RESPONSES_DIR
from engine.text import slug

if TYPE_CHECKING:
    from engine.config.models import Config
    from engine.models.notes import LlmEntry, NoteEntry
    from engine.models.session import InterrogationSession
    from engine.oracles.catalog import Oracle, OracleCatalog
    from engine.oracles.consult import Consultation
    from engine.storage.sessions import SessionStore
    from engine.workspace.core import Workspace

__all__ = ["Cases"]


class Cases:
    """Notes, oracles and consultations of one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._catalog: OracleCatalog | None = None

    @property
    def config(self) -> Config:
        return self.workspace.config

    @property
    def store(self) -> SessionStore:
        return self.workspace.store

    def new_case(self, title: str) -> InterrogationSession:
        """A session for notes alone (status `notes`); its interrogation can start later
        (`start(…, session=id)`). `ConfigError` for an empty title."""
        text = " ".join(title.split())
        if not text:
            raise ConfigError("the title is empty")
        return self.store.create_notes(text, self.config.interrogation.iteration_limit)

    def add_note(self, ref: str, text: str, source: str, ext: str = "txt",
                 kind: Literal["typed", "imported"] = "typed") -> NoteEntry:
        """Store `text` as the session's next note (file first, then its entry)."""

        body = typed_note(text) if kind == "typed" else text
        name = slug(source.rsplit(".", 1)[0] if kind == "imported" else source)

        def change(session: InterrogationSession, directory: Path) -> NoteEntry:
            sequence = max((n.sequence for n in session.notes), default=0) + 1
            filename = f"{sequence:03d}_{name}.{ext}"
            atomic_write_text(directory / NOTES_DIR / filename, body)
            entry = NoteEntry(sequence=sequence, received_at=now(), filename=filename,
                              kind=kind, source=source, characters=len(body))
            session.notes.append(entry)
            return entry

        return self.store.update(ref, change)

    def import_notes(self, ref: str, files: Sequence[Path]) -> tuple[list[NoteEntry],
                                                                      list[str]]:
        """Import each file as a note (.txt .md .srt .vtt): (the notes added, why each other
        file was refused). The session is checked first."""

        self.store.resolve(ref)
        added: list[NoteEntry] = []
        refused: list[str] = []
        for path in files:
            try:
                text, ext = read_note_file(path)
            except NoteRefused as exc:
                refused.append(exc.message)
                continue
            added.append(self.add_note(ref, text, path.name, ext, "imported"))
        return added, refused

    def note_texts(self, ref: str, session: InterrogationSession | None = None,
                   ) -> list[tuple[NoteEntry, str]]:
        """Every note with its text (a missing file reads as a bracketed message)."""

        session = self.store.load(ref) if session is None else session
        return [(entry, self._case_text(ref, NOTES_DIR, entry.filename))
                for entry in session.notes]

    def answer_texts(self, ref: str, session: InterrogationSession | None = None,
                     ) -> list[tuple[LlmEntry, str]]:
        """Every oracle answer with its text."""

        session = self.store.load(ref) if session is None else session
        return [(entry, self._case_text(ref, RESPONSES_DIR, entry.response_filename))
                for entry in session.llm_entries]

    def _case_text(self, ref: str, folder: str, filename: str) -> str:

        try:
            return self.store.case_text(ref, folder, filename)
        except SessionCorrupt as exc:
            return f"[{exc.message}]"

    def set_include_history(self, ref: str, value: bool) -> None:
        """Keep the session's preference: earlier oracle answers in the next context."""

        def change(session: InterrogationSession, directory: Path) -> None:
            session.ui_preferences.include_llm_history = value

        self.store.update(ref, change)

    @property
    def oracle_catalog(self) -> OracleCatalog:
        """The oracles: ORACLES_DIR (default the shipped `prompts/oracles`), then `oracles/`
        beside the config file, which overrides a file of the same name."""
        if self._catalog is None:

            settings = self.config.oracles
            first = (Path(settings.dir).expanduser(), "ORACLES_DIR") if settings.dir \
                else (resource_dir("prompts") / "oracles", "shipped")
            self._catalog = OracleCatalog(
                [first, (self.user_oracles_dir, "user")], settings.placeholder,
                settings.cache_ttl,
            )
        return self._catalog

    @property
    def user_oracles_dir(self) -> Path:
        """Where the user's own oracles live (`oracles/` beside the config file)."""
        return self.workspace.paths.config_file.parent / "oracles"

    def editable_oracle(self, oracle: Oracle) -> tuple[Path, bool]:
        """The file to edit for `oracle`: the user's own; a shipped (or ORACLES_DIR) one is
        copied to the user's directory first, where it overrides the original. (path, copied)"""
        if oracle.source == "user":
            return oracle.path, False
        target = self.user_oracles_dir / oracle.path.name
        if target.exists():
            return target, False
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(oracle.path.read_bytes())
        self.oracle_catalog.refresh()
        return target, True

    def new_oracle(self, name: str) -> Path:
        """A new oracle file in the user's directory from the template (an existing file of
        that name is kept as it is); its path."""

        title = " ".join(name.split())
        if not title:
            raise ConfigError("the oracle's name is empty")
        path = self.user_oracles_dir / f"{slug(title, fallback='oracle')}.md"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(ORACLE_TEMPLATE.format(
                name=title, placeholder=self.config.oracles.placeholder), encoding="utf-8")
        self.oracle_catalog.refresh()
        return path

    def oracles(self) -> list[Oracle]:
        """Every oracle, valid or not, by name (re-read at most every ORACLE_CACHE_TTL s)."""
        return self.oracle_catalog.list()

    async def consultation(
        self,
        ref: str,
        oracles: Sequence[str],
        provider: str | None = None,
        include_history: bool | None = None,
    ) -> Consultation:
        """Oracles (by name, id or slug; 1–4, each once) ready to consult on the session's
        case file as it is now. `provider` answers for all of them (else each oracle's own
        chain, else the `oracle` role's); `include_history` None: the session's preference."""

        if not oracles:
            raise OracleError("no oracle named (see `detektiv oracles`)")
        chosen: list[Oracle] = []
        for name in oracles:
            oracle = self.oracle_catalog.find(name)
            if oracle not in chosen:
                chosen.append(oracle)
        if len(chosen) > 4:
            raise OracleError(f"{len(chosen)} oracles named; consult at most 4 at once")
        directory = self.store.resolve(ref)
        session = self.store.load(directory.name)
        history = session.ui_preferences.include_llm_history if include_history is None \
            else include_history

        dropped: list[str] = []

        def readable(entries: Sequence[NoteEntry | LlmEntry], folder: str, what: str
                     ) -> list[tuple[NoteEntry | LlmEntry, str]]:
            """The entries whose file reads; a missing one is left out and said so (its
            path is never sent to a model)."""
            out: list[tuple[NoteEntry | LlmEntry, str]] = []
            for entry in entries:
                name = entry.filename if isinstance(entry, NoteEntry) \
                    else entry.response_filename
                try:
                    out.append((entry, self.store.case_text(directory.name, folder, name)))
                except SessionCorrupt:
                    dropped.append(f"{what} {entry.sequence} left out: its file {name} cannot "
                                   "be read")
            return out

        notes = readable(session.notes, NOTES_DIR, "note")
        answers = readable(session.llm_entries, RESPONSES_DIR, "earlier answer") \
            if history else []
        case = CaseContext.build(
            session, notes, answers, history,  # type: ignore[arg-type]
            self.workspace.context_policy.limits("oracle"), dropped,
        )
        chains: dict[str, list[str]] = {}
        roles: list[tuple[Oracle, str]] = []
        for oracle in chosen:
            chain = [provider] if provider else list(oracle.provider)
            role = f"oracle-{oracle.id}" if chain else "oracle"
            if chain:
                chains[role] = chain
            roles.append((oracle, role))
        router, own = await self.workspace.routed(chains, discover=len(chains) < len(chosen))
        settings = self.config.oracles
        return Consultation(self.store, directory.name, session, case, router, roles,
                            settings.max_tokens, settings.timeout, own_router=own)
