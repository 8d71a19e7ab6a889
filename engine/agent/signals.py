"""Signals: the XML block a model ends a reply with to say how the run should go on (seed 001).

    <signal type="need_turn" confidence="0.7"><reason>the audit is not read yet</reason></signal>

    parsed = parse_signal(reply)
    parsed.signal          # a `Signal`, or None
    parsed.invalid         # why a block was found but refused ("unknown type 'foo'"), or None
    parsed.step            # which step read it: "xml", "repaired", "attributes"

The parser never raises and never trusts its input. Anything inside a code fence or inline
code is not a signal (a model explaining the format is not emitting one). Only the last block
counts. It is read by defusedxml (no entities, no DTD, no network); a block that is not
well-formed is repaired (bare `&` and `<` escaped, open tags closed) and read again; failing
that, its attributes are read by pattern. Fields come from attributes or child elements; a
body with no children fills the type's first text field. `confidence` is clamped to 0–1
(`0.7`, `70`, `70%`, `high`). An unknown type or a missing required field makes the block
invalid, with the reason: the loop then goes on as after a turn without a signal.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from xml.etree.ElementTree import Element

from engine.text import strip_control

__all__ = [
    "FIELDS",
    "SIGNAL_TYPES",
    "ParsedSignal",
    "Signal",
    "SignalType",
    "mask_code",
    "parse_signal",
    "strip_signal",
]

SignalType = Literal["need_turn", "context_sufficient", "stuck", "need_capability",
                     "partial_answer", "delegation_recommended"]
SIGNAL_TYPES: tuple[SignalType, ...] = ("need_turn", "context_sufficient", "stuck",
                                        "need_capability", "partial_answer",
                                        "delegation_recommended")

Kind = Literal["text", "int", "list"]
#: Each type's fields, in order: (name, kind, required). The first required text field takes
#: a body written without child elements.
FIELDS: dict[str, tuple[tuple[str, Kind, bool], ...]] = {
    "need_turn": (("reason", "text", True), ("expected_turns", "int", False)),
    "context_sufficient": (("sources_found", "int", True), ("source_types", "list", False)),
    "stuck": (("blocker", "text", True), ("attempted", "list", True),
              ("suggestions", "list", False)),
    "need_capability": (("capability", "text", True), ("reason", "text", True),
                        ("workaround", "text", False)),
    "partial_answer": (("missing", "text", True), ("caveat", "text", False)),
    "delegation_recommended": (("reason", "text", True), ("scope", "text", True),
                               ("estimated_tokens", "int", False),
                               ("subagent_type", "text", False)),
}

MAX_BLOCK = 8_000
"""Characters of one signal block read at most (a longer one is cut, then repaired)."""
MAX_FIELD = 500
"""Characters kept of one field's value."""
DEFAULT_CONFIDENCE = 0.5

Step = Literal["xml", "repaired", "attributes"]


@dataclass(frozen=True, slots=True)
class Signal:
    """A parsed signal: immutable once made."""

    type: SignalType
    confidence: float
    fields: dict[str, Any]
    raw_xml: str
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def reason(self) -> str:
        """The text that explains it (need_turn's reason, stuck's blocker, …)."""
        for name in ("reason", "blocker", "missing", "capability", "scope"):
            value = self.fields.get(name)
            if isinstance(value, str) and value:
                return value
        return ""

    def fields_text(self, limit: int = 80) -> str:
        """`reason='read the audit', expected_turns=2, attempted=[search_vault, read]`."""
        parts = []
        for name, value in self.fields.items():
            if isinstance(value, list):
                shown = "[" + ", ".join(str(v)[:limit] for v in value) + "]"
            elif isinstance(value, str):
                shown = repr(value if len(value) <= limit else value[:limit - 1] + "…")
            else:
                shown = str(value)
            parts.append(f"{name}={shown}")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "confidence": self.confidence, "fields": self.fields,
                "raw_xml": self.raw_xml, "timestamp": self.timestamp.isoformat()}


@dataclass(frozen=True, slots=True)
class ParsedSignal:
    """What the parser made of a reply: a signal, an invalid block (with why), or nothing."""

    signal: Signal | None = None
    invalid: str | None = None
    raw: str = ""
    step: Step | None = None
    notes: tuple[str, ...] = ()
    """What was forgiven (a confidence of 70 read as 0.70, a missing confidence)."""

    @property
    def found(self) -> bool:
        """A block was there (valid or not)."""
        return bool(self.raw)


# ---- finding the block -------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)",
                    re.DOTALL | re.MULTILINE)
_INLINE = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)
_OPEN = re.compile(r"<\s*signal\b", re.IGNORECASE)
_CLOSE = re.compile(r"<\s*/\s*signal\s*>", re.IGNORECASE)


