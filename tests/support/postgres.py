"""A real PostgreSQL server of our own on 127.0.0.1, for the suite and the benchmarks."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from engine import release_tied, spawn_tied


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server program: Debian's packages keep them off PATH."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def installed() -> bool:
    return pg_bin("initdb") is not None and pg_bin("postgres") is not None


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """initdb, then `postgres` itself (Debian's `postgresql` package) in a temporary
    directory, listening on 127.0.0.1 only; the URL of its `postgres` database. Needs
    `installed()`. The server runs under a lifeline (`engine.lifeline`), not daemonised by
    pg_ctl: it dies with the suite, however the suite dies."""
    initdb, postgres = pg_bin("initdb"), pg_bin("postgres")
    assert initdb is not None and postgres is not None, "PostgreSQL is not installed"
    # pytest's temp dirs are private to their owner: the server's user could not enter them
    root = Path(tempfile.mkdtemp(prefix="detektiv-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    try:
        subprocess.run([*as_user, initdb, "-D", str(data), "-A", "trust", "-U", "detektiv",
                        "--no-sync"], check=True, capture_output=True)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with (root / "log.txt").open("w") as log:
            server = spawn_tied(
                [*as_user, postgres, "-D", str(data), "-p", str(port), "-k", str(root),
                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                 "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                foreign=True, stdout=log, stderr=subprocess.STDOUT)
        url = f"postgresql://detektiv@127.0.0.1:{port}/postgres"
        try:
            _wait_ready(url, server, root)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)  # the keeper's group: all of it
            server.wait()
            release_tied(server.pid)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _wait_ready(url: str, server: subprocess.Popen[bytes], root: Path) -> None:
    """Until the server accepts a connection (it ended, or 120 s: an error with its log)."""
    import psycopg

    deadline = time.monotonic() + 120
    while True:
        try:
            psycopg.connect(url, connect_timeout=5).close()
            return
        except psycopg.OperationalError:
            if server.poll() is not None or time.monotonic() > deadline:
                log = (root / "log.txt").read_text(errors="replace")[-2000:]
                raise AssertionError(f"PostgreSQL did not start: {log}") from None
            time.sleep(0.05)
