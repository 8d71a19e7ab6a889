"""The workspace's sessions part: start, resume, follow, export and delete interrogations.

    run = workspace.sessions.start("Tea contains caffeine", limit=8, detective=["cloud"])
    async for event in run.events():             # typed events, each stored before it comes
        ...
    workspace.sessions.resume(ref) / follow(ref) / status(ref) / export(ref, "md")

Every rule about a session (the iteration limit, an empty hypothesis, what can be resumed,
when a stored `running` session is `interrupted`) is checked here or below, once; the front
ends present the errors it raises.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from engine.config.roles import apply_roles
from engine.errors import ConfigError, SessionError
from engine.interrogation.claims import claim_for, testimony_source
from engine.interrogation.judgement import says_nothing
from engine.interrogation.loop import Interrogation
from engine.interrogation.testimony import is_testimony, split_turns
from engine.models.events import InterrogationEvent, Record
from engine.models.session import (
    EvalTag,
    InterrogationSession,
    Protocol,
    WitnessBrief,
    WitnessDocument,
    check_resumable,
    unknown_protocols,
)
from engine.models.witness import document_file, notes_document, witness_document
from engine.prompts import fill, load_prompt, prompt_uses
from engine.report.blocks import reasoning_by_call
from engine.report.claims import Findings, findings
from engine.report.export import to_json, to_markdown
from engine.routing.slots import role_slots
from engine.storage.atomic import atomic_write_text
from engine.storage.index import SessionSummary
from engine.storage.journal import SessionJournal

if TYPE_CHECKING:
    from engine.config.models import InterrogationConfig
    from engine.costs import Budget
    from engine.routing.router import Router
    from engine.workspace.core import Workspace

__all__ = ["HYPOTHESIS_LIMIT", "LIMITS", "Run", "Sessions", "check_hypothesis"]

LIMITS = (5, 20)
"""The smallest and largest iteration limit a session may have."""
HYPOTHESIS_LIMIT = 50_000
UNASKED = "(an answer given to be checked, to no question)"
"""The hypothesis of a session examining an answer that says nothing to no question."""
"""The most characters a hypothesis may have: a pasted answer of several thousand words
passes (a testimony longer than the model's window is cut to fit, and says so); a megabyte
pasted by mistake does not."""


def check_hypothesis(hypothesis: str) -> str:
    """`hypothesis` stripped; `ConfigError` when it is empty or longer than
    `HYPOTHESIS_LIMIT` characters (the CLI's, the app's and MCP's one rule)."""
    text = hypothesis.strip()
    if not text:
        raise ConfigError("the hypothesis is empty")
    if len(text) > HYPOTHESIS_LIMIT:
        raise ConfigError(f"the hypothesis is too long: {len(text):,} characters, at most "
                          f"{HYPOTHESIS_LIMIT:,} (a few thousand words)")
    return text

OnRecord = Callable[[Record], None]


class Run:
    """A session taken to be run (new or resumed), its lock held; `events()` runs it.
    Cancelling the task that reads `events()` cancels the run (stored as `cancelled`)."""

    def __init__(self, workspace: Workspace, journal: SessionJournal, resumed: bool,
                 router: Router | None = None) -> None:
        self.workspace = workspace
        self.journal = journal
        self.resumed = resumed
        self.router = router
        """A router lent by the caller (an evaluation's, shared by its items), not closed."""
        self.settings: InterrogationConfig | None = None
        """Settings for this run instead of the configuration's `[interrogation]`."""
        self.budget: Budget | None = None
        """`--max-cost`: the run stops `cancelled` ("cost limit") before a call would pass it
        (an evaluation shares one among its items)."""

    @property
    def session(self) -> InterrogationSession:
        """The session being run (updated as it goes)."""
        return self.journal.session

    @property
    def testimony(self) -> bool:
        """Whether the run examines a testimony claim by claim (else a single claim, round
        after round)."""
        return is_testimony(self.journal.session)

    async def events(self) -> AsyncGenerator[InterrogationEvent, None]:
        """Run the interrogation to its end, yielding every event; see
        `engine.interrogation.loop`. The session's own chains (set at start) get a router of
        their own, closed at the end; otherwise the workspace's shared router is used."""
        session = self.journal.session
        workspace = self.workspace
        own = bool(session.detective or session.witness) and self.router is None
        if self.router is not None:
            config, router = workspace.config, self.router
        elif own:
            config = apply_roles(workspace.config, session.detective, session.witness)
            router = await workspace.new_router(
                config, discover=not (session.detective and session.witness))
        else:
            config, router = workspace.config, await workspace.router()
        interrogation = Interrogation(router, self.journal,
                                      self.settings or config.interrogation,
                                      resumed=self.resumed, budget=self.budget)
        try:
            # closed here, before the journal: a consumer that stops reading (a `break`) has
            # the run stored `cancelled` now, not whenever the generator is collected
            async with aclosing(interrogation.run()) as events:
                async for event in events:
                    yield event
        finally:
            self.journal.close()
            if own:
                await router.aclose()


class Sessions:
    """Interrogation sessions of one workspace; see the module docstring."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def check_limit(self, limit: int | None) -> int:
        """`limit`, or the configured default when None; `ConfigError` outside 5–20."""
        value = self.workspace.config.interrogation.iteration_limit if limit is None else limit
        low, high = LIMITS
        if not low <= value <= high:
            raise ConfigError(f"the iteration limit must be between {low} and {high} "
                              f"(got {value})")
        return value

    def rows(self) -> list[SessionSummary]:
        """Every session, newest first, from the index (`SessionStore.list`)."""
        return self.workspace.store.list()

    def load(self, ref: str) -> InterrogationSession:
        """The stored session `ref` names (a folder name, an id or its start)."""
        return self.workspace.store.load(ref)

    def folder(self, ref: str) -> Path:
        """The folder of session `ref`."""
        return self.workspace.store.resolve(ref)

    def is_live(self, ref: str) -> bool:
        """Whether a live process runs session `ref` now."""
        return self.workspace.store.is_live(ref)

    def version(self, running: Sequence[str] = ()) -> tuple[int, ...]:
        """What changes when the list would: the index, the folders, and whether each of
        `running` still has its process (`SessionStore.version`)."""
        return self.workspace.store.version(running)

    def status(self, ref: str, session: InterrogationSession | None = None) -> str:
        """The session's status as a user should read it: `interrupted` for a stored
        `running` one that no live process runs any more, `nothing-asked` for one that ended
        without asking the witness anything (`InterrogationSession.asked_nothing`)."""
        store = self.workspace.store
        session = store.load(ref) if session is None else session
        if session.status == "running" and not store.is_live(ref):
            return "interrupted"
        return session.shown_status

    def page(self, *, status: str | None = None, search: str | None = None,
             run: str | None = None, offset: int = 0, limit: int = 20
             ) -> tuple[list[SessionSummary], int]:
        """A page of the session list from its index, newest first: those with `status`
        (as a user reads it: `SHOWN_STATUSES`), whose hypothesis or title contains `search`
        (case aside), of evaluation run `run` (its id or start: `DatasetError` when there is
        no such run); `offset` skipped, at most `limit`. Returns the rows and how many more
        matched after them."""
        rows = self.workspace.store.list()
        if run is not None and run.strip():
            ident = self.workspace.evals.folder(run.strip()).directory.name
            rows = [row for row in rows if row.eval_run == ident]
        if status:
            rows = [row for row in rows if row.status == status.strip()]
        if search and search.strip():
            words = search.strip().casefold()
            rows = [row for row in rows if words in row.hypothesis.casefold()]
        offset, limit = max(0, offset), max(0, limit)
        return rows[offset:offset + limit], max(0, len(rows) - offset - limit)

    def start(
        self,
        hypothesis: str,
        limit: int | None = None,
        detective: Sequence[str] = (),
        witness: Sequence[str] = (),
        on_record: OnRecord | None = None,
        session: str | None = None,
        *,
        brief: WitnessBrief | None = None,
        tag: EvalTag | None = None,
        router: Router | None = None,
        ident: uuid.UUID | None = None,
        protocol: Protocol = "cross-exam",
        document: WitnessDocument | Path | None = None,
        witness_notes: bool = False,
        topic: str | None = None,
        samples: list[str] | None = None,
        answer: str | None = None,
        answered_by: str | None = None,
    ) -> Run:
        """A new session, stored at once; `Run.events()` runs it. With `session`, the
        interrogation of that notes-only session (`cases.new_case`) instead. Raises
        `ConfigError` for an empty or too long hypothesis (`check_hypothesis`), a limit
        outside 5–20 or an unknown provider,
        before anything is stored. `brief` and `tag` (an evaluation's item) put a claim to the
        witness first and mark the session as the run's; `router` lends one (kept open).
        `protocol`: how the witness is questioned (`cross-exam`, or `consistency`: each
        question asked `[interrogation] consistency_samples` times). `document`: what the
        witness holds (a `WitnessDocument`, or a file read as notes are: `NoteRefused` when it
        cannot be); `witness_notes`: the notes of case `session` as its document. `topic` and
        `samples` (an evaluation's claim of a testimony): the question the testimony answers
        and the witness's answers to it drawn again, which the claim is read against.
        `answer` (with `answered_by`, who gave it): the witness's answer to `hypothesis`, made
        elsewhere, given rather than asked — the session's testimony (an answer that is
        empty or says nothing ends the session with its reason named, as an asked one)."""
        text = check_hypothesis(hypothesis)
        if answer is not None and len(answer) > HYPOTHESIS_LIMIT:
            raise ConfigError(f"the answer is too long: {len(answer):,} characters, at most "
                              f"{HYPOTHESIS_LIMIT:,}")
        value = self.check_limit(limit)
        if (problem := unknown_protocols([protocol])) is not None:
            raise ConfigError(problem)
        workspace = self.workspace
        if detective or witness:  # unknown names fail here, before anything is stored
            apply_roles(workspace.config, list(detective), list(witness))
        uses = prompt_uses()  # an invalid prompt override fails here, before anything is stored
        store = workspace.store
        if isinstance(document, Path):
            document = document_file(document)
        if witness_notes:
            if session is None:
                raise ConfigError("the witness can hold a case's notes only in a case "
                                  "(--session)")
            case = store.load(session)
            document = notes_document(case.name, [
                (entry.filename, text) for entry, text in workspace.cases.note_texts(
                    session, case)])
        settings = {"prompts": uses, "witness_document": document, "protocol": protocol,
                    "consistency_samples": workspace.config.interrogation.consistency_samples,
                    "topic": topic, "samples": samples, "answer": answer,
                    "answered_by": answered_by}
        if session is not None:
            journal = store.begin(session, text, value, detective=list(detective),
                                  witness=list(witness), on_record=on_record,
                                  settings=settings)
        else:
            journal = store.create(text, value, detective=list(detective),
                                   witness=list(witness), on_record=on_record, brief=brief,
                                   tag=tag, ident=ident, settings=settings)
        return Run(workspace, journal, resumed=False, router=router)

    def examine_answer(self, question: str | None, answer: str, *,
                       document: str | None = None, document_name: str = "document",
                       detective: Sequence[str] = (), witness: Sequence[str] = (),
                       answered_by: str | None = None, ident: uuid.UUID | None = None,
                       limit: int | None = None, router: Router | None = None) -> Run:
        """A new session examining `answer`, made elsewhere, to `question` (the one rule for
        an answer given to be checked: an Inspect sample's output). An answer of one
        statement is the claim it makes (`claims.claim_for`, as an evaluation reads a
        question's answer); of several, a testimony taken apart claim by claim — with
        `document`, the text itself (the witness holds the document), else the witness's own
        answer (`answered_by` gave it), read against the witness's answers to `question`
        drawn again. With no `question` (a summary of the document: it answers none), the
        answer is examined as it stands. An answer that says nothing ("I don't know", a
        refusal, nothing at all) ends its session with the reason named, never examined as a
        claim."""
        held = witness_document(document_name, document) if document is not None else None
        stated = answer.strip()
        asked = (question or "").strip()
        empty = not stated or says_nothing(stated) is not None
        if not empty and testimony_source(stated) is None:
            claim = claim_for(asked, stated) if asked else stated
            return self.start(claim, limit, detective, witness, ident=ident, router=router,
                              document=held)
        if not empty and (held is not None or not asked):
            return self.start(stated, limit, detective, witness, ident=ident, router=router,
                              document=held)
        return self.start(asked or UNASKED, limit, detective, witness, ident=ident,
                          router=router, document=held, answer=answer,
                          answered_by=answered_by)

    def findings(self, ref: str) -> Findings:
        """What session `ref`'s examination found (`engine.report.claims.Findings`): its
        verdict and P(false), its claims counted by state, the shares held and not held, and
        one paragraph naming the claims not held."""
        return findings(self.workspace.store.load(ref))

    async def side_by_side(self) -> int:
        """How many sessions the servers of the detective and the witness take at once
        (`routing.slots.role_slots`; a server sharing this machine's cores counts as one)."""
        return await role_slots(await self.workspace.router(), 16, 2, cores=True)

    def prompts_for_run(self) -> dict[str, str]:
        """The prompt files a run would use, with their hashes (`ConfigError` for an invalid
        override, as `start` would raise)."""
        return prompt_uses()

    def first_instructions(self, hypothesis: str) -> str:
        """The detective's instructions for `hypothesis`, as its first call sends them: a
        single claim's first question, or a testimony's split (said to be one)."""
        source = testimony_source(hypothesis)
        if source is None:
            return fill(load_prompt("detective_question"), HYPOTHESIS=hypothesis)
        how = ("it asks, so the witness answers it first, told nothing more, and its answer "
               "is the testimony" if source == "witness" else
               "it states several sentences, so it is itself the testimony")
        rules, _ = split_turns(load_prompt("split_claims"))
        return (f"A testimony: {how}. The detective takes the testimony apart into claims "
                f"with these instructions (and the worked examples of "
                f"prompts/split_claims.md), then examines each claim:\n\n{rules}")

    def resume(self, ref: str, on_record: OnRecord | None = None,
               router: Router | None = None) -> Run:
        """Take a stored session to continue it from its last completed round. Raises
        `SessionError` when it ended already or another process runs it."""
        store = self.workspace.store
        check_resumable(store.load(ref))
        uses = prompt_uses()
        journal = store.open(ref, on_record=on_record)
        journal.session.prompts = uses
        return Run(self.workspace, journal, resumed=True, router=router)

    def follow(self, ref: str) -> AsyncGenerator[Record, None]:
        """Every event of a session so far, then new ones until its run ends (or its process
        dies: then `status` says `interrupted`)."""
        store = self.workspace.store
        session = store.load(ref)
        if session.status == "notes":
            raise SessionError(f"session {session.short_id} has no interrogation to watch yet")
        return store.follow(ref)

    def export_file(self, ref: str, fmt: Literal["md", "json"]) -> Path:
        """Export a session into the exports folder (`Paths.exports_dir`); returns the file."""
        session = self.workspace.store.load(ref)
        target = self.workspace.paths.exports_dir / f"detektiv-{str(session.id)[:8]}.{fmt}"
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, self.export(ref, fmt))
        return target

    def export(self, ref: str, fmt: Literal["md", "json"], reasoning: bool = False,
               document: bool = False) -> str:
        """A session as markdown (for people, with its status as a user reads it, its notes
        and oracle answers in full; with `reasoning`, what a reasoning model thought before
        each reply, from the event log) or JSON (the whole session; loads back equal: the
        reasoning stays in the events, `watch --json`). The witness's document is named in
        either; its text is carried only with `document`."""
        store = self.workspace.store
        session = store.load(ref)
        if fmt == "json":
            return to_json(session, document)
        cases = self.workspace.cases
        thought = reasoning_by_call(record.event for record in store.events(ref)) \
            if reasoning else None
        return to_markdown(session, self.status(ref, session), cases.note_texts(ref, session),
                           cases.answer_texts(ref, session), thought, document)

    def delete(self, ref: str) -> None:
        """Remove a session (refused while it runs)."""
        self.workspace.store.delete(ref)
