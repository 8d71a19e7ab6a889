"""A small test module that `tests/e2e/test_lifeline.py` runs in a pytest of its own and
kills with SIGKILL mid-test. Not collected by the suite (its name is not test_*.py).

Its one test starts one of everything the suite starts — the llama.cpp `local-server`, a
PostgreSQL cluster, a tmux server with the app in a pane, `detektiv serve` started as a plain
child — then says so in the file `ORPHANS_READY` names, and waits to be killed."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from tests.support.servers import ROOT, LlamaServer, cli, tmux_server


def test_start_everything_then_wait_to_be_killed(llama_server: LlamaServer, postgres_url: str,
                                                 home: Path) -> None:
    env = {**os.environ, "DETEKTIV_HOME": str(home), "TERM": "xterm-256color"}
    serve = subprocess.Popen(cli("serve", "--port", "0", "--no-shared-model"), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert serve.stdout is not None and "http://127.0.0.1:" in serve.stdout.readline()
    with tmux_server(env) as tmux:
        subprocess.run([*tmux, "new-session", "-d", "-x", "100", "-y", "30",
                        " ".join(cli())], env=env, cwd=ROOT, check=True)
        Path(os.environ["ORPHANS_READY"]).write_text(
            f"{llama_server.process.pid} {serve.pid} {postgres_url}")
        threading.Event().wait()  # until killed
