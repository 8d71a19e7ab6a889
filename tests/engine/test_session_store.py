"""The session store on real files: atomic metadata, the event log, the index, damage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.errors import SessionBusy, SessionCorrupt, SessionNotFound
from engine.models.events import AnswerDelta, PairCompleted, Phase, QuestionDelta
from engine.models.session import (
    GapAnalysis,
    ProvidersUsed,
    QuestionAnswerPair,
)
from engine.paths import Paths
from engine.storage import eventlog
from engine.storage.atomic import TEMP_PREFIX
from engine.storage.eventlog import EventLogWriter, read_events
from engine.storage.sessions import SessionStore
from tests.support.factory import stored_session


def test_metadata_is_replaced_atomically_and_folders_are_named_by_time_and_id(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path)
    journal = store.create("hypothesis", 7)
    name = journal.directory.name
    assert name.endswith("_" + journal.session.short_id)
    assert time.strftime("%Y-%m-%d_%H-", time.localtime()) in name or name[:4].isdigit()
    before = (journal.directory / "metadata.json").stat().st_ino
    journal.session.current_iteration = 0
    journal.save()
    after = (journal.directory / "metadata.json").stat().st_ino
    assert before != after, "metadata.json was rewritten in place instead of replaced"
    assert not [p for p in journal.directory.iterdir() if p.name.startswith(TEMP_PREFIX)]
    journal.close()
    assert store.load(name).iteration_limit == 7


def test_token_deltas_cost_at_most_about_ten_writes_a_second(tmp_path: Path) -> None:
    writer = EventLogWriter(tmp_path / "events.jsonl")
    start = time.monotonic()
    sent = 0
    while time.monotonic() - start < 1.0:  # 1 s of a fast stream, token by token
        writer.append(AnswerDelta(sequence=1, text="tok "))
        sent += 1
        time.sleep(0.001)
    writer.close()
    records = read_events(tmp_path / "events.jsonl")
    assert sent > 200
    assert 1 <= writer.writes <= 12, writer.writes
    assert "".join(r.event.text for r in records if isinstance(r.event, AnswerDelta)) \
        == "tok " * sent


def test_deltas_never_cross_other_events(tmp_path: Path) -> None:
    writer = EventLogWriter(tmp_path / "e.jsonl", clock=lambda: 1000.0)  # time stands still
    writer.append(Phase(phase="question", sequence=1))
    writer.append(QuestionDelta(sequence=1, text="Who"))
    writer.append(QuestionDelta(sequence=1, text="?"))
    writer.append(Phase(phase="answer", sequence=1))
    writer.append(AnswerDelta(sequence=1, text="Me"))
    writer.append(AnswerDelta(sequence=2, text="You"))
    writer.close()
    events = [r.event for r in read_events(tmp_path / "e.jsonl")]
    assert events == [
        Phase(phase="question", sequence=1),
        QuestionDelta(sequence=1, text="Who?"),
        Phase(phase="answer", sequence=1),
        AnswerDelta(sequence=1, text="Me"),
        AnswerDelta(sequence=2, text="You"),
    ]


async def test_pending_deltas_are_flushed_by_a_timer_for_watchers(tmp_path: Path) -> None:
    import asyncio

    writer = EventLogWriter(tmp_path / "e.jsonl")
    writer.append(AnswerDelta(sequence=1, text="a"))  # written at once (first write)
    writer.append(AnswerDelta(sequence=1, text="b"))  # waits for the timer
    assert [r.event.text for r in read_events(tmp_path / "e.jsonl")] == ["a"]  # type: ignore[union-attr]
    await asyncio.sleep(eventlog.FLUSH_INTERVAL * 2)
    assert [r.event.text for r in read_events(tmp_path / "e.jsonl")] == ["a", "b"]  # type: ignore[union-attr]
    writer.close()


def test_a_torn_last_line_is_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    writer = EventLogWriter(path)
    writer.append(Phase(phase="question", sequence=1))
    writer.close()
    with path.open("ab") as handle:
        handle.write(b'{"n":2,"at":1,"type":"pha')  # a kill mid-write
    assert len(read_events(path)) == 1
    writer = EventLogWriter(path, next_n=2)
    writer.append(Phase(phase="answer", sequence=1))
    writer.close()
    assert [r.n for r in read_events(path)] == [1, 2]


def test_listing_comes_from_the_index_and_heals_it(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    names = [stored_session(store, f"h{i}", pairs=i) for i in range(3)]
    rows = store.list()
    assert [r.dir for r in rows] == names[::-1]  # newest first
    assert {r.dir: r.pairs for r in rows} == {names[i]: i for i in range(3)}
    # a completed run that asked nothing is listed as such, the others as completed
    assert {r.dir: r.status for r in rows} == {
        names[0]: "nothing-asked", names[1]: "completed", names[2]: "completed"}
    (tmp_path / "index.jsonl").unlink()  # lost index: rebuilt from metadata
    assert [(r.dir, r.pairs) for r in store.list()] == [(r.dir, r.pairs) for r in rows]
    assert len((tmp_path / "index.jsonl").read_text().splitlines()) == 3
    with (tmp_path / "index.jsonl").open("a") as handle:
        handle.write('{"dir": "torn')  # a writer killed mid-line
    store.index.append(*[])
    stored_session(store, "after the tear")
    assert len(store.list()) == 4


def test_the_index_lives_in_the_cache_and_an_earlier_one_beside_the_sessions_moves_there(
        tmp_path: Path) -> None:
    """`Paths.session_index` is in the cache directory; an index an earlier version wrote in
    `sessions/` is moved there (not rebuilt), and the sessions folder keeps only sessions."""
    paths = Paths(config_file=tmp_path / "config.toml", data_dir=tmp_path / "data",
                  cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs",
                  model_dir=tmp_path / "models")
    root = paths.data_dir / "sessions"
    old = SessionStore(root)  # as earlier versions kept it
    names = [stored_session(old, f"h{i}", pairs=1) for i in range(2)]
    old.list()
    moved = (root / "index.jsonl").read_bytes()
    store = SessionStore.of(paths)
    assert store.index.path == paths.session_index == tmp_path / "cache" / "sessions-index.jsonl"
    assert paths.session_index.read_bytes() == moved  # taken over as it was
    assert sorted(os.listdir(root)) == sorted(names)
    assert sorted(r.dir for r in store.list()) == sorted(names)
    newer = stored_session(store, "after the move")
    assert newer in paths.session_index.read_text()
    assert not (root / "index.jsonl").exists()
    paths.session_index.unlink()  # the cache cleared: rebuilt from the sessions
    assert len(SessionStore.of(paths).list()) == 3 and paths.session_index.exists()


def test_a_session_nobody_runs_lists_as_interrupted_and_its_temp_files_are_swept(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path)
    code = (
        "import os, sys; from pathlib import Path\n"
        "from engine.storage.sessions import SessionStore\n"
        f"j = SessionStore(Path({str(tmp_path)!r})).create('killed', 5)\n"
        "(j.directory / '.detektiv-tmp-abc').write_text('half')\n"
        "print(j.directory.name, flush=True); os.kill(os.getpid(), 9)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    name = out.stdout.strip()
    assert out.returncode == -9 and name
    (row,) = store.list()
    assert (row.dir, row.status) == (name, "interrupted")
    assert not list((tmp_path / name).glob(TEMP_PREFIX + "*"))
    assert store.load(name).status == "running"  # stored as it was; shown as interrupted


def test_a_kill_while_sessions_are_created_leaves_whole_folders_only(tmp_path: Path) -> None:
    """A folder appears with its metadata or not at all: a kill between making the folder and
    writing its metadata.json left one no rerun could take over (an evaluation then failed
    its item on a FileExistsError)."""
    store = SessionStore(tmp_path)
    code = (
        "import sys; from pathlib import Path\n"
        "from engine.storage.sessions import SessionStore\n"
        f"store = SessionStore(Path({str(tmp_path)!r}))\n"
        "store.create('first', 5).close(); print('ready', flush=True)\n"
        "while True: store.create('more', 5).close()\n"
    )
    for kill in range(8):
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                 text=True)
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        time.sleep(0.01 * kill)  # a different moment of the loop each time
        child.kill()
        child.wait()
        child.stdout.close()
        rows = store.list()
        assert rows and not [r for r in rows if r.status == "damaged"], kill
        for name in store.directories():
            assert store.load(name).hypothesis.text in ("first", "more")
    # a folder a kill left half built is swept once it is old enough not to be under way
    old, young = tmp_path / f"{TEMP_PREFIX}old", tmp_path / f"{TEMP_PREFIX}young"
    for folder in (old, young):
        folder.mkdir()
        (folder / "metadata.json").write_text("{")
    os.utime(old, (time.time() - 120, time.time() - 120))
    store.sweep()
    assert not old.exists() and young.exists()


def test_a_running_session_is_locked_to_its_process(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    journal = store.create("busy", 5)
    name = journal.directory.name
    assert store.is_live(name)
    assert store.list()[0].status == "running"
    with pytest.raises(SessionBusy, match="another detektiv process"):
        store.open(name)
    with pytest.raises(SessionBusy):
        store.delete(name)
    journal.close()
    assert not store.is_live(name)
    store.open(name).close()


def test_ids_resolve_by_prefix_folder_or_uuid(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    name = stored_session(store)
    session = store.load(name)
    for ref in (name, str(session.id), str(session.id)[:6], str(session.id).upper()[:12]):
        assert store.resolve(ref).name == name
    with pytest.raises(SessionNotFound, match="no session matches"):
        store.resolve("ffffffff-0000")
    with pytest.raises(SessionNotFound, match="no session id"):
        store.resolve(" ")


def test_a_corrupt_metadata_file_is_named_kept_and_the_others_still_list(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path)
    good, bad = stored_session(store, "good"), stored_session(store, "bad")
    broken = tmp_path / bad / "metadata.json"
    broken.write_text('{"schema_version": 1, "id": ')
    (tmp_path / "index.jsonl").unlink()
    rows = {r.dir: r for r in store.list()}
    assert rows[good].status == "completed"
    assert rows[bad].status == "damaged"
    assert rows[bad].error is not None and str(broken) in rows[bad].error
    assert "not valid JSON" in rows[bad].error
    with pytest.raises(SessionCorrupt, match="metadata.json: not valid JSON"):
        store.load(bad)
    with pytest.raises(SessionCorrupt):
        store.open(bad)
    assert broken.read_text() == '{"schema_version": 1, "id": '  # never overwritten
    data = json.loads((tmp_path / good / "metadata.json").read_text())
    data["iteration_limit"] = 99
    (tmp_path / good / "metadata.json").write_text(json.dumps(data))
    with pytest.raises(SessionCorrupt, match="not a valid session .*iteration_limit"):
        store.load(good)


def test_a_truncated_event_log_is_a_clear_error_for_its_session_only(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    ok, cut = stored_session(store, "ok", 2), stored_session(store, "cut", 2)
    log = tmp_path / cut / "events.jsonl"
    data = log.read_bytes()
    log.write_bytes(data[: len(data) // 2])
    with pytest.raises(SessionCorrupt, match="events.jsonl: truncated: it ends at event"):
        store.events(cut)
    with pytest.raises(SessionCorrupt, match="truncated"):
        store.open(cut)
    assert len(store.events(ok)) == 3
    assert {r.dir for r in store.list()} == {ok, cut}
    lines = (tmp_path / ok / "events.jsonl").read_text().splitlines()
    lines[1] = "garbage"
    (tmp_path / ok / "events.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SessionCorrupt, match="line 2 is not a valid event"):
        store.events(ok)


def test_resume_relogs_a_pair_saved_just_before_a_kill(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    journal = store.create("h", 5)
    pair = QuestionAnswerPair(
        sequence=1, question="q", answer="a",
        gap_analysis=GapAnalysis(completeness_score=1, requires_follow_up=True),
        provider_used=ProvidersUsed(detective="d:m", witness="w:m"),
    )
    journal.session.qa_pairs.append(pair)
    journal.save()  # killed here, before PairCompleted reached the log
    journal.close()
    store.open(journal.directory.name).close()
    logged = [r.event for r in store.events(journal.directory.name)]
    assert logged == [PairCompleted(pair=pair)]


def test_a_running_session_is_its_metadata_and_the_rounds_its_log_completed(
        tmp_path: Path) -> None:
    """The journal's rule: a round is its synced `PairCompleted`, metadata.json is not
    rewritten for it. Killed mid-round 3, the session reads (load, list, resume) with its two
    rounds, the totals the last one carried and the trail before it; round 3's start, cut
    short, is left out, and a resume goes on from round 2."""
    from engine.models.events import TrailAdded
    from engine.models.trail import AuditTrailEntry
    from engine.models.usage import TokenTally
    from tests.support.factory import sample_pair

    store = SessionStore(tmp_path)
    journal = store.create("h", 5, settings={"protocol": "consistency"})
    written = (journal.directory / "metadata.json").stat().st_mtime_ns
    for n in (1, 2):
        entry = AuditTrailEntry(event="timeout", role="detective", reason=f"round {n}")
        journal.session.audit_trail.append(entry)
        journal.record(TrailAdded(entry=entry))
        journal.record(AnswerDelta(sequence=n, text="words"))
        pair = sample_pair(n)
        journal.session.qa_pairs.append(pair)
        journal.record(PairCompleted(pair=pair, tokens=TokenTally(prompt=10 * n, completion=n),
                                     repairs=n))
    journal.record(TrailAdded(entry=AuditTrailEntry(event="timeout", reason="round 3")))
    journal.record(QuestionDelta(sequence=3, text="cut sh"))
    os.close(journal._lock_fd)  # noqa: SLF001 - the process dies: its lock goes, nothing else
    assert (journal.directory / "metadata.json").stat().st_mtime_ns == written  # no rewrite

    session = store.load(journal.directory.name)
    assert [p.sequence for p in session.qa_pairs] == [1, 2] and session.current_iteration == 2
    assert session.tokens.prompt == 20 and session.repairs == 2
    assert [e.reason for e in session.audit_trail] == ["round 1", "round 2"]
    assert session.protocol == "consistency"  # stored when made: nothing else is, until the end
    [row] = store.list()
    assert (row.status, row.pairs) == ("interrupted", 2)
    resumed = store.open(journal.directory.name)
    assert [p.sequence for p in resumed.session.qa_pairs] == [1, 2]
    resumed.save()  # a run that starts again replaces metadata.json: the rounds are in it
    resumed.close()
    again = json.loads((journal.directory / "metadata.json").read_text())
    assert [p["sequence"] for p in again["qa_pairs"]] == [1, 2] and again["repairs"] == 2


def test_the_store_s_version_changes_exactly_when_its_list_would(tmp_path: Path) -> None:
    """What lets the Sessions tab re-read 100,000 sessions only when something changed: a
    session written or made, deleted, or one listed running that lost its process."""
    store = SessionStore(tmp_path / "sessions", tmp_path / "cache" / "index.jsonl")
    kept = stored_session(store, "kept")
    first = store.version()
    assert store.version() == first  # nothing happened
    journal = store.create("running", 5)
    running = [journal.directory.name]
    made = store.version(running)
    assert made[:len(first)] != first
    assert store.version(running) == made
    journal.close()  # its process lets go: the row now reads interrupted
    assert store.version(running) != made
    before = store.version()
    store.delete(kept)
    assert store.version() != before


def test_delete_removes_the_folder_and_the_row(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    keep, gone = stored_session(store, "keep"), stored_session(store, "gone")
    store.delete(gone)
    assert [r.dir for r in store.list()] == [keep]
    assert not (tmp_path / gone).exists()
    assert sorted(os.listdir(tmp_path)) == sorted([keep, "index.jsonl", ".index.lock"])


def test_the_log_batches_any_delta_type(tmp_path: Path) -> None:
    """An event type added later that streams text (an oracle's answer, say) is one class:
    the log merges its consecutive pieces like the question and answer deltas."""
    from typing import Literal

    from engine.models.events import Delta
    from engine.storage.eventlog import EventLogWriter

    class OracleDelta(Delta):
        type: Literal["oracle_delta"] = "oracle_delta"
        oracle: str
        text: str

    now = [0.0]
    log = EventLogWriter(tmp_path / "events.jsonl", clock=lambda: now[0])
    for oracle, text in [("sceptic", "Doubt "), ("sceptic", "it."), ("optimist", "Yes!")]:
        log.append(OracleDelta(oracle=oracle, text=text))  # type: ignore[arg-type]
        now[0] += 0.01
    log.close()
    lines = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [(r["type"], r["oracle"], r["text"]) for r in lines] == [
        ("oracle_delta", "sceptic", "Doubt it."), ("oracle_delta", "optimist", "Yes!")]
    assert list(lines[0])[:3] == ["n", "at", "type"]


def test_the_newest_sessions_come_from_the_index_tail_without_listing_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`newest_sessions` reads the last lines of the index only: with the tail made small, it
    gives the newest sessions as `list` orders them, says they are not all, and leaves out a
    deleted one; on a small store it says it has them all."""
    from engine.storage import index
    from engine.storage.index import SessionSummary, newest_sessions
    from tests.support.factory import stored_session

    def recent(count: int) -> tuple[list[SessionSummary], bool]:
        return newest_sessions(store.index.path, store.root, count)

    store = SessionStore(tmp_path / "s")
    names = [stored_session(store, f"hypothesis {n}") for n in range(12)]
    everything = store.list()
    newest, whole = recent(5)
    assert whole is False and [r.dir for r in newest] == [r.dir for r in everything[:5]]
    monkeypatch.setattr(index, "TAIL_BYTES", 3000)  # a few rows' worth
    store.delete(names[-1])
    tail, whole = recent(50)
    assert whole is False and 0 < len(tail) < 11
    assert names[-1] not in {r.dir for r in tail}
    assert [r.dir for r in tail] == [r.dir for r in store.list()[:len(tail)]]
    monkeypatch.setattr(index, "TAIL_BYTES", 10_000_000)
    assert recent(50) == (store.list(), True)
