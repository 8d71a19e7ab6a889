"""A loopback model server that answers from a script (pure test logic, like the fault proxy).

    with ScriptedModel(["Let me look. <tool name=\"search_vault\">Paris</tool>", "…"]) as model:
        config.providers["scripted"] = model.provider_config()
        …
    model.requests   # every chat request's messages, in order

It speaks the OpenAI-compatible chat completions wire (SSE), streaming each reply in a few
pieces, and says its window (`/props`) so fitting needs no guess. A reply is the next string of
the script, or what a callable makes of the request's messages; past the end of the script it
repeats the last reply.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from engine import ProviderConfig
from tests.support.wire import Recorded, Reply, WireServer, json_reply

Script = Sequence[str] | Callable[[list[dict[str, Any]]], str]


def _pieces(text: str, size: int = 24) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


OPENED = "opened"
"""`reasoning_field` for a reply that begins inside its think block: DeepSeek-R1's template
puts `<think>` in the prompt, and a server without a reasoning parser streams the rest."""


class Judged(str):
    """A one-word judgement whose P(true) is `p_true`: sent with log-probabilities ("True"
    and "False" at the first token) when the request asks for them, else as a stated
    probability (a number from 0 to 100), as a model without them would."""

    p_true: float

    def __new__(cls, p_true: float) -> Judged:
        made = super().__new__(cls, "True" if p_true >= 0.5 else "False")
        made.p_true = p_true
        return made


def _alternatives(p_true: float) -> list[dict[str, Any]]:
    floor = 1e-9
    return [{"token": word, "logprob": math.log(max(p, floor)), "bytes": None}
            for word, p in sorted((("True", p_true), ("False", 1 - p_true)),
                                  key=lambda pair: -pair[1])]


def judgement_reply(text: str, body: dict[str, Any], sends_logprobs: bool = True
                    ) -> tuple[str, list[dict[str, Any]] | None]:
    """What a scripted model sends for `text`: a `Judged` reply becomes its word with
    log-probabilities, or its stated probability when none were asked for (a server that
    does not send them: its word alone, when they are asked for)."""
    if not isinstance(text, Judged):
        return text, None
    if not body.get("logprobs"):
        return str(round(text.p_true * 100)), None
    if not sends_logprobs:
        return str(text), None
    top = _alternatives(text.p_true)
    chosen = top[0]
    return str(text), [{**chosen, "top_logprobs": top[:max(1, body.get("top_logprobs", 1))]}]


def sse(text: str, finish: str = "stop", pace: float = 0.0,
        usage: tuple[int, int] | None = None, reasoning_field: str | None = None,
        logprobs: list[dict[str, Any]] | None = None) -> Reply:
    chunks: list[bytes | float] = []
    if reasoning_field == OPENED:  # the chat template wrote the opening tag, not the model
        text, reasoning_field = text.removeprefix("<think>"), None
    if reasoning_field is not None:  # a leading think block goes in the wire's own field
        found = re.match(r"<think>(.*?)</think>\s*", text, re.DOTALL)
        if found:
            text = text[found.end():]
            for piece in _pieces(found.group(1)):
                chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0,
                         "model": "m", "choices": [{"index": 0, "delta": {
                             reasoning_field: piece}, "finish_reason": None}]}
                chunks.append(f"data: {json.dumps(chunk)}\n\n".encode())
    for number, piece in enumerate(_pieces(text)):
        choice: dict[str, Any] = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
        if logprobs is not None and number == 0:
            choice["logprobs"] = {"content": logprobs}
        chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [choice]}
        chunks.append(f"data: {json.dumps(chunk)}\n\n".encode())
        if pace:
            chunks.append(pace)
    end = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
           "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    chunks.append(f"data: {json.dumps(end)}\n\n".encode())
    if usage is not None:  # as OpenAI sends it with stream_options.include_usage
        counted = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                   "choices": [], "usage": {"prompt_tokens": usage[0],
                                            "completion_tokens": usage[1],
                                            "total_tokens": sum(usage)}}
        chunks.append(f"data: {json.dumps(counted)}\n\n".encode())
    chunks.append(b"data: [DONE]\n\n")
    return Reply(200, {"content-type": "text/event-stream"}, chunks)


class ScriptedModel(WireServer):
    """See the module docstring."""

    def __init__(self, script: Script, window: int = 32768, pace: float = 0.0,
                 usage: tuple[int, int] | None = None,
                 reasoning_field: str | None = None, logprobs: bool = True) -> None:
        self.script = script
        self.logprobs = logprobs
        """False: a server that never sends log-probabilities, even when asked."""
        self.reasoning_field = reasoning_field
        """Where a reply's leading `<think>` block goes: None, inline as written;
        `reasoning_content` (llama.cpp, vLLM) or `reasoning` (OpenRouter), that delta field;
        `OPENED`, inline without its opening tag."""
        self.pace = pace
        self.usage = usage
        """(prompt, completion) tokens every reply reports, as a priced cloud API does."""
        """Seconds between the pieces of a reply (a model that takes its time)."""
        self.turn = 0
        self.chats: list[list[dict[str, Any]]] = []
        self.bodies: list[dict[str, Any]] = []
        """Every request body, whole (the sampling settings with the messages)."""
        super().__init__({
            "GET /props": lambda _: json_reply({"default_generation_settings":
                                                {"n_ctx": window}}),
            "POST /v1/chat/completions": self._chat,
        })

    def _chat(self, recorded: Recorded) -> Reply:
        body = recorded.json()
        messages = body["messages"]
        self.bodies.append(body)
        self.chats.append(messages)
        if callable(self.script):
            text = self.script(messages)
        else:
            text = self.script[min(self.turn, len(self.script) - 1)]
        self.turn += 1
        text, logprobs = judgement_reply(text, body, self.logprobs)
        if not body.get("stream"):  # a whole reply, as the wire sends one not streamed
            prompt, completion = self.usage or (10, max(1, len(text) // 4))
            return json_reply({"id": "c", "object": "chat.completion", "model": "scripted",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant",
                                                        "content": text}}],
                               "usage": {"prompt_tokens": prompt,
                                         "completion_tokens": completion,
                                         "total_tokens": prompt + completion}})
        return sse(text, pace=self.pace, usage=self.usage,
                   reasoning_field=self.reasoning_field, logprobs=logprobs)

    def provider_config(self, **overrides: object) -> ProviderConfig:
        values: dict[str, object] = {"kind": "openai", "model": "scripted",
                                     "base_url": self.url + "/v1"}
        values.update(overrides)
        return ProviderConfig.model_validate(values)


KEEP_ASKING = "(keep asking)"
"""Put in a hypothesis, it makes `detective` ask up to the limit instead of closing (its
judgements stay unsure, its analyses want more)."""
JUDGING = "You are a detective judging a claim."
"""How a judgement's conversation opens (`prompts/judgement.md`)."""


