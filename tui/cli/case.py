"""The case-file commands: `oracles`, `new`, `notes`, `notes add`, `consult` (SPEC §4).

No Textual here. Answers stream to stdout (one oracle at a time is written as it comes;
several at once are written whole as each ends, so they never interleave); notes about
providers and trimming go to stderr. `--json` prints one object per line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine import (
    NoteRefused,
    OracleAttempt,
    OracleDelta,
    OracleFailed,
    OracleNote,
    OracleSaved,
    Paths,
    Workspace,
    note_title,
    snapshot_line,
    strip_control,
)
from tui.cli.printer import StreamPrinter

__all__ = ["CASE_COMMANDS", "add_parsers", "dispatch"]

CASE_COMMANDS = ("oracles", "new", "notes", "consult")


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                common: argparse.ArgumentParser) -> None:
    """Register the case-file commands on the `detektiv` parser."""
    oracles = commands.add_parser("oracles", parents=[common],
                                  help="list the oracles (persona prompts), valid or not")
    oracles.add_argument("--json", action="store_true", help="print JSON")
    new = commands.add_parser("new", parents=[common],
                              help="create a session for notes (its interrogation later)")
    new.add_argument("title", help="what the case is called")
    new.add_argument("--json", action="store_true",
                     help="print the new session as JSON (id, short id, folder)")
    notes = commands.add_parser("notes", parents=[common],
                                help="list a session's notes; `notes add ID FILE…` imports")
    notes.add_argument("words", nargs="+", metavar="ID | add ID FILE…",
                       help="a session id to list, or `add`, a session id and files "
                            "(.txt .md .srt .vtt)")
    notes.add_argument("--json", action="store_true", help="print JSON")
    consult = commands.add_parser("consult", parents=[common],
                                  help="consult oracles on a session (several at once)")
    consult.add_argument("session", help="session id, id prefix or folder name")
    consult.add_argument("oracle", nargs="+", help="oracle name, id or slug (1–4)")
    consult.add_argument("-p", "--provider", help="configured name or kind:model for all")
    consult.add_argument("--no-history", action="store_true",
                         help="leave earlier oracle answers out of the context")
    consult.add_argument("--dry-run", action="store_true",
                         help="print the final prompts and their token estimates; send nothing")
    consult.add_argument("--json", action="store_true", help="print one JSON object per line")
    consult.add_argument("--no-cache", action="store_true", help="bypass the response cache")


async def dispatch(paths: Paths, args: argparse.Namespace) -> int:
    """Run the case-file command `args.command`."""
    workspace = Workspace(paths, use_cache=not getattr(args, "no_cache", False))
    try:
        match args.command:
            case "oracles":
                return list_oracles(workspace, args.json)
            case "new":
                return new_case(workspace, args.title, args.json)
            case "notes":
                return notes(workspace, args.words, args.json)
            case _:
                return await consult(workspace, args)
    finally:
        await workspace.aclose()


def list_oracles(workspace: Workspace, as_json: bool) -> int:
    """Every oracle: id, name, source, placeholder or append, valid or why not."""
    oracles = workspace.cases.oracles()
    if as_json:
        print(json.dumps([{
            "id": o.id, "name": o.name, "slug": o.slug, "source": o.source,
            "path": str(o.path), "mode": o.mode, "valid": o.valid, "problem": o.problem,
            "description": o.description, "provider": list(o.provider),
            "temperature": o.temperature, "max_tokens": o.max_tokens,
            "warnings": list(o.warnings),
        } for o in oracles], indent=1, ensure_ascii=False))
        return 0
    if not oracles:
        print(f"No oracles. Put markdown files in {workspace.cases.user_oracles_dir}")
        return 0
    print(f"{'ID':8}  {'NAME':20}  {'SOURCE':11}  {'MODE':11}  STATUS")
    for o in oracles:
        status = "valid" if o.valid else f"invalid: {o.problem}"
        name = strip_control(o.name)[:20]
        print(f"{o.id:8}  {name:20}  {o.source:11}  {o.mode:11}  {strip_control(status)}")
        for warning in o.warnings:
            print(f"{'':8}  warning: {strip_control(warning)}")
    print(f"\nYour own oracles go in {workspace.cases.user_oracles_dir} (a file of the same name "
          "replaces a shipped one).")
    return 0


def new_case(workspace: Workspace, title: str, as_json: bool = False) -> int:
    """Create a notes-only session; print its id (with `as_json`: id, short id, folder)."""
    session = workspace.cases.new_case(title)
    if as_json:
        folder = workspace.sessions.folder(str(session.id))
        print(json.dumps({"id": str(session.id), "short_id": session.short_id,
                          "title": session.title, "dir": str(folder)}, ensure_ascii=False))
    else:
        print(session.short_id)
    print(f"detektiv: created session {session.short_id}; add notes with: detektiv notes add "
          f"{session.short_id} FILE…", file=sys.stderr)
    return 0


def notes(workspace: Workspace, words: list[str], as_json: bool) -> int:
    """`notes ID` lists; `notes add ID FILE…` imports (exit 1 when a file was refused)."""
    if words[0] == "add":
        if len(words) < 3:
            raise NoteRefused("usage: detektiv notes add ID FILE…")
        added, refused = workspace.cases.import_notes(words[1], [Path(w) for w in words[2:]])
        for entry in added:
            print(f"added {note_title(entry)}", file=sys.stderr)
            if not as_json:
                print(entry.filename)
        if as_json:
            print(json.dumps({"added": [e.model_dump(mode="json") for e in added],
                              "refused": refused}, ensure_ascii=False))
        for reason in refused:
            print(f"detektiv: refused {reason}", file=sys.stderr)
        return 1 if refused else 0
    if len(words) != 1:
        raise NoteRefused("usage: detektiv notes ID  or  detektiv notes add ID FILE…")
    texts = workspace.cases.note_texts(words[0])
    if as_json:
        print(json.dumps([{**e.model_dump(mode="json"), "text": t} for e, t in texts],
                         indent=1, ensure_ascii=False))
        return 0
    if not texts:
        print(f"No notes yet. Add some with: detektiv notes add {words[0]} FILE…")
    for entry, text in texts:
        print(f"── {note_title(entry)}")
        print(strip_control(text).rstrip())
        print()
    return 0


async def consult(workspace: Workspace, args: argparse.Namespace) -> int:
    """Consult the oracles named; exit 1 when any gave no answer."""
    for warning in workspace.warnings:
        print(f"detektiv: warning: {warning}", file=sys.stderr)
    consultation = await workspace.cases.consultation(
        args.session, args.oracle, args.provider, False if args.no_history else None)
    if args.dry_run:
        try:
            previews = await consultation.preview()
        finally:
            await consultation.aclose()
        for preview in previews:
            if args.json:
                print(json.dumps({
                    "oracle": preview.oracle.name, "oracle_id": preview.oracle.id,
                    "provider": preview.provider, "window": preview.window,
                    "total_tokens": preview.total,
                    "parts": {p.name: p.tokens for p in preview.parts},
                    "trimmed": list(preview.trimmed), "warnings": list(preview.warnings),
                    "prompt": preview.prompt,
                }, ensure_ascii=False))
                continue
            parts = ", ".join(f"{p.name} ~{p.tokens:,}" for p in preview.parts)
            print(f"═══ {strip_control(preview.oracle.name)} → {preview.provider}: "
                  f"~{preview.total:,} tokens of {preview.window:,} ({parts})")
            for line in preview.trimmed:
                print(f"trimmed: {line}")
            for line in preview.warnings:
                print(f"warning: {strip_control(line)}")
            print(strip_control(preview.prompt).rstrip())
            print()
        return 0
    names = {o.id: o.name for o in consultation.oracles}
    # one oracle streams on a terminal; into a file or a pipe only the answer saved goes (a
    # failover, or thinking voided mid-stream, would leave the discarded start before it)
    single = len(names) == 1 and sys.stdout.isatty()
    whole = len(names) == 1 and not single
    out = StreamPrinter()
    failed = 0
    async for event in consultation.events():
        if args.json:
            print(json.dumps(_event_json(event, names), ensure_ascii=False), flush=True)
            failed += isinstance(event, OracleFailed)
            continue
        match event:
            case OracleAttempt(oracle_id=oid, provider=provider):
                out.note(f"{names[oid]}: asking {provider}")
            case OracleDelta(text=text) if single:
                out.write(text)
            case OracleNote(oracle_id=oid, text=text):
                out.end_line() if single else None
                out.note(f"{names[oid]}: {text}")
            case OracleSaved(oracle_id=oid, entry=entry, text=text):
                if single:
                    out.end_line()
                elif whole:
                    out.write(text)
                    out.end_line()
                else:
                    out.write(f"═══ {strip_control(names[oid])}\n")
                    out.write(text)
                    out.end_line()
                    out.write("\n")
                out.note(f"{names[oid]}: saved as llm_responses/{entry.response_filename} "
                         f"({snapshot_line(entry)})")
            case OracleFailed(oracle_id=oid, error=error):
                out.end_line()
                out.note(f"{names[oid]}: failed: {error}")
                failed += 1
    out.end_line()
    return 1 if failed else 0


def _event_json(event: object, names: dict[str, str]) -> dict[str, object]:
    match event:
        case OracleAttempt(oracle_id=oid, provider=provider):
            return {"type": "attempt", "oracle_id": oid, "oracle": names[oid],
                    "provider": provider}
        case OracleDelta(oracle_id=oid, text=text):
            return {"type": "delta", "oracle_id": oid, "text": text}
        case OracleNote(oracle_id=oid, text=text):
            return {"type": "note", "oracle_id": oid, "text": text}
        case OracleSaved(oracle_id=oid, entry=entry, text=text):
            return {"type": "saved", "oracle_id": oid, "oracle": names[oid],
                    "entry": entry.model_dump(mode="json"), "text": text}
        case OracleFailed(oracle_id=oid, error=error):
            return {"type": "failed", "oracle_id": oid, "oracle": names[oid], "error": error}
    return {"type": "unknown"}
