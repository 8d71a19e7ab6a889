"""The app, driven with Pilot against the real local server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, TextArea

from engine import Paths, cost_badge
from engine.storage.sessions import SessionStore
from tests.support.app import app_for, config_text, finished, until
from tests.support.factory import recorded_session, stored_session
from tests.support.faults import FaultProxy
from tests.support.servers import ROOT, LlamaServer, cli, closed_port
from tui.app import DetektivApp, build_app
from tui.screens.dialogs import ConfirmDialog, HelpScreen
from tui.widgets.transcript import TranscriptView


async def start(pilot: Pilot[int], app: DetektivApp, hypothesis: str) -> None:
    await pilot.press("2")
    app.live.focus_form()
    await pilot.press(*hypothesis, "enter")


async def test_an_interrogation_streams_live_and_completes(
    home: Path, llama_server: LlamaServer, sleuth: str
) -> None:
    app = app_for(home, config_text({"llama": llama_server.url, "sleuth": sleuth}, ["sleuth"],
                                    ["llama"]))
    async with app.run_test(size=(120, 40)) as pilot:
        await start(pilot, app, "Tea contains caffeine")
        view = app.live.query_one(TranscriptView)
        # text shows while the answer is still being written
        await until(pilot, lambda: any(b.kind == "answer" for b in view.blocks)
                    and bool(view.live_text or view.blocks[-1].text) and not finished(app))
        await until(pilot, lambda: finished(app))
        assert app.live.status_text.startswith("completed: a decisive judgement settled it")
        kinds = [b.kind for b in view.blocks]
        assert kinds[:2] == ["heading", "heading"] and "question" in kinds
        assert "analysis" in kinds and kinds[-3:] == ["audit", "audit", "note"]
        judged = [b for b in view.blocks if b.title.startswith("Judgement")]
        assert len(judged) == 3 and "p(true) 0.95" in judged[0].text
        assert view.blocks[-1].text.startswith("Session ")  # the CLI's closing words
        badge = app.live.query_one("#witness-badge").render()
        assert str(badge) == "witness: llama:gemma"
        assert "consistency" in str(app.live.query_one("#audit").render())
        verdict = app.live.query_one("#verdict-badge")
        assert str(verdict.render()) == "verdict: true (p 0.05)"
        assert verdict.has_class("verdict-true")
        # the cost badge: both models are on this machine, so free; the scripted detective
        # reports no usage, so its tokens are estimated (`~`)
        session = app.workspace.store.load(app.workspace.store.list()[0].id)
        cost = str(app.live.query_one("#cost-badge").render())
        assert cost == cost_badge(session.tokens) and session.tokens.total > 0
        assert cost.startswith("cost: $0.00 · ~")
        await pilot.press("1")
        await until(pilot, lambda: bool(app.screen.query_one(DataTable).row_count))
        assert app.internal_errors == []


async def test_attach_to_a_run_started_by_the_cli(home: Path, llama_server: LlamaServer,
                                                 sleuth: str) -> None:
    app = app_for(home, config_text({"llama": llama_server.url, "sleuth": sleuth}, ["sleuth"],
                                    ["llama"]))
    run = subprocess.Popen(cli("run", "Cats are mammals", "--limit", "5", "--json"),
                           stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert run.stdout is not None
        first = json.loads(run.stdout.readline())
        assert first["type"] == "started"
        async with app.run_test(size=(120, 40)) as pilot:
            table = app.screen.query_one(DataTable)
            await until(pilot, lambda: table.row_count == 1)
            assert app.screen.rows[0].status == "running"  # type: ignore[attr-defined]
            await pilot.press("enter")
            await until(pilot, lambda: app.current_mode == "live")
            await until(pilot, lambda: app.live.status_text.startswith("following")
                        or finished(app))
            await until(pilot, lambda: finished(app))
            view = app.live.query_one(TranscriptView)
            session = app.workspace.store.load(first["session_id"])
            for pair in session.qa_pairs:
                assert pair.question.strip().splitlines()[0] in view.plain_text()
            # followed live, so its end is announced
            assert any(m.startswith(f"Session {session.short_id} ") for _, m in app.notices)
        assert run.wait(timeout=60) == 0
    finally:
        run.kill()
        run.wait()
        if run.stdout is not None:
            run.stdout.close()


async def test_failover_changes_the_badge_and_says_so(
    home: Path, llama_server: LlamaServer, sleuth: str
) -> None:
    proxy = FaultProxy(sleuth.removesuffix("/v1"))  # in front of the scripted detective
    await proxy.start()
    app = app_for(home, config_text({"flaky": proxy.url, "steady": sleuth,
                                     "llama": llama_server.url},
                                    ["flaky", "steady"], ["llama"]))
    proxy.plan = ["pass", "cut:2"]  # the detective's own reading first, then its question
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await start(pilot, app, "Iron rusts")
            await until(pilot, lambda: finished(app))
            view = app.live.query_one(TranscriptView)
            notes = app.notices
            # the badge followed the switch (and the notification says so); later calls go
            # back to flaky, first in the chain, which answers again
            assert ("Provider switch", "detective: flaky:gemma → steady:gemma") in notes
            question = next(b for b in view.blocks if b.kind == "question")
            assert question.title == "Question · steady:gemma"
            assert any(title == "Partial answer discarded" for title, _ in notes)
            discarded = [b for b in view.blocks if b.kind == "discarded"]
            assert discarded and "discarded" in discarded[0].title
            assert app.internal_errors == []
    finally:
        await proxy.stop()


async def test_stop_then_resume(home: Path, llama_server: LlamaServer, sleuth: str) -> None:
    app = app_for(home, config_text({"llama": llama_server.url, "sleuth": sleuth}, ["sleuth"],
                                    ["llama"]))
    async with app.run_test(size=(120, 40)) as pilot:
        await start(pilot, app, "Glass is a liquid")
        view = app.live.query_one(TranscriptView)
        await until(pilot, lambda: any(b.kind == "answer" for b in view.blocks))
        app.live.query_one(TranscriptView).focus()
        await pilot.press("escape")
        await until(pilot, lambda: app.live.status_text == "cancelled")
        assert await llama_server.wait_idle(timeout=1.5) < 1.5
        (row,) = app.workspace.store.list()
        assert row.status == "cancelled"
        await pilot.press("ctrl+r")
        await until(pilot, lambda: app.live.status_text.startswith(("completed",
                                                                     "limit-reached")))
        session = app.workspace.store.load(row.dir)
        assert [t.event for t in session.audit_trail].count("resumed") == 1
        assert app.internal_errors == []


async def test_theme_switch_is_remembered(home: Path) -> None:
    app = app_for(home)
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "detektiv-dark"
        await pilot.press("ctrl+t")
        assert app.theme == "detektiv-light"
    assert 'theme = "detektiv-light"' in (home / "config.toml").read_text()
    again = app_for(home, (home / "config.toml").read_text())
    async with again.run_test(size=(100, 30)) as pilot:
        assert again.theme == "detektiv-light"
        # the theme the app starts with is applied whole, as a switch applies it
        started = _looks(again)
        assert "-light-mode" in again.classes and "-dark-mode" not in again.classes
        await pilot.press("ctrl+t", "ctrl+t")
        await pilot.pause()
        assert again.theme == "detektiv-light" and _looks(again) == started


def _looks(app: Any) -> tuple[object, ...]:
    """What a theme decides of the screen: its colours, the table's, the stylesheet's
    variables."""
    table = app.screen.query_one("DataTable")
    return (app.screen.styles.background, app.screen.styles.color, table.styles.background,
            table.rich_style, tuple(sorted(app.stylesheet._variables.items())))


async def test_delete_asks_first(home: Path) -> None:
    app = app_for(home)
    keep = stored_session(app.workspace.store, "keep me")
    gone = stored_session(app.workspace.store, "delete me")
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 2)
        await pilot.press("d")  # the newest, "delete me", is selected first
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("n")
        assert table.row_count == 2 and (app.workspace.store.root / gone).exists()
        await pilot.press("d", "y")
        await until(pilot, lambda: table.row_count == 1)
        root = app.workspace.store.root
        assert not (root / gone).exists() and (root / keep).exists()


async def test_filter_as_you_type(home: Path) -> None:
    app = app_for(home)
    for text in ("apples are red", "bananas are yellow", "cherries are red"):
        stored_session(app.workspace.store, text)
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 3)
        await pilot.press("slash", *"red")
        assert table.row_count == 2
        await pilot.press("backspace", "backspace", "backspace", *"yel")
        assert table.row_count == 1


async def test_keymap_help_and_palette_list_every_action(home: Path) -> None:
    app = app_for(home, '[keymap]\ntab-providers = "f9"\n')
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("f2")
        app.live.focus_form()
        await pilot.press(*"2 + 3?")  # digits typed in a field are text, not tab switches
        assert app.current_mode == "live"
        assert app.live.query_one("#hypothesis", TextArea).text == "2 + 3?"
        await pilot.press("f9")
        assert app.current_mode == "providers"
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        ids = {row[2] for row in app.screen.rows}
        assert {"toggle-provider", "check-health", "tab-live", "help", "quit"} <= ids
        assert ("f9", "Providers", "tab-providers") in app.screen.rows
        await pilot.press("escape")
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"On/off", "Check", "Pull Ollama model", "Go to Live", "Help",
                "Theme"} <= titles


async def test_a_dead_backend_fails_the_run_not_the_app(home: Path) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    app = app_for(home, config_text({"dead": dead}, ["dead"], ["dead"]))
    async with app.run_test(size=(120, 40)) as pilot:
        await start(pilot, app, "Anything")
        await until(pilot, lambda: finished(app))
        assert app.live.status_text.startswith("failed: every provider for detective failed")
        assert app.is_running and app.internal_errors == []
        assert any("every provider" in message for _, message in app.notices)


async def test_a_status_too_long_for_its_line_ends_in_an_ellipsis(home: Path) -> None:
    """At 130 columns a failure's status does not fit: it is one line ending in "…" (not cut
    mid-sentence by wrapping out of sight), and the whole line is in the transcript."""
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    app = app_for(home, config_text({"dead": dead}, ["dead"], ["dead"]))
    async with app.run_test(size=(130, 40)) as pilot:
        await start(pilot, app, "Anything")
        await until(pilot, lambda: finished(app))
        status = app.live.query_one("#status")
        whole = app.live.status_text
        assert len(whole) > status.size.width > 0
        shown = status.render_line(0).text.rstrip()
        assert shown.endswith("…") and whole.startswith(shown[:-1].rstrip())
        assert status.render_line(1).text.strip() == ""  # nothing wrapped below
        reason = whole.removeprefix("failed: ")
        view = app.live.query_one(TranscriptView)
        assert any(reason in block.text for block in view.blocks)


def test_first_frame_imports_no_provider_sdk(home: Path) -> None:
    for i in range(3):
        stored_session(SessionStore.of(Paths.at(home)), f"h{i}")
    (home / "config.toml").write_text(
        '[providers.cloud]\nkind = "openai"\nmodel = "gpt-4o"\napi_key_env = "X_KEY"\n')
    script = """
