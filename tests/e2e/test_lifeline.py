"""Nothing detektiv or its tests start outlives what started it (engine.lifeline), however
that dies: SIGKILL here, which no handler can see."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from engine.lifeline import ENV as LIFELINE
from tests.support.processes import alive, children, marked
from tests.support.servers import ROOT, cli


def gone_within(pids: list[int], seconds: float) -> list[int]:
    """Which of `pids` still run after `seconds` (waiting no longer than it must)."""
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def test_the_shared_model_dies_with_serve_killed_by_sigkill(home: Path) -> None:
    """`detektiv serve` starts one local-server for its tabs; serve dies by SIGKILL (no
    cleanup runs) and the server is gone within 5 s."""
    env = {**os.environ, "DETEKTIV_HOME": str(home)}
    serve = subprocess.Popen(cli("serve", "--port", "0"), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    assert serve.stdout is not None
    assert "http://127.0.0.1:" in serve.stdout.readline()  # after the shared model is up
    model = [pid for pid, line in children(serve.pid) if "local-server" in line]
    assert model, children(serve.pid)
    serve.kill()
    serve.wait()
    serve.stdout.close()
    assert gone_within(model, 5) == [], "the shared local-server outlived serve"


def test_a_local_server_dies_with_a_parent_that_was_not_the_suite(tmp_path: Path) -> None:
    """A script of the user's starts `local-server` through the engine (`spawn_tied`) and is
    killed with SIGKILL: the server goes within 5 s, and so does what it started."""
    script = (
        "import subprocess, sys, threading\n"
        "from engine import spawn_tied\n"
        "p = spawn_tied([sys.executable, '-m', 'tui', 'local-server', '--port', '0', '--json',"
        " '--model', 'gemma-3-270m'], stdout=subprocess.PIPE, text=True)\n"
        "print(p.stdout.readline(), end='', flush=True)\n"
        "threading.Event().wait()\n")
    env = {k: v for k, v in os.environ.items() if k != LIFELINE}
    env["DETEKTIV_HOME"] = str(tmp_path)
    parent = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    server = json.loads(parent.stdout.readline())["pid"]
    assert alive(server)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    parent.stdout.close()
    assert gone_within([server], 5) == []


def test_a_suite_killed_mid_test_leaves_no_process_behind(tmp_path: Path) -> None:
    """pytest runs a small module (tests/support/orphans.py) that starts the local-server, a
    PostgreSQL cluster, tmux with the app and `serve`; killed with SIGKILL mid-test, nothing
    it started remains (every process carrying its mark in the environment is gone)."""
    mark = f"DETEKTIV_ORPHAN_MARK={uuid.uuid4().hex}"
    ready = tmp_path / "ready"
    env = {**os.environ, "ORPHANS_READY": str(ready)}
    name, value = mark.split("=")
    env[name] = value
    suite = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         str(ROOT / "tests" / "support" / "orphans.py")],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while not ready.exists() or not ready.read_text():
        if suite.poll() is not None or time.monotonic() > deadline:
            suite.kill()
            output = suite.communicate()[0]
            raise AssertionError(f"the small suite never got ready:\n{output[-3000:]}")
        time.sleep(0.05)
    started = [pid for pid, _ in marked(mark) if pid != suite.pid]
    assert len(started) >= 6, started  # server, cluster, keepers, tmux, the app, serve
    os.kill(suite.pid, signal.SIGKILL)
    suite.communicate()
    deadline = time.monotonic() + 10
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked(mark) == [], "outlived the killed suite"
