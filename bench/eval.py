"""`detektiv eval` at scale: items per minute at concurrency 1, 2 and 4, and detektiv's own
time per item beside the model's.

    python bench/eval.py

Three measurements, each a fresh run of the same claims:

1. against the real llama.cpp server (`detektiv local-server --parallel 4 --threads 2`, the
   bundled Gemma 3 270M as the witness: its words are not looked at, its time is measured).
   On a two-core machine that server is CPU-bound: its own token throughput with four
   requests at once, measured here too, bounds what any client can gain;
2. against a witness whose slots really run side by side (a loopback server that takes
   40 ms between pieces of an answer, like a remote server or a GPU): what detektiv's
   concurrency gives when the server can give it;
3. detektiv's own time: a sequential real-server run of `OVERHEAD_ITEMS` claims (the run's
   set-up, its router and the server's discovery, spread over an evaluation's worth of
   items), each item's wall time less the time spent awaiting the providers' streams (the
   HTTP client included), as a share of that model time. The time spent asking the server to
   count tokens (outside the streams: detektiv's choice, not the model's) is in it, and also
   said apart.

The detective is scripted on loopback in all three (the tiny model cannot play one), so an
interrogation is three witness answers and a handful of instant detective replies.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import EvalRequest, Paths, Workspace  # noqa: E402
from engine.evals.datasets import dataset_path  # noqa: E402
from engine.evals.items import read_items  # noqa: E402
from tests.support.evals import detective, knows, witness  # noqa: E402
from tests.support.interrogation import make_config  # noqa: E402
from tests.support.scripted import ScriptedModel  # noqa: E402
from tests.support.servers import local_server  # noqa: E402

ITEMS = 8
OVERHEAD_ITEMS = 32
SETTINGS = {"answer_max_tokens": 48, "min_rounds": 3, "temperature": 0}
MODEL_TIME = [0.0]
COUNTING = [0.0]


def _timed_streams() -> None:
    """Count the time spent awaiting every provider kind's raw stream (the model's time)."""
    import engine.providers._openai  # noqa: F401 - the kind the bench uses, loaded to be wrapped
    from engine.providers._base import Provider

    def wrap(original):  # type: ignore[no-untyped-def]
        async def timed(self, request):  # type: ignore[no-untyped-def]
            raw = original(self, request)
            try:
                while True:
                    began = time.perf_counter()
                    try:
                        event = await anext(raw)
                    except StopAsyncIteration:
                        MODEL_TIME[0] += time.perf_counter() - began
                        return
                    MODEL_TIME[0] += time.perf_counter() - began
                    yield event
            finally:
                await raw.aclose()

        return timed

    def counted(original):  # type: ignore[no-untyped-def]
        async def timed(self, messages):  # type: ignore[no-untyped-def]
            began = time.perf_counter()
            try:
                return await original(self, messages)
            finally:
                COUNTING[0] += time.perf_counter() - began

        return timed

    kinds = [Provider]
    while kinds:
        kind = kinds.pop()
        kinds += kind.__subclasses__()
        if "_stream" in vars(kind):
            kind._stream = wrap(vars(kind)["_stream"])  # type: ignore[method-assign]
        if "count_tokens" in vars(kind):
            kind.count_tokens = counted(vars(kind)["count_tokens"])  # type: ignore[method-assign]


async def evaluate(home: Path, detective_url: str, witness_url: str, concurrency: int,
                   items: int) -> float:
    """Seconds for one fresh run of `items` claims."""
    paths = _paths(home)
    config = make_config({"det": detective_url, "wit": witness_url}, ["det"], ["wit"],
                         **SETTINGS)
    workspace = Workspace(paths, config)
    try:
        run = await workspace.evals.start(EvalRequest("demo", n=items),
                                          concurrency=concurrency)
        started = time.perf_counter()
        failed = 0
        async for event in run.events():
            failed += getattr(getattr(event, "result", None), "failed", False)
        seconds = time.perf_counter() - started
        if failed:
            print(f"  ({failed} items failed)")
        return seconds
    finally:
        await workspace.aclose()


async def server_throughput(url: str, parallel: int) -> float:
    """Tokens a second the server gives `parallel` requests at once."""
    async def one(client: httpx.AsyncClient) -> int:
        response = await client.post(f"{url}/chat/completions", json={
            "model": "m", "temperature": 0, "max_tokens": 48,
            "messages": [{"role": "user", "content": "Tell me about Paris in detail."}]})
        return int(response.json()["usage"]["completion_tokens"])

    async with httpx.AsyncClient(timeout=120) as client:
        started, tokens = time.perf_counter(), 0
        for _ in range(8 // parallel):
            tokens += sum(await asyncio.gather(*(one(client) for _ in range(parallel))))
        return tokens / (time.perf_counter() - started)


def _paths(home: Path) -> Paths:
    return Paths(config_file=home / "config.toml", data_dir=home / "data",
                 cache_dir=home / "cache", log_dir=home / "logs", model_dir=home / "models")


def _table(title: str, rates: dict[int, float]) -> None:
    print(title)
    print("| concurrency | items/min | × sequential |")
    print("|---|---|---|")
    for level, rate in rates.items():
        print(f"| {level} | {rate:.1f} | {rate / rates[1]:.2f}× |")


class _Detective:
    """The scripted detective in a process of its own (as a remote one would be): in this one,
    its server's threads would take the interpreter's lock from the run being timed."""

    def __enter__(self) -> _Detective:
        from engine.lifeline import spawn_tied

        self.process = spawn_tied([sys.executable, __file__, "--serve-detective"],
                                  foreign=True, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url:
            raise SystemExit("the scripted detective did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        from engine.lifeline import release_tied

        self.process.kill()
        self.process.wait(timeout=30)
        release_tied(self.process.pid)


def _serve_detective() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        labels = knows(read_items(dataset_path(_paths(Path(tmp)), "demo")))
        with ScriptedModel(detective(labels)) as sleuth:
            print(sleuth.url, flush=True)
            threading.Event().wait()


def main() -> None:
    if sys.argv[1:] == ["--serve-detective"]:
        _serve_detective()
        return
    _timed_streams()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with _Detective() as sleuth, ScriptedModel(witness, pace=0.04) as slow:
            paced = {level: ITEMS / asyncio.run(evaluate(
                root / f"p{level}", sleuth.url + "/v1", slow.url + "/v1", level, ITEMS)) * 60
                for level in (1, 2, 4)}
            (root / "server").mkdir()
            with local_server(root / "server", "--parallel", "4", "--ctx", "8192",
                              "--threads", "2") as server:
                asyncio.run(evaluate(root / "warm", sleuth.url + "/v1", server.url, 4, 4))
                raw = {k: asyncio.run(server_throughput(server.url, k)) for k in (1, 4)}
                rates: dict[int, float] = {}
                for level in (1, 2, 4):
                    seconds = asyncio.run(evaluate(root / f"c{level}", sleuth.url + "/v1",
                                                   server.url, level, ITEMS))
                    rates[level] = ITEMS / seconds * 60
                MODEL_TIME[0] = COUNTING[0] = 0.0
                seconds = asyncio.run(evaluate(root / "own", sleuth.url + "/v1", server.url, 1,
                                               OVERHEAD_ITEMS))
                model, own = (MODEL_TIME[0] / OVERHEAD_ITEMS,
                              (seconds - MODEL_TIME[0]) / OVERHEAD_ITEMS)
                counting = COUNTING[0] / OVERHEAD_ITEMS
        _table(f"eval against llama.cpp (4 slots, 2 threads, 2 cores): {ITEMS} claims, "
               "3 rounds each", rates)
        print(f"the server alone: {raw[1]:.0f} tok/s for one request, {raw[4]:.0f} tok/s for "
              f"four at once ({raw[4] / raw[1]:.2f}×): the bound on any client here")
        _table("eval against a witness whose slots run side by side (40 ms a piece)", paced)
        print(f"detektiv's own time per item ({OVERHEAD_ITEMS} claims, one at a time): "
              f"{own * 1000:.1f} ms against {model:.2f} s of model time "
              f"({100 * own / model:.2f} %; of it, asking the server to count tokens: "
              f"{counting * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
