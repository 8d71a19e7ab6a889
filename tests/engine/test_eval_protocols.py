"""The consistency protocol (`--protocol consistency`) beside the cross-examination and the
baselines, on the same items, with scripted models on loopback whose behaviour is known: the
witness says the same thing every time about a true claim and something new each time about
a false one; the detective judges each answer alone. The figures are therefore exact."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from engine import EvalItemDone, EvalRequest, Paths, Workspace
from engine.errors import ConfigError
from engine.evals.datasets import dataset_path
from engine.evals.items import EvalItem, read_items, sample
from engine.interrogation.subject import subject
from tests.support.evals import claim_of
from tests.support.interrogation import make_config
from tests.support.scripted import Judged, ScriptedModel, is_judgement

_ANSWER = re.compile(r"^A(\d+)(?: \((\d+) of (\d+)\))?: (.*)$", re.M)
_ABOUT = re.compile(r"What do you know about (\S+?)[,?]")


def agreement_detective(items: list[EvalItem]) -> Callable[[list[dict[str, Any]]], str]:
    """Asks about the item by its key; judges an answer that says what everyone knows as
    supporting the claim, and a made-up version by its number: odd ones support it, even ones
    contradict it (a witness making things up says something new each time)."""
    keys = {item.claim: item.key for item in items}
    answers = {item.claim: (item.answer or "").lower() for item in items}

    def reply(messages: list[dict[str, Any]]) -> str:
        system = messages[0]["content"]
        if is_judgement(messages):
            evidence = messages[-1]["content"].split("Claim:")[0]
            version = re.search(r"my version number (\d+)", evidence)
            if version is None:
                return Judged(0.95)
            return Judged(0.95 if int(version.group(1)) % 2 else 0.05)
        if system.startswith("You are a detective analysing"):
            return json.dumps({"gaps": [], "completeness_score": 95,
                               "requires_follow_up": False})
        if system.startswith("You are a detective auditing"):
            return json.dumps({"contradictions": [], "verdict": "undetermined",
                               "summary": "Compared the answers side by side."})
        claim = claim_of(messages)
        named = (subject(claim) or "").lower()  # the claim's subject, unless it is the answer
        if named and not set(named.split()) <= set(answers[claim].split()):
            return f"What do you know about {keys[claim]}, {named}?"
        return f"What do you know about {keys[claim]}?"

    return reply


def steady_when_true(items: list[EvalItem]) -> Callable[[list[dict[str, Any]]], str]:
    """The same answer every time about a true claim, a new one each time about a false one."""
    labels = {item.key: item.label for item in items}
    told: dict[str, int] = {}

    def reply(messages: list[dict[str, Any]]) -> str:
        found = _ABOUT.search(messages[-1]["content"])
        key = found.group(1) if found else "?"
        if labels.get(key, True):
            return f"About {key}: it is as everyone knows."
        told[key] = told.get(key, 0) + 1
        return f"About {key}: my version number {told[key]}."

    return reply


async def test_consistency_never_calls_a_made_up_answer_true(paths: Paths) -> None:
    """One answer a question is fooled by a witness that makes something up; the same
    question asked three times shows its answers disagree, and the round says so (silent,
    the spread named) instead of calling the claim true."""
    items = sample(read_items(dataset_path(paths, "demo")), 6, 3)
    assert {item.label for item in items} == {True, False}
    with ScriptedModel(agreement_detective(items)) as sleuth, \
            ScriptedModel(steady_when_true(items)) as witness:
        config = make_config({"det": sleuth.url + "/v1", "wit": witness.url + "/v1"},
                             ["det"], ["wit"], temperature=0, audit_max_tokens=1024)
        workspace = Workspace(paths, config)
        try:
            run = await workspace.evals.start(
                EvalRequest("demo", n=6, seed=3, mode="open"), baselines=True,
                protocols=["cross-exam", "consistency"], concurrency=1)  # in order: an
            # item's cross-examination hears the witness's first version
            events = [event async for event in run.events()]
            summary = workspace.evals.summary(run.id)
            rows = workspace.evals.sessions(run.id)
            sessions = [workspace.store.load(row.id) for row in rows]
        finally:
            await workspace.aclose()

    systems = summary.systems
    # each signal of the cross-examination's sessions alone, and the pool without each
    assert set(systems) == {"interrogation", "consistency", "are-you-sure", "signal:alone",
                            "signal:rounds", "without:alone", "without:rounds"}
    assert all(metrics.n == 6 and metrics.failed == 0 for metrics in systems.values()), \
        [e.result.error for e in events if isinstance(e, EvalItemDone) and e.result.error]
    truth = {item.claim: item.label for item in items}
    by_protocol = {s.protocol: [x for x in sessions if x.protocol == s.protocol]
                   for s in sessions}
    assert {len(v) for v in by_protocol.values()} == {6}
    for session in by_protocol["cross-exam"]:  # one answer a question: fooled every time
        assert session.audit_result is not None and session.audit_result.verdict == "true"
        assert all(pair.samples == [] for pair in session.qa_pairs)
    for session in by_protocol["consistency"]:
        assert session.consistency_samples == 3
        audit = session.audit_result
        assert audit is not None
        assert all(len(pair.samples) == 2 for pair in session.qa_pairs)
        judgements = [pair.judgement for pair in session.qa_pairs]
        assert all(j is not None and len(j.samples) == 3 for j in judgements)
        if truth[session.hypothesis_text]:
            assert audit.verdict == "true" and len(session.qa_pairs) == 1
        else:  # the made-up versions disagree: every round silent, the spread named
            assert audit.verdict == "undetermined"
            assert all(j is not None and j.bearing == "silent"
                       and j.spread == pytest.approx(0.9) and "disagree" in (j.why or "")
                       for j in judgements)
    consistency = systems["consistency"].figures
    assert consistency["undetermined"].value == 0.5 and consistency["accuracy"].value == 0.5
    cross = systems["interrogation"].figures
    assert cross["accuracy"].value == 0.5 and cross["undetermined"].value == 0.0
    assert summary.info is not None and summary.info.protocols == ["cross-exam", "consistency"]
    # every answer of the consistency protocol drawn at its temperature, each in a fresh
    # conversation with a seed of its own; one answer a question at the configured one
    temperatures = [body.get("temperature") for body in witness.bodies]
    assert temperatures.count(1.0) == 3 * sum(len(s.qa_pairs)
                                              for s in by_protocol["consistency"])
    assert 0 in temperatures
    seeds = [body.get("seed") for body in witness.bodies if body.get("temperature") == 1.0]
    assert None not in seeds and len(set(seeds)) == len(seeds)


async def test_an_unknown_protocol_is_refused_before_anything_runs(paths: Paths) -> None:
    workspace = Workspace(paths, make_config({"x": "http://127.0.0.1:9/v1"}, ["x"], ["x"]))
    try:
        with pytest.raises(ConfigError, match="--protocol: unknown protocol 'sideways'"):
            await workspace.evals.start(EvalRequest("demo", n=2), protocols=["sideways"])
        with pytest.raises(ConfigError, match="unknown protocol 'sideways'"):
            workspace.sessions.start("Owls hunt at night", protocol="sideways")  # type: ignore[arg-type]
    finally:
        await workspace.aclose()