import asyncio, sys
from engine import Paths, load_config
from tui.app import DetektivApp, build_app

async def main():
    paths = Paths.from_env()
    app = DetektivApp(paths, load_config(paths))
    async with app.run_test() as pilot:
        table = app.screen.query_one("DataTable")
        for _ in range(2400):  # until the rows are in (two minutes at most)
            if table.row_count:
                break
            await pilot.pause(0.05)
        print(table.row_count)
    print(sorted({m.split(".")[0] for m in sys.modules} & {"openai", "anthropic", "ollama",
                                                          "xllamacpp", "jsonschema"}))
asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert out == ["3", "[]"]


async def test_the_config_is_validated_right_after_the_first_frame(home: Path) -> None:
    (home / "config.toml").write_text('[ui]\ntheme = "detektiv-light"\n[keymap]\nhelp = "f8"\n')
    app = build_app(Paths.from_env())
    assert not app.workspace.config_loaded  # nothing validated before the screen
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "detektiv-light"  # from the TOML preview
        await until(pilot, lambda: app.workspace.config_loaded, timeout=10)
        assert app.config.ui.theme == "detektiv-light"
        await pilot.press("f8")
        assert isinstance(app.screen, HelpScreen)
    (home / "config.toml").write_text('[interrogation]\niteration_limit = 99\n')
    broken = build_app(Paths.from_env())
    async with broken.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: not broken.is_running, timeout=10)
    assert broken.return_code == 2
    assert broken.config_error is not None
    assert "interrogation.iteration_limit" in broken.config_error


