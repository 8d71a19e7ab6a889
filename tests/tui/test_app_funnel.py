"""The error funnel: an exception in any handler is a notification, and the app goes on."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.message import Message
from textual.message_pump import MessagePump
from textual.widgets import DataTable

import tui
from engine import Paths
from engine.logs import log_file
from engine.storage.sessions import SessionStore
from tests.support.app import until
from tests.support.factory import stored_session
from tui.app import DetektivApp, build_app
from tui.funnel import Guarded
from tui.screens.sessions import SessionsScreen


class Boom(Message):
    """A message whose handler fails."""


class FailingApp(DetektivApp):
    BINDINGS = [*DetektivApp.BINDINGS, Binding("f9", "explode", "Explode", id="explode")]

    def action_explode(self) -> None:
        raise RuntimeError("the action blew up")

    def on_boom(self, message: Boom) -> None:
        raise LookupError("the handler blew up")


def internal_notices(app: DetektivApp) -> list[str]:
    return [message for title, message in app.notices if title == "Internal error"]


async def test_a_failing_action_and_message_handler_leave_the_app_running(
    paths: Paths,
) -> None:
    app = build_app(paths, FailingApp)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f9")
        await pilot.pause()
        assert app.is_running and app.return_code is None
        (notice,) = internal_notices(app)
        assert "RuntimeError: the action blew up" in notice
        assert str(log_file(paths.log_dir)) in notice

        app.post_message(Boom())
        await pilot.pause()
        assert app.is_running and app.return_code is None
        assert "LookupError: the handler blew up" in internal_notices(app)[-1]

        # the app's own message loop still runs: keys still work
        await pilot.press("2")
        await pilot.pause()
        assert app.current_mode == "live"
        await pilot.press("1")
        await pilot.pause()
        assert app.current_mode == "sessions"
        assert [type(e) for e in app.internal_errors] == [RuntimeError, LookupError]
        await pilot.press("ctrl+q")
    assert app.return_code == 0  # only the user ended it, and not as an error


async def test_a_failing_handler_on_a_screen_does_not_stop_that_screen(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore.of(paths)
    stored_session(store, "Bees sleep at night")
    stored_session(store, "Whales are fish")
    original = SessionsScreen._apply_filter
    fail = {"on": False}

    def flaky(self: SessionsScreen) -> None:
        if fail["on"]:
            raise ValueError("filter failed")
        original(self)

    monkeypatch.setattr(SessionsScreen, "_apply_filter", flaky)
    app = build_app(paths)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, SessionsScreen)
                    and app.screen.query_one(DataTable).row_count == 2)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        fail["on"] = True
        await pilot.press("slash", "w")  # Input.Changed → the screen's handler raises
        await pilot.pause()
        assert "ValueError: filter failed" in internal_notices(app)[-1]
        fail["on"] = False
        await pilot.press("h")  # the same screen still handles its messages
        await pilot.pause()
        assert screen.query_one(DataTable).row_count == 1
        assert app.is_running and app.return_code is None


async def test_failing_timers_and_workers_are_reported_once_each(paths: Paths) -> None:
    app = build_app(paths)

    def tick() -> None:
        raise KeyError("timer")

    async def work() -> None:
        raise ZeroDivisionError("worker")

    async with app.run_test(size=(100, 30)) as pilot:
        app.set_timer(0.01, tick)
        app.run_worker(work())  # exit_on_error left at Textual's default (True)
        await until(pilot, lambda: len(internal_notices(app)) >= 2)
        assert app.is_running and app.return_code is None
        notices = internal_notices(app)
        assert sum("KeyError" in n for n in notices) == 1
        assert sum("ZeroDivisionError" in n for n in notices) == 1


async def test_the_same_failure_again_is_not_announced_twice_in_a_row(paths: Paths) -> None:
    app = build_app(paths, FailingApp)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f9", "f9", "f9")
        await pilot.pause()
        assert len(internal_notices(app)) == 1
        assert len(app.internal_errors) == 3  # every one is still logged


def test_every_screen_and_widget_of_the_app_is_guarded() -> None:
    """A class in `tui/` that runs a message loop derives from `Guarded`, so a failing
    handler cannot stop it (the cold-start tests find such handlers; this keeps new classes
    from forgetting)."""
    found: list[type] = []
    for module_info in pkgutil.walk_packages(tui.__path__, "tui."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, MessagePump):
                found.append(cls)
    assert len(found) >= 8, found
    unguarded = [cls.__qualname__ for cls in found if not issubclass(cls, Guarded)]
    assert unguarded == []


def test_a_config_error_still_exits_with_code_2(home: Path, paths: Paths) -> None:
    """Only ctrl+q and a bad config end the app."""
    (home / "config.toml").write_text("[interrogation]\niteration_limit = 99\n")
    app = build_app(paths)

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.return_code is not None, timeout=60)

    import asyncio

    asyncio.run(run())
    assert app.return_code == 2 and app.config_error and "iteration_limit" in app.config_error


def test_the_private_textual_hooks_are_where_the_funnel_expects_them() -> None:
    """The funnel overrides private Textual methods; an upgrade that moves one fails here."""
    from tui.funnel import check_private_hooks

    assert check_private_hooks() == []


def test_a_changed_private_hook_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.app import App

    from tui.funnel import check_private_hooks

    async def renamed(self: object, namespace: object, action: str) -> bool:
        return True

    monkeypatch.setattr(App, "_dispatch_action", renamed)
    (problem,) = check_private_hooks()
    assert "textual.app.App._dispatch_action" in problem and "action_name" in problem
    monkeypatch.delattr(App, "_handle_exception")
    assert any("_handle_exception is gone" in p for p in check_private_hooks())
