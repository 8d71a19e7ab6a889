"""`detektiv run / sessions / show / watch / resume / export` as a user runs them: real
processes, the real llama.cpp server, real kills."""

from __future__ import annotations

import json
import random
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Paths
from engine.models.session import InterrogationSession
from engine.storage.atomic import TEMP_PREFIX
from engine.storage.sessions import SessionStore
from tests.support.app import config_text
from tests.support.cli import Running, detektiv
from tests.support.factory import stored_session
from tests.support.interrogation import FAST
from tests.support.scripted import KEEP_ASKING, ScriptedModel, detective, thinking
from tests.support.servers import LlamaServer


def write_config(home: Path, server: LlamaServer, sleuth: str) -> None:
    """The witness is the real llama.cpp server (its words stream for real and are not relied
    on); the detective is scripted (tests/scripted.py), so every run asks three usable
    questions (`min_rounds`: it judges every round decisively) and ends with a verdict
    whatever the tiny model answers."""
    fast = "\n".join(f"{k} = {json.dumps(v)}" for k, v in {**FAST, "min_rounds": 3}.items())
    (home / "config.toml").write_text(
        f'[providers.llama]\nkind = "openai"\nmodel = "gemma"\nbase_url = "{server.url}"\n'
        'first_token_timeout = 30\nstall_timeout = 15\npriority = 1\n\n'
        f'[providers.sleuth]\nkind = "openai"\nmodel = "scripted"\nbase_url = "{sleuth}"\n'
        'priority = 2\n\n'
        '[roles]\ndetective = ["sleuth"]\nwitness = ["llama"]\n\n'
        f"[interrogation]\n{fast}\n"
    )








#: Event types after which the kill test may strike (see `Running.wait_for`).
KILL_AFTER = ["started", "phase", "provider", "question_delta", "answer_delta", "judgement",
              "analysis", "pair", "audit", "trail"]


@pytest.fixture
def configured(home: Path, llama_server: LlamaServer) -> Iterator[SessionStore]:
    with ScriptedModel(detective, pace=0.01) as sleuth:
        write_config(home, llama_server, sleuth.url + "/v1")
        yield SessionStore.of(Paths.at(home))


def test_run_streams_a_transcript_and_every_command_reads_the_session(
    configured: SessionStore, tmp_path: Path
) -> None:
    done = detektiv("run", "Vitamin B3 lowers cholesterol", "--limit", "5")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "── Round 1" in out and "[Question · sleuth:scripted] " in out \
        and "[Answer · llama:gemma] " in out
    # the rounds that bore on it (an answer of the tiny witness that denies the claim is no
    # support, whatever the scripted judgement says), pooled with the detective's own reading
    assert re.search(r"  verdict: true · p\(false\) 0\.05 · computed from rounds? 1\b", out)
    assert "judgement: supports · p(true) 0.95 (log-probabilities)" in out
    assert "completeness " in out and "── Audit" in out and "consistency " in out
    (row,) = configured.list()
    session = configured.load(row.dir)
    assert out.rstrip().endswith(
        f"Session {session.short_id} {session.status}: a decisive judgement settled it after 3 "
        "rounds")
    assert session.status in ("completed", "limit-reached") and session.audit_result

    assert len(session.qa_pairs) == 3  # min_rounds, then a decisive judgement closes it
    listing = json.loads(detektiv("sessions", "--json").stdout)
    assert [(r["id"], r["status"], r["score"], r["hypothesis"], r["verdict"],
             r["probability_false"]) for r in listing] == [
        (str(session.id), session.status, session.audit_result.consistency_score,
         "Vitamin B3 lowers cholesterol", "true", 0.05)]
    table = detektiv("sessions").stdout
    assert str(session.id)[:8] in table and "Vitamin B3" in table
    assert "VERDICT" in table and "true (p 0.05)" in table

    shown = detektiv("show", str(session.id)[:8])
    assert shown.returncode == 0
    markdown = tmp_path / "s.md"
    assert detektiv("export", row.dir, "--format", "md", "-o", str(markdown)).returncode == 0
    text = markdown.read_text()
    for pair in session.qa_pairs:
        for line in (pair.question.strip(), pair.answer.strip()):
            for part in line.splitlines():
                assert part in text and part in shown.stdout
    exported = tmp_path / "s.json"
    assert detektiv("export", str(session.id), "--format", "json", "-o", str(exported)
                    ).returncode == 0
    assert InterrogationSession.model_validate_json(exported.read_text()) == session


