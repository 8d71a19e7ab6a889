"""Embedding models for the response cache's semantic tier (`[cache.embeddings]`).

    embedder = open_embedder(settings, paths)
    vectors = embedder.embed(["Who wrote Hamlet?"])     # rows of unit length, float32

Three kinds: `openai` (any OpenAI-compatible `POST …/embeddings`), `ollama` (`POST /api/embed`)
and `gguf` (a GGUF model loaded in-process by llama.cpp, mean-pooled; the bundled Gemma or a
model of `detektiv models pull`). An embedding is data from a server like any other: a reply
that is not a list of finite numbers of one length, one per text, is an `EmbeddingError`
naming what was wrong, never a vector. Keys come from the environment and never reach an
error message.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.errors import DetektivError
from engine.jsondata import read_json

if TYPE_CHECKING:
    from engine.config.models import EmbeddingsConfig
    from engine.paths import Paths

__all__ = ["Embedder", "EmbeddingError", "open_embedder", "unit_rows"]

OLLAMA_URL = "http://127.0.0.1:11434"


class EmbeddingError(DetektivError):
    """The embedding model could not be reached, or answered something that is no embedding."""


def unit_rows(rows: Any, count: int) -> np.ndarray:
    """`rows` (one list of numbers per text) as float32 rows of unit length; `EmbeddingError`
    when they are not `count` non-zero finite vectors of one length."""
    if not isinstance(rows, list) or len(rows) != count:
        raise EmbeddingError(f"expected {count} embedding(s), got "
                             f"{len(rows) if isinstance(rows, list) else type(rows).__name__}")
    if not all(isinstance(row, list) and row and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in row)
               for row in rows):
        raise EmbeddingError("an embedding is not a list of numbers")
    if len({len(row) for row in rows}) != 1:
        raise EmbeddingError("the embeddings are not all of one length")
    matrix = np.asarray(rows, dtype=np.float64)
    if not np.isfinite(matrix).all():
        raise EmbeddingError("an embedding holds a value that is not a finite number")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if (norms == 0).any():
        raise EmbeddingError("an embedding is all zeros")
    unit: np.ndarray = (matrix / norms).astype(np.float32)
    return unit


class Embedder(ABC):
    """One embedding model. `name` goes with every stored vector: vectors of another model are
    never compared with this one's."""

    name: str

    @abstractmethod
    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit-length row per text (`EmbeddingError` when that cannot be had)."""

    @abstractmethod
    def close(self) -> None:
        """Release what the model holds."""


class _HTTPEmbedder(Embedder):
    def __init__(self, settings: EmbeddingsConfig) -> None:
        import httpx

        self.settings = settings
        self.name = f"{settings.kind}:{settings.model}"
        headers = {}
        if settings.api_key_env:
            key = os.environ.get(settings.api_key_env, "")
            if not key:
                raise EmbeddingError(f"[cache.embeddings] api_key_env: {settings.api_key_env} "
                                     "is not set")
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(timeout=settings.timeout, headers=headers)

    def _post(self, url: str, body: dict[str, Any]) -> Any:
        import httpx

        try:
            response = self._http.post(url, json=body)
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"{self.name}: cannot reach {url}: "
                                 f"{type(exc).__name__}") from None
        if response.status_code != 200:
            raise EmbeddingError(f"{self.name}: {url} answered HTTP {response.status_code}")
        try:
            return read_json(response.content)
        except ValueError:
            raise EmbeddingError(f"{self.name}: {url} answered something that is not JSON") \
                from None

    def close(self) -> None:
        self._http.close()


class OpenAIEmbedder(_HTTPEmbedder):
    """`POST {base_url}/embeddings` (OpenAI, llama.cpp's server with `--embeddings`, vLLM…)."""

    def embed(self, texts: list[str]) -> np.ndarray:
        base = (self.settings.base_url or "https://api.openai.com/v1").rstrip("/")
        data = self._post(f"{base}/embeddings", {"model": self.settings.model,
                                                 "input": texts})
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise EmbeddingError(f"{self.name}: the reply has no `data` list")
        ordered = sorted(items, key=lambda item: item.get("index", 0)
                         if isinstance(item, dict) else 0)
        return unit_rows([item.get("embedding") if isinstance(item, dict) else None
                          for item in ordered], len(texts))


class OllamaEmbedder(_HTTPEmbedder):
    """`POST {OLLAMA_HOST}/api/embed` with a list of inputs."""

    def embed(self, texts: list[str]) -> np.ndarray:
        base = (self.settings.base_url or os.environ.get("OLLAMA_HOST") or OLLAMA_URL)
        if "://" not in base:
            base = f"http://{base}"
        data = self._post(f"{base.rstrip('/')}/api/embed", {"model": self.settings.model,
                                                             "input": texts})
        rows = data.get("embeddings") if isinstance(data, dict) else None
        return unit_rows(rows, len(texts))


class GGUFEmbedder(Embedder):
    """A GGUF model loaded in-process by llama.cpp (xllamacpp) in embedding mode, mean-pooled;
    loaded on the first call, one call at a time."""

    def __init__(self, settings: EmbeddingsConfig, paths: Paths) -> None:
        from engine.gguf.store import resolve_model_path

        self.path = resolve_model_path(settings.model or "gemma-3-270m", paths)
        self.name = f"gguf:{self.path.name}"
        self._server: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._server is None:
            import xllamacpp

            from engine.providers._llama import default_threads

            if not self.path.is_file():
                raise EmbeddingError(f"embedding model file not found: {self.path}")
            params = xllamacpp.CommonParams()
            params.model.path = str(self.path)
            params.embedding = True
            params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
            params.n_ctx = 2048
            params.n_parallel = 1
            params.cpuparams.n_threads = params.cpuparams_batch.n_threads = default_threads()
            params.verbosity = -1
            params.port = 0
            params.hostnames = ["127.0.0.1"]
            params.api_keys = [os.urandom(16).hex()]  # in-process only: the port stays shut
            self._server = xllamacpp.Server(params)
        return self._server

    def embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            try:
                reply = self._load().handle_embeddings({"input": texts})
            except EmbeddingError:
                raise
            except Exception as exc:  # noqa: BLE001 — llama.cpp's own errors, named
                raise EmbeddingError(f"{self.name}: {type(exc).__name__}: {exc}") from None
        if isinstance(reply, dict) and "error" in reply:
            error = reply["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise EmbeddingError(f"{self.name}: {message}")
        items = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(items, list):
            raise EmbeddingError(f"{self.name}: the reply has no `data` list")
        return unit_rows([item.get("embedding") if isinstance(item, dict) else None
                          for item in items], len(texts))

    def close(self) -> None:
        with self._lock:
            self._server = None


def open_embedder(settings: EmbeddingsConfig, paths: Paths) -> Embedder:
    """The embedder `settings` describe (nothing is called or loaded yet)."""
    match settings.kind:
        case "openai":
            return OpenAIEmbedder(settings)
        case "ollama":
            return OllamaEmbedder(settings)
        case _:
            return GGUFEmbedder(settings, paths)
