"""How an evaluation's figures read: the table (terminal, app and report.md alike), the
report, and the plots.

    rows = eval_table(summary)                # header first; the CLI and the app show it
    write_report(summary, folder, Path("out"))   # report.md, results.jsonl, two PNG plots
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from engine.costs import cost_text
from engine.evals.folder import RESULTS, RunFolder
from engine.evals.summary import EvalSummary, system_name

__all__ = ["DEMONSTRATION_WARNING", "ablation_table", "eval_lines", "eval_table", "fit_lines",
           "reliability_lines", "report_markdown", "summary_json", "write_report"]

DEMONSTRATION_WARNING = (
    "The detective was a demonstration model (a tiny model shipped to test the plumbing): "
    "these verdicts mean nothing about interrogation. Pull a capable model (detektiv models "
    "--catalogue) or configure a cloud detective for figures worth reading."
)

COLUMNS = [
    ("n", "items"), ("accuracy", "accuracy"), ("accuracy_p", "accuracy from p"),
    ("precision", "precision"), ("recall", "recall"),
    ("f1", "F1"), ("auroc", "AUROC"), ("auc_pr", "AUC-PR"), ("ece", "ECE"),
    ("undetermined", "undetermined"), ("tokens", "tokens/item"), ("seconds", "s/item"),
]


def _ablated(key: str) -> bool:
    return key.startswith(("signal:", "without:"))


def eval_table(summary: EvalSummary, intervals: bool = True) -> list[list[str]]:
    """The comparison table, a figure a row and a system a column, the header first
    (positive class: a false claim); the signals' rows are `ablation_table`'s."""
    keys = [key for key in summary.systems if not _ablated(key)]
    rows = [["", *(system_name(key) for key in keys)]]
    for name, title in COLUMNS:
        row = [title]
        for key in keys:
            metrics = summary.systems[key]
            if name == "n":
                row.append(f"{metrics.n}" + (f" ({metrics.failed} failed)"
                                              if metrics.failed else ""))
                continue
            figure = metrics.figures[name]
            if not intervals:
                figure = type(figure)(figure.value)
            digits = 0 if name == "tokens" else (1 if name == "seconds" else 3)
            row.append(figure.text(digits=digits))
        rows.append(row)
    return rows


def ablation_table(summary: EvalSummary) -> list[list[str]]:
    """The interrogation's signals from the same sessions: each one alone and the pool
    without it (AUROC and accuracy, with intervals), a signal a row, the header first; empty
    when the run's sessions read one signal or none."""
    names = [key.split(":", 1)[1] for key in summary.systems if key.startswith("signal:")]
    if not names:
        return []
    rows = [["signal", "items", "alone: AUROC", "alone: accuracy", "pool without it: AUROC",
             "pool without it: accuracy"]]
    for name in names:
        alone = summary.systems[f"signal:{name}"]
        without = summary.systems.get(f"without:{name}")
        rows.append([name, str(alone.n), alone.figures["auroc"].text(),
                     alone.figures["accuracy"].text(),
                     without.figures["auroc"].text() if without else "",
                     without.figures["accuracy"].text() if without else ""])
    return rows


def eval_lines(summary: EvalSummary) -> list[str]:
    """Lines under the table: the run, what the figures count, warnings."""
    info = summary.info
    lines: list[str] = []
    if info is not None:
        lines.append(f"Run {info.id}: {info.dataset} ({info.items} claims, mode {info.mode}, "
                     f"up to {info.limit} rounds); detective {info.detective_label or '?'}, "
                     f"witness {info.witness_label or '?'}")
    lines.append("Positive class: a false claim. Undetermined and failed items count as "
                 "abstentions (never correct, never dropped). [95 % bootstrap intervals]")
    lines.append(f"Cost of the run: {cost_text(summary.cost, summary.unpriced)} "
                 f"over {summary.units} judgings")
    if summary.by_rounds:
        parts = [f"{rounds} round{'s' if rounds != 1 else ''}: "
                 f"{'n/a' if math.isnan(f1) else f'{f1:.3f}'} (n={n})"
                 for rounds, n, f1 in summary.by_rounds]
        lines.append("F1 by rounds asked: " + "; ".join(parts))
    mended = [f"{system_name(kind)} {items} of {summary.systems[kind].n} items "
              f"({retries} retries, {stayed} undetermined by a broken rule)"
              for kind, (items, retries, stayed) in summary.repairs.items()
              if kind in summary.systems and retries]
    if mended:
        lines.append("Repaired (a reply asked for again with the rule it broke): "
                     + "; ".join(mended))
    if info is not None and info.demonstration:
        lines.append(DEMONSTRATION_WARNING)
    return lines


def fit_lines(path: str, figures: dict[str, Any]) -> list[str]:
    """What `eval --fit` says: the fit's figures, where it is, and how to use it."""
    unit = figures.get("unit", "items")
    lines = [f"Fitted the pool ({figures.get('mode')} witness) on {figures.get('items')} "
             f"labelled {unit}, {figures.get('false')} false."]
    cross = figures.get("cross_validated") or figures.get("in_sample")
    if isinstance(cross, dict):
        how = "cross-validated (5 folds)" if "cross_validated" in figures else "in sample"
        lines.append(f"Its figures, {how}: AUROC {cross.get('auroc', float('nan')):.3f}, "
                     f"ECE {cross.get('ece', float('nan')):.3f}.")
    lines.append(f"Wrote {path}. To pool by it, add to config.toml:")
    lines.append("  [interrogation]")
    lines.append(f"  pooling = {json.dumps(path)}")
    return lines


