"""The capable local model, fetched by the app in the background (Pilot, a loopback Hub): it
starts by itself when a demonstration model would play the detective, its progress is in every
tab bar, `F` on the Providers tab stops it (remembered: it does not start by itself again) and
goes on; once here it is the embedded default. With downloads off, nothing is asked of the
network. The model's pins are made small for the test (see tests/engine/test_capable.py)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from engine.config.shipped import CAPABLE_MODEL, DRAFT_MODEL
from engine.gguf import capable, catalog
from engine.gguf.parts import SplitModel
from tests.support.app import app_for, until
from tests.support.hub import LoopbackHub, tiny_gguf
from tui.widgets.tabs import ModeTabs

DATA = tiny_gguf(6_000_000)
ENTRY = next(entry for entry in catalog.CATALOG if entry.name == CAPABLE_MODEL)
DRAFT = next(entry for entry in catalog.CATALOG if entry.name == DRAFT_MODEL)
DRAFT_DATA = tiny_gguf(1_000_000)


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    sha = hashlib.sha256(DATA).hexdigest()
    monkeypatch.setattr(capable, "CAPABLE_PARTS", SplitModel(
        name="tiny", file=ENTRY.file, project="tiny-capable-part{n}", version="0.1.0",
        parts=1, size=len(DATA), sha256=sha))
    draft_sha = hashlib.sha256(DRAFT_DATA).hexdigest()
    monkeypatch.setattr(capable, "FETCH_DRAFT", True)  # the app's whole fetch, draft and all
    monkeypatch.setattr(capable, "DRAFT_PARTS", SplitModel(
        name="tiny-draft", file=DRAFT.file, project="tiny-draft-part{n}", version="0.1.0",
        parts=1, size=len(DRAFT_DATA), sha256=draft_sha))
    monkeypatch.setattr(catalog, "CATALOG", (
        dataclasses.replace(ENTRY, sha256=sha), dataclasses.replace(DRAFT, sha256=draft_sha),
        *(e for e in catalog.CATALOG if e.name not in (CAPABLE_MODEL, DRAFT_MODEL))))
    monkeypatch.delenv("DETEKTIV_NO_DOWNLOAD", raising=False)


def bar(app: object) -> str:
    screen = app.screen  # type: ignore[attr-defined]
    return str(screen.query_one(ModeTabs).render())


async def test_the_fetch_starts_by_itself_shows_progress_and_changes_the_default(
        home: Path, small: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with LoopbackHub() as hub:
        hub.add(ENTRY.repo, ENTRY.file, DATA)
        hub.add(DRAFT.repo, DRAFT.file, DRAFT_DATA)
        hub.pace = 0.4  # six pieces over 2.4 s: the tab bar has time to show them
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        app = app_for(home)
        async with app.run_test(size=(140, 30)) as pilot:
            await until(pilot, lambda: "from the Hub" in bar(app), timeout=30)
            assert any("7 MB" in text and "and its draft" in text
                       and "Providers tab stops it" in text for _, text in app.notices)
            assert "demonstration" in str(app.screen.query_one("#sessions-status").render())
            await pilot.press("2")  # every tab bar shows it
            await until(pilot, lambda: "capable model" in bar(app), timeout=10)
            assert app.screen.query_one("#advice").display
            await until(pilot, lambda: any("capable local model is here" in text
                                           for _, text in app.notices), timeout=60)
            assert any("with its draft (speculative decoding)" in text
                       for _, text in app.notices)
            assert "capable model" not in bar(app) and "draft model" not in bar(app)
            assert "? help" in bar(app)
            assert app.workspace.config.providers["local"].model == CAPABLE_MODEL
            assert app.workspace.advice("detective") is None  # no demonstration note now
            # the screens built before it came say so too: the Live tab (shown) and the
            # Sessions tab (the first one shown)
            await until(pilot, lambda: not app.screen.query_one("#advice").display, timeout=10)
            await pilot.press("1")
            await until(pilot, lambda: "No sessions" in str(
                app.screen.query_one("#sessions-status").render()), timeout=10)
            assert "demonstration" not in str(app.screen.query_one("#sessions-status").render())
            assert app.internal_errors == []


async def test_f_stops_the_fetch_which_then_waits_to_be_asked(
        home: Path, small: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with LoopbackHub() as hub:
        hub.add(ENTRY.repo, ENTRY.file, DATA)
        hub.add(DRAFT.repo, DRAFT.file, DRAFT_DATA)
        hub.pace = 1.0  # 6 s: F lands long before the end, on a busy machine too
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        app = app_for(home)
        async with app.run_test(size=(140, 30)) as pilot:
            await until(pilot, lambda: "from the Hub" in bar(app), timeout=30)
            await pilot.press("5", "F")
            await until(pilot, lambda: any(text.startswith("Stopped; what came is kept")
                                           for _, text in app.notices), timeout=30)
            assert app.fetch_stop is None and "capable model: stopped" in bar(app)
        asked = len(hub.requests)
        again = app_for(home)  # a new start: the stop is remembered
        async with again.run_test(size=(140, 30)) as pilot:
            await pilot.press("5")
            await pilot.pause()
            assert again.fetch_stop is None and len(hub.requests) == asked
            hub.pace = 0.0
            await pilot.press("F")  # on purpose: it goes on from where it stopped
            await until(pilot, lambda: any("capable local model is here" in text
                                           for _, text in again.notices), timeout=60)
            ranged = [r for r in hub.requests[asked:] if r[0] == "GET" and r[2]]
            assert ranged and ranged[0][2].startswith("bytes=")
            assert again.internal_errors == []


async def test_with_downloads_off_nothing_is_asked_of_the_network(
        home: Path, small: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DETEKTIV_NO_DOWNLOAD", "1")
    with LoopbackHub() as hub:
        hub.add(ENTRY.repo, ENTRY.file, DATA)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        app = app_for(home)
        async with app.run_test(size=(140, 30)) as pilot:
            await pilot.press("5")
            await until(pilot, lambda: app.workspace.config_loaded, timeout=10)
            await pilot.press("F")
            await until(pilot, lambda: any("DETEKTIV_NO_DOWNLOAD is set" in text
                                           for _, text in app.notices), timeout=10)
            assert hub.requests == [] and app.fetch_stop is None


async def test_a_fetch_another_detektiv_runs_is_left_to_it(
        home: Path, small: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two apps opened together: the second finds the fetch's lock held and says so, as
    information, not as a failure that keeps the demonstration model."""
    from engine.gguf.pull import pull_lock

    folder = home / "data" / "models" / CAPABLE_MODEL
    folder.mkdir(parents=True)
    with LoopbackHub() as hub, pull_lock(folder / ".fetch.lock", CAPABLE_MODEL):
        hub.add(ENTRY.repo, ENTRY.file, DATA)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        app = app_for(home)
        async with app.run_test(size=(140, 30)) as pilot:
            await until(pilot, lambda: any(text.startswith("Another detektiv is fetching")
                                           for _, text in app.notices), timeout=30)
            assert app.fetch_stop is None and hub.requests == []
            assert not any(severity_text.startswith("Failed") for severity_text, _ in app.notices)
