"""The witness's samples capped at the testimony's own length (issue 74, part 2): what the cap
saves and what it loses, on the development testimonies, the same server, one run.

    python bench/sample_cap.py HOME [--shares 1,1.25,1.5,2,2.5,3] [--out sample-cap.jsonl]

HOME's config names the `detective` and `witness` providers (as `make bench-real` writes it:
`~/.cache/detektiv-bench/home-dev-1.5b`). For each development testimony
(`bench/data/testimony-dev.jsonl`, the 1.5B's own answers to 18 open questions):

1. the witness answers the question at temperature 0 with `testimony_max_tokens`, as a
   session's testimony is asked (its reply's tokens, as the server counts them: T);
2. the question is asked again `testimony_samples` times at `consistency_temperature` with a
   seed each, uncapped (`testimony_max_tokens`), as a session's samples are drawn;
3. for each share s, each sample is cut at round(s × T) tokens (the server's own tokenizer:
   `/tokenize`, `/detokenize` — with the same seed a capped draw is this prefix);
4. each labelled claim is read against each sample, whole and cut (`judgement_word`, "based
   only on the witness's answer", as the `samples` signal reads it: an empty or refused
   sample skipped, a denial never support, a silent answer 0.5), only where the cut changed
   the sample.

Printed per share: the sample tokens it saves (of all drawn), the claims whose samples
reading moved by more than 0.05 (and how many of them now read nearer 0.5: what the cap
loses), and the samples signal's AUROC of P(false) on the labelled claims, whole and cut.
Minutes of CPU; never in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.testimony_sessions import auroc  # noqa: E402
from engine import Paths, Workspace  # noqa: E402
from engine.evals.baselines import Baselines  # noqa: E402
from engine.interrogation.checks import denial  # noqa: E402
from engine.interrogation.judgement import exchange, sample_problem  # noqa: E402
from engine.interrogation.transcript import witness_opening  # noqa: E402
from engine.interrogation.verdict import sampled_p_true  # noqa: E402
from engine.models.usage import TokenTally  # noqa: E402
from engine.providers import Message, StreamRequest  # noqa: E402

DEV = ROOT / "bench" / "data" / "testimony-dev.jsonl"


def _post(base: str, path: str, body: dict[str, object]) -> dict[str, Any]:
    request = urllib.request.Request(base + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:  # noqa: S310 (loopback)
        return json.load(reply)  # type: ignore[no-any-return]


def cut(base: str, text: str, tokens: int) -> str:
    """`text`'s first `tokens` tokens, by the server's tokenizer."""
    ids = _post(base, "/tokenize", {"content": text})["tokens"]
    assert isinstance(ids, list)
    if len(ids) <= tokens:
        return text
    content = _post(base, "/detokenize", {"tokens": ids[:tokens]})["content"]
    assert isinstance(content, str)
    return content


async def run(home: Path, out: Path, shares: list[float]) -> None:
    os.environ["DETEKTIV_HOME"] = str(home)
    workspace = Workspace(Paths.from_env())
    kept = json.loads(out.read_text("utf-8")) if out.is_file() else {}
    base = str(workspace.config.providers["witness"].base_url).rstrip("/")
    base = base[:-3] if base.endswith("/v1") else base
    try:
        router = await workspace.router()
        settings = workspace.config.interrogation
        judge = Baselines(router, settings, "open", TokenTally())
        system, _ = witness_opening(None)

        async def answer(question: str, temperature: float, seed: int | None
                         ) -> tuple[str, int]:
            reply = await judge._complete(StreamRequest(
                messages=(Message("system", system), Message("user", question)),
                max_tokens=settings.testimony_max_tokens, temperature=temperature,
                seed=seed), "witness")
            used = (reply.usage.completion_tokens or 0) if reply.usage is not None else 0
            return reply.text.strip(), used

        async def reading(claim: str, question: str, sample: str) -> float | None:
            if sample_problem(sample, question) is not None:
                return None
            found = await judge.reading(claim, exchange(question, sample), "judgement_word")
            if found is None:
                return None
            p_true = min(found.p_true, 0.5) if denial(sample, claim) is not None \
                else found.p_true
            return sampled_p_true(p_true)

        for row in map(json.loads, DEV.read_text("utf-8").splitlines()):
            entry = kept.setdefault(row["id"], {})
            if "testimony_tokens" not in entry:
                _, entry["testimony_tokens"] = await answer(row["question"], 0.0, None)
                drawn = [await answer(row["question"], settings.consistency_temperature,
                                      1000 + n) for n in range(settings.testimony_samples)]
                entry["samples"] = [text for text, _ in drawn]
                entry["sample_tokens"] = [used for _, used in drawn]
            claims = [c for c in row["claims"] if c["label"] is not None]
            readings = entry.setdefault("readings", {})
            for share in ["whole", *map(str, shares)]:
                if share in readings:
                    continue
                if share == "whole":
                    samples = entry["samples"]
                else:
                    limit = round(float(share) * entry["testimony_tokens"])
                    samples = [cut(base, s, limit) for s in entry["samples"]]
                whole = readings.get("whole")
                got = []
                for n, claim in enumerate(claims):
                    values = []
                    for k, sample in enumerate(samples):
                        if whole is not None and sample == entry["samples"][k]:
                            values.append(whole[n][k])  # uncut: the whole sample's reading
                        else:
                            values.append(await reading(claim["claim"], row["question"],
                                                        sample))
                    got.append(values)
                readings[share] = got
            out.write_text(json.dumps(kept, indent=1), "utf-8")
            print(f"{row['id']}: testimony {entry['testimony_tokens']} tokens, samples "
                  f"{entry['sample_tokens']}", flush=True)
    finally:
        await workspace.aclose()
    report(kept, shares)


def signal(values: list[float | None]) -> float | None:
    """The samples signal's P(true): the mean of the samples read."""
    read = [v for v in values if v is not None]
    return sum(read) / len(read) if read else None


