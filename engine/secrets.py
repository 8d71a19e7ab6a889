"""API keys: where they come from, and making sure they never leave in text.

A key is resolved from an environment variable, a key command, or the config file (only when
that file is private, mode 0600). Every resolved key is remembered in-process so that `redact`
can mask it anywhere it turns up: in error messages, logs and exports. Well-known key shapes
are masked too, which covers keys we never resolved ourselves (a server echoing one back).
"""

from __future__ import annotations

import re
import subprocess
import threading

__all__ = ["KeyResolutionError", "redact", "register_secret", "run_key_command"]

_MASK = "[redacted]"
_known: set[str] = set()
_lock = threading.Lock()
_known_pattern: re.Pattern[str] | None = None

# Shapes of real keys: OpenAI (sk-…, sk-proj-…), Anthropic (sk-ant-…), Google (AIza…),
# and bearer tokens in echoed headers.
_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_\-]{8,}"
    r"|AIza[0-9A-Za-z_\-]{20,}"
    r"|(?i:bearer)\s+[A-Za-z0-9_\-\.=]{12,}"
)


class KeyResolutionError(Exception):
    """A key command failed; the message never includes the command's output."""


def register_secret(value: str) -> None:
    """Remember `value` so that `redact` masks it from now on (ignores very short values)."""
    global _known_pattern
    value = value.strip()
    if len(value) < 6:
        return
    with _lock:
        if value in _known:
            return
        _known.add(value)
        alternatives = sorted(_known, key=len, reverse=True)
        _known_pattern = re.compile("|".join(re.escape(v) for v in alternatives))


def redact(text: str) -> str:
    """Return `text` with every registered secret and every key-shaped token masked."""
    pattern = _known_pattern
    if pattern is not None:
        text = pattern.sub(_MASK, text)
    return _SHAPES.sub(_MASK, text)


def run_key_command(command: str, timeout: float = 10.0) -> str:
    """Run a key command (e.g. `pass show openai`) and return its first line of output."""
    try:
        done = subprocess.run(
            command,
            shell=True,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise KeyResolutionError(f"key command timed out after {timeout:g} s") from None
    except OSError as exc:
        raise KeyResolutionError(f"key command could not run: {exc.strerror}") from None
    if done.returncode != 0:
        raise KeyResolutionError(f"key command exited with status {done.returncode}")
    key = done.stdout.strip().splitlines()[0].strip() if done.stdout.strip() else ""
    if not key:
        raise KeyResolutionError("key command printed nothing")
    register_secret(key)
    return key
