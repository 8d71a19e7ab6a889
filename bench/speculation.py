"""The embedded model at this machine's limit (issue 74): llama.cpp's own ceiling, detektiv's
plain rate against it, and speculative decoding against plain decoding on the same prompts.

    python bench/speculation.py [--threads 2] [--repeat 2] [--kinds off,draft,ngram_simple,…]

1. **The ceiling**: xllamacpp itself (the library detektiv embeds, one process, nothing of
   detektiv's between), the 1.5B of `make bench-real` on `--threads` threads and 4 slots:
   prompt tokens a second (a prompt of about 1,000 tokens, one token asked), generated tokens
   a second with one stream and with four at once (the four's tokens over their wall time).
2. **detektiv's plain rate**: the embedded engine (`engine.providers._llama.LlamaEngine`,
   speculation off) on the same one-stream request: its ratio to the ceiling.
3. **Speculation**: the witness's testimony ("Summarize the health benefits of Vitamin B3",
   the witness's own prompt, 512 tokens at most) and the split of that testimony into claims
   (the product's split prompt, its frequency penalty), temperature 0, on an engine per kind:
   plain, the 0.5B as draft (`--draft-tokens`), and llama.cpp's five n-gram kinds. Printed per
   kind and prompt: generated tokens a second (llama.cpp's `predicted_per_second`), the wall
   seconds, the ratio to plain, the draft tokens proposed and accepted, and whether the text
   is plain's — else the character where it first differs (llama.cpp does not promise the
   same greedy output: batched verification moves the floats).

4. **The prefix cache**: on the plain engine, each claim of that split read against the
   testimony as a sample is read (the product's judgement prompt: its fixed part, then the
   sample, then the claim), one after another: the share of prompt tokens llama.cpp served
   from its cache (`cache_n` of `cache_n + prompt_n`).

All ratios are taken in one run on one machine. Minutes of CPU; never in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.interrogation.judgement import exchange, judgement_messages  # noqa: E402
from engine.interrogation.testimony import SPLIT_PENALTY, split_turns  # noqa: E402
from engine.prompts import load_prompt  # noqa: E402
from engine.providers._llama import LlamaEngine, LlamaOptions  # noqa: E402
from engine.providers._speculation import NGRAM_KINDS, Speculation  # noqa: E402

MODELS = Path.home() / ".cache/detektiv-bench/models"
MODEL = MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DRAFT = MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
REQUEST = "Summarize the health benefits of Vitamin B3"
SLOTS = 4
KEPT: list[Any] = []
LONG_PROMPT = " ".join(f"Item {n}: the quick brown fox jumps over the lazy dog." for n in range(90))


def chat(engine_or_server: Any, body: dict[str, Any]) -> dict[str, Any]:
    """One whole reply (not streamed): its text and llama.cpp's timings, and wall seconds."""
    began = time.perf_counter()
    if isinstance(engine_or_server, LlamaEngine):
        engine_or_server.load()
        reply = engine_or_server._server.handle_chat_completions(body)
    else:
        reply = engine_or_server.handle_chat_completions(body)
    wall = time.perf_counter() - began
    return {"text": reply["choices"][0]["message"]["content"] or "",
            "timings": reply.get("timings", {}), "wall": wall}


