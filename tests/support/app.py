"""Driving the app in tests: waiting for a condition, an app on a given config, and a fixed
session for snapshots."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable

from engine import Paths, load_config
from engine.models.events import (
    AnswerDelta,
    AuditReady,
    Finished,
    GapAnalysisReady,
    PairCompleted,
    Phase,
    ProviderChosen,
    QuestionDelta,
    Started,
)
from engine.models.session import (
    AuditResult,
    Gap,
    Hypothesis,
    InterrogationSession,
)
from engine.storage.eventlog import EventLogWriter
from tests.support.factory import sample_pair
from tests.support.interrogation import FAST
from tui.app import DetektivApp


async def until(pilot: Pilot[int], condition: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await pilot.pause(0.05)


def _sized(table: DataTable[Any]) -> bool:
    """Whether `table` has sized its columns to its cells (it does so when idle: a shot taken
    before shows them cut to their headings' widths)."""
    for index, column in enumerate(table.ordered_columns):
        cells = (table.get_row_at(row)[index] for row in range(table.row_count))
        widest = max(((cell if isinstance(cell, Text) else Text(str(cell))).cell_len
                      for cell in cells), default=0)
        if column.auto_width and column.content_width < widest:
            return False
    return True


async def quiet(pilot: Pilot[int], done: Callable[[], bool] = lambda: True,
                timeout: float = 90) -> None:
    """Until `done()` holds, no worker runs and every table on the screen has rows sized to
    its cells; then a frame more. What a snapshot waits for, however busy the machine."""
    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause()
        app = pilot.app
        if done() and not any(w.is_running for w in app.workers) \
                and all(_sized(t) for t in app.screen.query(DataTable)):
            break
        if time.monotonic() > deadline:
            raise AssertionError("the screen never settled")
        await pilot.pause(0.02)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def app_for(home: Path, text: str = "") -> DetektivApp:
    (home / "config.toml").write_text(text)
    paths = Paths.from_env()
    return DetektivApp(paths, load_config(paths))


def config_text(providers: dict[str, str], detective: list[str], witness: list[str],
                min_rounds: int = 3) -> str:
    """A config of `providers` (OpenAI-compatible, by base URL) in those roles, with the fast
    budgets and `min_rounds` (3: a run the scripted detective judges decisively still takes
    three rounds, long enough to watch)."""
    lines = []
    for priority, (name, url) in enumerate(providers.items(), start=1):
        lines += [f"[providers.{name}]", 'kind = "openai"', 'model = "gemma"',
                  f'base_url = "{url}"', f"priority = {priority}", "first_token_timeout = 30",
                  "stall_timeout = 15", ""]
    lines += ["[roles]", f"detective = {json.dumps(detective)}",
              f"witness = {json.dumps(witness)}", "", "[interrogation]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in {**FAST, "min_rounds": min_rounds}.items()]
    return "\n".join(lines) + "\n"


def finished(app: DetektivApp) -> bool:
    return app.live.status_text.startswith(("completed", "limit-reached", "failed",
                                            "cancelled"))


START = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)


def fixed_session(root: Path, n: int, status: str = "completed") -> InterrogationSession:
    begun = START + timedelta(hours=n)
    gaps = [Gap(category="vagueness", description="the dates stay vague", severity="medium")]
    pair = sample_pair(
        1, question="Where was the shipment on the third?",
        answer="At the **harbour**, as far as I know.\n\n- loaded at 03:10\n- left at dawn",
        when=begun, gaps=gaps, completeness=70, follow_up=False,
        detective="cloud:gpt-4o", witness="local:gemma-3-270m",
    )
    audit = AuditResult(consistency_score=92, remaining_gaps=gaps,
                        summary="The witness places the shipment at the harbour.",
                        verdict="false", probability_false=0.8, deciding_rounds=[1])
    session = InterrogationSession(
        id=uuid.UUID(hex=f"{(n + 1) * 0x1234567:08x}" + "0" * 24), hypothesis=Hypothesis(
            text=f"Hypothesis {n}: the shipment left on the third", created_at=begun),
        start_time=begun, end_time=begun + timedelta(minutes=2), status=status,  # type: ignore[arg-type]
        iteration_limit=8, current_iteration=1, qa_pairs=[pair], audit_result=audit,
    )
    name = f"{begun.strftime('%Y-%m-%d_%H-%M-%S')}_{session.short_id}"
    directory = root / name
    directory.mkdir(parents=True)
    log = EventLogWriter(directory / "events.jsonl", clock=lambda: 1000.0)
    for event in (
        Started(session_id=str(session.id), hypothesis=session.hypothesis.text,
                iteration_limit=8),
        Phase(phase="question", sequence=1),
        ProviderChosen(role="detective", provider="cloud:gpt-4o"),
        QuestionDelta(sequence=1, text=pair.question),
        Phase(phase="answer", sequence=1),
        ProviderChosen(role="witness", provider="local:gemma-3-270m"),
        AnswerDelta(sequence=1, text=pair.answer),
        Phase(phase="analysis", sequence=1),
        GapAnalysisReady(sequence=1, analysis=pair.gap_analysis),
        PairCompleted(pair=pair),
        Phase(phase="audit", sequence=1),
        AuditReady(audit=audit),
        Finished(status=status),  # type: ignore[arg-type]
    ):
        log.append(event)
    log.close()
    session.events_recorded = log.last_n
    (directory / "metadata.json").write_text(session.model_dump_json())
    return session  # no index line: the store reads a folder its index does not know
