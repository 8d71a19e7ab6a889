"""Small windows and busy servers (issue 55): a session never fails on our own arithmetic.

- a retry gives up its room first (its quoted reply, then its notes), before any round;
- a retry that fits no window ends the retry, not the session; a call that fits no provider
  of its chain says so as `WindowTooSmall`, in one line;
- a whole session on a 1,024-token llama.cpp slot, and through the recorded gateway, never
  ends `failed`;
- a server's slots are held inside detektiv (a call's deadlines start when it is sent), and a
  server that says it is working is waited for, never failed over nor counted against the
  breaker.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine import Config, Paths
from engine.context.budget import Prompt
from engine.context.fit import DoesNotFit, Trim
from engine.errors import AllProvidersFailed, WindowTooSmall
from engine.models.events import Finished, TrailAdded
from engine.providers import Done, Message, StreamRequest
from engine.routing.events import Attempt
from engine.routing.router import Router
from engine.storage.sessions import SessionStore
from tests.support.captures import capture_server
from tests.support.interrogation import interrogate, make_config
from tests.support.scripted import KEEP_ASKING, ScriptedModel, detective, sse
from tests.support.servers import LlamaServer, local_server
from tests.support.wire import Recorded, Reply, WireServer

# ---- 1. a retry gives up its room first ----------------------------------------------------


def _rounds_prompt(room_for_all: int) -> Prompt:
    """A prompt whose rounds are whole within `room_for_all` tokens, digested below it."""

    def compose(limit: int, count: Callable[[str], int]) -> tuple[list[Message], Trim]:
        if limit >= room_for_all:
            return [Message("user", "every round whole")], Trim()
        if limit >= room_for_all // 2:
            return [Message("user", "rounds digested")], Trim(digested=(2, 3))
        raise DoesNotFit(room_for_all // 2, limit)

    return Prompt(StreamRequest.of("unused"), compose=compose)


def _words(n: int) -> str:
    return " ".join(["word"] * n)


def test_a_retry_gives_up_its_quoted_reply_and_notes_before_any_round() -> None:
    def count(text: str) -> int:
        return len(text.split())

    reply = _words(300)
    retry = "That reply broke a rule: it is not JSON. Reply again with one JSON value only."
    prompt = _rounds_prompt(400).then(Message("assistant", reply), Message("user", retry))

    # room for everything: sent as asked
    messages, trim = prompt.messages(2000, count)
    assert not trim and messages[-2].content == reply and messages[-1].content == retry

    # the rounds would need cutting beside the whole quoted reply: the reply is shortened
    # to its opening first, and every round stays whole
    messages, trim = prompt.messages(600, count)
    assert not trim and messages[0].content == "every round whole"
    quoted = [m for m in messages if m.role == "assistant"]
    assert quoted and len(quoted[0].content) < len(reply) and "chars cut" in quoted[0].content

    # tighter: the quoted reply goes, the retry's words stay as a note on the last turn
    messages, trim = prompt.messages(430, count)
    assert not trim and not any(m.role == "assistant" for m in messages)
    assert messages[-1].content.endswith(retry)

    # tighter still: the note keeps its first sentence
    messages, trim = prompt.messages(410, count)
    assert not trim and messages[-1].content.endswith("it is not JSON.")

    # only then do rounds give way, with the lightest retry
    messages, trim = prompt.messages(300, count)
    assert trim.digested == (2, 3) and messages[-1].content.endswith("it is not JSON.")

    # and what cannot fit at all says what it needs, measured
    with pytest.raises(DoesNotFit) as caught:
        prompt.messages(100, count)
    assert caught.value.needed > 100


async def test_a_chain_whose_every_window_is_too_small_raises_window_too_small(
        paths: Paths) -> None:
    """No provider failed: the prompt fits none. A chain where one provider was down as well
    is the usual failure."""
    with ScriptedModel(["ok"], window=512) as small:
        request = StreamRequest.of(_words(2000), max_tokens=16)
        config = Config.model_validate({"providers": {
            "a": _scripted(small, 1), "b": _scripted(small, 2)}})
        router = Router(config, paths, persist=False)
        try:
            with pytest.raises(WindowTooSmall) as caught:
                async for _ in router.stream(request):
                    pass
        finally:
            await router.aclose()
        assert [name for name, _ in caught.value.failures] == ["a", "b"]
        assert all("context window" in why for _, why in caught.value.failures)
        assert "\n" not in caught.value.message

        config = Config.model_validate({"providers": {
            "a": _scripted(small, 1),
            "dead": {"kind": "openai", "model": "m", "priority": 2,
                     "base_url": f"http://127.0.0.1:{_closed_port()}/v1"}}})
        router = Router(config, paths, persist=False)
        try:
            with pytest.raises(AllProvidersFailed) as failed:
                async for _ in router.stream(request):
                    pass
        finally:
            await router.aclose()
        assert not isinstance(failed.value, WindowTooSmall)


def _scripted(model: WireServer, priority: int) -> dict[str, Any]:
    return {"kind": "openai", "model": "scripted", "base_url": model.url + "/v1",
            "priority": priority}


def _closed_port() -> int:
    from tests.support.servers import closed_port

    return closed_port()


# ---- 2. a retry that fits no window ends the retry, not the session -------------------------

async def test_a_gap_analysis_whose_retry_fits_no_window_ends_the_retry_not_the_session(
        paths: Paths) -> None:
    """The analysis answers a JSON string as long as the window: the rule it broke quotes it,
    so the retry cannot fit in any form. The rule's fallback stands in (completeness 0) and
    the session goes on to its end."""
    flood = json.dumps(_words(2500))

    def script(messages: list[dict[str, Any]]) -> str:
        system = messages[0]["content"] if messages else ""
        if system.startswith("You are a detective analysing"):
            return flood
        return detective(messages)

    with ScriptedModel(script, window=2048) as model:
        config = make_config({"m": model.url + "/v1"}, ["m"], ["m"])
        events, _ = await interrogate(config, paths, SessionStore(paths.data_dir / "sessions"),
                                      f"Water boils at 100 C {KEEP_ASKING}", limit=5)
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.status != "failed", finished.reason
    said = [e.entry.reason for e in events if isinstance(e, TrailAdded)]
    assert any("retry does not fit the context window" in line for line in said), said


async def test_a_call_that_fits_no_window_ends_the_session_in_one_line(paths: Paths) -> None:
    """The hypothesis and the instructions alone are larger than the window: nothing of ours
    can help, and the one line says the window."""
    with ScriptedModel(detective, window=512) as model:
        config = make_config({"m": model.url + "/v1"}, ["m"], ["m"])
        events, _ = await interrogate(config, paths, SessionStore(paths.data_dir / "sessions"),
                                      "Water boils at 100 C. " + _words(900), limit=5)
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.status == "failed"
    assert "context window" in finished.reason and "\n" not in finished.reason


# ---- 3. whole sessions on a 1,024-token slot ------------------------------------------------

@pytest.fixture(scope="module")
def slot_1024(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """`local-server --ctx 4096 --parallel 4`: 1,024 tokens a request, the tiny model
    speaking for itself."""
    with local_server(tmp_path_factory.mktemp("slot-1024"), "--parallel", "4",
                      "--ctx", "4096") as server:
        yield server


async def test_a_whole_session_on_a_1024_token_slot_never_fails(
        slot_1024: LlamaServer, paths: Paths) -> None:
    """The real tiny model in both roles with the shipped budgets (a question 256 tokens, an
    analysis and the audit 1,024: more than the window leaves): whatever it says, the run
    ends by a rule, never `failed`."""
    config = Config.model_validate({
        "providers": {"slot": {"kind": "openai", "model": "gemma", "priority": 1,
                               "base_url": slot_1024.base}},
        "roles": {"detective": ["slot"], "witness": ["slot"]},
        "interrogation": {"temperature": 0}})
    events, _ = await interrogate(config, paths, SessionStore(paths.data_dir / "sessions"),
                                  "Water boils at 100 °C at sea level.", limit=5)
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.status != "failed", finished.reason
    fits = [e for e in events if type(e).__name__ == "ContextFitted"]
    assert fits and all(e.fit.window == 1024 for e in fits)  # type: ignore[attr-defined]


async def test_a_testimony_of_several_claims_on_a_1024_token_slot_never_fails(
        slot_1024: LlamaServer, paths: Paths) -> None:
    """A pasted paragraph is a testimony: split into claims (the split's worked examples take
    half the window) and each examined, on the same 1,024-token slot."""
    config = Config.model_validate({
        "providers": {"slot": {"kind": "openai", "model": "gemma", "priority": 1,
                               "base_url": slot_1024.base}},
        "roles": {"detective": ["slot"], "witness": ["slot"]},
        "interrogation": {"temperature": 0, "max_claims": 2}})
    events, _ = await interrogate(
        config, paths, SessionStore(paths.data_dir / "sessions"),
        "Vitamin B3 helps the body turn food into energy. It also keeps the skin healthy, "
        "and doctors use it to lower cholesterol.", limit=5)
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.status != "failed", finished.reason
    assert any(type(e).__name__ == "ClaimsSplit" for e in events)


async def test_an_oracle_consulted_on_a_1024_token_slot_answers(
        slot_1024: LlamaServer, home: Path, tmp_path: Path) -> None:
    """A case whose notes are ten times the window: the oracle is shown what fits and
    answers; nothing fails for the window."""
    from engine import Workspace
    from tests.support.cases import setup_home

    setup_home(home, slot_1024.base)
    workspace = Workspace(Paths.from_env())
    try:
        events = await _oracle_on_long_notes(workspace, tmp_path)
    finally:
        await workspace.aclose()
    _answered(events)


async def _oracle_on_long_notes(workspace: Any, tmp_path: Path) -> list[Any]:
    """The judge oracle consulted on a case whose notes are ten times a 1,024-token window:
    its events."""
    ref = workspace.cases.new_case("Pricing").short_id
    notes = tmp_path / "minutes.txt"
    notes.write_text("We raise the price from 10 to 15 in May, said Alice. " * 400)
    workspace.cases.import_notes(ref, [notes])
    consulted = await workspace.cases.consultation(ref, ["judge"])
    return [e async for e in consulted.events()]


def _answered(events: list[Any]) -> None:
    """The oracle answered once and nothing failed."""
    from engine import OracleFailed, OracleSaved

    assert not [e for e in events if isinstance(e, OracleFailed)], events
    assert len([e for e in events if isinstance(e, OracleSaved)]) == 1


def _stopped_by_its_own_rule(done: Any) -> list[dict[str, Any]]:
    """`detektiv agent --json` ended by a stop reason of the agent's own, never `error`: its
    events."""
    from engine.agent.events import STOP_REASONS

    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, events[-1]
    assert events[-1]["type"] == "stop", events[-1]
    assert events[-1]["reason"] in STOP_REASONS and events[-1]["reason"] != "error", events[-1]
    return events


def test_the_case_agent_on_a_1024_token_slot_stops_for_a_reason_of_its_own(
        slot_1024: LlamaServer, home: Path, paths: Paths) -> None:
    """The agent's instructions, the vault's results and the question on a 1,024-token slot,
    the shipped reply budget: it stops for one of its own reasons, never an error."""
    from engine.storage.sessions import SessionStore as Store
    from tests.support.cli import detektiv
    from tests.support.factory import case_session

    (home / "config.toml").write_text(
        f'[providers.slot]\nkind = "openai"\nmodel = "gemma"\nbase_url = "{slot_1024.base}"'
        '\n\n[agent]\nturn_limit = 3\nmax_tokens = 96\ntemperature = 0\n')
    store = Store.of(paths)
    case_session(store, "Bob was in Paris on Monday",
                 [("Where were you on Monday?", "In Paris, at the Louvre. " * 60)])
    _stopped_by_its_own_rule(
        detektiv("agent", "Which sessions mention Paris?", "--json", timeout=240))


@pytest.mark.parametrize("route", ["openai", "anthropic"])
async def test_a_whole_session_through_the_recorded_gateway_never_fails(
        route: str, paths: Paths) -> None:
    """LiteLLM's recorded replies (the same answer to every call, its usage as counted by
    the real proxy) on a 1,024-token window: the session ends by a rule, never `failed`."""
    name = "litellm-openai-stream" if route == "openai" else "litellm-anthropic-stream"
    with capture_server(name, "litellm-model-info", "litellm-v1-models") as gateway:
        base = gateway.url + "/v1" if route == "openai" else gateway.url
        config = Config.model_validate({
            "providers": {"gw": {"kind": route, "model": "local", "priority": 1,
                                 "base_url": base, "api_key": "sk-capture-master-0000",
                                 "context_window": 1024}},
            "roles": {"detective": ["gw"], "witness": ["gw"]}})
        events, _ = await interrogate(config, paths, SessionStore(paths.data_dir / "sessions"),
                                      "Water boils at 100 °C at sea level.", limit=5)
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.status != "failed", finished.reason


def _gateway_config(route: str, base: str) -> str:
    """A config whose one provider is the recorded gateway on a 1,024-token window."""
    return (f'[providers.gw]\nkind = "{route}"\nmodel = "local"\nbase_url = "{base}"\n'
            'api_key = "sk-capture-master-0000"\ncontext_window = 1024\npriority = 1\n\n'
            '[roles]\ndetective = ["gw"]\nwitness = ["gw"]\noracle = ["gw"]\n\n')


@pytest.mark.parametrize("route", ["openai", "anthropic"])
async def test_a_testimony_oracle_and_agent_through_the_recorded_gateway_never_fail(
        route: str, home: Path, tmp_path: Path) -> None:
    """The other operations through LiteLLM's recorded replies on a 1,024-token window: a
    pasted paragraph (its split is the recorded answer: no usable claim, named), an oracle on
    notes ten times the window, the case agent. None ends for the window or as an error."""
    from engine import Workspace
    from tests.support.cases import TEST_ORACLE
    from tests.support.cli import detektiv

    name = "litellm-openai-stream" if route == "openai" else "litellm-anthropic-stream"
    with capture_server(name, "litellm-model-info", "litellm-v1-models") as gateway:
        base = gateway.url + "/v1" if route == "openai" else gateway.url
        (home / "config.toml").write_text(_gateway_config(route, base) + (
            "[agent]\nturn_limit = 2\nmax_tokens = 96\n"))
        (home / "config.toml").chmod(0o600)  # it holds the (recorded) key
        (home / "oracles").mkdir(exist_ok=True)
        (home / "oracles" / "judge.md").write_text(TEST_ORACLE.format(name="Judge", tokens=24))
        workspace = Workspace(Paths.from_env())
        try:
            run = workspace.sessions.start(
                "Vitamin B3 helps the body turn food into energy. It also keeps the skin "
                "healthy, and doctors use it to lower cholesterol.", 5)
            events = [event async for event in run.events()]
            answers = await _oracle_on_long_notes(workspace, tmp_path)
        finally:
            await workspace.aclose()
        done = detektiv("agent", "Which sessions mention vitamins?", "--json", timeout=240)
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.status != "failed", finished.reason
    _answered(answers)
    _stopped_by_its_own_rule(done)


# ---- 4. a server's slots, held inside detektiv ----------------------------------------------

class _Counting(WireServer):
    """A chat server that answers slowly and counts the requests it serves at once."""

    def __init__(self, seconds: float, slots: int | None = None) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.seconds = seconds
        self.asked_slots = 0
        routes: dict[str, Any] = {"POST /v1/chat/completions": self._chat}
        if slots is not None:  # as llama.cpp says them
            routes["GET /props"] = self._props
            self.slots = slots
        super().__init__(routes)

    def _props(self, recorded: Recorded) -> Reply:
        from tests.support.wire import json_reply

        self.asked_slots += 1
        return json_reply({"default_generation_settings": {"n_ctx": 4096},
                           "total_slots": self.slots})

    def _chat(self, recorded: Recorded) -> Reply:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        reply = sse("answered")
        # the first token a little after the request is taken, the end a second later
        body = [self.seconds * 0.3, *list(reply.body)[:1], self.seconds * 0.7,
                *list(reply.body)[1:]]

        def chunks() -> Iterator[bytes]:
            try:
                yield from body
            finally:
                with self.lock:
                    self.now -= 1
        return Reply(reply.status, reply.headers, chunks())


async def test_calls_past_a_server_s_slots_wait_inside_detektiv_their_deadlines_not_running(
        paths: Paths) -> None:
    """One slot configured, three calls at once, each 2 s long, a first token due within
    1 s of being sent: the server never serves two at once, and none of the calls that
    waited for the slot (up to 4 s) timed out."""
    with _Counting(2.0) as server:
        config = Config.model_validate({"providers": {"one": {
            "kind": "openai", "model": "m", "base_url": server.url + "/v1", "slots": 1,
            "first_token_timeout": 1, "priority": 1}}})
        router = Router(config, paths, persist=False)
        try:
            async def one() -> str:
                return (await router.complete(StreamRequest.of("hi"))).text
            started = time.monotonic()
            texts = await asyncio.gather(one(), one(), one())
            took = time.monotonic() - started
        finally:
            await router.aclose()
    assert texts == ["answered"] * 3
    assert server.most == 1
    assert took >= 5.5  # one after another: the last waited two calls long, never timed out


async def test_a_server_is_asked_its_slots_only_when_calls_meet(paths: Paths) -> None:
    """Calls one after another never wait and cost the server no question of their own;
    when calls meet, the server's `/props` is asked once, and its two slots are kept."""
    with _Counting(1.0, slots=2) as server:
        config = Config.model_validate({"providers": {"one": {
            "kind": "openai", "model": "m", "base_url": server.url + "/v1",
            "priority": 1}}})
        router = Router(config, paths, persist=False)
        try:
            async def one() -> str:
                return (await router.complete(StreamRequest.of("hi"))).text
            assert await one() == "answered"
            assert await one() == "answered"
            before = server.asked_slots  # what finding the window asked, if anything
            texts = await asyncio.gather(one(), one(), one())
        finally:
            await router.aclose()
    assert texts == ["answered"] * 3
    assert server.asked_slots == before + 1 and server.most == 2


