"""The console script, run as a subprocess the way a user runs it."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

from engine import __version__
from tests.support.app import config_text
from tests.support.cli import on_a_terminal
from tests.support.scripted import ScriptedModel
from tests.support.servers import LONG_PROMPT, ROOT, LlamaServer, cli, closed_port
from tests.support.wire import CUT, Reply, WireServer, json_reply

SCHEMA = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "maxLength": 20},
        "certain": {"type": "boolean"},
    },
    "required": ["colour", "certain"],
    "additionalProperties": False,
}


def run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.fixture
def configured(home: Path, llama_server: LlamaServer) -> Path:
    """A config with a dead provider first and the real server second (Done-when setup)."""
    config = home / "config.toml"
    config.write_text(f"""
[providers.dead]
kind = "openai"
base_url = "http://127.0.0.1:{closed_port()}/v1"
model = "gemma"
priority = 1

[providers.localsrv]
kind = "openai"
base_url = "{llama_server.url}"
model = "gemma"
priority = 2
""")
    return config


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_version(home: Path) -> None:
    result = run("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"detektiv {__version__}"


def test_providers_json_lists_health(configured: Path) -> None:
    result = run("providers", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert list(rows) == ["dead", "localsrv", "local"]
    assert rows["localsrv"]["health"]["ok"] is True
    assert rows["localsrv"]["health"]["detail"] == "1 model listed"
    assert rows["dead"]["health"]["ok"] is False
    assert rows["dead"]["priority"] == 1 and rows["dead"]["kind"] == "openai"
    assert rows["local"]["health"]["ok"] is True and rows["local"]["origin"] == "default"
    # each window with where it came from: the server's own word, the embedded model's
    # settings, the kind's default for a server that did not answer
    assert rows["localsrv"]["window"]["said_by"] == "llama.cpp's /props"
    assert rows["localsrv"]["window"]["tokens"] > 0
    assert rows["local"]["window"]["said_by"] == "n_ctx / n_parallel"
    assert rows["dead"]["window"] == {"tokens": 8192, "source": "default",
                                      "said_by": "the kind's default", "counted_exactly": False}
    # llama.cpp counts a prompt exactly (its /tokenize); a server that did not answer cannot
    assert rows["localsrv"]["window"]["counted_exactly"] is True


def test_providers_table(configured: Path) -> None:
    result = run("providers")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "MODEL", "PRIO", "HEALTH", "CHECK", "CIRCUIT",
                                "LATENCY", "WINDOW", "DETAIL"]
    assert "(llama.cpp's /props)" in lines[2] and "(the kind's default)" in lines[1]
    assert lines[1].split()[:7] == ["dead", "openai", "gemma", "1", "down", "list", "closed"]
    # a llama.cpp server is the model's own server: its answer is the model's
    assert lines[2].split()[:7] == ["localsrv", "openai", "gemma", "2", "ok", "server",
                                    "closed"]


def test_ask_streams_to_a_terminal_as_it_arrives(configured: Path) -> None:
    code, pieces = on_a_terminal("ask", "-p", "localsrv", "--max-tokens", "60",
                                 "--temperature", "0", LONG_PROMPT)
    ended_at = time.monotonic()
    assert code == 0
    assert len(b"".join(piece for _, piece in pieces)) > 20
    # 60 tokens take well over a second here: the first byte was printed long before the end.
    assert ended_at - pieces[0][0] > 0.5


def test_ask_into_a_file_after_a_failover_mid_answer_holds_only_the_answer_that_won(
        home: Path, tmp_path: Path) -> None:
    """The first provider streams half an answer and breaks; the second answers. A terminal
    saw the discarded start (and a note); a file gets the answer that won, alone."""
    def broken(_: object) -> Reply:
        chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": "DISCARDED START of a"},
                              "finish_reason": None}]}
        return Reply(200, {"content-type": "text/event-stream"},
                     [f"data: {json.dumps(chunk)}\n\n".encode(), CUT])

    with WireServer({"POST /v1/chat/completions": broken}) as first, \
            ScriptedModel(["The whole answer that won."]) as second:
        (home / "config.toml").write_text(config_text(
            {"first": first.url + "/v1", "second": second.url + "/v1"}, ["first"], ["second"]))
        out = tmp_path / "out.txt"
        with out.open("w") as handle:
            result = subprocess.run(cli("ask", "hello"), stdout=handle, stderr=subprocess.PIPE,
                                    text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "The whole answer that won.\n"
    assert "discarded" in result.stderr


def test_ask_with_schema_prints_valid_json(configured: Path, tmp_path: Path) -> None:
    schema_file = tmp_path / "s.json"
    schema_file.write_text(json.dumps(SCHEMA))
    result = run("ask", "-p", "localsrv", "--schema", str(schema_file), "--temperature", "0",
                 "--max-tokens", "100", "Name a colour as JSON.")
    assert result.returncode == 0, result.stderr
    jsonschema.validate(json.loads(result.stdout), SCHEMA)


def test_ask_adhoc_local_model(home: Path) -> None:
    result = run("ask", "-p", "local:gemma-3-270m", "--max-tokens", "12", "--temperature", "0",
                 LONG_PROMPT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    assert "\x1b" not in result.stdout
    assert "llama" not in result.stderr.lower(), "llama.cpp's logging stays off the terminal"


def test_ask_a_dead_provider_is_one_clear_line(configured: Path) -> None:
    line = assert_one_line_error(run("ask", "-p", "dead", "hello"), 3)  # connection
    assert line.startswith("detektiv: error: dead: ")


def test_broken_config_is_one_line_and_exit_2(home: Path) -> None:
    (home / "config.toml").write_text('[providers.x]\nkind = "openai"\nmodel = "m"\n'
                                      'priority = -1\n')
    for args in (["providers"], ["ask", "hi"]):
        line = assert_one_line_error(run(*args), 2)
        assert str(home / "config.toml") in line and "providers.x.priority" in line


def test_the_app_with_a_broken_config_ends_with_one_line_and_exit_2(home: Path) -> None:
    """The app validates its config right after the first frame (not before: pydantic is slow
    to load), so the screen opens, closes, and the error is the last line, after the terminal
    is restored."""
    (home / "config.toml").write_text('[providers.x]\nkind = "openai"\nmodel = "m"\n'
                                      'priority = -1\n')
    result = run()
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    last = result.stderr.rsplit("\x1b[?1006l", 1)[-1].strip()  # after the terminal reset
    assert last.startswith(f"detektiv: {home / 'config.toml'}: providers.x.priority")
    assert len(last.splitlines()) == 1


def test_the_app_with_unparsable_toml_never_opens(home: Path) -> None:
    (home / "config.toml").write_text("[ui\n")
    line = assert_one_line_error(run(), 2)
    assert "invalid TOML" in line


def test_unreadable_toml_is_one_line_and_exit_2(home: Path) -> None:
    (home / "config.toml").write_text("[providers.x\n")
    line = assert_one_line_error(run("providers"), 2)
    assert "invalid TOML" in line


def test_explicit_config_flag(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text("[ui]\nunknown = 1\n")
    line = assert_one_line_error(run("providers", "--config", str(other)), 2)
    assert str(other) in line and "ui.unknown" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["ask", "-p", "nonsense", "hi"], "not a configured provider name nor kind:model"),
        (["ask", "--schema", "/nonexistent.json", "hi"], "cannot read"),
        (["ask", "--max-tokens", "0", "hi"], "--max-tokens must be at least 1"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(home: Path, args: list[str], expected: str) -> None:
    assert expected in assert_one_line_error(run(*args), 2)


def test_invalid_schema_file(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "no-such-type"}')
    assert "not a valid JSON schema" in assert_one_line_error(
        run("ask", "--schema", str(bad), "hi"), 2)


def test_local_server_refuses_a_busy_port(home: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = assert_one_line_error(run("local-server", "--port", str(port)), 2)
    assert f"--port {port}: already in use" in line


def test_ask_a_discovered_ollama_by_name(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.wire import json_reply

    tags = {"models": [{"name": "llama3.2", "model": "llama3.2", "modified_at": "2026-11-22T"
                        "10:00:00Z", "size": 1, "digest": "d", "details": {}}]}
    chat = [json.dumps({"model": "llama3.2", "created_at": "2026-11-22T10:00:00Z",
                        "message": {"role": "assistant", "content": text}, "done": done,
                        **({"done_reason": "stop"} if done else {})}) + "\n"
            for text, done in (("Blue", False), (" it is.", False), ("", True))]
    routes = {"GET /api/tags": lambda r: json_reply(tags),
              "POST /api/chat": lambda r: Reply(200, {}, [line.encode() for line in chat])}
    with WireServer(routes) as server:
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{server.port}")
        result = run("ask", "-p", "ollama", LONG_PROMPT)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Blue it is.\n"


def test_ask_without_provider_goes_through_the_router(configured: Path) -> None:
    """The router issue's Done-when: a dead provider first, a running local-server second."""
    result = run("ask", "--max-tokens", "8", "--temperature", "0", LONG_PROMPT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    notes = result.stderr.splitlines()
    assert notes[0].startswith("detektiv: dead: cannot connect")
    assert notes[1] == "detektiv: switching from dead to localsrv"
    for _ in range(2):  # greedy on a prompt the tiny model answers: never an empty answer
        assert run("ask", "--max-tokens", "4", "--temperature", "0", LONG_PROMPT).returncode == 0
    rows = {row["name"]: row for row in json.loads(run("providers", "--json").stdout)}
    assert rows["dead"]["circuit"] == "open" and rows["dead"]["consecutive_failures"] == 3
    assert rows["dead"]["health"]["ok"] is False
    assert rows["localsrv"]["circuit"] == "closed" and rows["localsrv"]["health"]["ok"] is True
    fourth = run("ask", "--max-tokens", "4", "--temperature", "0", LONG_PROMPT)
    assert fourth.returncode == 0
    assert fourth.stderr.splitlines()[0].startswith("detektiv: dead: circuit open; next trial in")


def only_provider_at(home: Path, base_url: str) -> None:
    """A config whose one provider, `a`, is the OpenAI-wire server at `base_url`."""
    (home / "config.toml").write_text(f"""
[providers.a]
kind = "openai"
base_url = "{base_url}"
model = "m"
priority = 1

[providers.local]
kind = "local"
model = "gemma-3-270m"
enabled = false
""")


def test_all_providers_down_is_one_line(home: Path) -> None:
    only_provider_at(home, f"http://127.0.0.1:{closed_port()}/v1")
    result = run("ask", "hi")
    assert result.returncode == 3  # the exit code family of a provider not reached
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "detektiv: error: every provider for default failed — a: cannot connect")
    failed = run("ask", "hi", "--json")
    assert failed.returncode == 3 and failed.stdout == ""
    error = json.loads(failed.stderr.strip().splitlines()[-1])["error"]
    assert error["family"] == "connection" and error["exit_code"] == 3
    assert error["type"] == "AllProvidersFailed"
    assert error["message"].startswith("every provider for default failed — a: cannot connect")


