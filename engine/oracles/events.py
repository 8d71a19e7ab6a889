"""What a consultation yields: each oracle's attempts, text, notes, and its end (stored or
failed). Events of several oracles interleave; `oracle_id` tells them apart."""

from __future__ import annotations

from typing import Literal

from engine.models.event import Event
from engine.models.notes import LlmEntry

__all__ = ["OracleAttempt", "OracleDelta", "OracleEvent", "OracleFailed", "OracleNote",
           "OracleSaved"]


class _Event(Event):
    """An oracle consultation's event."""


class OracleAttempt(_Event):
    """`oracle_id` is now streaming from `provider` (after a failover: from the start again)."""

    type: Literal["oracle_attempt"] = "oracle_attempt"
    oracle_id: str
    provider: str


class OracleDelta(_Event):
    """A piece of an oracle's answer."""

    type: Literal["oracle_delta"] = "oracle_delta"
    oracle_id: str
    text: str


class OracleNote(_Event):
    """Something worth a line beside the answer: a switch, a trimmed context, a timeout."""

    type: Literal["oracle_note"] = "oracle_note"
    oracle_id: str
    text: str


class OracleSaved(_Event):
    """The answer is stored; `entry` is its record in metadata.json."""

    type: Literal["oracle_saved"] = "oracle_saved"
    oracle_id: str
    entry: LlmEntry
    text: str


class OracleFailed(_Event):
    """The oracle gave no answer; nothing was stored."""

    type: Literal["oracle_failed"] = "oracle_failed"
    oracle_id: str
    error: str


OracleEvent = OracleAttempt | OracleDelta | OracleNote | OracleSaved | OracleFailed
