"""The case agent's tools, called by the model in text so that every provider kind works:

    <tool name="search_vault">vitamin B3</tool>

`parse_tool_calls` finds them (outside code, at most `MAX_CALLS` a turn); `Toolbox.run` runs
one and gives back a `ToolResult` whose `fenced` text is what the model sees: the output as
data, control characters stripped, signal and tool tags defused, bounded, inside a fence longer
than any in it.

- `search_vault`: the vault index (`engine.agent.vault`), synced first.
- `read_session`: one session's report, compact ("last": the newest session).
- `search_code`: `[agent] code_dir`, literal text, smart case; ripgrep when it is installed, a
  Python walk otherwise; both respect .gitignore files and skip binary and large files.
- `web_search` (and its aliases) is a capability this build does not have: the loop stops with
  `need_capability` when the model asks for it.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.agent.signals import mask_code
from engine.agent.vault import Vault
from engine.errors import DetektivError, SessionCorrupt
from engine.report.claims import claim_line
from engine.report.words import answer_title, contradiction, note_title
from engine.storage.layout import NOTES_DIR, RESPONSES_DIR
from engine.storage.sessions import SessionStore
from engine.text import one_line, strip_control

__all__ = [
    "MAX_CALLS",
    "TOOLS",
    "WEB_TOOLS",
    "ToolCall",
    "ToolResult",
    "Toolbox",
    "fence",
    "parse_tool_calls",
]

MAX_CALLS = 3
TOOLS = ("search_vault", "read_session", "search_code")
WEB_TOOLS = ("web_search", "search_web", "web", "browse", "fetch_url", "google")
CODE_RESULTS = 40
CODE_TIMEOUT = 10.0
MAX_FILE = 1_000_000

_CALL = re.compile(r"<\s*tool\s+name\s*=\s*[\"']?([\w.-]+)[\"']?\s*"
                   r"(/\s*>|>(.*?)(?:<\s*/\s*tool\s*>|$))",
                   re.IGNORECASE | re.DOTALL | re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool the model asked for, with its input."""

    name: str
    argument: str


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's output, and what the model is given of it."""

    call: ToolCall
    text: str
    ok: bool
    summary: str
    """One line for a person: "3 hits in 2 sessions"."""
    truncated: bool
    fenced: str
    sessions: tuple[str, ...] = ()
    """Short ids of the sessions the output names (for `last_reference`)."""


def parse_tool_calls(text: str) -> list[ToolCall]:
    """The tool calls in a reply, outside code, in order, at most `MAX_CALLS` (and each only
    once)."""
    masked = mask_code(text)
    calls: list[ToolCall] = []
    for match in _CALL.finditer(masked):
        start, end = match.span(3) if match.group(3) is not None else (0, 0)
        argument = " ".join(text[start:end].split())[:500] if end else ""
        call = ToolCall(match.group(1).lower(), strip_control(argument))
        if call not in calls:
            calls.append(call)
        if len(calls) == MAX_CALLS:
            break
    return calls


def strip_tool_calls(text: str) -> str:
    """The reply without its tool tags (what a reader is shown; the calls are shown apart)."""
    masked = mask_code(text)
    spans = [m.span() for m in _CALL.finditer(masked)]
    for start, end in reversed(spans):
        text = text[:start] + text[end:]
    return text


_TAGS = re.compile(r"<(\s*/?\s*(?:signal|tool|tool_result)\b)", re.IGNORECASE)


def fence(name: str, text: str, limit: int) -> tuple[str, bool]:
    """`text` as data for the model: cleaned, tags defused, cut to `limit` characters, in a
    fence none of its lines can close."""
    clean = _TAGS.sub(r"‹\1", strip_control(text))
    truncated = len(clean) > limit
    if truncated:
        clean = clean[:limit] + f"\n[… {len(clean) - limit} more characters cut]"
    longest = max((len(m) for m in re.findall(r"`{3,}", clean)), default=2)
    ticks = "`" * (longest + 1)
    return f'<tool_result name="{name}">\n{ticks}text\n{clean}\n{ticks}\n</tool_result>', truncated


