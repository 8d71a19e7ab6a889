"""Themes shipped in `themes/*.toml`, read into Textual themes."""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path

from textual.theme import Theme

from engine import resource_dir

__all__ = ["load_themes"]

log = logging.getLogger(__name__)


def load_themes(directory: Path | None = None) -> list[Theme]:
    """Every valid theme file in `directory` (default: the shipped themes); bad ones are logged
    and skipped, never fatal."""
    directory = directory or resource_dir("themes")
    themes: list[Theme] = []
    for path in sorted(directory.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            themes.append(Theme(**data))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, TypeError,
                ValueError) as exc:  # pydantic's ValidationError is a ValueError
            log.warning("theme %s skipped: %s", path, exc)
    return themes
