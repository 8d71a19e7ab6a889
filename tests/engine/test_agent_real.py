"""The case agent end to end on the real llama.cpp server (the bundled Gemma): the done-when
command, a conversation continued, and a replay of the logged run. The tiny base model does
not write signals; what is tested is the plumbing: every turn streamed from the server, the
vault searched, and a stop with its reason as the last line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine import Workspace
from engine.agent.events import STOP_REASONS
from engine.storage.sessions import SessionStore
from tests.support.factory import case_session
from tests.support.servers import ROOT, LlamaServer, cli


def detektiv(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


@pytest.mark.heavy
def test_the_agent_answers_from_the_vault_and_names_its_stop(home: Path, paths,
                                                             llama_server: LlamaServer
                                                             ) -> None:
    (home / "config.toml").write_text(
        f'[providers.llama]\nkind = "openai"\nmodel = "gemma"\nbase_url = "{llama_server.url}"'
        '\n\n[agent]\nturn_limit = 3\nmax_tokens = 64\ntemperature = 0\n')
    store = SessionStore.of(paths)
    paris = case_session(store, "Bob was in Paris on Monday",
                         [("Where were you on Monday?", "In Paris, at the Louvre.")])
    case_session(store, "Tea contains caffeine", [("How much?", "About 40 mg a cup.")])
    workspace = Workspace(paths)
    notes = workspace.cases.new_case("Call with Alice")
    workspace.cases.add_note(notes.short_id, "Alice says she met Bob in Paris.", "call.txt")
    paris_id = store.load(paris).short_id

    done = detektiv("agent", "Which sessions mention Paris?", "--json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "started" and kinds[-1] == "stop"
    assert events[-1]["reason"] in STOP_REASONS and events[-1]["reason"] != "error"
    assert events[-1]["evidence"] and events[-1]["answer"].strip()
    calls = [e for e in events if e["type"] == "tool_call"]
    assert calls[0]["name"] == "search_vault" and calls[0]["argument"] == "paris"
    [found] = [e for e in events if e["type"] == "tool_result" and e["turn"] == 0]
    assert paris_id in found["output"] and notes.short_id in found["output"]
    assert "caffeine" not in found["output"]
    turns = [e for e in events if e["type"] == "turn_end"]
    assert turns and all(t["provider"] == "llama:gemma" for t in turns)
    assert any(e["type"] == "delta" for e in events) or not any(t["text"] for t in turns)

    again = detektiv("agent", "-c", "And which of them is a notes-only case?")
    assert again.returncode == 0, again.stderr
    assert "stop: " in again.stderr and "evidence: " in again.stderr
    run_id = next(line.split()[2] for line in again.stderr.splitlines()
                  if line.startswith("agent: run "))
    turns_kept = workspace.conversations.turns("agent", events[0]["conversation_id"])
    assert [t.role for t in turns_kept][:3] == ["user", "assistant", "user"]
    assert turns_kept[2].content == "And which of them is a notes-only case?"

    replay = detektiv("agent", "--replay", run_id)
    assert replay.returncode == 0, replay.stderr
    assert [line for line in replay.stderr.splitlines() if line.startswith("detektiv: stop:")] \
        == [line for line in again.stderr.splitlines() if line.startswith("detektiv: stop:")]