def is_judgement(messages: list[dict[str, Any]]) -> bool:
    """Whether `messages` ask for a judgement (one exchange, or a claim alone)."""
    return bool(messages) and messages[0]["content"].startswith(JUDGING)


def judged_claim(messages: list[dict[str, Any]]) -> str:
    """The claim a judgement's conversation judges."""
    found = re.search(r"^Claim: (.*)$", messages[-1]["content"], re.MULTILINE)
    assert found, "no claim in the judgement"
    return found.group(1).strip()


def detective(messages: list[dict[str, Any]]) -> str:
    """A detective that always plays its part: a question per round (numbered, so never a
    repeat, and ending in LONG_PROMPT, which the tiny base model answers at length), a
    decisive judgement that lets the loop close once `min_rounds` are asked (an unsure one
    with `KEEP_ASKING`), an analysis that wants more only with `KEEP_ASKING`, and a
    narrative."""
    import re

    from tests.support.servers import LONG_PROMPT

    system = messages[0]["content"] if messages else ""
    if system.startswith("You are a detective analysing"):
        if KEEP_ASKING in system:  # a hypothesis that says so is pressed on up to the limit
            return json.dumps({"gaps": [], "completeness_score": 30, "requires_follow_up": True})
        return json.dumps({"gaps": [], "completeness_score": 90, "requires_follow_up": False})
    if system.startswith("You are a detective auditing"):
        return json.dumps({"contradictions": [], "summary": "The witness answered every "
                           "question; nothing it said settles the hypothesis.",
                           "verdict": "undetermined"})
    if is_judgement(messages):  # decisive, unless told to keep asking
        return Judged(0.5 if KEEP_ASKING in judged_claim(messages) else 0.95)
    found = re.search(r"Write question (\d+)", messages[-1]["content"])
    number = found.group(1) if found else "1"
    # about the hypothesis (a testimony's claim refuses a question off it), never all of it
    from engine.interrogation.claims import content_words
    from engine.interrogation.subject import subject

    stated = re.search(r"for you only\):\s*(.+)\Z", system, re.S)
    # about the claim's subject, by name, and never all of what it says of it
    named = subject(stated.group(1).strip()) if stated else None
    topic = named.lower() if named else (
        ", ".join(content_words(stated.group(1))[:1]) if stated else "it")
    return f"Detail {number} on {topic}: {LONG_PROMPT} What happened next?"


