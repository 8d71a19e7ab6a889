"""Secrets never leave in text; model text never drives the terminal."""

from __future__ import annotations

import string

from hypothesis import given, strategies as st

from engine import ProviderError, redact, strip_control
from engine.secrets import KeyResolutionError, register_secret, run_key_command


def test_registered_secret_is_masked_everywhere() -> None:
    register_secret("hunter2-but-longer")
    assert redact("key=hunter2-but-longer; again hunter2-but-longer") == (
        "key=[redacted]; again [redacted]")
    error = ProviderError("p", "server said: bad key hunter2-but-longer")
    assert "hunter2" not in str(error) and "hunter2" not in error.detail


def test_key_shapes_are_masked_without_registration() -> None:
    text = "sk-proj-AbCdEf0123456789 and AIzaSyA-1234567890abcdefghijkl and Bearer abc.def.ghijklmn"
    masked = redact(text)
    assert "AbCdEf" not in masked and "AIzaSy" not in masked and "abc.def" not in masked


def test_key_command(tmp_path: object) -> None:
    assert run_key_command("printf 'cmd-key-0123456789\\nignored'") == "cmd-key-0123456789"
    assert redact("cmd-key-0123456789") == "[redacted]"
    for command, reason in (("exit 3", "status 3"), ("true", "printed nothing")):
        try:
            run_key_command(command)
        except KeyResolutionError as exc:
            assert reason in str(exc)
        else:
            raise AssertionError("a failing key command must raise")


def test_strip_control_defuses_escape_sequences() -> None:
    hostile = "a\x1b[2Jb\x1b]0;title\x07c\x1b]52;c;SGVsbG8=\x07d\x9b31me\r\nf\tg\x00"
    assert strip_control(hostile) == "a[2Jb]0;titlec]52;c;SGVsbG8=d31me\nf\tg"


@given(st.text(alphabet=st.characters(codec="utf-8")))
def test_strip_control_leaves_no_control_character(text: str) -> None:
    cleaned = strip_control(text)
    assert all(ch in "\n\t" or not (ord(ch) < 32 or 0x7F <= ord(ch) <= 0x9F) for ch in cleaned)
    assert strip_control(cleaned) == cleaned


@given(st.text(alphabet=string.printable.replace("\r", "").replace("\x0b", "").replace("\x0c", "")
               + "éü€漢[]/\\@="))
def test_strip_control_keeps_ordinary_text(text: str) -> None:
    assert strip_control(text) == text


def test_log_file_is_private_and_redacted(tmp_path: object) -> None:
    import logging
    import stat
    from pathlib import Path

    from engine.logs import configure_logging

    directory = Path(str(tmp_path)) / "logs"
    path = configure_logging(directory)
    register_secret("log-secret-0123456789")
    logging.getLogger("engine.test").warning("leaked log-secret-0123456789 here")
    logging.getLogger("engine.test").warning("a server said:\n\x1b]0;owned\x07boom\u202e")
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "leaked [redacted] here" in text and "log-secret" not in text
    assert "a server said:\n]0;ownedboom" in text  # its lines kept, its controls not
    assert not any(c in text for c in "\x1b\x07\u202e")
    handler = next(h for h in logging.getLogger().handlers if hasattr(h, "doRollover"))
    handler.doRollover()  # type: ignore[attr-defined]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(f"{path}.1").stat().st_mode) == 0o600