def test_watch_from_another_process_sees_the_same_events_in_the_same_order(
    configured: SessionStore,
) -> None:
    run = Running("run", "Tea contains caffeine", "--limit", "5", "--json")
    run.wait_for('"type":"started"')
    session_id = run.records()[0]["session_id"]
    watcher = Running("watch", session_id[:8], "--json")
    assert run.finish() == 0, run.err
    assert watcher.finish() == 0, watcher.err
    assert watcher.lines == run.lines
    assert run.records()[-1]["type"] == "finished"
    numbers = [r["n"] for r in run.records()]
    assert numbers == list(range(1, len(numbers) + 1))


def test_watch_reports_a_run_that_was_killed(configured: SessionStore) -> None:
    run = Running("run", "Cats are mammals", "--limit", "5", "--json")
    run.wait_for('"type":"answer_delta"')
    run.process.send_signal(signal.SIGSTOP)  # held mid-run: on a busy machine a short run
    session_id = run.records()[0]["session_id"]  # could end before the watcher is up
    watcher = Running("watch", session_id, "--json")
    watcher.wait_for('"type":"answer_delta"')
    run.process.send_signal(signal.SIGKILL)
    run.finish()
    assert watcher.finish(timeout=60) == 1
    assert "was interrupted" in watcher.err and f"detektiv resume {session_id[:8]}" in watcher.err
    assert watcher.lines == run.lines[: len(watcher.lines)]
    assert len(watcher.lines) >= len(run.lines) - 1  # all but a line torn by the kill


def test_ctrl_c_and_sigterm_store_the_run_as_cancelled_and_resume_finishes_it(
    configured: SessionStore,
) -> None:
    # asked up to the limit: however slow the machine, the signal lands mid-run
    run = Running("run", f"Salt dissolves in water {KEEP_ASKING}", "--limit", "8")
    run.wait_for("── Round 2")
    stopped = time.monotonic()
    run.process.send_signal(signal.SIGINT)
    code = run.finish(timeout=10)
    assert code == 130, ("".join(run.lines[-12:]), run.err[-2000:])
    assert time.monotonic() - stopped < 3
    assert "watch it from another terminal: detektiv watch " in run.err
    (row,) = configured.list()
    assert row.status == "cancelled"
    terminated = Running("resume", row.id)
    terminated.wait_for("── Round")  # rounds up to the limit of 8 are still to come
    terminated.process.send_signal(signal.SIGTERM)
    assert terminated.finish(timeout=10) == 130
    assert "Traceback" not in terminated.err
    stopped_session = configured.load(row.dir)
    assert stopped_session.status == "cancelled"
    resumed = detektiv("resume", row.id)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed after round {len(stopped_session.qa_pairs)} ─" in resumed.stdout
    session = configured.load(row.dir)
    assert session.status == "limit-reached" and len(session.qa_pairs) == 8
    assert [t.event for t in session.audit_trail].count("resumed") == 2
    again = detektiv("resume", row.id)
    assert again.returncode == 1 and "already ended" in again.stderr


def strike(process: Running, rng: random.Random) -> str:
    """Kill -9 at a seeded moment: a random time, or just after a random kind of event.
    Returns which moment it was."""
    if rng.random() < 0.3:  # startup, or early in a round
        moment, delay = "time", rng.uniform(0.2, 3.0)
        while time.monotonic() - process.started < delay and process.process.poll() is None:
            time.sleep(0.005)
    else:
        moment = rng.choice(KILL_AFTER)
        process.wait_for(f'"type":"{moment}"', timeout=120, quiet=True)
        time.sleep(rng.uniform(0, 0.05))
    process.process.send_signal(signal.SIGKILL)
    process.finish()
    return moment


