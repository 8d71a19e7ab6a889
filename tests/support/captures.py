"""Real exchanges with gateways, recorded once and replayed on loopback by the suite.

    make captures                    # where LiteLLM's proxy is installed: records them again
    python -m tests.support.captures --litellm /path/to/litellm

Recording starts `detektiv local-server` (its default shipped model on llama.cpp, a small
window so a long prompt overflows it), LiteLLM's proxy in front of it (an OpenAI-wire model
`local`, a model `dead` whose backend is a closed port, a model `victim` whose backend is
killed mid-answer, a model `sized` whose window LiteLLM is told), and sends each exchange of
`EXCHANGES`: the OpenAI and Anthropic routes, streamed and not, and their errors (a wrong key,
the backend down, the window exceeded, the backend killed mid-stream, a wrong base URL); what
detektiv asks of a gateway beside the chat (`/model/info`, `/v1/models`, `/health` of a live
and a dead model, `/utils/token_counter`); then llama.cpp's own `/v1/messages`. Each reply is
written to `tests/data/captures/NAME.json` byte for byte (as text), with the versions it came
from.
Every address is 127.0.0.1; the keys are made up for the recording.

`capture_server(name)` serves one recorded reply on loopback, as a `WireServer`: the suite
meets the gateway's real bytes without LiteLLM installed (tests/engine/test_captures.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.lifeline import spawn_tied
from tests.support.servers import stop
from tests.support.wire import CUT, Reply, WireServer

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "data" / "captures"
MASTER_KEY = "sk-capture-master-0000"
"""The proxy's key during a recording (made up; nothing else accepts it)."""
WINDOW = 1024
"""The local server's window per slot: `window-exceeded` sends more."""
LONG = "Tell me everything about rivers, their sources and their mouths. " * 120


@dataclass
class Exchange:
    """One request to record: where it goes (`proxy` or `llama`), and what it sends."""

    name: str
    target: str
    path: str
    body: dict[str, Any] | None
    key: str = MASTER_KEY
    kill_after_first_chunk: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "POST"


def _chat(model: str, text: str, stream: bool, max_tokens: int = 24) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}],
                            "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _messages(model: str, text: str, stream: bool, max_tokens: int = 24) -> dict[str, Any]:
    return {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": stream,
            "messages": [{"role": "user", "content": text}]}


ANTHROPIC = {"anthropic-version": "2023-06-01"}
QUESTION = "The river that flows through Paris is called"

EXCHANGES = [
    Exchange("litellm-openai-stream", "proxy", "/v1/chat/completions",
             _chat("local", QUESTION, True)),
    Exchange("litellm-openai-whole", "proxy", "/v1/chat/completions",
             _chat("local", QUESTION, False)),
    Exchange("litellm-anthropic-stream", "proxy", "/v1/messages",
             _messages("local", QUESTION, True), headers=ANTHROPIC),
    Exchange("litellm-anthropic-whole", "proxy", "/v1/messages",
             _messages("local", QUESTION, False), headers=ANTHROPIC),
    Exchange("litellm-anthropic-stream-at-max-tokens", "proxy", "/v1/messages",
             _messages("local", "Write a long story about a river.", True, max_tokens=8),
             headers=ANTHROPIC),
    Exchange("litellm-openai-wrong-key", "proxy", "/v1/chat/completions",
             _chat("local", QUESTION, True), key="sk-not-the-key"),
    Exchange("litellm-anthropic-wrong-key", "proxy", "/v1/messages",
             _messages("local", QUESTION, True), key="sk-not-the-key", headers=ANTHROPIC),
    Exchange("litellm-openai-backend-down", "proxy", "/v1/chat/completions",
             _chat("dead", QUESTION, True)),
    Exchange("litellm-anthropic-backend-down", "proxy", "/v1/messages",
             _messages("dead", QUESTION, True), headers=ANTHROPIC),
    Exchange("litellm-openai-window-exceeded", "proxy", "/v1/chat/completions",
             _chat("local", LONG, True)),
    Exchange("litellm-anthropic-window-exceeded", "proxy", "/v1/messages",
             _messages("local", LONG, True), headers=ANTHROPIC),
    Exchange("litellm-openai-backend-killed", "proxy", "/v1/chat/completions",
             _chat("victim", "Write a long story about a river.", True, max_tokens=400),
             kill_after_first_chunk=True),
    # what detektiv asks of a gateway beside the chat: the window, the model's health
    Exchange("litellm-model-info", "proxy", "/model/info", None, method="GET"),
    Exchange("litellm-v1-models", "proxy", "/v1/models", None, method="GET"),
    Exchange("litellm-health-local", "proxy", "/health?model=local", None, method="GET"),
    Exchange("litellm-health-dead", "proxy", "/health?model=dead", None, method="GET"),
    Exchange("litellm-token-counter", "proxy", "/utils/token_counter",
             {"model": "local", "messages": [{"role": "user", "content": LONG}]}),
    # a whole sentence past a max_tokens LiteLLM did not pass on: its stop reason says so
    Exchange("litellm-anthropic-small-limit", "proxy", "/v1/messages",
             _messages("local", "What is the capital of France? Answer in one sentence.", True,
                       max_tokens=5), headers=ANTHROPIC),
    # wrong base URLs: the anthropic kind with /v1 (detektiv adds it), the openai kind
    # without it (LiteLLM serves both /v1 and the root, so a wrong prefix stands for it)
    Exchange("litellm-anthropic-v1-doubled", "proxy", "/v1/v1/messages",
             _messages("local", QUESTION, True), headers=ANTHROPIC),
    Exchange("litellm-openai-wrong-prefix", "proxy", "/api/chat/completions",
             _chat("local", QUESTION, True)),
    Exchange("litellm-openai-wrong-prefix-models", "proxy", "/api/models", None, method="GET"),
    # a whole endpoint pasted as base_url: detektiv adds its path again
    Exchange("litellm-openai-pasted-endpoint", "proxy", "/v1/chat/completions/chat/completions",
             _chat("local", QUESTION, True)),
    Exchange("litellm-anthropic-pasted-endpoint", "proxy", "/v1/messages/v1/messages",
             _messages("local", QUESTION, True), headers=ANTHROPIC),
    # a structured request through each route: its usage counts the schema LiteLLM passes on
    Exchange("litellm-openai-schema", "proxy", "/v1/chat/completions",
             {**_chat("local", "Is water wet? Answer in JSON.", True, max_tokens=40),
              "response_format": {"type": "json_schema", "json_schema": {
                  "name": "answer", "strict": True, "schema": {
                      "type": "object", "properties": {"yes": {"type": "boolean"}},
                      "required": ["yes"], "additionalProperties": False}}}}),
    Exchange("llamacpp-messages-stream", "llama", "/v1/messages",
             _messages("gemma", QUESTION, True), headers=ANTHROPIC),
    Exchange("llamacpp-messages-whole", "llama", "/v1/messages",
             _messages("gemma", QUESTION, False), headers=ANTHROPIC),
]

