"""`detektiv mcp`: detektiv's tools over the Model Context Protocol, tested with the SDK's own
client — in memory, over stdio against a real `detektiv mcp` subprocess (the embedded
llama.cpp model loaded in it), and over streamable HTTP with its Host, Origin and token
checks."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from engine import Paths, Workspace
from tests.support.evals import claim_question
from tests.support.interrogation import make_config
from tests.support.scripted import Judged, ScriptedModel, is_judgement, judged_claim
from tests.support.servers import ROOT, cli, closed_port
from tui.mcp.server import build, tidy_validation

Chat = list[dict[str, Any]]

REQUEST = "Summarize the health benefits of Vitamin B3"
TESTIMONY = ("Vitamin B3 helps convert food into energy. It also lowers cholesterol.\n"
             "Vitamin B3 is also called pantothenic acid. You should eat more fish.")
SPLIT = "\n".join([
    "1. Vitamin B3 helps convert food into energy.",
    "2. Vitamin B3 lowers cholesterol.",
    "3. Vitamin B3 is also called pantothenic acid.",
    "4. [not checkable] You should eat more fish.",
])
TRUTH = {"Vitamin B3 helps convert food into energy.": 0.95,
         "Vitamin B3 lowers cholesterol.": 0.9,
         "Vitamin B3 is also called pantothenic acid.": 0.05}
HOSTILE = "\x1b[2J\x1b]0;owned\x07Vitamin B3 is \u202enicain\u202c, {HYPOTHESIS}."


def detective(messages: Chat) -> str:
    """Splits the testimony, asks about each claim, judges each by `TRUTH`."""
    system = messages[0]["content"]
    if is_judgement(messages):
        if "The witness was asked" not in messages[-1]["content"]:
            return Judged(0.6)  # its own reading leans, never strongly
        return Judged(TRUTH.get(judged_claim(messages), 0.95))
    if system.startswith("You take a text apart"):
        return SPLIT
    return claim_question(system)


def witness(messages: Chat) -> str:
    if messages[-1]["content"].startswith(REQUEST):
        return TESTIMONY
    return HOSTILE


@asynccontextmanager
async def served(paths: Paths, pace: float = 0.0) -> AsyncIterator[tuple[Client, Workspace]]:
    """An in-memory client of `build(workspace)`, both models scripted on loopback."""
    with ScriptedModel(detective) as d, ScriptedModel(witness, pace=pace) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"],
                             claim_concurrency=2)
        workspace = Workspace(paths, config)
        try:
            async with Client(build(workspace)) as client:
                yield client, workspace
        finally:
            await workspace.aclose()


def _clean(value: object) -> None:
    """No terminal escape and no bidi override anywhere in a result."""
    text = json.dumps(value, ensure_ascii=False)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text


async def test_the_tools_are_listed_with_their_schemas(paths: Paths) -> None:
    async with served(paths) as (client, _):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"interrogate", "sessions", "session", "evaluate"}
    interrogate = tools["interrogate"].input_schema
    assert interrogate["required"] == ["hypothesis"]
    limit = interrogate["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (5, 20)
    assert interrogate["properties"]["protocol"]["enum"] == ["cross-exam", "consistency"]
    assert interrogate["properties"]["wait"]["default"] is True
    assert tools["session"].input_schema["required"] == ["session"]
    assert tools["evaluate"].input_schema["required"] == ["dataset"]
    output = tools["interrogate"].output_schema
    assert output is not None and {"session", "status", "verdict", "claims"} <= set(
        output["properties"])
    assert all(tool.description for tool in tools.values())


async def test_a_testimony_is_interrogated_to_its_verdict_with_progress_per_claim(
        paths: Paths) -> None:
    steps: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        steps.append((value, total, message))

    async with served(paths) as (client, workspace):
        result = await client.call_tool("interrogate", {"hypothesis": REQUEST, "limit": 5},
                                        progress_callback=progress)
        assert not result.is_error, result.content
        found = result.structured_content
        assert found is not None
        _clean(found)
        states = {claim["text"]: claim["state"] for claim in found["claims"]}
        assert states == {"Vitamin B3 helps convert food into energy.": "held",
                          "Vitamin B3 lowers cholesterol.": "held",
                          "Vitamin B3 is also called pantothenic acid.": "contradicted",
                          "You should eat more fish.": "not checkable"}
        assert found["verdict"] == "false" and found["status"] == "completed"
        stored = workspace.store.load(found["session"])  # an ordinary session
        assert stored.status == "completed" and stored.audit_result is not None
        assert stored.audit_result.verdict == "false"

        listed = (await client.call_tool("sessions", {"search": "vitamin"})).structured_content
        assert listed is not None and [row["session"] for row in listed["sessions"]] == [
            found["session"]]
        report = await client.call_tool("session", {"session": found["session"][:8]})
        assert not report.is_error
        shown = report.structured_content
        assert shown is not None and shown["status"] == "completed" and not shown["running"]
        assert "pantothenic acid" in shown["report"] and REQUEST in shown["report"]
        _clean(shown)  # the witness's escapes and overrides are data, shown as text
        assert "owned" in shown["report"]

    messages = [message for _, _, message in steps]
    values = [value for value, _, _ in steps]
    assert values == sorted(set(values))  # progress only grows
    split = messages.index("testimony taken apart: 4 claims")
    assert [total for _, total, _ in steps[:split]] == [None] * split  # not known yet
    # from the split on: the testimony, the split, 3 claims to examine, the verdict, the end
    assert {total for _, total, _ in steps[split:]} == {7}
    assert all(value <= 7 for value in values) and values[-1] == 7
    assert messages[0] == f"session {found['session'][:8]} started"
    assert "testimony given" in messages
    assert "testimony taken apart: 4 claims" in messages
    examined = [m for m in messages if m and " claims examined: " in m]
    assert [m.split(" claims")[0] for m in examined] == ["1/3", "2/3", "3/3"]
    assert any("contradicted" in m and "pantothenic" in m for m in examined)
    assert messages[-1] == (f"Session {found['session'][:8]} completed: the testimony's 4 "
                            "claims: 2/4 held, 1 contradicted, 1 not checkable")


async def test_a_run_started_without_waiting_is_polled_to_its_end(paths: Paths) -> None:
    async with served(paths) as (client, workspace):
        started = await client.call_tool(
            "interrogate", {"hypothesis": "Vitamin B3 lowers cholesterol.", "wait": False})
        first = started.structured_content
        assert first is not None and first["status"] == "running" and first["verdict"] is None
        assert first["started"] == workspace.store.load(first["session"]).start_time.isoformat()
        assert first["demonstration"] is False
        with anyio.fail_after(120):
            while True:  # polled as a client would, until the session ends
                shown = (await client.call_tool("session", {"session": first["session"]})
                         ).structured_content
                assert shown is not None
                if not shown["running"]:
                    break
                await anyio.sleep(0.1)
        assert shown["status"] == "completed" and shown["verdict"].startswith("true")
        assert workspace.store.load(first["session"]).status == "completed"


async def test_cancelling_the_call_cancels_the_interrogation(paths: Paths) -> None:
    async with served(paths, pace=0.2) as (client, workspace):
        started = asyncio.Event()

        async def progress(value: float, total: float | None, message: str | None) -> None:
            if message and message.startswith("session "):
                started.set()

        async with anyio.create_task_group() as group:
            async def call() -> None:
                await client.call_tool("interrogate", {"hypothesis": REQUEST},
                                       progress_callback=progress)
            group.start_soon(call)
            with anyio.fail_after(60):
                await started.wait()
            group.cancel_scope.cancel()
        (row,) = workspace.store.list()
        with anyio.fail_after(60):
            while workspace.store.load(row.id).status == "running":
                await anyio.sleep(0.05)
        assert workspace.store.load(row.id).status == "cancelled"  # resumable, as in the app
        workspace.sessions.resume(row.id).journal.close()


@pytest.mark.parametrize(("arguments", "said"), [
    ({"hypothesis": "   "}, "the hypothesis is empty"),
    ({"hypothesis": "x", "limit": 30}, "the iteration limit must be between 5 and 20 (got 30)"),
    ({"hypothesis": "x", "limit": "many"}, "limit: Input should be a valid integer"),
    ({"hypothesis": "x", "detective": "nobody"}, "provider 'nobody': not a configured"),
    ({"hypothesis": "x", "document": "/no/such/file.txt"},
     "document: /no/such/file.txt: no such file"),
    ({"hypothesis": "x", "protocol": "torture"}, "protocol: Input should be 'cross-exam' or"),
    ({}, "hypothesis: Field required"),
    ({"hypothesis": "A" * 1_000_000}, "hypothesis: String should have at most 50000"),
])
async def test_bad_inputs_get_a_clear_error_and_store_nothing(
        paths: Paths, arguments: dict[str, Any], said: str) -> None:
    async with served(paths) as (client, workspace):
        result = await client.call_tool("interrogate", arguments)
        assert result.is_error
        text = result.content[0].text  # type: ignore[union-attr]
        assert said in text and "\n" not in text and "pydantic.dev" not in text
        assert len(text) < 500  # never the hypothesis echoed
        assert workspace.store.list() == []


async def test_the_other_tools_refuse_bad_input_in_words(paths: Paths) -> None:
    async with served(paths) as (client, _):
        cases = [("session", {"session": "nosuch"}, "no session matches 'nosuch'"),
                 ("sessions", {"limit": 0}, "limit must be between 1 and 500 (got 0)"),
                 ("sessions", {"status": "bogus"}, "status: Input should be 'running', "
                  "'completed', 'limit-reached', 'nothing-asked', 'failed', 'cancelled', "
                  "'interrupted', 'notes' or 'damaged'"),
                 ("evaluate", {"dataset": "/no/such.jsonl"},
                  "/no/such.jsonl: neither a file nor a named dataset"),
                 ("evaluate", {"dataset": "demo", "n": 0}, "n must be at least 1 (got 0)")]
        for name, arguments, said in cases:
            result = await client.call_tool(name, arguments)
            assert result.is_error and said in result.content[0].text, (  # type: ignore
                name, result.content)


async def test_a_run_that_fails_is_an_error_result_naming_why(paths: Paths) -> None:
    with ScriptedModel(detective) as d:
        config = make_config({"det": d.url + "/v1", "wit": f"http://127.0.0.1:{closed_port()}"
                              "/v1"}, ["det"], ["wit"])
        workspace = Workspace(paths, config)
        try:
            async with Client(build(workspace)) as client:
                result = await client.call_tool(
                    "interrogate", {"hypothesis": "Vitamin B3 lowers cholesterol."})
        finally:
            await workspace.aclose()
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    (row,) = workspace.store.list()
    assert row.status == "failed" and f"session {row.id[:8]} failed: " in text
    assert "wit" in text  # the provider that failed is named


async def test_a_run_that_asked_nothing_says_so_in_its_status_and_verdict(
        paths: Paths) -> None:
    def mute(messages: Chat) -> str:  # never a usable question: no question mark, ever
        return Judged(0.6) if is_judgement(messages) else "I shall not ask"

    with ScriptedModel(mute) as d, ScriptedModel(witness) as w:
        config = make_config({"det": d.url + "/v1", "wit": w.url + "/v1"}, ["det"], ["wit"])
        workspace = Workspace(paths, config)
        try:
            async with Client(build(workspace)) as client:
                result = await client.call_tool(
                    "interrogate", {"hypothesis": "Vitamin B3 lowers cholesterol."})
                listed = (await client.call_tool("sessions", {"status": "nothing-asked"})
                          ).structured_content
        finally:
            await workspace.aclose()
    assert not result.is_error, result.content
    found = result.structured_content
    assert found is not None and found["status"] == "nothing-asked" and found["rounds"] == 0
    assert found["verdict"] == "undetermined" and found["probability_false"] == 0.5
    assert found["error"] is None
    stored = workspace.store.load(found["session"])
    assert stored.audit_result is not None and stored.audit_result.undetermined_because
    assert stored.audit_result.undetermined_because.startswith("nothing was asked: ")
    assert listed is not None and [r["session"] for r in listed["sessions"]] == [found["session"]]


async def test_the_session_list_is_paged(paths: Paths) -> None:
    async with served(paths) as (client, workspace):
        for n in range(5):
            workspace.sessions.start(f"Claim number {n} is true.", 5).journal.close()
        pages = []
        for offset in (0, 2, 4):
            page = (await client.call_tool("sessions", {"limit": 2, "offset": offset})
                    ).structured_content
            assert page is not None
            pages.append(([row["hypothesis"] for row in page["sessions"]], page["more"]))
    assert [more for _, more in pages] == [3, 1, 0]
    shown = [title for titles, _ in pages for title in titles]
    assert shown == [f"Claim number {n} is true." for n in (4, 3, 2, 1, 0)]


async def test_a_long_hypothesis_is_never_echoed_whole(paths: Paths) -> None:
    long = "Vitamin B3 lowers cholesterol. " * 1_000  # a pasted testimony, 31,000 characters
    async with served(paths) as (client, workspace):
        result = await client.call_tool("interrogate", {"hypothesis": long, "wait": False})
        assert not result.is_error, result.content
        found = result.structured_content
        assert found is not None and len(found["hypothesis"]) <= 300
        assert found["hypothesis"].endswith("…")
        listed = (await client.call_tool("sessions", {})).structured_content
        assert listed is not None and len(listed["sessions"][0]["hypothesis"]) <= 300
        assert workspace.store.load(found["session"]).hypothesis_text == long.strip()


async def test_a_run_started_without_waiting_says_a_demonstration_model_plays_the_detective(
        paths: Paths) -> None:
    workspace = Workspace(paths)  # nothing configured: the embedded demonstration model
    try:
        async with Client(build(workspace)) as client:
            result = await client.call_tool(
                "interrogate", {"hypothesis": "Tea contains caffeine.", "wait": False})
            found = result.structured_content
            assert found is not None and found["demonstration"] is True, result.content
            workspace.store.load(found["session"])  # stopped with the server: resumable
    finally:
        await workspace.aclose()


def test_pydantic_reports_are_tidied_one_field_a_part() -> None:
    raw = ("Error executing tool t: 2 validation errors for tArguments\nlimit\n  Input should "
           "be a valid integer [type=int_parsing, input_value='x', input_type=str]\n    For "
           "further information visit https://errors.pydantic.dev/2/v/int_parsing\nwait\n"
           "  Input should be a valid boolean [type=bool_parsing]")
    assert tidy_validation(raw) == ("Error executing tool t: limit: Input should be a valid "
                                    "integer; wait: Input should be a valid boolean")
    assert tidy_validation("Error executing tool t: the hypothesis is empty") == \
        "Error executing tool t: the hypothesis is empty"


async def test_an_evaluation_returns_its_figures_with_progress_per_item(
        paths: Paths, tmp_path: Path) -> None:
    claims = tmp_path / "claims.jsonl"
    claims.write_text("".join(json.dumps({"claim": claim, "label": p > 0.5}) + "\n"
                              for claim, p in TRUTH.items()))
    seen: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async with served(paths) as (client, _):
        result = await client.call_tool("evaluate", {"dataset": str(claims), "mode": "open"},
                                        progress_callback=progress)
    assert not result.is_error, result.content
    found = result.structured_content
    assert found is not None and (found["judged"], found["total"], found["failed"]) == (3, 3, 0)
    accuracy = found["figures"]["systems"]["interrogation"]["accuracy"]
    assert accuracy["value"] == 1.0 and accuracy["low"] <= 1.0
    assert seen[0].endswith(": 3 to judge") and len([s for s in seen if s.startswith("item ")]) \
        == 3


# ---- a real `detektiv mcp` subprocess ------------------------------------------------------

@pytest.fixture
def sleuth_home(home: Path) -> Iterator[Path]:
    """A scripted detective, the embedded llama.cpp model (in the server's own process) as
    the witness."""
    from tests.support.interrogation import FAST
    from tests.support.scripted import detective as asking

    fast = "\n".join(f"{k} = {json.dumps(v)}" for k, v in {**FAST, "min_rounds": 2}.items())
    with ScriptedModel(asking, pace=0.01) as sleuth:
        (home / "config.toml").write_text(
            f'[providers.sleuth]\nkind = "openai"\nmodel = "scripted"\n'
            f'base_url = "{sleuth.url}/v1"\npriority = 2\n\n'
            '[roles]\ndetective = ["sleuth"]\nwitness = ["local"]\n\n'
            f"[interrogation]\n{fast}\n")
        yield home


async def test_over_stdio_nothing_but_protocol_reaches_stdout(
        sleuth_home: Path, tmp_path: Path) -> None:
    wire = tmp_path / "stdout.bin"
    errors = tmp_path / "stderr.txt"
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "tests.support.tee", str(wire), *cli("mcp")],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT))
    steps: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        steps.append(message or "")

    with errors.open("w") as errlog:
        async with Client(stdio_client(parameters, errlog=errlog)) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool(
                "interrogate", {"hypothesis": "Tea contains caffeine.", "limit": 5},
                progress_callback=progress)
            # the embedded model is loaded in it now: whatever C writes to its fd 1 goes
            # where its fd 2 goes (the client's error log), never onto the wire
            served = _server_process(sleuth_home)
            assert os.readlink(f"/proc/{served}/fd/1") == os.readlink(f"/proc/{served}/fd/2")
            assert os.readlink(f"/proc/{served}/fd/2") == str(errors)
            bad = await client.call_tool("interrogate", {"hypothesis": "x", "limit": 99})
            assert bad.is_error and "between 5 and 20 (got 99)" in bad.content[0].text  # type: ignore[union-attr]
            cancelled = await _cancel_over_the_wire(client)
    assert cancelled == "cancelled"
    assert tools == {"interrogate", "sessions", "session", "evaluate"}
    assert not result.is_error, result.content
    found = result.structured_content
    assert found is not None and found["verdict"] == "true", errors.read_text()[-2000:]
    assert "round 1 done" in steps and " completed: " in steps[-1]
    lines = wire.read_bytes().splitlines()
    assert len(lines) >= len(steps) + 3
    for line in lines:  # every line a JSON-RPC message: no model or library output
        assert json.loads(line)["jsonrpc"] == "2.0", line[:200]


async def _cancel_over_the_wire(client: Client) -> str:
    """Start an interrogation that would ask up to its limit, cancel the call once it has
    begun (the client sends notifications/cancelled), and poll the session until it ends:
    its status."""
    from tests.support.scripted import KEEP_ASKING

    begun = asyncio.Event()
    ident: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("session "):
            ident.append(message.split()[1])
            begun.set()

    async with anyio.create_task_group() as group:
        async def call() -> None:
            await client.call_tool("interrogate", {"hypothesis": f"Tea is red {KEEP_ASKING}",
                                                   "limit": 20}, progress_callback=progress)
        group.start_soon(call)
        with anyio.fail_after(120):
            await begun.wait()
        group.cancel_scope.cancel()
    with anyio.fail_after(120):
        while True:
            shown = (await client.call_tool("session", {"session": ident[0]})
                     ).structured_content
            assert shown is not None
            if not shown["running"]:
                return str(shown["status"])
            await anyio.sleep(0.1)


def _server_process(home: Path) -> int:
    """The pid of the `detektiv mcp` process serving `home`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:4] == [b"-m", b"tui", b"mcp"] and \
                f"DETEKTIV_HOME={home}".encode() in environ:
            return int(entry.name)
    raise AssertionError("no detektiv mcp process")


