"""`detektiv eval` over replicas: throughput with 1, 2, 4 and 8 replicas at `--concurrency
auto`, and a run that loses a replica and meets a 429 storm.

    python bench/eval_scale.py [--items-per-replica 24]

Loopback OpenAI-wire servers stand in for remote replicas (`Replica` below): each serves 4
slots (a fifth request waits for one, as llama.cpp's do), answers its first token after
200 ms and then 50 tokens a second (a token: four characters). Each server plays both roles
from the script of tests/support/evals.py (a detective that knows the labels, a witness that
answers in a sentence), so an item is four calls: question, answer, gap analysis, audit.
Both roles are one provider with N replicas; `--concurrency auto` fills their slots. Each
replica is a process of its own (as a remote one would be), tied to this one; killing one is
killing its process.

1. Throughput: items a second with N = 1, 2, 4, 8 replicas (24 × N claims each, a fresh
   run), and the ratio to N × the one-replica figure (goal at 8: ≥ 0.9).
2. Faults, 4 replicas: one killed a third of the way through, another answering 429 with
   `Retry-After: 1` to a burst of calls; the run must finish with every claim judged once,
   none failed; the time lost against the clean 4-replica run is reported.
3. Memory (`--rss 1000,5000,20000`): a run of that many claims against instant replicas (no
   delay), each in a fresh interpreter; its peak RSS (goal: flat, under 400 MB).
4. Kill -9 (`--kill 20000`): a run of that many claims against instant replicas, in a process
   killed with SIGKILL at three points (a quarter, half and three quarters of the claims
   judged), each time started again on the same folder; at the end every claim has exactly
   one result, and exactly one session was made for it (nothing redone, nothing lost).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import peak_rss_mb  # noqa: E402
from engine import EvalItemDone, EvalRequest, EvalStarted, Paths, Workspace  # noqa: E402
from engine.config.models import Config  # noqa: E402
from engine.evals.items import EvalItem, read_items  # noqa: E402
from engine.lifeline import release_tied, spawn_tied  # noqa: E402
from tests.support.evals import detective, knows, witness  # noqa: E402
from tests.support.wire import Recorded, Reply, WireServer, json_reply  # noqa: E402

SLOTS = 4
PEAK = [0.0]
"""Peak RSS in MB (`peak_rss_mb`: VmHWM) of the last `evaluate`, taken as its run ended (not
counting the check)."""
FIRST_TOKEN = 0.2
TOKENS_PER_SECOND = 50.0
CHARS_PER_TOKEN = 4


class Replica(WireServer):
    """A remote replica: `SLOTS` at once, 200 ms to the first token, then 50 tokens a second.
    `refuse` calls after `refuse_after` get a 429 (Retry-After 1); `kill()` drops it."""

    def __init__(self, reply: Any, refuse: int = 0, refuse_after: int = 0,
                 instant: bool = False) -> None:
        self.reply = reply
        self.instant = instant
        self.slots = threading.Semaphore(SLOTS)
        self.refuse, self.refuse_after = refuse, refuse_after
        self.calls = self.refused = 0
        self.lock = threading.Lock()
        super().__init__({"POST /v1/chat/completions": self._chat,
                          "GET /props": lambda r: json_reply({"total_slots": SLOTS, (
                              "default_generation_settings"): {"n_ctx": 32768}})},
                         keep_alive=True)

    def _chat(self, recorded: Recorded) -> Reply:
        with self.lock:
            self.requests.clear()  # a bench replica reads no request twice: 100,000 claims
            self.calls += 1        # would otherwise keep ~4 GB of them here
            if self.calls > self.refuse_after and self.refused < self.refuse:
                self.refused += 1
                return json_reply({"error": {"message": "Rate limit reached"}}, 429,
                                  {"retry-after": "1"})
        try:
            messages = recorded.json()["messages"]
        except (ValueError, KeyError, TypeError):  # a client killed while it sent its request
            return json_reply({"error": {"message": "not a whole request"}}, 400)
        text = self.reply(messages)
        return Reply(200, {"content-type": "text/event-stream"}, self._stream(text))

    def _stream(self, text: str) -> Iterator[Any]:
        with self.slots:
            time.sleep(0 if self.instant else FIRST_TOKEN)
            step = CHARS_PER_TOKEN * 5  # five tokens a piece
            for start in range(0, len(text), step):
                piece = text[start:start + step]
                yield _chunk({"content": piece}, None)
                if not self.instant:
                    time.sleep(len(piece) / CHARS_PER_TOKEN / TOKENS_PER_SECOND)
            yield _chunk({}, "stop")
            yield b"data: [DONE]\n\n"


def _chunk(delta: dict[str, Any], finish: str | None) -> bytes:
    data = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(data)}\n\n".encode()


def both_roles(items: list[EvalItem]) -> Any:
    sleuth = detective(knows(items))

    def reply(messages: list[dict[str, Any]]) -> str:
        system = messages[0]["content"] if messages else ""
        return sleuth(messages) if system.startswith("You are a detective") else \
            witness(messages)

    return reply


def claims(path: Path, count: int) -> list[EvalItem]:
    """`count` labelled claims, half true."""
    rows = [{"id": f"c{i}", "claim": f"Bridge number {i} was built in {1800 + i}.",
             "label": "true" if i % 2 else "false"} for i in range(count)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return read_items(path)


def config(urls: list[str]) -> Config:
    replicas = [{"base_url": url + "/v1"} for url in urls]
    return Config.model_validate({
        "providers": {"det": {"kind": "openai", "model": "m", "priority": 1,
                              "replicas": replicas, "first_token_timeout": 30,
                              "stall_timeout": 30},
                      "wit": {"kind": "openai", "model": "m", "priority": 2,
                              "replicas": replicas, "first_token_timeout": 30,
                              "stall_timeout": 30}},
        "roles": {"detective": ["det"], "witness": ["wit"]},
        "interrogation": {"min_rounds": 1, "iteration_limit": 5, "max_gaps": 1}})


async def evaluate(home: Path, dataset: Path, count: int, urls: list[str],
                   during: Any = None) -> tuple[float, int, int, int, float]:
    """(seconds, concurrency, judged, failed, waited) of one fresh run over `urls`."""
    home.mkdir(parents=True, exist_ok=True)  # a run killed earlier: the same folder, resumed
    paths = Paths(config_file=home / "config.toml", data_dir=home / "data",
                  cache_dir=home / "cache", log_dir=home / "logs", model_dir=home / "models")
    workspace = Workspace(paths, config(urls))
    try:
        run = await workspace.evals.start(EvalRequest(str(dataset), n=count, mode="open"))
        started = time.perf_counter()
        concurrency = judged = failed = 0
        waited = 0.0
        async for event in run.events():
            if isinstance(event, EvalStarted):
                concurrency = event.concurrency
            elif isinstance(event, EvalItemDone):
                judged, failed, waited = event.done, event.failed, event.waited
                if during is not None:
                    during(judged)
        PEAK[0] = peak_rss_mb()  # before the check
        with (run.folder.directory / "results.jsonl").open() as results:
            keys = [json.loads(line)["item"] for line in results]
        assert len(keys) == len(set(keys)) == count, "a claim judged twice or lost"
        return time.perf_counter() - started, concurrency, judged, failed, waited
    finally:
        await workspace.aclose()


class Process:
    """A replica in a process of its own: `python bench/eval_scale.py --serve CLAIMS`."""

    def __init__(self, dataset: Path, refuse: int = 0, refuse_after: int = 0,
                 instant: bool = False) -> None:
        self.process = spawn_tied(
            [sys.executable, __file__, "--serve", str(dataset), "--refuse", str(refuse),
             "--refuse-after", str(refuse_after), *(["--instant"] if instant else [])],
            foreign=True, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url:
            raise SystemExit("a replica did not start")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        release_tied(self.process.pid)


def serve(dataset: Path, refuse: int, refuse_after: int, instant: bool = False) -> int:
    """Run one replica until killed; its URL is the first line on stdout."""
    replica = Replica(both_roles(read_items(dataset)), refuse, refuse_after, instant)
    with replica:
        print(replica.url, flush=True)
        threading.Event().wait()
    return 0


def peak_rss(count: int, root: Path) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, claims judged) of a run of `count` claims in a fresh
    interpreter, against two instant replicas."""
    dataset = root / f"rss-{count}.jsonl"
    claims(dataset, count)
    servers = [Process(dataset, instant=True) for _ in range(2)]
    try:
        code = (
            "import asyncio, sys, json\n"
            f"sys.path.insert(0, {str(ROOT)!r})\n"
            "from pathlib import Path\n"
            "from bench.eval_scale import evaluate\n"
            f"s = asyncio.run(evaluate(Path({str(root / f'rss-home-{count}')!r}), "
            f"Path({str(dataset)!r}), {count}, {[p.url for p in servers]!r}))\n"
            "from bench.eval_scale import PEAK\n"
            "print(json.dumps([s[0], PEAK[0], s[2]]))\n")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=ROOT, timeout=max(7200, count * 0.25))  # 100k: ~2.5 h here
        if done.returncode != 0:
            raise SystemExit(done.stderr[-2000:])
        seconds, rss, judged = json.loads(done.stdout.strip().splitlines()[-1])
        return seconds, rss, judged
    finally:
        for server in servers:
            server.kill()


