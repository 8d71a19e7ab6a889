"""Sessions through LiteLLM's proxy on 1,024-token slots: none may fail on our arithmetic
(issue 55), and how tight the fitted size is against what the gateway counted.

    python bench/gateway_runs.py --litellm /tmp/litellm/bin/litellm [--runs 10] \
        [--baseline REV] [--worst N]

For each bundled model (SmolLM2-135M, Gemma 3 270M): `detektiv local-server --parallel 4
--ctx 4096` (1,024 tokens a slot), LiteLLM's proxy in front of it, and `--runs` sessions of
"Water boils at 100 °C at sea level." with 5 rounds on each of its routes (`openai` kind at
`/v1`, `anthropic` kind at the root), the model in both roles. Counted: sessions that ended
`failed`, and for every call after a route's first, the fitted size (what detektiv reckoned
the prompt takes) over the prompt tokens the gateway reported for it (all calls, and those of
256 tokens or more, where the room matters: a short prompt's fixed overheads are a few tokens
that weigh more). `under`: calls whose fitted size was below the count (a prompt that might
have overflowed). Prints a table; the goals are no session failed and the fitted size within
20 % above the gateway's count. `--dump DIR` writes each measured reply (the prompt's texts,
their estimates, the tokens reported) to DIR/MODEL-ROUTE.jsonl: the data the bound is
designed on. `--baseline REV` first runs the same sessions with the code of
commit REV (a git worktree, through its CLI), on the same servers: how many of them failed.
`count ms`: the median time of one exact count by the gateway's llama.cpp backend
(`/apply-template` and `/tokenize`), and `count %` all counts' share of the route's time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import Config, Paths  # noqa: E402
from engine.interrogation.loop import Interrogation  # noqa: E402
from engine.lifeline import spawn_tied  # noqa: E402
from engine.models.events import Finished  # noqa: E402
from engine.providers import Usage  # noqa: E402
from engine.routing.events import Fitted  # noqa: E402
from engine.routing.router import Router  # noqa: E402
from engine.storage.sessions import SessionStore  # noqa: E402
from tests.support.captures import _free_port, _wait_http  # noqa: E402
from tests.support.servers import local_server, stop  # noqa: E402

HYPOTHESIS = "Water boils at 100 °C at sea level."
KEY = "sk-bench-0000"
MODELS = ("smollm2-135m", "gemma-3-270m")


def _proxy(litellm: str, work: Path, backend: str) -> tuple[subprocess.Popen[Any], str]:
    port = _free_port()
    config = work / "litellm.yaml"
    config.write_text(json.dumps({
        "model_list": [{"model_name": "local", "litellm_params": {
            "model": "openai/local", "api_base": backend, "api_key": "none"}}],
        "litellm_settings": {"num_retries": 0, "request_timeout": 600},
        "general_settings": {"master_key": KEY}}))
    proxy = spawn_tied([litellm, "--config", str(config), "--host", "127.0.0.1", "--port",
                        str(port)], foreign=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, cwd=work,
                       env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    url = f"http://127.0.0.1:{port}"
    _wait_http(url + "/health/liveliness")
    return proxy, url


async def _session(config: Config, paths: Paths, calls: list[tuple[int, int, bool]],
                   dump: Any = None) -> Finished:
    """One session; `calls` gets (fitted, counted by the gateway, has a schema) per call."""
    router = Router(config, paths, persist=False)
    plain = router.stream

    async def stream(request: Any, *args: Any, **kwargs: Any) -> Any:
        fitted = None
        async for event in plain(request, *args, **kwargs):
            if isinstance(event, Fitted):
                fitted = event.report
            elif isinstance(event, Usage) and fitted is not None and \
                    isinstance(event.prompt_tokens, int) and event.prompt_tokens > 0:
                schema = getattr(request, "request", request).schema is not None
                calls.append((fitted.used, event.prompt_tokens, schema))
            yield event

    router.stream = stream  # type: ignore[method-assign]
    if dump is not None:
        _dumping(dump)
    journal = SessionStore(paths.data_dir / "sessions").create(HYPOTHESIS, 5)
    try:
        events = [e async for e in Interrogation(router, journal, config.interrogation).run()]
    finally:
        await router.aclose()
    finished = events[-1]
    assert isinstance(finished, Finished)
    return finished


_COUNTS: list[float] = []
"""Seconds each exact count by a gateway's backend took (`_timing_counts`)."""


def _timing_counts() -> None:
    """Time every count the providers ask of a gateway's backend (`backend_count`)."""
    import engine.providers._anthropic as anthropic
    import engine.providers._openai as openai

    counted = openai.backend_count

    async def timed(*args: Any) -> int:
        started = time.perf_counter()
        try:
            return await counted(*args)
        finally:
            _COUNTS.append(time.perf_counter() - started)

    openai.backend_count = anthropic.backend_count = timed  # type: ignore[assignment]


def _dumping(dump: Any) -> None:
    """Write each reply's measure (`engine.context.measure.measured`: the prompt sent, the
    text added beside it, the tokens reported) to `dump`, a line of JSON each: the data the
    bound is designed on."""
    import engine.routing.router as routed
    from engine.context.measure import measured
    from engine.context.tokens import estimate

    def recorded(provider: Any, messages: Any, prompt_tokens: object, counts: bool = False,
                 added: str = "") -> None:
        dump.write(json.dumps({
            "texts": [estimate(m.content) for m in messages],
            "bytes": [len(m.content.encode("utf-8")) for m in messages],
            "added": estimate(added) if added else 0, "counted": prompt_tokens,
            "contents": [m.content for m in messages] + ([added] if added else [])}) + "\n")
        dump.flush()
        measured(provider, messages, prompt_tokens, counts, added)

    routed.measured = recorded  # type: ignore[assignment]


