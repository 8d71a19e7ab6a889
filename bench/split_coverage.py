"""The split measured against human atomic facts (issue 53): FActScore's labelled biographies
(`bench/data/factscore/sample.jsonl`, 15 of them, 5 a model), each taken apart by detektiv's
split on the model it is given, its claims set against the humans' facts.

    python bench/split_coverage.py --url http://127.0.0.1:PORT/v1 [--show 3] [--sample dev]

`--sample test` (the default) is `bench/data/factscore/sample.jsonl`; `--sample dev` is
`dev.jsonl` beside it: 12 other biographies (4 a model, seed 20261128, none of the test's
topics), what the split's prompt is tuned on.

**The matching rule** (`covers`): a claim covers a fact when every content word of the fact
(stop words left out, `engine.interrogation.claims.content_words`) is in the claim, give or
take an ending ("films" / "film"). Two figures, each with a 95 % bootstrap interval over the
biographies:

- **fact coverage**: the share of the human facts (supported or not supported; irrelevant
  ones left out) that some claim of the split covers;
- **claim coverage**: the share of the split's claims whose every content word is in the
  human facts of that biography (a claim that says nothing a person found in the text is
  one the split made up, or took from an irrelevant sentence).

The split is made as a session makes it: the biography taken apart, then the sentences no
claim stands on taken apart as a text of their own (`testimony.left_out_text`), the claims
of both merged; `--one-pass` measures the first split alone. `--show N` prints N
biographies' facts and claims side by side, to check the rule by hand.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.testimony_data import chat  # noqa: E402
from engine.config.models import InterrogationConfig  # noqa: E402
from engine.interrogation.claims import (  # noqa: E402
    _known,
    content_words,
    left_out,  # noqa: E402
)
from engine.interrogation.testimony import (  # noqa: E402
    SPLIT_PENALTY,
    _claims_of,
    left_out_text,
    split_turns,
)
from engine.prompts import load_prompt  # noqa: E402

SAMPLES = {"test": ROOT / "bench" / "data" / "factscore" / "sample.jsonl",
           "dev": ROOT / "bench" / "data" / "factscore" / "dev.jsonl"}


def covers(claim: str, fact: str) -> bool:
    """Whether `claim` says `fact` (the module docstring's rule)."""
    mine = set(content_words(claim))
    return all(_known(word, mine) for word in set(content_words(fact)))


def grounded(claim: str, facts: list[str]) -> bool:
    """Whether every content word of `claim` is in the human facts."""
    theirs = {w for fact in facts for w in content_words(fact)}
    return all(_known(word, theirs) for word in set(content_words(claim)))


def interval(pairs: list[tuple[int, int]], resamples: int = 2000) -> tuple[float, float, float]:
    """The pooled share (hits / total) over `pairs`, with a 95 % bootstrap interval over them."""
    def share(chosen: list[tuple[int, int]]) -> float:
        total = sum(t for _, t in chosen)
        return sum(h for h, _ in chosen) / total if total else float("nan")
    rng = random.Random(0)
    draws = sorted(share([rng.choice(pairs) for _ in pairs]) for _ in range(resamples))
    return share(pairs), draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    parser.add_argument("--show", type=int, default=0)
    parser.add_argument("--sample", choices=sorted(SAMPLES), default="test")
    parser.add_argument("--one-pass", action="store_true",
                        help="the split alone, not asked again for the sentences it left out")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/detektiv-split-cache.json"),
                        help="splits already made, by prompt (a rerun measures without asking "
                        "again)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in SAMPLES[args.sample].read_text().splitlines()
            if line.strip()]
    cache = json.loads(args.cache.read_text()) if args.cache.is_file() else {}
    rules, examples = split_turns(load_prompt("split_claims"))
    turns = [{"role": "system", "content": rules}]
    for text, claims in examples:
        turns += [{"role": "user", "content": text}, {"role": "assistant", "content": claims}]
    settings = InterrogationConfig()
    # a split is reused only for the prompt that made it
    prompt_key = hashlib.sha256(json.dumps([turns, SPLIT_PENALTY]).encode()).hexdigest()[:12]
    facts_hit: list[tuple[int, int]] = []
    claims_hit: list[tuple[int, int]] = []
    began = time.monotonic()
    for number, row in enumerate(rows):
        key = f"{row['model']}:{row['topic']}:{prompt_key}"
        asked = [*turns, {"role": "user", "content": row["output"]}]
        if key not in cache:
            cache[key] = chat(args.url, args.model, asked, settings.split_max_tokens,
                              SPLIT_PENALTY)
            args.cache.write_text(json.dumps(cache))
        replies = [cache[key]]
        claims, _ = _claims_of(replies, row["output"], row["input"], 1000)
        left = left_out([(c.start, c.end) for c in claims], row["output"]) \
            if claims and not args.one_pass else []
        if left:  # the sentences it left out split again, as a session does
            again = f"{key}:left-fresh"
            if again not in cache:
                cache[again] = chat(args.url, args.model, [
                    *turns, {"role": "user", "content": left_out_text(row["output"], left)}],
                    settings.split_max_tokens, SPLIT_PENALTY)
                args.cache.write_text(json.dumps(cache))
            replies.append(cache[again])
        claims, refused = _claims_of(replies, row["output"], row["input"], 1000)
        texts = [c.text for c in claims]
        facts = [f["text"] for f in row["human_facts"]]
        found = [f for f in facts if any(covers(c, f) for c in texts)]
        kept = [c for c in texts if grounded(c, facts)]
        facts_hit.append((len(found), len(facts)))
        claims_hit.append((len(kept), len(texts)))
        print(f"{row['model']:13} {row['topic'][:28]:28} facts {len(found):3}/{len(facts):<3} "
              f"claims {len(kept):3}/{len(texts):<3} refused {len(refused)}", flush=True)
        if number < args.show:
            for fact in facts:
                print(f"    {'+' if fact in found else '-'} fact: {fact}")
            for claim in texts:
                print(f"    {'+' if claim in kept else '-'} claim: {claim}")
    for name, pairs in (("fact coverage", facts_hit), ("claim coverage", claims_hit)):
        value, low, high = interval(pairs)
        print(f"{name}: {value:.3f} [{low:.3f}–{high:.3f}]")
    print(f"{len(rows)} biographies in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