_SHORT_ID = re.compile(r"\b[0-9a-f]{8}\b")


class Toolbox:
    """The tools of one run (see the module docstring)."""

    def __init__(self, vault: Vault, store: SessionStore, code_dir: str | None,
                 output_chars: int = 4000) -> None:
        self.vault = vault
        self.store = store
        self.code_dir = code_dir
        self.output_chars = output_chars

    async def run(self, call: ToolCall) -> ToolResult:
        """Run one call; a failure is a result that says so (never an exception)."""
        try:
            match call.name:
                case "search_vault":
                    text, summary = await asyncio.to_thread(self._search_vault, call.argument)
                case "read_session":
                    text, summary = await asyncio.to_thread(self._read_session, call.argument)
                case "search_code":
                    text, summary = await self._search_code(call.argument)
                case _:
                    raise ToolFailed(f"there is no tool {call.name!r}; the tools are "
                                     + ", ".join(TOOLS))
            ok = True
        except ToolFailed as exc:
            text, summary, ok = f"error: {exc}", str(exc), False
        except DetektivError as exc:
            text, summary, ok = f"error: {exc.message}", exc.message, False
        fenced, truncated = fence(call.name, text, self.output_chars)
        sessions = tuple(dict.fromkeys(_SHORT_ID.findall(text)))
        return ToolResult(call, text, ok, summary, truncated, fenced, sessions)

    # ---- the tools -----------------------------------------------------------------------

    def _search_vault(self, query: str) -> tuple[str, str]:
        if not query.strip():
            raise ToolFailed("search_vault needs words to look for")
        hits = self.vault.search(query)
        if not hits:
            return f"no matches for {query!r} in the vault", "no matches"
        lines = [f"{h.short_id} | {h.name[:80]} | {h.ref} | {h.snippet}" for h in hits]
        count = len({h.session for h in hits})
        return ("session | name | where | snippet\n" + "\n".join(lines),
                f"{len(hits)} hit{'s' if len(hits) != 1 else ''} in {count} "
                f"session{'s' if count != 1 else ''}")

    def _read_session(self, ref: str) -> tuple[str, str]:
        ref = ref.strip().strip("\"'")
        if not ref:
            raise ToolFailed("read_session needs a session id (or \"last\")")
        if ref.lower() in ("last", "latest", "newest"):
            listed = self.store.list()
            if not listed:
                raise ToolFailed("there are no sessions")
            ref = listed[0].dir
        session = self.store.load(ref)
        directory = self.store.resolve(ref).name
        out = [f"session {session.short_id}: {session.name}", f"status: {session.status}"]
        if session.hypothesis is not None:
            out.append(f"hypothesis: {session.hypothesis.text}")
        for pair in session.qa_pairs:
            out.append(f"round {pair.sequence} Q: {one_line(pair.question, 300)}")
            out.append(f"round {pair.sequence} A: {one_line(pair.answer, 600)}")
        audit = session.audit_result
        if audit is not None:
            out.append(f"audit: consistency {audit.consistency_score}/100. {audit.summary}")
            out += [f"contradiction {contradiction(c)}" for c in audit.contradictions]
            out += [f"remaining gap: {g.description}" for g in audit.remaining_gaps]
        if session.testimony is not None:
            out += [f"claim {claim_line(c)}" for c in session.testimony.claims]
        for note in session.notes:
            try:
                text = self.store.case_text(directory, NOTES_DIR, note.filename)
            except SessionCorrupt:
                text = "(unreadable)"
            out.append(f"{note_title(note)}: {one_line(text, 600)}")
        for entry in session.llm_entries:
            try:
                text = self.store.case_text(directory, RESPONSES_DIR, entry.response_filename)
            except SessionCorrupt:
                text = "(unreadable)"
            out.append(f"{answer_title(entry)}: {one_line(text, 600)}")
        rounds = len(session.qa_pairs)
        return "\n".join(out), (f"session {session.short_id}: {rounds} "
                                f"round{'s' if rounds != 1 else ''}, {len(session.notes)} notes")

    async def _search_code(self, text: str) -> tuple[str, str]:
        needle = text.strip()
        if not needle:
            raise ToolFailed("search_code needs text to look for")
        if not self.code_dir:
            raise ToolFailed("no code directory is configured ([agent] code_dir)")
        root = Path(self.code_dir).expanduser()
        if not root.is_dir():
            raise ToolFailed(f"the code directory {root} does not exist")
        rg = ripgrep()
        if rg is not None:
            lines = await _ripgrep(rg, needle, root)
            engine = "ripgrep"
        else:
            lines = await asyncio.to_thread(python_search, needle, root)
            engine = "python"
        if not lines:
            return f"no matches for {needle!r} in {root}", f"no matches ({engine})"
        more = " (first results only)" if len(lines) >= CODE_RESULTS else ""
        return "\n".join(lines), f"{len(lines)} matching lines{more} ({engine})"