# ---- streamable HTTP -----------------------------------------------------------------------

class HttpServer:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(cli("mcp", "--http", "--port", "0", *args),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True, cwd=ROOT, env={**os.environ, **(env or {})})
        assert self.process.stderr is not None
        line = self.process.stderr.readline()  # waits for the socket to listen
        assert "detektiv mcp: serving http://127.0.0.1:" in line, line
        self.url = line.split("serving ", 1)[1].split()[0]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        assert self.process.stderr is not None
        self.process.stderr.close()


@pytest.fixture
def http_server(home: Path) -> Iterator[Callable[..., HttpServer]]:
    started: list[HttpServer] = []

    def start(*args: str, env: dict[str, str] | None = None) -> HttpServer:
        started.append(HttpServer(*args, env=env))
        return started[-1]

    yield start
    for server in started:
        server.stop()


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"}}}
ACCEPT = {"accept": "application/json, text/event-stream",
          "content-type": "application/json"}


async def test_over_http_the_sdk_client_lists_the_tools_and_rebinding_is_refused(
        http_server: Callable[..., HttpServer]) -> None:
    server = http_server()
    async with Client(server.url) as client:
        assert {t.name for t in (await client.list_tools()).tools} >= {"interrogate"}
        listed = await client.call_tool("sessions", {})
        assert listed.structured_content == {"sessions": [], "more": 0}
    port = server.url.split(":")[2].split("/")[0]
    async with httpx.AsyncClient() as http:
        fine = await http.post(server.url, json=INITIALIZE,
                               headers={**ACCEPT, "origin": f"http://localhost:{port}"})
        assert fine.status_code == 200
        foreign = await http.post(server.url, json=INITIALIZE,
                                  headers={**ACCEPT, "origin": "http://rebind.example"})
        assert foreign.status_code == 403 and "Origin" in foreign.text
        renamed = await http.post(server.url, json=INITIALIZE,
                                  headers={**ACCEPT, "host": f"rebind.example:{port}"})
        assert renamed.status_code == 421 and "Host" in renamed.text