def ceiling(model: Path, threads: int) -> dict[str, float]:
    """llama.cpp's own rates through xllamacpp, nothing of detektiv's between."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = SLOTS * 4096
    params.n_parallel = SLOTS
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    params.verbosity = -1
    server = xllamacpp.Server(params)
    KEPT.append(server)  # never freed (see `main`)
    chat(server, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    prompt = chat(server, {"messages": [{"role": "user", "content": LONG_PROMPT}],
                           "max_tokens": 1, "cache_prompt": False})
    one = chat(server, generate_body(256))
    four: list[dict[str, Any]] = []
    began = time.perf_counter()
    workers = [threading.Thread(target=lambda n=n: four.append(chat(server, generate_body(
        128, f"Count from {n * 100} upwards, one number a line.")))) for n in range(SLOTS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - began
    return {"prompt_tps": prompt["timings"]["prompt_per_second"],
            "prompt_tokens": prompt["timings"]["prompt_n"],
            "gen_tps_1": one["timings"]["predicted_per_second"],
            "gen_tps_4": sum(r["timings"]["predicted_n"] for r in four) / wall}


def generate_body(tokens: int, content: str = "Count from 1 upwards, one number a line."
                  ) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}], "max_tokens": tokens,
            "temperature": 0, "ignore_eos": True}


def testimony_body() -> dict[str, Any]:
    return {"messages": [{"role": "system", "content": load_prompt("witness")},
                         {"role": "user", "content": REQUEST}],
            "max_tokens": 512, "temperature": 0, "seed": 1}


def split_body(text: str) -> dict[str, Any]:
    rules, examples = split_turns(load_prompt("split_claims"))
    messages = [{"role": "system", "content": rules}]
    for example, claims in examples:
        messages += [{"role": "user", "content": example},
                     {"role": "assistant", "content": claims}]
    messages.append({"role": "user", "content": text})
    return {"messages": messages, "max_tokens": 768, "temperature": 0, "seed": 1,
            "frequency_penalty": SPLIT_PENALTY}


def engine_for(model: Path, speculation: Speculation, threads: int) -> LlamaEngine:
    return LlamaEngine(LlamaOptions(model_path=model, n_ctx=SLOTS * 4096, n_parallel=SLOTS,
                                    n_threads=threads, speculation=speculation))


def first_difference(a: str, b: str) -> int | None:
    for at, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return at
    return None if len(a) == len(b) else min(len(a), len(b))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--draft-tokens", type=int, default=16)
    parser.add_argument("--kinds", default="off,draft," + ",".join(NGRAM_KINDS))
    parser.add_argument("--no-ceiling", action="store_true")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--draft", type=Path, default=DRAFT)
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    parser.add_argument("--texts", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for path in (args.model, args.draft):
        if not path.is_file():
            raise SystemExit(f"{path}: not found (make bench-real fetches the 1.5B; "
                             "bench/fetch_parts.py the 0.5B)")
    if args.stage:
        return stage(args)
    out: dict[str, Any] = {"threads": args.threads}
    stages = ([] if args.no_ceiling else ["ceiling", "plain-rate"]) + \
        ["off", *(k for k in args.kinds.split(",") if k != "off")]
    with tempfile.TemporaryDirectory(prefix="detektiv-spec-") as folder:
        texts = Path(folder) / "texts.json"
        for name in stages:  # a process each: one server in memory at a time, none idle
            done = subprocess.run(
                [sys.executable, __file__, "--stage", name, "--texts", str(texts),
                 "--threads", str(args.threads), "--repeat", str(args.repeat),
                 "--draft-tokens", str(args.draft_tokens), "--model", str(args.model),
                 "--draft", str(args.draft)], capture_output=True, text=True, check=False)
            lines = done.stdout.splitlines()
            for line in lines[:-1]:
                print(line, flush=True)
            try:
                out[name] = json.loads(lines[-1])
            except (IndexError, ValueError):
                print(f"{name}: failed ({done.stderr[-600:]})", flush=True)
                continue
            if name == "plain-rate" and "ceiling" in out:
                ours, top = out[name]["tps"], out["ceiling"]["gen_tps_1"]
                print(f"detektiv's engine, plain: {ours:.2f} tok/s = {ours / top:.0%} of the "
                      "ceiling", flush=True)
            if name != "off" and "off" in out and "rows" in out[name]:
                for prompt, row in out[name]["rows"].items():
                    base = out["off"]["rows"][prompt]["tps"]
                    print(f"{name:14} {prompt:9} {row['tps'] / base:4.2f}× plain", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 0


def stage(args: argparse.Namespace) -> int:
    """One stage in this process; its figures as the last line (JSON)."""
    found: dict[str, Any] = {}
    if args.stage == "ceiling":
        found = ceiling(args.model, args.threads)
        print(f"ceiling (xllamacpp, {args.threads} threads, {SLOTS} slots): prompt "
              f"{found['prompt_tps']:.1f} tok/s ({found['prompt_tokens']} tokens); generated "
              f"{found['gen_tps_1']:.2f} tok/s one stream, {found['gen_tps_4']:.2f} four "
              "streams", flush=True)
    elif args.stage == "plain-rate":
        plain = engine_for(args.model, Speculation(), args.threads)
        KEPT.append(plain)
        chat(plain, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        found = {"tps": chat(plain, generate_body(256))["timings"]["predicted_per_second"]}
    else:
        found = kind_stage(args)
    print(json.dumps(found), flush=True)
    sys.stdout.flush()
    os._exit(0)  # the server is not torn down (see `KEPT`)


def kind_stage(args: argparse.Namespace) -> dict[str, Any]:
    """The testimony and its split on an engine decoding as `args.stage` says."""
    kind = args.stage
    speculation = {"off": Speculation(),
                   "draft": Speculation("draft", args.draft, n_max=args.draft_tokens),
                   **{k: Speculation("ngram", ngram=k) for k in NGRAM_KINDS}}[kind]
    engine = engine_for(args.model, speculation, args.threads)
    KEPT.append(engine)
    engine.load()
    if engine.speculation != speculation:
        print(f"{kind}: {engine.speculation.label()}", flush=True)
        return {"refused": engine.speculation.label()}
    chat(engine, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    texts: dict[str, str] = json.loads(args.texts.read_text()) if args.texts.is_file() else {}
    replies: dict[str, list[dict[str, Any]]] = {"testimony": [], "split": []}
    for _ in range(args.repeat):
        testimony = chat(engine, {**testimony_body(), "cache_prompt": False})
        replies["testimony"].append(testimony)
        texts.setdefault("testimony", testimony["text"])
        split = chat(engine, {**split_body(texts["testimony"]), "cache_prompt": False})
        replies["split"].append(split)
        texts.setdefault("split", split["text"])
    if kind == "off":
        args.texts.write_text(json.dumps(texts), encoding="utf-8")
    rows: dict[str, Any] = {}
    for prompt, got in replies.items():
        tps = statistics.median(r["timings"]["predicted_per_second"] for r in got)
        wall = statistics.median(r["wall"] for r in got)
        drafted = sum(r["timings"].get("draft_n", 0) for r in got)
        accepted = sum(r["timings"].get("draft_n_accepted", 0) for r in got)
        differs = first_difference(texts[prompt], got[0]["text"])
        same = "the same text" if differs is None else f"differs at character {differs}"
        rows[prompt] = {"tps": tps, "wall": wall, "tokens": got[0]["timings"]["predicted_n"],
                        "drafted": drafted, "accepted": accepted, "differs": differs,
                        "text": got[0]["text"][:3000]}
        print(f"{kind:14} {prompt:9} {tps:6.2f} tok/s  {wall:6.1f} s  "
              f"{got[0]['timings']['predicted_n']:4} tokens  draft {accepted}/{drafted} "
              f"accepted  {same}", flush=True)
    found: dict[str, Any] = {"rows": rows}
    if kind == "off":
        found["prefix"] = prefix_share(engine, texts["testimony"], texts["split"])
    return found


def prefix_share(engine: LlamaEngine, testimony: str, split: str) -> dict[str, float]:
    """The share of the sample readings' prompt tokens served from the prefix cache."""
    claims = [line.strip() for line in split.splitlines()
              if line.strip() and not line.startswith("[")][:8]
    cached = read = 0
    for claim in claims:
        messages = judgement_messages(claim, exchange(REQUEST, testimony), False)
        reply = chat(engine, {"messages": [{"role": m.role, "content": m.content}
                                           for m in messages], "max_tokens": 4,
                              "temperature": 0})
        cached += int(reply["timings"].get("cache_n", 0))
        read += int(reply["timings"].get("prompt_n", 0))
    share = cached / (cached + read) if cached + read else 0.0
    print(f"prefix cache: {len(claims)} sample readings, {cached:,} of {cached + read:,} "
          f"prompt tokens served from the cache ({share:.0%})", flush=True)
    return {"claims": len(claims), "cached": cached, "read": read, "share": share}


if __name__ == "__main__":
    raise SystemExit(main())
