"""The models detektiv knows by short name: the two shipped demonstration models and a short
catalogue of instruction-tuned GGUF models (1–4 B parameters) worth pulling for the detective.
The first is the capable default (`engine.gguf.capable`): the very file `make bench-real`
measures, its revision and sha256 pinned.

Sizes are the files' sizes on the Hub; the speeds are what a 4-core x86 CPU generates with
llama.cpp at Q4 (expected, not measured here: this machine has 2 cores, and the README's
`bench/local_models.py` table says what it measured).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config.shipped import CAPABLE_MODEL, DRAFT_MODEL

__all__ = ["CATALOG", "CatalogEntry", "catalog_entry"]


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One recommended model: where it lives on the Hub and what to expect of it."""

    name: str
    repo: str
    file: str
    parameters: str
    size_gb: float
    licence: str
    context: int
    tokens_per_s: str
    """Expected generation speed on 4 cores (not measured here)."""
    gated: bool = False
    """The repository asks for a licence to be accepted: pull with HF_TOKEN set."""
    revision: str = "main"
    sha256: str | None = None
    """The file's sha256, pinned: a pull of anything else is refused."""


CATALOG: tuple[CatalogEntry, ...] = (
    CatalogEntry(CAPABLE_MODEL, "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
                 "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "1.5B", 1.1, "Apache-2.0", 32768,
                 "~20", revision="2ab9f8f42af02fc212effaef7c4850c885e965f4",
                 sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    CatalogEntry(DRAFT_MODEL, "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
                 "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "0.5B", 0.5, "Apache-2.0", 32768,
                 "~50",
                 sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    CatalogEntry("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B-Instruct-GGUF",
                 "qwen2.5-1.5b-instruct-q4_k_m.gguf", "1.5B", 1.1, "Apache-2.0", 32768, "~20"),
    CatalogEntry("llama3.2-1b", "bartowski/Llama-3.2-1B-Instruct-GGUF",
                 "Llama-3.2-1B-Instruct-Q4_K_M.gguf", "1.2B", 0.8,
                 "Llama 3.2 Community", 131072, "~25"),
    CatalogEntry("smollm2-1.7b", "HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF",
                 "smollm2-1.7b-instruct-q4_k_m.gguf", "1.7B", 1.1, "Apache-2.0", 8192, "~18"),
    CatalogEntry("gemma3-1b", "google/gemma-3-1b-it-qat-q4_0-gguf", "gemma-3-1b-it-q4_0.gguf",
                 "1B", 1.0, "Gemma Terms of Use", 32768, "~25", gated=True),
    CatalogEntry("llama3.2-3b", "bartowski/Llama-3.2-3B-Instruct-GGUF",
                 "Llama-3.2-3B-Instruct-Q4_K_M.gguf", "3.2B", 2.0,
                 "Llama 3.2 Community", 131072, "~10"),
    CatalogEntry("qwen2.5-3b", "Qwen/Qwen2.5-3B-Instruct-GGUF",
                 "qwen2.5-3b-instruct-q4_k_m.gguf", "3.1B", 2.1, "Qwen Research (non-commercial)",
                 32768, "~10"),
    CatalogEntry("phi3.5-mini", "bartowski/Phi-3.5-mini-instruct-GGUF",
                 "Phi-3.5-mini-instruct-Q4_K_M.gguf", "3.8B", 2.4, "MIT", 131072, "~8"),
)


def catalog_entry(name: str) -> CatalogEntry | None:
    """The catalogue entry called `name` (case-insensitive), or None."""
    wanted = name.lower()
    return next((entry for entry in CATALOG if entry.name == wanted), None)
