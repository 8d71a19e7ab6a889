"""The console script in a shell: no terminal on stdout, and where detektiv keeps its files."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from engine import Paths, __version__
from engine.storage.sessions import SessionStore
from tests.support.cli import detektiv
from tests.support.factory import stored_session
from tests.support.servers import cli


def test_the_app_without_a_terminal_on_stdout_says_so_in_one_line(home: Path) -> None:
    result = detektiv()  # stdout is a pipe here
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "needs a terminal" in result.stderr


def test_paths_lists_every_place_and_whether_it_exists(home: Path) -> None:
    (home / "config.toml").write_text("")
    listed = json.loads(detektiv("paths", "--json").stdout)
    by_name = {row["name"]: row for row in listed}
    assert {"config", "data", "sessions", "session-index", "cache", "state", "logs", "models",
            "prompts", "user-prompts", "user-oracles"} <= set(by_name)
    assert by_name["session-index"]["path"] == str(home / "cache" / "sessions-index.jsonl")
    assert by_name["config"] == {"name": "config", "path": str(home / "config.toml"),
                                 "exists": True, "what": "the configuration (TOML)"}
    assert by_name["cache"]["path"] == str(home / "cache")
    assert by_name["state"]["path"] == str(home / "state")
    assert by_name["cache"]["exists"] is False
    plain = detektiv("paths").stdout
    assert f"{home / 'cache'}  (not yet)" in plain


def _completing(home: Path) -> tuple[str, dict[str, str]]:
    store = SessionStore.of(Paths.at(home))
    short = store.load(stored_session(store, "Tides follow the moon")).short_id
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return short, env


def test_the_shipped_scripts_are_what_the_parser_makes_now() -> None:
    from tui.cli import build_parser
    from tui.cli.completion import SHELLS, generate, script

    for shell in SHELLS:
        assert script(shell) == generate(build_parser(), shell), \
            f"tui/completions/detektiv.{shell} is out of date: run `make completions`"
        assert detektiv("completion", shell).stdout == script(shell)


def test_bash_completes_commands_options_and_a_session_id(home: Path, tmp_path: Path) -> None:
    short, env = _completing(home)
    installed = tmp_path / "detektiv.bash"
    installed.write_text(detektiv("completion", "bash").stdout)

    def complete(*words: str) -> list[str]:
        typed = ("detektiv", *words)
        probe = (f"source {installed}\n"
                 f"COMP_WORDS=({' '.join(shlex.quote(w) for w in typed)})\n"
                 f"COMP_CWORD={len(words)}\nCOMP_LINE={shlex.quote(' '.join(typed))}\n"
                 "COMP_POINT=${#COMP_LINE}\n_shtab_detektiv\n"
                 "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
        done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env,
                              timeout=60)
        return done.stdout.split()

    assert "serve" in complete("se")
    assert complete("show", short[:4]) == [short]
    assert "--dry-run" in complete("run", "--d")
    (tmp_path / "mine.toml").write_text("")
    assert complete("run", "--config", f"{tmp_path}/mi") == [f"{tmp_path}/mine.toml"]


def test_fish_completes_a_session_id(home: Path, tmp_path: Path) -> None:
    assert shutil.which("fish"), "fish is not installed (.ci/run installs it)"
    short, env = _completing(home)
    installed = tmp_path / "detektiv.fish"
    installed.write_text(detektiv("completion", "fish").stdout)
    probe = f"source {installed}; complete -C 'detektiv show {short[:4]}'"
    done = subprocess.run(["fish", "-c", probe], capture_output=True, text=True, env=env,
                          timeout=60)
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == [short]


def test_zsh_completes_commands_options_and_a_session_id(home: Path, tmp_path: Path) -> None:
    """In a real interactive zsh (driven through zpty): the installed script, compinit, a Tab
    typed after a word; a key bound to a widget then writes the completed line to a file."""
    assert shutil.which("zsh"), "zsh is not installed (.ci/run installs it)"
    short, env = _completing(home)
    functions = tmp_path / "functions"
    functions.mkdir()
    script = detektiv("completion", "zsh").stdout
    (functions / "_detektiv").write_text(script)
    assert subprocess.run(["zsh", "-n", str(functions / "_detektiv")]).returncode == 0
    line = tmp_path / "line"
    # detektiv as the shell finds it, noting each time the script runs it
    calls, wrapped = tmp_path / "calls", tmp_path / "bin"
    wrapped.mkdir()
    real = Path(sys.executable).parent / "detektiv"
    (wrapped / "detektiv").write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\nexec {real} "$@"\n')
    (wrapped / "detektiv").chmod(0o755)
    env = {**env, "PATH": f"{wrapped}:{env['PATH']}"}

    def ran() -> list[str]:
        said = calls.read_text().splitlines() if calls.exists() else []
        calls.unlink(missing_ok=True)
        return said

    def complete(typed: str) -> str:
        line.unlink(missing_ok=True)
        shell = [
            f"fpath=({shlex.quote(str(functions))} $fpath); autoload -Uz compinit; "
            "compinit -u -D",
            f"dump() {{ print -r -- \"$BUFFER\" > {line}.part && mv {line}.part {line} }}; "
            "zle -N dump; bindkey '^X' dump",
        ]
        probe = "zmodload zsh/zpty\nzpty z zsh -f -i\n"
        probe += "".join(f"zpty -w z {shlex.quote(command)}\n" for command in shell)
        probe += f"zpty -w -n z {shlex.quote(typed)}$'\\t\\x18'\n"
        # waits for the line (a minute at most), not for a fixed time
        probe += f"for i in {{1..600}}; do [[ -e {line} ]] && break; sleep 0.1; done\n"
        probe += "zpty -d z\n"
        subprocess.run(["zsh", "-f", "-c", probe], env=env, timeout=120, capture_output=True)
        assert line.exists(), f"zsh never completed {typed!r}"
        return line.read_text().rstrip("\n")

    assert complete("detektiv sho") == "detektiv show "
    assert ran() == []  # the data is asked for only where it is completed
    assert complete(f"detektiv show {short[:4]}") == f"detektiv show {short} "
    assert ran() == ["complete sessions"]
    (home / "config.toml").write_text('[providers.nightshift]\nkind = "ollama"\n'
                                      'model = "llama3"\n')
    assert complete("detektiv ask -p night") == "detektiv ask -p nightshift "
    # an option where free text (the hypothesis, a question) may come first
    assert complete("detektiv run --dry") == "detektiv run --dry-run "
    assert complete("detektiv ask --js") == "detektiv ask --json "
    assert complete("detektiv eval --basel") == "detektiv eval --baselines "
    # a file where a file goes
    (tmp_path / "claims-held-out.jsonl").write_text("")
    assert complete(f"detektiv eval {tmp_path}/claims-h") == \
        f"detektiv eval {tmp_path}/claims-held-out.jsonl "


def test_debug_logs_on_stderr_and_a_bad_log_level_is_one_line(home: Path) -> None:
    (home / "config.toml").write_text("")
    log = home / "logs" / "detektiv.log"
    plain = detektiv("paths")
    assert "DEBUG" not in plain.stderr and "DEBUG" not in log.read_text()
    shown = detektiv("paths", "--debug")
    assert shown.returncode == 0
    assert f"detektiv: DEBUG tui.cli: detektiv {__version__}: paths" in shown.stderr
    assert f"DEBUG tui.cli: detektiv {__version__}: paths" in log.read_text()

    def run(level: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cli("paths"), capture_output=True, text=True, timeout=60,
                              env={**os.environ, "DETEKTIV_LOG_LEVEL": level})

    bad = run("loud")
    assert bad.returncode == 2
    assert bad.stderr.strip() == ("detektiv: DETEKTIV_LOG_LEVEL: 'loud' is not one of debug, "
                                  "info, warning, error")
    log.unlink()
    filed = run("Debug")
    assert filed.returncode == 0 and "DEBUG" not in filed.stderr  # the file only
    assert "DEBUG tui.cli" in log.read_text()
