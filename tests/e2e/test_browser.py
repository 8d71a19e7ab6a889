"""`detektiv serve` in a real headless Chromium: the app loads from the server alone, keys
change the screen, model text stays text, two tabs watch one run that outlives its tab."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine import Paths
from engine.storage.sessions import SessionStore
from tests.support.app import config_text
from tests.support.browser import alive, children, environment_of, served
from tests.support.cli import detektiv
from tests.support.scripted import ScriptedModel, detective as scripted_detective

HOSTILE = "See https://example.com/x [bold red]LOUD[/] [link=https://evil.test]click[/link]"


def _detective(messages: list[dict[str, Any]]) -> str:
    text = scripted_detective(messages)
    return text if text.startswith("{") else f"{HOSTILE} {text}"


def _until(condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.heavy
def test_two_tabs_watch_one_run_that_outlives_its_tab(tmp_path: Path) -> None:
    with ScriptedModel(_detective, pace=0.05) as detective, \
            ScriptedModel(["A: plain words. " * 12], pace=0.6) as witness:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.toml").write_text(config_text(
            {"det": detective.url + "/v1", "wit": witness.url + "/v1"}, ["det"], ["wit"]))
        with served(home, "--no-shared-model",
                    env={"SECRET_TOKEN_X": "s3cr3t", "OPENAI_API_KEY": ""}) as server:
            first = server.open()
            assert {url.split("/")[2] for url in first.requests} == \
                {server.url.split("/")[2]}, "every asset comes from the server itself"
            assert first.page.evaluate("window.open('https://example.com') === null")
            # the browser keymap: ctrl+t is the browser's, f9 toggles the theme
            # (the browser keymap's f9 for the theme: tests/tui/test_app_reads_right.py)

            first.press("2")
            first.wait_for("Nothing is running here yet")
            first.focus_with("n", "Hypothesis, question or text", "none")
            first.type("The river is wide")
            first.press("Enter")
            shown = first.wait_for("click[/link]")
            assert "[bold red]LOUD[/]" in shown and "https://example.com/x" in shown
            assert "[link=https://evil.test]click[/link]" in shown
            assert b"\x1b]8;" not in first.raw, "no hyperlink reaches the page"

            second = server.open()
            second.wait_for("The river is wide")  # the Sessions tab lists the running one
            second.press("Enter")
            # it follows the run live: the status line moves on with each round
            second.wait_for(lambda text: re.search(r"round \d+: (asking|answering|analysing)",
                                                   text) is not None)
            second.wait_for("A: plain words")

            tab_processes = [(pid, line) for pid, line in children(server.process.pid)
                             if line.startswith(sys.executable) and "serve" not in line]
            assert len(tab_processes) == 2
            environment = environment_of(tab_processes[0][0])
            assert "SECRET_TOKEN_X" not in environment
            assert environment["DETEKTIV_SERVED"] == "1"

            first.page.close()  # the run goes on in its process
            second.wait_for(lambda text: "completed" in text or "limit-reached" in text,
                            timeout=120)
        store = SessionStore.of(Paths.at(home))
        (summary,) = store.list()
        assert summary.status in ("completed", "limit-reached")
        # stopping the server stopped every tab's app
        _until(lambda: not any(alive(pid) for pid, _ in tab_processes), timeout=30)


def test_remote_needs_a_flag_and_a_token_and_pages_from_elsewhere_are_refused(
        tmp_path: Path) -> None:
    refused = detektiv("serve", "--host", "0.0.0.0", "--no-shared-model")
    assert refused.returncode == 2
    assert "not a loopback address" in refused.stderr and "--allow-remote" in refused.stderr
    home = tmp_path / "home"
    home.mkdir()
    with served(home, "--allow-remote", "--no-shared-model",
                env={"DETEKTIV_SERVE_TOKEN": "t0k3n"}) as server:
        assert server.url.endswith("?token=t0k3n")
        base = server.url.split("?")[0]
        assert httpx.get(base).status_code == 403
        assert httpx.get(base + "static/js/textual.js").status_code == 403
        page = httpx.get(server.url)
        assert page.status_code == 200 and "googleapis" not in page.text
        assert httpx.get(base + "static/js/textual.js",
                         cookies={"detektiv_token": "t0k3n"}).status_code == 200
        hijack = httpx.get(base + "ws", cookies={"detektiv_token": "t0k3n"},
                           headers={"Origin": "http://evil.test", "Connection": "Upgrade",
                                    "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                                    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
        assert hijack.status_code == 403


@pytest.mark.timeout(300)
def test_tabs_share_one_local_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with served(home) as server:
        server.open()
        server.open()
        processes = children(server.process.pid)
        models = [pid for pid, line in processes
                  if line.startswith(sys.executable) and "local-server" in line]
        tabs = [pid for pid, line in processes if line.startswith(sys.executable)
                and "serve" not in line and "local-server" not in line]
        assert len(models) == 1 and len(tabs) == 2, processes  # no tab fetches a model
        url = environment_of(tabs[0])["DETEKTIV_LOCAL_SERVER"]
        assert url == environment_of(tabs[1])["DETEKTIV_LOCAL_SERVER"]
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url.removesuffix("/v1") + "/health").status_code == 200
    # the shared model and both tabs' apps ended with the server
    _until(lambda: not any(alive(pid) for pid in [*models, *tabs]), timeout=30)