def check_after_kill(store: SessionStore, name: str | None,
                     seen: dict[int, dict[str, Any]]) -> str | None:
    """Every session loads and every log reads; the rounds reported done are stored intact.
    Returns the session's stored status."""
    rows = {r.dir: r for r in store.list()}
    assert not [r for r in rows.values() if r.status == "damaged"], rows
    for directory in rows:
        store.load(directory)
        store.events(directory)
        assert not list((store.root / directory).glob(TEMP_PREFIX + "*"))
    if name is None:
        return None
    session = store.load(name)
    stored = {p.sequence: p.model_dump(mode="json") for p in session.qa_pairs}
    for sequence, pair in seen.items():
        assert stored.get(sequence) == pair, f"round {sequence} changed or vanished"
    assert [p.sequence for p in session.qa_pairs] == list(range(1, len(stored) + 1))
    if session.status == "running":
        assert rows[name].status == "interrupted"
    return session.status


@pytest.mark.heavy
def test_kill_9_at_thirty_seeded_moments_loses_no_completed_round(
    configured: SessionStore,
) -> None:
    rng = random.Random(20261122)
    kills = killed_after_a_round = 0
    moments: set[str] = set()
    lineage = 0
    while kills < 30:
        lineage += 1
        known = {r.dir for r in configured.list()}
        seen: dict[int, dict[str, Any]] = {}  # rounds the killed processes reported stored
        name: str | None = None
        status: str | None = "running"
        while kills < 30 and status == "running" or status in ("failed", "cancelled"):
            process = Running(*(("resume", name, "--json") if name else
                                ("run", f"Hypothesis {lineage}", "--limit", "5", "--json")))
            moment = strike(process, rng)
            kills += 1
            records = process.records()
            if records and records[-1]["type"] != "finished":
                moments.add(moment)
            if any(r["type"] == "pair" for r in records) and records[-1]["type"] != "finished":
                killed_after_a_round += 1
            seen.update({r["pair"]["sequence"]: r["pair"] for r in records if r["type"] == "pair"})
            if name is None:
                new = sorted({r.dir for r in configured.list()} - known)
                name = new[0] if new else None
            status = check_after_kill(configured, name, seen)
            if status is None:
                status = "running"
        if name is None:
            continue
        if status == "running":
            final = detektiv("resume", name)
            assert final.returncode == 0, final.stderr
        session = configured.load(name)
        assert session.status in ("completed", "limit-reached") and session.audit_result
        check_after_kill(configured, name, seen)
    assert kills >= 30
    print(f"{kills} kills in {lineage} sessions; moments {sorted(moments)}; "
          f"{killed_after_a_round} after a round was stored")
    # the kills landed all over a run, some after a round was stored
    assert len(moments) >= 6 and killed_after_a_round >= 1, (moments, killed_after_a_round)


def test_damaged_sessions_give_a_clear_error_and_the_rest_still_list(
    configured: SessionStore,
) -> None:
    for hypothesis in ("One", "Two", "Three"):  # stored sessions; no model needed here
        stored_session(configured, hypothesis, pairs=2)
    rows = configured.list()
    corrupt, truncated, fine = rows[0], rows[1], rows[2]
    metadata = configured.root / corrupt.dir / "metadata.json"
    metadata.write_bytes(metadata.read_bytes()[:40])
    log = configured.root / truncated.dir / "events.jsonl"
    log.write_bytes(log.read_bytes()[:400])
    configured.index.path.unlink()  # so listing has to read every metadata.json

    listing = detektiv("sessions")
    assert listing.returncode == 0
    assert fine.id[:8] in listing.stdout and truncated.id[:8] in listing.stdout
    assert f"session {corrupt.dir} is damaged" in listing.stderr
    assert str(metadata) in listing.stderr and "Traceback" not in listing.stderr

    shown = detektiv("show", corrupt.id[:8])
    assert shown.returncode == 1 and str(metadata) in shown.stderr
    assert "not valid JSON" in shown.stderr and "Traceback" not in shown.stderr
    watched = detektiv("watch", truncated.id[:8])
    assert watched.returncode == 1 and f"{log}: truncated" in watched.stderr
    assert detektiv("show", fine.id[:8]).returncode == 0
    assert metadata.stat().st_size == 40  # kept as it was


