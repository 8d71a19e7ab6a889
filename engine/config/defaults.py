"""Defaults a front end needs before the configuration is loaded (no pydantic here: the app
reads them before its first frame)."""

from __future__ import annotations

__all__ = ["DEFAULT_THEME"]

DEFAULT_THEME = "detektiv-dark"
"""The theme a new user gets (the shipped ones are detektiv-dark and detektiv-light)."""
