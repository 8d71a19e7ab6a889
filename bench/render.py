"""Streaming a long answer into the Live view: our TranscriptView against stock MarkdownStream.

Headless at 120×40, a deterministic token source (markdown-ish text, ~4 characters a token),
rates 100 and 500 tok/s and unthrottled, a prior transcript of 0, 10k and 50k characters.
Per run: token-to-frame lag p50/p95 (token written → end of the first frame after the append
that holds it), frames/s while streaming, event-loop stall p99 (oversleep of a 5 ms ticker),
catch-up (last token written → the frame that shows it) and key-press latency while streaming
(a key event posted → its binding runs).

Goal, with 50k characters before and 500 tok/s: lag p95 ≤ 100 ms, ≥ 30 fps, stall p99 ≤ 50 ms,
catch-up ≤ 100 ms.
Run: .venv/bin/python bench/render.py [--tokens N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.binding import Binding  # noqa: E402
from textual.containers import VerticalScroll  # noqa: E402
from textual.widgets import Markdown  # noqa: E402

from tui.widgets.transcript import TranscriptView  # noqa: E402

PARAGRAPH = (
    "The witness states that the **shipment** left the harbour on the third, which "
    "contradicts the log entry quoted earlier; see `entry 14`. "
)


def answer_tokens(count: int) -> list[str]:
    """A deterministic markdown answer cut into ~4-character tokens."""
    text = ""
    n = 0
    while len(text) < count * 4:
        n += 1
        text += f"{PARAGRAPH * 2}\n\n- point {n}: the dates differ\n- point {n}b: nobody saw it\n\n"
        if n % 4 == 0:
            text += "```\nlog 14: departed 03:10\n```\n\n"
    return [text[i:i + 4] for i in range(0, count * 4, 4)]


def prior_rounds(chars: int) -> list[tuple[str, str]]:
    rounds: list[tuple[str, str]] = []
    total = 0
    n = 0
    while total < chars:
        n += 1
        question = f"Q{n}: Where exactly was the shipment on the third?"
        answer = (PARAGRAPH * 5 + "\n\n- it was at the dock\n- it was not loaded\n\n") * 2
        rounds.append((question, answer))
        total += len(question) + len(answer)
    return rounds


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Harness(App[None]):
    BINDINGS = [Binding("x", "probe", "probe")]

    def __init__(self, kind: str, prior: list[tuple[str, str]]) -> None:
        super().__init__()
        self.kind = kind
        self.prior = prior
        self.frame_ends: list[float] = []
        self.applied: list[tuple[float, int]] = []  # (time, tokens incorporated so far)
        self.written: list[float] = []
        self.probes: list[float] = []
        self.lags: list[float] = []
        self._resolved = 0
        self._applied_count = 0

    def compose(self) -> ComposeResult:
        if self.kind == "ours":
            yield TranscriptView(id="view")
        else:
            with VerticalScroll(id="view"):
                for question, answer in self.prior:
                    yield Markdown(f"**{question}**\n\n{answer}")

    def on_mount(self) -> None:
        if self.kind == "ours":
            view = self.query_one(TranscriptView)
            for question, answer in self.prior:
                view.add("question", question, title="Q")
                view.add("answer", answer, title="A", markdown=True)

    def _display(self, screen: Any, renderable: Any) -> None:
        super()._display(screen, renderable)
        if renderable is None:
            return
        if hasattr(renderable, "render_segments"):  # do the terminal encoding headless skips
            renderable.render_segments(self.console)
        now = time.perf_counter()
        self.frame_ends.append(now)
        count = self._applied_count
        while self._resolved < count:
            self.lags.append(now - self.written[self._resolved])
            self._resolved += 1

    def mark_applied(self, count: int) -> None:
        self._applied_count = max(self._applied_count, count)

    def action_probe(self) -> None:
        self.probes.append(time.perf_counter())


async def stream_once(kind: str, prior_chars: int, rate: float | None, tokens: list[str]
                      ) -> dict[str, float]:
    app = Harness(kind, prior_rounds(prior_chars))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        stalls: list[float] = []
        key_lags: list[float] = []
        streaming = True

        async def ticker() -> None:
            while streaming:
                start = time.perf_counter()
                await asyncio.sleep(0.005)
                stalls.append(time.perf_counter() - start - 0.005)

        async def keys() -> None:
            while streaming:
                await asyncio.sleep(0.1)
                sent = time.perf_counter()
                before = len(app.probes)
                app.post_message(events.Key("x", "x"))
                while len(app.probes) == before and streaming:
                    await asyncio.sleep(0.001)
                if len(app.probes) > before:
                    key_lags.append(app.probes[-1] - sent)

        side = [asyncio.create_task(ticker()), asyncio.create_task(keys())]
        if kind == "ours":
            view = app.query_one(TranscriptView)
            original = view._flush_live

            def flush() -> None:
                count = len(app.written)
                original()
                app.mark_applied(count)

            view._flush_live = flush  # type: ignore[method-assign]
            view.start_stream("answer", title="A")

            async def write(token: str) -> None:
                view.append(token)
        else:
            scroll = app.query_one("#view", VerticalScroll)
            live = Markdown()
            await scroll.mount(live)
            scroll.anchor()
            stream = Markdown.get_stream(live)
            original_append = live.append

            async def append(fragment: str) -> Any:
                count = len(app.written)
                result = await original_append(fragment)
                app.mark_applied(count)
                return result

            live.append = append  # type: ignore[method-assign]

            async def write(token: str) -> None:
                await stream.write(token)

        frames_before = len(app.frame_ends)
        start = time.perf_counter()
        for index, token in enumerate(tokens):
            if rate is not None:
                delay = start + index / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            app.written.append(time.perf_counter())
            await write(token)
            if rate is None:
                await asyncio.sleep(0)
        last_written = app.written[-1]
        if kind == "ours":
            view.end_stream()
            app.mark_applied(len(tokens))
        else:
            await stream.stop()
        stream_end = time.perf_counter()
        deadline = time.perf_counter() + 30
        while len(app.lags) < len(tokens) and time.perf_counter() < deadline:
            await asyncio.sleep(0.005)
        streaming = False
        for task in side:
            await task
        duration = stream_end - start
        frames = [t for t in app.frame_ends[frames_before:] if t <= stream_end]
        return {
            "lag_p50": pct(app.lags, 0.5) * 1000,
            "lag_p95": pct(app.lags, 0.95) * 1000,
            "fps": len(frames) / duration if duration > 0 else float("nan"),
            "stall_p99": pct(stalls, 0.99) * 1000,
            "catch_up": (app.frame_ends[-1] - last_written) * 1000
            if len(app.lags) >= len(tokens) else float("nan"),
            "key_p95": pct(key_lags, 0.95) * 1000,
            "duration": duration,
        }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1500)
    parser.add_argument("--quick", action="store_true", help="only 50k at 500 tok/s")
    args = parser.parse_args()
    tokens = answer_tokens(args.tokens)
    rates: list[float | None] = [100, 500, None]
    priors = [0, 10_000, 50_000]
    if args.quick:
        rates, priors = [500], [50_000]
    print(f"{args.tokens} tokens; lag = token written → end of the frame that shows it")
    print(f"{'view':6} {'prior':>6} {'rate':>6} {'lag p50':>8} {'lag p95':>8} {'fps':>6} "
          f"{'stall p99':>9} {'catch-up':>9} {'key p95':>8}")
    results: dict[tuple[str, int, float | None], dict[str, float]] = {}
    for prior in priors:
        for rate in rates:
            for kind in ("stock", "ours"):
                r = await stream_once(kind, prior, rate, tokens)
                results[(kind, prior, rate)] = r
                label = "max" if rate is None else f"{rate:g}"
                print(f"{kind:6} {prior:>6} {label:>6} {r['lag_p50']:8.1f} {r['lag_p95']:8.1f} "
                      f"{r['fps']:6.1f} {r['stall_p99']:9.1f} {r['catch_up']:9.1f} "
                      f"{r['key_p95']:8.1f}", flush=True)
    goal = results.get(("ours", 50_000, 500))
    if goal:
        met = (goal["lag_p95"] <= 100 and goal["fps"] >= 30 and goal["stall_p99"] <= 50
               and goal["catch_up"] <= 100)
        print(f"goal at 50k / 500 tok/s (lag p95 ≤ 100 ms, ≥ 30 fps, stall p99 ≤ 50 ms, "
              f"catch-up ≤ 100 ms): {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    asyncio.run(main())
