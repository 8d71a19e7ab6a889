"""The case agent in the Oracles tab, with Pilot: ask from the keyboard, see the signals live,
the tree's node, the tool calls folded and unfolded, and the stop with its evidence; continue
the conversation; cancel a run; start a new conversation. The model is a scripted loopback
server; the engine, vault and store are real."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual.widgets import Input, Static

from engine import Paths
from engine.storage.sessions import SessionStore
from tests.support.app import until
from tests.support.factory import case_session
from tests.support.scripted import ScriptedModel
from tests.support.wire import Reply
from tui.app import build_app
from tui.screens.oracles import OraclesScreen
from tui.widgets.agent import AgentPanel
from tui.widgets.transcript import TranscriptView

SUFFICIENT = ('<signal type="context_sufficient" confidence="0.9"><sources_found>1'
              '</sources_found></signal>')
NEED = '<signal type="need_turn" confidence="0.6"><reason>read the session</reason></signal>'


def configure(home: Path, model: ScriptedModel) -> None:
    (home / "config.toml").write_text(f'[providers.scripted]\nkind = "openai"\n'
                                      f'model = "scripted"\nbase_url = "{model.url}/v1"\n')


def texts(panel: AgentPanel) -> tuple[str, str, str, str]:
    return (panel.conversation.plain_text(),
            panel.query_one("#agent-signals", TranscriptView).plain_text(),
            str(panel.query_one("#agent-node", Static).render()),
            str(panel.query_one("#agent-stop", Static).render()))


async def ask(pilot: Any, question: str) -> None:
    await pilot.press(*question)
    await pilot.press("enter")


async def test_ask_the_agent_and_watch_its_signals_node_tools_and_stop(home: Path) -> None:
    store = SessionStore.of(Paths.at(home))
    case_session(store, "Bob was in Paris on Monday", [("Where?", "In Paris, said Bob.")])

    def script(messages: list[dict[str, Any]]) -> str:
        if sum(1 for m in messages if m["role"] == "assistant") % 2 == 0:
            return ('Let me read it. <tool name="read_session">last</tool>\n' + NEED)
        return "[b]Bob[/b] was in Paris. \x1b[31m" + SUFFICIENT

    with ScriptedModel(script) as model:
        configure(home, model)
        app = build_app(Paths.from_env())
        async with app.run_test(size=(150, 45)) as pilot:
            await pilot.press("3", "g")
            screen = app.screen
            assert isinstance(screen, OraclesScreen)
            assert isinstance(app.focused, Input) and app.focused.id == "agent-input"
            await ask(pilot, "Which sessions mention Paris?")
            panel = screen.query_one("#agent", AgentPanel)
            await until(pilot, lambda: panel.stop is not None, timeout=30)
            log, signals, node, stop = texts(panel)
            assert "Which sessions mention Paris?" in log
            assert "→ search_vault: 2 hits in 1 session" in log
            assert "→ read_session: session" in log and "hypothesis: Bob" not in log
            assert "[b]Bob[/b] was in Paris." in log and "\x1b" not in log  # data, not markup
            assert "<signal" not in log and "<tool" not in log
            assert "need_turn 0.60" in signals and "context_sufficient 0.90" in signals
            assert "node: decide (stopped)" in node
            assert "stop: context_sufficient" in stop and "evidence: turn 2" in stop
            await pilot.press("ctrl+o")
            await until(pilot, lambda: "hypothesis: Bob was in Paris on Monday"
                        in panel.conversation.plain_text())
            await pilot.press("ctrl+o")
            await until(pilot, lambda: "hypothesis: Bob" not in panel.conversation.plain_text())

            # the next question continues the conversation
            screen.query_one("#agent-input", Input).focus()
            await ask(pilot, "And on Tuesday?")
            await until(pilot, lambda: len(panel.turns) == 2 and panel.stop is not None,
                        timeout=30)
            third = model.chats[2]
            assert [m["role"] for m in third[:3]] == ["system", "user", "assistant"]
            assert third[1]["content"] == "Which sessions mention Paris?"
            first_id = panel.conversation_id
            await pilot.press("ctrl+n")
            assert panel.conversation_id is None and panel.turns == []
            assert first_id is not None
            assert app.is_running and not app.internal_errors


async def test_escape_cancels_the_agent_and_the_stop_says_so(home: Path) -> None:
    def slow(_: object) -> Reply:
        chunk = {"choices": [{"index": 0, "delta": {"content": "thinking "}}]}
        return Reply(200, {"content-type": "text/event-stream"},
                     [f"data: {json.dumps(chunk)}\n\n".encode(), 0.2] * 200)

    with ScriptedModel(["x"]) as model:
        model.routes["POST /v1/chat/completions"] = slow
        configure(home, model)
        app = build_app(Paths.from_env())
        async with app.run_test(size=(150, 45)) as pilot:
            await pilot.press("3", "g")
            await ask(pilot, "Which sessions mention Paris?")
            panel = app.screen.query_one("#agent", AgentPanel)
            await until(pilot, lambda: "thinking" in panel.conversation.plain_text(),
                        timeout=30)
            await pilot.press("escape")
            await until(pilot, lambda: panel.stop is not None, timeout=10)
            assert panel.stop is not None and panel.stop.reason == "cancelled"
            assert "stop: cancelled" in texts(panel)[3]
            assert app.is_running and not app.internal_errors
