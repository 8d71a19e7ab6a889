"""The app, driven with Pilot against the real local server."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Log, Static

from engine import Paths, load_config
from tests.conftest import LlamaServer, closed_port
from tui.app import DetektivApp


def app_for(home: Path, providers: str) -> DetektivApp:
    (home / "config.toml").write_text(providers)
    paths = Paths.from_env()
    return DetektivApp(paths, load_config(paths))


async def test_answer_streams_live_and_escape_stops_the_model(
    home: Path, llama_server: LlamaServer
) -> None:
    app = app_for(home, f'[providers.srv]\nkind = "openai"\nmodel = "gemma"\n'
                        f'base_url = "{llama_server.url}"\npriority = 1\n')
    async with app.run_test(size=(100, 30)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press(*"Tell a long story.", "enter")
        log = app.query_one("#answer", Log)
        for _ in range(600):  # tokens show up while the answer is still being written
            await pilot.pause(0.05)
            streamed = "\n".join(log.lines).split("> Tell a long story.", 1)[-1].strip()
            if len(streamed) > 20:
                break
        status = app.query_one("#status", Static)
        assert str(status.render()) == "srv:gemma is answering…"
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert str(status.render()) == "stopped"
        assert str(app.query_one("#provider", Static).render()) == "provider: srv:gemma"
        assert app.theme == "detektiv-dark"
    assert len(streamed) > 20
    assert llama_server.wait_idle(timeout=2.0) < 2.0, "Esc stops the model, not just the view"


async def test_a_dead_provider_falls_over_with_a_notification(
    home: Path, llama_server: LlamaServer
) -> None:
    app = app_for(home, f'[providers.dead]\nkind = "openai"\nmodel = "m"\n'
                        f'base_url = "http://127.0.0.1:{closed_port()}/v1"\npriority = 1\n'
                        f'[providers.srv]\nkind = "openai"\nmodel = "gemma"\n'
                        f'base_url = "{llama_server.url}"\npriority = 2\n')
    async with app.run_test(size=(100, 30)) as pilot:
        await app.workers.wait_for_complete()
        assert str(app.query_one("#provider", Static).render()) == "provider: dead:m"
        await pilot.press(*"Say hi.", "enter")
        for _ in range(600):
            await pilot.pause(0.05)
            if str(app.query_one("#provider", Static).render()) == "provider: srv:gemma":
                break
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        notes = [(n.title, n.message) for n in app._notifications]
    assert ("Provider switch", "dead failed; switched to srv") in notes


async def test_no_provider_left_is_a_notification_not_a_crash(home: Path) -> None:
    app = app_for(home, f'[providers.dead]\nkind = "openai"\nmodel = "m"\n'
                        f'base_url = "http://127.0.0.1:{closed_port()}/v1"\npriority = 1\n'
                        '[providers.local]\nkind = "local"\nmodel = "gemma-3-270m"\n'
                        'enabled = false\n')
    async with app.run_test(size=(100, 30)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press(*"hello", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        status = str(app.query_one("#status", Static).render())
        notes = [n.message for n in app._notifications]
        assert app.is_running
    assert status.startswith("failed: every provider for default failed — dead: Connection error")
    assert any(note.startswith("every provider for default failed — dead: ") for note in notes)


def test_first_frame_imports_no_provider_sdk(home: Path) -> None:
    import subprocess
    import sys

    (home / "config.toml").write_text(
        '[providers.cloud]\nkind = "openai"\nmodel = "gpt-4o"\napi_key_env = "X_KEY"\n'
        '[providers.claude]\nkind = "anthropic"\nmodel = "c"\npriority = 200\n')
    script = """
import asyncio, sys
from engine import Paths, load_config
from tui.app import DetektivApp

async def main():
    paths = Paths.from_env()
    app = DetektivApp(paths, load_config(paths))
    async with app.run_test() as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        print(str(app.query_one("#provider").render()))
    print(sorted({m.split(".")[0] for m in sys.modules} & {"openai", "anthropic", "ollama",
                                                          "xllamacpp", "jsonschema"}))
asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert out == ["provider: cloud:gpt-4o", "[]"]