def mask_code(text: str) -> str:
    """`text` with code fences (closed or running to the end) and inline code blanked out,
    same length, so what is found in the result is outside code in `text`."""
    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    return _INLINE.sub(blank, _FENCE.sub(blank, text))


def _last_block(text: str) -> tuple[int, int] | None:
    """Where the last signal block outside code is: from its `<signal` to its close, or to
    the end of the text when it is not closed."""
    masked = mask_code(text)
    opens = list(_OPEN.finditer(masked))
    if not opens:
        return None
    start = opens[-1].start()
    close = _CLOSE.search(masked, start)
    if close is not None:
        return start, close.end()
    self_closing = re.compile(r"<\s*signal\b[^<>]*/\s*>", re.IGNORECASE).match(masked, start)
    end = self_closing.end() if self_closing else len(text)
    return start, end


def strip_signal(text: str) -> str:
    """The reply without its last signal block (what a reader is shown)."""
    where = _last_block(text)
    if where is None:
        return text
    return (text[:where[0]] + text[where[1]:]).rstrip()


# ---- reading it --------------------------------------------------------------------------

def _read_xml(block: str) -> Element | None:
    import defusedxml.ElementTree as SafeTree

    try:
        element = SafeTree.fromstring(block, forbid_dtd=True)
    except Exception:  # ParseError, entities/DTD forbidden, recursion: all mean "not this way"
        return None
    return element if element.tag.lower() == "signal" else None


_BARE_AMP = re.compile(r"&(?!(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#x[0-9A-Fa-f]+);)")
_TAG = re.compile(r"<(/?)([A-Za-z_][\w.-]*)([^<>]*?)(/?)>")


def _repair(block: str) -> str:
    """Escape bare `&` and `<`, drop what cannot be a tag, and close the tags left open."""
    text = _BARE_AMP.sub("&amp;", block)
    text = re.sub(r"<(?![A-Za-z_/])", "&lt;", text)
    text = re.sub(r"<(/?[A-Za-z_][\w.-]*)([^<>]*)(?=<|$)", r"&lt;\1\2", text)  # a tag never closed
    stack: list[str] = []
    out: list[str] = []
    position = 0
    for match in _TAG.finditer(text):
        out.append(text[position:match.start()])
        position = match.end()
        closing, name, attributes, self_closing = match.groups()
        if closing:
            if name in stack:
                while stack and stack[-1] != name:
                    out.append(f"</{stack.pop()}>")
                stack.pop()
                out.append(f"</{name}>")
            continue  # a close with no open: dropped
        out.append(_quote_attributes(match.group(0), name, attributes, self_closing))
        if not self_closing:
            stack.append(name)
    out.append(text[position:])
    out.extend(f"</{name}>" for name in reversed(stack))
    return "".join(out)


_ATTRIBUTE = re.compile(r"""([A-Za-z_][\w.-]*)\s*=\s*("[^"]*"|'[^']*'|[^\s"'>/]+)""")


def _quote_attributes(tag: str, name: str, attributes: str, self_closing: str) -> str:
    pairs = []
    for key, value in _ATTRIBUTE.findall(attributes):
        if value[:1] in "\"'":
            value = value[1:-1]
        value = value.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
        value = re.sub(r"&amp;(?=(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#x[0-9A-Fa-f]+);)", "&", value)
        pairs.append(f'{key}="{value}"')
    attrs = (" " + " ".join(dict.fromkeys(pairs))) if pairs else ""
    return f"<{name}{attrs}{'/' if self_closing else ''}>"


def _attributes_only(block: str) -> dict[str, str]:
    head = re.match(r"<\s*signal\b([^>]*)", block, re.IGNORECASE)
    found: dict[str, str] = {}
    if head:
        for key, value in _ATTRIBUTE.findall(head.group(1)):
            found.setdefault(key.lower(), value.strip("\"'"))
    return found


def _text_of(element: Element) -> str:
    return " ".join("".join(element.itertext()).split())


def _collect(element: Element) -> tuple[dict[str, str], dict[str, list[str]], str]:
    """Attributes, child elements (each name: its texts, or its items' texts) and the body
    text outside any child."""
    attributes = {key.lower(): value for key, value in element.attrib.items()}
    children: dict[str, list[str]] = {}
    for child in element:
        if not isinstance(child.tag, str):
            continue
        items = [_text_of(item) for item in child if isinstance(item.tag, str)]
        values = [item for item in items if item] or [_text_of(child)]
        children.setdefault(child.tag.lower(), []).extend(values)
    body = " ".join(((element.text or "") + " ".join(c.tail or "" for c in element)).split())
    return attributes, children, body


# ---- values ------------------------------------------------------------------------------

