"""`detektiv models pull`: a GGUF file from the Hugging Face Hub.

    pull(paths, "qwen2.5-1.5b")                                  # a catalogue name
    pull(paths, "bartowski/Llama-3.2-1B-Instruct-GGUF", "Llama-3.2-1B-Instruct-Q4_K_M.gguf")

`huggingface_hub` resolves the file (`get_hf_file_metadata`: the final URL after the Hub's
redirects, the commit, the size, and the sha256 the Hub names as an LFS file's ETag), makes the
headers (`HF_TOKEN` or a stored login, for gated repositories) and names the Hub's errors;
`HF_ENDPOINT` points it at another hub (the tests' loopback one).

The bytes are moved here, with `httpx`: `hf_hub_download` (2.x) names its partial file anew for
every process and deletes it on failure, so it resumes only within one call, and 0.x takes no
progress callback. Here the file grows in `data/models/NAME/FILE.part`, written as it comes in
1 MiB blocks under a name that stays the same from one pull to the next: a pull interrupted by
Ctrl-C, a kill or a dropped network resumes with a `Range` request where it stopped (a dropped
connection is retried at once, five times). `progress(done, total)` is called as bytes arrive. A
lock keeps two pulls of one model apart.

The checksum is verified: a file that does not hash to the Hub's sha256 is deleted and refused.
The manifest is written last. Every failure is one `ModelError` line: not found (repository,
file or revision), gated or unauthorised, unreachable, a checksum mismatch, a full disk; the
token never appears in one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from engine.errors import DetektivError, ModelError, PullBusy
from engine.gguf.catalog import catalog_entry
from engine.gguf.parts import Cancelled
from engine.gguf.store import (
    GEMMA_NAMES,
    SMOLLM2_NAMES,
    Manifest,
    pulled_at,
    pulled_dir,
    write_manifest,
)
from engine.storage.atomic import file_sha256

if TYPE_CHECKING:
    from engine.paths import Paths

__all__ = ["PullBusy", "explain_hub_error", "pinned_sha256", "pull", "pull_lock", "pull_target",
           "transfer"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"[^a-z0-9._-]+")


def pull_target(spec: str, file: str | None) -> tuple[str, str, str, str]:
    """(name, repo, file, revision) for a catalogue name or `OWNER/REPO FILE`."""
    entry = catalog_entry(spec)
    if entry is not None and file is None:
        return entry.name, entry.repo, entry.file, entry.revision
    if spec.lower() in GEMMA_NAMES | SMOLLM2_NAMES:
        raise ModelError(f"{spec} ships with detektiv: nothing to pull")
    if spec.count("/") != 1 or not all(spec.split("/")):
        raise ModelError(f"{spec!r} is neither a catalogue name (see: detektiv models "
                         "--catalogue) nor a repository OWNER/NAME")
    if not file:
        raise ModelError(f"name the GGUF file to pull from {spec}: detektiv models pull "
                         f"{spec} FILE.gguf")
    if not file.lower().endswith(".gguf") or "/" in file or "\\" in file:
        raise ModelError(f"{file!r} is not a GGUF file name (FILE.gguf, no folders)")
    name = _NAME.sub("-", Path(file).stem.lower()).strip("-.") or "model"
    return name, spec, file, "main"


def explain_hub_error(exc: BaseException, repo: str, file: str, endpoint: str) -> str:
    """One line for a failed pull, naming what to do."""
    from huggingface_hub import errors as hub

    if isinstance(exc, hub.GatedRepoError):
        return (f"{repo} is gated: accept its licence on the Hub, then set HF_TOKEN to a token "
                "with read access")
    if isinstance(exc, hub.RevisionNotFoundError):
        return f"{repo} has no such revision"
    if isinstance(exc, hub.RepositoryNotFoundError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            return (f"{repo}: not authorised (HTTP {status}); set HF_TOKEN to a token with "
                    "read access")
        return f"no repository {repo} on the Hub (or it is private: set HF_TOKEN)"
    if isinstance(exc, hub.EntryNotFoundError):
        return f"{repo} has no file {file}"
    if isinstance(exc, DownloadRefused):
        return f"the download of {repo}/{file} was refused ({exc})"
    if isinstance(exc, hub.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        return f"the Hub answered HTTP {status} for {repo}/{file}"
    if isinstance(exc, OSError) and getattr(exc, "errno", None) == 28:
        return "the disk is full; free some room and pull again (it resumes)"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"cannot download {repo}/{file} from {endpoint}: {text[:200]}"


class DownloadRefused(Exception):
    """The file's URL answered an error status (the Hub's own errors come earlier, from
    the metadata request)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


