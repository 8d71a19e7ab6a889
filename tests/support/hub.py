"""A loopback server that speaks the Hugging Face Hub's download protocol (what
`huggingface_hub.hf_hub_download` asks of `HF_ENDPOINT`), for tests that must never reach the
internet.

    with LoopbackHub() as hub:
        hub.add("acme/tiny-GGUF", "tiny.gguf", data)          # served with its sha256 as ETag
        hub.add("acme/gated", "x.gguf", data, gated=True)     # 401, X-Error-Code: GatedRepo
        hub.add("acme/bad", "x.gguf", data, corrupt=True)     # other bytes than the ETag says
        hub.hold_after = 1_000_000   # the next full GET stops after that many bytes and waits
        env = {"HF_ENDPOINT": hub.url}

`HEAD|GET /{owner}/{repo}/resolve/{revision}/{file}` (and `/datasets/…` alike) answers with
`X-Repo-Commit`, `ETag` (the sha256, as the Hub gives for LFS files), `Content-Length` and
`Accept-Ranges`; a `Range: bytes=N-` request gets 206 and the rest. Unknown repositories get
404 with `X-Error-Code: RepoNotFound`, unknown files 404 with `EntryNotFound`. `requests`
records (method, path, range).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class _File:
    data: bytes
    etag: str
    gated: bool = False


class LoopbackHub:
    """See the module docstring."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], _File] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.hold_after: int | None = None
        self.pace = 0.0
        """Seconds to wait after each MiB sent (0: as fast as loopback goes)."""
        self.holding = threading.Event()
        """Set once a held download has sent its bytes and waits."""
        self.release = threading.Event()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:  # noqa: N802 - the http.server API
                hub._serve(self, body=False)

            def do_GET(self) -> None:  # noqa: N802
                hub._serve(self, body=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def add(self, repo: str, name: str, data: bytes, *, gated: bool = False,
            corrupt: bool = False) -> str:
        """Serve `data` as `repo`/`name`; returns its sha256."""
        digest = hashlib.sha256(data).hexdigest()
        served = data[:-1] + bytes([data[-1] ^ 0xFF]) if corrupt else data
        self.files[(repo, name)] = _File(served, digest, gated)
        return digest

    def __enter__(self) -> LoopbackHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def _serve(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        wanted = handler.headers.get("Range")
        self.requests.append((handler.command, handler.path, wanted))
        parts = handler.path.split("?")[0].strip("/").split("/")
        if parts and parts[0] == "datasets":  # a dataset repository: the same protocol
            parts = parts[1:]
        if len(parts) < 5 or parts[2] != "resolve":
            return self._error(handler, 404, "RepoNotFound", "no such route")
        repo, name = "/".join(parts[:2]), "/".join(parts[4:])
        if not any(r == repo for r, _ in self.files):
            return self._error(handler, 404, "RepoNotFound", "Repository not found")
        found = self.files.get((repo, name))
        if found is None:
            return self._error(handler, 404, "EntryNotFound", "Entry not found")
        if found.gated and not handler.headers.get("Authorization"):
            return self._error(handler, 401, "GatedRepo", "Access to this model is restricted")
        start = 0
        if wanted and wanted.startswith("bytes="):
            start = int(wanted[6:].split("-")[0])
        data = found.data[start:]
        handler.send_response(206 if start else 200)
        handler.send_header("X-Repo-Commit", COMMIT)
        handler.send_header("ETag", f'"{found.etag}"')
        handler.send_header("Accept-Ranges", "bytes")
        handler.send_header("Content-Length", str(len(data)))
        if start:
            handler.send_header("Content-Range",
                                f"bytes {start}-{len(found.data) - 1}/{len(found.data)}")
        handler.end_headers()
        if not body:
            return None
        hold = self.hold_after
        if hold is not None and not start:
            self.hold_after = None
            handler.wfile.write(data[:hold])
            handler.wfile.flush()
            self.holding.set()
            self.release.wait(60)  # the client is killed meanwhile; then the socket closes
            return None
        if not self.pace:
            handler.wfile.write(data)
            return None
        for start in range(0, len(data), 1 << 20):
            handler.wfile.write(data[start:start + (1 << 20)])
            handler.wfile.flush()
            self.release.wait(self.pace)
        return None

    @staticmethod
    def _error(handler: BaseHTTPRequestHandler, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        handler.send_response(status)
        handler.send_header("X-Error-Code", code)
        handler.send_header("X-Error-Message", message)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)


def tiny_gguf(padding: int = 2_000_000, template: bool = True) -> bytes:
    """A small GGUF file (header only, then padding): enough for `detektiv models` to read its
    facts, not a model anyone could run."""
    import struct

    def string(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    pairs: list[bytes] = [
        string("general.architecture") + struct.pack("<I", 8) + string("llama"),
        string("general.size_label") + struct.pack("<I", 8) + string("1M"),
        string("general.file_type") + struct.pack("<I", 4) + struct.pack("<I", 15),
        string("llama.context_length") + struct.pack("<I", 4) + struct.pack("<I", 2048),
        string("tokenizer.ggml.tokens") + struct.pack("<I", 9) + struct.pack("<I", 8)
        + struct.pack("<Q", 3) + string("a") + string("b") + string("c"),
    ]
    if template:
        pairs.append(string("tokenizer.chat_template") + struct.pack("<I", 8)
                     + string("{% for m in messages %}{{ m.content }}{% endfor %}"))
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs)) + b"".join(pairs)
    return head + bytes(range(256)) * (padding // 256)
