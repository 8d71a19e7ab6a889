"""The oracle catalog: persona prompts as markdown files (SPEC §4, seed 000).

    catalog = OracleCatalog([(shipped, "shipped"), (user_dir, "user")], "{{CONTEXT}}", ttl=10)
    catalog.list()          # every oracle, valid or not (with the reason), by name
    catalog.find("sceptic") # by id, slug, file name or name; `OracleError` when none or invalid

Directories are read in order; a later one's file replaces an earlier one's of the same file
name (the user's `oracles/` overrides a shipped oracle). The list is scanned again at most every
`ttl` seconds, and a file is parsed again only when its modification time, size or inode
changed, so an edited oracle is picked up without a restart and a scan of 1,000 unchanged files
costs one `stat` each.

A file is an oracle when it is UTF-8 markdown of at most 256 KB with text after its optional
TOML front matter (`+++` … `+++`: provider, temperature, max_tokens, description; any other
key is a warning). Anything else is listed as invalid with the reason; the others still work.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engine.errors import OracleError
from engine.prompts import fill_tokens
from engine.text import slug as make_slug, strip_control

__all__ = ["MAX_ORACLE_BYTES", "ORACLE_TEMPLATE", "Oracle", "OracleCatalog", "parse_oracle"]

MAX_ORACLE_BYTES = 256 * 1024
"""Largest oracle file read; a bigger one is listed as invalid."""
FRONT_MATTER = "+++"
FRONT_KEYS = ("provider", "temperature", "max_tokens", "description")
_H1 = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_TOKEN = re.compile(r"\{\{[^{}\n]{0,64}\}\}")

Mode = Literal["placeholder", "append"]

ORACLE_TEMPLATE = """+++
description = "One line on what this oracle looks for."
+++
# {name}

You are … (who the oracle is, and what it looks for in a case).

## The case

{placeholder}

## How to answer

1. …
"""
"""A new oracle file (`{name}`, `{placeholder}` filled in)."""


@dataclass(frozen=True, slots=True)
class Oracle:
    """One oracle file, parsed. `problem` is None when it can be consulted."""

    id: str
    """First 8 hex characters of SHA-256 of the file's absolute path."""
    name: str
    """The H1 title, else the file name (without `.md`)."""
    path: Path
    source: str
    """Which directory it came from: `shipped`, `ORACLES_DIR` or `user`."""
    placeholder: str
    text: str = ""
    """The prompt (front matter taken off)."""
    provider: tuple[str, ...] = ()
    """Its own provider chain (front matter), empty for the `oracle` role's."""
    temperature: float | None = None
    max_tokens: int | None = None
    description: str = ""
    problem: str | None = None
    warnings: tuple[str, ...] = field(default=())

    @property
    def valid(self) -> bool:
        """True when it can be consulted."""
        return self.problem is None

    @property
    def slug(self) -> str:
        """The file name as a slug (`sceptic`), used in response file names and to name it."""
        return make_slug(self.path.stem, fallback="oracle")

    @property
    def mode(self) -> Mode:
        """`placeholder` when the text has the placeholder, else `append` (context at the end)."""
        return "placeholder" if self.placeholder in self.text else "append"

    def render(self, context: str) -> str:
        """The final prompt: the context put in place of the placeholder (in one pass: a
        placeholder inside the context stays as written), or appended; no whitespace at
        either end."""
        if self.mode == "placeholder":
            return fill_tokens(self.text, {self.placeholder: context}).strip()
        return f"{self.text.strip()}\n\n{context.strip()}"

    def stray_tokens(self) -> list[str]:
        """`{{…}}` in the text that detektiv does not fill (sent as written)."""
        return sorted({t for t in _TOKEN.findall(self.text) if t != self.placeholder})


def oracle_id(path: Path) -> str:
    """The id of the oracle file at `path`."""
    return hashlib.sha256(str(path.absolute()).encode("utf-8", "surrogateescape")).hexdigest()[:8]


