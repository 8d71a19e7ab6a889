"""The rule for a front end that listens on a socket (`serve`, `mcp --http`): on loopback
unless told otherwise, and then every request carries a token."""

from __future__ import annotations

import os
import secrets

from engine import ConfigError, is_loopback

__all__ = ["check_listener", "listener_token"]


def check_listener(command: str, host: str, token: str | None) -> None:
    """`ConfigError` for a non-loopback address without a token."""
    if not is_loopback(host) and token is None:
        raise ConfigError(f"{command}: {host} is not a loopback address; add --allow-remote "
                          "(a token is then required)")


def listener_token(variable: str) -> str:
    """The token every request must carry: `variable`'s value, else a new random one."""
    return os.environ.get(variable) or secrets.token_urlsafe(24)
