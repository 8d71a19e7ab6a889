"""detektiv as an Inspect AI extension (issue 76), installed as a user installs it (the
`inspect` extra, the `inspect_ai` entry point): a real `inspect eval` of the ready task on a
model the suite's real llama.cpp server serves (the bundled Gemma: plumbing, not wisdom),
scored by `detektiv/examination`; every sample ends with a score, an explanation and a
session that `detektiv export` opens. Inspect runs in processes of its own (its imports
stay out of the suite's), its log read back with `inspect log dump`."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.scripted import Judged, ScriptedModel, detective, is_judgement
from tests.support.servers import LONG_PROMPT, LlamaServer, cli

pytestmark = pytest.mark.heavy

INSPECT = [sys.executable, "-m", "inspect_ai"]
QUESTIONS = [f"Describe the scene: {LONG_PROMPT}", f"Tell the story again: {LONG_PROMPT}"]


def splitting(messages: list[dict[str, Any]]) -> str:
    """The suite's scripted detective (`tests.support.scripted.detective`), which also takes
    a text apart (a claim a sentence, as a small model's split would) and reads every claim
    as likely true."""
    system = messages[0]["content"] if messages else ""
    if system.startswith("You take a text apart"):
        text = messages[-1]["content"]
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) > 3]
        return "\n".join(f"{n}. {s}" for n, s in enumerate(sentences[:4], start=1)) or \
            "1. The text says nothing checkable."
    if is_judgement(messages):
        return Judged(0.9)
    return detective(messages)


@pytest.fixture
def sleuth_splits() -> Iterator[str]:
    with ScriptedModel(splitting, pace=0.01) as server:
        yield server.url + "/v1"


def home_for(root: Path, detective_url: str, witness_url: str) -> Path:
    home = root / "home"
    home.mkdir()
    (home / "config.toml").write_text("\n".join([
        "[providers.sleuth]", 'kind = "openai"', 'model = "sleuth"',
        f'base_url = "{detective_url}"', "priority = 1", "",
        "[providers.llama]", 'kind = "openai"', 'model = "gemma"',
        f'base_url = "{witness_url}"', "priority = 2", "",
        "[roles]", 'detective = ["sleuth"]', 'witness = ["llama"]', "",
        "[interrogation]", "temperature = 0", "testimony_samples = 1", "claim_rounds = 1",
        "answer_max_tokens = 32", "question_max_tokens = 24", "testimony_max_tokens = 64",
        'pooling = "' + str(Path(__file__).parents[1] / "data" / "pooling-equal.json") + '"',
        ""]), encoding="utf-8")
    return home


def inspect_eval(root: Path, home: Path, llama: LlamaServer, *args: str
                 ) -> dict[str, Any]:
    """`inspect eval ARGS` in `root` with detektiv's home; the log it wrote, as JSON."""
    logs = root / "logs"
    env = {**os.environ, "DETEKTIV_HOME": str(home), "LLAMA_BASE_URL": llama.url,
           "LLAMA_API_KEY": "none", "INSPECT_LOG_DIR": str(logs),
           "INSPECT_DISPLAY": "none", "NO_COLOR": "1"}
    done = subprocess.run([*INSPECT, "eval", *args, "--log-dir", str(logs)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log,) = sorted(logs.glob("*.eval"))
    dumped = subprocess.run([*INSPECT, "log", "dump", str(log)], cwd=root, env=env,
                            capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    return json.loads(dumped.stdout)  # type: ignore[no-any-return]


def registered(root: Path) -> str:
    code = ("from inspect_ai._util.registry import registry_lookup as r\n"
            "print(all(r(k, n) is not None for k, n in [('scorer', 'detektiv/examination'), "
            "('task', 'detektiv/hallucinations'), ('metric', 'detektiv/held_share'), "
            "('metric', 'detektiv/contradicted_share')]))")
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=120, check=True).stdout.strip()


def test_the_extension_is_found_by_its_registry_names(tmp_path: Path) -> None:
    assert registered(tmp_path) == "True"


def test_inspect_eval_of_the_task_scores_every_answer_with_an_examination_detektiv_opens(
        tmp_path: Path, llama_server: LlamaServer, sleuth_splits: str) -> None:
    home = home_for(tmp_path, sleuth_splits, llama_server.url)
    questions = tmp_path / "questions.txt"
    questions.write_text("\n".join(QUESTIONS) + "\n", encoding="utf-8")
    log = inspect_eval(tmp_path, home, llama_server, "detektiv/hallucinations",
                       "--model", "openai-api/llama/gemma", "-T", f"data={questions}",
                       "-T", "demonstration=true", "-T", "witness=model",
                       "--temperature", "0", "--max-tokens", "48")
    assert log["status"] == "success"
    samples = log["samples"]
    assert len(samples) == len(QUESTIONS)
    sessions = []
    for sample in samples:
        (score,) = sample["scores"].values()
        metadata = score.get("metadata") or {}
        assert score["explanation"], sample["id"]
        if not sample["output"]["completion"].strip():  # the tiny model may say nothing
            assert score["reason"] == "no_response"
            continue
        assert metadata["session"] and metadata["export"].startswith("detektiv export ")
        assert f"Session {metadata['session'][:8]}" in score["explanation"]
        sessions.append(metadata["session"])
    assert sessions, "the tiny model answered no question"
    for ident in sessions:
        exported = subprocess.run(cli("export", ident, "--format", "json"),
                                  env={**os.environ, "DETEKTIV_HOME": str(home)},
                                  capture_output=True, text=True, timeout=120)
        assert exported.returncode == 0, exported.stderr
        session = json.loads(exported.stdout)
        assert session["id"] == ident
        # its witness was the model Inspect evaluated, lent to detektiv
        asked = [p for p in session["qa_pairs"] if not p.get("testimony")]
        assert all(p["provider_used"]["witness"].startswith("inspect-1:") for p in asked)
    scores = log["results"]["scores"][0]["metrics"]
    assert {"mean", "stderr"} <= set(scores)
    assert any(name.startswith("held_share") for name in scores), sorted(scores)


def test_a_replayed_summary_is_held_by_a_witness_holding_its_document_and_scored_again(
        tmp_path: Path, llama_server: LlamaServer, sleuth_splits: str) -> None:
    home = home_for(tmp_path, sleuth_splits, llama_server.url)
    rows = tmp_path / "summaries.jsonl"
    document = ("The mill by the river Avon was built in 1820. It ground corn for the "
                "village until 1950, when it closed. It is now a museum.")
    rows.write_text(json.dumps({
        "document": document,
        "right_summary": "The mill by the Avon was built in 1820. It closed in 1950.",
        "hallucinated_summary": "The mill by the Avon was built in 1720 by monks. It "
                                "closed in 1990."}) + "\n", encoding="utf-8")
    args = ("detektiv/hallucinations", "--model", "mockllm/model", "-T", f"data={rows}",
            "-T", "replay=true", "-T", "demonstration=true", "-T", "value=holds")
    log = inspect_eval(tmp_path, home, llama_server, *args)
    assert log["status"] == "success"
    samples = {s["id"]: s for s in log["samples"]}
    assert set(samples) == {"row1:right", "row1:hallucinated"}
    first = {}
    for key, sample in samples.items():
        (score,) = sample["scores"].values()
        metadata = score["metadata"]
        assert metadata["mode"] == "document" and metadata["label"] is (key.endswith("right"))
        assert metadata["session"] and score["explanation"]
        first[key] = metadata["session"]
        exported = subprocess.run(cli("export", metadata["session"], "--format", "json"),
                                  env={**os.environ, "DETEKTIV_HOME": str(home)},
                                  capture_output=True, text=True, timeout=120, check=True)
        session = json.loads(exported.stdout)
        held = session["witness_document"]  # the witness held it (its text left out)
        assert held["sha256"] == hashlib.sha256(document.encode()).hexdigest()
        assert session["hypothesis"]["text"] == sample["output"]["completion"].strip()
    assert "verdict_accuracy" in log["results"]["scores"][0]["metrics"]
    # the log scored again by the registered scorer (`inspect score`): the same
    # examinations, read back, not made anew
    (written,) = (tmp_path / "logs").glob("*.eval")
    env = {**os.environ, "DETEKTIV_HOME": str(home), "INSPECT_DISPLAY": "none"}
    rescored = tmp_path / "rescored.eval"
    done = subprocess.run([*INSPECT, "score", str(written), "--scorer", "detektiv/examination",
                           "-S", "demonstration=true", "-S", "value=holds", "--action",
                           "overwrite", "--output-file", str(rescored)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    dumped = subprocess.run([*INSPECT, "log", "dump", str(rescored)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120, check=True)
    for sample in json.loads(dumped.stdout)["samples"]:
        (score,) = sample["scores"].values()
        assert score["metadata"]["session"] == first[sample["id"]]
    # and a new eval of the same samples finds them too
    for old in (tmp_path / "logs").glob("*.eval"):
        old.unlink()
    again = inspect_eval(tmp_path, home, llama_server, *args)
    for sample in again["samples"]:
        (score,) = sample["scores"].values()
        assert score["metadata"]["session"] == first[sample["id"]]


def test_detektiv_unable_to_examine_unscores_each_sample_with_what_to_set(
        tmp_path: Path, llama_server: LlamaServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[providers.box\nkind = 'openai'\n", encoding="utf-8")
    rows = tmp_path / "claims.jsonl"
    rows.write_text("".join(json.dumps({"claim": f"Claim {n} is true.", "label": True,
                                        "question": f"Question {n}?", "answer": f"Answer {n}."})
                            + "\n" for n in range(2)), encoding="utf-8")
    # the task's items are read before detektiv's providers are: a broken config is said by
    # the scorer, for each sample, and the eval goes on to its end
    log = inspect_eval(tmp_path, home, llama_server, "detektiv/hallucinations", "--model",
                       "mockllm/model", "-T", f"data={rows}", "-T", "replay=true")
    assert log["status"] == "success"
    for sample in log["samples"]:
        (score,) = sample["scores"].values()
        assert score["reason"] == "scoring_failed"
        assert score["explanation"].startswith("detektiv cannot examine: ")
        assert "config.toml" in score["explanation"]


TASK_FILE = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample

from detektiv.scorer import examination
from detektiv.task import replayed


@task
def said_nothing():
    answers = {"empty": "", "refused": "I'm sorry, but I can't discuss that.",
               "unknowing": "I don't know.", "endless": "on and on " * 6000}
    return Task(dataset=[Sample(input=f"Question {key}?", id=key,
                                metadata={"answer": answer})
                         for key, answer in answers.items()],
                solver=replayed(), scorer=examination(demonstration=True))
'''


def test_a_task_file_imports_the_scorer_and_an_answer_that_says_nothing_is_unscored(
        tmp_path: Path, llama_server: LlamaServer, sleuth_splits: str) -> None:
    home = home_for(tmp_path, sleuth_splits, llama_server.url)
    (tmp_path / "tasks.py").write_text(TASK_FILE, encoding="utf-8")
    log = inspect_eval(tmp_path, home, llama_server, "tasks.py@said_nothing",
                       "--model", "mockllm/model")
    assert log["status"] == "success"
    reasons, said = {}, {}
    for sample in log["samples"]:
        (score,) = sample["scores"].values()
        assert score["explanation"]
        reasons[sample["id"]], said[sample["id"]] = score["reason"], score["explanation"]
    assert reasons == {"empty": "no_response", "refused": "refusal",
                       "unknowing": "no_response", "endless": "scoring_failed"}
    assert "too long" in said["endless"]  # refused by the engine's one rule, named
