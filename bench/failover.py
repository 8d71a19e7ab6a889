"""What does failover cost?

(a) Time to first token through the router when the first provider is dead (connection
    refused), against the same chain without the dead provider; alternating, one run, real
    llama.cpp server. Goal: <= 20 ms extra.
(b) Skipping a provider whose circuit is open: time from the request to the next provider's
    attempt, and connections reaching the open provider's port. Goal: no connection, < 1 ms.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import aclosing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import Config, Paths, ProviderConfig  # noqa: E402
from engine.config.models import RouterConfig  # noqa: E402
from engine.providers import StreamRequest, TokenDelta  # noqa: E402
from engine.routing.breaker import CircuitState  # noqa: E402
from engine.routing.events import Attempt  # noqa: E402
from engine.routing.router import Router  # noqa: E402

ROUNDS = 15  # under the failure threshold of 100: the dead provider is always tried
SKIPS = 2000
# The tiny model ends most short prompts at once (no token to time); this one it answers.
REQUEST = StreamRequest.of(
    "The quick brown fox jumps over the lazy dog, and then the lazy dog sleeps under the old "
    "oak tree by the river bank at dawn while the birds sing their songs.",
    max_tokens=4, temperature=0)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def router(paths: Paths, providers: dict[str, str], threshold: int = 100) -> Router:
    config = Config(
        providers={
            name: ProviderConfig(kind="openai", model="m", base_url=url, priority=i + 1)
            for i, (name, url) in enumerate(providers.items())
        },
        router=RouterConfig(failure_threshold=threshold),
    )
    return Router(config, paths, persist=False)


async def idle(base: str, timeout: float = 10.0) -> None:
    """Wait until no slot of the llama.cpp server at `base` is generating."""
    import httpx

    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=base, timeout=5) as http:
        while time.monotonic() < deadline:
            slots = (await http.get("/slots")).json()
            if not any(slot.get("is_processing") for slot in slots):
                return
            await asyncio.sleep(0.05)


async def ttft(chain: Router) -> float:
    start = time.perf_counter()
    async with aclosing(chain.stream(REQUEST)) as events:
        async for event in events:
            if type(event) is TokenDelta:
                return time.perf_counter() - start
    raise AssertionError("no token")


async def main() -> None:
    home = tempfile.mkdtemp()
    paths = Paths.from_env(Path(home) / "config.toml")
    env = {**os.environ, "DETEKTIV_HOME": home}
    server = subprocess.Popen([sys.executable, "-m", "tui", "local-server", "--port", "0",
                               "--parallel", "1"], stdout=subprocess.PIPE, text=True, env=env,
                              cwd=ROOT, stderr=subprocess.DEVNULL)
    assert server.stdout is not None
    url = server.stdout.readline().rsplit(" at ", 1)[1].strip()
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    with_dead = router(paths, {"dead": dead, "steady": url})
    without = router(paths, {"steady": url})
    samples: dict[str, list[float]] = {"with_dead": [], "without": []}
    try:
        await ttft(with_dead)
        await ttft(without)
        for round_ in range(ROUNDS):
            order = ("with_dead", "without") if round_ % 2 == 0 else ("without", "with_dead")
            for name in order:
                chain = with_dead if name == "with_dead" else without
                samples[name].append(await ttft(chain))
        tried = with_dead.states["dead"].consecutive_failures
        assert tried == ROUNDS + 1, f"the dead provider was tried {tried} times"
    finally:
        await with_dead.aclose()
        await without.aclose()

    # The server may still finish the last request's tokens after its stream was closed:
    # measure the skips with it idle, so they time the router and not a busy core.
    await idle(url.removesuffix("/v1"))

    # (b) an open circuit in front of a listener that counts connections
    accepted = 0

    async def count(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        writer.close()

    listener = await asyncio.start_server(count, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    skipping = router(paths, {"open": f"http://127.0.0.1:{port}/v1", "steady": url})
    state = skipping.states["open"]
    state.circuit, state.opened_at = CircuitState.OPEN, time.time()
    skips: list[float] = []
    for _ in range(SKIPS):
        start = time.perf_counter()
        stream = skipping.stream(REQUEST)
        async for event in stream:
            if isinstance(event, Attempt):
                skips.append(time.perf_counter() - start)
                break
        await stream.aclose()
    await skipping.aclose()
    listener.close()
    server.terminate()
    server.wait()

    with_ms = statistics.median(samples["with_dead"]) * 1000
    without_ms = statistics.median(samples["without"]) * 1000
    skip_us = statistics.median(skips) * 1e6
    skip_p99_us = statistics.quantiles(skips, n=100)[98] * 1e6
    print(f"failover: median of {ROUNDS} alternating rounds, real llama.cpp server")
    print(f"  TTFT without dead provider {without_ms:7.2f} ms   with dead first {with_ms:7.2f} ms"
          f"   extra {with_ms - without_ms:+.2f} ms   (goal <= +20 ms)")
    print(f"  open-circuit skip: median {skip_us:.1f} us, p99 {skip_p99_us:.1f} us over {SKIPS}"
          f" requests; connections to the open provider: {accepted}   (goal < 1 ms, none)")
    print(json.dumps({"ttft_without_ms": without_ms, "ttft_with_dead_ms": with_ms,
                      "extra_ms": with_ms - without_ms, "skip_median_us": skip_us,
                      "skip_p99_us": skip_p99_us, "open_connections": accepted}))


if __name__ == "__main__":
    asyncio.run(main())
