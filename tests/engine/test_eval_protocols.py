"""The consistency protocol (`--protocol consistency`) beside the cross-examination and the
baselines, on the same items, with scripted models on loopback whose behaviour is known: the
witness says the same thing every time about a true claim and something new each time about
a false one; the detective reads agreement from the answers side by side. The figures are
therefore exact."""

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
from tests.support.evals import claim_of
from tests.support.interrogation import make_config
from tests.support.scripted import ScriptedModel

_ANSWER = re.compile(r"^A(\d+)(?: \((\d+) of (\d+)\))?: (.*)$", re.M)
_ABOUT = re.compile(r"What do you know about (\S+)\?")


def agreement_detective(items: list[EvalItem]) -> Callable[[list[dict[str, Any]]], str]:
    """Asks about the item by its key; its audit says `true` when every round's answers agree,
    `false` when they differ, `undetermined` when it saw one answer a round (cross-exam)."""
    keys = {item.claim: item.key for item in items}

    def reply(messages: list[dict[str, Any]]) -> str:
        system = messages[0]["content"]
        if system.startswith("You are a detective analysing"):
            return json.dumps({"gaps": [], "completeness_score": 95,
                               "requires_follow_up": False})
        if system.startswith("You are a detective auditing"):
            rounds: dict[str, list[str]] = {}
            for number, _, _, text in _ANSWER.findall(system):
                rounds.setdefault(number, []).append(text)
            if all(len(answers) == 1 for answers in rounds.values()):
                verdict, p, deciding = "undetermined", 0.5, []
            elif all(len(set(answers)) == 1 for answers in rounds.values()):
                verdict, p, deciding = "true", 0.1, [1]
            else:
                verdict, p, deciding = "false", 0.9, [1]
            stance = {"true": "agrees", "false": "contradicts"}.get(verdict, "unrelated")
            # one round's answers that disagree are a contradiction of that round with itself
            disagree = [{"questions": [1, 1], "description": "its answers differ"}] \
                if verdict == "false" else []
            return json.dumps({"comparisons": [{"round": 1, "stance": stance}],
                               "contradictions": disagree, "summary": "Compared the answers side "
                               "by side.", "verdict": verdict, "probability_false": p,
                               "deciding_rounds": deciding})
        if system.startswith("You are a detective judging"):
            return json.dumps({"verdict": "undetermined", "probability_false": 0.5})
        return f"What do you know about {keys[claim_of(messages)]}?"

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


async def test_consistency_catches_what_one_answer_a_question_cannot(paths: Paths) -> None:
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
                protocols=["cross-exam", "consistency"], concurrency=2)
            events = [event async for event in run.events()]
            summary = workspace.evals.summary(run.id)
            rows = workspace.evals.sessions(run.id)
            sessions = [workspace.store.load(row.id) for row in rows]
        finally:
            await workspace.aclose()

    systems = summary.systems
    assert set(systems) == {"interrogation", "consistency", "direct", "are-you-sure"}
    assert all(metrics.n == 6 and metrics.failed == 0 for metrics in systems.values()), \
        [e.result.error for e in events if isinstance(e, EvalItemDone) and e.result.error]
    consistency = systems["consistency"].figures
    assert consistency["accuracy"].value == 1.0 and consistency["undetermined"].value == 0.0
    assert consistency["recall"].value == 1.0 and consistency["precision"].value == 1.0
    cross = systems["interrogation"].figures
    assert cross["accuracy"].value == 0.0 and cross["undetermined"].value == 1.0
    assert summary.info is not None and summary.info.protocols == ["cross-exam", "consistency"]

    by_protocol = {s.protocol: [x for x in sessions if x.protocol == s.protocol]
                   for s in sessions}
    assert {len(v) for v in by_protocol.values()} == {6}
    for session in by_protocol["consistency"]:
        assert session.consistency_samples == 3
        audit = session.audit_result
        assert audit is not None
        assert [c.qa_pair_indexes for c in audit.contradictions] == (
            [(0, 0)] if audit.verdict == "false" else [])
        assert all(len(pair.samples) == 2 for pair in session.qa_pairs)
    assert all(pair.samples == [] for session in by_protocol["cross-exam"]
               for pair in session.qa_pairs)
    # the first answer at the configured temperature, the others sampled hotter
    temperatures = [body.get("temperature") for body in witness.bodies]
    assert temperatures.count(1.0) == 2 * sum(len(s.qa_pairs)
                                              for s in by_protocol["consistency"])
    assert 0 in temperatures


async def test_an_unknown_protocol_is_refused_before_anything_runs(paths: Paths) -> None:
    workspace = Workspace(paths, make_config({"x": "http://127.0.0.1:9/v1"}, ["x"], ["x"]))
    try:
        with pytest.raises(ConfigError, match="--protocol: unknown protocol 'sideways'"):
            await workspace.evals.start(EvalRequest("demo", n=2), protocols=["sideways"])
        with pytest.raises(ConfigError, match="unknown protocol 'sideways'"):
            workspace.sessions.start("Owls hunt at night", protocol="sideways")  # type: ignore[arg-type]
    finally:
        await workspace.aclose()
