"""`detektiv eval ITEMS --compare A,B`: a witness leaderboard as a user runs it — real
processes, scripted models on loopback so the figures are known: one detective, and
witnesses that differ only in how they answer (one stands by everything, one takes
everything back)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Paths
from engine.storage.sessions import SessionStore
from tests.support.cli import detektiv
from tests.support.evals import FALSE, QUESTIONS, TRUE, retracting, sleuth, standing
from tests.support.interrogation import FAST
from tests.support.scripted import ScriptedModel
from tests.support.servers import LlamaServer, local_server


@pytest.fixture
def models(home: Path) -> Iterator[Path]:
    with ScriptedModel(sleuth, pace=0.001) as det, ScriptedModel(standing) as a, \
            ScriptedModel(retracting) as b, ScriptedModel(standing) as c:
        lines = []
        for priority, (name, url) in enumerate(
                {"det": det.url, "wa": a.url, "wb": b.url, "wc": c.url}.items(), start=1):
            lines += [f"[providers.{name}]", 'kind = "openai"', f'model = "{name}-model"',
                      f'base_url = "{url}/v1"', f"priority = {priority}", ""]
        lines += ["[roles]", 'detective = ["det"]', 'witness = ["wa"]', "",
                  "[interrogation]", *(f"{k} = {json.dumps(v)}" for k, v in FAST.items()),
                  # a testimony's samples would repeat it for both witnesses: the rounds alone
                  # tell the one that stands by it from the one that takes it back
                  "testimony_samples = 0"]
        (home / "config.toml").write_text("\n".join(lines) + "\n")
        yield home


def claims_file(tmp_path: Path) -> Path:
    path = tmp_path / "claims.jsonl"
    path.write_text("".join(json.dumps({"claim": c, "label": c in TRUE}) + "\n"
                            for c in [*TRUE, *FALSE]))
    return path


def board(stdout: str) -> dict[str, Any]:
    (found,) = [json.loads(line) for line in stdout.splitlines()
                if line.startswith('{"type": "comparison"')]
    return found


def test_labelled_claims_give_each_witness_its_figures_and_each_pair_a_paired_interval(
        models: Path, tmp_path: Path) -> None:
    claims = claims_file(tmp_path)
    out = tmp_path / "out"
    done = detektiv("eval", str(claims), "--compare", "wa,wb", "--limit", "5", "--json",
                    "-o", str(out), timeout=300)
    assert done.returncode == 0, done.stderr
    found = board(done.stdout)
    rows = {row["witness"]: row for row in found["witnesses"]}
    assert rows["wa"]["figures"]["accuracy"]["value"] == 0.6  # it stood by all: 6 of 10
    assert rows["wb"]["figures"]["accuracy"]["value"] == 0.4  # it took all back: 4 of 10
    assert rows["wa"]["provider"] == "wa:wa-model" and rows["wa"]["items"] == 10
    accuracy, auc = found["pairs"]
    assert (accuracy["a"], accuracy["b"], accuracy["figure"]) == ("wa", "wb", "accuracy")
    assert accuracy["difference"] == pytest.approx(-0.2) and accuracy["items"] == 10
    assert accuracy["low"] <= -0.2 <= accuracy["high"] and accuracy["level"] == 0.95
    assert accuracy["sentence"].startswith("accuracy: ")
    assert auc["difference"] == 0.0 and not auc["shown"]  # neither ranks claims at all
    assert "no difference shown between wa and wb" in auc["sentence"]
    assert not found["holm"]
    report = (out / "report.md").read_text()
    assert "| witness | provider | accuracy |" in report and "![leaderboard.png]" in report
    assert (out / "leaderboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # each witness's items are ordinary sessions, tagged with their witness and run
    store = SessionStore.of(Paths.at(models))
    sessions = [store.load(row.id) for row in store.list()]
    assert sorted(s.witness[0] for s in sessions) == ["wa"] * 10 + ["wb"] * 10
    by_run = {row["witness"]: row["run"] for row in found["witnesses"]}
    assert {s.eval_tag.run for s in sessions if s.witness == ["wb"]} == {by_run["wb"]}

    # a witness added on a rerun is the only one judged; the others' runs keep their ids
    again = detektiv("eval", str(claims), "--compare", "wa,wb,wc", "--limit", "5", "--json",
                     timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("10 to judge, 10 finished earlier") == 2
    three = board(again.stdout)
    assert {row["witness"]: row["run"] for row in three["witnesses"]}.items() >= \
        by_run.items()
    assert len(three["pairs"]) == 6 and three["holm"]
    assert len(store.list()) == 30
    shown = detektiv("evals", found["comparison"][:6])
    assert shown.returncode == 0, shown.stderr
    assert "Holm" in shown.stdout and "wc" in shown.stdout
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:3] == ["witness", "provider", "accuracy"]
    assert lines[1].split()[0] in ("wa", "wc") and lines[3].split()[0] == "wb"  # best first


def test_open_questions_give_the_shares_of_each_witnesss_claims(
        models: Path, tmp_path: Path) -> None:
    questions = tmp_path / "questions.txt"
    questions.write_text("# three open questions\n" + "\n".join(QUESTIONS) + "\n")
    done = detektiv("eval", str(questions), "--compare", "wa,wb", "--limit", "5", "--json",
                    timeout=300)
    assert done.returncode == 0, done.stderr
    found = board(done.stdout)
    assert not found["labelled"]
    rows = {row["witness"]: row for row in found["witnesses"]}
    assert rows["wa"]["claims"] == rows["wb"]["claims"] == 9  # three claims a question
    assert rows["wa"]["figures"]["held"]["value"] == 1.0
    assert rows["wb"]["figures"]["contradicted"]["value"] == 1.0, rows["wb"]
    assert rows["wb"]["figures"]["held"]["value"] == 0.0
    (held,) = found["pairs"]
    assert held["figure"] == "held" and held["difference"] == -1.0 and held["shown"]
    assert held["sentence"].startswith("held: wa is ahead of wb by 1.00")
    text = detektiv("evals", found["comparison"]).stdout
    assert "FActScore's factual precision measured by cross-examination" in text


@pytest.mark.parametrize(("arguments", "said"), [
    (["--compare", "wa"], "--compare needs two witnesses or more"),
    (["--compare", "wa,wa"], "--compare needs two witnesses or more"),
    (["--compare", "wa,wb", "--witness", "wc"], "leave --witness out"),
    (["--compare", "wa,nobody"], "provider 'nobody'"),
])
def test_a_comparison_that_cannot_run_says_why(
        models: Path, tmp_path: Path, arguments: list[str], said: str) -> None:
    done = detektiv("eval", str(claims_file(tmp_path)), *arguments)
    assert done.returncode == 2 and said in done.stderr, done.stderr


def test_open_questions_are_asked_as_they_are(models: Path, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": QUESTIONS[0], "id": "tea"}) + "\n")
    done = detektiv("eval", str(questions), "--mode", "planted")
    assert done.returncode == 2
    assert "open questions are asked of the witness as they are" in done.stderr


def test_with_documents_one_reference_reads_every_witnesss_claims(
        models: Path, tmp_path: Path) -> None:
    """The same two claims of three are in the document: both witnesses get 2/3 supported,
    whatever each said when cross-examined (the reference is the detective holding the
    document, never the witness)."""
    document = "Tea contains caffeine. Tea is made from the leaves of Camellia sinensis."
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": f"q{n}", "question": q,
                                             "document": document}) + "\n"
                                 for n, q in enumerate(QUESTIONS)))
    done = detektiv("eval", str(questions), "--compare", "wa,wb", "--mode", "document",
                    "--limit", "5", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    found = board(done.stdout)
    rows = {row["witness"]: row for row in found["witnesses"]}
    for row in rows.values():
        assert row["figures"]["supported"]["value"] == pytest.approx(2 / 3)
    assert rows["wa"]["figures"]["held"]["value"] != rows["wb"]["figures"]["held"]["value"]
    (supported,) = found["pairs"]
    assert supported["figure"] == "supported" and supported["difference"] == 0.0
    assert not supported["shown"]
    text = detektiv("evals", found["comparison"]).stdout
    assert "read by one reference for every witness" in text


def test_the_two_bundled_models_as_witnesses_on_real_llama_cpp_servers(
        home: Path, llama_server: LlamaServer, tmp_path: Path) -> None:
    """Gemma 3 270M (the suite's server) and SmolLM2-135M (a second real server) answer the
    same four demo claims, a scripted detective judging: whatever they say, the leaderboard
    has both, the paired differences and the plot."""
    with ScriptedModel(sleuth, pace=0.001) as det, \
            local_server(tmp_path / "smol", "--model", "smollm2-135m", "--parallel", "2",
                         "--ctx", "4096") as smol:
        lines = []
        for priority, (name, url) in enumerate(
                {"det": det.url + "/v1", "gemma": llama_server.url, "smol": smol.url}.items(),
                start=1):
            lines += [f"[providers.{name}]", 'kind = "openai"', f'model = "{name}"',
                      f'base_url = "{url}"', f"priority = {priority}",
                      "first_token_timeout = 60", "stall_timeout = 30", ""]
        lines += ["[roles]", 'detective = ["det"]', 'witness = ["gemma"]', "",
                  "[interrogation]", *(f"{k} = {json.dumps(v)}" for k, v in FAST.items()),
                  # a testimony's samples would repeat it for both witnesses: the rounds alone
                  # tell the one that stands by it from the one that takes it back
                  "testimony_samples = 0"]
        (home / "config.toml").write_text("\n".join(lines) + "\n")
        out = tmp_path / "board"
        done = detektiv("eval", "demo", "--n", "4", "--compare", "gemma,smol", "--limit", "5",
                        "--json", "-o", str(out), timeout=600)
    assert done.returncode == 0, done.stderr
    found = board(done.stdout)
    assert [(row["witness"], row["provider"], row["items"]) for row in found["witnesses"]] \
        == [("gemma", "gemma:gemma", 4), ("smol", "smol:smol", 4)]
    assert [(p["a"], p["b"], p["figure"]) for p in found["pairs"]] == [
        ("gemma", "smol", "accuracy"), ("gemma", "smol", "auroc")]
    assert all(p["sentence"] for p in found["pairs"])
    assert (out / "leaderboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| gemma |" in (out / "report.md").read_text()
