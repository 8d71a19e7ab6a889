"""`detektiv models`: the GGUF models detektiv can run here; `pull` and `rm` (SPEC §9).

No Textual here. The pull's progress bar is huggingface_hub's own (tqdm, on stderr)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine import (
    Paths,
    Workspace,
    model_row,
    strip_control,
)
from tui.cli.table import print_table

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser],
               common: argparse.ArgumentParser) -> None:
    """Register `detektiv models` and its subcommands."""
    models = commands.add_parser("models", parents=[common],
                                 help="local GGUF models: list, pull, rm")
    models.add_argument("--json", action="store_true", help="print JSON")
    models.add_argument("--catalogue", action="store_true",
                        help="list the recommended models pull knows by name")
    sub = models.add_subparsers(dest="action", metavar="ACTION")
    pull = sub.add_parser("pull", parents=[common],
                          help="download a model from the Hugging Face Hub")
    pull.add_argument("model", metavar="NAME|REPO", help="a catalogue name or OWNER/REPO")
    pull.add_argument("file", nargs="?", metavar="FILE", help="the GGUF file, with a REPO")
    pull.add_argument("--json", action="store_true",
                      help="print what was pulled as JSON (its manifest, path and use)")
    remove = sub.add_parser("rm", parents=[common], help="delete a pulled model")
    remove.add_argument("model", metavar="NAME")
    remove.add_argument("--json", action="store_true", help="print what was removed as JSON")


def run(paths: Paths, args: argparse.Namespace) -> int:
    """Run `detektiv models [pull|rm]`."""
    models = Workspace(paths).models
    if args.action == "pull":
        bar = _Bar(args.file or args.model)
        try:
            manifest = models.pull(args.model, args.file, progress=bar)
        finally:
            bar.close()
        check = f"sha256 {manifest.sha256[:12]}… verified" if manifest.sha256 else \
            "size checked (the Hub gave no sha256 for this file)"
        print(f"detektiv: pulled {manifest.name} ({manifest.size / 1e6:.0f} MB, {check}); "
              f"use it as local:{manifest.name}", file=sys.stderr)
        if args.json:  # the row `models --json` lists for it
            (pulled,) = [m for m in models.list()
                         if m.name == manifest.name and m.source == "pulled"]
            print(json.dumps(model_row(pulled), ensure_ascii=False))
        return 0
    if args.action == "rm":
        folder = models.remove(args.model)
        print(f"detektiv: removed {args.model} ({folder})", file=sys.stderr)
        if args.json:
            print(json.dumps({"name": args.model, "removed": str(folder)}, ensure_ascii=False))
        return 0
    if args.catalogue:
        entries = models.catalogue()
        if args.json:
            print(json.dumps([vars_of(e) for e in entries], indent=2))
            return 0
        print_table([("NAME", "PARAMS", "SIZE", "CONTEXT", "TOK/S (4 cores)", "LICENCE", "REPO")]
               + [(e.name, e.parameters, f"{e.size_gb:.1f} GB", f"{e.context:,}",
                   e.tokens_per_s, e.licence + (" (gated: HF_TOKEN)" if e.gated else ""),
                   e.repo) for e in entries])
        return 0
    rows = [model_row(m) for m in models.list()]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    table = [("NAME", "SOURCE", "SIZE", "PARAMS", "QUANT", "CONTEXT", "TEMPLATE", "NOTE")]
    for row in rows:
        template = "" if row["chat_template"] is None else \
            ("yes" if row["chat_template"] else "no")
        note = row["error"] or row["note"]
        if row["demonstration"]:
            note = f"demonstration model; {note}"
        table.append((row["name"], row["source"], row["size_text"], row["parameters"] or "",
                      row["quantisation"] or "", f"{row['context_length'] or '':,}"
                      if row["context_length"] else "", template,
                      strip_control(note)))
    print_table(table)
    if not any(row["note"].startswith("the embedded default") and not row["demonstration"]
               for row in rows):
        print("\nThe embedded default is a demonstration model. The capable one (1.1 GB): "
              "detektiv models pull qwen2.5-coder-1.5b; others: detektiv models --catalogue")
    return 0


class _Bar:
    """tqdm on stderr, shown even when stderr is no terminal (a log, CI: tqdm hides itself
    there by default, and a pull of gigabytes should say how far it got)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bar: Any = None

    def __call__(self, done: int, total: int | None) -> None:
        if self.bar is None:
            from tqdm import tqdm

            tty = sys.stderr.isatty()
            self.bar = tqdm(total=total, initial=done, unit="B", unit_scale=True,
                            desc=self.name, file=sys.stderr, ascii=not tty,
                            mininterval=0.2 if tty else 2.0)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def vars_of(entry: object) -> dict[str, object]:
    """A catalogue entry as JSON."""
    from dataclasses import asdict, is_dataclass

    assert is_dataclass(entry) and not isinstance(entry, type)
    return asdict(entry)
