"""Consulting oracles against the real llama.cpp server, through the CLI and the workspace:
one, several at once, include-history counts, kill -9 mid-consultation, the timeout."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from engine import (
    OracleFailed,
    OracleSaved,
    Paths,
    Workspace,
)
from engine.storage.atomic import TEMP_PREFIX
from tests.support.cases import VTT, case_with_call, setup_home
from tests.support.cli import Running, detektiv
from tests.support.faults import FaultProxy
from tests.support.servers import LlamaServer, closed_port


def new_case(home: Path, tmp_path: Path) -> str:
    made = detektiv("new", "Pricing call")
    assert made.returncode == 0, made.stderr
    ref = made.stdout.strip()
    (tmp_path / "call.vtt").write_text(VTT)
    added = detektiv("notes", "add", ref, str(tmp_path / "call.vtt"))
    assert added.returncode == 0 and added.stdout.strip() == "001_call.txt", added.stderr
    return ref




def test_new_with_json_prints_the_session_it_created(home: Path) -> None:
    made = detektiv("new", "Second call", "--json")
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert created["short_id"] == created["id"][:8] and created["title"] == "Second call"
    assert Path(created["dir"]).parent == home / "data" / "sessions"
    stored = json.loads((Path(created["dir"]) / "metadata.json").read_text())
    assert stored["id"] == created["id"] and stored["status"] == "notes"


def metadata(home: Path, ref: str) -> dict[str, object]:
    folder = next((home / "data" / "sessions").glob(f"*_{ref}"))
    data: dict[str, object] = json.loads((folder / "metadata.json").read_text())
    return data


def test_new_notes_add_and_consult_two_oracles_write_two_answers(
    home: Path, tmp_path: Path, llama_server: LlamaServer
) -> None:
    setup_home(home, llama_server.url)
    ref = new_case(home, tmp_path)
    listed = detektiv("notes", ref, "--json")
    notes = json.loads(listed.stdout)
    assert notes[0]["source"] == "call.vtt" and "[1:02:05] Bob: Most stay" in notes[0]["text"]
    dry = detektiv("consult", ref, "sceptic", "--dry-run")
    assert dry.returncode == 0 and "Repeat the notes." in dry.stdout
    assert "notes ~" in dry.stdout and "[0:01] Alice: We raise the price" in dry.stdout
    assert metadata(home, ref)["llm_entries"] == []  # a dry run sends and stores nothing
    done = detektiv("consult", ref, "sceptic", "visionary", timeout=180)
    assert done.returncode == 0, done.stderr
    entries = metadata(home, ref)["llm_entries"]
    assert isinstance(entries, list) and len(entries) == 2
    assert sorted(e["oracle_name"] for e in entries) == ["Sceptic", "Visionary"]
    assert sorted(e["sequence"] for e in entries) == [1, 2]
    folder = next((home / "data" / "sessions").glob(f"*_{ref}"))
    for entry in entries:
        assert entry["response_filename"] == f"{entry['sequence']:03d}_" \
            f"{entry['oracle_name'].lower()}.txt"
        text = (folder / "llm_responses" / entry["response_filename"]).read_text()
        assert text.strip() and text in done.stdout
        shot = entry["context_snapshot"]
        assert shot["transcript_count"] == 1 and shot["llm_response_count"] == 0
        assert shot["include_llm_history"] is True and shot["total_tokens_estimate"] > 50
        assert entry["provider_used"] == "llama:gemma"
    shown = detektiv("show", ref)
    assert "## Oracle answers" in shown.stdout and "Answer 2 · " in shown.stdout
    assert "## Notes" in shown.stdout and "Note 1 · call.vtt" in shown.stdout


async def test_several_oracles_see_one_frozen_snapshot_and_history_counts(
    home: Path, tmp_path: Path, llama_server: LlamaServer
) -> None:
    setup_home(home, llama_server.url)
    workspace = Workspace(Paths.from_env())
    try:
        ref = case_with_call(workspace, tmp_path, "Owls")
        first = await workspace.cases.consultation(ref, ["judge"])
        saved = [e async for e in first.events() if isinstance(e, OracleSaved)]
        assert len(saved) == 1
        # three at once on a 2-slot server: one waits, all see the same one earlier answer
        several = await workspace.cases.consultation(ref, ["sceptic", "visionary", "optimist"])
        events = [e async for e in several.events()]
        stored = [e for e in events if isinstance(e, OracleSaved)]
        assert not [e for e in events if isinstance(e, OracleFailed)]
        assert len(stored) == 3
        assert sorted(e.entry.sequence for e in stored) == [2, 3, 4]
        for event in stored:
            shot = event.entry.context_snapshot
            assert (shot.transcript_count, shot.llm_response_count) == (1, 1)
        off = await workspace.cases.consultation(ref, ["judge"], include_history=False)
        last = [e async for e in off.events() if isinstance(e, OracleSaved)][0]
        shot = last.entry.context_snapshot
        assert shot.include_llm_history is False and shot.llm_response_count == 0
        workspace.cases.set_include_history(ref, False)  # the session's preference is the default
        again = await workspace.cases.consultation(ref, ["judge"])
        assert again.case.include_history is False and again.case.answers == ()
        await again.aclose()
        session = workspace.store.load(ref)
        assert [e.sequence for e in session.llm_entries] == [1, 2, 3, 4, 5]
    finally:
        await workspace.aclose()


async def test_the_timeout_bounds_the_call_and_keeps_a_partial_answer(
    home: Path, tmp_path: Path, llama_server: LlamaServer
) -> None:
    proxy = FaultProxy(llama_server.base)
    await proxy.start()
    try:
        setup_home(home, proxy.url, tokens=200, timeout=3)
        workspace = Workspace(Paths.from_env())
        ref = case_with_call(workspace, tmp_path, "Slow")
        proxy.plan = ["stall:4"]  # four pieces, then silence
        started = time.monotonic()
        consultation = await workspace.cases.consultation(ref, ["judge"])
        events = [e async for e in consultation.events()]
        assert time.monotonic() - started < 8
        saved = [e for e in events if isinstance(e, OracleSaved)]
        assert len(saved) == 1 and saved[0].entry.finish_reason == "timeout"
        assert saved[0].text.strip()
        proxy.plan = ["hold"]  # not a byte: nothing to keep
        consultation = await workspace.cases.consultation(ref, ["judge"])
        events = [e async for e in consultation.events()]
        failed = [e for e in events if isinstance(e, OracleFailed)]
        assert len(failed) == 1 and "no answer within 3 s (LLM_TIMEOUT_SECONDS)" in \
            failed[0].error
        assert len(workspace.store.load(ref).llm_entries) == 1
        await workspace.aclose()
    finally:
        await proxy.stop()


async def test_a_dead_provider_fails_over_within_the_bound(
    home: Path, tmp_path: Path, llama_server: LlamaServer
) -> None:
    setup_home(home, llama_server.url)
    config = home / "config.toml"
    config.write_text(config.read_text().replace(
        'oracle = ["llama"]', 'oracle = ["dead", "llama"]')
        + f'\n[providers.dead]\nkind = "openai"\nmodel = "m"\n'
          f'base_url = "http://127.0.0.1:{closed_port()}/v1"\npriority = 5\n')
    workspace = Workspace(Paths.from_env())
    try:
        ref = case_with_call(workspace, tmp_path, "Failover")
        consultation = await workspace.cases.consultation(ref, ["judge"])
        events = [e async for e in consultation.events()]
        saved = [e for e in events if isinstance(e, OracleSaved)]
        assert len(saved) == 1 and saved[0].entry.provider_used == "llama:gemma"
    finally:
        await workspace.aclose()


async def test_kill_9_mid_consultation_leaves_a_loadable_session_without_a_half_entry(
    home: Path, tmp_path: Path, llama_server: LlamaServer
) -> None:
    proxy = FaultProxy(llama_server.base)
    await proxy.start()
    try:
        setup_home(home, proxy.url, tokens=200)
        ref = new_case(home, tmp_path)
        for fault in ("stall:3", "pass"):
            proxy.plan = [fault]
            running = Running("consult", ref, "sceptic", "--json")
            deadline = time.monotonic() + 60
            while not any('"delta"' in line for line in running.lines):
                assert time.monotonic() < deadline, running.err
                await asyncio.sleep(0.01)  # the proxy runs on this loop
            os.kill(running.process.pid, signal.SIGKILL)
            await asyncio.to_thread(running.finish)
            data = metadata(home, ref)
            assert data["llm_entries"] == [], fault  # no half entry
            folder = next((home / "data" / "sessions").glob(f"*_{ref}"))
            leftovers = [p for p in folder.rglob("*") if p.name.startswith(TEMP_PREFIX)]
            assert all(p.parent.name == "llm_responses" for p in leftovers)
        proxy.plan = []
        done = await asyncio.to_thread(detektiv, "consult", ref, "sceptic", timeout=120)
        assert done.returncode == 0, done.stderr
        entries = metadata(home, ref)["llm_entries"]
        assert isinstance(entries, list) and len(entries) == 1
    finally:
        await proxy.stop()


def test_bad_oracle_and_note_input_gets_one_clear_line(home: Path, tmp_path: Path,
                                                       llama_server: LlamaServer) -> None:
    setup_home(home, llama_server.url)
    (home / "oracles" / "broken.md").write_bytes(b"\xff\xfe not utf-8")
    ref = new_case(home, tmp_path)
    listing = json.loads(detektiv("oracles", "--json").stdout)
    broken = next(o for o in listing if o["slug"] == "broken")
    assert broken["valid"] is False and "not UTF-8" in broken["problem"]
    assert all(o["valid"] for o in listing if o["slug"] != "broken")
    cases = [
        (("consult", ref, "nobody"), 1, "no oracle matches 'nobody'"),
        (("consult", ref, "broken"), 1, "is invalid: not UTF-8 text"),
        (("consult", "ffffffff", "sceptic"), 1, "no session matches 'ffffffff'"),
        (("consult", ref, "a", "b", "c", "d", "e"), 1, "no oracle matches"),
        (("notes", "add", ref, str(tmp_path / "missing.srt")), 1, "no such file"),
        (("new", "  "), 2, "the title is empty"),
        (("resume", ref), 1, "has no interrogation yet; start one with: detektiv run "),
        (("watch", ref), 1, "has no interrogation to watch yet"),
    ]
    (home / "oracles" / "fifth.md").write_text("# Fifth\n\nRepeat the notes.\n")
    cases.append((("consult", ref, "sceptic", "visionary", "optimist", "judge", "fifth"), 1,
                  "5 oracles named; consult at most 4 at once"))
    for args, code, message in cases:
        result = detektiv(*args)
        assert result.returncode == code, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    twice = detektiv("consult", ref, "judge", "Judge", "judge.md", "--dry-run")
    assert twice.returncode == 0 and twice.stdout.count("═══ Judge") == 1  # one oracle, once


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_export_includes_notes_and_consultations(home: Path, tmp_path: Path,
                                                 llama_server: LlamaServer, fmt: str) -> None:
    setup_home(home, llama_server.url)
    ref = new_case(home, tmp_path)
    assert detektiv("consult", ref, "judge", timeout=120).returncode == 0
    exported = detektiv("export", ref, "--format", fmt).stdout
    if fmt == "json":
        data = json.loads(exported)
        assert data["notes"][0]["filename"] == "001_call.txt"
        assert data["llm_entries"][0]["oracle_name"] == "Judge"
    else:
        assert "# Case: Pricing call" in exported and "> [0:01] Alice: We raise" in exported
        assert "### Answer 1 · Judge (llama:gemma" in exported and "shown 1 note" in exported


def test_one_oracle_into_a_pipe_prints_only_the_answer_it_saved(home: Path,
                                                                tmp_path: Path) -> None:
    """A thinking model behind a server without a reasoning parser streams its thinking as
    answer until `</think>`; on a terminal that start streams and is voided, into a pipe only
    the saved answer goes."""
    from tests.support.scripted import OPENED, ScriptedModel

    reply = "<think>Is the price the issue? Probably.</think>\n\nThe notes say: raise it."
    with ScriptedModel(lambda _: reply, reasoning_field=OPENED) as model:
        setup_home(home, model.url + "/v1")
        ref = new_case(home, tmp_path)
        done = detektiv("consult", ref, "sceptic", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "The notes say: raise it."
    folder = next((home / "data" / "sessions").glob(f"*_{ref}"))
    entry = metadata(home, ref)["llm_entries"][0]  # type: ignore[index]
    saved = (folder / "llm_responses" / entry["response_filename"]).read_text()
    assert saved.strip() == "The notes say: raise it."
