"""What does fitting prompts to a window cost, how good is the estimate, and does it stop the
context failures?

(a) Fitting the detective's prompt over a 50-round transcript into an 8k window, with the
    estimate: time per call, cold (texts never measured) and warm (as within a run, where
    the same rounds are measured again), against rendering the same transcript unfitted.
    Goal: <= 2 ms per call.
(b) The estimate against the real tokenizer (llama.cpp /tokenize, Gemma 3) on the rendered
    prompts of interrogations this benchmark runs: mean and worst relative error. Goal: mean
    error <= 10 %, and the worst underestimate smaller than the margin an estimated budget
    keeps (10 % of the window), so an estimate never lets a request overflow.
(c) Interrogations of 10 rounds on `detektiv local-server`, counting those that fail for
    context: "before" = the old defaults (8192 tokens over 4 slots = 2048 a request) with
    every prompt sent unfitted, as before the context manager; "after" = today's defaults
    (32768 over 4 slots) with fitting (`--small-window`: also the old 2048 window, fitted;
    the test suite runs 10 rounds in a 1024-token window, fitted, on every run). The detective's
    gap analyses are scripted to always ask for more (a fault proxy answers them), so every
    run goes the whole 10 rounds; questions and answers come from the model. Goal: 0 after.

    .venv/bin/python bench/context.py [--runs 10] [--concurrency 2]

    Temperature 0 (each run's hypothesis differs, so do its questions and answers); deadlines
    and the circuit breaker are widened, so what ends a run is the context or the model.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from engine import (  # noqa: E402
    Finished,
    GapAnalysis,
    Paths,
    Workspace,
)
from engine.context.tokens import estimate, estimate_messages  # noqa: E402
from engine.interrogation.transcript import transcript, transcript_prompt  # noqa: E402
from engine.models.events import ContextFitted  # noqa: E402
from engine.models.session import (  # noqa: E402
    ProvidersUsed,  # noqa: E402
    QuestionAnswerPair,
)
from engine.providers import Message, StreamRequest  # noqa: E402
from engine.providers._llamacpp import count_chat_tokens  # noqa: E402
from tests.support.faults import FaultProxy  # noqa: E402

GAP = {"gaps": [{"category": "vagueness", "severity": "high",
                 "description": "The witness gave no year, no architect and no height."}],
       "completeness_score": 30, "requires_follow_up": True}


def start_server(home: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "DETEKTIV_HOME": home}
    server = subprocess.Popen([sys.executable, "-m", "tui", "local-server", "--port", "0", *args],
                              stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                              stderr=subprocess.DEVNULL)
    assert server.stdout is not None
    url = server.stdout.readline().rsplit(" at ", 1)[1].strip()
    return server, url.removesuffix("/v1")


def fake_pairs(count: int) -> list[QuestionAnswerPair]:
    words = ("tower iron Paris 1889 Eiffel structure built height metres engineer visitors "
             "paint the of and was in a it by for").split()
    pairs = []
    for n in range(1, count + 1):
        answer = " ".join(words[(n * 7 + i * 3) % len(words)] for i in range(150))
        analysis = GapAnalysis.model_validate({**GAP, "completeness_score": n % 100})
        pairs.append(QuestionAnswerPair(
            sequence=n, question=f"Round {n}: what exactly did the engineer record in {1880 + n}?",
            answer=answer, gap_analysis=analysis,
            provider_used=ProvidersUsed(detective="d:m", witness="w:m")))
    return pairs


def frame(text: str) -> list[Message]:
    return [Message("system", "You are a detective. The hypothesis: the tower is in Paris."),
            Message("user", f"The interrogation so far:\n\n{text}\n\nWrite the next question.")]


def bench_fitting() -> None:
    pairs = fake_pairs(50)
    limit = 8192 - 256 - 819
    calls = 200

    def unfitted() -> None:
        frame(transcript(pairs, analyses=True))

    def fitted() -> None:
        request = StreamRequest(messages=(), max_tokens=256)
        transcript_prompt(request, pairs, frame, analyses=True).messages(limit, estimate)

    for name, action in (("render unfitted", unfitted), ("fit (warm)", fitted)):
        action()
        start = time.perf_counter()
        for _ in range(calls):
            action()
        per = (time.perf_counter() - start) / calls
        print(f"  {name:<18} {per * 1000:7.3f} ms per call")
        if name == "render unfitted":
            base = per
    cold = []
    for i in range(20):  # fresh texts every time: nothing measured before
        fresh = [p.model_copy(update={"answer": p.answer + f" {i}"}) for p in pairs]
        request = StreamRequest(messages=(), max_tokens=256)
        start = time.perf_counter()
        transcript_prompt(request, fresh, frame, analyses=True).messages(limit, estimate)
        cold.append(time.perf_counter() - start)
    print(f"  {'fit (cold)':<18} {statistics.median(cold) * 1000:7.3f} ms per call")
    print(f"  ratio fit (warm) / render unfitted: {per / base:.2f}x")


async def interrogations(base: str, home: Path, runs: int, concurrency: int, fitted: bool,
                         prompts: list[list[Message]] | None) -> tuple[int, int, list[str]]:
    """(runs failed for context, runs that reached 10 rounds, other failures)."""
    import engine.routing.router as router_module
    from engine.context.budget import FitReport, FittedRequest, Prompt, fit
    from engine.context.fit import Trim

    proxy = FaultProxy(base)
    await proxy.start()
    proxy.scripts["gap"] = (json.dumps(GAP), "stop")
    proxy.schema_scripts["gap_analysis"] = "gap"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[providers.srv]\nkind = "openai"\nmodel = "gemma"\nbase_url = "{proxy.url}"\n'
        # deadlines and breaker out of the way: this counts failures for context, and runs
        # share one slow core
        "priority = 1\ntimeout = 360\nstall_timeout = 120\n"
        "[router]\nfailure_threshold = 100\n[interrogation]\ntemperature = 0\n")
    os.environ["DETEKTIV_HOME"] = str(home)
    original = router_module.fit

    async def unfitted(provider, prompt, shrink=1.0, told=None):  # type: ignore[no-untyped-def]
        request = prompt.request if isinstance(prompt, Prompt) else prompt
        request = StreamRequest(messages=(*request.messages,
                                          *(prompt.extra if isinstance(prompt, Prompt) else ())),
                                schema=request.schema, schema_name=request.schema_name,
                                max_tokens=request.max_tokens, temperature=request.temperature)
        return FittedRequest(request, FitReport(provider.label, 0, 1, "default", "estimate",
                                                request.max_tokens or 0, None, Trim()))

    async def recording(provider, prompt, shrink=1.0, told=None):  # type: ignore[no-untyped-def]
        result = await fit(provider, prompt, shrink, told)
        if prompts is not None:
            prompts.append(list(result.request.messages))
        return result

    router_module.fit = recording if fitted else unfitted  # type: ignore[assignment]
    context_failures = complete = 0
    others: list[str] = []
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int) -> None:
        nonlocal context_failures, complete
        async with gate:
            workspace = Workspace(Paths.from_env())
            try:
                run = workspace.sessions.start(f"The Eiffel Tower is in Paris (run {index}).", 10,
                                      ["srv"], ["srv"])
                last = None
                async for event in run.events():
                    if isinstance(event, ContextFitted | Finished):
                        last = event
                assert isinstance(last, Finished)
                if last.status == "limit-reached":
                    complete += 1
                elif "context" in (last.reason or ""):
                    context_failures += 1
                else:
                    others.append(last.reason or last.status)
            finally:
                await workspace.aclose()

    try:
        await asyncio.gather(*(one(i) for i in range(runs)))
    finally:
        router_module.fit = original  # type: ignore[assignment]
        await proxy.stop()
    return context_failures, complete, others


async def estimate_error(base: str, prompts: list[list[Message]], window: int) -> None:
    errors = []
    shortfall = 0
    async with httpx.AsyncClient() as client:
        for messages in prompts:
            exact = await count_chat_tokens(client, base, {}, messages)
            guess = estimate_messages(messages)
            errors.append((guess - exact) / exact)
            shortfall = max(shortfall, exact - guess)
    mean_abs = statistics.mean(abs(e) for e in errors)
    margin = max(64, window // 10)
    print(f"  (b) {len(errors)} prompts: mean |error| {mean_abs * 100:.1f} %, mean "
          f"{statistics.mean(errors) * 100:+.1f} %, worst underestimate "
          f"{min(errors) * 100:+.1f} %, worst overestimate {max(errors) * 100:+.1f} %")
    print(f"  largest shortfall {shortfall} tokens; the margin kept when estimating a "
          f"{window}-token window is {margin}: {'covered' if shortfall < margin else 'NOT'}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--small-window", action="store_true",
                        help="also run fitted in the old 2048-token window (another ~30 min)")
    args = parser.parse_args()
    print("(a) fitting a 50-round transcript into an 8k window")
    bench_fitting()
    home = tempfile.mkdtemp()
    prompts: list[list[Message]] = []
    print(f"(c) {args.runs} interrogations of 10 rounds, failures for context")
    configurations: list[tuple[str, tuple[str, ...], bool]] = [
        ("before: 2048 a request, unfitted", ("--ctx", "8192"), False),
        ("after:  8192 a request, fitted  ", (), True),
    ]
    if args.small_window:
        configurations.append(("after:  2048 a request, fitted  ", ("--ctx", "8192"), True))
    for label, server_args, fitted in configurations:
        server, base = start_server(home, "--parallel", "4", *server_args)
        try:
            start = time.monotonic()
            failed, complete, others = await interrogations(
                base, Path(home) / label.split(":")[0].strip(), args.runs, args.concurrency,
                fitted, prompts if fitted else None)
            print(f"  {label}: {failed} of {args.runs} failed for context, {complete} reached "
                  f"10 rounds ({time.monotonic() - start:.0f} s)"
                  + (f"; other endings: {others}" if others else ""))
            if fitted and prompts:
                await estimate_error(base, prompts, 2048 if server_args else 8192)
                prompts.clear()
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    asyncio.run(main())