_WORDS = {"very high": 0.9, "high": 0.8, "medium": 0.5, "moderate": 0.5, "low": 0.2,
          "very low": 0.1, "certain": 1.0}


def _confidence(raw: str | None) -> tuple[float, str | None]:
    """The confidence 0–1 and a note when it was not written as one."""
    if raw is None or not raw.strip():
        return DEFAULT_CONFIDENCE, f"no confidence given; taken as {DEFAULT_CONFIDENCE}"
    text = raw.strip().lower()
    if text in _WORDS:
        return _WORDS[text], f"confidence {raw.strip()!r} read as {_WORDS[text]}"
    percent = text.endswith("%")
    try:
        value = float(text.rstrip("%").strip())
    except ValueError:
        return DEFAULT_CONFIDENCE, (f"confidence {raw.strip()[:20]!r} is not a number; taken "
                                    f"as {DEFAULT_CONFIDENCE}")
    if not math.isfinite(value):
        return DEFAULT_CONFIDENCE, f"confidence {text!r} is not finite; taken as 0.5"
    if percent or 1 < value <= 100:
        scaled = value / 100
        return min(max(scaled, 0.0), 1.0), f"confidence {raw.strip()} read as {scaled:.2f}"
    clamped = min(max(value, 0.0), 1.0)
    return clamped, None if clamped == value else f"confidence {value:g} clamped to {clamped:g}"


def _clean(value: str) -> str:
    return strip_control(" ".join(value.split()))[:MAX_FIELD]


def _as_int(text: str) -> int | None:
    match = re.match(r"\s*[+]?(\d{1,9})", text)
    return int(match.group(1)) if match else None


def _as_list(values: list[str]) -> list[str]:
    if len(values) == 1 and re.search(r"[,;]", values[0]):
        values = re.split(r"\s*[,;]\s*", values[0])
    return [_clean(v) for v in values if v.strip()][:20]


def _build(attributes: dict[str, str], children: dict[str, list[str]], body: str, raw: str,
           step: Step) -> ParsedSignal:
    kind = (attributes.get("type") or (children.get("type") or [""])[0]).strip().lower()
    kind = kind.replace("-", "_").replace(" ", "_")
    if not kind:
        return ParsedSignal(invalid="the signal has no type", raw=raw, step=step)
    if kind not in FIELDS:
        return ParsedSignal(invalid=f"unknown signal type {kind[:40]!r}", raw=raw, step=step)
    confidence, note = _confidence(attributes.get("confidence")
                                   or next(iter(children.get("confidence") or []), None))
    notes = [note] if note else []
    fields: dict[str, Any] = {}
    body_used = False
    for name, value_kind, required in FIELDS[kind]:
        values = children.get(name) or ([attributes[name]] if name in attributes else [])
        if not values and required and value_kind == "text" and body and not body_used:
            values, body_used = [body], True
        values = [v for v in values if v.strip()]
        if not values:
            if required:
                return ParsedSignal(invalid=f"{kind} without its required field {name!r}",
                                    raw=raw, step=step, notes=tuple(notes))
            continue
        if value_kind == "int":
            number = _as_int(values[0])
            if number is None:
                if required:
                    return ParsedSignal(invalid=f"{kind}: {name} {values[0][:30]!r} is not a "
                                        "whole number", raw=raw, step=step, notes=tuple(notes))
                notes.append(f"{name} {values[0][:30]!r} is not a number; left out")
                continue
            fields[name] = number
        elif value_kind == "list":
            fields[name] = _as_list(values)
        else:
            fields[name] = _clean(" ".join(values))
    signal = Signal(kind, confidence, fields, raw)  # type: ignore[arg-type]
    return ParsedSignal(signal=signal, raw=raw, step=step, notes=tuple(notes))


def parse_signal(text: str) -> ParsedSignal:
    """The last signal outside code in `text` (see the module docstring). Never raises."""
    try:
        return _parse(text)
    except Exception as exc:  # a parser bug must not end the loop: the block is invalid
        return ParsedSignal(invalid=f"the signal could not be read ({type(exc).__name__})",
                            raw=text[-200:] or " ")


def _parse(text: str) -> ParsedSignal:
    where = _last_block(text)
    if where is None:
        return ParsedSignal()
    raw = text[where[0]:where[1]].strip()
    # control characters are not XML (and not for a terminal): gone before anything reads it
    block = strip_control(raw[:MAX_BLOCK])
    element = _read_xml(block)
    step: Step = "xml"
    if element is None:
        element, step = _read_xml(_repair(block)), "repaired"
    if element is not None:
        return _build(*_collect(element), raw=raw, step=step)
    attributes = _attributes_only(block)
    if not attributes:
        return ParsedSignal(invalid="the signal block cannot be read", raw=raw,
                            step="attributes")
    return _build(attributes, {}, "", raw=raw, step="attributes")
