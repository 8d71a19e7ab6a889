"""Reasoning is its own stream: `<think>` blocks written into the answer, and each wire's own
reasoning channel (OpenAI-compatible `reasoning_content` / `reasoning`, Anthropic's
`thinking_delta`, Ollama's `message.thinking`, Gemini's `<thought>` summaries), come out as
`ReasoningDelta`, never as answer text, on loopback servers speaking each wire."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from engine import Config, EvalRequest, Paths, ProviderConfig, Workspace
from engine.evals.datasets import dataset_path
from engine.evals.items import read_items, sample
from engine.interrogation.checks import answer_problem, budget_spent
from engine.providers import (
    Done,
    ReasoningDelta,
    StreamRequest,
    TokenDelta,
    Usage,
    WasReasoning,
    create_provider,
)
from engine.providers._reasoning import ThinkBlocks
from tests.support.evals import detective, knows, witness
from tests.support.interrogation import FAST, make_config
from tests.support.scripted import OPENED, ScriptedModel, ThinkingWire, thinking
from tests.support.wire import Reply, WireServer, json_reply

# ---- the inline splitter -------------------------------------------------------------------

CASES = [
    ("<think>Should I ask about 1991?</think>\n\nWhen did it fall?",
     ("Should I ask about 1991?", "When did it fall?")),
    ("  <THINKING>a</thinking><reasoning>b</reasoning> ok", ("ab", "ok")),
    ("<think>cut off in the middle", ("cut off in the middle", "")),
    ("<think>only thinking</think>", ("only thinking", "")),
    ("An answer that mentions <think> in passing.", ("", "An answer that mentions <think> in "
                                                     "passing.")),
    ("<thought>Gemini's summary</thought>Paris.", ("Gemini's summary", "Paris.")),
    ("<thi", ("", "<thi")),
    ("<think>a </thin b</think>c", ("a </thin b", "c")),
    ("\n\nPlain answer", ("", "\n\nPlain answer")),
    ("Explaining: <think> opens a block, </think> closes it.",
     ("", "Explaining: <think> opens a block, </think> closes it.")),
]


def _fed(text: str, cuts: list[int]) -> tuple[str, str]:
    blocks = ThinkBlocks()
    reasoning, answer = "", ""
    for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
        r, a = blocks.feed(text[start:end])
        reasoning, answer = reasoning + r, answer + a
    r, a = blocks.finish()
    return reasoning + r, answer + a


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_think_blocks_split_the_same_wherever_the_chunks_cut(
        text: str, expected: tuple[str, str]) -> None:
    assert _fed(text, []) == expected  # the whole reply at once
    assert _fed(text, list(range(1, len(text)))) == expected  # a character at a time
    for cut in range(1, len(text)):  # and every cut in two
        assert _fed(text, [cut]) == expected, cut


def test_a_block_never_closed_is_reasoning_cut_at_its_limit() -> None:
    blocks = ThinkBlocks()
    blocks.feed("<think>still weighing")
    assert blocks.unclosed
    assert blocks.finish() == ("", "")


def test_a_budget_spent_thinking_is_named_never_an_empty_answer() -> None:
    assert answer_problem("", "When?", "length", "thinking…") == (
        "the witness spent its whole token budget thinking and gave no reply")
    assert answer_problem("", "When?", "stop") == "no answer"
    assert budget_spent("the detective", "", "length") is not None
    assert budget_spent("the detective", "What year?", "length") is None


# ---- each wire -----------------------------------------------------------------------------

DECOY = ('<think>Maybe ask "Is the sky green?" {"verdict": "true", "probability_false": 0.0}'
         '</think>\n\n')


def openai_chunks(deltas: list[dict[str, Any]], finish: str = "stop",
                  usage: dict[str, Any] | None = None) -> Reply:
    chunks: list[bytes] = []
    for delta in deltas:
        chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        chunks.append(f"data: {json.dumps(chunk)}\n\n".encode())
    end = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
           "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
           **({"usage": usage} if usage else {})}
    chunks += [f"data: {json.dumps(end)}\n\n".encode(), b"data: [DONE]\n\n"]
    return Reply(200, {"content-type": "text/event-stream"}, chunks)


def pieces(text: str, size: int) -> list[dict[str, Any]]:
    return [{"content": text[i:i + size]} for i in range(0, len(text), size)]


async def collect(server: WireServer, paths: Paths, request: StreamRequest | None = None,
                  **config: Any) -> list[Any]:
    values: dict[str, Any] = {"kind": "openai", "model": "m", "base_url": server.url + "/v1"}
    values.update(config)
    provider = create_provider("p", ProviderConfig.model_validate(values), paths)
    try:
        return [e async for e in provider.stream(request or StreamRequest.of("q"))]
    finally:
        await provider.aclose()


def texts(events: list[Any]) -> tuple[str, str]:
    return ("".join(e.text for e in events if isinstance(e, ReasoningDelta)),
            "".join(e.text for e in events if isinstance(e, TokenDelta)))


@pytest.mark.parametrize("size", [1, 3, 7, 64])
async def test_inline_think_blocks_on_the_openai_wire_never_reach_the_answer(
        paths: Paths, size: int) -> None:
    reply = DECOY + "In which year did the Wall fall?"
    with WireServer({"POST /v1/chat/completions":
                     lambda r: openai_chunks(pieces(reply, size))}) as server:
        events = await collect(server, paths)
    reasoning, answer = texts(events)
    assert answer == "In which year did the Wall fall?"
    assert "Is the sky green?" in reasoning and '"verdict": "true"' in reasoning
    assert events[-1] == Done("stop")


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_the_reasoning_field_of_llama_cpp_vllm_and_openrouter(paths: Paths,
                                                                    field: str) -> None:
    deltas = [{field: "Let me think"}, {field: " it over."}, {"content": "Paris."}]
    usage = {"prompt_tokens": 40, "completion_tokens": 30, "total_tokens": 70,
             "prompt_tokens_details": {"cached_tokens": 32},
             "completion_tokens_details": {"reasoning_tokens": 28}}
    with WireServer({"POST /v1/chat/completions":
                     lambda r: openai_chunks(deltas, usage=usage)}) as server:
        events = await collect(server, paths)
    assert texts(events) == ("Let me think it over.", "Paris.")
    assert Usage(40, 30, cached_tokens=32, reasoning_tokens=28) in events


async def test_a_whole_reply_keeps_its_reasoning_apart(paths: Paths) -> None:
    whole = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
             "choices": [{"index": 0, "finish_reason": "stop", "message": {
                 "role": "assistant", "content": "Paris.", "reasoning_content": "Hmm."}}]}
    with WireServer({"POST /v1/chat/completions": lambda r: json_reply(whole)}) as server:
        events = await collect(server, paths)
    assert texts(events) == ("Hmm.", "Paris.")


async def test_hidden_reasoning_is_dropped_but_still_kept_out_of_the_answer(
        paths: Paths) -> None:
    deltas = [{"reasoning_content": "secret"}, *pieces(DECOY + "Answer.", 5)]
    with WireServer({"POST /v1/chat/completions":
                     lambda r: openai_chunks(deltas)}) as server:
        events = await collect(server, paths, reasoning="hide")
    assert texts(events) == ("", "Answer.")


async def test_a_reply_cut_inside_its_reasoning_has_no_answer_and_says_length(
        paths: Paths) -> None:
    with WireServer({"POST /v1/chat/completions": lambda r: openai_chunks(
            pieces("<think>weighing the options and", 4), "length")}) as server:
        events = await collect(server, paths)
    assert texts(events) == ("weighing the options and", "")
    assert events[-1] == Done("length")


async def test_effort_and_gemini_budget_are_asked_for(paths: Paths) -> None:
    with WireServer({"POST /v1/chat/completions":
                     lambda r: openai_chunks(pieces("ok", 2))}) as server:
        await collect(server, paths, reasoning_effort="low", reasoning_budget=512)
    body = server.requests[0].json()
    assert body["reasoning_effort"] == "low"
    # Gemini's OpenAI-compatible endpoint reads it from a literal `extra_body` field
    assert body["extra_body"] == {"google": {"thinking_config": {
        "thinking_budget": 512, "include_thoughts": True}}}


def anthropic_sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_thinking(thoughts: list[str], texts_: list[str]) -> Iterator[bytes]:
    yield anthropic_sse("message_start", {"type": "message_start", "message": {
        "id": "m", "type": "message", "role": "assistant", "content": [], "model": "c",
        "usage": {"input_tokens": 9, "output_tokens": 1}}})
    yield anthropic_sse("content_block_start", {"type": "content_block_start", "index": 0,
                                                "content_block": {"type": "thinking",
                                                                  "thinking": ""}})
    for thought in thoughts:
        yield anthropic_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                    "delta": {"type": "thinking_delta",
                                                              "thinking": thought}})
    yield anthropic_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "signature_delta",
                                                          "signature": "EqQB"}})
    yield anthropic_sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield anthropic_sse("content_block_start", {"type": "content_block_start", "index": 1,
                                                "content_block": {"type": "text", "text": ""}})
    for text in texts_:
        yield anthropic_sse("content_block_delta", {"type": "content_block_delta", "index": 1,
                                                    "delta": {"type": "text_delta",
                                                              "text": text}})
    yield anthropic_sse("content_block_stop", {"type": "content_block_stop", "index": 1})
    yield anthropic_sse("message_delta", {"type": "message_delta",
                                          "delta": {"stop_reason": "end_turn"},
                                          "usage": {"output_tokens": 50}})
    yield anthropic_sse("message_stop", {"type": "message_stop"})


async def test_anthropic_thinking_deltas_and_budget(paths: Paths,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-0123456789")
    route = {"POST /v1/messages": lambda r: Reply(200, {"content-type": "text/event-stream"},
                                                  anthropic_thinking(["Weigh", " it."],
                                                                     ["Par", "is."]))}
    with WireServer(route) as server:
        events = await collect(server, paths, StreamRequest.of("q", max_tokens=100,
                                                               temperature=0.0),
                               kind="anthropic", base_url=server.url,
                               api_key_env="ANTHROPIC_API_KEY", reasoning_budget=2000)
    assert texts(events) == ("Weigh it.", "Paris.")
    body = server.requests[0].json()
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert body["max_tokens"] == 2100 and "temperature" not in body


def ollama_lines(parts: list[dict[str, str]]) -> Iterator[bytes]:
    for part in parts:
        yield (json.dumps({"model": "qwen3", "created_at": "2026-11-26T00:00:00Z",
                           "message": {"role": "assistant", **part}, "done": False})
               + "\n").encode()
    yield (json.dumps({"model": "qwen3", "created_at": "2026-11-26T00:00:00Z",
                       "message": {"role": "assistant", "content": ""}, "done": True,
                       "done_reason": "stop", "prompt_eval_count": 5, "eval_count": 9})
           + "\n").encode()


@pytest.mark.parametrize(("effort", "think"), [("high", "high"), ("off", False), (None, None)])
async def test_ollama_thinking_field_and_think_option(paths: Paths, effort: str | None,
                                                      think: object) -> None:
    parts = [{"content": "", "thinking": "Hmm,"}, {"content": "", "thinking": " yes."},
             {"content": "Paris."}]
    route = {"POST /api/chat": lambda r: Reply(200, {"content-type": "application/x-ndjson"},
                                               ollama_lines(parts))}
    with WireServer(route) as server:
        events = await collect(server, paths, kind="ollama", model="qwen3",
                               base_url=server.url, reasoning_effort=effort)
    assert texts(events) == ("Hmm, yes.", "Paris.")
    assert server.requests[0].json().get("think") == think


# ---- a whole evaluation against reasoning models -------------------------------------------


Script = Callable[[list[dict[str, Any]]], str]
Serve = Callable[[Script, Script], AbstractContextManager[Config]]
"""Serves a detective's and a witness's script on loopback: the config that reaches them."""


def openai_wire(think: bool, field: str | None = None) -> Serve:
    """Both roles on the OpenAI wire, thinking inline (or in `field`) when `think`."""
    wrap = thinking if think else (lambda f: f)

    @contextmanager
    def serve(sleuth: Script, answers: Script) -> Iterator[Config]:
        with ScriptedModel(wrap(sleuth), reasoning_field=field) as det, \
                ScriptedModel(wrap(answers), reasoning_field=field) as wit:
            yield make_config({"det": det.url + "/v1", "wit": wit.url + "/v1"}, ["det"],
                              ["wit"], temperature=0)

    return serve


def thinking_wire(wire: str) -> Serve:
    """Both roles on the Anthropic or Ollama wire, thinking in its own channel."""

    @contextmanager
    def serve(sleuth: Script, answers: Script) -> Iterator[Config]:
        with ThinkingWire(thinking(sleuth), wire) as det, \
                ThinkingWire(thinking(answers), wire) as wit:
            def provider(url: str, priority: int) -> dict[str, Any]:
                extra = {"api_key_env": "ANTHROPIC_API_KEY"} if wire == "anthropic" else {}
                return {"kind": wire, "model": "m", "base_url": url, "priority": priority,
                        "context_window": 32768, "first_token_timeout": 20,
                        "stall_timeout": 10, **extra}

            yield Config.model_validate({
                "providers": {"det": provider(det.url, 1), "wit": provider(wit.url, 2)},
                "roles": {"detective": ["det"], "witness": ["wit"]},
                "interrogation": FAST})

    return serve


async def _evaluate(home: Path, monkeypatch: pytest.MonkeyPatch, serve: Serve
                    ) -> tuple[Any, list[Any], list[Any]]:
    """One evaluation in its own home (the same request in one home would resume the run)."""
    home.mkdir()
    monkeypatch.setenv("DETEKTIV_HOME", str(home))
    paths = Paths.from_env()
    items = sample(read_items(dataset_path(paths, "demo")), 6, 5)
    with serve(detective(knows(items, wrong=[items[0].key])), witness) as config:
        workspace = Workspace(paths, config)
        try:
            run = await workspace.evals.start(EvalRequest("demo", n=6, seed=5, mode="open"),
                                              baselines=True, concurrency=2)
            [event async for event in run.events()]
            summary = workspace.evals.summary(run.id)
            sessions = [workspace.store.load(row.id) for row in workspace.evals.sessions(run.id)]
            events = [workspace.store.events(str(s.id)) for s in sessions]
        finally:
            await workspace.aclose()
    return summary, sessions, events


@pytest.mark.parametrize("field", [None, OPENED, "reasoning_content", "reasoning"],
                         ids=["inline-think-blocks", "template-opened-think-blocks",
                              "reasoning_content", "openrouter-reasoning"])
async def test_an_evaluation_of_reasoning_models_scores_what_it_scores_without(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path, field: str | None) -> None:
    plain, _, _ = await _evaluate(tmp_path / "plain", monkeypatch, openai_wire(False))
    summary, sessions, events = await _evaluate(tmp_path / "thinking", monkeypatch,
                                                openai_wire(True, field))
    for system, metrics in plain.systems.items():
        assert metrics.n == 6 and metrics.failed == 0
        assert summary.systems[system].figures["accuracy"].value == \
            metrics.figures["accuracy"].value, system
    assert plain.systems["interrogation"].figures["accuracy"].value == pytest.approx(5 / 6)
    stored = json.dumps([s.model_dump(mode="json") for s in sessions])
    assert "moon made of cheese" not in stored and "<think>" not in stored
    reasoning = [r.event for log in events for r in log if r.event.type == "reasoning"]
    assert {r.role for r in reasoning} == {"detective", "witness"}
    assert {r.phase for r in reasoning} >= {"question", "answer", "analysis", "audit"}
    # the log may hold a call's reasoning in several records (deltas are batched by time):
    # joined per call, every question's reasoning is the decoy block the model wrote
    from engine.report.blocks import reasoning_by_call

    calls = [reasoning_by_call(r.event for r in log) for log in events]
    asked = [text for found in calls for (phase, _), (_, text) in found.items()
             if phase == "question"]
    assert asked and all("moon made of cheese" in text for text in asked)


async def test_the_window_keeps_room_for_a_reasoning_budget(paths: Paths) -> None:
    """Anthropic spends `reasoning_budget` before the reply, out of the same window: a prompt
    that fits beside the reply alone does not fit beside the reply and the thinking."""
    from engine.context.budget import fit
    from engine.context.fit import DoesNotFit

    def provider(**extra: Any) -> Any:
        return create_provider("a", ProviderConfig(kind="anthropic", model="c",
                                                   base_url="http://127.0.0.1:9",
                                                   api_key="k", context_window=8000, **extra),
                               paths)

    # ~6,500 tokens by the bound, ~4,800 estimated: beside the thinking it fits by neither
    request = StreamRequest.of("word " * 4800, max_tokens=500)
    fitted = await fit(provider(), request)
    assert fitted.report.used + 500 <= 8000
    with pytest.raises(DoesNotFit):
        await fit(provider(reasoning_budget=3000), request)


@pytest.mark.parametrize("wire", ["anthropic", "ollama"])
async def test_an_evaluation_through_anthropic_and_ollama_thinking_scores_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path, wire: str) -> None:
    """The same evaluation with both roles on the Anthropic wire (thinking blocks) or
    Ollama's (`message.thinking`), the decoys inside the thinking: the figures of the plain
    run, nothing of the thinking stored outside its own events."""
    plain, _, _ = await _evaluate(tmp_path / "plain", monkeypatch, openai_wire(False))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    summary, sessions, events = await _evaluate(tmp_path / "wire", monkeypatch,
                                                thinking_wire(wire))
    for system, metrics in plain.systems.items():
        assert summary.systems[system].n == 6 and summary.systems[system].failed == 0
        assert summary.systems[system].figures["accuracy"].value == \
            metrics.figures["accuracy"].value, system
    stored = json.dumps([s.model_dump(mode="json") for s in sessions])
    assert "moon made of cheese" not in stored
    reasoning = [r.event for log in events for r in log if r.event.type == "reasoning"]
    assert {r.role for r in reasoning} == {"detective", "witness"}


# ---- a reply that begins inside its think block (the template opened it) -------------------

OPENED_CASES = [
    ("Weigh 1989 or 1991.\n</think>\n\nWhen did it fall?",
     "Weigh 1989 or 1991.\n", "When did it fall?"),
    ("a</THINK>b", "a", "b"),
    ("</think>Only an answer.", "", "Only an answer."),
    ("all thinking</think>", "all thinking", ""),
    ("x</think>\n<think>more</think> y", "x", "y"),
]


def _opened(text: str, cuts: list[int]) -> tuple[str, str, str, str]:
    """(what went out as answer before the closing tag, `rethought`, reasoning, answer)."""
    blocks = ThinkBlocks()
    before, rethought, reasoning, answer = "", None, "", ""
    for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
        r, a = blocks.feed(text[start:end])
        if blocks.rethought is not None:
            rethought, blocks.rethought = blocks.rethought, None
            before, answer = answer, ""
        reasoning, answer = reasoning + r, answer + a
    r, a = blocks.finish()
    assert rethought is not None
    return before, rethought, reasoning + r, answer + a


@pytest.mark.parametrize(("text", "thought", "answer"), OPENED_CASES)
def test_a_reply_that_begins_inside_its_think_block_is_split_wherever_the_chunks_cut(
        text: str, thought: str, answer: str) -> None:
    """The text before a closing tag that no opening tag came before was reasoning: it may
    have gone out as answer (it is then voided, `rethought`), never part of the answer."""
    for cuts in ([], list(range(1, len(text))), *([c] for c in range(1, len(text)))):
        before, rethought, more, after = _opened(text, cuts)
        assert rethought == thought and after == answer, cuts
        assert thought.startswith(before)  # what went out early is reasoning, held or not
        assert more in ("", "more")


@pytest.mark.parametrize("size", [1, 5, 64])
async def test_a_template_opened_block_on_the_wire_is_voided_then_kept_as_reasoning(
        paths: Paths, size: int) -> None:
    """DeepSeek-R1 through vLLM without `--reasoning-parser`: the thinking, `</think>`, the
    answer. Through the router the streamed thinking is void (a `PartialDiscarded`, a new
    `Attempt`), comes again as reasoning, and the answer is what follows the tag."""
    from engine.routing.events import WAS_REASONING, Attempt, PartialDiscarded
    from engine.routing.router import Router

    reply = DECOY.removeprefix("<think>") + "In which year did the Wall fall?"
    with WireServer({"POST /v1/chat/completions":
                     lambda r: openai_chunks(pieces(reply, size))}) as server:
        events = await collect(server, paths)
        assert any(isinstance(e, WasReasoning) and "Is the sky green?" in e.text
                   for e in events)
        config = Config.model_validate({
            "providers": {"p": {"kind": "openai", "model": "m", "base_url": server.url + "/v1",
                                "context_window": 4096}},
            "roles": {"witness": ["p"]}})
        router = Router(config, paths)
        try:
            routed = [e async for e in router.stream(StreamRequest.of("q"), role="witness")]
            reply_of = await router.complete(StreamRequest.of("q"), role="witness")
        finally:
            await router.aclose()
    discarded = [e for e in routed if isinstance(e, PartialDiscarded)]
    assert [d.reason for d in discarded] == [WAS_REASONING]  # the first piece went out
    assert reply.startswith(discarded[0].text)
    after = routed[max(i for i, e in enumerate(routed) if isinstance(e, Attempt)):]
    reasoning, answer = texts(after)
    assert answer == "In which year did the Wall fall?"
    assert "Is the sky green?" in reasoning
    assert reply_of.text == "In which year did the Wall fall?"
    assert [e.reason for e in reply_of.events if isinstance(e, PartialDiscarded)] == [
        WAS_REASONING]
