"""Where detektiv keeps its files.

With `DETEKTIV_HOME` set, everything (config, data, cache, logs) lives under that directory;
tests point it at a temporary directory to isolate themselves. Otherwise the platform's user
directories are used. The bundled model is the exception: it is assembled once per machine into
the user cache (or `DETEKTIV_MODEL_DIR`) so isolated homes do not each copy 250 MB.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

__all__ = ["Paths", "resource_dir"]

_APP = "detektiv"


def _model_dir() -> Path:
    """`DETEKTIV_MODEL_DIR`, else the user cache's `models` (shared by every home)."""
    given = os.environ.get("DETEKTIV_MODEL_DIR")
    return Path(given) if given else Path(platformdirs.user_cache_dir(_APP)) / "models"


@dataclass(frozen=True)
class Paths:
    """The directories and files detektiv reads and writes."""

    config_file: Path
    data_dir: Path
    cache_dir: Path
    log_dir: Path
    model_dir: Path
    state_dir: Path | None = None
    """State that is neither data nor cache (the providers' circuit breakers); None: the data
    directory (a `Paths` made by hand)."""

    @property
    def state(self) -> Path:
        return self.state_dir if self.state_dir is not None else self.data_dir

    @property
    def exports_dir(self) -> Path:
        """Where the app writes what it exports (`e`, `j` on the Sessions tab, the Cache
        tab's `e`): never the working directory, which may be anyone's work tree."""
        return self.data_dir / "exports"

    @property
    def session_index(self) -> Path:
        """The session list's index: rebuilt from the sessions when lost."""
        return self.cache_dir / "sessions-index.jsonl"

    @classmethod
    def at(cls, root: Path, config_file: Path | None = None) -> Paths:
        """Everything under one directory, as `DETEKTIV_HOME=root` lays it out (models from
        `DETEKTIV_MODEL_DIR`, else the user cache)."""
        return cls(
            config_file=config_file or root / "config.toml",
            data_dir=root / "data",
            cache_dir=root / "cache",
            log_dir=root / "logs",
            model_dir=_model_dir(),
            state_dir=root / "state",
        )

    @classmethod
    def from_env(cls, config_file: Path | None = None) -> Paths:
        """Resolve the paths from `DETEKTIV_HOME` or the platform defaults."""
        home = os.environ.get("DETEKTIV_HOME")
        if home:
            return cls.at(Path(home).expanduser(), config_file)
        return cls(
            config_file=config_file or Path(platformdirs.user_config_dir(_APP)) / "config.toml",
            data_dir=Path(platformdirs.user_data_dir(_APP)),
            cache_dir=Path(platformdirs.user_cache_dir(_APP)),
            log_dir=Path(platformdirs.user_log_dir(_APP)),
            model_dir=_model_dir(),
            state_dir=Path(platformdirs.user_state_dir(_APP)),
        )

    def described(self) -> list[tuple[str, Path, str]]:
        """Every file and directory detektiv uses: (name, path, what it holds)."""
        return [
            ("config", self.config_file, "the configuration (TOML)"),
            ("data", self.data_dir, "sessions, evaluation runs, conversations, case notes, "
             "the response cache"),
            ("sessions", self.data_dir / "sessions", "one folder per interrogation"),
            ("exports", self.exports_dir, "what the app exports (Sessions tab e, j; Cache e)"),
            ("cache", self.cache_dir, "rebuildable indexes (the session list's, the case "
             "agent's vault)"),
            ("session-index", self.session_index, "the session list's index (rebuilt from the "
             "sessions when lost)"),
            ("state", self.state, "the providers' circuit breakers and health"),
            ("logs", self.log_dir, "detektiv.log"),
            ("models", self.model_dir, "GGUF models (the bundled one, pulled ones)"),
            ("prompts", resource_dir("prompts"), "the shipped prompts"),
            ("user-prompts", self.config_file.parent / "prompts",
             "your prompts: a file named as a shipped one replaces it"),
            ("user-oracles", self.config_file.parent / "oracles", "your oracles"),
        ]


def resource_dir(name: str) -> Path:
    """The shipped `prompts/` or `themes/` directory, installed or in a source checkout."""
    package = Path(__file__).resolve().parent
    installed = package / "_data" / name
    if installed.is_dir():
        return installed
    return package.parent / name
