"""detektiv's tools over the Model Context Protocol (`detektiv mcp`), on the official SDK's
2.x `MCPServer`.

    server = build(workspace)      # the tools; `tui.mcp.transport` serves them
    interrogate  a hypothesis or a testimony → the verdict, the claims and their states, the
                 session id; progress per round and per claim; `wait: false` starts it and
                 returns the id at once (then poll `session`)
    sessions     the stored sessions, newest first, filtered
    session      one session: its status (running or not) and its markdown report
    evaluate     a named dataset or a file of labelled claims → the figures

A front end like the CLI: every tool goes through the workspace, and every rule (an empty
hypothesis, a limit outside 5–20, an unknown provider, a document that cannot be read) is the
workspace's, its error given back as the tool's error in its own words. Sessions made here are
ordinary sessions: the app and `watch` show them live. Cancelling a call cancels what it runs
(an interrogation ends `cancelled`, resumable; an evaluation stops where it was). Model output
is data: every text a result or a notification carries passes `strip_control` (no terminal
escapes, no bidi overrides); API keys never reach one (the engine's errors are redacted when
they are built, and no result carries a provider's configuration).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from engine import (
    HYPOTHESIS_LIMIT,
    SHOWN_STATUSES,
    AuditReady,
    ClaimExamined,
    ClaimsSplit,
    DetektivError,
    EvalFinished,
    EvalItemDone,
    EvalRequest,
    EvalStarted,
    Finished,
    InterrogationEvent,
    NoteRefused,
    PairCompleted,
    Run,
    SessionSummary,
    Started,
    Workspace,
    claim_line,
    finished_line,
    listed_title,
    one_line,
    split_chain,
    strip_control,
    summary_json,
    verdict_short,
)

__all__ = ["INSTRUCTIONS", "build"]

INSTRUCTIONS = (
    "detektiv finds out what a language model really knows: a detective model questions a "
    "witness model, round after round, and a verdict is computed from the answers. Give "
    "`interrogate` a claim (\"The Eiffel Tower is in Berlin.\"), a question or request "
    "(the witness answers it and its answer is taken apart claim by claim), or a pasted "
    "paragraph. A run takes minutes: pass wait=false to get the session id at once and poll "
    "`session`.")

Report = Callable[[str, float, float | None], Awaitable[None]]
"""Says one step of a run: a progress notification's message, its progress and its total
(None while unknown); progress only grows and never passes the total."""
ECHO = 300
"""The most characters of a hypothesis a result carries (a pasted testimony is cut, "…"
marking the cut: the session has it whole)."""
StatusName = Literal[SHOWN_STATUSES]  # type: ignore[valid-type]


def _clean(text: str | None) -> str | None:
    return None if text is None else strip_control(text)


class ClaimResult(BaseModel):
    """One claim of a testimony and where its examination stands."""

    number: int
    text: str
    state: str
    """pending, held, contradicted, unsupported, unsure, not checkable or not examined."""
    probability_false: float | None = None
    why: str | None = None


class SessionRow(BaseModel):
    """One stored session, as `detektiv sessions --json` lists it."""

    session: str
    """Its id: `session` reports it, `detektiv watch` follows it, `detektiv resume` goes on."""
    status: str
    """running, completed, limit-reached, nothing-asked (the detective asked the witness
    nothing: no verdict came from evidence), failed, cancelled or interrupted."""
    hypothesis: str
    """The hypothesis, or the session's title (its first 300 characters)."""
    verdict: str | None = None
    """true, false or undetermined; None before the audit."""
    probability_false: float | None = None
    demonstration: bool = False
    """A demonstration model played the detective: the verdict means nothing."""
    consistency_score: int | None = None
    rounds: int = 0
    error: str | None = None
    """Why it failed or stopped, in one line."""
    started: str | None = None
    evaluation_run: str | None = None


