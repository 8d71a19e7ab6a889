"""The Providers tab and copying, driven with Pilot: a real server, a dead one, and a loopback
server speaking Ollama's API for the model list and a pull."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable, ProgressBar, Static

from engine import Paths, load_config
from tests.support.app import app_for, fixed_session, until
from tests.support.servers import LlamaServer, closed_port
from tests.support.wire import Reply, WireServer, json_reply
from tui.app import DetektivApp
from tui.screens.dialogs import PromptDialog
from tui.widgets.table import Table
from tui.widgets.transcript import TranscriptView


def cell(table: DataTable[object], row: int, column: int) -> str:
    """Row `row`'s cell of `ProvidersScreen.COLUMNS[column]` (a narrow table drops some)."""
    if isinstance(table, Table):
        shown = [index for index, _ in table._layout]
        return str(table.get_row_at(row)[shown.index(column)])
    return str(table.get_row_at(row)[column])


async def test_health_enable_and_priority(home: Path, llama_server: LlamaServer) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    app = app_for(home, (
        f'[providers.srv]\nkind = "openai"\nmodel = "gemma"\nbase_url = "{llama_server.url}"\n'
        f'priority = 1\n\n[providers.dead]\nkind = "openai"\nmodel = "m"\n'
        f'base_url = "{dead}"\npriority = 2\n'))
    async with app.run_test(size=(220, 30)) as pilot:  # wide: every column shows
        await pilot.press("5")
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 3 and cell(table, 0, 9) != "never"
                    and cell(table, 1, 9) != "never", timeout=30)
        assert [cell(table, i, 0) for i in range(3)] == ["srv", "dead", "local"]
        assert cell(table, 0, 5) == "available" and cell(table, 0, 10).endswith(" ms")
        # health and what the check asked: llama.cpp is the model's own server
        assert (cell(table, 0, 6), cell(table, 0, 7)) == ("ok", "server")
        assert (cell(table, 1, 6), cell(table, 1, 7)) == ("down", "list")
        assert cell(table, 1, 5) in ("unavailable", "degraded")
        assert "refused" in cell(table, 1, 12).lower() or "connect" in cell(table, 1, 12).lower()
        # the window of each provider that answered, and where it came from
        await until(pilot, lambda: cell(table, 0, 11) != "–", timeout=30)
        assert cell(table, 0, 11).endswith("(llama.cpp's /props)")
        assert cell(table, 1, 11) == "–"
        # move `dead` before `srv`, then disable it: both land in the config file
        table.move_cursor(row=1)
        await pilot.press("plus")
        assert [cell(table, i, 0) for i in range(2)] == ["dead", "srv"]
        await pilot.press("space")
        config = load_config(Paths.from_env())
        assert config.providers["dead"].priority == 1 and config.providers["srv"].priority == 2
        assert config.providers["dead"].enabled is False
        assert cell(table, 0, 4) == "no"
        assert app.internal_errors == []


async def progress_until(pilot: Pilot[int], app: DetektivApp, notice: str) -> set[float]:
    """The values the pull bar showed until `notice` came; the bar is hidden again then."""
    bar = app.screen.query_one("#pull-progress", ProgressBar)
    seen: set[float] = set()
    deadline = time.monotonic() + 60
    while ("", notice) not in app.notices and time.monotonic() < deadline:
        if bar.display and bar.progress:
            seen.add(bar.progress)
        await pilot.pause(0.01)
    assert ("", notice) in app.notices, app.notices
    assert not bar.display
    return seen


def ollama_routes() -> dict[str, object]:
    def pull_body() -> Iterator[bytes]:
        yield b'{"status": "pulling manifest"}\n'
        for done in (0, 250, 500, 750, 1000):
            time.sleep(0.15)
            yield (json.dumps({"status": "pulling layer", "digest": "sha256:abc",
                               "total": 1000, "completed": done}) + "\n").encode()
        yield b'{"status": "success"}\n'

    tags = {"models": [{"name": n, "model": n, "modified_at": "2026-11-22T10:00:00Z",
                        "size": 1, "digest": "d", "details": {}}
                       for n in ("llama3.2:latest", "qwen3:4b")]}
    return {
        "GET /api/tags": lambda r: json_reply(tags),
        "GET /api/version": lambda r: json_reply({"version": "0.12.6"}),
        "POST /api/pull": lambda r: Reply(200, {"content-type": "application/x-ndjson"},
                                          pull_body()),
    }


