"""Prompt files shipped in `prompts/`, editable without touching code."""

from __future__ import annotations

from functools import cache

from engine.paths import resource_dir

__all__ = ["load_prompt"]


@cache
def load_prompt(name: str) -> str:
    """The text of `prompts/{name}.md` (read once per process)."""
    return (resource_dir("prompts") / f"{name}.md").read_text(encoding="utf-8")
