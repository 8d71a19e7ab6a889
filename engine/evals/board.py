"""The words and the plot of a witness leaderboard (`engine.evals.compare`): the table the
CLI prints and the app shows, the lines under it, report.md and leaderboard.png, and the JSON
`eval --compare --json` and the MCP server give."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from engine.evals.compare import SHARES, Leaderboard
from engine.evals.metrics import Figure
from engine.evals.report import DEMONSTRATION_WARNING, _markdown_table

__all__ = ["board_json", "board_lines", "board_table", "write_board"]

_LABELLED = (("accuracy", "accuracy"), ("auroc", "AUROC"), ("f1", "F1"),
             ("undetermined", "undetermined"))


def _columns(board: Leaderboard) -> list[tuple[str, str]]:
    """(figure, its title) of each figure column."""
    if board.labelled:
        return list(_LABELLED)
    return [(name, name) for name in (*SHARES, *(("supported",) if board.document else ()))]


def board_table(board: Leaderboard, intervals: bool = True) -> list[list[str]]:
    """A witness a row, its figures a column (the header first), ranked by the headline
    figure (the best first)."""
    def text(figure: Figure) -> str:
        return (figure if intervals else Figure(figure.value)).text()

    columns = _columns(board)
    table = [["witness", "provider", *(title for _, title in columns),
              *(["items"] if board.labelled else ["claims", "questions"])]]
    for row in sorted(board.rows, key=lambda row: -_rank(row.figure(board.headline).value)):
        judged = f"{row.items}" + (f" ({row.failed} failed)" if row.failed else "")
        table.append([row.witness, row.label, *(text(row.figure(name)) for name, _ in columns),
                      *([judged] if board.labelled else [str(row.claims), judged])])
    return table


def _rank(value: float) -> float:
    return -math.inf if math.isnan(value) else value


def board_lines(board: Leaderboard) -> list[str]:
    """What the table counts, the paired differences in plain sentences, warnings."""
    first = board.infos[0] if board.infos else None
    lines: list[str] = []
    if first is not None:
        lines.append(f"Comparison {board.comparison}: {first.dataset} ({first.items} items, "
                     f"mode {first.mode}, up to {first.limit} rounds); detective "
                     f"{first.detective_label or '?'}; {len(board.rows)} witnesses")
    if board.labelled:
        lines.append("Positive class: a false claim; undetermined and failed items count as "
                     "abstentions. [95 % bootstrap intervals over items]")
    else:
        lines.append("Shares of each witness's claims (its answers to the questions, taken "
                     "apart): held = it stood by the claim when cross-examined — FActScore's "
                     "factual precision measured by cross-examination, not a knowledge "
                     "source: whether a model stands by what it says, not whether it is "
                     "true. [95 % intervals, resampling questions]")
        if board.document:
            lines.append("supported: the share of its checkable claims that the question's "
                         "document supports, read by one reference for every witness (the "
                         "detective holding the document; faithfulness, as ragas reports it)")
    if board.pairs:
        lines.append("Paired differences (the same items; paired bootstrap):")
        lines += [f"  {pair.sentence()}" for pair in board.pairs]
        if board.holm:
            lines.append(f"  Intervals corrected for {len(board.rows) * (len(board.rows) - 1) // 2}"
                         " pairs by Holm's step-down (levels above 95 % where so).")
    if any(info.demonstration for info in board.infos):
        lines.append(DEMONSTRATION_WARNING)
    return lines


def board_json(board: Leaderboard) -> dict[str, Any]:
    """The leaderboard as JSON (NaN as null)."""
    def number(value: float) -> float | None:
        return None if math.isnan(value) else round(value, 6)

    def figure(value: Figure) -> dict[str, float | None]:
        return {"value": number(value.value), "low": number(value.low),
                "high": number(value.high)}

    names = [name for name, _ in _columns(board)]
    return {
        "comparison": board.comparison, "labelled": board.labelled, "system": board.system,
        "holm": board.holm,
        "witnesses": [{"witness": row.witness, "provider": row.label, "run": row.run,
                       "items": row.items, "failed": row.failed, "claims": row.claims,
                       "figures": {name: figure(row.figure(name)) for name in names}}
                      for row in board.rows],
        "pairs": [{"a": p.a, "b": p.b, "figure": p.figure, "difference": number(p.difference),
                   "low": number(p.low), "high": number(p.high), "level": round(p.level, 6),
                   "p_value": round(p.p_value, 6), "items": p.n, "shown": p.shown,
                   "sentence": p.sentence()} for p in board.pairs],
    }


def _plot(board: Leaderboard, directory: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = board.headline
    rows = board.rows
    figure, axes = plt.subplots(figsize=(6, 0.6 * len(rows) + 1.6))
    for y, value in enumerate(row.figure(name) for row in rows):
        if math.isnan(value.value):
            continue
        low = value.value - value.low if not math.isnan(value.low) else 0
        high = value.high - value.value if not math.isnan(value.high) else 0
        axes.errorbar(value.value, y, xerr=[[low], [high]], fmt="o", capsize=4)
    axes.set_yticks(range(len(rows)), [row.witness for row in rows])
    axes.set(xlim=(0, 1), xlabel=f"{name} (95 % interval)",
             title=f"Witnesses compared: {name}")
    figure.tight_layout()
    figure.savefig(directory / "leaderboard.png", dpi=100)
    plt.close(figure)
    return "leaderboard.png"


def write_board(board: Leaderboard, directory: Path) -> list[Path]:
    """report.md (the table, the paired differences) and leaderboard.png in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    plot = _plot(board, directory)
    parts = [f"# Witness comparison {board.comparison}", ""]
    if any(info.demonstration for info in board.infos):
        parts += [f"> **{DEMONSTRATION_WARNING}**", ""]
    parts += [_markdown_table(board_table(board)), ""]
    parts += [line.strip() if not line.startswith("  ") else f"- {line.strip()}"
              for line in board_lines(board)]
    parts += ["", f"![{plot}]({plot})", ""]
    (directory / "report.md").write_text("\n".join(parts), encoding="utf-8")
    return [directory / "report.md", directory / plot]