async def test_a_call_cancelled_while_it_waits_for_a_slot_leaves_the_queue() -> None:
    from engine.providers._slots import SlotGate

    gate = SlotGate(1, known=True)
    first = await gate.acquire()
    assert await gate.acquire() is first and gate.in_flight == 1  # nested in the same task
    gate.release(first)
    assert gate.in_flight == 1  # the outer one still holds it
    waiting = asyncio.ensure_future(gate.acquire())
    behind = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)
    assert gate.waiting == 2
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert gate.waiting == 1
    gate.release(first)  # to the one still waiting, not the cancelled one
    holder = await asyncio.wait_for(behind, 5)
    assert gate.in_flight == 1 and gate.waiting == 0
    gate.release(holder)
    assert gate.in_flight == 0


def _hold(base: str, seconds_of_tokens: int, started: threading.Event) -> threading.Thread:
    """Another process's request (a client of its own) that keeps one slot busy."""
    root = base.removesuffix("/v1")

    def run() -> None:  # llama.cpp's own endpoint: it keeps generating past an end of text
        with httpx.Client(timeout=300) as client, client.stream(
                "POST", f"{root}/completion", json={
                    "prompt": "Once upon a time", "n_predict": seconds_of_tokens,
                    "ignore_eos": True, "stream": True, "temperature": 1.0}
        ) as reply:
            for _ in reply.iter_raw():
                started.set()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