def kill_run(count: int, root: Path) -> dict[str, Any]:
    """A run of `count` claims killed with SIGKILL at three points and started again each
    time on the same folder (see the module docstring); what the folder holds at the end."""
    import signal

    dataset = root / f"kill-{count}.jsonl"
    claims(dataset, count)
    home = root / f"kill-home-{count}"
    servers = [Process(dataset, instant=True) for _ in range(2)]
    code = (
        "import asyncio, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from pathlib import Path\n"
        "from bench.eval_scale import evaluate\n"
        f"asyncio.run(evaluate(Path({str(home)!r}), Path({str(dataset)!r}), {count}, "
        f"{[p.url for p in servers]!r}))\n")
    kills, starts = [], 0
    began = time.perf_counter()
    try:
        for point in (count // 4, count // 2, 3 * count // 4, None):
            process = spawn_tied([sys.executable, "-c", code], foreign=True, cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            starts += 1
            while point is not None and process.poll() is None:
                judged = sum(_lines(f) for f in home.glob("data/evals/*/results.jsonl"))
                if judged >= point:
                    process.send_signal(signal.SIGKILL)
                    kills.append(judged)
                    break
                time.sleep(0.05)
            process.wait()
            release_tied(process.pid)
            if point is None and process.returncode != 0:
                raise SystemExit(process.stderr.read().decode()[-2000:] if process.stderr
                                 else "the last run failed")
    finally:
        for server in servers:
            server.kill()
    [folder] = list(home.glob("data/evals/*/"))
    results = [json.loads(line)["item"] for line in
               (folder / "results.jsonl").read_text().splitlines() if line.strip()]
    sessions = [json.loads(line)["item"] for line in
                (folder / "sessions.jsonl").read_text().splitlines() if line.strip()]
    made = sum(1 for _ in (home / "data" / "sessions").iterdir())
    return {"claims": count, "kills": kills, "starts": starts,
            "seconds": time.perf_counter() - began, "results": len(results),
            "distinct results": len(set(results)), "sessions recorded": len(sessions),
            "distinct sessions": len(set(sessions)), "session folders": made}


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.endswith(b"\n"))
    except OSError:
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items-per-replica", type=int, default=24)
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--refuse", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--refuse-after", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--instant", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rss", help="claims counts to measure peak RSS at (1000,5000)")
    parser.add_argument("--kill", type=int, help="claims in a run killed three times")
    args = parser.parse_args()
    if args.kill:
        with tempfile.TemporaryDirectory() as tmp:
            found = kill_run(args.kill, Path(tmp))
        print(", ".join(f"{k}: {v if not isinstance(v, float) else round(v)}"
                        for k, v in found.items()))
        whole = found["results"] == found["distinct results"] == found["claims"] == \
            found["sessions recorded"] == found["distinct sessions"] == found["session folders"]
        print("nothing lost, nothing redone" if whole else "LOST OR REDONE")
        return 0 if whole else 1
    if args.serve is not None:
        return serve(args.serve, args.refuse, args.refuse_after, args.instant)
    if args.rss:
        with tempfile.TemporaryDirectory() as tmp:
            print("| claims | seconds | claims/s | peak RSS |")
            print("|---|---|---|---|")
            for count in (int(c) for c in args.rss.split(",")):
                seconds, rss, judged = peak_rss(count, Path(tmp))
                print(f"| {judged:,} | {seconds:.0f} | {judged / seconds:.1f} | {rss:.0f} MB |",
                      flush=True)
        return 0
    per = args.items_per_replica
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        items = claims(root / "claims.jsonl", per * 8)
        servers = [Process(root / "claims.jsonl") for _ in range(8)]
        try:
            rates: dict[int, float] = {}
            print(f"eval over N replicas (each {SLOTS} slots, first token "
                  f"{FIRST_TOKEN * 1000:.0f} ms, {TOKENS_PER_SECOND:.0f} tokens/s), {per} "
                  "claims a replica, --concurrency auto")
            print("| replicas | claims | at once | seconds | claims/s | × N × one replica |")
            print("|---|---|---|---|---|---|")
            for n in (1, 2, 4, 8):
                count = per * n
                dataset = root / f"claims-{n}.jsonl"
                dataset.write_text("".join(
                    json.dumps({"id": i.key, "claim": i.claim, "label": str(i.label).lower()})
                    + "\n" for i in items[:count]), encoding="utf-8")
                seconds, k, judged, failed, _ = asyncio.run(evaluate(
                    root / f"n{n}", dataset, count, [s.url for s in servers[:n]]))
                rates[n] = judged / seconds
                print(f"| {n} | {count} | {k} | {seconds:.1f} | {rates[n]:.2f} | "
                      f"{rates[n] / (n * rates[1]):.2f} |" + (f" ({failed} failed)"
                                                             if failed else ""), flush=True)
        finally:
            for server in servers:
                server.kill()
        # faults: 4 fresh replicas, one killed a third of the way, one answering 429
        count = per * 4
        refused = 12
        faulty = [Process(root / "claims.jsonl"), Process(root / "claims.jsonl"),
                  Process(root / "claims.jsonl", refused, max(2, per)),
                  Process(root / "claims.jsonl")]
        killed = [False]

        def kill(judged: int) -> None:
            if not killed[0] and judged >= count // 3:
                killed[0] = True
                faulty[0].kill()

        try:
            seconds, k, judged, failed, waited = asyncio.run(evaluate(
                root / "faults", root / "claims-4.jsonl", count, [s.url for s in faulty],
                kill))
        finally:
            for server in faulty:
                server.kill()
        clean = count / rates[4]
        print(f"\nfaults, 4 replicas, {count} claims: one replica killed after {count // 3} "
              f"claims, another answering 429 (Retry-After 1 s) to {refused} calls: {judged} "
              f"judged once each, {failed} failed, {seconds:.1f} s against {clean:.1f} s "
              f"clean ({seconds / clean:.2f}×; calls waited {waited:.1f} s for the 429s in "
              "all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
