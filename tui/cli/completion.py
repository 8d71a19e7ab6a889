"""Shell completion: `detektiv completion bash|zsh|fish` prints a script made at build time.

The scripts in `tui/completions/` are generated from the argument parser by shtab
(`make completions`, a test keeps them equal to what the parser makes now), so the console
script imports nothing for completion at start-up. What changes with the user's data (session
ids, oracle names, provider and model names) the scripts ask of `detektiv complete KIND`, which
prints one candidate a line and never fails loudly.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine import DetektivError, Paths, Workspace
from tui.cli import COMPLETION_SHELLS

__all__ = ["SHELLS", "candidates", "generate", "script"]

SHELLS = COMPLETION_SHELLS
FOLDER = Path(__file__).resolve().parent.parent / "completions"

_BY_DEST = {"session": "sessions", "oracle": "oracles", "provider": "providers",
            "detective": "providers", "witness": "providers", "model": "models"}
"""Which arguments complete what, by their destination name."""

_FILES = {"dataset"}
"""Arguments that take a file without saying so by their type (eval's DATASET: a JSONL file,
or a named dataset)."""

FREE_TEXT_ZSH = "()"
"""zsh's action for a positional argument of free text: nothing to offer. shtab leaves the
action empty, and zsh's `_arguments` then offers no option either (`detektiv run --li<Tab>`
completed nothing)."""


def script(shell: str) -> str:
    """The completion script for `shell`, as shipped."""
    return (FOLDER / f"detektiv.{shell}").read_text(encoding="utf-8")


_ZSH_ASK = """
# candidates that change with the user's data, asked for only when that argument is completed
# (_arguments passes its compadd options first, the kind comes last)
_detektiv_candidates() {
  local -a found
  found=(${(f)"$(detektiv complete ${@[-1]} 2>/dev/null)"})
  compadd "${@[1,-2]}" -a found
}"""


def _asking(shtab: Any, kind: str) -> dict[str, Any]:
    """How each shell asks `detektiv complete KIND`: at the moment the argument is completed.
    (shtab's `cmd` puts a command substitution in zsh's option arrays, which zsh evaluates for
    every array on every Tab: 17 runs of detektiv, five seconds before any candidate shows.)"""
    asked = dict(shtab.cmd(f"detektiv complete {kind} 2>/dev/null"))
    asked["zsh"] = f"_detektiv_candidates {kind}"
    asked["preamble"] = {**asked["preamble"], "zsh": _ZSH_ASK}
    return asked


def generate(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for `shell`, made from `parser` now (shtab; build time only)."""
    import shtab

    def mark(node: argparse.ArgumentParser) -> None:
        for action in node._actions:
            kind = _BY_DEST.get(action.dest)
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    mark(child)
            elif kind is not None:
                action.complete = _asking(shtab, kind)  # type: ignore[attr-defined]
            elif action.type is Path or action.dest in _FILES:
                action.complete = (  # type: ignore[attr-defined]
                    shtab.DIRECTORY if action.metavar == "DIR" else shtab.FILE)
            elif not action.option_strings and action.choices is None \
                    and action.nargs != 0:
                action.complete = {"zsh": FREE_TEXT_ZSH}  # type: ignore[attr-defined]

    mark(parser)
    return str(shtab.complete(parser, shell=shell))


def candidates(paths: Paths, kind: str) -> list[str]:
    """What `detektiv complete KIND` offers: session short ids, oracle slugs and names,
    provider names (and `local:` models), model names. Nothing when the data cannot be read."""
    workspace = Workspace(paths)
    try:
        match kind:
            case "sessions":
                return [row.id[:8] for row in workspace.sessions.rows()]
            case "oracles":
                return sorted({o.id for o in workspace.cases.oracles()})
            case "providers":
                names = list(workspace.config.providers)
                return names + [f"local:{m.name}" for m in workspace.models.list()]
            case "models":
                return [m.name for m in workspace.models.list()]
    except (DetektivError, OSError):
        return []
    return []


def write_all() -> None:
    """Regenerate the shipped scripts (`make completions`)."""
    from tui.cli import build_parser

    FOLDER.mkdir(exist_ok=True)
    for shell in SHELLS:
        (FOLDER / f"detektiv.{shell}").write_text(generate(build_parser(), shell),
                                                  encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover - `make completions`
    write_all()