KEPT_HEADERS = ("content-type", "retry-after")


# ---- replay --------------------------------------------------------------------------------

def load(name: str) -> dict[str, Any]:
    """A recorded exchange (`tests/data/captures/NAME.json`)."""
    data: dict[str, Any] = json.loads((CAPTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


_RECORDED_BACKEND = re.compile(r"http://127\.0\.0\.1:\d+")
"""A loopback server named in a recording (LiteLLM's `api_base`): it is gone at replay."""


def _replay(response: dict[str, Any], here: str) -> Reply:
    """`response` again, the loopback servers it names replaced by `here` (the replaying
    server: asked about itself, it answers 404, where the recorded port may now be anyone's)."""
    body: list[Any] = [_RECORDED_BACKEND.sub(here, chunk).encode("utf-8")
                       for chunk in response["chunks"]]
    if response.get("cut"):
        body.append(CUT)
    return Reply(response["status"], dict(response["headers"]), body)


def capture_server(*names: str) -> WireServer:
    """A loopback server that answers each recorded request's method and path (its query
    left out) with the recorded reply, chunk for chunk (a reply that was cut is cut again).
    Names recorded for the same path are answered in turn, the last one from then on (a
    refusal, then the answer to the request fitted again). A chat or messages path is also
    answered under `/v1`. Any other path is a 404."""
    by_route: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        data = load(name)
        method = data["request"].get("method", "POST")
        path = data["request"]["path"].split("?", 1)[0]
        routes = [f"{method} {path}"]
        if method == "POST" and path in ("/chat/completions", "/messages"):
            routes.append(f"{method} /v1{path}")
        for route in routes:
            by_route.setdefault(route, []).append(data["response"])

    def answers(responses: list[dict[str, Any]]) -> Any:
        served = [0]

        def reply(_: object) -> Reply:
            response = responses[min(served[0], len(responses) - 1)]
            served[0] += 1
            return _replay(response, server.url)
        return reply

    server = WireServer({route: answers(responses) for route, responses in by_route.items()})
    return server


def health_server(model: str) -> WireServer:
    """The gateway as `detektiv providers` meets it: its model list, its model info and its
    health report of `model` (`local`: its backend answers; `dead`: it does not)."""
    return capture_server("litellm-v1-models", "litellm-model-info", f"litellm-health-{model}")


# ---- recording -----------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _local_server(home: Path) -> tuple[subprocess.Popen[str], str]:
    process = spawn_tied(
        [sys.executable, "-m", "tui", "local-server", "--port", "0", "--json", "--parallel",
         "1", "--ctx", str(WINDOW), "--threads", "1"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ,
                                                          "DETEKTIV_HOME": str(home)})
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise SystemExit("local-server ended before it listened")
    return process, json.loads(line)["url"]


def _wait_http(url: str, timeout: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} never answered")


def _record(exchange: Exchange, base: str, victim: subprocess.Popen[str] | None
            ) -> dict[str, Any]:
    import httpx

    headers = {"content-type": "application/json", **exchange.headers}
    if exchange.target == "proxy":
        headers["authorization"] = f"Bearer {exchange.key}"
        headers["x-api-key"] = exchange.key
    chunks: list[str] = []
    cut = False
    with httpx.Client(timeout=120) as client, client.stream(
            exchange.method, base + exchange.path, json=exchange.body,
            headers=headers) as reply:
        try:
            for piece in reply.iter_raw():
                chunks.append(piece.decode("utf-8", "replace"))
                if exchange.kill_after_first_chunk and victim is not None and \
                        victim.poll() is None:
                    victim.send_signal(signal.SIGKILL)
        except httpx.HTTPError:
            cut = True
        kept = {k: v for k, v in reply.headers.items() if k.lower() in KEPT_HEADERS}
        status = reply.status_code
    return {"request": {"method": exchange.method, "path": exchange.path,
                        "body": exchange.body},
            "response": {"status": status, "headers": kept, "chunks": chunks, "cut": cut}}


def _versions(litellm: str) -> dict[str, str]:
    from importlib.metadata import version

    found = subprocess.run([litellm, "--version"], capture_output=True, text=True,
                           timeout=120).stdout
    words = [w for w in found.split() if w[:1].isdigit()]
    return {"litellm": words[0] if words else found.strip()[:40],
            "xllamacpp": version("xllamacpp"), "detektiv": version("detektiv"),
            "model": "SmolLM2-135M-Instruct Q4_1 (local-server's default)"}


def record(litellm: str, only: set[str] | None = None) -> list[Path]:
    """Record every exchange of `EXCHANGES` again (`only`: those named); returns the files
    written."""
    work = Path(tempfile.mkdtemp(prefix="detektiv-captures-"))
    processes: list[subprocess.Popen[Any]] = []
    written: list[Path] = []
    try:
        local, local_url = _local_server(work / "home-local")
        victim, victim_url = _local_server(work / "home-victim")
        processes += [local, victim]
        port = _free_port()
        config = work / "litellm.yaml"
        config.write_text(json.dumps({
            "model_list": [
                {"model_name": "local", "litellm_params": {
                    "model": "openai/gemma", "api_base": local_url, "api_key": "none"}},
                # the same backend with its window told to LiteLLM (`model_info`)
                {"model_name": "sized", "litellm_params": {
                    "model": "openai/gemma", "api_base": local_url, "api_key": "none"},
                 "model_info": {"max_input_tokens": WINDOW, "max_output_tokens": WINDOW}},
                {"model_name": "dead", "litellm_params": {
                    "model": "openai/gemma", "api_base": f"http://127.0.0.1:{_free_port()}/v1",
                    "api_key": "none"}},
                {"model_name": "victim", "litellm_params": {
                    "model": "openai/gemma", "api_base": victim_url, "api_key": "none"}},
            ],
            "litellm_settings": {"num_retries": 0, "request_timeout": 60},
            "general_settings": {"master_key": MASTER_KEY},
        }))
        proxy = spawn_tied(
            [litellm, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            foreign=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        processes.append(proxy)
        proxy_url = f"http://127.0.0.1:{port}"
        _wait_http(proxy_url + "/health/liveliness")
        versions = _versions(litellm)
        CAPTURES.mkdir(parents=True, exist_ok=True)
        for exchange in EXCHANGES:
            if only and exchange.name not in only:
                continue
            base = proxy_url if exchange.target == "proxy" else local_url.removesuffix("/v1")
            data = _record(exchange, base, victim if exchange.kill_after_first_chunk else None)
            data["recorded"] = {"at": datetime.now(UTC).isoformat(timespec="seconds"),
                                "through": "LiteLLM proxy" if exchange.target == "proxy"
                                else "llama.cpp server (detektiv local-server)",
                                **versions}
            path = CAPTURES / f"{exchange.name}.json"
            path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n",
                            encoding="utf-8")
            written.append(path)
            print(f"recorded {exchange.name}: HTTP {data['response']['status']}, "
                  f"{len(data['response']['chunks'])} chunks", flush=True)
    finally:
        for process in processes:
            stop(process, timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description="record the gateway captures again")
    parser.add_argument("--litellm", default=shutil.which("litellm"),
                        help="LiteLLM's proxy command (default: litellm on PATH)")
    parser.add_argument("names", nargs="*", help="record only these exchanges")
    args = parser.parse_args()
    if not args.litellm:
        print("litellm is not installed: pip install 'litellm[proxy]' (in its own "
              "environment), then make captures LITELLM=/path/to/litellm", file=sys.stderr)
        return 2
    record(args.litellm, set(args.names) or None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
