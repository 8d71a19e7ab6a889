"""`detektiv serve` in a real headless Chromium (Debian's, driven by playwright; no browser
download). The page is a canvas, so a tab's screen is read from the terminal frames the app
sends over the WebSocket, played into a terminal emulator (pyte)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pyte
from playwright.sync_api import Browser, Page, WebSocket, sync_playwright

from tests.support.processes import alive, children, environment_of
from tests.support.servers import ROOT, cli, stop


def chromium() -> str | None:
    """Debian's Chromium, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Tab:
    """One browser tab on the served app, with its terminal screen as text."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.raw = bytearray()
        self.requests: list[str] = []
        self.screen: pyte.Screen | None = None
        self.stream: pyte.ByteStream | None = None
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("websocket", self._socket)

    def _socket(self, socket: WebSocket) -> None:
        query = parse_qs(urlsplit(socket.url).query)
        width, height = int(query["width"][0]), int(query["height"][0])
        self.screen = pyte.Screen(width, height)
        self.stream = pyte.ByteStream(self.screen)
        socket.on("framereceived", self._frame)
        socket.on("framesent", self._sent)

    def _sent(self, payload: str | bytes) -> None:
        """The page tells the app its terminal's size: the emulator follows."""
        if isinstance(payload, str) and payload.startswith('["resize"'):
            size = json.loads(payload)[1]
            if self.screen is not None:
                self.screen.resize(lines=size["height"], columns=size["width"])

    def _frame(self, payload: str | bytes) -> None:
        if isinstance(payload, bytes):
            self.raw += payload
            if self.stream is not None:
                self.stream.feed(payload)

    def text(self) -> str:
        """The terminal's screen, line by line."""
        return "\n".join(line.rstrip() for line in self.screen.display) if self.screen else ""

    def wait_for(self, condition: Callable[[str], bool] | str, timeout: float = 60) -> str:
        """Wait (processing the page's events) until the screen meets `condition`."""
        check = (lambda text: condition in text) if isinstance(condition, str) else condition
        deadline = time.monotonic() + timeout
        while not check(text := self.text()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; the screen shows:\n{text}")
            self.page.wait_for_timeout(50)
        return text

    def _border_left_of(self, row: int, column: int) -> str | None:
        """The colour of the first drawn cell left of `column` (a field's border)."""
        assert self.screen is not None
        cells = self.screen.buffer[row]
        for left in range(column - 1, -1, -1):
            if cells[left].data.strip():
                return str(cells[left].fg)
        return None

    def has_focus(self, field: str, other: str) -> bool:
        """True when the field showing `field` is drawn focused: its border has another
        colour than the border of the field showing `other` (an unfocused one)."""
        if self.screen is None:
            return False
        found = {}
        for row, line in enumerate(self.screen.display):
            for text in (field, other):
                if text not in found and line.find(text) >= 0:
                    found[text] = (row, line.find(text))
        if len(found) < 2:
            return False
        return self._border_left_of(*found[field]) != self._border_left_of(*found[other])

    def focus_with(self, key: str, field: str, other: str, timeout: float = 30) -> None:
        """Press `key` and wait until the field showing `field` is drawn focused (`other`: an
        unfocused field): keys typed before would land elsewhere."""
        self.page.keyboard.press(key)
        deadline = time.monotonic() + timeout
        while not self.has_focus(field, other):
            if time.monotonic() > deadline:
                raise AssertionError(f"{field!r} never took the focus:\n{self.text()}")
            self.page.wait_for_timeout(30)

    def press(self, *keys: str) -> None:
        """Press keys, each once the app has drawn what the one before changed (a key sent
        before the app moved the focus would land in the old place)."""
        for key in keys:
            drawn = len(self.raw)
            self.page.keyboard.press(key)
            deadline = time.monotonic() + 10
            while len(self.raw) == drawn and time.monotonic() < deadline:
                self.page.wait_for_timeout(20)

    def type(self, text: str) -> None:
        self.page.keyboard.type(text)


class Served:
    """A running `detektiv serve` and a Chromium to open tabs on it."""

    def __init__(self, url: str, process: subprocess.Popen[str], browser: Browser) -> None:
        self.url, self.process, self.browser = url, process, browser
        self.context = browser.new_context(viewport={"width": 1280, "height": 720})

    def open(self) -> Tab:
        page = self.context.new_page()
        tab = Tab(page)
        page.goto(self.url)
        tab.wait_for("Sessions")
        page.locator("#terminal").click()  # keys go to the terminal once it has the focus
        return tab


@contextlib.contextmanager
def served(home: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """`detektiv serve --port 0 ARGS…` on 127.0.0.1, and a headless Chromium."""
    environment = {**os.environ, "DETEKTIV_HOME": str(home), **(env or {})}
    log = (home / "serve.log").open("w")
    process = subprocess.Popen(cli("serve", "--port", "0", *args), stdout=subprocess.PIPE,
                               stderr=log, text=True, env=environment, cwd=home)
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/\S*)", line)
        if found is None:
            raise AssertionError(f"serve did not start: {line!r} "
                                 f"{(home / 'serve.log').read_text()[-2000:]}")
        assert line.rstrip().endswith("(ctrl+c stops it)"), line  # says how it ends
        executable = chromium()
        assert executable is not None, "Debian's chromium is not installed (.ci/run does it)"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable,
                                                 args=["--no-sandbox"])
            try:
                yield Served(found.group(1), process, browser)
            finally:
                browser.close()
    finally:
        stop(process, timeout=30)
        log.close()


__all__ = ["ROOT", "Served", "Tab", "alive", "children", "chromium", "environment_of",
           "served"]