def reliability_lines(summary: EvalSummary, system: str = "interrogation",
                      width: int = 30) -> list[str]:
    """A reliability diagram in text: a bin of probability-false a line, the fraction of its
    claims that were false as a bar, the mean probability given beside it."""
    bins = summary.bins.get(system)
    if not bins:
        return []
    lines = [f"Reliability ({system_name(system)}): bar = fraction false, | = mean p(false) given"]
    for index, (count, mean, observed) in enumerate(bins):
        label = f"{index / 10:.1f}–{(index + 1) / 10:.1f}"
        if not count:
            lines.append(f"{label}  {'':<{width}}  (none)")
            continue
        cells = [" "] * width
        filled = round(observed * width)
        for i in range(filled):
            cells[i] = "█"
        mark = min(width - 1, int(mean * width))
        cells[mark] = "|"
        lines.append(f"{label}  {''.join(cells)}  {observed:.2f} false · p {mean:.2f} "
                     f"· n={count}")
    return lines


def _markdown_table(rows: list[list[str]]) -> str:
    head, *body = rows
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]
    return "\n".join(out)


def report_markdown(summary: EvalSummary, plots: list[str]) -> str:
    """report.md: the table, what it counts, F1 by rounds, the plots."""
    info = summary.info
    title = f"# Evaluation {info.id}" if info is not None else "# Evaluation"
    parts = [title, ""]
    if info is not None and info.demonstration:
        parts += [f"> **{DEMONSTRATION_WARNING}**", ""]
    if info is not None:
        parts += [
            f"- dataset: `{info.dataset}` (sha256 `{info.checksum[:16]}…`), {info.items} "
            f"claims, seed {info.seed}",
            f"- witness mode: `{info.mode}`; up to {info.limit} rounds an interrogation; "
            f"{info.runs} interrogation(s) an item",
            f"- detective: `{info.detective_label}`; witness: `{info.witness_label}`",
            "",
        ]
    parts += [_markdown_table(eval_table(summary)), ""]
    ablation = ablation_table(summary)
    if ablation:
        parts += ["## The signals, from the same sessions", "",
                  "Each signal of the interrogation's sessions alone, and the pool of the "
                  "others without it (the pool's model of those signals).", "",
                  _markdown_table(ablation), ""]
    parts += ["Positive class: a false claim. Undetermined and failed items are counted as "
              "abstentions: never correct, a missed false claim for recall, not a false alarm "
              "for precision. Figures in brackets are 95 % bootstrap intervals over items. "
              "ECE uses 10 equal-width bins of probability-false.", ""]
    if summary.by_rounds:
        parts += ["## F1 by number of rounds", "", "| rounds | items | F1 |", "|---|---|---|"]
        parts += [f"| {rounds} | {n} | {'n/a' if math.isnan(f1) else f'{f1:.3f}'} |"
                  for rounds, n, f1 in summary.by_rounds]
        parts.append("")
    for name in plots:
        parts += [f"![{name}]({name})", ""]
    return "\n".join(parts)


def _plots(summary: EvalSummary, directory: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def reliability(axes: Any) -> None:
        axes.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
        for key, bins in summary.bins.items():
            points = [(mean, observed) for count, mean, observed in bins if count]
            if points:
                xs, ys = zip(*points, strict=True)
                axes.plot(xs, ys, marker="o", label=system_name(key))
        axes.set(xlim=(0, 1), ylim=(0, 1), xlabel="probability-false given",
                 ylabel="fraction of claims that are false", title="Reliability diagram")

    def precision_recall(axes: Any) -> None:
        for key, (precision, recall) in summary.curves.items():
            if recall and not math.isnan(recall[0]):
                axes.step([0.0, *recall], [precision[0], *precision], where="post",
                          label=system_name(key))
        axes.set(xlim=(0, 1), ylim=(0, 1.05), xlabel="recall (false claims caught)",
                 ylabel="precision", title="Precision–recall (positive: a false claim)")

    written: list[str] = []
    for name, draw, legend in (("reliability.png", reliability, "upper left"),
                               ("pr_curve.png", precision_recall, "lower left")):
        figure, axes = plt.subplots(figsize=(5.5, 5))
        draw(axes)
        axes.legend(loc=legend, fontsize="small")  # type: ignore[call-overload]
        figure.tight_layout()
        figure.savefig(directory / name, dpi=100)
        plt.close(figure)
        written.append(name)
    return written


def write_report(summary: EvalSummary, folder: RunFolder, directory: Path) -> list[Path]:
    """report.md, results.jsonl (one line per item and run) and the two plots, in
    `directory` (created); returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    plots = _plots(summary, directory)
    (directory / "report.md").write_text(report_markdown(summary, plots), encoding="utf-8")
    with (directory / RESULTS).open("w", encoding="utf-8") as out:
        for result in folder.latest().values():  # a unit tried again: its last result only
            out.write(result.model_dump_json() + "\n")
    return [directory / "report.md", directory / RESULTS, *(directory / p for p in plots)]


def summary_json(summary: EvalSummary) -> dict[str, object]:
    """A summary as JSON (NaN as null)."""

    def number(value: float) -> float | None:
        return None if value != value else round(value, 6)

    return {
        "run": summary.info.id if summary.info else None,
        "demonstration": bool(summary.info and summary.info.demonstration),
        "systems": {
            key: {"n": m.n, "failed": m.failed, **{
                name: {"value": number(f.value), "low": number(f.low), "high": number(f.high)}
                for name, f in m.figures.items()}}
            for key, m in summary.systems.items()
        },
        "f1_by_rounds": [{"rounds": r, "n": n, "f1": number(f1)}
                         for r, n, f1 in summary.by_rounds],
        "cost": round(summary.cost, 6),
        "unpriced": summary.unpriced,
    }
