"""Every binding and every palette command, from a cold start, on a fresh app each.

A fresh app opens on Sessions; the tab under test is the only one visited before the key is
pressed (or the command run). Afterwards the app must still run, and nothing may have been
reported as an internal error. Every binding both with an empty store and with one stored
session, since bindings such as open, export and delete do real work only when there is a row;
every palette command once a tab (a binding's with the stored session, the others with the
empty store: the palette only adds the route to the same actions).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from textual.app import SystemCommand
from textual.binding import Binding
from textual.pilot import Pilot
from textual.widgets import Input, Static, TextArea

from engine import Paths
from engine.storage.sessions import SessionStore
from tests.support.factory import stored_session
from tui.app import DetektivApp, build_app
from tui.screens.cache import CacheScreen
from tui.screens.live import LiveScreen
from tui.screens.oracles import OraclesScreen
from tui.screens.providers import ProvidersScreen
from tui.screens.sessions import SessionsScreen
from tui.tabs import TABS
from tui.widgets.transcript import TranscriptView

SCREENS = {"sessions": SessionsScreen, "live": LiveScreen, "oracles": OraclesScreen,
           "cache": CacheScreen, "providers": ProvidersScreen}
TAB_KEY = {tab.mode: str(number) for number, tab in enumerate(TABS, start=1)}
ENDS_THE_APP = {"quit"}


def bindings(mode: str) -> list[tuple[str, str]]:
    """(binding id, first key) for every binding the tab shows, its own and the app's."""
    found: list[tuple[str, str]] = []
    for binding in [*SCREENS[mode].BINDINGS, *DetektivApp.BINDINGS]:
        assert isinstance(binding, Binding) and binding.id, f"{binding} has no id"
        if binding.id not in ENDS_THE_APP:
            found.append((binding.id, binding.key.split(",")[0]))
    return found


APP_BINDINGS = {binding.id for binding in DetektivApp.BINDINGS}
STATES = ["empty", "one session"]


def cases() -> list[tuple[str, str, str, str]]:
    """(state, tab, binding id, key). A tab's own bindings in both states; the app's (the
    tab keys, help, theme), which do the same on every tab, in one state a tab, taken in
    turn, so each still meets both states on some tab and every target tab opens both
    empty and with a session, at half the apps."""
    found = []
    for number, tab in enumerate(TABS):
        for target, (bid, key) in enumerate(bindings(tab.mode)):
            states = [STATES[(number + target) % 2]] if bid in APP_BINDINGS else STATES
            found += [(state, tab.mode, bid, key) for state in states]
    return found


CASES = cases()


@pytest.fixture
def cold_home(request: pytest.FixtureRequest, home: Path, monkeypatch: pytest.MonkeyPatch,
              tmp_path: Path) -> Paths:
    """The home of a fresh app: `request.param` says whether a session is stored."""
    monkeypatch.chdir(tmp_path)  # exports land here
    monkeypatch.setattr(ProvidersScreen, "AUTO_CHECK", False)
    paths = Paths.from_env()
    if request.param == "one session":
        stored_session(SessionStore.of(paths), "Stored hypothesis", 2)
    return paths


def still_fine(app: DetektivApp, what: str) -> None:
    assert app.is_running, f"{what}: the app ended"
    assert app.return_code is None, f"{what}: the app set exit code {app.return_code}"
    assert not app.internal_errors, f"{what}: internal error {app.internal_errors!r}"


async def settle(pilot: Pilot[int], app: DetektivApp, at_most: float = 0.3) -> None:
    """Until what a key or command started is done (its screen processed, no worker running),
    `at_most` seconds: a worker that runs on (a health check) has shown by then whether it
    fails at once."""
    deadline = time.monotonic() + at_most
    await pilot.pause()
    while any(w.is_running for w in app.workers) and time.monotonic() < deadline:
        await pilot.pause(0.01)


async def show_only(pilot: Pilot[int], app: DetektivApp, mode: str) -> None:
    """Show `mode`'s tab, the only one visited (the app opens on Sessions)."""
    await pilot.pause()
    if mode != "sessions":
        await pilot.press(TAB_KEY[mode])
        await pilot.pause()
    assert app.current_mode == mode


@pytest.mark.parametrize(("cold_home", "mode", "binding_id", "key"), CASES,
                         ids=[f"{s}-{m}-{b}" for s, m, b, _ in CASES], indirect=["cold_home"])