async def test_a_server_whose_slots_another_process_holds_is_waited_for_not_failed_over(
        slot_1024: LlamaServer, paths: Paths) -> None:
    """All four slots busy with another client's long answers: our call waits in the
    server's queue past its first-token deadline. The server says it is working (`/slots`),
    so the call is neither failed over to the next provider nor counted against the breaker."""
    holders = []
    for _ in range(4):
        started = threading.Event()
        holders.append((_hold(slot_1024.base, 600, started), started))
    for _, started in holders:
        assert await asyncio.to_thread(started.wait, 120)
    with ScriptedModel(["from the fallback"]) as fallback:
        config = Config.model_validate({"providers": {
            "busy": {"kind": "openai", "model": "gemma", "base_url": slot_1024.base,
                     "priority": 1, "first_token_timeout": 1, "stall_timeout": 1,
                     "timeout": 280},
            "fallback": _scripted(fallback, 2)}})
        router = Router(config, paths, persist=False)
        try:
            sent = time.monotonic()
            events = [e async for e in router.stream(StreamRequest.of("Say hello.",
                                                                      max_tokens=8))]
            waited = time.monotonic() - sent
            state = router.states["busy"]
        finally:
            await router.aclose()
    kinds = [getattr(e, "type", "") for e in events]
    assert "provider_switch" not in kinds and "timeout" not in kinds, kinds
    assert isinstance(events[-1], Done)  # answered, by the busy server itself
    assert [e.provider for e in events if isinstance(e, Attempt)] == ["busy"]
    assert fallback.turn == 0
    assert state.consecutive_failures == 0
    assert waited > 1  # it did wait past the first-token deadline: the server said it worked
    for thread, _ in holders:
        thread.join(timeout=300)