async def test_a_cut_off_answer_is_marked_in_the_live_view(home: Path) -> None:
    from engine.models.events import (
        AnswerCutOff,
        AnswerDelta,
        Phase,
        ProviderChosen,
    )
    from engine.models.session import (
        ANSWER_CUT_OFF,
        GapAnalysis,
        ProvidersUsed,
        QuestionAnswerPair,
    )

    app = app_for(home)
    pair = QuestionAnswerPair(
        sequence=1, question="When?", answer="It was built in", answer_cut_off=True,
        gap_analysis=GapAnalysis(completeness_score=20, requires_follow_up=True),
        provider_used=ProvidersUsed(detective="d:m", witness="w:m"),
    )
    recorded_session(app.workspace.store, [
        Phase(phase="answer", sequence=1), ProviderChosen(role="witness", provider="w:m"),
        AnswerDelta(sequence=1, text="It was built in"),
        AnswerCutOff(sequence=1, provider="w:m"),
    ], [pair], "The bridge is old")
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 1)
        await pilot.press("o")
        await until(pilot, lambda: app.live.status_text.startswith("cancelled"))
        text = app.live.query_one(TranscriptView).plain_text()
        assert "It was built in" in text
        assert text.count(ANSWER_CUT_OFF) == 1
        assert text.index("It was built in") < text.index(ANSWER_CUT_OFF)


