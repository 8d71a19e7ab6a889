"""A real PostgreSQL server of our own on 127.0.0.1, for the suite and the benchmarks."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server program: Debian's packages keep them off PATH."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def installed() -> bool:
    return pg_bin("initdb") is not None and pg_bin("pg_ctl") is not None


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """initdb + pg_ctl (Debian's `postgresql` package) in a temporary directory, listening
    on 127.0.0.1 only; the URL of its `postgres` database. Needs `installed()`."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    assert initdb is not None and pg_ctl is not None, "PostgreSQL is not installed"
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
        options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off")
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-o", options, "-l",
                        str(root / "log.txt"), "-w", "start"], check=True, capture_output=True)
        try:
            yield f"postgresql://detektiv@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
                           capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
