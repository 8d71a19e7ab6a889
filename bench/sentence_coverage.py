"""Issue 72, part 4: no sentence that states a checkable fact is left out of the split.

    python bench/sentence_coverage.py --url http://127.0.0.1:PORT/v1 [--split dev]

Each development testimony (`bench/data/testimony-dev.jsonl`) names the sentences that state a
checkable fact (`checkable_sentences`, indexes into `claims.segments` of the testimony,
marked by hand). The testimony is taken apart exactly as a session takes it apart (the
detective's split, the split of the sentences it left out, every sentence still left out
listed, the claims that lean on another sentence made to stand on their own:
`engine.interrogation.testimony`), on the model at URL; a marked sentence *has a claim* when a
checkable claim stands on it (its span overlaps the sentence's). Printed: the share of marked
sentences that have one (the goal: at least 0.95), the sentences that have none, and the
claims the revision rewrote.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import Config, Paths  # noqa: E402
from engine.interrogation import testimony as steps  # noqa: E402
from engine.interrogation.calls import Caller  # noqa: E402
from engine.interrogation.claims import segments  # noqa: E402
from engine.models.session import GapAnalysis, ProvidersUsed, QuestionAnswerPair  # noqa: E402
from engine.models.testimony import Testimony  # noqa: E402
from engine.routing.router import Router  # noqa: E402
from engine.storage.sessions import SessionStore  # noqa: E402


async def split_of(router: Router, store: SessionStore, settings: object, row: dict[str, object]
                   ) -> tuple[list[tuple[int, int, str, str]], list[str]]:
    """The claims (start, end, state, text) of the row's testimony as a session splits it."""
    text = str(row["testimony"])
    journal = store.create(text, 5)
    session = journal.session
    session.testimony = Testimony(source="given")
    session.qa_pairs.append(QuestionAnswerPair(
        sequence=1, question=steps.GIVEN, answer=text,
        gap_analysis=GapAnalysis(gaps=[], completeness_score=0, requires_follow_up=True),
        provider_used=ProvidersUsed(detective="", witness="given"), testimony=True))
    caller = Caller(router, journal, settings)  # type: ignore[arg-type]
    revised: list[str] = []
    revise = steps._revise

    async def recorded(caller: Caller, context: str, sentence: str) -> str | None:
        made = await revise(caller, context, sentence)
        revised.append(f"{sentence} → {made}")
        return made

    steps._revise = recorded  # type: ignore[assignment]
    try:
        await steps._split(caller)
    finally:
        steps._revise = revise  # type: ignore[assignment]
        journal.close()
    assert session.testimony is not None
    claims = session.testimony.claims
    return [(c.start, c.end, c.state, c.text) for c in claims], revised


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the model's OpenAI-compatible base URL")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    parser.add_argument("--split", default="dev")
    args = parser.parse_args()
    source = ROOT / "bench" / "data" / f"testimony-{args.split}.jsonl"
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("checkable_sentences")]
    with tempfile.TemporaryDirectory() as home:
        config = Config.model_validate({
            "providers": {"m": {"kind": "openai", "base_url": args.url, "model": args.model,
                                "priority": 1, "timeout": 360, "stall_timeout": 300}},
            "roles": {"detective": ["m"], "witness": ["m"]},
            "interrogation": {"temperature": 0}})
        paths = Paths.at(Path(home))
        router = Router(config, paths, persist=False)
        store = SessionStore(Path(home) / "sessions")
        marked = covered = 0
        missing: list[str] = []
        rewritten: list[str] = []
        try:
            for row in rows:
                claims, revised = await split_of(router, store, config.interrogation, row)
                rewritten += revised
                parts = segments(str(row["testimony"]))
                for index in row["checkable_sentences"]:
                    part = parts[index]
                    marked += 1
                    if any(start < part.end and part.start < end and state != "not checkable"
                           for start, end, state, _ in claims):
                        covered += 1
                    else:
                        missing.append(f"{row['id']}: {part.text[:120]}")
                print(f"{row['id']}: {len(claims)} claims", flush=True)
        finally:
            await router.aclose()
    print(f"\ncheckable sentences with a claim: {covered}/{marked} = {covered / marked:.3f}")
    for line in missing:
        print(f"  none: {line}")
    print(f"claims the detective was asked to make stand on their own ({len(rewritten)}):")
    for text in rewritten:
        print(f"  {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