def test_a_run_whose_providers_fail_exits_by_their_family(home: Path) -> None:
    """`run`, `resume` and `watch` exit 3 when a failed session's providers could not be
    reached and 4 when they did not answer in time, as `ask` does; the family is in the
    `finished` record."""
    silent = WireServer({"POST /v1/chat/completions": lambda _: Reply(
        200, {"content-type": "text/event-stream"}, [30.0])})
    with silent:
        for url, code, family in ((f"http://127.0.0.1:{closed_port()}/v1", 3, "connection"),
                                  (f"{silent.url}/v1", 4, "timeout")):
            (home / "config.toml").write_text(
                f'[providers.a]\nkind = "openai"\nmodel = "m"\nbase_url = "{url}"\n'
                'first_token_timeout = 1\n\n[providers.local]\nkind = "local"\n'
                'model = "gemma-3-270m"\nenabled = false\n')
            result = run("run", "Tea contains caffeine", "--json")
            assert result.returncode == code, result.stderr
            records = [json.loads(line) for line in result.stdout.splitlines()]
            finished = records[-1]
            assert finished["type"] == "finished" and finished["status"] == "failed"
            assert finished["family"] == family
            session = records[0]["session_id"]
            assert run("watch", session[:8]).returncode == code
            assert run("resume", session[:8]).returncode == code
            assert "Traceback" not in result.stderr


