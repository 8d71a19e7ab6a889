"""The oracle catalog, notes and the case context: files on disk, no model (SPEC §4)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from engine import (
    NoteRefused,
    OracleError,
    Paths,
    Workspace,
)
from engine.context.fit import DoesNotFit
from engine.context.tokens import estimate
from engine.models.notes import LlmEntry
from engine.models.session import InterrogationSession, now
from engine.oracles.catalog import MAX_ORACLE_BYTES, OracleCatalog, parse_oracle
from engine.oracles.context import CaseContext, plan
from engine.oracles.notes import read_note_file, subtitles_to_text
from engine.paths import resource_dir
from engine.storage.sessions import SessionStore
from tests.support.cases import VTT
from tests.support.factory import sample_session, stored_session

SHIPPED = resource_dir("prompts") / "oracles"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def catalog(*dirs: Path, ttl: float = 10.0, clock: Clock | None = None,
            placeholder: str = "{{CONTEXT}}") -> OracleCatalog:
    return OracleCatalog([(d, f"dir{i}") for i, d in enumerate(dirs)], placeholder, ttl,
                         clock or Clock())


def test_the_shipped_oracles_are_valid_and_named_by_their_title() -> None:
    oracles = {o.slug: o for o in OracleCatalog([(SHIPPED, "shipped")]).list()}
    assert {"sceptic", "visionary", "optimist"} <= set(oracles)
    for oracle in oracles.values():
        assert oracle.valid, oracle.problem
        assert oracle.mode == "placeholder" and oracle.description and not oracle.warnings
        expected = hashlib.sha256(str(oracle.path.absolute()).encode()).hexdigest()[:8]
        assert oracle.id == expected
    assert oracles["sceptic"].name == "Sceptic"


def test_a_user_file_overrides_a_shipped_one_of_the_same_name(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "sceptic.md").write_text("# My sceptic\n\nDoubt {{CONTEXT}}\n")
    (user / "mine.md").write_text("no title here\n")
    oracles = OracleCatalog([(SHIPPED, "shipped"), (user, "user")]).list()
    sceptics = [o for o in oracles if o.slug == "sceptic"]
    assert len(sceptics) == 1 and sceptics[0].source == "user"
    assert sceptics[0].name == "My sceptic" and sceptics[0].path == user / "sceptic.md"
    mine = next(o for o in oracles if o.slug == "mine")
    assert mine.name == "mine" and mine.mode == "append"


def test_oracles_dir_replaces_the_shipped_directory(home: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    own = home / "own"
    own.mkdir()
    (own / "judge.md").write_text("# Judge\n\n{{CONTEXT}}\n")
    monkeypatch.setenv("ORACLES_DIR", str(own))
    oracles = Workspace(Paths.from_env()).cases.oracles()
    assert [(o.name, o.source) for o in oracles] == [("Judge", "ORACLES_DIR")]


def test_the_list_is_read_again_only_after_the_ttl(tmp_path: Path) -> None:
    clock = Clock()
    cat = catalog(tmp_path, ttl=10, clock=clock)
    (tmp_path / "a.md").write_text("# Alpha\n\ntext\n")
    first = cat.list()
    assert [o.name for o in first] == ["Alpha"]
    (tmp_path / "a.md").write_text("# Alpha two\n\nmore text\n")
    (tmp_path / "b.md").write_text("# Beta\n\ntext\n")
    clock.now += 9.9
    assert cat.list() is first  # within the TTL: the same list, nothing read
    clock.now += 0.2
    assert [o.name for o in cat.list()] == ["Alpha two", "Beta"]
    kept = {o.path: o for o in cat.list()}
    clock.now += 11
    again = {o.path: o for o in cat.list()}
    assert all(again[p] is kept[p] for p in kept)  # unchanged files are not parsed again
    (tmp_path / "b.md").unlink()
    cat.refresh()
    assert [o.name for o in cat.list()] == ["Alpha two"]


BAD = {
    "empty.md": (b"", "empty file"),
    "blank.md": (b"  \n\n", "empty file"),
    "only-front.md": (b'+++\ndescription = "x"\n+++\n\n', "no prompt text after the front"),
    "latin1.md": ("# Céptico\n".encode("latin-1"), "not UTF-8 text"),
    "binary.md": (b"# x\x00\x01\x02", "binary"),
    "huge.md": (b"# Huge\n" + b"a" * MAX_ORACLE_BYTES, "over 256 KB"),
    "bad-toml.md": (b"+++\nprovider = \n+++\n# T\ntext\n", "front matter is not valid TOML"),
    "unclosed.md": (b"+++\nprovider = 'x'\n# T\ntext\n", "no closing +++"),
    "bad-temp.md": (b"+++\ntemperature = 'hot'\n+++\n# T\ntext\n", "temperature"),
    "bad-tokens.md": (b"+++\nmax_tokens = 0\n+++\n# T\ntext\n", "max_tokens"),
    "bad-provider.md": (b"+++\nprovider = [1]\n+++\n# T\ntext\n", "provider"),
}


def test_every_kind_of_bad_file_is_listed_invalid_and_the_others_still_work(
    tmp_path: Path,
) -> None:
    for name, (data, _) in BAD.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "good.md").write_text(
        '+++\nprovider = ["a", "b"]\ntemperature = 0.3\nmax_tokens = 50\ncolour = "red"\n'
        'description = "Fine"\n+++\n# Good\n\nLook at {{CONTEXT}} and {{OTHER}}.\n')
    (tmp_path / "notes.txt").write_text("not markdown: not an oracle")
    (tmp_path / "dir.md").mkdir()
    oracles = {o.path.name: o for o in catalog(tmp_path).list()}
    assert set(oracles) == {*BAD, "good.md"}
    for name, (_, reason) in BAD.items():
        assert not oracles[name].valid and reason in (oracles[name].problem or ""), name
    good = oracles["good.md"]
    assert good.valid and good.provider == ("a", "b") and good.temperature == 0.3
    assert good.max_tokens == 50 and good.description == "Fine"
    assert any("'colour'" in w for w in good.warnings)
    assert any("{{OTHER}}" in w for w in good.warnings)
    with pytest.raises(OracleError, match="invalid: empty file"):
        catalog(tmp_path).find("empty")
    assert catalog(tmp_path).find("good").name == "Good"


def test_an_unreadable_file_is_invalid_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "x.md"
    folder.mkdir()
    assert "unreadable" in (parse_oracle(folder, "user", "{{CONTEXT}}").problem or "")
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.md"
        locked.write_text("# Locked\n\ntext\n")
        locked.chmod(0)
        oracle = next(o for o in catalog(tmp_path).list() if o.path == locked)
        assert "unreadable (Permission denied)" == oracle.problem


def test_placeholder_and_append_modes_fill_in_one_pass(tmp_path: Path) -> None:
    (tmp_path / "p.md").write_text("# P\n\nBefore\n{{CONTEXT}}\nAfter {{NAME}}\n")
    (tmp_path / "a.md").write_text("# A\n\nJudge this.\n")
    (tmp_path / "c.md").write_text("# C\n\n<<case>> here\n")
    cat = catalog(tmp_path)
    context = "a note that says {{CONTEXT}} and {{NAME}}"
    filled = cat.find("p").render(context)
    assert filled == f"# P\n\nBefore\n{context}\nAfter {{{{NAME}}}}"
    appended = cat.find("a").render(context)
    assert appended == f"# A\n\nJudge this.\n\n{context}"
    custom = catalog(tmp_path, placeholder="<<case>>")
    assert custom.find("c").mode == "placeholder"
    assert custom.find("c").render("X") == "# C\n\nX here"
    assert custom.find("p").mode == "append"


def test_find_by_id_slug_file_name_or_name(tmp_path: Path) -> None:
    (tmp_path / "cetico.md").write_text("# Cético Radical\n\n{{CONTEXT}}\n")
    (tmp_path / "other.md").write_text("# Other\n\n{{CONTEXT}}\n")
    cat = catalog(tmp_path)
    oracle = cat.find("cetico")
    assert cat.find(oracle.id).path == oracle.path
    assert cat.find("cetico.md").path == oracle.path
    assert cat.find("CÉTICO radical").path == oracle.path
    with pytest.raises(OracleError, match=r"no oracle matches 'nobody' \(available: cetico, "):
        cat.find("nobody")


# ---- notes ---------------------------------------------------------------------------------

SRT = "1\n00:00:01,000 --> 00:00:02,000\n<i>Hi</i> there\n\n2\n00:01:03,000 --> 00:01:04,000\n" \
      "{\\an8}Top line\n"


def test_subtitles_become_plain_text_with_short_time_markers() -> None:
    assert subtitles_to_text(VTT, "vtt") == (
        "[0:01] Alice: We raise the price from 10 to 15.\n"
        "[1:02:05] Bob: Most stay & accept it. Second line.\n")
    assert subtitles_to_text(SRT, "srt") == "[0:01] Hi there\n[1:03] Top line\n"
    with pytest.raises(NoteRefused, match="not a valid .vtt file"):
        subtitles_to_text("no header\n", "vtt")
    with pytest.raises(NoteRefused, match="no subtitles in it"):
        subtitles_to_text("WEBVTT\n\n", "vtt")


def test_files_that_cannot_be_notes_are_refused_clearly(tmp_path: Path) -> None:
    cases = {
        "a.pdf": (b"%PDF-1.4", ".pdf files cannot be notes; import .txt, .md, .srt or .vtt"),
        "README": (b"text", "files without an extension cannot be notes"),
        "latin.txt": ("café".encode("latin-1"), "not UTF-8 text (byte 3)"),
        "empty.md": (b"\n \n", "empty"),
        "bin.txt": (b"a\x00b", "a binary file"),
    }
    for name, (data, _) in cases.items():
        (tmp_path / name).write_bytes(data)
    for name, (_, message) in cases.items():
        with pytest.raises(NoteRefused, match=message.replace("(", r"\(").replace(")", r"\)")
                           .replace(".", r"\.")):
            read_note_file(tmp_path / name)
    with pytest.raises(NoteRefused, match="no such file"):
        read_note_file(tmp_path / "missing.txt")
    (tmp_path / "bom.md").write_bytes("\ufeff# Title\r\nline\r\n".encode())
    assert read_note_file(tmp_path / "bom.md") == ("# Title\nline\n", "md")


def test_notes_are_stored_as_numbered_files_with_their_entries(home: Path,
                                                               tmp_path: Path) -> None:
    workspace = Workspace(Paths.from_env())
    session = workspace.cases.new_case("  Pricing   call ")
    assert session.status == "notes" and session.title == "Pricing call"
    ref = session.short_id
    (tmp_path / "call.vtt").write_text(VTT)
    (tmp_path / "Plan B.md").write_text("# Plan B\n")
    (tmp_path / "x.docx").write_text("no")
    added, refused = workspace.cases.import_notes(
        ref, [tmp_path / "call.vtt", tmp_path / "x.docx", tmp_path / "Plan B.md"])
    assert [e.filename for e in added] == ["001_call.txt", "002_plan-b.md"]
    assert len(refused) == 1 and "x.docx: .docx files cannot be notes" in refused[0]
    typed = workspace.cases.add_note(ref, "Remember the churn numbers", "Churn")
    assert typed.filename == "003_churn.txt" and typed.kind == "typed"
    stored = workspace.store.load(ref)
    assert [(n.sequence, n.kind, n.source) for n in stored.notes] == [
        (1, "imported", "call.vtt"), (2, "imported", "Plan B.md"), (3, "typed", "Churn")]
    texts = workspace.cases.note_texts(ref)
    assert texts[0][1].startswith("[0:01] Alice: We raise")
    assert all(entry.characters == len(text) for entry, text in texts)
    folder = workspace.store.resolve(ref)
    assert sorted(p.name for p in (folder / "transcripts").iterdir()) == [
        "001_call.txt", "002_plan-b.md", "003_churn.txt"]
    with pytest.raises(NoteRefused, match="the note is empty"):
        workspace.cases.add_note(ref, " \n", "Empty")
    listed = workspace.store.list()[0]
    assert listed.status == "notes" and listed.hypothesis == "Pricing call"


def test_a_schema_1_session_still_loads_and_takes_notes(home: Path) -> None:
    workspace = Workspace(Paths.from_env())
    name = stored_session(workspace.store, "Old hypothesis", 2)
    path = workspace.store.root / name / "metadata.json"
    data = json.loads(path.read_text())
    for field in ("notes", "llm_entries", "ui_preferences", "title"):
        data.pop(field, None)
    data["schema_version"] = 1
    path.write_text(json.dumps(data))
    session = workspace.store.load(name)
    assert session.notes == [] and session.ui_preferences.include_llm_history
    workspace.cases.add_note(name, "a later thought", "Thought")
    again = workspace.store.load(name)
    assert again.schema_version == 2 and len(again.notes) == 1
    assert [p.sequence for p in again.qa_pairs] == [1, 2]
    assert "## Notes" in workspace.sessions.export(name, "md") and "a later thought" in \
        workspace.sessions.export(name, "md")


def test_a_note_added_while_an_interrogation_runs_is_not_lost(home: Path) -> None:
    store = SessionStore.of(Paths.at(home))
    journal = store.create("Tea has caffeine", 5)
    try:
        name = journal.directory.name
        workspace = Workspace(Paths.from_env())
        workspace.cases.add_note(name, "from another process", "Other")
        journal.session.current_iteration = 1  # the running side changes its own fields
        journal.save()
        stored = store.load(name)
        assert [n.source for n in stored.notes] == ["Other"]
        assert stored.current_iteration == 1
        workspace.cases.set_include_history(name, False)
        stored = store.load(name)
        assert stored.current_iteration == 1 and stored.notes
        assert not stored.ui_preferences.include_llm_history
    finally:
        journal.close()


def test_new_then_run_begins_the_interrogation_of_the_same_session(home: Path) -> None:
    workspace = Workspace(Paths.from_env())
    session = workspace.cases.new_case("Owls")
    workspace.cases.add_note(session.short_id, "Owls hunt at night.", "Facts")
    run = workspace.sessions.start("Owls hunt at night", 5, session=session.short_id)
    try:
        assert run.session.id == session.id and run.session.status == "running"
        assert len(run.session.notes) == 1 and run.session.title == "Owls"
    finally:
        run.journal.close()
    with pytest.raises(Exception, match="already has an interrogation"):
        workspace.sessions.start("again", 5, session=session.short_id)


# ---- the case context ------------------------------------------------------------------------

def case_for(notes: list[str], rounds: int, answers: list[str],
             answer: str = "an answer") -> CaseContext:
    session: InterrogationSession = sample_session(rounds, hypothesis="Tea has caffeine")
    for pair in session.qa_pairs:
        pair.answer = answer
    from engine.models.notes import ContextSnapshot, NoteEntry

    note_entries = [(NoteEntry(sequence=i + 1, received_at=now(), filename=f"{i + 1:03d}_n.txt",
                               kind="typed", source=f"n{i + 1}", characters=len(t)), t)
                    for i, t in enumerate(notes)]
    shot = ContextSnapshot(transcript_count=0, llm_response_count=0, include_llm_history=True)
    answer_entries = [(LlmEntry(sequence=i + 1, created_at=now(), oracle_name="Sceptic",
                                oracle_id="abcd1234", response_filename=f"{i + 1:03d}_s.txt",
                                context_snapshot=shot), t) for i, t in enumerate(answers)]
    return CaseContext.build(session, note_entries, answer_entries, True)


def test_trimming_drops_earlier_answers_first_and_notes_last() -> None:
    case = case_for(["note " * 300] * 3, 6, ["old answer " * 400] * 3, answer="long " * 200)
    whole = plan(case, 100, 100_000, estimate)
    assert not whole.lines(case) and whole.included(case) == (3, 6, 3)
    full = estimate(whole.render(case)) + 100
    squeezed = plan(case, 100, full - 1500, estimate)
    assert squeezed.included(case)[0:2] == (3, 6) and squeezed.lines(case)
    assert all("earlier answers" in line for line in squeezed.lines(case))
    tight = plan(case, 100, 800, estimate)
    notes, rounds, answers = tight.included(case)
    assert answers == 0 and notes >= 1
    assert any("notes" in line for line in tight.lines(case)) or rounds == 0
    with pytest.raises(DoesNotFit):
        plan(case, 5000, 4000, estimate)


@settings(max_examples=60, deadline=None)
@given(notes=st.lists(st.integers(0, 3000), max_size=6),
       rounds=st.integers(0, 8), answers=st.lists(st.integers(1, 3000), max_size=4),
       limit=st.integers(300, 6000))
def test_a_plan_always_fits_its_limit_or_says_it_cannot(
    notes: list[int], rounds: int, answers: list[int], limit: int
) -> None:
    case = case_for(["word " * (n // 5 + 1) for n in notes], rounds,
                    ["reply " * (a // 6 + 1) for a in answers])
    try:
        chosen = plan(case, 80, limit, estimate)
    except DoesNotFit:
        return
    rendered = chosen.render(case)
    assert estimate(rendered) + 80 <= limit * 1.03 + 20
    n, r, a = chosen.included(case)
    assert rendered.count("### Note ") == n and rendered.count("### Round ") == r


async def test_a_note_whose_file_is_gone_is_left_out_and_said_so(home: Path) -> None:
    workspace = Workspace(Paths.from_env())
    try:
        ref = workspace.cases.new_case("Gone").short_id
        first = workspace.cases.add_note(ref, "will vanish", "First")
        workspace.cases.add_note(ref, "stays", "Second")
        (workspace.store.resolve(ref) / "transcripts" / first.filename).unlink()
        consultation = await workspace.cases.consultation(ref, ["sceptic"])
        await consultation.aclose()
        assert [p.body for p in consultation.case.notes] == ["stays\n"]
        assert consultation.case.dropped == (
            "note 1 left out: its file 001_first.txt cannot be read",)
        assert str(home) not in consultation.case.notes[0].body
    finally:
        await workspace.aclose()