async def test_every_binding_works_from_a_cold_start(
    cold_home: Paths, mode: str, binding_id: str, key: str
) -> None:
    app = build_app(cold_home)
    async with app.run_test(size=(120, 36)) as pilot:
        await show_only(pilot, app, mode)
        await pilot.press(key)
        await settle(pilot, app)
        still_fine(app, f"{binding_id} ({key}) on {mode}")
        await pilot.press("escape")  # close whatever it opened; the app must survive that too
        await pilot.pause()
        still_fine(app, f"escape after {binding_id} on {mode}")


def palette_commands(app: DetektivApp) -> list[SystemCommand]:
    return [c for c in app.get_system_commands(app.screen) if "quit" not in c.title.lower()]


def from_binding(command: SystemCommand, mode: str) -> bool:
    """Whether a palette command runs one of the tab's bindings (its help names the id)."""
    return command.help.split(" (")[0] in {bid for bid, _ in bindings(mode)}


def palette_indexes(commands: list[SystemCommand], mode: str, with_session: bool) -> list[int]:
    """The commands to run in this state: those that run a binding with a stored session
    (where they do real work; the binding test presses each key in both states), the others
    (Textual's own, "Go to …") with an empty store. Every command runs once a tab."""
    # every binding is in the palette, but the tab keys (their "Go to …" stand in)
    assert sum(from_binding(c, mode) for c in commands) >= len(
        [bid for bid, _ in bindings(mode) if not bid.startswith("tab-")])
    return [i for i, c in enumerate(commands) if from_binding(c, mode) == with_session]


@pytest.mark.parametrize("cold_home", STATES, indirect=True)
@pytest.mark.parametrize("mode", [tab.mode for tab in TABS])
async def test_every_palette_command_works_from_a_cold_start(
    cold_home: Paths, mode: str, request: pytest.FixtureRequest
) -> None:
    with_session = request.node.callspec.params["cold_home"] == "one session"
    ran = 0
    while True:  # a fresh app a command; each lists the same commands
        app = build_app(cold_home)
        async with app.run_test(size=(120, 36)) as pilot:
            await show_only(pilot, app, mode)
            commands = palette_commands(app)
            wanted = palette_indexes(commands, mode, with_session)
            assert wanted, f"no palette command to run on {mode}"
            command = commands[wanted[ran]]
            app.call_later(command.callback)  # what the palette does with a chosen command
            await settle(pilot, app)
            still_fine(app, f"palette command {command.title!r} on {mode}")
        ran += 1
        if ran == len(wanted):
            return


async def test_switching_tabs_keeps_keys_for_commands_and_n_goes_to_the_field(
    paths: Paths,
) -> None:
    app = build_app(paths)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        assert app.current_mode == "live"
        assert not isinstance(app.focused, Input), "showing Live put the cursor in a field"
        await pilot.press("1")  # not typed into a field: back to Sessions
        await pilot.pause()
        assert app.current_mode == "sessions"
        await pilot.press("n")  # from Sessions, on a cold Live tab
        await pilot.pause()
        assert app.current_mode == "live"
        assert isinstance(app.focused, TextArea) and app.focused.id == "hypothesis"
        await pilot.press(*"Owls hunt at night")
        assert app.focused.text == "Owls hunt at night"
        app.live.query_one(TranscriptView).focus()
        await pilot.press("enter")  # Enter on the transcript goes to the field too
        assert isinstance(app.focused, TextArea) and app.focused.id == "hypothesis"
        await pilot.press("f1")
        await pilot.pause()
        assert app.current_mode == "sessions"


async def test_empty_tabs_say_what_to_do(paths: Paths) -> None:
    app = build_app(paths)
    async with app.run_test(size=(140, 36)) as pilot:
        for _ in range(40):
            await pilot.pause(0.05)
            status = str(app.screen.query_one("#sessions-status", Static).render())
            if "No sessions yet" in status:
                break
        assert "No sessions yet. Press n to start your first interrogation" in status
        await pilot.press("o")  # nothing to open: it says so, and how to start
        assert "No sessions yet" in app.notices[-1][1]
        await pilot.press("2")
        await pilot.pause()
        text = app.live.query_one(TranscriptView).plain_text()
        assert "To start an interrogation, press n" in text
        assert "open it from the Sessions tab (1" in text
