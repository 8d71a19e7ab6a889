"""Reasoning written inline: `<think>…</think>` before the answer, split out as it streams.

A reasoning model behind a server without a reasoning parser (Ollama's `/v1` for some models,
llama.cpp with `--reasoning-format none`, vLLM without `--reasoning-parser`, most gateways)
writes its thinking into the answer itself, in a block before the reply. `ThinkBlocks` takes
such blocks out of a streamed answer, whatever the chunks cut, so reasoning never becomes a
question, an answer, or the text a JSON reply is parsed from.

    blocks = ThinkBlocks()
    for piece in chunks:
        reasoning, answer = blocks.feed(piece)
    reasoning, answer = blocks.finish()     # `blocks.unclosed`: cut inside its reasoning

Only blocks at the start of the reply count (one or more, whitespace between): a tag further
on is the answer's own text (a reply that explains the `<think>` tag keeps it). The tags
known: `think`, `thinking`, `reasoning`, `thought` (Gemini's OpenAI-compatible endpoint), in
any case. What is held back is at most a tag's length, so streaming stays live.

A reply may also begin *inside* its block: DeepSeek-R1's chat template (and QwQ's) puts the
opening `<think>` in the prompt, so a server without a reasoning parser streams the thinking,
then a closing tag with no opening one, then the answer. Nothing tells this apart before the
closing tag comes, so the text streams as answer until then; at a closing tag that no opening
tag came before, `rethought` holds everything so far, which was reasoning (the caller voids
the answer it passed on), and what follows the tag is the answer.
"""

from __future__ import annotations

from engine.providers._http import field_of

__all__ = ["REASONING_TAGS", "ThinkBlocks", "reasoning_field"]

REASONING_TAGS = ("think", "thinking", "reasoning", "thought")
_OPENINGS = tuple(f"<{tag}>" for tag in REASONING_TAGS)
_CLOSINGS = tuple(f"</{tag}>" for tag in REASONING_TAGS)
_LONGEST = max(len(f"</{tag}>") for tag in REASONING_TAGS)


class ThinkBlocks:
    """Splits leading reasoning blocks from a streamed answer (see the module docstring)."""

    def __init__(self) -> None:
        self._held = ""
        self._close: str | None = None  # inside a block: its closing tag, lower case
        self._answering = False  # past the leading blocks: everything is answer
        self._said: list[str] | None = []  # the answer so far while a closing tag may void it
        self.blocks = 0
        """Reasoning blocks opened so far."""
        self.rethought: str | None = None
        """Set by the `feed` that met a closing tag with no opening one: all the text before
        it, which was reasoning; the answer passed on so far is void (taken by the caller,
        who sets it back to None)."""

    @property
    def unclosed(self) -> bool:
        """True while inside a block: at the end, the reply was cut in its reasoning."""
        return self._close is not None

    def feed(self, text: str) -> tuple[str, str]:
        """(reasoning, answer) that `text` adds and that can be told apart now."""
        if self._answering:
            if self._said is None:
                return "", text
            return self._watch(text)
        reasoning: list[str] = []
        answer = ""
        buffer = self._held + text
        self._held = ""
        while buffer:
            if self._close is not None:  # inside a block
                at = buffer.lower().find(self._close)
                if at == -1:
                    keep = _partial_suffix(buffer, self._close)
                    reasoning.append(buffer[:len(buffer) - keep])
                    self._held = buffer[len(buffer) - keep:]
                    break
                reasoning.append(buffer[:at])
                buffer = buffer[at + len(self._close):]
                self._close = None
                continue
            lead = buffer.lstrip()
            lowered = lead.lower()
            opening = next((o for o in _OPENINGS if lowered.startswith(o)), None)
            if opening is not None:
                self.blocks += 1
                self._close = "</" + opening[1:]
                buffer = lead[len(opening):]
                continue
            if not lead or any(o.startswith(lowered) for o in _OPENINGS):
                self._held = buffer  # whitespace, or what may become an opening tag
                break
            self._answering = True
            if self.blocks:
                self._said = None  # a reply that opened its block itself
                answer = lead
                break
            held_reasoning = "".join(reasoning)
            more, answer = self._watch(buffer)
            return held_reasoning + more, answer
        return "".join(reasoning), answer

    def _watch(self, text: str) -> tuple[str, str]:
        """Answer text that a closing tag (with no opening one before it) may yet void."""
        assert self._said is not None
        if not self._held and "<" not in text:  # no tag here, nor the start of one
            self._said.append(text)
            return "", text
        buffer = self._held + text
        self._held = ""
        lowered = buffer.lower()
        closing = min(((at, tag) for tag in _CLOSINGS if (at := lowered.find(tag)) != -1),
                      default=None)
        opening = min((at for tag in _OPENINGS if (at := lowered.find(tag)) != -1),
                      default=None)
        if opening is not None and (closing is None or opening < closing[0]):
            self._said = None  # a tag the answer writes about: answer for good
            return "", buffer
        if closing is None:
            keep = max(_partial_suffix(buffer, tag) for tag in (*_CLOSINGS, *_OPENINGS))
            self._held = buffer[len(buffer) - keep:] if keep else ""
            answer = buffer[:len(buffer) - keep]
            self._said.append(answer)
            return "", answer
        at, tag = closing
        self.rethought = "".join(self._said) + buffer[:at]
        self._said, self._answering, self.blocks = None, False, 1
        return self.feed(buffer[at + len(tag):])

    def finish(self) -> tuple[str, str]:
        """(reasoning, answer) still held once the reply is complete."""
        held, self._held = self._held, ""
        if self._close is not None:
            return held, ""
        self._said = None
        if self._answering or not self.blocks:
            return "", held
        return "", held.lstrip()


def _partial_suffix(buffer: str, tag: str) -> int:
    """How many characters at the end of `buffer` may be the start of `tag`."""
    lowered = buffer[-_LONGEST:].lower()
    for size in range(min(len(tag) - 1, len(lowered)), 0, -1):
        if tag.startswith(lowered[-size:]):
            return size
    return 0


def reasoning_field(delta: object) -> str | None:
    """The reasoning a delta (or whole message) carries in a field of its own:
    `reasoning_content` (llama.cpp, vLLM, DeepSeek), `reasoning` (OpenRouter, Ollama's `/v1`,
    newer vLLM). Text only; anything else is ignored, never taken for the answer."""
    for name in ("reasoning_content", "reasoning"):
        value = field_of(delta, name)
        if value is None and delta is not None and not isinstance(delta, dict):
            value = (getattr(delta, "model_extra", None) or {}).get(name)
        if isinstance(value, str) and value:
            return value
    return None