async def test_a_trimmed_prompt_is_noted_in_the_live_view(home: Path) -> None:
    from engine.models.events import ContextFitted, Phase, ProviderChosen
    from engine.models.trail import ContextFit

    app = app_for(home)
    base = ContextFit(role="detective", sequence=4, provider="d:m", used=900, window=1024,
                      window_source="server", counted="exact", reply=100)
    recorded_session(app.workspace.store, [
        Phase(phase="question", sequence=4), ProviderChosen(role="detective", provider="d:m"),
        ContextFitted(fit=base),  # nothing trimmed: no line
        ContextFitted(fit=base.model_copy(update={"digested": [2], "used": 1000})),
    ], hypothesis="The bridge is old")
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 1)
        await pilot.press("o")
        await until(pilot, lambda: app.live.status_text.startswith("cancelled"))
        text = app.live.query_one(TranscriptView).plain_text()
        assert text.count("context (detective, d:m)") == 1
        assert "1000/1024 tokens, counted exactly · round 2 digested" in text


async def test_the_live_form_runs_the_consistency_protocol(
    home: Path, llama_server: LlamaServer, sleuth: str
) -> None:
    """Chosen in the form with the keyboard: each question goes to the witness three times,
    and the transcript shows every answer."""
    from textual.widgets import Select

    app = app_for(home, config_text({"llama": llama_server.url, "sleuth": sleuth}, ["sleuth"],
                                    ["llama"]))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("2")
        protocol = app.live.query_one("#protocol", Select)
        assert protocol.value == "cross-exam"
        protocol.focus()
        await pilot.press("enter", "down", "enter")  # open, the next choice, take it
        await until(pilot, lambda: protocol.value == "consistency")
        app.live.focus_form()
        await pilot.press(*"Tea contains caffeine", "enter")
        view = app.live.query_one(TranscriptView)
        await until(pilot, lambda: finished(app))
        titles = [b.title for b in view.blocks if b.kind == "answer"]
        session = app.workspace.store.load(app.workspace.store.list()[0].id)
        assert session.protocol == "consistency" and session.qa_pairs
        assert all(len(pair.samples) == 2 for pair in session.qa_pairs)
        for number in (2, 3):
            assert sum(t.startswith(f"Answer {number} of 3 · ") for t in titles) == \
                len(session.qa_pairs)
        assert app.internal_errors == []