# ---- 5. errors in one line, with what to do -------------------------------------------------

def test_an_excerpt_is_cut_at_a_word_boundary_never_inside_a_number() -> None:
    from engine.providers._http import LINE_SHOWN, first_line

    message = ('{"error":{"code":400,"message":"the request exceeds the available context '
               'size, try increasing it","type":"exceed_context_size_error",'
               '"n_prompt_tokens":1200,"n_ctx":1024}} ') * 3
    shown = first_line(message)
    cut = shown.removesuffix(" (the whole message is in the log)")
    assert cut.endswith("…") and len(cut) <= LINE_SHOWN
    kept = cut.removesuffix("…")
    assert message.startswith(kept)
    following = message[len(kept)]
    assert following in " ,;", (kept[-20:], following)  # the cut fell between words


def test_a_whole_endpoint_pasted_as_base_url_is_named_with_the_fix() -> None:
    from engine.providers._http import path_hint

    said = path_hint(404, "openai", "http://127.0.0.1:4000/v1/chat/completions",
                     "/chat/completions")
    assert 'base_url = "http://127.0.0.1:4000/v1"' in said
    said = path_hint(404, "anthropic", "http://127.0.0.1:4000/v1/messages", "/v1/messages")
    assert 'base_url = "http://127.0.0.1:4000"' in said
    assert path_hint(404, "openai", "http://127.0.0.1:4000/v1", "/chat/completions") == ""