def test_a_provider_that_never_answers_exits_4_and_usage_exits_2(home: Path) -> None:
    silent = WireServer({"POST /v1/chat/completions": lambda _: Reply(
        200, {"content-type": "text/event-stream"}, [30.0])})
    with silent:
        (home / "config.toml").write_text(
            f'[providers.mute]\nkind = "openai"\nmodel = "m"\n'
            f'base_url = "{silent.url}/v1"\nfirst_token_timeout = 1\n')
        result = run("ask", "-p", "mute", "hi")
    assert result.returncode == 4, result.stderr  # the timeout family
    assert "mute" in result.stderr
    usage = run("ask", "-p", "nope:x", "hi", "--json")
    assert usage.returncode == 2
    assert json.loads(usage.stderr)["error"]["family"] == "usage"


@pytest.mark.parametrize("field", [None, "reasoning_content"])
def test_ask_prints_only_the_answer_of_a_reasoning_model(home: Path, field: str | None) -> None:
    """A think block split over chunks (or the wire's reasoning field) before the answer: the
    answer alone goes to stdout, in a file and on a terminal alike."""
    reply = "<think>Is the moon made of cheese? {\"verdict\": \"true\"}</think>\n\nThe Seine."
    with ScriptedModel([reply], reasoning_field=field) as model:
        (home / "config.toml").write_text(
            f'[providers.r1]\nkind = "openai"\nbase_url = "{model.url}/v1"\nmodel = "m"\n')
        piped = run("ask", "-p", "r1", "Which river flows through Paris?")
        code, pieces = on_a_terminal("ask", "-p", "r1", "Which river?")
        shown = b"".join(piece for _, piece in pieces)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == "The Seine.\n"
    assert "cheese" not in piped.stderr
    assert code == 0 and shown.decode().strip() == "The Seine."


