"""Case files for tests: a subtitle file, a session with notes, hostile model text."""

from __future__ import annotations

from pathlib import Path

from engine import (
    Workspace,
)
from engine.models.session import InterrogationSession
from engine.storage.sessions import SessionStore
from tests.support.factory import sample_pair

VTT = """WEBVTT

00:00:01.000 --> 00:00:04.000
<v Alice>We raise the <b>price</b> from 10 to 15.

NOTE not part of the call

01:02:05.500 --> 01:02:08.000 align:start
<v Bob>Most stay &amp; accept it.
Second line.
"""


def case_with_call(workspace: Workspace, tmp_path: Path, title: str) -> str:
    """A new case holding call.vtt (the case the test oracles are known to answer)."""
    ref = workspace.cases.new_case(title).short_id
    (tmp_path / "call.vtt").write_text(VTT)
    added, _ = workspace.cases.import_notes(ref, [tmp_path / "call.vtt"])
    assert len(added) == 1
    return ref


def setup_home(home: Path, base_url: str, tokens: int = 24, timeout: float = 30) -> None:
    (home / "config.toml").write_text(
        f'[providers.llama]\nkind = "openai"\nmodel = "gemma"\nbase_url = "{base_url}"\n'
        f"first_token_timeout = 30\nstall_timeout = 30\n\n"
        f'[roles]\noracle = ["llama"]\n\n[oracles]\ntimeout = {timeout}\n')
    oracles = home / "oracles"
    oracles.mkdir(exist_ok=True)
    for slug, name in (("sceptic", "Sceptic"), ("visionary", "Visionary"),
                       ("optimist", "Optimist"), ("judge", "Judge")):
        (oracles / f"{slug}.md").write_text(TEST_ORACLE.format(name=name, tokens=tokens))


# The bundled model is a tiny base model: what it answers greedily depends on every byte of
# the prompt. These oracles (user files, overriding the shipped ones of the same name) end
# with the case, which it reliably continues; the shipped ones are checked in test_oracles.
TEST_ORACLE = "+++\ntemperature = 0\nmax_tokens = {tokens}\n+++\n# {name}\n\nRepeat the notes.\n"


#: Model text that tries every trick: title, clipboard, hyperlink, clear screen, C1 CSI, markup.
HOSTILE = (
    "plain start \x1b]0;PWNED-TITLE\x07 \x1b]52;c;bWFsaWNpb3Vz\x07 \x1b[2J\x1b[31mred\x1b[0m "
    "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ \x9b31mC1 [@click=app.quit] quit "
    "[/] [link=http://evil.example]x[/link] \\[bold] "
    "bidi \u202eDESREVER\u202c \u2066isolated\u2069 \u200fmark zero\u200bwidth\ufeff\u2060 "
    "tag\U000e0041\U000e007f end"
)


def hostile_session(store: SessionStore) -> InterrogationSession:
    pair = sample_pair(1, question=f"Q? {HOSTILE}", answer=f"A: {HOSTILE}", gaps=[])
    journal = store.create(f"H {HOSTILE}", 5)
    from engine.models.events import Finished, PairCompleted, Started

    journal.record(Started(session_id=str(journal.session.id), hypothesis=journal.session
                           .hypothesis.text, iteration_limit=5))
    journal.session.qa_pairs.append(pair)
    journal.save()
    journal.record(PairCompleted(pair=pair))
    journal.session.status = "cancelled"
    journal.save()
    journal.record(Finished(status="cancelled", reason=HOSTILE))
    journal.close()
    return journal.session