async def test_a_refused_connection_names_the_host_and_port(paths: Paths) -> None:
    from engine.errors import ProviderConnectionError
    from engine.providers import create_provider
    from tests.support.servers import closed_port

    port = closed_port()
    provider = create_provider("gw", Config.model_validate({"providers": {"gw": {
        "kind": "openai", "model": "m", "base_url": f"http://127.0.0.1:{port}/v1",
        "slots": 1}}}).providers["gw"], paths)
    try:
        with pytest.raises(ProviderConnectionError) as caught:
            async for _ in provider.stream(StreamRequest.of("hi")):
                pass
    finally:
        await provider.aclose()
    said = caught.value.detail
    assert said.startswith(f"cannot connect to 127.0.0.1:{port}"), said
    assert "is the server running" in said and "ConnectError" not in said, said


async def test_a_first_prompt_the_bound_refuses_but_the_estimate_fits_is_sent(
        paths: Paths) -> None:
    """Through a gateway nothing has measured yet, a prompt of about 700 tokens in a 1,024
    window: the a-priori bound (the worst tokenizer's) leaves no room, the estimate does. It
    is sent, its reply's room lowered and said so, and the gateway answers it; what it
    reports then measures the rest."""
    from engine.context.budget import fit
    from engine.providers import create_provider

    text = " ".join(["river"] * 720)
    with capture_server("litellm-openai-stream", "litellm-model-info",
                        "litellm-v1-models") as gateway:
        provider = create_provider("gw", Config.model_validate({"providers": {"gw": {
            "kind": "openai", "model": "sized", "base_url": gateway.url + "/v1",
            "api_key": "sk-capture-master-0000"}}}).providers["gw"], paths)
        try:
            fitted = await fit(provider, StreamRequest.of(text, max_tokens=256))
            events = [e async for e in provider.stream(fitted.request)]
        finally:
            await provider.aclose()
    report = fitted.report
    assert report.window == 1024 and report.counted == "estimate"
    assert report.reply_lowered and report.reply < 256
    assert fitted.request.messages[-1].content == text  # whole, as asked
    assert isinstance(events[-1], Done)


