"""`detektiv cache …`: the response cache from the command line (SPEC §3).

put · match (the explanation and the nearest rejected candidates) · list · show · invalidate ·
delete · export (json, csv) · import · stats. No Textual here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine import (
    ConfigError,
    Paths,
    Workspace,
    atomic_write_text,
    explanation_lines,
    read_json,
    strip_control,
)

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser],
               common: argparse.ArgumentParser) -> None:
    """Register `detektiv cache` and its subcommands."""
    cache = commands.add_parser("cache", parents=[common], help="the response cache")
    sub = cache.add_subparsers(dest="action", metavar="ACTION", required=True)
    put = sub.add_parser("put", parents=[common], help="store an answer for a question")
    put.add_argument("question")
    answer = put.add_mutually_exclusive_group(required=True)
    answer.add_argument("--answer", metavar="TEXT")
    answer.add_argument("--answer-file", type=Path, metavar="FILE")
    put.add_argument("--realtime", action="store_true", help="time-sensitive: never served")
    put.add_argument("--template", action="store_true", help="the answer is a template")
    put.add_argument("--json", action="store_true", help="print the stored entry as JSON")
    match = sub.add_parser("match", parents=[common], help="what a question would match, why")
    match.add_argument("question")
    match.add_argument("--json", action="store_true")
    listing = sub.add_parser("list", parents=[common], help="entries, most recently used first")
    listing.add_argument("--search", default="", metavar="S")
    listing.add_argument("--json", action="store_true")
    for name, text in (("show", "one entry with its validation"),
                       ("invalidate", "never serve an entry again"),
                       ("delete", "remove an entry")):
        one = sub.add_parser(name, parents=[common], help=text)
        one.add_argument("id", help="entry id or a unique prefix")
        one.add_argument("--json", action="store_true", help="print JSON")
    export = sub.add_parser("export", parents=[common], help="every entry as JSON or CSV")
    export.add_argument("--format", choices=("json", "csv"), default="json")
    export.add_argument("-o", "--output", type=Path, metavar="FILE")
    imported = sub.add_parser("import", parents=[common], help="entries from a JSON export")
    imported.add_argument("file", type=Path)
    imported.add_argument("--json", action="store_true", help="print the count and ids as JSON")
    stats = sub.add_parser("stats", parents=[common], help="hits, misses, size")
    stats.add_argument("--json", action="store_true")


def run(paths: Paths, args: argparse.Namespace) -> int:
    """Run `detektiv cache ACTION`."""
    workspace = Workspace(paths)
    cache = workspace.cache
    try:
        match args.action:
            case "put":
                answer = args.answer if args.answer is not None else _read(args.answer_file)
                entry = cache.put(args.question, answer, realtime=args.realtime,
                                  template=args.template)
                status = entry.validation_metadata.status if entry.validation_metadata else "?"
                if args.json:
                    print(json.dumps(entry.model_dump(mode="json"), ensure_ascii=False,
                                     indent=1))
                    return 0
                print(entry.entry_id)
                print(f"detektiv: stored ({status}"
                      + (", time-sensitive: never served" if entry.requires_realtime else "")
                      + ")", file=sys.stderr)
            case "match":
                why, served = cache.lookup(args.question)
                if args.json:  # what was served, named: no second call to check it
                    named = None if served is None else {
                        "entry_id": served.entry_id, "question": served.question,
                        "answer_first_line": next(
                            (line.strip() for line in served.payload.splitlines()
                             if line.strip()), "")}
                    print(json.dumps({"explanation": why.model_dump(mode="json"),
                                      "served": named,
                                      "answer": served.payload if served else None},
                                     ensure_ascii=False, indent=1))
                    return 0 if served else 1
                print("\n".join(explanation_lines(why)))
                if served is not None:
                    print(strip_control(served.payload))
                return 0 if served else 1
            case "list":
                entries = cache.entries(args.search)
                if args.json:
                    print(json.dumps([e.model_dump(mode="json") for e in entries],
                                     ensure_ascii=False, indent=1))
                    return 0
                for e in entries:
                    state = "invalidated" if e.invalidated else (
                        e.validation_metadata.status if e.validation_metadata else "?")
                    print(f"{e.entry_id[:8]}  {state:11}  {e.usage_count:>5}  "
                          f"{strip_control(e.question)[:70]}")
            case "show":
                found = cache.get(args.id)
                if found is None:
                    raise ConfigError(f"no cache entry matches {args.id!r}")
                print(json.dumps(found.model_dump(mode="json"), ensure_ascii=False, indent=1))
            case "invalidate":
                done = cache.invalidate(args.id).entry_id
                print(json.dumps({"invalidated": done}) if args.json else f"invalidated {done}")
            case "delete":
                cache.delete(args.id)
                print(json.dumps({"deleted": args.id}) if args.json else f"deleted {args.id}")
            case "export":
                text = cache.export(args.format)
                if args.output is None:
                    sys.stdout.write(text)
                else:
                    atomic_write_text(args.output, text)
            case "import":
                ids = [cache.put(str(item["question"]), str(item["payload"]),
                                 realtime=bool(item.get("requires_realtime")),
                                 template=bool(item.get("response_template")),
                                 provider=_text(item.get("provider_used"))).entry_id
                       for item in _load(args.file)]
                if args.json:
                    print(json.dumps({"imported": len(ids), "ids": ids}))
                print(f"detektiv: imported {len(ids)} entries", file=sys.stderr)
            case "stats":
                stats = cache.stats()
                if args.json:
                    print(json.dumps(stats))
                else:
                    for name, value in stats.items():
                        print(f"{name:13} {value}")
    finally:
        cache.close()
    return 0


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def _load(path: Path) -> list[dict[str, object]]:
    try:
        data = read_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a cache export: {exc}") from None
    if not isinstance(data, list) or not all(
            isinstance(i, dict) and isinstance(i.get("question"), str)
            and isinstance(i.get("payload"), str) for i in data):
        raise ConfigError(f"{path}: not a cache export (a list of entries with question and "
                          "payload)")
    return data