def report(kept: dict[str, Any], shares: list[float]) -> None:
    rows = {row["id"]: row for row in map(json.loads, DEV.read_text("utf-8").splitlines())}
    drawn = sum(sum(e["sample_tokens"]) for e in kept.values())
    labels, whole_p = [], []
    for key, entry in kept.items():
        claims = [c for c in rows[key]["claims"] if c["label"] is not None]
        for n, claim in enumerate(claims):
            labels.append(0 if claim["label"] else 1)
            found = signal(entry["readings"]["whole"][n])
            whole_p.append(0.5 if found is None else 1 - found)
    mid, low, high = auroc(labels, whole_p) or (0.5, 0.5, 0.5)
    print(f"\n{len(labels)} development claims; samples drawn: {drawn:,} tokens")
    print(f"  uncapped: samples signal AUROC {mid:.3f} [{low:.3f}-{high:.3f}]")
    for share in shares:
        saved, moved, nearer, cut_p = 0, 0, 0, []
        for key, entry in kept.items():
            limit = round(share * entry["testimony_tokens"])
            saved += sum(max(0, t - limit) for t in entry["sample_tokens"])
            claims = [c for c in rows[key]["claims"] if c["label"] is not None]
            for n, _ in enumerate(claims):
                before = signal(entry["readings"]["whole"][n])
                after = signal(entry["readings"][str(share)][n])
                cut_p.append(0.5 if after is None else 1 - after)
                b = 0.5 if before is None else before
                a = 0.5 if after is None else after
                if abs(a - b) > 0.05:
                    moved += 1
                    nearer += abs(a - 0.5) < abs(b - 0.5)
        mid, low, high = auroc(labels, cut_p) or (0.5, 0.5, 0.5)
        print(f"  cap {share:.2f} x the testimony: saves {saved:,} of {drawn:,} sample tokens "
              f"({saved / max(1, drawn):.0%}); {moved} claims' reading moved > 0.05 "
              f"({nearer} nearer 0.5); AUROC {mid:.3f} [{low:.3f}-{high:.3f}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--shares", default="1,1.25,1.5,2,2.5,3")
    parser.add_argument("--out", type=Path, default=Path("sample-cap.json"))
    args = parser.parse_args()
    shares = [float(s) for s in args.shares.split(",") if s.strip()]
    asyncio.run(run(args.home, args.out, shares))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