class InterrogationResult(SessionRow):
    """A session as an interrogation leaves it (or as it stands, while it runs)."""

    summary: str | None = None
    claims: list[ClaimResult] = Field(default_factory=list)
    """A testimony's claims with their states; empty for a single claim."""


class SessionList(BaseModel):
    sessions: list[SessionRow]
    more: int = 0
    """How many more matched than `limit` returned."""


class SessionReport(BaseModel):
    session: str
    status: str
    running: bool
    """Whether a live process runs it now (its report grows until it ends)."""
    verdict: str | None = None
    report: str
    """The session as a markdown report (`detektiv show`)."""


class EvaluationResult(BaseModel):
    run: str
    """The evaluation run's id (`detektiv evals RUN`); the same request goes on from there."""
    judged: int
    total: int
    failed: int
    status: str
    figures: dict[str, Any]
    """Each system's figures with their 95 % intervals, as `detektiv eval --json` gives them."""


def interrogation_result(workspace: Workspace, ref: str) -> InterrogationResult:
    """The stored session `ref` as a result (its status as a user reads it)."""
    session = workspace.sessions.load(ref)
    audit = session.audit_result
    claims = [] if session.testimony is None else [
        ClaimResult(number=c.number, text=strip_control(c.text), state=c.state,
                    probability_false=c.probability_false, why=_clean(c.why))
        for c in session.testimony.claims]
    return InterrogationResult(
        session=str(session.id), status=workspace.sessions.status(ref, session),
        hypothesis=one_line(session.hypothesis.text if session.hypothesis else "", ECHO),
        started=session.start_time.isoformat(),
        verdict=audit.verdict if audit else None,
        probability_false=audit.probability_false if audit else None,
        demonstration=session.demonstration,
        consistency_score=audit.consistency_score if audit else None,
        summary=_clean(audit.summary) if audit else None,
        rounds=len(session.qa_pairs), claims=claims, error=_clean(session.error))


def _row(row: SessionSummary) -> SessionRow:
    return SessionRow(
        session=row.id, status=row.status,
        hypothesis=one_line(listed_title(row.hypothesis, row.claims), ECHO),
        verdict=row.verdict, probability_false=row.probability_false,
        demonstration=row.demonstration, consistency_score=row.score, started=row.started,
        rounds=row.pairs, evaluation_run=row.eval_run, error=_clean(row.error))


def step_line(event: InterrogationEvent, ident: str, examined: tuple[int, int] = (0, 0)
              ) -> str | None:
    """The progress message of session `ident`'s event worth one, else None; `examined`:
    the claims examined so far (this one included) of those to examine."""
    match event:
        case Started(resumed_after=None):
            return f"session {ident[:8]} started"
        case PairCompleted(pair=pair) if pair.testimony:
            return "testimony given"
        case PairCompleted(pair=pair) if pair.claim is None:
            return f"round {pair.sequence} done"
        case ClaimsSplit(testimony=testimony):
            return (f"testimony taken apart: {len(testimony.claims)} claims"
                    if testimony.claims else f"nothing to examine: {testimony.problem}")
        case ClaimExamined(claim=claim, single=False):
            done, of = examined
            return f"{done}/{of} claims examined: {strip_control(claim_line(claim))}"
        case AuditReady(audit=audit) if audit.verdict:
            return "verdict: " + verdict_short(audit.verdict, audit.probability_false,
                                               audit.demonstration)
        case Finished(status=status, reason=reason):
            return finished_line(ident, status, reason)
    return None


