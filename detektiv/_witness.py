"""Inspect AI's model as detektiv's witness: a request of the engine's put to
`Model.generate` (Inspect's own API, so any provider Inspect supports can be the witness), its
reply handed back whole (`engine.LentReply`, `Workspace.lend`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
)

from engine import LentReply, StreamRequest

__all__ = ["lent_answer"]

STOPS = {"stop": "stop", "max_tokens": "length", "model_length": "length",
         "content_filter": "content_filter", "tool_calls": "tool_calls", "unknown": "stop"}
"""Inspect's stop reasons in detektiv's words."""


def messages_of(request: StreamRequest) -> list[ChatMessage]:
    """The request's conversation as Inspect's messages."""
    made: list[ChatMessage] = []
    for message in request.messages:
        if message.role == "system":
            made.append(ChatMessageSystem(content=message.content))
        elif message.role == "assistant":
            made.append(ChatMessageAssistant(content=message.content))
        else:
            made.append(ChatMessageUser(content=message.content))
    return made


def lent_answer(model: Model) -> Callable[[StreamRequest], Awaitable[LentReply]]:
    """What the engine calls for each of the witness's replies: `model.generate` with the
    request's reply cap, temperature and seed."""
    async def answer(request: StreamRequest) -> LentReply:
        config = GenerateConfig(max_tokens=request.max_tokens,
                                temperature=request.temperature, seed=request.seed)
        output = await model.generate(messages_of(request), config=config)
        if output.error:
            raise RuntimeError(output.error)
        stop = output.choices[0].stop_reason if output.choices else "unknown"
        usage = output.usage
        return LentReply(output.completion, STOPS.get(stop, "stop"),
                     usage.input_tokens if usage is not None else None,
                     usage.output_tokens if usage is not None else None)
    return answer