async def test_ollama_models_and_pull_with_progress(home: Path) -> None:
    with WireServer(ollama_routes()) as server:  # type: ignore[arg-type]
        app = app_for(home, f'[providers.ollama]\nkind = "ollama"\nmodel = "llama3.2"\n'
                            f'base_url = "{server.url}"\npriority = 1\n')
        async with app.run_test(size=(140, 30)) as pilot:
            await pilot.press("5")
            table = app.screen.query_one(DataTable)
            await until(pilot, lambda: table.row_count == 2)
            await pilot.press("m")
            detail = app.screen.query_one("#provider-detail", Static)
            await until(pilot, lambda: "qwen3:4b" in str(detail.render()))
            assert "llama3.2:latest" in str(detail.render())
            await pilot.press("p")
            assert isinstance(app.screen, PromptDialog)
            await pilot.press(*"qwen3:4b", "enter")
            seen = await progress_until(pilot, app, "Pulled qwen3:4b.")
            assert len(seen) >= 2 and max(seen) <= 1000, seen  # the bar moved as bytes came
        pulls = [r for r in server.requests if r.path == "/api/pull"]
        assert [r.json()["model"] for r in pulls] == ["qwen3:4b"]


async def test_copy_the_selected_answer_or_the_whole_transcript(home: Path) -> None:
    fixed_session(home / "data" / "sessions", 0)
    paths = Paths.from_env()
    app = DetektivApp(paths, load_config(paths))
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 1)
        await pilot.press("o")
        view = app.live.query_one(TranscriptView)
        await until(pilot, lambda: app.live.status_text.startswith("failed")
                    or app.live.status_text.startswith("completed"))
        # opening an old session replays it without announcing its old news
        assert not [m for _, m in app.notices if m.startswith("Interrogation")]
        view.focus()
        await pilot.press("left_square_bracket", "c")
        answer = app.workspace.store.load(app.workspace.store.list()[0].dir).qa_pairs[0].answer
        assert app.clipboard == answer
        await pilot.press("C")
        assert "Where was the shipment on the third?" in app.clipboard
        assert answer.splitlines()[0] in app.clipboard and "Audit" in app.clipboard


async def test_a_gguf_model_is_pulled_from_the_providers_tab_with_a_progress_bar(
    home: Path, monkeypatch: object
) -> None:
    """The loopback hub serves the file in slow pieces; the bar moves; the model is listed."""
    import pytest

    from tests.support.hub import LoopbackHub, tiny_gguf

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    with LoopbackHub() as hub:
        hub.add("acme/Tiny-GGUF", "tiny.gguf", tiny_gguf(30_000_000))
        hub.pace = 0.05  # 1.5 s in all: the bar has time to move
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        app = app_for(home)
        async with app.run_test(size=(140, 30)) as pilot:
            await pilot.press("5")
            detail = app.screen.query_one("#provider-detail", Static)
            # the embedded detective is named for what it is, with what to do
            assert "small demonstration model" in str(detail.render())
            await pilot.press("P")
            assert isinstance(app.screen, PromptDialog)
            await pilot.press(*"acme/Tiny-GGUF tiny.gguf", "enter")
            seen = await progress_until(pilot, app, "pulled tiny: use it as local:tiny")
            assert len(seen) >= 2 and max(seen) <= 30_000_000 + 4096, seen
            await pilot.press("L")
            await until(pilot, lambda: "• tiny: pulled" in str(detail.render()))
            assert app.internal_errors == []
    assert (home / "data" / "models" / "tiny" / "manifest.json").is_file()