class Progress:
    """Where a run stands, as MCP progress (`progress`, `total`): a single claim counts its
    rounds out of its limit, then the verdict and the end (total limit + 2, known from the
    start); a testimony counts its testimony and split, then each claim it examines, then
    the verdict and the end (total known once the split says how many claims). Progress only
    grows, and the end is the total whatever came before (a claim settled early)."""

    def __init__(self, limit: int, testimony: bool) -> None:
        self.testimony = testimony
        self.value = 0.0
        self.total: float | None = None if testimony else float(limit + 2)
        self.examined = self.of = 0

    def step(self, event: InterrogationEvent) -> bool:
        """Move on for `event`; whether it is a step worth saying."""
        match event:
            case Started():
                return True
            case PairCompleted(pair=pair) if pair.testimony:
                self.value = max(self.value, 1.0)
            case PairCompleted(pair=pair) if pair.claim is None and not self.testimony:
                self.value = max(self.value, min(float(pair.sequence), self._last - 2))
            case ClaimsSplit(testimony=testimony):
                self.of = sum(claim.state == "pending" for claim in testimony.claims)
                self.total = float(self.of + 4)  # testimony, split, the claims, verdict, end
                self.value = max(self.value, 2.0)
            case ClaimExamined(single=False):
                self.examined += 1
                self.value = max(self.value, min(2.0 + self.examined, self._last - 2))
            case AuditReady():
                self.value = max(self.value, self._last - 1)
            case Finished():
                self.value = self._last
            case _:
                return False
        return True

    @property
    def _last(self) -> float:
        """The total, or (unknown yet) a value past everything counted so far."""
        return self.total if self.total is not None else self.value + 3


async def drive(run: Run, report: Report | None = None,
                started: asyncio.Event | None = None) -> None:
    """Run `run` to its end, saying each step to `report`; `started` is set once the run
    has begun (its `Started`: the session then says whether a demonstration model plays the
    detective), or when it ends before. Cancelled, the session is stored `cancelled`
    (resumable) before the cancellation goes on."""
    ident = str(run.session.id)
    progress = Progress(run.session.iteration_limit, run.testimony)
    try:
        async with aclosing(run.events()) as events:
            async for event in events:
                if isinstance(event, Started) and started is not None:
                    started.set()
                if not progress.step(event) or report is None:
                    continue
                line = step_line(event, ident, (progress.examined, progress.of))
                if line:
                    await report(line, progress.value, progress.total)
    finally:
        if started is not None:
            started.set()


_INVALID = re.compile(r"(Error executing tool \S+: )\d+ validation errors? for \S+\n(.*)", re.S)


def tidy_validation(text: str) -> str:
    """pydantic's report of bad arguments as one line a field (`limit: Input should be a
    valid integer`), without its error codes, echoed inputs and web links."""
    found = _INVALID.match(text)
    if found is None:
        return text
    fields, field = [], None
    for line in found.group(2).splitlines():
        if not line.startswith(" "):
            field = line.strip()
        elif field is not None and not line.strip().startswith("For further information"):
            fields.append(f"{field}: {line.strip().split(' [type=', 1)[0]}")
            field = None
    return found.group(1) + "; ".join(fields) if fields else text


