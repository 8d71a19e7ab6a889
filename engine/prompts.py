"""Prompt files shipped in `prompts/`, editable without touching code, and the one filler.

Placeholders are filled in one pass: a value is never scanned again, so a hypothesis, an
answer or a note that contains `{{TRANSCRIPT}}` or `{{SEQUENCE}}` reaches the model as typed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache

from engine.paths import resource_dir

__all__ = ["fill", "fill_tokens", "load_prompt"]


@cache
def load_prompt(name: str) -> str:
    """The text of `prompts/{name}.md` (read once per process)."""
    return (resource_dir("prompts") / f"{name}.md").read_text(encoding="utf-8")


def fill_tokens(template: str, values: Mapping[str, object]) -> str:
    """`template` with every occurrence of each key of `values` (a literal token such as
    `{{CONTEXT}}`) replaced by its value, in one pass over the template only."""
    if not values:
        return template
    tokens = sorted(values, key=len, reverse=True)  # the longest token wins where two overlap
    pattern = re.compile("|".join(re.escape(token) for token in tokens))
    return pattern.sub(lambda match: str(values[match.group(0)]), template)


def fill(template: str, **values: object) -> str:
    """`template` with each `{{NAME}}` given as `NAME=value` filled in, in one pass; other
    `{{…}}` stay as they are."""
    return fill_tokens(template, {"{{" + name + "}}": value for name, value in values.items()})