Progress = Callable[[int, "int | None"], None]
"""Called with (bytes on disk, bytes in all, when known) as a pull goes."""
BLOCK = 1 << 20
RETRIES = 5


def pull(paths: Paths, spec: str, file: str | None = None, *,
         progress: Progress | None = None, cancel: threading.Event | None = None) -> Manifest:
    """Download, verify and record a model; returns its manifest. `ModelError` on failure
    (`Cancelled` when `cancel` was set); what was downloaded of an interrupted pull stays for
    the next one to resume. A catalogue entry that pins a sha256 is held to it, whatever the
    Hub says."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils._headers import build_hf_headers

    name, repo, filename, revision = pull_target(spec, file)
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    folder = pulled_dir(paths) / name
    target, part = folder / filename, folder / f"{filename}.part"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with pull_lock(folder / ".pull.lock", name):
            url = hf_hub_url(repo, filename, revision=revision, endpoint=endpoint)
            meta = get_hf_file_metadata(url, endpoint=endpoint)
            transfer(meta.location, build_hf_headers(), part, meta.size, progress, cancel)
            expected = (meta.etag or "").strip('"').lower()
            hashed = bool(_SHA256.match(expected))  # the Hub names an LFS file's sha256
            actual = file_sha256(part)
            if hashed and actual != expected:
                part.unlink(missing_ok=True)
                raise ModelError(f"pull {name}: the download is corrupt (sha256 {actual[:12]}…, "
                                 f"the Hub says {expected[:12]}…); it was deleted: pull again")
            pinned = pinned_sha256(spec, file)
            if pinned is not None and actual != pinned:
                part.unlink(missing_ok=True)
                raise ModelError(f"pull {name}: the Hub's file is not the one pinned (sha256 "
                                 f"{actual[:12]}…, pinned {pinned[:12]}…); it was deleted")
            hashed = hashed or pinned is not None
            os.replace(part, target)
            manifest = Manifest(
                name=name, repo=repo, file=filename, revision=revision,
                commit=meta.commit_hash, sha256=actual if hashed else None,
                size=target.stat().st_size, pulled_at=pulled_at(),
            )
            write_manifest(folder, manifest)
            return manifest
    except DetektivError:
        raise
    except Exception as exc:
        raise ModelError(f"pull {name}: {explain_hub_error(exc, repo, filename, endpoint)}"
                         ) from None


def pinned_sha256(spec: str, file: str | None) -> str | None:
    """The sha256 the catalogue pins for `spec`, if it names an entry that pins one."""
    entry = catalog_entry(spec) if file is None else None
    return entry.sha256 if entry is not None else None


def transfer(url: str, headers: dict[str, str], part: Path, size: int | None,
             progress: Progress | None, cancel: threading.Event | None = None) -> None:
    """Bring `url` into `part`, continuing from what `part` holds; `Cancelled` as soon as
    `cancel` is set (what came stays)."""

    have = part.stat().st_size if part.exists() else 0
    if size is not None and have > size:  # not this file's beginning
        part.unlink()
        have = 0
    failures = 0
    timeout = httpx.Timeout(30.0, read=120.0)
    while size is None or have < size:
        ask = {**headers, "Accept-Encoding": "identity"}
        if have:
            ask["Range"] = f"bytes={have}-"
        try:
            with httpx.stream("GET", url, headers=ask, timeout=timeout,
                              follow_redirects=True) as response:
                if response.status_code >= 400:  # the metadata said yes, the download no
                    raise DownloadRefused(response.status_code)
                if have and response.status_code == 200:  # the range was ignored: start over
                    have = 0
                with part.open("ab" if have else "wb") as out:
                    for block in response.iter_bytes(BLOCK):
                        if cancel is not None and cancel.is_set():
                            raise Cancelled("cancelled; what came stays for the next pull")
                        out.write(block)
                        have += len(block)
                        if progress is not None:
                            progress(have, size)
            if size is None:
                return
            if have < size:
                raise httpx.RemoteProtocolError("the connection closed early")
        except httpx.TransportError:
            failures += 1
            if failures > RETRIES:
                raise
            time.sleep(min(8.0, 0.5 * 2 ** failures))


@contextlib.contextmanager
def pull_lock(path: Path, name: str) -> Iterator[None]:
    """Hold the model's pull lock, or say that another pull has it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PullBusy(f"pull {name}: another pull of {name} is under way") from None
        yield
    finally:
        os.close(fd)  # closing releases the lock