async def _tidied(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: a tool's rejected arguments said per field (`tidy_validation`)."""
    result = await call_next(ctx)
    if ctx.method != "tools/call" or not isinstance(result, dict) or not result.get("isError"):
        return result
    content = result.get("content") or []
    if content and isinstance(content[0], dict) and isinstance(content[0].get("text"), str):
        first = {**content[0], "text": tidy_validation(content[0]["text"])}
        result = {**result, "content": [first, *content[1:]]}
    return result


def build(workspace: Workspace) -> MCPServer[Any]:
    """The MCP server over `workspace` (closed by whoever made it). Runs started with
    `wait: false` are cancelled when the server stops (stored `cancelled`, resumable)."""
    background: dict[str, asyncio.Task[None]] = {}

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for task in list(background.values()):
                task.cancel()
            await asyncio.gather(*background.values(), return_exceptions=True)

    from engine import __version__

    server: MCPServer[Any] = MCPServer("detektiv", version=__version__,
                                       instructions=INSTRUCTIONS, lifespan=lifespan,
                                       log_level="WARNING", middleware=[_tidied])

    def reporter(ctx: Context) -> Report:
        last = -1.0

        async def report(line: str, progress: float, total: float | None) -> None:
            nonlocal last
            progress = max(progress, last + 1e-3)  # a notification's progress always grows
            if total is not None:
                progress = min(progress, total)
            if progress <= last:
                return
            last = progress
            await ctx.report_progress(progress, total, strip_control(line))
        return report

    @server.tool(description=(
        "Interrogate a witness model about a hypothesis: a claim, a question or request "
        "(the witness answers it; its answer is taken apart claim by claim), or a pasted "
        "paragraph (itself the testimony). Returns the verdict, the claims with their "
        "states and the session id; progress is reported per round and per claim. "
        "wait=false returns the session id at once (poll `session`)."))
    async def interrogate(
        hypothesis: Annotated[str, Field(
            description=f"the claim, question or testimony (at most {HYPOTHESIS_LIMIT:,} "
            "characters)", max_length=HYPOTHESIS_LIMIT)],
        ctx: Context,
        detective: Annotated[str, Field(description="detective chain, names of configured "
                                        "providers separated by commas (default: the "
                                        "configured roles)")] = "",
        witness: Annotated[str, Field(description="witness chain (as detective)")] = "",
        limit: Annotated[int | None, Field(
            description="rounds at most (a claim's, for a testimony): 5 to 20; default: "
            "the configured iteration limit", json_schema_extra={"minimum": 5,
                                                                "maximum": 20})] = None,
        protocol: Annotated[Literal["cross-exam", "consistency"], Field(
            description="cross-exam: one answer a question; consistency: each question "
            "asked several times")] = "cross-exam",
        document: Annotated[str | None, Field(
            description="a file the witness holds (text, markdown, PDF…); its path on the "
            "machine detektiv runs on")] = None,
        wait: Annotated[bool, Field(description="run to the verdict (true) or return the "
                                    "session id at once (false)")] = True,
    ) -> InterrogationResult:
        try:
            run = workspace.sessions.start(
                hypothesis, limit, split_chain(detective), split_chain(witness),
                protocol=protocol,
                document=None if document is None else Path(document).expanduser())
        except NoteRefused as exc:  # the engine read the document and said why not
            raise ToolError(f"document: {exc.message}") from None
        except DetektivError as exc:
            raise ToolError(exc.message) from None
        ident = str(run.session.id)
        if not wait:  # returned once the run has begun: its session says who plays whom
            begun = asyncio.Event()
            task = asyncio.create_task(drive(run, started=begun),
                                       name=f"mcp-session-{ident[:8]}")
            background[ident] = task
            task.add_done_callback(lambda _: background.pop(ident, None))
            await begun.wait()
            return interrogation_result(workspace, ident)
        try:
            await drive(run, reporter(ctx))
        except DetektivError as exc:  # the run stored why; the call says it
            raise ToolError(exc.message) from None
        result = interrogation_result(workspace, ident)
        if result.status == "failed":  # an error result, never a result that reads as one
            raise ToolError(f"session {ident[:8]} failed: {result.error or 'no reason given'}")
        return result

    @server.tool(description="List stored sessions, newest first: id, status, verdict, "
                 "rounds; filtered by status, by words of the hypothesis, or by evaluation "
                 "run; a page at a time (offset, limit).")
    def sessions(
        status: Annotated[StatusName | None, Field(description="only sessions with this "
                                                   "status")] = None,
        search: Annotated[str | None, Field(description="only sessions whose hypothesis "
                                            "contains this text")] = None,
        evaluation_run: Annotated[str | None, Field(description="only the sessions of this "
                                                    "evaluation run (its id or start)")] = None,
        limit: Annotated[int, Field(description="at most this many (1-500)",
                                    json_schema_extra={"minimum": 1, "maximum": 500})] = 20,
        offset: Annotated[int, Field(description="skip this many (the next page: the last "
                                     "offset + limit)", json_schema_extra={"minimum": 0})] = 0,
    ) -> SessionList:
        if not 1 <= limit <= 500:
            raise ToolError(f"limit must be between 1 and 500 (got {limit})")
        if offset < 0:
            raise ToolError(f"offset must be at least 0 (got {offset})")
        try:
            rows, more = workspace.sessions.page(status=status, search=search,
                                                 run=evaluation_run, offset=offset,
                                                 limit=limit)
        except DetektivError as exc:
            raise ToolError(exc.message) from None
        return SessionList(sessions=[_row(row) for row in rows], more=more)

    @server.tool(description="One session: its status (running or not) and its markdown "
                 "report (questions, answers, claims, audit, verdict).")
    def session(
        session: Annotated[str, Field(description="the session id (or its first characters)")],
    ) -> SessionReport:
        try:
            stored = workspace.sessions.load(session)
            ref = str(stored.id)
            status = workspace.sessions.status(ref, stored)
            text = workspace.sessions.export(ref, "md")
        except DetektivError as exc:
            raise ToolError(exc.message) from None
        audit = stored.audit_result
        return SessionReport(session=ref, status=status, running=status == "running",
                             verdict=verdict_short(audit.verdict, audit.probability_false,
                                                   audit.demonstration) or None
                             if audit else None,
                             report=strip_control(text))

    @server.tool(description=(
        "Measure whether interrogation catches false claims: a named dataset (demo, "
        "halueval-qa) or a JSON-lines file of labelled claims; returns each system's "
        "figures (accuracy, AUROC, … with 95 % intervals). Resumable: the same request "
        "goes on where it stopped."))
    async def evaluate(
        dataset: Annotated[str, Field(description="demo, halueval-qa, or a file's path")],
        ctx: Context,
        n: Annotated[int | None, Field(description="items to sample (default: all)",
                                       json_schema_extra={"minimum": 1})] = None,
        seed: Annotated[int, Field(description="sampling seed")] = 0,
        mode: Annotated[Literal["planted", "defend", "open", "document"], Field(
            description="how each claim is put to the witness")] = "planted",
        protocol: Annotated[Literal["cross-exam", "consistency"], Field(
            description="interrogation protocol")] = "cross-exam",
        detective: Annotated[str, Field(description="detective chain (a,b)")] = "",
        witness: Annotated[str, Field(description="witness chain (a,b)")] = "",
        limit: Annotated[int | None, Field(description="rounds an interrogation (5-20)",
                                           json_schema_extra={"minimum": 5,
                                                              "maximum": 20})] = None,
    ) -> EvaluationResult:
        if n is not None and n < 1:
            raise ToolError(f"n must be at least 1 (got {n})")
        request = EvalRequest(dataset=dataset, n=n, seed=seed, mode=mode,
                              detective=tuple(split_chain(detective)),
                              witness=tuple(split_chain(witness)), limit=limit)
        report = reporter(ctx)
        try:
            run = await workspace.evals.start(request, protocols=(protocol,))
        except DetektivError as exc:
            raise ToolError(exc.message) from None
        finished: EvalFinished | None = None
        total = judged = 0
        try:
            async with aclosing(run.events()) as events:
                async for event in events:
                    match event:
                        case EvalStarted(total=total, skipped=skipped):
                            await report(f"evaluation {run.id}: {total} to judge"
                                         + (f", {skipped} finished earlier" if skipped else ""),
                                         0, total)
                        case EvalItemDone(result=result):
                            judged += 1
                            await report(f"item {judged} of {total}: {result.status}"
                                         + (f" ({result.verdict})" if result.verdict else ""),
                                         judged, total)
                        case EvalFinished():
                            finished = event
        except DetektivError as exc:
            raise ToolError(exc.message) from None
        summary = workspace.evals.summary(run.id)
        return EvaluationResult(
            run=run.id, judged=finished.done if finished else judged,
            total=finished.total if finished else total,
            failed=finished.failed if finished else 0,
            status=finished.status if finished else "stopped",
            figures=summary_json(summary))

    return server