class ToolFailed(Exception):
    """A tool could not do what it was asked (its message goes back to the model)."""


def ripgrep() -> str | None:
    """The `rg` executable, or None (then the Python search is used)."""
    if os.environ.get("DETEKTIV_NO_RIPGREP"):
        return None
    return shutil.which("rg")


def _smart_case(needle: str) -> bool:
    return needle == needle.lower()


async def _ripgrep(rg: str, needle: str, root: Path) -> list[str]:
    args = [rg, "--line-number", "--no-heading", "--color", "never", "--fixed-strings",
            "--smart-case", "--no-require-git", "--max-columns", "300",
            "--max-columns-preview", "--max-filesize", "1M", "--max-count", "5",
            "--sort", "path", "-e", needle, "--", "."]
    process = await asyncio.create_subprocess_exec(
        *args, cwd=root, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert process.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(CODE_TIMEOUT):
            while len(lines) < CODE_RESULTS:
                raw = await process.stdout.readline()
                if not raw:
                    break
                line = raw.decode("utf-8", "replace").rstrip("\n")
                lines.append(_format(line.removeprefix("./")))
    except TimeoutError:
        lines.append(f"[search stopped after {CODE_TIMEOUT:g} s]")
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
    return lines


def _format(line: str) -> str:
    path, _, rest = line.partition(":")
    number, _, content = rest.partition(":")
    return f"{path}:{number}: {one_line(content, 300)}"


def python_search(needle: str, root: Path) -> list[str]:
    """Literal smart-case search of the files under `root` that git would not ignore (every
    .gitignore on the way down applies), skipping hidden folders, binary and large files."""
    import pathspec

    fold = _smart_case(needle)
    target = needle.lower() if fold else needle
    lines: list[str] = []
    deadline = time.monotonic() + CODE_TIMEOUT
    specs: list[tuple[Path, pathspec.PathSpec[Any]]] = []
    for directory, folders, files in os.walk(root):
        here = Path(directory)
        specs = [(base, spec) for base, spec in specs if here.is_relative_to(base)]
        ignore = here / ".gitignore"
        if ignore.is_file():
            try:
                patterns = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
                specs.append((here, pathspec.GitIgnoreSpec.from_lines(patterns)))
            except OSError:
                pass

        def ignored(path: Path, is_dir: bool,
                    specs: list[tuple[Path, pathspec.PathSpec[Any]]] = specs) -> bool:
            for base, spec in specs:
                relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
                if spec.match_file(relative):
                    return True
            return False

        folders[:] = sorted(f for f in folders
                            if not f.startswith(".") and not ignored(here / f, True))
        for name in sorted(files):
            path = here / name
            if name.startswith(".") or ignored(path, False):
                continue
            try:
                if path.stat().st_size > MAX_FILE:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            relative = path.relative_to(root).as_posix()
            found = 0
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if target in (line.lower() if fold else line):
                    lines.append(f"{relative}:{number}: {one_line(line, 300)}")
                    found += 1
                    if found == 5 or len(lines) >= CODE_RESULTS:
                        break
            if len(lines) >= CODE_RESULTS:
                return lines
        if time.monotonic() > deadline:
            lines.append(f"[search stopped after {CODE_TIMEOUT:g} s]")
            return lines
    return lines