async def test_a_window_configured_too_high_ends_in_one_line_the_window_s(
        paths: Paths) -> None:
    """`context_window` set above what the backend has: LiteLLM refuses the prompt naming
    1,024; fitted to that it cannot fit. What is said is the window's one line, no notice of
    a refit that never happened before it."""
    from engine.routing.events import ProviderEvent
    from tests.support.captures import LONG

    with capture_server("litellm-openai-window-exceeded") as gateway:
        config = Config.model_validate({"providers": {"gw": {
            "kind": "openai", "model": "local", "base_url": gateway.url + "/v1",
            "api_key": "sk-capture-master-0000", "context_window": 100_000}}})
        router = Router(config, paths, persist=False)
        said: list[ProviderEvent] = []
        try:
            with pytest.raises(WindowTooSmall) as caught:
                async for event in router.stream(StreamRequest.of(LONG, max_tokens=24)):
                    if isinstance(event, ProviderEvent):
                        said.append(event)
            windows = await router.windows()
        finally:
            await router.aclose()
    # what `providers` then shows: the window the refusal named, and that it was learned so
    assert (windows["gw"].tokens, windows["gw"].describe()) == (1024, "learned from its refusal")
    assert [event.type for event in said] == ["context_too_small"], said
    assert "context window of 1024" in said[0].reason
    assert "\n" not in caught.value.message