def test_bad_input_gets_one_clear_line(configured: SessionStore) -> None:
    for args, code, message in (
        (("run", "   "), 2, "the hypothesis is empty"),
        (("run", "x" * 60_000), 2, "the hypothesis is too long: 60,000 characters"),
        (("run", "x", "--limit", "3"), 2, "between 5 and 20"),
        (("run", "x", "--detective", "nope"), 2, "'nope'"),
        (("show", "abcdef12"), 1, "no session matches"),
        (("export", "abcdef12", "--format", "md"), 1, "no session matches"),
    ):
        done = detektiv(*args)
        assert done.returncode == code, (args, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert configured.list() == []


def test_sessions_json_carries_a_failed_sessions_error_line(home: Path) -> None:
    """A failed session's reason is in `sessions --json` as `show` names it; a row an earlier
    version indexed without it is read again from metadata.json (and healed)."""
    store = SessionStore.of(Paths.at(home))
    name = stored_session(store, "Failed on purpose", 1)
    reason = "the detective model local:smollm2-135m gave no usable question 3 times"

    def fail(session: InterrogationSession, _: Path) -> None:
        session.status, session.error = "failed", reason

    store.update(name, fail)
    listed = json.loads(detektiv("sessions", "--json").stdout)
    assert [(r["status"], r["error"]) for r in listed] == [("failed", reason)]
    assert reason in detektiv("show", name[-8:]).stdout
    assert "damaged" not in detektiv("sessions").stderr
    # an index line of an earlier version: the failed row without its error
    index = Paths.at(home).session_index
    rows = [json.loads(line) for line in index.read_text().splitlines()]
    index.write_text("".join(json.dumps({**row, "error": None}) + "\n" for row in rows))
    listed = json.loads(detektiv("sessions", "--json").stdout)
    assert [(r["status"], r["error"]) for r in listed] == [("failed", reason)]


def test_run_with_the_consistency_protocol_asks_each_question_three_times(
    configured: SessionStore,
) -> None:
    done = detektiv("run", "Tea contains caffeine", "--limit", "5", "--protocol",
                    "consistency")
    assert done.returncode == 0, done.stderr
    (row,) = configured.list()
    session = configured.load(row.dir)
    assert session.protocol == "consistency" and session.qa_pairs
    assert all(len(pair.samples) == 2 for pair in session.qa_pairs)
    assert done.stdout.count("[Answer 2 of 3 · llama:gemma]") == len(session.qa_pairs)
    assert done.stdout.count("[Answer 3 of 3 · llama:gemma]") == len(session.qa_pairs)
    refused = detektiv("run", "Tea contains caffeine", "--protocol", "sideways")
    assert refused.returncode == 2 and "invalid choice: 'sideways'" in refused.stderr


def test_reasoning_shows_only_when_asked(home: Path) -> None:
    """A detective and a witness that think in `<think>` blocks: the transcript on stdout never
    carries the thinking; `--show-reasoning` prints it on stderr; `show --reasoning` and
    `export --reasoning` put it before each reply, plain `show` does not."""
    def witness(messages: list[dict[str, object]]) -> str:
        return "It was built in 1890, of iron."

    with ScriptedModel(thinking(detective)) as det, ScriptedModel(thinking(witness)) as wit:
        (home / "config.toml").write_text(config_text(
            {"det": det.url + "/v1", "wit": wit.url + "/v1"}, ["det"], ["wit"], min_rounds=1))
        quiet = detektiv("run", "The bridge is made of iron.")
        loud = detektiv("run", "--show-reasoning", "The bridge is made of iron.")
    for result in (quiet, loud):
        assert result.returncode == 0, result.stderr
        assert "moon made of cheese" not in result.stdout
    assert "moon made of cheese" not in quiet.stderr
    assert "(Reasoning · detective)" in loud.stderr and "moon made of cheese" in loud.stderr
    assert "\x1b[" not in loud.stderr  # dimmed on a terminal only
    session = json.loads(detektiv("sessions", "--json").stdout)[0]["id"]
    plain = detektiv("show", session).stdout
    full = detektiv("show", "--reasoning", session).stdout
    exported = detektiv("export", "--reasoning", session).stdout
    assert "moon made of cheese" not in plain and "Reasoning ·" not in plain
    assert full == exported
    assert "_Reasoning · detective_" in full and "_Reasoning · witness_" in full
    assert full.index("_Reasoning · detective_") < full.index("It was built in 1890")


def test_run_with_a_witness_document_names_it_and_exports_its_text_only_when_asked(
    configured: SessionStore, tmp_path: Path
) -> None:
    document = tmp_path / "minutes.md"
    document.write_text("# Minutes\n\nThe launch slipped to May.\n", encoding="utf-8")
    done = detektiv("run", "The launch slipped to May.", "--witness-document", str(document))
    assert done.returncode == 0, done.stderr
    (row,) = configured.list()
    held = configured.load(row.dir).witness_document
    assert held is not None and held.name == "minutes.md" and held.size == 38
    plain = json.loads(detektiv("export", row.id[:8], "--format", "json").stdout)
    whole = json.loads(detektiv("export", row.id[:8], "--format", "json",
                                "--with-document").stdout)
    assert plain["witness_document"]["text"] is None
    assert "slipped to May" in whole["witness_document"]["text"]
    assert "Witness document: minutes.md · 38 characters" in detektiv("show", row.id[:8]).stdout
    missing = detektiv("run", "x is y.", "--witness-document", str(tmp_path / "nope.md"))
    assert missing.returncode != 0 and "no such file" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_sessions_limit_shows_the_newest_and_says_how_many_more(home: Path) -> None:
    """`--limit N`: the newest N lines and how many older ones there are; with `--json`, the
    newest N sessions; a limit below one is refused by name."""
    store = SessionStore.of(Paths.at(home))
    for n in range(3):
        stored_session(store, f"Claim number {n}")
    table = detektiv("sessions", "--limit", "2")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert [("Claim number 2" in lines[1]), ("Claim number 1" in lines[2])] == [True, True]
    assert lines[3] == "… and 1 more (older); --limit 3 shows them all" and len(lines) == 4
    listed = json.loads(detektiv("sessions", "--json", "--limit", "1").stdout)
    assert [row["hypothesis"] for row in listed] == ["Claim number 2"]
    refused = detektiv("sessions", "--limit", "0")
    assert refused.returncode != 0 and "--limit must be at least 1" in refused.stderr


def test_the_session_list_keeps_its_columns_in_line_whatever_a_verdict_says(
        home: Path) -> None:
    """A demonstration verdict ("false (p 0.80) · demo") is wider than the others: every
    column after it still starts where its heading does."""
    from tests.support.app import fixed_session

    root = home / "data" / "sessions"
    for n in range(3):
        session = fixed_session(root, n)
        if n == 1:  # its detective was a demonstration model
            folder = next(p for p in root.iterdir() if p.name.endswith(session.short_id))
            session.demonstration = True
            (folder / "metadata.json").write_text(session.model_dump_json())
    done = detektiv("sessions")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert any("· demo" in row for row in rows), rows
    for heading in ("SCORE", "STARTED", "ROUNDS", "HYPOTHESIS OR TITLE"):
        column = header.index(heading)
        for row in rows:  # the cell right-aligned under SCORE/ROUNDS, left under the others
            assert row[column - 1] == " " and row[column + len(heading) - 1] != " " \
                if heading in ("SCORE", "ROUNDS") else row[column] != " " and \
                row[column - 1] == " ", (heading, header, row)