def thinking(reply: Callable[[list[dict[str, Any]]], str]) -> Callable[
        [list[dict[str, Any]]], str]:
    """`reply` after a think block that holds a decoy question and a decoy verdict opposite
    to the real one (a leak would be parsed, asked, or stored)."""

    def wrapped(messages: list[dict[str, Any]]) -> str:
        real = reply(messages)
        if isinstance(real, Judged):  # its word or number as it is: what a wire sends as
            return real  # reasoning is never read as the judgement (tests/engine/test_reasoning)
        opposite = "false" if '"verdict": "true"' in real else "true"
        decoy = json.dumps({"contradictions": [], "summary": "decoy " * 6,
                            "verdict": opposite, "gaps": [], "completeness_score": 3,
                            "requires_follow_up": True})
        return f"<think>Perhaps I should ask: Is the moon made of cheese? {decoy}</think>\n{real}"

    return wrapped


class ThinkingWire(WireServer):
    """A scripted reasoning model on the Anthropic (`/v1/messages`) or Ollama (`/api/chat`)
    wire: a reply's leading `<think>` block goes out as the wire's own reasoning (a thinking
    content block with `thinking_delta`s; `message.thinking`), the rest as the answer."""

    def __init__(self, script: Callable[[list[dict[str, Any]]], str], wire: str) -> None:
        self.script = script
        route = "POST /v1/messages" if wire == "anthropic" else "POST /api/chat"
        super().__init__({route: self._anthropic if wire == "anthropic" else self._ollama})

    def _split(self, recorded: Recorded) -> tuple[str, str]:
        body = recorded.json()
        messages = list(body["messages"])
        if body.get("system"):
            messages.insert(0, {"role": "system", "content": body["system"]})
        text = self.script(messages)
        if isinstance(text, Judged):  # no log-probabilities on these wires: a stated number,
            # after thinking that holds a decoy one (a leak would be read)
            return "Perhaps 3, or 97.", str(round(text.p_true * 100))
        found = re.match(r"<think>(.*?)</think>\s*", text, re.DOTALL)
        return (found.group(1), text[found.end():]) if found else ("", text)

    def _anthropic(self, recorded: Recorded) -> Reply:
        thought, answer = self._split(recorded)

        def event(name: str, data: dict[str, Any]) -> bytes:
            return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

        chunks = [event("message_start", {"type": "message_start", "message": {
            "id": "m", "type": "message", "role": "assistant", "content": [], "model": "c",
            "usage": {"input_tokens": 10, "output_tokens": 1}}})]
        for index, (kind, text) in enumerate((("thinking", thought), ("text", answer))):
            chunks.append(event("content_block_start", {"type": "content_block_start",
                                                        "index": index, "content_block": {
                                                            "type": kind, kind: ""}}))
            for piece in _pieces(text):
                delta = {"type": f"{kind}_delta" if kind == "thinking" else "text_delta",
                         kind: piece}
                chunks.append(event("content_block_delta", {"type": "content_block_delta",
                                                            "index": index, "delta": delta}))
            chunks.append(event("content_block_stop", {"type": "content_block_stop",
                                                       "index": index}))
        chunks += [event("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": "end_turn"}, "usage": {"output_tokens": 20}}),
                   event("message_stop", {"type": "message_stop"})]
        return Reply(200, {"content-type": "text/event-stream"}, chunks)

    def _ollama(self, recorded: Recorded) -> Reply:
        thought, answer = self._split(recorded)
        lines = [{"message": {"role": "assistant", "content": "", "thinking": piece},
                  "done": False} for piece in _pieces(thought) if thought]
        lines += [{"message": {"role": "assistant", "content": piece}, "done": False}
                  for piece in _pieces(answer)]
        lines.append({"message": {"role": "assistant", "content": ""}, "done": True,
                      "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 20})
        stamp = {"model": "m", "created_at": "2026-11-26T00:00:00Z"}
        return Reply(200, {"content-type": "application/x-ndjson"},
                     [(json.dumps({**stamp, **line}) + "\n").encode() for line in lines])