def _front_matter(text: str) -> tuple[dict[str, Any], str, str | None]:
    """(front matter, body, problem)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != FRONT_MATTER:
        return {}, text, None
    for index in range(1, len(lines)):
        if lines[index].strip() == FRONT_MATTER:
            raw = "\n".join(lines[1:index])
            try:
                data = tomllib.loads(raw)
            except tomllib.TOMLDecodeError as exc:
                return {}, "", f"front matter is not valid TOML ({exc})"
            return data, "\n".join(lines[index + 1:]), None
    return {}, "", "front matter has no closing +++"


def _settings(data: dict[str, Any]) -> tuple[dict[str, Any], list[str], str | None]:
    """Checked front-matter values, warnings (unknown keys), problem."""
    out: dict[str, Any] = {}
    warnings = [f"unknown front matter key {key!r} ignored" for key in data
                if key not in FRONT_KEYS]
    provider = data.get("provider")
    if provider is not None:
        chain = [provider] if isinstance(provider, str) else provider
        if (not isinstance(chain, list) or not chain
                or not all(isinstance(p, str) and p.strip() for p in chain)):
            return out, warnings, "front matter: provider must be a name or a list of names"
        out["provider"] = tuple(p.strip() for p in chain)
    temperature = data.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float) \
                or not 0 <= temperature <= 2:
            return out, warnings, "front matter: temperature must be a number from 0 to 2"
        out["temperature"] = float(temperature)
    max_tokens = data.get("max_tokens")
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) \
                or not 1 <= max_tokens <= 32768:
            return out, warnings, "front matter: max_tokens must be a whole number, 1–32768"
        out["max_tokens"] = max_tokens
    description = data.get("description")
    if description is not None:
        if not isinstance(description, str):
            return out, warnings, "front matter: description must be text"
        out["description"] = " ".join(strip_control(description).split())
    return out, warnings, None


def _first_prose(body: str) -> str:
    for line in body.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "{{", "+++", "---", "|", "```")):
            return " ".join(strip_control(line).split())
    return ""


def parse_oracle(path: Path, source: str, placeholder: str, data: bytes | None = None) -> Oracle:
    """The oracle in `path` (read unless `data` is given); never raises for a bad file."""
    base = Oracle(oracle_id(path), path.stem, path, source, placeholder)

    def invalid(problem: str) -> Oracle:
        return Oracle(base.id, base.name, path, source, placeholder, problem=problem)

    if data is None:
        try:
            size = path.stat().st_size
            if size > MAX_ORACLE_BYTES:
                return invalid(f"over 256 KB ({size // 1024} KB)")
            data = path.read_bytes()
        except OSError as exc:
            return invalid(f"unreadable ({exc.strerror})")
    if len(data) > MAX_ORACLE_BYTES:
        return invalid(f"over 256 KB ({len(data) // 1024} KB)")
    if b"\x00" in data:
        return invalid("a binary file, not markdown text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return invalid(f"not UTF-8 text (byte {exc.start})")
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if not text.strip():
        return invalid("empty file")
    front, body, problem = _front_matter(text)
    if problem is not None:
        return invalid(problem)
    settings, warnings, problem = _settings(front)
    if problem is not None:
        return invalid(problem)
    if not body.strip():
        return invalid("no prompt text after the front matter")
    title = _H1.search(body)
    name = " ".join(strip_control(title.group(1)).split()) if title else ""
    oracle = Oracle(
        base.id, name or path.stem, path, source, placeholder, body.strip() + "\n",
        provider=settings.get("provider", ()),
        temperature=settings.get("temperature"),
        max_tokens=settings.get("max_tokens"),
        description=settings.get("description") or _first_prose(body)[:160],
    )
    stray = oracle.stray_tokens()
    if stray:
        warnings.append(f"{', '.join(stray)} is not filled by detektiv; sent as written")
    return Oracle(**{**_fields(oracle), "warnings": tuple(warnings)})


def _fields(oracle: Oracle) -> dict[str, Any]:
    return {name: getattr(oracle, name) for name in Oracle.__dataclass_fields__}


class OracleCatalog:
    """Oracles from an ordered list of directories; see the module docstring."""

    def __init__(
        self,
        directories: Sequence[tuple[Path, str]],
        placeholder: str = "{{CONTEXT}}",
        ttl: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directories = list(directories)
        self.placeholder = placeholder
        self.ttl = ttl
        self._clock = clock
        self._listed: list[Oracle] | None = None
        self._at = 0.0
        self._parsed: dict[Path, tuple[tuple[int, int, int], Oracle]] = {}
        self._lock = threading.Lock()  # the Oracles tab lists on a thread, a consultation not

    def refresh(self) -> None:
        """Scan again at the next `list` whatever the TTL (after the user edited a file)."""
        self._listed = None

    def _scan(self) -> list[Oracle]:
        now = self._clock()
        if self._listed is not None and now - self._at < self.ttl:
            return self._listed
        chosen: dict[str, tuple[Path, str, os.stat_result]] = {}
        for directory, source in self.directories:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue  # a missing user directory is normal
            for entry in entries:
                if not entry.name.endswith(".md") or entry.name.startswith("."):
                    continue
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except OSError:
                    continue
                chosen[entry.name] = (Path(entry.path), source, st)
        parsed: dict[Path, tuple[tuple[int, int, int], Oracle]] = {}
        for path, source, st in chosen.values():
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            known = self._parsed.get(path)
            if known is None or known[0] != key or known[1].source != source:
                known = (key, parse_oracle(path, source, self.placeholder))
            parsed[path] = known
        self._parsed = parsed
        self._listed = sorted((o for _, o in parsed.values()),
                              key=lambda o: (o.name.casefold(), o.path.name))
        self._at = now
        return self._listed

    def list(self) -> list[Oracle]:
        """Every oracle, valid or not, ordered by name (scanned at most every `ttl` s)."""
        with self._lock:
            return self._scan()

    def find(self, ref: str) -> Oracle:
        """The oracle `ref` names: its id, its slug or file name, or its name (case and
        accents ignored). `OracleError` when none or several match, or it is invalid."""
        wanted = ref.strip()
        if not wanted:
            raise OracleError("no oracle named")
        oracles = self.list()
        key = make_slug(wanted.removesuffix(".md"), fallback="")
        for test in (
            lambda o: o.id == wanted.lower(),
            lambda o: o.path.name == wanted or o.slug == key,
            lambda o: make_slug(o.name, fallback="") == key,
        ):
            found = [o for o in oracles if test(o)]
            if len(found) == 1:
                oracle = found[0]
                if oracle.problem is not None:
                    raise OracleError(f"oracle {oracle.name!r} ({oracle.path}) is invalid: "
                                      f"{oracle.problem}")
                return oracle
            if len(found) > 1:
                ids = ", ".join(f"{o.id} ({o.path})" for o in found)
                raise OracleError(f"{ref!r} matches several oracles: {ids}; use an id")
        names = ", ".join(o.slug for o in oracles if o.valid) or "none"
        raise OracleError(f"no oracle matches {ref!r} (available: {names}; see "
                          "`detektiv oracles`)")