def _baseline(tree: Path, url: str, route: str, runs: int, home: Path) -> int:
    """The same sessions with the code of another commit (`tree`), through its CLI: how many
    ended `failed`."""
    base = url + "/v1" if route == "openai" else url
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[providers.gw]\nkind = "{route}"\nmodel = "local"\nbase_url = "{base}"\n'
        f'api_key_env = "GATEWAY_KEY"\npriority = 1\n')
    failed = 0
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-m", "tui", "run", HYPOTHESIS, "--detective", "gw", "--witness",
             "gw", "--limit", "5"], capture_output=True, text=True, cwd=tree, timeout=1800,
            env={**os.environ, "DETEKTIV_HOME": str(home), "GATEWAY_KEY": KEY})
        ended = [line for line in (done.stdout + done.stderr).splitlines()
                 if line.startswith("Session ")]
        if ended and " failed: " in ended[-1]:
            failed += 1
            print(f"  baseline {route}: {ended[-1][:220]}", flush=True)
    return failed


def _route(url: str, route: str) -> Config:
    base = url + "/v1" if route == "openai" else url
    return Config.model_validate({
        "providers": {"gw": {"kind": route, "model": "local", "base_url": base,
                             "api_key": KEY, "priority": 1}},
        "roles": {"detective": ["gw"], "witness": ["gw"]}})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--litellm", required=True, help="LiteLLM's proxy command")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--worst", type=int, default=0, help="print the N loosest fits")
    parser.add_argument("--routes", default="openai,anthropic")
    parser.add_argument("--baseline", help="a commit whose sessions are run the same way first")
    parser.add_argument("--dump", help="a folder for each route's measured replies (JSON lines)")
    args = parser.parse_args()
    rows = []
    tree: Path | None = None
    _timing_counts()
    if args.baseline:
        tree = Path(tempfile.mkdtemp(prefix="detektiv-baseline-")) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), args.baseline],
                       cwd=ROOT, check=True, capture_output=True)
    try:
        _measure(args, rows, tree)
    finally:
        if tree is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                           capture_output=True)
    print("\nmodel          route      runs  failed  baseline  calls  fitted/counted: median  "
          "max   ≤1.20  (256+: ≤1.20  max)  under  seconds  count ms  count %")
    for (model, route, runs, failed, before, n, median, most, within, within_long, most_long,
         under, took, counts) in rows:
        print(f"{model:<14} {route:<10} {runs:>4}  {failed:>6}  {before:>8}  {n:>5}  "
              f"{median:>22.3f}  {most:.3f}  {within:>5.0%}  {within_long:>12.0%}  "
              f"{most_long:.3f}  {under:>5}  {took:>7.0f}  "
              f"{statistics.median(counts) * 1000 if counts else 0:>8.1f}  "
              f"{sum(counts) / took:>7.2%}")
    return 0


def _measure(args: argparse.Namespace, rows: list[tuple[Any, ...]], tree: Path | None
             ) -> None:
    """Every model and route of `args`, a row each in `rows`."""
    for model in args.models.split(","):
        with tempfile.TemporaryDirectory(prefix="detektiv-gw-bench-") as folder, \
                local_server(Path(folder) / "server-home", "--model", model,
                             "--parallel", "4", "--ctx", "4096") as server:
            work = Path(folder)
            proxy, url = _proxy(args.litellm, work, server.url)
            try:
                for route in args.routes.split(","):
                    before: int | str = "-"
                    if tree is not None:
                        before = _baseline(tree, url, route, args.runs,
                                           work / f"baseline-{route}")
                    paths = Paths.at(work / f"home-{route}")
                    calls: list[tuple[int, int, bool]] = []
                    endings: list[str] = []
                    started = time.monotonic()
                    _COUNTS.clear()
                    dump = None
                    if args.dump:
                        Path(args.dump).mkdir(parents=True, exist_ok=True)
                        dump = (Path(args.dump) / f"{model}-{route}.jsonl").open("w")
                    for _ in range(args.runs):
                        finished = asyncio.run(_session(_route(url, route), paths, calls, dump))
                        endings.append(finished.status)
                        if finished.status == "failed":
                            print(f"  {model} {route}: failed: {finished.reason}", flush=True)
                    later = [used / counted for used, counted, _ in calls[1:]]
                    worst = sorted(calls[1:], key=lambda c: -c[0] / c[1])[:args.worst]
                    for used, counted, schema in worst:
                        print(f"    fitted {used} for {counted} counted"
                              f"{' (schema)' if schema else ''}", flush=True)
                    # where the room matters: prompts of 256 tokens or more
                    long = [used / counted for used, counted, _ in calls[1:] if counted >= 256]
                    rows.append((model, route, args.runs, endings.count("failed"), before,
                                 len(later), statistics.median(later) if later else 0.0,
                                 max(later) if later else 0.0,
                                 sum(r <= 1.2 for r in later) / max(1, len(later)),
                                 sum(r <= 1.2 for r in long) / max(1, len(long)),
                                 max(long) if long else 0.0,
                                 sum(r < 1.0 for r in later), time.monotonic() - started,
                                 list(_COUNTS)))
                    print(f"{model} {route}: {endings}", flush=True)
            finally:
                stop(proxy, timeout=30)


if __name__ == "__main__":
    raise SystemExit(main())