def test_an_answer_cut_at_a_lowered_limit_says_why_where_it_stops() -> None:
    """The witness's room was lowered to fit the window: the cut-off mark says so; an answer
    cut at the limit it asked for says only that it was cut."""
    from engine.models.events import AnswerCutOff, ContextFitted
    from engine.models.session import ANSWER_CUT_OFF
    from engine.models.trail import ContextFit
    from engine.report.blocks import Block, Narration

    def mark(asked: int | None, reply: int) -> str:
        narration = Narration()
        fit = ContextFit(role="witness", sequence=1, provider="gw:local", used=900,
                         window=1024, window_source="server", counted="estimate",
                         reply=reply, asked_reply=asked)
        narration.pieces(ContextFitted(fit=fit))
        pieces = narration.pieces(AnswerCutOff(sequence=1, provider="gw:local"))
        assert len(pieces) == 1 and isinstance(pieces[0], Block)
        return pieces[0].text

    assert mark(256, 60) == (f"{ANSWER_CUT_OFF} (60 tokens, lowered from 256 to fit "
                             "gw:local's context window of 1,024)")
    assert mark(None, 256) == ANSWER_CUT_OFF


async def test_a_deadline_on_a_working_server_moves_on_up_to_the_whole_reply_s() -> None:
    """Past its first-token or between-tokens deadline, a stream whose server says it is
    working (another slot's prompt taken in first) is waited for, a deadline at a time, up to
    the reply's whole deadline; a server that says it is idle (or cannot say) times out at
    once."""
    from engine.providers._deadline import Deadline

    async def waited(working: bool, until: float) -> tuple[float, int]:
        asked = 0

        async def says() -> bool:
            nonlocal asked
            asked += 1
            return working

        loop = asyncio.get_running_loop()
        watch = Deadline(says)
        started = loop.time()
        watch.wait(started + 0.2, started + until)
        try:
            await asyncio.sleep(30)  # a token that never comes
        except asyncio.CancelledError:
            assert watch.expired and watch.uncancel()
        finally:
            watch.done()
            watch.close()
        return loop.time() - started, asked

    took, asked = await waited(True, 2.5)
    assert 2.45 <= took < 8 and asked >= 2  # asked at 0.2 s, then each second, to the end
    took, asked = await waited(False, 1.0)
    assert took < 0.9 and asked == 1


def test_a_reply_stopped_at_a_lowered_limit_says_so_on_its_stop_line() -> None:
    """`ask`'s note for a reply cut at its limit: the limit's cause when the window lowered
    the room it asked for."""
    from engine.context.budget import FitReport
    from engine.report.stream import CUT_AT_LIMIT, stream_note

    lowered = FitReport(provider="gw:local", used=960, window=1024, window_source="server",
                        counted="estimate", reply=32, asked_reply=256)
    asked = FitReport(provider="gw:local", used=300, window=1024, window_source="server",
                      counted="estimate", reply=256, asked_reply=256)
    assert stream_note(Done("length"), lowered) == (
        f"{CUT_AT_LIMIT}: 32 tokens, lowered from 256 to fit gw:local's context window of "
        "1024 tokens")
    assert stream_note(Done("length"), asked) == CUT_AT_LIMIT
    assert stream_note(Done("length")) == CUT_AT_LIMIT


def test_an_agent_turn_whose_tools_fit_no_window_answers_from_what_was_found(
        home: Path) -> None:
    """A window too small for the agent's instructions with the tools' (900 tokens behind a
    gateway's slack): the turn is made the last one, said in a note, and the agent answers
    rather than failing."""
    from tests.support.cli import detektiv

    with capture_server("litellm-openai-stream", "litellm-model-info",
                        "litellm-v1-models") as gateway:
        (home / "config.toml").write_text(
            _gateway_config("openai", gateway.url + "/v1").replace(
                "context_window = 1024", "context_window = 900")
            + "[agent]\nturn_limit = 3\nmax_tokens = 96\n")
        (home / "config.toml").chmod(0o600)
        done = detektiv("agent", "Which sessions mention vitamins?", "--json", timeout=240)
    events = _stopped_by_its_own_rule(done)
    notes = [e["text"] for e in events if e["type"] == "note"]
    assert any("no room for the tools' instructions" in n for n in notes), notes
