"""The console script in a shell: no terminal on stdout, and where detektiv keeps its files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import detektiv


def test_the_app_without_a_terminal_on_stdout_says_so_in_one_line(home: Path) -> None:
    result = detektiv()  # stdout is a pipe here
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "needs a terminal" in result.stderr


def test_paths_lists_every_place_and_whether_it_exists(home: Path) -> None:
    (home / "config.toml").write_text("")
    listed = json.loads(detektiv("paths", "--json").stdout)
    by_name = {row["name"]: row for row in listed}
    assert {"config", "data", "sessions", "cache", "logs", "models", "prompts"} <= set(by_name)
    assert by_name["config"] == {"name": "config", "path": str(home / "config.toml"),
                                 "exists": True, "what": "the configuration (TOML)"}
    assert by_name["cache"]["path"] == str(home / "cache")
    assert by_name["cache"]["exists"] is False
    plain = detektiv("paths").stdout
    assert f"{home / 'cache'}  (not yet)" in plain
