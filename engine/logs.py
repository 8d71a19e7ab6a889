"""The log file: where tracebacks and library noise go, never the user's terminal.

Every record passes through `redact`, so a key that reaches a log message is masked.
"""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

from engine.secrets import redact

__all__ = ["configure_logging", "log_file"]


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def log_file(log_dir: Path) -> Path:
    """The log file inside `log_dir`."""
    return log_dir / "detektiv.log"


def configure_logging(log_dir: Path, level: int = logging.INFO) -> Path:
    """Send the `engine` and `tui` loggers (and warnings) to a rotating, redacted log file."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_file(log_dir)
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=2_000_000, backupCount=3, encoding="utf-8"
    )
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        if isinstance(existing, logging.handlers.RotatingFileHandler):
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
    return path
