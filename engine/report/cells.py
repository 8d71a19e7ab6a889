"""Words for narrow places — a list's column, a badge — that import no model: the Sessions
tab uses them in the app's first frame, which must not wait for pydantic (`bench/startup.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.text import strip_control

if TYPE_CHECKING:
    from engine.config.providers import ProviderConfig
    from engine.storage.index import SessionSummary

__all__ = ["CAPABLE_MODEL_HINT", "EvalGroup", "demonstration_note", "grouped", "listed_title",
           "rounds_cell", "verdict_cell", "verdict_short"]

CAPABLE_MODEL_HINT = (
    "detektiv models pull qwen2.5-coder-1.5b (the app fetches it by itself), an API key "
    "(OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY) or Ollama"
)
"""How to give the detective a capable model: said wherever a demonstration model plays it."""


def demonstration_note(chain: list[ProviderConfig], role: str = "detective") -> str | None:
    """The warning for a run whose `role` is first played by a demonstration model, or None
    (here, not with the other words: the app asks it before its first frame is drawn)."""
    if not chain or not chain[0].is_demonstration:
        return None
    return (f"the {role} is the embedded {chain[0].model}, a small demonstration model: its "
            f"verdicts mean nothing. Give the {role} a capable model: {CAPABLE_MODEL_HINT}")


def listed_title(title: str, claims: str | None) -> str:
    """A session's title as a list shows it: the title, then a testimony's claims counted
    (`"Summarize … [3/8 held, 2 contradicted]"`: where the line is cut, the title is what
    stays), on one line, control characters removed."""
    text = " ".join(strip_control(title).split())
    return f"{text} [{claims}]" if claims else text


def verdict_short(verdict: str | None, probability_false: float | None,
                  demonstration: bool = False) -> str:
    """`"false (p 0.82)"`: a verdict where room is short (a list's column, a badge); empty
    before a verdict; `· demo` after one a demonstration model gave."""
    if verdict is None:
        return ""
    return (verdict + ("" if probability_false is None else f" (p {probability_false:.2f})")
            + (" · demo" if demonstration else ""))


def verdict_cell(row: SessionSummary) -> str:
    """A session list's verdict column (`verdict_short`)."""
    return verdict_short(row.verdict, row.probability_false, row.demonstration)


def rounds_cell(row: SessionSummary) -> str:
    """A session list's rounds column: `"3/10"` (rounds of the limit), or for a testimony
    its rounds, the testimony's own answer round 1 as everywhere (`"8"`: the limit is a
    claim's)."""
    if row.claims is not None:
        return str(row.pairs)
    return f"{row.pairs}/{row.iteration_limit}"


@dataclass(frozen=True)
class EvalGroup:
    """The row that stands for an evaluation run's sessions: how many, the newest of them."""

    run: str
    count: int
    newest: SessionSummary


def grouped(rows: list[SessionSummary]) -> list[SessionSummary | EvalGroup]:
    """`rows` (newest first) with each evaluation run's sessions folded into one `EvalGroup`
    where its newest session stands."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.eval_run:
            counts[row.eval_run] = counts.get(row.eval_run, 0) + 1
    out: list[SessionSummary | EvalGroup] = []
    seen: set[str] = set()
    for row in rows:
        run = row.eval_run
        if not run:
            out.append(row)
        elif run not in seen:
            seen.add(run)
            out.append(EvalGroup(run, counts[run], row))
    return out
