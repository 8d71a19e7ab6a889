"""Each round judged, the verdict computed (issue 44), on scripted models that speak the real
OpenAI wire on loopback: their judgements are fixed, so the verdict the rule must compute is
known exactly. Also the witness that holds a document, and `eval --mode document`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from engine import EvalRequest, Paths, Workspace
from engine.errors import ConfigError, DatasetError, NoteRefused
from engine.interrogation.transcript import DOCUMENT_CUT
from engine.interrogation.verdict import DECISIVE
from engine.models.events import Finished, JudgementReady
from engine.models.session import InterrogationSession
from engine.report.blocks import session_blocks
from tests.support.interrogation import make_config
from tests.support.scripted import Judged, ScriptedModel, is_judgement, judged_claim

Chat = list[dict[str, Any]]


def sleuth(judgements: Sequence[float], narrative: str = "undetermined",
           summary: str = "The witness answered each question plainly.",
           ) -> Callable[[Chat], str]:
    """A detective whose round n is judged `judgements[n - 1]` (the last one repeats), whose
    analyses are satisfied and whose narrative reads `narrative`, its summary `summary`."""
    judged = 0

    def reply(messages: Chat) -> str:
        nonlocal judged
        system = messages[0]["content"]
        if is_judgement(messages):
            judged += 1
            return Judged(judgements[min(judged, len(judgements)) - 1])
        if system.startswith("You are a detective analysing"):
            return json.dumps({"gaps": [], "completeness_score": 95,
                               "requires_follow_up": False})
        if system.startswith("You are a detective auditing"):
            return json.dumps({"contradictions": [], "verdict": narrative,
                               "summary": summary})
        number = re.search(r"Write question (\d+)", messages[-1]["content"])
        return f"Which detail number {number.group(1) if number else 1} do you recall?"

    return reply


def plain_witness(messages: Chat) -> str:
    return "I recall it was in the north, by the river."


async def interrogate(paths: Paths, judgements: Sequence[float], *, logprobs: bool = True,
                      narrative: str = "undetermined", min_rounds: int = 1,
                      summary: str = "The witness answered each question plainly.",
                      hypothesis: str = "The mill stood in the north of the town.",
                      document: Path | None = None,
                      witness: Callable[[Chat], str] = plain_witness, window: int = 32768,
                      ) -> tuple[InterrogationSession, list[Any], ScriptedModel, ScriptedModel]:
    with ScriptedModel(sleuth(judgements, narrative, summary), logprobs=logprobs) as det, \
            ScriptedModel(witness, window=window) as wit:
        # the rounds' own rule (verdict.py's rules 1–4), read alone: the other signals are
        # pooled with it elsewhere (test_signals.py)
        config = make_config({"det": det.url + "/v1", "wit": wit.url + "/v1"}, ["det"],
                             ["wit"], min_rounds=min_rounds, signals=["rounds"])
        workspace = Workspace(paths, config)
        try:
            run = workspace.sessions.start(hypothesis, 5, document=document)
            events = [event async for event in run.events()]
            session = workspace.store.load(str(run.session.id))
        finally:
            await workspace.aclose()
    return session, events, det, wit


async def test_one_strong_round_decides_and_closes_the_questioning(paths: Paths) -> None:
    session, events, det, _ = await interrogate(paths, [0.97])
    assert session.status == "completed" and len(session.qa_pairs) == 1
    audit = session.audit_result
    assert audit is not None and audit.computed
    assert (audit.verdict, audit.deciding_rounds) == ("true", [1])
    assert audit.probability_false == pytest.approx(0.03, abs=1e-3)
    judgement = session.qa_pairs[0].judgement
    assert judgement is not None and judgement.source == "logprobs"
    assert judgement.bearing == "supports" and judgement.p_true == pytest.approx(0.97)
    # the judgement saw the hypothesis and that one exchange only, and asked for
    # log-probabilities
    asked = [b for b in det.bodies if is_judgement(b["messages"])]
    assert len(asked) == 1 and asked[0]["logprobs"] is True and asked[0]["top_logprobs"] >= 2
    assert judged_claim(asked[0]["messages"]) == session.hypothesis_text
    ready = [e for e in events if isinstance(e, JudgementReady)]
    assert [(e.sequence, e.verdict) for e in ready] == [(1, "true")]


async def test_all_silent_rounds_press_on_to_the_limit_and_stay_undetermined(
        paths: Paths) -> None:
    session, events, _, _ = await interrogate(paths, [0.5])
    assert session.status == "limit-reached" and len(session.qa_pairs) == 5
    audit = session.audit_result
    assert audit is not None and audit.verdict == "undetermined"
    assert audit.probability_false == 0.5 and audit.deciding_rounds == []
    assert "silent" in (audit.undetermined_because or "")
    assert all(p.judgement is not None and p.judgement.bearing == "silent"
               for p in session.qa_pairs)
    final = events[-1]
    assert isinstance(final, Finished) and "silent" in (final.reason or "")


async def test_a_conflict_is_undetermined_and_named(paths: Paths) -> None:
    session, _, _, _ = await interrogate(paths, [0.96, 0.03, 0.5], min_rounds=2)
    audit = session.audit_result
    assert audit is not None and audit.verdict == "undetermined"
    assert "conflict" in (audit.undetermined_because or "")
    assert session.status == "limit-reached"  # a conflict never settles the questioning


async def test_without_log_probabilities_the_stated_probability_is_read(paths: Paths) -> None:
    session, _, det, _ = await interrogate(paths, [0.08], logprobs=False)
    judgement = session.qa_pairs[0].judgement
    assert judgement is not None and judgement.source == "stated"
    assert judgement.p_true == pytest.approx(0.08) and judgement.bearing == "contradicts"
    audit = session.audit_result
    assert audit is not None and audit.verdict == "false" and audit.deciding_rounds == [1]
    # asked for a word with log-probabilities, got none, then asked for a number
    asked = [b for b in det.bodies if is_judgement(b["messages"])]
    assert len(asked) == 2 and asked[0].get("logprobs") and not asked[1].get("logprobs")
    assert "0 to 100" in asked[1]["messages"][-1]["content"]


async def test_the_narrative_cannot_change_the_verdict_and_both_are_shown(
        paths: Paths) -> None:
    session, _, _, _ = await interrogate(paths, [DECISIVE + 0.05], narrative="false")
    audit = session.audit_result
    assert audit is not None and audit.verdict == "true" and audit.narrative_verdict == "false"
    shown = "\n".join(block.text for block in session_blocks(session))
    assert "verdict: true" in shown and "the auditor's own reading: false" in shown
    assert "judgement: supports · p(true) 0.95 (log-probabilities)" in shown


async def test_a_summary_that_states_the_opposite_of_the_verdict_is_shown_marked(
        paths: Paths) -> None:
    """The narrative never states the opposite of the computed verdict unmarked: the model's
    sentence is kept, named, and the summary is titled as contradicted by the verdict."""
    said = ("The witness established that the mill stood in the north of the town. "
            "The hypothesis is therefore false.")
    session, _, _, _ = await interrogate(paths, [DECISIVE + 0.05], summary=said)
    audit = session.audit_result
    assert audit is not None and audit.verdict == "true"
    assert audit.narrative_against == "The hypothesis is therefore false."
    blocks = session_blocks(session)
    summary = next(b for b in blocks if b.kind == "summary")
    assert summary.title.startswith("Summary (contradicted by the verdict")
    shown = "\n".join(block.text for block in blocks)
    assert "the summary says \"The hypothesis is therefore false.\" — contradicted by the " \
        "verdict (true)" in shown
    agreeing = "The witness placed the mill in the north; the hypothesis is true."
    session, _, _, _ = await interrogate(paths, [DECISIVE + 0.05], summary=agreeing)
    assert session.audit_result is not None and session.audit_result.narrative_against is None


async def test_an_answer_that_only_says_it_does_not_know_is_silent_without_a_call(
        paths: Paths) -> None:
    session, _, det, _ = await interrogate(paths, [0.02], witness=lambda _: "I don't know.")
    assert all(p.judgement is not None and p.judgement.bearing == "silent"
               and p.judgement.why == "the witness says it does not know"
               for p in session.qa_pairs)
    assert not any(is_judgement(b["messages"]) for b in det.bodies)
    assert session.audit_result is not None
    assert session.audit_result.verdict == "undetermined"


async def test_the_witness_holds_a_document_the_detective_never_sees(
        paths: Paths, tmp_path: Path) -> None:
    secret = "The ledger says the mill stood by the southern gate, near the old ford."
    document = tmp_path / "ledger.md"
    document.write_text(f"# Ledger\n\n{secret}\n", encoding="utf-8")
    session, _, det, wit = await interrogate(paths, [0.05], document=document)
    held = session.witness_document
    assert held is not None and held.name == "ledger.md" and held.size == len(held.text or "")
    assert len(held.sha256) == 64
    system = wit.chats[0][0]["content"]
    assert secret in system and "<document>" in system
    assert not any(secret in json.dumps(body) for body in det.bodies)
    assert not any(e.event == "document_cut" for e in session.audit_trail)
    # exports name it; its text only when asked
    workspace = Workspace(paths)
    try:
        plain = workspace.sessions.export(str(session.id), "json")
        whole = workspace.sessions.export(str(session.id), "json", document=True)
        report = workspace.sessions.export(str(session.id), "md")
    finally:
        await workspace.aclose()
    assert secret not in plain and json.loads(plain)["witness_document"]["text"] is None
    assert json.loads(whole)["witness_document"]["text"].strip().endswith(secret)
    assert "Witness document: ledger.md" in report and secret not in report


async def test_a_document_larger_than_the_window_is_cut_to_fit_and_the_session_says_so(
        paths: Paths, tmp_path: Path) -> None:
    document = tmp_path / "long.txt"
    opening = "FIRST LINE: the mill stood in the north."
    document.write_text(opening + "\n" + "The river ran past the mill. " * 3000,
                        encoding="utf-8")  # about 90,000 characters
    session, _, _, wit = await interrogate(paths, [0.97], document=document, window=2048)
    system = wit.chats[0][0]["content"]
    assert opening in system and DOCUMENT_CUT.strip() in system
    assert len(system) < 2048 * 4
    cut = [e for e in session.audit_trail if e.event == "document_cut"]
    assert len(cut) == 1 and "long.txt" in cut[0].reason
    assert session.status == "completed"


def _rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


async def test_eval_in_document_mode_gives_each_row_its_document(paths: Paths,
                                                                 tmp_path: Path) -> None:
    rows = [{"id": f"c{n}", "claim": f"The mill number {n} stood in the north.",
             "label": n % 2 == 0, "context": f"Mill {n} stood in the "
             f"{'north' if n % 2 == 0 else 'south'}."} for n in range(4)]
    dataset = _rows(tmp_path / "mills.jsonl", rows)

    def judge(messages: Chat) -> str:
        if is_judgement(messages):
            content = messages[-1]["content"]
            return Judged(0.95 if "north" in content.split("Claim:")[0] else 0.05)
        return sleuth([0.5])(messages)

    def reader(messages: Chat) -> str:
        system = messages[0]["content"]
        found = re.search(r"Mill \d+ stood in the (\w+)", system)
        return f"It stood in the {found.group(1)}." if found else "I do not know."

    with ScriptedModel(judge) as det, ScriptedModel(reader) as wit:
        config = make_config({"det": det.url + "/v1", "wit": wit.url + "/v1"}, ["det"],
                             ["wit"])
        workspace = Workspace(paths, config)
        try:
            run = await workspace.evals.start(EvalRequest(dataset=str(dataset),
                                                          mode="document"), baselines=True)
            done = [event async for event in run.events()]
            summary = workspace.evals.summary(run.id)
        finally:
            await workspace.aclose()
    assert done
    for system in ("interrogation", "reader"):
        assert summary.systems[system].figures["accuracy"].value == 1.0
    # the witness had each row's document; the detective never had one in its questions
    assert any("Mill 1 stood in the south" in chat[0]["content"] for chat in wit.chats)
    questions = [b for b in det.bodies if not is_judgement(b["messages"])
                 and "Write question" in json.dumps(b)]
    assert questions and not any("stood in the south" in json.dumps(b) for b in questions)


async def test_a_row_without_a_document_is_refused_by_its_line_before_anything_starts(
        paths: Paths, tmp_path: Path) -> None:
    dataset = _rows(tmp_path / "some.jsonl", [
        {"claim": "A is B.", "label": True, "document": "A is B."},
        {"claim": "C is D.", "label": False}])
    workspace = Workspace(paths, make_config({"x": "http://127.0.0.1:9/v1"}, ["x"], ["x"]))
    try:
        with pytest.raises(DatasetError, match=r"some\.jsonl line 2: no document"):
            await workspace.evals.start(EvalRequest(dataset=str(dataset), mode="document"))
        assert workspace.evals.runs() == []
    finally:
        await workspace.aclose()


async def test_a_cases_notes_are_the_witness_document(paths: Paths) -> None:
    with ScriptedModel(sleuth([0.95])) as det, ScriptedModel(plain_witness) as wit:
        config = make_config({"det": det.url + "/v1", "wit": wit.url + "/v1"}, ["det"],
                             ["wit"])
        workspace = Workspace(paths, config)
        try:
            case = workspace.cases.new_case("The mill")
            workspace.cases.add_note(str(case.id), "The mill stood by the north gate.",
                                     "typed")
            run = workspace.sessions.start("The mill stood in the north.", 5,
                                           session=str(case.id), witness_notes=True)
            _ = [event async for event in run.events()]
            session = workspace.store.load(str(case.id))
        finally:
            await workspace.aclose()
    held = session.witness_document
    assert held is not None and held.name == "the notes of The mill"
    assert "The mill stood by the north gate." in wit.chats[0][0]["content"]
    assert not any("north gate" in json.dumps(body) for body in det.bodies)


async def test_notes_as_the_document_need_a_case(paths: Paths) -> None:
    workspace = Workspace(paths, make_config({"x": "http://127.0.0.1:9/v1"}, ["x"], ["x"]))
    try:
        with pytest.raises(ConfigError, match="only in a case"):
            workspace.sessions.start("A is B.", 5, witness_notes=True)
        with pytest.raises(NoteRefused, match="no such file"):
            workspace.sessions.start("A is B.", 5, document=Path("/nonexistent/ledger.md"))
        assert workspace.store.list() == []  # nothing was stored
    finally:
        await workspace.aclose()


async def test_an_answer_the_loop_names_unusable_is_silent_for_that_reason_without_a_call(
        paths: Paths) -> None:
    from engine.prompts import load_prompt

    echo = load_prompt("witness")  # only its instructions, as a tiny model may answer
    session, _, det, _ = await interrogate(paths, [0.02], witness=lambda _: echo)
    assert all(p.answer_problem == "the answer only repeats its instructions"
               and p.judgement is not None and p.judgement.bearing == "silent"
               and p.judgement.why == p.answer_problem for p in session.qa_pairs)
    assert not any(is_judgement(b["messages"]) for b in det.bodies)
