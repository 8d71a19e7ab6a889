"""`detektiv serve`: the app in a browser, through textual-serve, made safe to leave running.

textual-serve starts one app process per browser tab. What it does not do, this does:
- **Address.** Loopback by default; any other address needs `--allow-remote`, and then every
  request carries a token (`?token=` once, then a same-site cookie). A WebSocket from another
  origin (a web page in the same browser) is refused on any address.
- **Environment.** A tab's process gets the variables the app needs (paths, locale, the
  detektiv settings, the key variables the configured providers name), never the server's
  whole environment.
- **Assets.** The page and its font come from this server: nothing is loaded from elsewhere,
  and the page opens no window (a URL in model text is text, never a link).
- **Keys.** Browsers keep ctrl+t / ctrl+n / ctrl+w and reload on ctrl+r: a served tab uses the
  browser keymap (`BROWSER_KEYMAP`) under the user's own keymap.
- **One model.** The embedded model runs once, in a `local-server` all tabs share.
- **Closing a tab** ends its app, unless an interrogation runs there: that one finishes (the
  next tab attaches to it as `detektiv watch` does). Stopping the server stops those too;
  each is then `interrupted`, and `detektiv resume` continues it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import shlex
import signal
import subprocess
import sys
from asyncio.subprocess import Process
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from engine import (
    ConfigError,
    Lifeline,
    Paths,
    Workspace,
    is_loopback,
    read_json,
    release_tied,
    spawn_tied,
)
from tui.listening import check_listener
from tui.serve.driver import BROWSER_KEYMAP

__all__ = ["BROWSER_KEYMAP", "ServeOptions", "is_loopback", "serve", "tab_environment"]

COOKIE = "detektiv_token"


PASSED = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "VIRTUAL_ENV",
          "DETEKTIV_HOME", "DETEKTIV_MODEL_DIR", "DETEKTIV_LOG_LEVEL", "DETEKTIV_NO_RIPGREP",
          "DETEKTIV_NO_DOWNLOAD", "HF_ENDPOINT",
          "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
          "NO_COLOR", "TEXTUAL_THEME", "OLLAMA_HOST", "ORACLES_DIR", "ORACLE_PLACEHOLDER",
          "LLM_TIMEOUT_SECONDS", "ORACLE_CACHE_TTL")
"""The variables a tab's app process is given (with LC_*), besides the providers' keys."""


def key_variables(paths: Paths) -> list[str]:
    """The environment variables holding the keys of the configured providers."""
    config = Workspace(paths).config
    return sorted({p.api_key_env for p in config.providers.values() if p.api_key_env})


def tab_environment(env: Mapping[str, str], keys: Iterable[str],
                    extra: Mapping[str, str]) -> dict[str, str]:
    """What a tab's app process is given of `env`: `PASSED`, LC_*, the named key variables."""
    wanted = set(PASSED) | set(keys)
    passed = {k: v for k, v in env.items() if k in wanted or k.startswith("LC_")}
    return {**passed, **extra}


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """What `detektiv serve` was asked for."""

    host: str
    port: int
    token: str | None
    config: Path | None
    shared_model: bool = True


class _Tab(AppService):
    """One browser tab's app process, detached instead of quit when the tab closes."""

    def __init__(self, *args: Any, environment: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._environment = environment
        self.detached = False

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Process:
        """The app itself, not a shell around it (a signal reaches it), in a process group of
        its own (stopping the server stops it and anything it started)."""
        # and tied to this server by a lifeline: however the server dies, the app dies too
        lifeline = Lifeline(self._build_environment(width=width, height=height))
        try:
            self._process = process = await asyncio.create_subprocess_exec(
                *shlex.split(self.command), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env=lifeline.env, pass_fds=lifeline.pass_fds, start_new_session=True)
        except BaseException:
            lifeline.abandon()
            raise
        lifeline.started(process.pid)
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        return {
            **self._environment,
            "TEXTUAL_DRIVER": "tui.serve.driver:ServedDriver",
            "TEXTUAL_FPS": "60",
            "TEXTUAL_COLOR_SYSTEM": "truecolor",
            "TERM_PROGRAM": "textual",
            "TERM_PROGRAM_VERSION": version("textual-serve"),
            "COLUMNS": str(width),
            "ROWS": str(height),
        }

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task

    async def detach(self) -> None:
        """The tab closed: tell the app (it ends, or finishes its run first)."""
        if self.detached:
            return
        self.detached = True
        await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
        await self.send_meta({"type": "detach"})

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            if self._process is not None:  # its lifeline let go once it ended (closing it
                await self._process.wait()  # earlier would end it)
                release_tied(self._process.pid)

    def signal(self, signum: int) -> None:
        """Send `signum` to the app's process group."""
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signum)

    async def on_data(self, payload: bytes) -> None:
        if self.detached:
            return  # nobody watches: what it draws is read and dropped
        try:
            await super().on_data(payload)
        except (ConnectionError, RuntimeError):
            self.detached = True

    async def on_meta(self, data: bytes) -> None:
        if not self.detached:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await super().on_meta(data)


