"""Quitting at any moment: the app cancels and awaits its workers, waits for the thread work
still running, and only then closes the stores those threads read.

Before, the Cache tab's refresh (a thread worker) could be inside `SELECT count(*)` when quitting
closed the SQLite connection under it: a segmentation fault that took the whole app down (and
the suite with it). Here the app opens 200 times on a cache of 10,000 entries and 40 sessions,
its Cache and Sessions tabs refreshing continuously, the tabs switched at random, and it is quit
at a random moment each time. The suite runs under faulthandler, so a crash names its threads.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from engine import Paths, load_config
from engine.cache.cache import ResponseCache
from engine.cache.contract import CacheStore
from engine.cache.store import SQLiteCacheStore
from engine.storage.sessions import SessionStore
from tests.support.factory import stored_session
from tui.app import DetektivApp
from tui.screens import cache as cache_tab, sessions as sessions_tab
from tui.screens.providers import ProvidersScreen
from tui.tabs import TABS as TABS_IN_ORDER

RUNS = int(os.environ.get("SHUTDOWN_RUNS", "200"))
ENTRIES = 10_000
TABS = [tab.mode for tab in TABS_IN_ORDER]
QUIT_WITHIN = 0.3
"""Seconds after the first frame within which a run quits (at a random moment)."""
WALK_WITHIN = 2.5
"""The same for a run that walks through the tabs."""


def fill(store: CacheStore, entries: int) -> None:
    """`entries` validated entries, written in a few transactions (as bench/cache.py does)."""
    from bench.cache import entry

    assert isinstance(store, SQLiteCacheStore)
    for start in range(0, entries, 2000):
        with store._write() as db:
            for i in range(start, min(entries, start + 2000)):
                store._store(db, entry(i))


@pytest.fixture
def busy_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    paths = Paths.from_env()
    store = SQLiteCacheStore(paths.data_dir / "cache.sqlite3")
    fill(store, ENTRIES)
    ResponseCache(store)  # indexes them for this normaliser now, not in the first run
    store.close()
    sessions = SessionStore.of(paths)
    for n in range(40):
        stored_session(sessions, f"Hypothesis number {n}", 1)
    # the two tabs that read stores on a thread refresh all the time
    monkeypatch.setattr(cache_tab, "REFRESH_SECONDS", 0.05)
    monkeypatch.setattr(sessions_tab, "REFRESH_SECONDS", 0.05)
    monkeypatch.setattr(ProvidersScreen, "AUTO_CHECK", False)
    return paths


@pytest.mark.heavy
@pytest.mark.timeout(900)  # 200 apps: about two minutes, more on a busy machine
async def test_quitting_at_any_moment_never_crashes(busy_home: Paths) -> None:
    seed = int(time.time())
    rng = random.Random(seed)
    config = load_config(busy_home)
    in_flight = 0
    for run in range(RUNS):
        app = DetektivApp(busy_home, config)
        # every tenth run walks through all five tabs in random order and quits at a random
        # moment of the walk (maybe mid-switch); the others open on one of the two tabs that
        # read stores on a thread and quit at once or while a refresh reads (building a tab
        # costs Textual ~0.3 s: 200 walks would take ten minutes)
        walk = run % 10 == 0
        order = rng.sample(TABS, len(TABS))
        first = order[0] if walk else rng.choice(["cache", "sessions"])
        app.DEFAULT_MODE = first
        async with app.run_test(size=(120, 40)) as pilot:
            quit_at = time.monotonic() + rng.random() * (WALK_WITHIN if walk else QUIT_WITHIN)
            # a timer quits mid-switch if one is under way, else the loop does
            app.set_timer(max(0.0, quit_at - time.monotonic()), app.exit)
            for mode in order[1:] if walk else []:
                if app.quitting or time.monotonic() >= quit_at:
                    break
                # the tab keys' action, without the pilot's wait for an idle app (it never is)
                await app.action_tab(mode)
            while not app.quitting and time.monotonic() < quit_at:
                await pilot.pause(0.005)
            in_flight += app.background.running  # thread work the quit races
            app.exit()
            while app.is_running:
                await pilot.pause(0.01)
        context = f"run {run} (seed {seed})"
        assert app.workspace.closed, context
        assert app.background.running == 0, f"{context}: thread work outlived the app"
        assert app.internal_errors == [], f"{context}: {app.internal_errors!r}"
    assert in_flight > 0, "no quit ever came while a refresh was running"
