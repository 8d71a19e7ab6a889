"""What does failover cost?

(a) Time to first token through the router when the first provider is dead (connection
    refused), against the same chain without the dead provider; alternating, one run, real
    llama.cpp server. Goal: <= 20 ms extra.
(b) Skipping a provider whose circuit is open: time from the request to the router's skip
    (its `circuit_open` event), and to the next provider's attempt (which first fits the prompt
    to that provider's window: a token count from the llama.cpp server), and connections
    reaching the open provider's port; without the response cache and with it in front of the
    router (a SQLite cache of 100k entries the request misses, as an `ask` meets it). Goal: no
    connection, a skip < 1 ms, the cache adding < 1 ms.
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
from engine.cache.cache import ResponseCache  # noqa: E402
from engine.cache.layer import CacheLayer  # noqa: E402
from engine.cache.store import SQLiteCacheStore  # noqa: E402
from engine.config.models import CacheConfig, RouterConfig  # noqa: E402
from engine.providers import StreamRequest, TokenDelta  # noqa: E402
from engine.routing.breaker import CircuitState  # noqa: E402
from engine.routing.events import Attempt, ProviderEvent  # noqa: E402
from engine.routing.router import Router  # noqa: E402

ROUNDS = 15  # under the failure threshold of 100: the dead provider is always tried
SKIPS = 2000
CACHED = 100_000
# The tiny model ends most short prompts at once (no token to time); this one it answers.
REQUEST = StreamRequest.of(
    "The quick brown fox jumps over the lazy dog, and then the lazy dog sleeps under the old "
    "oak tree by the river bank at dawn while the birds sing their songs.",
    max_tokens=4, temperature=0)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def router(paths: Paths, providers: dict[str, str], threshold: int = 100,
           cache: CacheLayer | None = None) -> Router:
    config = Config(
        providers={
            name: ProviderConfig(kind="openai", model="m", base_url=url, priority=i + 1)
            for i, (name, url) in enumerate(providers.items())
        },
        router=RouterConfig(failure_threshold=threshold),
    )
    return Router(config, paths, persist=False, cache=cache)


def filled_cache(home: str, entries: int) -> CacheLayer:
    """A cache layer over a SQLite cache of `entries` entries (bench/cache.py's questions)."""
    from bench.cache import load

    store = SQLiteCacheStore(Path(home) / "cache.sqlite3")
    load(store, entries)
    cache = ResponseCache(store)
    return CacheLayer(CacheConfig(), lambda: cache)


async def skip_times(skipping: Router) -> tuple[list[float], list[float]]:
    """Seconds from each request to the open provider's skip, and to the next attempt."""
    skips: list[float] = []
    attempts: list[float] = []
    for _ in range(SKIPS):
        start = time.perf_counter()
        stream = skipping.stream(REQUEST)
        async for event in stream:
            if isinstance(event, ProviderEvent) and event.type == "circuit_open":
                skips.append(time.perf_counter() - start)
            if isinstance(event, Attempt) and event.provider != "cache":
                attempts.append(time.perf_counter() - start)
                break
        await stream.aclose()
    return skips, attempts


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
    chain = {"open": f"http://127.0.0.1:{port}/v1", "steady": url}
    cache = filled_cache(home, CACHED)
    results: dict[str, tuple[list[float], list[float]]] = {}
    for name, layer in (("without the cache", None), ("with the cache", cache),
                        ("without the cache ", None)):  # twice: the machine's drift shows
        skipping = router(paths, chain, cache=layer)
        state = skipping.states["open"]
        state.circuit, state.opened_at = CircuitState.OPEN, time.time()
        results[name] = await skip_times(skipping)
        await skipping.aclose()
    listener.close()
    server.terminate()
    server.wait()

    with_ms = statistics.median(samples["with_dead"]) * 1000
    without_ms = statistics.median(samples["without"]) * 1000
    print(f"failover: median of {ROUNDS} alternating rounds, real llama.cpp server")
    print(f"  TTFT without dead provider {without_ms:7.2f} ms   with dead first {with_ms:7.2f} ms"
          f"   extra {with_ms - without_ms:+.2f} ms   (goal <= +20 ms)")
    figures: dict[str, float] = {"ttft_without_ms": without_ms, "ttft_with_dead_ms": with_ms,
                                 "extra_ms": with_ms - without_ms,
                                 "open_connections": accepted}
    base = statistics.median(results["without the cache"][0])
    for name, (skips, attempts) in results.items():
        median = statistics.median(skips) * 1e6
        p95 = statistics.quantiles(skips, n=100)[94] * 1e6
        print(f"  open-circuit skip {name:18}: median {median:7.1f} us, p95 {p95:7.1f} us "
              f"({median / (base * 1e6):.1f}× the first run without); next attempt: median "
              f"{statistics.median(attempts) * 1e3:.2f} ms, over {SKIPS} requests")
        figures[f"skip_median_us {name.strip()}"] = median
    print(f"  connections to the open provider: {accepted}   (goal: none; a skip < 1 ms, the "
          f"cache ({CACHED:,} entries, each request a miss) adding < 1 ms)")
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
