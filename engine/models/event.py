"""The one base of every event the engine yields: interrogations, oracle consultations and
case-agent runs alike.

An event is a small frozen pydantic model with a `type` tag, so each family is journaled the
same way (`journal_line`, read back through the family's tagged union) and every front end
`match`es on it by keyword (`case OracleDelta(oracle_id=oid, text=text)`).

A new event type is one class in its family's module (the family's union lists it) and one
formatter in `engine.report`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from engine.jsondata import read_json

__all__ = ["Event", "journal_line", "read_journal_line"]

E = TypeVar("E", bound="Event")


class Event(BaseModel):
    """A frozen, tagged, JSON-round-tripping record of something that happened."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    def to_json(self) -> dict[str, Any]:
        """The event as one JSON object, `type` first (what a journal line holds)."""
        return self.model_dump(mode="json")


def journal_line(n: int, at: float, event: Event) -> bytes:
    """One journal line (with its newline): the event's number, when, then the event (what
    `to_json` holds, written by pydantic's own serializer in one pass: half the time of a
    dict dumped again, and a run writes ~100 an item)."""
    body = event.model_dump_json()  # `{"type":…}`: an event always has its tag
    return b'{"n":%d,"at":%s,%s\n' % (n, repr(round(at, 3)).encode(),
                                        body[1:].encode("utf-8"))


def read_journal_line(line: bytes | str, decode: Callable[[dict[str, Any]], E]
                      ) -> tuple[int, float, E]:
    """(number, time, event) of one journal line; `ValueError` when it is not one. Lines of
    agent logs written before the journals were one format (`seq`, an ISO time) read too."""
    data = read_json(line)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    n = data.pop("n", None)
    if n is None:
        n = data.pop("seq", None)
    at = data.pop("at", None)
    if isinstance(at, str):
        at = datetime.fromisoformat(at).timestamp()
    if not isinstance(n, int) or not isinstance(at, int | float):
        raise ValueError("bad event number or time")
    return n, float(at), decode(data)
