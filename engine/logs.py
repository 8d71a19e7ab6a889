"""The log file: where tracebacks and library noise go, never the user's terminal.

Every record passes through `redact`, so a key that reaches a log message is masked, and
`strip_control`, so a server's words in one drive no terminal it is read in. The files
are private (0600): they hold prompts and error details.
"""

from __future__ import annotations

import io
import logging
import logging.handlers
import os
from pathlib import Path

from engine.secrets import redact
from engine.text import strip_control

__all__ = ["configure_logging", "log_file", "log_level"]

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Log files readable by their owner only (0600), rotated ones included."""

    def _open(self) -> io.TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


class _RedactingFormatter(logging.Formatter):
    """Keys masked, and no terminal control sequence (a server's message is often logged
    whole: the log is read with `tail -f`, and `--debug` echoes it to the terminal)."""

    def format(self, record: logging.LogRecord) -> str:
        return strip_control(redact(super().format(record)))


def log_file(log_dir: Path) -> Path:
    """The log file inside `log_dir`."""
    return log_dir / "detektiv.log"


def log_level(value: str | None, debug: bool = False) -> int:
    """The log level: DEBUG with `--debug`, else `DETEKTIV_LOG_LEVEL` (debug, info, warning,
    error; any case), else INFO. `ValueError` names a level that does not exist."""
    if debug:
        return logging.DEBUG
    if value is None or not value.strip():
        return logging.INFO
    try:
        return LEVELS[value.strip().lower()]
    except KeyError:
        raise ValueError(f"DETEKTIV_LOG_LEVEL: {value!r} is not one of "
                         f"{', '.join(LEVELS)}") from None


def configure_logging(log_dir: Path, level: int = logging.INFO, echo: bool = False) -> Path:
    """Send the `engine` and `tui` loggers (and warnings) to a rotating, redacted log file;
    `echo`: to stderr too, redacted the same way (`--debug` on a command)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_file(log_dir)
    handler = _PrivateRotatingFileHandler(path, maxBytes=2_000_000, backupCount=3, encoding="utf-8")
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        if isinstance(existing, logging.handlers.RotatingFileHandler):
            root.removeHandler(existing)
            existing.close()  # its file, else left open until collected
    root.addHandler(handler)
    if echo:
        shown = logging.StreamHandler()
        shown.setFormatter(_RedactingFormatter("detektiv: %(levelname)s %(name)s: %(message)s"))
        root.addHandler(shown)
    root.setLevel(level)
    logging.captureWarnings(True)
    return path
