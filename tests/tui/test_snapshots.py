"""One snapshot per tab, at a fixed terminal size, from fixed data."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from engine import Paths, load_config
from tests.support.app import START, fixed_session, fixed_testimony, long_testimony, quiet
from tui.app import DetektivApp
from tui.screens.providers import ProvidersScreen

SIZE = (110, 32)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()




def make_app(home: Path, sessions: int = 3) -> DetektivApp:
    (home / "config.toml").write_text(
        '[providers.cloud]\nkind = "openai"\nmodel = "gpt-4o"\napi_key_env = "X_KEY"\n'
        'priority = 1\n\n[providers.spare]\nkind = "openai"\nmodel = "m"\n'
        'base_url = "http://127.0.0.1:9/v1"\npriority = 2\nenabled = false\n')
    for n in range(sessions):
        fixed_session(home / "data" / "sessions", n, "completed" if n else "failed")
    paths = Paths.from_env()
    return DetektivApp(paths, load_config(paths))


def test_sessions_tab(home: Path, snap_compare: Any) -> None:
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=settle)


async def open_newest(pilot: Any) -> None:
    """Open the newest session in the Live tab and wait for its replay to end."""
    await settle(pilot)
    await pilot.press("o")
    app = pilot.app
    deadline = time.monotonic() + 30  # the replay is done when the status says how it ended
    while not app.live.status_text.startswith("completed"):
        assert time.monotonic() < deadline, app.live.status_text
        await pilot.pause(0.05)
    app.clear_notifications()
    app.live.query_one("#transcript").focus()
    await pilot.pause()


def test_live_tab(home: Path, snap_compare: Any) -> None:
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=open_newest)


TAB_KEYS = {"sessions": "1", "live": "2", "oracles": "3", "cache": "4", "providers": "5"}


@pytest.mark.parametrize("width", [80, 100, 160])
@pytest.mark.parametrize("tab", list(TAB_KEYS))
def test_every_tab_with_a_testimony(home: Path, snap_compare: Any,
                                    monkeypatch: pytest.MonkeyPatch, tab: str,
                                    width: int) -> None:
    """Every tab with the Vitamin B3 testimony of 17 claims open (in Live: a line each above
    its paragraph with each claim's sentence marked), at 80, 100 and 160 columns: what does
    not fit is dropped or ellipsised, never a label, a key or a number cut
    (tests/tui/test_app_widths.py reads the same screens for it)."""
    monkeypatch.setattr(ProvidersScreen, "AUTO_CHECK", False)
    app = make_app(home, sessions=0)
    long_testimony(home / "data" / "sessions")

    async def shown(pilot: Any) -> None:
        await open_newest(pilot)
        await pilot.press(TAB_KEYS[tab])
        await quiet(pilot, lambda: pilot.app.current_mode == tab)

    assert snap_compare(app, terminal_size=(width, 40), run_before=shown)


def test_live_tab_claim_open(home: Path, snap_compare: Any) -> None:
    """A claim's rounds in a pane of their own, in the paragraph's place (`]`, then `]`)."""
    app = make_app(home, sessions=0)
    fixed_testimony(home / "data" / "sessions")

    async def opened(pilot: Any) -> None:
        await open_newest(pilot)
        await pilot.press("]", "]", "]")
        await quiet(pilot, lambda: pilot.app.live.query_one("#claim-rounds").display)

    assert snap_compare(app, terminal_size=(100, 36), run_before=opened)


LONG_ANSWER = ("At the harbour, as far as I know: the shipment was loaded at 03:10 by the night "
               "crew, checked against the manifest twice, and left at dawn with the tide. ") * 3


def second_run() -> list[Any]:
    """A second run's events, with answers long enough to fill the transcript."""
    from engine.models.events import (
        AnswerDelta,
        Phase,
        ProviderChosen,
        QuestionDelta,
        Started,
    )

    events: list[Any] = [Started(session_id="f" * 32, hypothesis="The ship left at dawn.",
                                 iteration_limit=4)]
    for n in (1, 2, 3):
        events += [Phase(phase="question", sequence=n),
                   ProviderChosen(role="detective", provider="cloud:gpt-4o"),
                   QuestionDelta(sequence=n, text=f"When did the ship leave ({n})?"),
                   Phase(phase="answer", sequence=n),
                   ProviderChosen(role="witness", provider="local:gemma-3-270m"),
                   AnswerDelta(sequence=n, text=LONG_ANSWER + f"Round {n} ends here."),
                   Phase(phase="analysis", sequence=n)]
    return events


@pytest.mark.parametrize("width", [80, 160])
def test_live_tab_transcript(home: Path, snap_compare: Any, width: int) -> None:
    """A finished session, then a second run in the same tab: the transcript follows the new
    run to its end, its wrapped lines whole beside the scrollbar, at 80 columns as at 160."""
    async def then_a_second_run(pilot: Any) -> None:
        from engine import Narration
        from tui.widgets.transcript import TranscriptView

        await open_newest(pilot)
        live = pilot.app.live
        await pilot.press("left_square_bracket")  # an answer selected: following stops
        view = live.query_one(TranscriptView)
        view.clear()  # what a new run does (`run_interrogation`)
        live.narration = Narration()
        for event in second_run():
            live.show(event)
        await pilot.pause()
        view.focus()
        await pilot.pause()

    assert snap_compare(make_app(home), terminal_size=(width, 32),
                        run_before=then_a_second_run)


def test_live_tab_resumed(home: Path, snap_compare: Any) -> None:
    """A session resumed after its first round: the rounds before stay above the resume."""
    from engine.models.events import (
        AnswerDelta,
        Finished,
        Phase,
        ProviderChosen,
        QuestionDelta,
        Started,
        TrailAdded,
    )
    from engine.models.trail import AuditTrailEntry
    from engine.storage.eventlog import EventLogWriter

    app = make_app(home, sessions=0)
    session = fixed_session(home / "data" / "sessions", 1, "cancelled")
    folder = next((home / "data" / "sessions").iterdir())
    log = EventLogWriter(folder / "events.jsonl", next_n=session.events_recorded + 1,
                         clock=lambda: 1000.0)
    for event in (
        Started(session_id=str(session.id), hypothesis=session.name, iteration_limit=8,
                resumed_after=1),
        TrailAdded(entry=AuditTrailEntry(event="resumed", timestamp=START,
                                         reason="resumed after round 1 (was cancelled)")),
        Phase(phase="question", sequence=2),
        ProviderChosen(role="detective", provider="cloud:gpt-4o"),
        QuestionDelta(sequence=2, text="Who signed the manifest at the harbour?"),
        Phase(phase="answer", sequence=2),
        ProviderChosen(role="witness", provider="local:gemma-3-270m"),
        AnswerDelta(sequence=2, text="The harbour master, at 03:05."),
        Phase(phase="analysis", sequence=2),
        Finished(status="cancelled"),
    ):
        log.append(event)
    log.close()

    async def opened(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("o")
        deadline = time.monotonic() + 30
        while not pilot.app.live.status_text.startswith("cancelled"):
            assert time.monotonic() < deadline, pilot.app.live.status_text
            await pilot.pause(0.05)
        pilot.app.clear_notifications()
        pilot.app.live.query_one("#transcript").focus()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(110, 40), run_before=opened)


def test_providers_tab(home: Path, snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ProvidersScreen, "AUTO_CHECK", False)

    async def providers(pilot: Any) -> None:
        await pilot.press("5")
        await quiet(pilot, lambda: pilot.app.current_mode == "providers")

    assert snap_compare(make_app(home, sessions=0), terminal_size=SIZE, run_before=providers)


def test_cache_tab(home: Path, snap_compare: Any) -> None:
    """An empty cache: what the tab says, and its keys."""

    async def cache(pilot: Any) -> None:
        await pilot.press("4")
        await quiet(pilot, lambda: pilot.app.current_mode == "cache" and "entries" in str(
            pilot.app.screen.query_one("#cache-stats").content))

    assert snap_compare(make_app(home, sessions=0), terminal_size=SIZE, run_before=cache)


def test_oracles_tab(home: Path, snap_compare: Any) -> None:
    """A case with a note and one consultation, its history shown."""
    from engine.models.notes import ContextSnapshot, LlmEntry, NoteEntry

    app = make_app(home, sessions=0)
    session = fixed_session(home / "data" / "sessions", 0)
    folder = next((home / "data" / "sessions").glob(f"*_{session.short_id}"))
    (folder / "transcripts").mkdir()
    (folder / "transcripts" / "001_call.txt").write_text("[0:01] Alice: The shipment left.\n")
    (folder / "llm_responses").mkdir()
    (folder / "llm_responses" / "001_sceptic.txt").write_text(
        "**Verdict**: the dates stay vague.\n\n1. Who saw it leave?\n")
    session.notes = [NoteEntry(sequence=1, received_at=START, filename="001_call.txt",
                               kind="imported", source="call.vtt", characters=33)]
    session.llm_entries = [LlmEntry(
        sequence=1, created_at=START, oracle_name="Sceptic", oracle_id="0a1b2c3d",
        response_filename="001_sceptic.txt", provider_used="cloud:gpt-4o",
        context_snapshot=ContextSnapshot(transcript_count=1, llm_response_count=0,
                                         include_llm_history=True, total_tokens_estimate=412,
                                         qa_count=1, audit_included=True, window=128000))]
    (folder / "metadata.json").write_text(session.model_dump_json())

    async def history(pilot: Any) -> None:
        pilot.app.current_session = folder.name
        await pilot.press("3")
        await quiet(pilot, lambda: pilot.app.current_mode == "oracles")
        await pilot.press("h")

        def shown() -> bool:
            screen = pilot.app.screen
            return screen.query_one("#oracle-views").current == "history" and \
                "Sceptic" in screen.query_one("#history").plain_text()

        await quiet(pilot, shown)

    assert snap_compare(app, terminal_size=SIZE, run_before=history)


async def settle(pilot: Any) -> None:
    """The sessions' rows in, the whole list read, their columns sized."""
    def listed() -> bool:
        tables = pilot.app.screen.query("DataTable")
        return bool(tables) and tables.first().row_count > 0 and \
            not getattr(pilot.app.screen, "partial", False)

    await quiet(pilot, listed)


def test_oracles_tab_case_agent(home: Path, snap_compare: Any) -> None:
    """The case agent after a two-turn run on a scripted model: the conversation with its
    tool lines, the signals, the tree's node and the stop with its evidence."""
    from tests.support.scripted import ScriptedModel

    for n in range(3):
        fixed_session(home / "data" / "sessions", n)

    def script(messages: list[dict[str, Any]]) -> str:
        if not any(m["role"] == "assistant" for m in messages):
            return ('I will read the newest one.\n<tool name="read_session">last</tool>\n'
                    '<signal type="need_turn" confidence="0.7"><reason>read the newest '
                    "session</reason></signal>")
        return ("All three sessions place the shipment at the **harbour**.\n"
                '<signal type="context_sufficient" confidence="0.9"><sources_found>3'
                "</sources_found><source_types>sessions</source_types></signal>")

    with ScriptedModel(script) as model:
        (home / "config.toml").write_text(
            f'[providers.scripted]\nkind = "openai"\nmodel = "m"\nbase_url = "{model.url}/v1"\n')
        paths = Paths.from_env()
        app = DetektivApp(paths, load_config(paths))

        async def agent(pilot: Any) -> None:
            await pilot.press("3", "g")
            await pilot.press(*"Which sessions mention the harbour?", "enter")
            await quiet(pilot, lambda: pilot.app.screen.query_one("#agent").stop is not None)
            pilot.app.clear_notifications()
            for field in pilot.app.screen.query(Input):  # a blinking cursor is a coin toss
                field.cursor_blink = False
            await quiet(pilot)

        assert snap_compare(app, terminal_size=(130, 36), run_before=agent)


def fixed_comparison(home: Path) -> None:
    """Three witnesses compared on 40 fixed claims (results written, no model)."""
    from datetime import UTC, datetime

    from engine.evals.folder import EvalResult, EvalRunInfo, RunFolder

    when = datetime(2026, 11, 1, 9, 30, tzinfo=UTC)
    right = {"qwen-1.5b": 34, "qwen-0.5b": 27, "smollm2": 21}  # items judged right of 40
    for number, (name, correct) in enumerate(right.items()):
        folder = RunFolder(home / "data" / "evals" / f"run{number}")
        folder.open()
        folder.save_info(EvalRunInfo(
            id=f"run{number}", dataset="demo", dataset_file="demo", checksum="0", n=40,
            mode="open", witness=[name], witness_label=f"{name}:{name}-q4",
            detective_label="judge:qwen-1.5b", comparison="c0ffee1234", items=40,
            created=when.replace(minute=number), updated=when.replace(minute=number)))
        for index in range(40):
            label = index % 2 == 0
            ok = index < correct
            verdict = ("true" if label else "false") if ok else ("false" if label else "true")
            p = (0.1 if verdict == "true" else 0.9) + (index % 5) / 100
            folder.add_result(EvalResult(item=f"i{index}", label=label, claim=f"c{index}",
                                         status="completed", verdict=verdict,  # type: ignore
                                         probability_false=p))


def test_evaluations_witness_comparison(home: Path, snap_compare: Any) -> None:
    """A comparison of three witnesses: one row among the runs; its leaderboard, best first,
    with the paired differences (Holm-corrected) under it."""
    from textual.widgets import DataTable

    from tui.screens.evals import EvalsScreen

    app = make_app(home, sessions=0)
    fixed_comparison(home)

    async def open_board(pilot: Any) -> None:
        await pilot.pause()
        await pilot.press("v")

        def shown() -> bool:
            screen = pilot.app.screen
            return isinstance(screen, EvalsScreen) and screen.board is not None and \
                screen.query_one("#eval-figures", DataTable).row_count == 3
        await quiet(pilot, shown)

    assert snap_compare(app, terminal_size=(130, 40), run_before=open_board)
