"""How much does our provider layer cost over the raw openai SDK?

(a) The same prompt streamed from the real llama.cpp server (`detektiv local-server`) with the
    raw SDK and through our `openai` provider, alternating: wall-time ratio and the difference
    in time to first token.
(b) A synthetic loopback server (own process) emitting 5,000 tiny chunks as fast as it can:
    client CPU per chunk for raw httpx, the raw SDK, and our provider.
Goals: ≤ 1.03× wall, first token ≤ +5 ms, ≤ +50 µs CPU per chunk over the raw SDK.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import Paths, ProviderConfig  # noqa: E402
from engine.providers import StreamRequest, TokenDelta, create_provider  # noqa: E402

# A prompt the tiny model answers to its token limit (most short ones it ends at once, now that
# the server stops at end-of-turn markers): the benchmark must stream MAX_TOKENS tokens.
PROMPT = ("The quick brown fox jumps over the lazy dog, and then the lazy dog sleeps under the old "
          "oak tree by the river bank at dawn while the birds sing their songs.")
MAX_TOKENS = 64
ROUNDS = 7
CHUNKS = 5000
CPU_ROUNDS = 5


def start(command: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str],
                                                                           str]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                               stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


async def raw_sdk(client: openai.AsyncOpenAI, max_tokens: int | None) -> tuple[float, float, int]:
    start = time.perf_counter()
    first = 0.0
    count = 0
    kwargs = {"max_tokens": max_tokens} if max_tokens else {}
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": PROMPT}], stream=True,
        stream_options={"include_usage": True}, temperature=0, **kwargs)
    async for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                count += 1
                if not first:
                    first = time.perf_counter() - start
    return time.perf_counter() - start, first, count


async def ours(provider: object, max_tokens: int | None) -> tuple[float, float, int]:
    start = time.perf_counter()
    first = 0.0
    count = 0
    request = StreamRequest.of(PROMPT, max_tokens=max_tokens, temperature=0)
    async for event in provider.stream(request):  # type: ignore[attr-defined]
        if type(event) is TokenDelta:
            count += 1
            if not first:
                first = time.perf_counter() - start
    return time.perf_counter() - start, first, count


async def raw_httpx(url: str) -> int:
    count = 0
    body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "stream": True}
    async with httpx.AsyncClient() as client, client.stream(
            "POST", f"{url}/chat/completions", json=body) as reply:
        async for line in reply.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:])["choices"]:
                    if choice["delta"].get("content"):
                        count += 1
    return count


async def real_server(paths: Paths) -> dict[str, float]:
    env = {**os.environ, "DETEKTIV_HOME": str(paths.config_file.parent)}
    process, line = start([sys.executable, "-m", "tui", "local-server", "--port", "0",
                           "--parallel", "1"], env)
    url = line.rsplit(" at ", 1)[1]
    client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
    provider = create_provider("bench", ProviderConfig(kind="openai", model="m", base_url=url),
                               paths)
    try:
        await raw_sdk(client, MAX_TOKENS)  # warm both paths (prompt cache, connections)
        await ours(provider, MAX_TOKENS)
        walls: dict[str, list[float]] = {"sdk": [], "ours": []}
        firsts: dict[str, list[float]] = {"sdk": [], "ours": []}
        for round_ in range(ROUNDS):
            order = ["sdk", "ours"] if round_ % 2 == 0 else ["ours", "sdk"]
            for name in order:
                if name == "sdk":
                    wall, first, count = await raw_sdk(client, MAX_TOKENS)
                else:
                    wall, first, count = await ours(provider, MAX_TOKENS)
                if count < MAX_TOKENS * 0.9:
                    raise SystemExit(f"{name} streamed {count} chunks, not ~{MAX_TOKENS}")
                walls[name].append(wall)
                firsts[name].append(first)
    finally:
        await client.close()
        await provider.aclose()
        process.terminate()
        process.wait()
    wall_sdk, wall_ours = statistics.median(walls["sdk"]), statistics.median(walls["ours"])
    first_sdk, first_ours = statistics.median(firsts["sdk"]), statistics.median(firsts["ours"])
    return {"wall_sdk_s": wall_sdk, "wall_ours_s": wall_ours, "wall_ratio": wall_ours / wall_sdk,
            "ttft_sdk_ms": first_sdk * 1000, "ttft_ours_ms": first_ours * 1000,
            "ttft_diff_ms": (first_ours - first_sdk) * 1000}


async def synthetic(paths: Paths) -> dict[str, float]:
    process, port = start([sys.executable, str(ROOT / "bench" / "_chunk_server.py"),
                           str(CHUNKS)])
    url = f"http://127.0.0.1:{port}/v1"
    client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
    provider = create_provider("bench", ProviderConfig(kind="openai", model="m", base_url=url),
                               paths)
    cpu: dict[str, list[float]] = {"httpx": [], "sdk": [], "ours": []}
    try:
        for name in ("httpx", "sdk", "ours"):  # warm-up
            await {"httpx": lambda: raw_httpx(url), "sdk": lambda: raw_sdk(client, None),
                   "ours": lambda: ours(provider, None)}[name]()
        for _ in range(CPU_ROUNDS):
            for name in ("httpx", "sdk", "ours"):
                start_cpu = time.process_time()
                if name == "httpx":
                    count = await raw_httpx(url)
                elif name == "sdk":
                    count = (await raw_sdk(client, None))[2]
                else:
                    count = (await ours(provider, None))[2]
                assert count == CHUNKS, (name, count)
                cpu[name].append((time.process_time() - start_cpu) / CHUNKS * 1e6)
    finally:
        await client.close()
        await provider.aclose()
        process.terminate()
        process.wait()
    result = {f"cpu_{k}_us": statistics.median(v) for k, v in cpu.items()}
    result["cpu_extra_us"] = result["cpu_ours_us"] - result["cpu_sdk_us"]
    return result


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        paths = Paths.from_env(Path(home) / "config.toml")
        real = await real_server(paths)
        synth = await synthetic(paths)
    print(f"stream_overhead: {ROUNDS} alternating rounds, {MAX_TOKENS} tokens, real llama.cpp")
    sdk_ms, ours_ms = real["wall_sdk_s"] * 1000, real["wall_ours_s"] * 1000
    print(f"  wall   raw SDK {sdk_ms:7.1f} ms   ours {ours_ms:7.1f} ms"
          f"   ratio {real['wall_ratio']:.3f}x   (goal <= 1.03x)")
    print(f"  TTFT   raw SDK {real['ttft_sdk_ms']:7.1f} ms   ours {real['ttft_ours_ms']:7.1f} ms"
          f"   diff {real['ttft_diff_ms']:+.1f} ms   (goal <= +5 ms)")
    print(f"synthetic: {CHUNKS} chunks, median of {CPU_ROUNDS}, client CPU per chunk")
    print(f"  raw httpx {synth['cpu_httpx_us']:6.1f} us   raw SDK {synth['cpu_sdk_us']:6.1f} us"
          f"   ours {synth['cpu_ours_us']:6.1f} us   extra {synth['cpu_extra_us']:+.1f} us"
          f"   (goal <= +50 us)")
    print(json.dumps({**real, **synth}))


if __name__ == "__main__":
    asyncio.run(main())