def test_ask_p_twice_reaches_the_server_once_and_json_carries_usage_and_cost(
        home: Path) -> None:
    """A provider named with -p is a chain of one: cached like any other (docs/guide.md), and
    `--json` says what the answer used and cost, as the conversation store keeps it."""
    from engine import Paths, Workspace

    with ScriptedModel(["Tea has caffeine."], usage=(120, 9)) as model:
        (home / "config.toml").write_text(f"""
[providers.paid]
kind = "openai"
base_url = "{model.url}/v1"
model = "m"

[prices.paid]
input = 2.0
output = 8.0
""")
        first = run("ask", "-p", "paid", "Does tea contain caffeine?", "--json")
        second = run("ask", "-p", "paid", "Does tea contain caffeine?", "--json")
        assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
        assert len(model.chats) == 1  # the second answer came from the cache
    asked, again = json.loads(first.stdout), json.loads(second.stdout)
    assert asked["answer"] == again["answer"] == "Tea has caffeine."
    assert again["provider"] == "cache" and asked["provider"].startswith("paid")
    usage = asked["usage"]
    assert (usage["prompt"], usage["completion"], usage["estimated"]) == (120, 9, False)
    assert usage["cost"] == pytest.approx((120 * 2 + 9 * 8) / 1e6)
    served = again["usage"]  # from the cache: no call, no tokens
    assert (served["prompt"], served["completion"], served["cost"]) == (0, 0, 0.0)
    store = Workspace(Paths.from_env()).conversations
    try:
        turns = store.turns("cli", asked["conversation"])
    finally:
        store.close()
    assert turns[-1].meta["usage"]["cost"] == pytest.approx(usage["cost"])
    assert turns[-1].meta["usage"]["prompt"] == 120


def test_a_servers_words_reach_the_terminal_without_its_control_sequences(home: Path) -> None:
    """An error message and a health detail are a server's words: a title change, a
    clipboard write or a right-to-left override in them never reaches the terminal."""
    hostile = "\x1b]0;owned\x07\x1b]52;c;SGVsbG8=\x07boom\u202e\x1b[2J"
    error = {"error": {"message": hostile, "type": "server_error"}}
    routes = {"POST /v1/chat/completions": lambda r: json_reply(error, 500),
              "GET /v1/models": lambda r: json_reply(error, 500)}
    with WireServer(routes) as server:
        only_provider_at(home, f"{server.url}/v1")
        asked = run("ask", "hi")
        listed = run("providers")
    for result in (asked, listed):
        shown = result.stdout + result.stderr
        assert "boom" in shown, shown
        assert not any(c in shown for c in "\x1b\x07\u202e"), repr(shown)