async def test_over_http_a_token_is_required_when_remote_is_allowed(
        http_server: Callable[..., HttpServer]) -> None:
    import httpx2  # the SDK's own HTTP client
    from mcp.client.streamable_http import streamable_http_client

    server = http_server("--allow-remote", env={"DETEKTIV_MCP_TOKEN": "s3cret-token"})
    async with httpx.AsyncClient() as http:
        refused = await http.post(server.url, json=INITIALIZE, headers=ACCEPT)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        wrong = await http.post(server.url, json=INITIALIZE,
                                headers={**ACCEPT, "authorization": "Bearer guess"})
        assert wrong.status_code == 401
    headers = {"authorization": "Bearer s3cret-token"}
    async with httpx2.AsyncClient(headers=headers) as http2, \
            Client(streamable_http_client(server.url, http_client=http2)) as client:
        assert "interrogate" in {t.name for t in (await client.list_tools()).tools}


def test_a_remote_address_needs_allow_remote_and_http_options_need_http(home: Path) -> None:
    from tests.support.cli import detektiv

    remote = detektiv("mcp", "--http", "--host", "10.20.30.40", "--port",
                      str(closed_port()))
    assert remote.returncode == 2
    assert "10.20.30.40 is not a loopback address; add --allow-remote" in remote.stderr
    stray = detektiv("mcp", "--port", "9999")
    assert stray.returncode == 2 and "go with --http" in stray.stderr
