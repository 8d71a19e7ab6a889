"""Formatting shared by the command line and the app."""

from __future__ import annotations

from datetime import datetime

__all__ = ["local_minute"]


def local_minute(iso: str) -> str:
    """An ISO timestamp as local `YYYY-MM-DD HH:MM` (`?` when it cannot be read)."""
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return "?"
