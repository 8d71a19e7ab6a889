"""The user's prompts: `detektiv prompts`, overrides checked before a run, used by it, and
recorded in its session with their hashes; the hypothesis from a file or stdin."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from engine import Paths
from engine.storage.sessions import SessionStore
from tests.support.app import config_text
from tests.support.cli import detektiv
from tests.support.scripted import ScriptedModel, detective

SHIPPED = (Path(__file__).resolve().parents[2] / "prompts" / "detective_question.md").read_text()
MINE = "You interrogate for me. The claim:\n\n{{HYPOTHESIS}}\n\nOne question at a time.\n"


def _prompts(home: Path, files: dict[str, str | bytes]) -> Path:
    folder = home / "prompts"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        path = folder / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder


def test_prompts_lists_overrides_and_says_why_a_file_is_bad(home: Path) -> None:
    _prompts(home, {"detective_question.md": MINE,
                    "audit.md": "Judge it: {{HYPOTHESIS}} {{TRANSCRIPTS}}",
                    "gap_analysis.md": b"\xff\xfe not text",
                    "witness.md": "   \n",
                    "detectiv_question.md": "typo in the name"})
    result = detektiv("prompts", "--json")
    assert result.returncode == 1  # an override is invalid
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    mine = rows["detective_question"]
    assert mine["source"] == "user" and mine["valid"]
    assert mine["sha256"] == hashlib.sha256(MINE.encode()).hexdigest()
    assert rows["audit"]["problem"].startswith("it lacks {{TRANSCRIPT}}")
    assert rows["gap_analysis"]["problem"] == "it is not UTF-8 text"
    assert rows["witness"]["problem"] == "it is empty"
    assert "no shipped prompt has this name" in rows["detectiv_question"]["problem"]
    assert rows["detective_turn"]["source"] == "shipped" and rows["detective_turn"]["valid"]
    plain = detektiv("prompts").stdout
    assert "INVALID: it lacks {{TRANSCRIPT}}" in plain


def test_an_unknown_placeholder_is_refused_before_a_run_stores_anything(home: Path) -> None:
    (home / "config.toml").write_text("")
    _prompts(home, {"gap_analysis.md": "{{HYPOTHESIS}} {{TRANSCRIPT}} {{HYPOTESIS}}"})
    result = detektiv("run", "The sea is salty", "--witness", "local:gemma-3-270m")
    assert result.returncode == 2
    assert "gap_analysis.md: it has {{HYPOTESIS}}, which nothing fills here" in result.stderr
    assert SessionStore.of(Paths.at(home)).list() == []


def test_a_run_uses_the_override_and_records_every_prompt_hash(home: Path,
                                                                tmp_path: Path) -> None:
    folder = _prompts(home, {"detective_question.md": MINE})
    with ScriptedModel(detective) as sleuth, ScriptedModel(["A: it is."]) as witness:
        (home / "config.toml").write_text(config_text(
            {"det": sleuth.url + "/v1", "wit": witness.url + "/v1"}, ["det"], ["wit"]))
        hypothesis = tmp_path / "claim.txt"
        # one sentence, wrapped (two sentences would be a testimony, taken apart first)
        hypothesis.write_text("The sea is salty,\nespecially the Dead Sea.\n")
        dry = detektiv("run", "--file", str(hypothesis), "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert f"user {folder / 'detective_question.md'} sha256:" in dry.stdout
        assert "You interrogate for me. The claim:\n\nThe sea is salty,\nespecially the Dead " \
            "Sea." in dry.stdout
        hypothesis.write_text("The sea is salty.\nThe Dead Sea is saltier.\n")
        testimony = detektiv("run", "--file", str(hypothesis), "--dry-run")
        assert "A testimony: it states several sentences" in testimony.stdout
        assert "You take a text apart into short claims" in testimony.stdout
        hypothesis.write_text("The sea is salty,\nespecially the Dead Sea.\n")
        assert sleuth.chats == []  # a dry run sends nothing
        result = detektiv("run", "--file", str(hypothesis))
        assert result.returncode == 0, result.stderr
    # the detective's question was written from the override (its own reading came first)
    assert any(chat[0]["content"].startswith("You interrogate for me. The claim:")
               for chat in sleuth.chats)
    (summary,) = SessionStore.of(Paths.at(home)).list()
    session = SessionStore.of(Paths.at(home)).load(summary.dir)
    assert session.hypothesis_text == "The sea is salty,\nespecially the Dead Sea."
    digest = hashlib.sha256(MINE.encode()).hexdigest()
    assert session.prompts["detective_question"] == \
        f"user {folder / 'detective_question.md'} sha256:{digest}"
    shipped = hashlib.sha256(
        (Path(__file__).resolve().parents[2] / "prompts" / "audit.md").read_bytes()).hexdigest()
    assert session.prompts["audit"] == f"shipped sha256:{shipped}"


def test_the_hypothesis_from_stdin_or_a_file_but_not_both(home: Path, tmp_path: Path) -> None:
    both = detektiv("run", "a claim", "--file", str(tmp_path / "x.txt"))
    assert both.returncode == 2 and "one of them" in both.stderr
    missing = detektiv("run", "--file", str(tmp_path / "absent.txt"))
    assert missing.returncode == 2 and "absent.txt: cannot read" in missing.stderr
    piped = detektiv("run", "-", "--dry-run", stdin="Line one\nline two\n")
    assert piped.returncode == 0 and "Line one\nline two" in piped.stdout
    assert SHIPPED.split("{{HYPOTHESIS}}")[0].strip() in piped.stdout
