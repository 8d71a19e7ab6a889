"""The Evaluations screen (Sessions tab, `v`): the runs `detektiv eval` made, the figures of
the selected one and its reliability diagram; `o` filters Sessions to the run's sessions."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Input, Static

from engine import EvalRequest, Paths, Workspace
from engine.evals.datasets import dataset_path
from engine.evals.items import read_items
from tests.support.app import until
from tests.support.evals import detective, knows, witness
from tests.support.interrogation import make_config
from tests.support.scripted import ScriptedModel
from tui.app import build_app
from tui.screens.evals import EvalsScreen
from tui.screens.sessions import SessionsScreen


async def an_evaluation(paths: Paths, n: int) -> str:
    items = read_items(dataset_path(paths, "demo"))
    with ScriptedModel(detective(knows(items))) as sleuth, ScriptedModel(witness) as wit:
        config = make_config({"det": sleuth.url + "/v1", "wit": wit.url + "/v1"}, ["det"],
                             ["wit"])
        workspace = Workspace(paths, config)
        try:
            run = await workspace.evals.start(EvalRequest("demo", n=n))
            async for _ in run.events():
                pass
            return run.id
        finally:
            await workspace.aclose()


def text_of(static: Static) -> str:
    return str(static.render())


async def test_the_app_lists_a_run_with_its_figures_and_opens_its_sessions(
        paths: Paths, home: Path) -> None:
    run = await an_evaluation(paths, 4)
    app = build_app(paths)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, EvalsScreen)
                    and app.screen.summary is not None)
        screen = app.screen
        assert isinstance(screen, EvalsScreen)
        runs = screen.query_one("#eval-runs", DataTable)
        assert runs.row_count == 1 and str(runs.get_row_at(0)[0]) == run
        figures = screen.query_one("#eval-figures", DataTable)
        rows = {str(figures.get_row_at(i)[0]): [str(c) for c in figures.get_row_at(i)[1:]]
                for i in range(figures.row_count)}
        assert rows["F1"][0].startswith("1.000") and rows["items"][0] == "4"
        assert "Reliability" in text_of(screen.query_one("#eval-plot", Static))
        assert "Positive class: a false claim" in text_of(screen.query_one("#eval-lines",
                                                                          Static))
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        sessions = app.screen
        assert isinstance(sessions, SessionsScreen)
        assert sessions.query_one("#filter", Input).value == run
        assert len(sessions.shown) == 4 and all(r.eval_run == run for r in sessions.shown)
        assert not app.internal_errors


async def test_with_no_run_every_key_of_the_screen_says_what_to_do(paths: Paths) -> None:
    app = build_app(paths)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, EvalsScreen) and "No evaluation"
                    in text_of(app.screen.query_one("#eval-status", Static)))
        for key in ("r", "o", "escape"):
            await pilot.press(key)
            await pilot.pause()
            assert app.is_running and not app.internal_errors, key
        assert isinstance(app.screen, SessionsScreen)
        assert any("No evaluation run is selected" in text for _, text in app.notices)


async def test_an_evaluation_s_sessions_are_one_row_until_asked_for(
        paths: Paths, home: Path) -> None:
    """Four sessions of a run and one of a user's own: two rows; Enter on the run's row lists
    its four sessions; the filter finds them by the run's id as well."""
    from engine import EvalGroup
    from engine.storage.sessions import SessionStore
    from tests.support.factory import stored_session

    run = await an_evaluation(paths, 4)
    stored_session(SessionStore.of(paths), "A hypothesis of my own", 1)
    app = build_app(paths)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        table = screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 2)
        groups = [r for r in screen.shown if isinstance(r, EvalGroup)]
        assert len(groups) == 1 and groups[0].run == run and groups[0].count == 4
        status = text_of(screen.query_one("#sessions-status", Static))
        assert status.startswith("5 sessions · 1 evaluation run in one row each"), status
        table.move_cursor(row=screen.shown.index(groups[0]))
        await pilot.press("e")  # export needs a session: says what to do instead
        await pilot.press("enter")
        await until(pilot, lambda: table.row_count == 4)
        assert screen.query_one("#filter", Input).value == run
        assert all(not isinstance(r, EvalGroup) and r.eval_run == run for r in screen.shown)
        assert not app.internal_errors


async def a_comparison(paths: Paths, tmp_path: Path) -> dict[str, str]:
    """Two witnesses compared on four claims through the whole engine (scripted models):
    each witness's run id."""
    import json as jsonlib

    from tests.support.evals import FALSE, TRUE, retracting, sleuth, standing

    claims = tmp_path / "claims.jsonl"
    claims.write_text("".join(jsonlib.dumps({"claim": c, "label": c in TRUE}) + "\n"
                              for c in [*TRUE[:2], *FALSE[:2]]))
    runs: dict[str, str] = {}
    with ScriptedModel(sleuth) as det, ScriptedModel(standing) as a, \
            ScriptedModel(retracting) as b:
        config = make_config({"det": det.url + "/v1", "wa": a.url + "/v1",
                              "wb": b.url + "/v1"}, ["det"], ["wa"])
        workspace = Workspace(paths, config)
        try:
            for name in ("wa", "wb"):
                run = await workspace.evals.start(
                    EvalRequest(str(claims), mode="open", detective=("det",),
                                witness=(name,), limit=5), compared=True)
                async for _ in run.events():
                    pass
                runs[name] = run.id
        finally:
            await workspace.aclose()
    return runs


async def test_a_comparison_is_one_row_and_enter_on_a_witness_lists_its_sessions(
        paths: Paths, home: Path, tmp_path: Path) -> None:
    runs = await a_comparison(paths, tmp_path)
    app = build_app(paths)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, EvalsScreen)
                    and app.screen.board is not None)
        screen = app.screen
        assert isinstance(screen, EvalsScreen)
        assert screen.query_one("#eval-runs", DataTable).row_count == 1
        figures = screen.query_one("#eval-figures", DataTable)
        assert [str(figures.get_row_at(i)[0]) for i in range(2)] == ["wa", "wb"]
        assert "Paired differences" in text_of(screen.query_one("#eval-lines", Static))
        await pilot.press("o")  # a comparison: to its witnesses, said
        await until(pilot, lambda: figures.has_focus)
        assert any("Enter on a witness" in text for _, text in app.notices)
        await pilot.press("down", "enter")  # the second witness
        await until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        sessions = app.screen
        assert isinstance(sessions, SessionsScreen)
        assert sessions.query_one("#filter", Input).value == runs["wb"]
        await until(pilot, lambda: len(sessions.shown) == 4)
        assert all(row.eval_run == runs["wb"] for row in sessions.shown)
        assert not app.internal_errors
