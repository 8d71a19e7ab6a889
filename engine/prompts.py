"""Prompt files, shipped in `prompts/` and overridable by name in the user's `prompts/`, and
the one filler.

A user's `prompts/NAME.md` (beside the config file) replaces the shipped `NAME.md` when it is
valid: UTF-8 text, not empty, with every placeholder the shipped one has (the engine fills
them: one left out is data the model never sees) and no other (an unknown `{{…}}` would reach
the model as typed). An invalid override is a `ConfigError` naming the file and the reason,
raised before anything runs; it is never silently replaced by the shipped text. A session
records which prompts it ran with and their hashes (`prompt_uses`).

Placeholders are filled in one pass: a value is never scanned again, so a hypothesis, an
answer or a note that contains `{{TRANSCRIPT}}` or `{{SEQUENCE}}` reaches the model as typed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from engine.errors import ConfigError
from engine.paths import resource_dir

__all__ = ["INTERROGATION_PROMPTS", "PromptFile", "fill", "fill_tokens", "load_prompt",
           "prompt_files", "prompt_uses", "use_prompts"]

INTERROGATION_PROMPTS = ("detective_question", "detective_turn", "question_retry",
                         "gap_analysis", "audit", "witness", "witness_defend",
                         "witness_planted_question", "validation_retry", "structured_output",
                         "consistency_note", "split_claims", "split_retry", "revise_claim",
                         "revise_claim_turn")
"""The prompts an interrogation may send: checked before it starts, recorded in its session."""

_PLACEHOLDER = re.compile(r"\{\{([A-Za-z0-9_]+)\}\}")

_user_dir: Path | None = None


def use_prompts(directory: Path | None) -> None:
    """Read prompts from `directory` first (the user's `prompts/`), then the shipped ones."""
    global _user_dir
    if directory != _user_dir:
        _user_dir = directory
        _read.cache_clear()


@dataclass(frozen=True, slots=True)
class PromptFile:
    """One prompt as it will be used: where it comes from, its hash, and what is wrong."""

    name: str
    path: Path
    source: Literal["shipped", "user"]
    sha256: str
    placeholders: tuple[str, ...]
    problem: str | None = None
    """Why the user's file is not used (None: it is valid, or shipped)."""


def _placeholders(text: str) -> tuple[str, ...]:
    return tuple(sorted(set(_PLACEHOLDER.findall(text))))


def _problem(text: str | None, shipped: str) -> str | None:
    if text is None:
        return "it is not UTF-8 text"
    if not text.strip():
        return "it is empty"
    have, need = set(_placeholders(text)), set(_placeholders(shipped))
    if missing := sorted(need - have):
        return "it lacks " + ", ".join("{{" + m + "}}" for m in missing) + \
            " (the engine fills it; without it the model never sees that part)"
    if unknown := sorted(have - need):
        known = ", ".join("{{" + n + "}}" for n in sorted(need)) or "none"
        return "it has " + ", ".join("{{" + u + "}}" for u in unknown) + \
            f", which nothing fills here (this prompt's placeholders: {known})"
    return None


def _text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None


def _shipped(name: str) -> Path:
    return resource_dir("prompts") / f"{name}.md"


@cache
def _read(name: str) -> tuple[PromptFile, str]:
    shipped_path = _shipped(name)
    shipped = shipped_path.read_text(encoding="utf-8")
    user = _user_dir / f"{name}.md" if _user_dir is not None else None
    if user is not None and user.is_file():
        text: str | None
        problem: str | None
        try:
            text = _text(user)
        except OSError as exc:
            text, problem = None, f"cannot read it: {exc.strerror}"
        else:
            problem = _problem(text, shipped)
        data = text if text is not None else ""
        found = PromptFile(name, user, "user", _digest(data), _placeholders(data), problem)
        return found, data
    return PromptFile(name, shipped_path, "shipped", _digest(shipped),
                      _placeholders(shipped)), shipped


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_prompt(name: str) -> str:
    """The text of prompt `name`: the user's override, else the shipped one (read once per
    process). `ConfigError` for an invalid override, naming the file and the reason."""
    found, text = _read(name)
    if found.problem is not None:
        raise ConfigError(f"{found.path}: {found.problem}")
    return text


def prompt_files() -> list[PromptFile]:
    """Every shipped prompt as it will be used (overridden or not), then any file in the
    user's `prompts/` that overrides nothing (a typo in its name, most likely)."""
    names = sorted(p.stem for p in resource_dir("prompts").glob("*.md"))
    found = [_read(name)[0] for name in names]
    if _user_dir is not None and _user_dir.is_dir():
        for path in sorted(_user_dir.glob("*.md")):
            if path.stem not in names:
                text = _text(path) or ""
                found.append(PromptFile(path.stem, path, "user", _digest(text),
                                        _placeholders(text),
                                        "no shipped prompt has this name, so nothing uses it")
                             )
    return found


def prompt_uses(names: Iterable[str] = INTERROGATION_PROMPTS) -> dict[str, str]:
    """`{name: "shipped sha256:…" | "user PATH sha256:…"}` for `names`, checked: raises the
    `ConfigError` of the first invalid override (before a run starts)."""
    uses: dict[str, str] = {}
    for name in names:
        load_prompt(name)
        found = _read(name)[0]
        where = "shipped" if found.source == "shipped" else f"user {found.path}"
        uses[name] = f"{where} sha256:{found.sha256}"
    return uses


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
