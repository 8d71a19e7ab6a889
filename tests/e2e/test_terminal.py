"""The app in a real terminal: a pseudo-terminal for byte-level checks, tmux end to end."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from engine import Paths
from engine.storage.sessions import SessionStore
from tests.support.app import config_text
from tests.support.cases import HOSTILE, TEST_ORACLE, VTT, hostile_session
from tests.support.servers import ROOT, LlamaServer, cli, tmux_server

BIDI = ("\u202e", "\u202c", "\u2066", "\u2069", "\u200f", "\u200b", "\ufeff", "\u2060",
        "\U000e0041", "\U000e007f")
FORBIDDEN = (b"\x1b]0;PWNED", b"\x1b]52;c;bWFsaWNpb3Vz", b"\x1b]8;;http://evil", b"\xc2\x9b31m",
             b"\x9b31m", *(ch.encode() for ch in BIDI))


class Terminal:
    """A child process on a pseudo-terminal of a fixed size; all its output is kept."""

    def __init__(self, args: list[str], env: dict[str, str], size: tuple[int, int] = (100, 30)):
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        self.process = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env,
                                        cwd=ROOT, start_new_session=True)
        os.close(slave)
        self.output = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.output += data

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def wait_for(self, needle: bytes, timeout: float = 30, start: int = 0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            found = self.output.find(needle, start)
            if found >= 0:
                return found
            if time.monotonic() > deadline or self.process.poll() is not None:
                tail = bytes(self.output[-3000:])
                raise AssertionError(f"never saw {needle!r}; exit {self.process.poll()}; {tail!r}")
            time.sleep(0.05)

    def press_until(self, key: bytes, needle: bytes, timeout: float = 30) -> None:
        """Send `key` until `needle` shows after it: a key pressed before the app reads its
        input is pressed again (the keys used here do the same thing twice)."""
        deadline = time.monotonic() + timeout
        while True:
            mark = len(self.output)
            self.send(key)
            try:
                self.wait_for(needle, timeout=2, start=mark)
                return
            except AssertionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise

    def close(self) -> int:
        try:
            code = self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._reader.join(timeout=5)
        os.close(self.master)
        return code


def env_for(home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**keep, "DETEKTIV_HOME": str(home), "TERM": "xterm-256color", "COLUMNS": "100",
            "LINES": "30"}




def test_no_escape_sequence_from_model_text_reaches_the_terminal(home: Path) -> None:
    store = SessionStore.of(Paths.at(home))
    hostile_session(store)
    term = Terminal(cli(), env_for(home))
    try:
        term.wait_for(b"Sessions")
        term.wait_for(b"PWNED-TITLE")  # the hypothesis in the table, as text
        mark = len(term.output)
        term.send(b"o")  # open it: the Live tab replays the question and answer
        term.wait_for(b"Question", start=mark)
        term.wait_for(b"quit", start=mark)
        term.press_until(b"1", b"Sessions")  # still alive after drawing it, and listening
        term.send(b"\x11")  # ctrl+q
    finally:
        code = term.close()
    assert code == 0
    output = bytes(term.output)
    for sequence in FORBIDDEN:
        assert sequence not in output, sequence
    assert b"bWFsaWNpb3Vz" in output  # shown, as inert text


def test_an_invalid_utf8_byte_on_stdin_does_not_crash_the_app(home: Path) -> None:
    term = Terminal(cli(), env_for(home))
    try:
        term.wait_for(b"Sessions")
        term.press_until(b"\xff\xfe2", b"Hypothesis")  # then the Live tab: still listening
        term.send(b"\x11")
    finally:
        code = term.close()
    assert code == 0
    assert b"Traceback" not in bytes(term.output)


STOCK_APP = """
from textual.app import App
from textual.widgets import Static
class Stock(App):
    def compose(self):
        yield Static("stock app ready")
Stock().run()
"""


def test_a_stock_textual_app_does_crash_on_it(home: Path) -> None:
    """The control for the test above: without our decoder the same byte kills the app."""
    term = Terminal([sys.executable, "-c", STOCK_APP], env_for(home))
    try:
        term.wait_for(b"stock app ready")
        deadline = time.monotonic() + 30
        while term.process.poll() is None and time.monotonic() < deadline:
            term.send(b"\xff")  # again until it is read
            time.sleep(0.1)
        alive = term.process.poll() is None
        if alive:
            term.send(b"\x11")
            term.process.kill()
    finally:
        term.close()
    assert not alive, "stock Textual survived: the decoder patch may no longer be needed"


@pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                    reason="tmux is not installed")
def test_end_to_end_in_tmux(home: Path, llama_server: LlamaServer, sleuth: str) -> None:
    """tmux starts detektiv; keys start an interrogation; the pane shows the streamed answer
    and then the audit with its verdict. The witness is the real server; the detective is
    scripted (its questions and verdict must not depend on what the tiny model says)."""
    assert shutil.which("tmux"), "tmux is required in CI"
    (home / "config.toml").write_text(config_text(
        {"llama": llama_server.url, "sleuth": sleuth}, ["sleuth"], ["llama"]))
    (home / "oracles").mkdir()
    # an oracle the tiny model answers greedily on a case holding call.vtt (see test_consult)
    (home / "oracles" / "judge.md").write_text(
        TEST_ORACLE.format(name="Judge", tokens=24))
    call = home / "call.vtt"
    call.write_text(VTT)
    env = env_for(home)
    command = " ".join([*cli()])
    with tmux_server(env) as tmux:
        subprocess.run([*tmux, "new-session", "-d", "-x", "120", "-y", "40", command],
                       env=env, cwd=ROOT, check=True)
        drive_the_app(tmux, call)


def pane_of(tmux: list[str]) -> str:
    """What tmux's pane shows now."""
    return subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True, text=True,
                          check=True).stdout


