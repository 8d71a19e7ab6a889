"""Named datasets for `detektiv eval`: the shipped demo set, and files fetched from the Hub.

    path = dataset_path(paths, "halueval-qa", progress)    # fetched on first use, then checked
    path = dataset_path(paths, "claims.jsonl")             # a file: used as it is

A Hub dataset is pinned to one revision. It is fetched once (through `huggingface_hub`, which
resolves the file and its headers, `HF_ENDPOINT` and `HF_TOKEN` included; the bytes move with
the same resumable transfer as `detektiv models pull`) into `data/datasets/NAME/`, and its
sha256 is recorded beside it at that first download (`checksum.json`). Every later use checks
the file against that record: a file changed since is refused, never used. Nothing here can
vouch for the first download itself: the Hub serves these files without a published checksum,
so the record only proves the file has not changed since.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import DatasetError
from engine.jsondata import read_json
from engine.storage.atomic import atomic_write_text, file_sha256

if TYPE_CHECKING:
    from engine.paths import Paths

__all__ = ["DATASETS", "NamedDataset", "dataset_path"]

Progress = Callable[[int, "int | None"], None]
CHECKSUM = "checksum.json"


@dataclass(frozen=True, slots=True)
class NamedDataset:
    """A dataset known by name: shipped (`repo` None) or on the Hub at a pinned revision."""

    name: str
    description: str
    file: str
    repo: str | None = None
    revision: str | None = None


DATASETS: dict[str, NamedDataset] = {
    entry.name: entry for entry in (
        NamedDataset(
            "demo", "40 labelled claims written for detektiv (general knowledge, balanced)",
            "claims.jsonl",
        ),
        NamedDataset(
            "halueval-qa",
            "HaluEval QA (Li et al., 2023): 10,000 questions, each with a right and a "
            "hallucinated answer",
            "qa/data-00000-of-00001.parquet",
            repo="pminervini/HaluEval",
            revision="21e110ea5866a71b6362279dead3f4da5747116c",
        ),
        NamedDataset(
            "halueval-summarization",
            "HaluEval summarization (Li et al., 2023): 10,000 documents, each with a right and "
            "a hallucinated summary (testimonies, examined claim by claim; --mode document "
            "gives the witness the document)",
            "summarization/data-00000-of-00001.parquet",
            repo="pminervini/HaluEval",
            revision="21e110ea5866a71b6362279dead3f4da5747116c",
        ),
    )
}
"""The named datasets (the Hub revision is pinned: a later upload never changes a run)."""


def _shipped(name: str) -> Path:
    return Path(__file__).parent / "data" / name


def dataset_path(paths: Paths, spec: str, progress: Progress | None = None) -> Path:
    """The file behind `spec`: a path as given, a shipped set, or a Hub dataset (fetched on
    first use, then checked against its recorded checksum). `DatasetError` when it cannot be
    had or has changed."""
    entry = DATASETS.get(spec.lower())
    if entry is None:
        path = Path(spec).expanduser()
        if not path.is_file():
            known = ", ".join(DATASETS)
            raise DatasetError(f"{spec}: neither a file nor a named dataset ({known})")
        return path
    if entry.repo is None:
        return _shipped(entry.file)
    return _fetched(paths, entry, progress)


def _fetched(paths: Paths, entry: NamedDataset, progress: Progress | None) -> Path:
    folder = paths.data_dir / "datasets" / entry.name
    target = folder / Path(entry.file).name
    record = folder / CHECKSUM
    if target.is_file() and record.is_file():
        try:
            expected = read_json(record.read_text(encoding="utf-8"))["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            raise DatasetError(f"{entry.name}: {record} is damaged; delete {folder} to fetch "
                               "the dataset again") from None
        actual = file_sha256(target)
        if actual != expected:
            raise DatasetError(
                f"{entry.name}: {target.name} has changed since it was downloaded (sha256 "
                f"{actual[:12]}…, recorded {expected[:12]}…); it is not used. Delete {folder} "
                "to fetch it again")
        return target
    _download(entry, folder, target, progress)
    atomic_write_text(record, json.dumps({
        "dataset": entry.name, "repo": entry.repo, "file": entry.file,
        "revision": entry.revision, "sha256": file_sha256(target),
        "downloaded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "note": "recorded at the first download; later uses are checked against it",
    }, indent=2) + "\n")
    return target


def _download(entry: NamedDataset, folder: Path, target: Path,
              progress: Progress | None) -> None:
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils._headers import build_hf_headers

    from engine.gguf.pull import explain_hub_error, transfer

    assert entry.repo is not None
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    part = target.with_name(target.name + ".part")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        url = hf_hub_url(entry.repo, entry.file, repo_type="dataset",
                         revision=entry.revision, endpoint=endpoint)
        meta = get_hf_file_metadata(url, endpoint=endpoint)
        transfer(meta.location, build_hf_headers(), part, meta.size, progress)
        if meta.size is not None and part.stat().st_size != meta.size:
            raise DatasetError(f"{entry.name}: the download is incomplete; run again "
                               "(it resumes)")
        expected = (meta.etag or "").strip('"').lower()
        if len(expected) == 64 and all(c in "0123456789abcdef" for c in expected):
            actual = file_sha256(part)  # the Hub names an LFS file's sha256 as its ETag
            if actual != expected:
                part.unlink(missing_ok=True)
                raise DatasetError(f"{entry.name}: the download is corrupt (sha256 "
                                   f"{actual[:12]}…, the Hub says {expected[:12]}…); it was "
                                   "deleted: run again")
        os.replace(part, target)
    except DatasetError:
        raise
    except Exception as exc:
        raise DatasetError(f"dataset {entry.name}: "
                           f"{explain_hub_error(exc, entry.repo, entry.file, endpoint)}"
                           ) from None