async def test_the_live_view_shows_a_model_s_reasoning_dimmed_and_r_expands_it(
        home: Path) -> None:
    """Reasoning streams into its own panel, never into the transcript: its last lines by
    default, all of it after `r`, a new call's reasoning replacing the last."""
    from textual.widgets import Static

    from engine.models.events import (
        AnswerDelta,
        Phase,
        ProviderChosen,
        QuestionDelta,
        Reasoning,
    )

    app = app_for(home)
    thought = "".join(f"step {n} of the plan\n" for n in range(1, 9))
    recorded_session(app.workspace.store, [
        Phase(phase="question", sequence=1), ProviderChosen(role="detective", provider="d:m"),
        Reasoning(role="detective", phase="question", sequence=1, text=thought[:30]),
        Reasoning(role="detective", phase="question", sequence=1, text=thought[30:]),
        QuestionDelta(sequence=1, text="When was it built?"),
        Phase(phase="answer", sequence=1), ProviderChosen(role="witness", provider="w:m"),
        AnswerDelta(sequence=1, text="In 1890."),
    ], hypothesis="The bridge is old")
    async with app.run_test(size=(140, 40)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 1)
        await pilot.press("o")
        await until(pilot, lambda: app.live.status_text.startswith("cancelled"))
        transcript = app.live.query_one(TranscriptView).plain_text()
        assert "When was it built?" in transcript and "step 1" not in transcript
        panel = app.live.query_one("#reasoning", Static)
        heading = app.live.query_one("#reasoning-heading", Static)
        assert panel.display and "Reasoning · detective (question 1)" in str(heading.content)
        shown = str(panel.content)
        assert "step 8 of the plan" in shown and "step 5" in shown and "step 4" not in shown
        app.live.query_one(TranscriptView).focus()
        await pilot.press("r")
        await until(pilot, lambda: "step 1 of the plan" in str(panel.content))
        await pilot.press("r")
        await until(pilot, lambda: "step 1 of the plan" not in str(panel.content))
        assert app.internal_errors == []


async def test_the_sessions_tab_shows_the_newest_rows_before_the_whole_list(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a store too big to list at once (here: listing held until the test lets it go),
    the first frame has the newest sessions from the index's tail, says the rest is coming,
    then shows every session."""
    import threading

    from textual.widgets import Static

    from engine.storage import index
    from tests.support.factory import stored_session

    paths = Paths.from_env()
    store = SessionStore.of(paths)
    for n in range(20):
        stored_session(store, f"hypothesis {n}")
    monkeypatch.setattr(index, "TAIL_BYTES", 3000)  # the tail holds a few rows only
    release = threading.Event()
    listing = SessionStore.list

    def slow_list(self: SessionStore) -> list[Any]:
        assert release.wait(60)
        return listing(self)

    monkeypatch.setattr(SessionStore, "list", slow_list)
    app = build_app(paths)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one(DataTable)
        status = app.screen.query_one("#sessions-status", Static)
        assert table.row_count > 0  # in the first frame: read as the tab mounts, no waiting
        assert table.row_count < 20 and "reading the rest" in str(status.render())
        assert table.get_row_at(0)[6].plain == "hypothesis 19"  # the newest first
        release.set()
        await until(pilot, lambda: table.row_count == 20)
        assert str(status.render()).startswith("20 sessions")
        assert not app.internal_errors


async def test_a_witness_that_thinks_inside_a_template_opened_block_answers_cleanly(
        home: Path, sleuth: str) -> None:
    """DeepSeek-R1 behind a server without a reasoning parser: each reply streams its
    thinking, `</think>`, the answer. The thinking goes to the reasoning panel, the answer
    alone to the transcript and the session, and no alarm is raised for it."""
    from textual.widgets import Static

    from tests.support.scripted import OPENED, ScriptedModel

    reply = "<think>Is it 1989 or 1991? Say 1991 to be safe.</think>\n\nIt fell in 1989."
    with ScriptedModel(lambda _: reply, reasoning_field=OPENED, pace=0.005) as r1:
        app = app_for(home, config_text({"sleuth": sleuth, "r1": r1.url + "/v1"}, ["sleuth"],
                                        ["r1"]))
        async with app.run_test(size=(140, 40)) as pilot:
            await start(pilot, app, "The Berlin Wall fell in 1989")
            await until(pilot, lambda: finished(app))
            view = app.live.query_one(TranscriptView)
            answers = [b.text.strip() for b in view.blocks if b.kind == "answer"]
            assert answers and all(a == "It fell in 1989." for a in answers)
            voided = [b for b in view.blocks if b.kind == "discarded"]
            assert voided and all("thinking" in b.title for b in voided)
            heading = str(app.live.query_one("#reasoning-heading", Static).content)
            assert "Reasoning · witness" in heading
            assert "Say 1991" in str(app.live.query_one("#reasoning", Static).content)
            assert not any(title == "Partial answer discarded" for title, _ in app.notices)
            session = app.workspace.store.load(app.live.narration.session_id)
            assert session.qa_pairs and all(p.answer.strip() == "It fell in 1989."
                                            for p in session.qa_pairs)
            assert app.internal_errors == []