class DetektivServer(Server):
    """textual-serve's server with the guards of the module docstring."""

    def __init__(self, options: ServeOptions, environment: dict[str, str]) -> None:
        command = [sys.executable, "-m", "tui"]
        if options.config is not None:
            command += ["--config", str(options.config)]
        super().__init__(shlex.join(command), host=options.host, port=options.port,
                         title="detektiv")
        self.options = options
        self.environment = environment
        self.templates_path = Path(__file__).parent
        self.tabs: set[_Tab] = set()
        self.address = ""

    # ---- guards ------------------------------------------------------------------------------

    @web.middleware
    async def guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        token = self.options.token
        given = request.query.get("token")
        if token is not None:
            supplied = given or request.cookies.get(COOKIE) or ""
            if not hmac.compare_digest(supplied.encode(), token.encode()):
                raise web.HTTPForbidden(text="detektiv serve: open the address `detektiv serve` "
                                        "printed, with its token\n")
        if request.path == "/ws":
            origin = request.headers.get("Origin")
            if origin is not None and origin.split("://", 1)[-1] != request.host:
                raise web.HTTPForbidden(text="detektiv serve: a page from another origin\n")
        response: web.StreamResponse = await handler(request)
        if token is not None and given:
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
        return response

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws", self.handle_websocket, name="websocket"),
            web.get("/download/{key}", self.handle_download, name="download"),
            web.static("/static", self.statics_path, name="static"),
        ])
        app.on_shutdown.append(self.on_shutdown)
        return app

    # ---- pages -------------------------------------------------------------------------------

    async def handle_index(self, request: web.Request) -> web.Response:
        origin = request.host
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "static_url": "/static/",
        }
        response = aiohttp_jinja2.render_template("index.html", request, context)
        response.headers["Cache-Control"] = "no-store"
        response.headers["Content-Security-Policy"] = (
            f"default-src 'self'; connect-src 'self' ws://{origin} wss://{origin}; "
            "script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; font-src 'self'")
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        await websocket.prepare(request)
        tab = _Tab(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                   close=websocket.close, download_manager=self.download_manager,
                   environment=self.environment)
        self.tabs.add(tab)
        try:
            await tab.start(width, height)
            await self._process_messages(websocket, tab)
        except asyncio.CancelledError:
            pass
        finally:
            await tab.detach()
            task = tab.task
            if task is not None:
                task.add_done_callback(lambda _: self.tabs.discard(tab))
            else:
                self.tabs.discard(tab)
            with contextlib.suppress(Exception):
                await websocket.close()
        return websocket

    async def on_shutdown(self, app: web.Application) -> None:
        """Stop every tab's app (an interrogation one runs is then `interrupted`)."""
        running = [tab for tab in self.tabs if tab.running]
        for tab in running:
            tab.signal(signal.SIGTERM)
        tasks = [tab.task for tab in running if tab.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        for tab in running:  # one that did not end in time
            tab.signal(signal.SIGKILL)

    # ---- running -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until SIGINT or SIGTERM; prints the address (with its token) first."""
        runner = web.AppRunner(await self._make_app(), handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.options.host, self.options.port)
        await site.start()
        server = getattr(site, "_server", None)
        port = server.sockets[0].getsockname()[1] if server and server.sockets else \
            self.options.port
        host = self.options.host
        shown = f"[{host}]" if ":" in host else host
        self.address = f"http://{shown}:{port}/"
        query = f"?token={self.options.token}" if self.options.token else ""
        print(f"detektiv serve: {self.address}{query} (ctrl+c stops it)", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()


def _shared_model(options: ServeOptions) -> tuple[subprocess.Popen[str], str]:
    """Start `detektiv local-server` on a free loopback port; its process and its /v1 URL."""
    command = [sys.executable, "-m", "tui", "local-server", "--port", "0", "--json"]
    if options.config is not None:
        command[3:3] = ["--config", str(options.config)]
    process = spawn_tied(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    try:
        url = str(read_json(line)["url"])
    except (ValueError, KeyError, TypeError):
        process.kill()
        process.wait()
        raise ConfigError("serve: the shared local model did not start "
                          "(see `detektiv local-server`)") from None
    return process, url


def serve(paths: Paths, options: ServeOptions) -> int:
    """Run `detektiv serve` (see the module docstring); returns the exit code."""
    check_listener("serve", options.host, options.token)
    extra = {"DETEKTIV_SERVED": "1"}
    model: subprocess.Popen[str] | None = None
    if options.shared_model:
        model, url = _shared_model(options)
        extra["DETEKTIV_LOCAL_SERVER"] = url
    try:
        environment = tab_environment(os.environ, key_variables(paths), extra)
        server = DetektivServer(options, environment)
        asyncio.run(server.run())
    finally:
        if model is not None:
            model.send_signal(signal.SIGTERM)
            try:
                model.wait(timeout=15)
            except subprocess.TimeoutExpired:
                model.kill()
                model.wait()
            release_tied(model.pid)
    return 0