def wait_in(tmux: list[str], text: str, timeout: float = 90) -> str:
    """The pane once it shows `text` (an `AssertionError` with the pane after `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        screen = pane_of(tmux)
        if text in screen:
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {text!r} in:\n{screen}")
        time.sleep(0.2)


def drive_the_app(tmux: list[str], call: Path) -> None:

    def pane() -> str:
        return pane_of(tmux)

    def wait(text: str, timeout: float = 90) -> str:
        return wait_in(tmux, text, timeout)

    # the first run: an empty Sessions tab says what to do; `n`, a hypothesis, Enter
    wait("No sessions yet")
    # the help closes on Escape and a key sent at once (one alt+key, as over SSH)
    subprocess.run([*tmux, "send-keys", "?"], check=True)
    wait("set -g set-clipboard on")
    subprocess.run([*tmux, "send-keys", "Escape", "x"], check=True)
    deadline = time.monotonic() + 30
    while "set-clipboard" in pane():
        assert time.monotonic() < deadline, f"the help stayed open:\n{pane()}"
        time.sleep(0.2)
    subprocess.run([*tmux, "send-keys", "n"], check=True)
    wait("Start run")  # the hypothesis has the cursor: the footer says so
    subprocess.run([*tmux, "send-keys", "Bees make honey", "Enter"], check=True)
    screen = wait("Answer · llama:gemma")
    assert "Question · sleuth:gemma" in screen
    screen = wait("consistency", timeout=120)
    assert "Audit" in screen and "Gap analysis" in screen
    wait("verdict: true (p 0.05)")  # the Live badge
    # the Oracles tab works on the session Live shows; then a new case from the keyboard,
    # a note imported by path, and the highlighted oracle consulted on it
    subprocess.run([*tmux, "send-keys", "3"], check=True)
    wait("Session ")
    wait("Bees make honey")
    subprocess.run([*tmux, "send-keys", "s"], check=True)
    wait("New case (notes only)")
    subprocess.run([*tmux, "send-keys", "Enter"], check=True)
    wait("Title of the new case")
    subprocess.run([*tmux, "send-keys", "Pricing call", "Enter"], check=True)
    assert "Pricing call" in wait("0 notes · 0 answers")
    subprocess.run([*tmux, "send-keys", "i"], check=True)
    wait("Import a note")
    subprocess.run([*tmux, "send-keys", str(call), "Enter"], check=True)
    assert "Pricing call" in wait("1 note · 0 answers")
    subprocess.run([*tmux, "send-keys", "c"], check=True)
    screen = wait("saved as 001_judge.txt", timeout=120)
    assert "asking llama:gemma" in screen
    subprocess.run([*tmux, "send-keys", "C-q"], check=True)


def test_invisible_reordering_text_never_reaches_the_cli_but_stays_in_the_data(
    home: Path,
) -> None:
    """`show` and `export md` neutralise bidi overrides and zero-width characters; the stored
    session and the JSON export keep the text exactly as the model wrote it."""
    store = SessionStore.of(Paths.at(home))
    session = hostile_session(store)
    env = env_for(home)

    def run(*args: str) -> bytes:
        done = subprocess.run(cli(*args), env=env, cwd=ROOT, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    shown = run("show", str(session.id)[:8])
    markdown = run("export", str(session.id)[:8], "--format", "md")
    exported = run("export", str(session.id)[:8], "--format", "json")
    for output in (shown, markdown):
        assert b"DESREVER" in output and b"isolated" in output
        for ch in BIDI:
            assert ch.encode() not in output, ch
    for ch in BIDI:
        assert ch.encode("unicode_escape") in exported or ch.encode() in exported, ch
    assert store.load(store.list()[0].dir).qa_pairs[0].answer == f"A: {HOSTILE}"


@pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                    reason="tmux is not installed")
def test_a_pasted_testimony_is_marked_claim_by_claim_in_tmux(
        home: Path, llama_server: LlamaServer) -> None:
    """A testimony typed into the Live tab in a real terminal: the detective (scripted: its
    split and its judgements must not depend on the tiny model) takes it apart, the real
    witness answers each claim's question, and the pane shows each claim's mark after its
    sentence and in the list."""
    from tests.support.scripted import (
        Judged,
        ScriptedModel,
        detective as asking,
        is_judgement,
        judged_claim,
    )

    held, invented = "Bees make honey from nectar.", "Bees are a kind of fish."

    def detective(messages: list[dict[str, str]]) -> str:
        if is_judgement(messages):
            return Judged(0.95 if judged_claim(messages) == held else 0.04)
        if messages[0]["content"].startswith("You take a text apart"):
            return f"{held}\n{invented}"
        return asking(messages)  # questions the tiny witness answers at length

    assert shutil.which("tmux"), "tmux is required in CI"
    with ScriptedModel(detective) as sleuth:
        (home / "config.toml").write_text(config_text(
            {"llama": llama_server.url, "sleuth": sleuth.url + "/v1"}, ["sleuth"], ["llama"],
            min_rounds=1))
        env = env_for(home)
        with tmux_server(env) as tmux:
            subprocess.run([*tmux, "new-session", "-d", "-x", "120", "-y", "40",
                            " ".join(cli())], env=env, cwd=ROOT, check=True)

            def wait(text: str) -> str:
                return wait_in(tmux, text, timeout=120)

            wait("No sessions yet")
            subprocess.run([*tmux, "send-keys", "2", "n"], check=True)
            wait("Start run")  # the hypothesis has the cursor: the footer says so
            subprocess.run([*tmux, "send-keys", f"{held} {invented}", "Enter"], check=True)
            # the claims are examined side by side: either may end first, so wait for both
            screen = wait("[✗2]")
            if f"{held} [✓1]" not in screen:
                screen = wait(f"{held} [✓1]")
            assert "[✗2]" in screen
            # the claims listed a line each: mark, number, words, then the state
            assert re.search(r"✓ 1 .*held", screen) and re.search(r"✗ 2 .*contradicted", screen)
            subprocess.run([*tmux, "send-keys", "C-q"], check=True)


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_the_first_run_reaches_its_verdicts_on_the_demonstration_model_in_tmux(
        home: Path) -> None:
    """A fresh home, no key, no server, downloads off (the capable model absent): the app on
    the embedded demonstration model, as `make run` opens it. A claim, then the design notes'
    own request, each end with a verdict labelled as a demonstration model's, never `failed`
    (a demonstration model's reply is capped and its deadline fits its speed). Five rounds
    a run (the least there is) keep it to CI's time; the rounds take what they take on a
    busy machine."""
    env = env_for(home)
    env["DETEKTIV_NO_DOWNLOAD"] = "1"
    (home / "config.toml").write_text("[interrogation]\niteration_limit = 5\n")
    with tmux_server(env) as tmux:
        subprocess.run([*tmux, "new-session", "-d", "-x", "120", "-y", "40", " ".join(cli())],
                       env=env, cwd=ROOT, check=True)

        def ended(before: int) -> str:
            """The pane once more than `before` sessions have ended; it fails only when the
            pane stood still for 300 s (a run that streams on is waited for, however busy
            the machine: the test's own timeout bounds the whole)."""
            deadline, last = time.monotonic() + 300, ""
            while True:
                rows = SessionStore.of(Paths.at(home)).list()
                done = [r for r in rows if r.status != "running"]
                if len(done) > before:
                    return pane_of(tmux)
                pane = pane_of(tmux)
                if pane != last:
                    deadline, last = time.monotonic() + 300, pane
                assert time.monotonic() < deadline, pane
                time.sleep(0.5)

        wait_in(tmux, "No sessions yet")
        subprocess.run([*tmux, "send-keys", "2", "n"], check=True)
        wait_in(tmux, "Start run")  # the hypothesis has the cursor: the footer says so
        subprocess.run([*tmux, "send-keys", "The Eiffel Tower is in Berlin.", "Enter"],
                       check=True)
        ended(0)
        subprocess.run([*tmux, "send-keys", "n"], check=True)
        wait_in(tmux, "Start run")
        subprocess.run([*tmux, "send-keys", "Summarize the health benefits of Vitamin B3",
                        "Enter"], check=True)
        ended(1)
        rows = SessionStore.of(Paths.at(home)).list()
        assert {r.status for r in rows} <= {"completed", "limit-reached"}, rows
        assert all(r.demonstration for r in rows), rows
        assert sorted(r.hypothesis for r in rows) == [
            "Summarize the health benefits of Vitamin B3", "The Eiffel Tower is in Berlin."]
        subprocess.run([*tmux, "send-keys", "C-q"], check=True)
