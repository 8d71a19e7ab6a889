"""Build the testimony samples of `make bench-real` (issue 53): open questions, the 1.5B's
answers at temperature 0, taken apart by detektiv's own split, written out to be labelled by
hand one claim at a time.

    python bench/testimony_data.py --url http://127.0.0.1:PORT/v1 --split dev

The questions are this file's (`QUESTIONS`, general knowledge, none the reviewers keep). Each
answer is asked as detektiv's witness asks it (its prompt, `testimony_max_tokens`, temperature
0), and split by the detective's prompt and rules (`engine.interrogation.testimony`), so the
claims are the ones a run would examine. The output, `bench/data/testimony-SPLIT.jsonl`, is
in the split-and-labelled format `detektiv eval` reads; every claim's `label` is null until a
person sets it against the reference the row names (`source`). Rows already labelled are kept
as they are: a rerun only adds the questions that are missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.config.models import InterrogationConfig  # noqa: E402
from engine.interrogation.testimony import SPLIT_PENALTY, _claims_of, split_turns  # noqa: E402
from engine.prompts import load_prompt  # noqa: E402

QUESTIONS = {
    "dev": [
        ("Summarize the health benefits of Vitamin B3.", "Wikipedia: Vitamin B3; Niacin"),
        ("Tell me about the planet Mars.", "Wikipedia: Mars"),
        ("Describe the history of the Eiffel Tower.", "Wikipedia: Eiffel Tower"),
        ("Who was Johann Sebastian Bach?", "Wikipedia: Johann Sebastian Bach"),
        ("Explain how photosynthesis works.", "Wikipedia: Photosynthesis"),
        ("Describe the city of Kyoto.", "Wikipedia: Kyoto"),
        ("Tell me about the Amazon River.", "Wikipedia: Amazon River"),
        ("Who was Ada Lovelace?", "Wikipedia: Ada Lovelace"),
        # issue 72: more development claims (the pooling is fitted on at least 100)
        ("Who was Marie Curie?", "Wikipedia: Marie Curie"),
        ("Tell me about the Sahara Desert.", "Wikipedia: Sahara"),
        ("Describe the history of the Panama Canal.", "Wikipedia: Panama Canal"),
        ("Summarize the health benefits of vitamin D.", "Wikipedia: Vitamin D"),
        ("Who was Charles Darwin?", "Wikipedia: Charles Darwin"),
        ("Describe the city of Prague.", "Wikipedia: Prague"),
        ("Tell me about the planet Saturn.", "Wikipedia: Saturn"),
        ("Who was Frida Kahlo?", "Wikipedia: Frida Kahlo"),
        ("Tell me about Lake Baikal.", "Wikipedia: Lake Baikal"),
        ("Who was Louis Pasteur?", "Wikipedia: Louis Pasteur"),
    ],
    "test": [
        ("Tell me about the planet Jupiter.", "Wikipedia: Jupiter"),
        ("Describe the history of the Great Wall of China.", "Wikipedia: Great Wall of China"),
        ("Who was Wolfgang Amadeus Mozart?", "Wikipedia: Wolfgang Amadeus Mozart"),
        ("Describe the city of Lisbon.", "Wikipedia: Lisbon"),
        ("Tell me about the Nile River.", "Wikipedia: Nile"),
        ("Who was Nikola Tesla?", "Wikipedia: Nikola Tesla"),
        ("Summarize the health benefits of vitamin C.", "Wikipedia: Vitamin C"),
        ("Tell me about Mount Everest.", "Wikipedia: Mount Everest"),
        ("Who was Isaac Newton?", "Wikipedia: Isaac Newton"),
        ("Describe the history of the Roman Colosseum.", "Wikipedia: Colosseum"),
        # issue 72: a test sample large enough to tell systems apart (100+ claims)
        ("Who was Alan Turing?", "Wikipedia: Alan Turing"),
        ("Tell me about the planet Venus.", "Wikipedia: Venus"),
        ("Describe the history of the Suez Canal.", "Wikipedia: Suez Canal"),
        ("Summarize the health benefits of magnesium.", "Wikipedia: Magnesium in biology"),
        ("Who was Galileo Galilei?", "Wikipedia: Galileo Galilei"),
        ("Describe the city of Edinburgh.", "Wikipedia: Edinburgh"),
        ("Tell me about the Danube River.", "Wikipedia: Danube"),
        ("Who was Srinivasa Ramanujan?", "Wikipedia: Srinivasa Ramanujan"),
        ("Tell me about the Galapagos Islands.", "Wikipedia: Galápagos Islands"),
        ("Who was Leonardo da Vinci?", "Wikipedia: Leonardo da Vinci"),
        ("Describe the history of the Statue of Liberty.", "Wikipedia: Statue of Liberty"),
        ("Tell me about Mount Kilimanjaro.", "Wikipedia: Mount Kilimanjaro"),
        ("Who was Florence Nightingale?", "Wikipedia: Florence Nightingale"),
        ("Who was Hedy Lamarr?", "Wikipedia: Hedy Lamarr"),
    ],
}


def chat(url: str, model: str, messages: list[dict[str, str]], max_tokens: int,
         penalty: float | None = None) -> str:
    body: dict[str, object] = {"model": model, "messages": messages,
                               "max_tokens": max_tokens, "temperature": 0}
    if penalty is not None:
        body["frequency_penalty"] = penalty
    reply = httpx.post(f"{url.rstrip('/')}/chat/completions", json=body, timeout=900)
    reply.raise_for_status()
    return str(reply.json()["choices"][0]["message"]["content"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the 1.5B's OpenAI-compatible base URL")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    args = parser.parse_args()
    out = ROOT / "bench" / "data" / f"testimony-{args.split}.jsonl"
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()] \
        if out.is_file() else []
    done = {row["question"] for row in rows}
    settings = InterrogationConfig()
    rules, examples = split_turns(load_prompt("split_claims"))
    for number, (question, source) in enumerate(QUESTIONS[args.split], start=1):
        if question in done:
            continue
        answer = chat(args.url, args.model, [
            {"role": "system", "content": load_prompt("witness")},
            {"role": "user", "content": question}], settings.testimony_max_tokens)
        turns = [{"role": "system", "content": rules}]
        for text, claims in examples:
            turns += [{"role": "user", "content": text}, {"role": "assistant", "content": claims}]
        reply = chat(args.url, args.model, [*turns, {"role": "user", "content": answer}],
                     settings.split_max_tokens, SPLIT_PENALTY)
        claims, refused = _claims_of([reply], answer, question, 100)
        rows.append({"id": f"{args.split}{number}", "topic": question.rstrip("."),
                     "question": question, "source": source, "testimony": answer,
                     "claims": [{"claim": c.text, "label": None,
                                 **({"checkable": False} if c.state == "not checkable"
                                    else {})} for c in claims],
                     "refused": refused})
        out.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows),
                       encoding="utf-8")
        print(f"{question}: {len(claims)} claims, {len(refused)} refused", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
