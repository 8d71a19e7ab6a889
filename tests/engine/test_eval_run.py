"""`workspace.evals`: whole evaluation runs through the engine, with scripted models on
loopback (the real OpenAI wire) so the expected figures are known exactly."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from engine import DatasetError, EvalItemDone, EvalRequest, EvalStarted, Paths, Workspace
from engine.evals.datasets import dataset_path
from engine.evals.items import EvalItem, chosen_items, read_items, sample
from engine.evals.summary import EvalSummary
from tests.support.evals import coin, detective, knows, never, witness
from tests.support.interrogation import make_config
from tests.support.scripted import ScriptedModel
from tests.support.servers import closed_port


def demo(paths: Paths, n: int | None = None, seed: int = 0) -> list[EvalItem]:
    return sample(read_items(dataset_path(paths, "demo")), n, seed)


class Models:
    def __init__(self, sleuth: ScriptedModel, witness: ScriptedModel) -> None:
        self.detective, self.witness = sleuth, witness


@asynccontextmanager
async def workspace_with(paths: Paths, verdict: Callable[[str], tuple[str, float]],
                         detective_url: str | None = None) -> AsyncIterator[tuple[Workspace,
                                                                                   Models]]:
    with ScriptedModel(detective(verdict)) as sleuth, ScriptedModel(witness) as wit:
        config = make_config({"det": detective_url or sleuth.url + "/v1",
                              "wit": wit.url + "/v1"}, ["det"], ["wit"])
        workspace = Workspace(paths, config)
        try:
            yield workspace, Models(sleuth, wit)
        finally:
            await workspace.aclose()


async def evaluate(workspace: Workspace, request: EvalRequest, **options: Any
                   ) -> tuple[EvalSummary, list[Any]]:
    run = await workspace.evals.start(request, **options)
    events = [event async for event in run.events()]
    return workspace.evals.summary(run.id), events


def figure(summary: EvalSummary, name: str, system: str = "interrogation") -> float:
    return summary.systems[system].figures[name].value


async def test_a_detective_that_knows_the_labels_scores_one_in_every_system(
        paths: Paths) -> None:
    items = demo(paths, 8, seed=1)
    async with workspace_with(paths, knows(items)) as (workspace, models):
        summary, events = await evaluate(workspace, EvalRequest("demo", n=8, seed=1),
                                         baselines=True, concurrency=3)
        # the detective alone is the sessions' own reading (`signal:alone`), no unit of its own
        for system in ("interrogation", "signal:alone", "signal:rounds", "are-you-sure"):
            assert summary.systems[system].n == 8
            for name in ("accuracy", "precision", "recall", "f1", "auroc", "auc_pr"):
                assert figure(summary, name, system) == 1.0, (system, name)
            assert figure(summary, "undetermined", system) == 0.0
        done = [e.result for e in events if isinstance(e, EvalItemDone)]
        assert len(done) == 8 * 2 and Counter(r.kind for r in done)["interrogation"] == 8
        # every interrogation is a stored session of the run, tagged, with the claim planted
        rows = workspace.evals.sessions(summary.info.id if summary.info else "")
        assert len(rows) == 8 and all(row.status == "completed" for row in rows)
        session = workspace.store.load(rows[0].id)
        assert session.eval_tag is not None and session.witness_brief is not None
        item = next(i for i in items if i.key == session.eval_tag.item)
        assert session.hypothesis_text == item.claim
        assert session.tokens.total > 0
        # the planted witness saw its question and its own answer before the first question
        first = next(chat for chat in models.witness.chats
                     if len(chat) > 2 and chat[1]["content"] == item.question)
        assert first[2] == {"role": "assistant", "content": item.answer}


async def test_a_coin_tossing_detective_lands_near_a_half(paths: Paths) -> None:
    async with workspace_with(paths, coin(seed=5)) as (workspace, _):
        summary, _ = await evaluate(workspace, EvalRequest("demo"), concurrency=4)
    f1 = summary.systems["interrogation"].figures["f1"]
    auroc = summary.systems["interrogation"].figures["auroc"]
    assert summary.systems["interrogation"].n == 40
    assert f1.low <= 0.5 <= f1.high and 0.25 < f1.value < 0.75
    assert auroc.low <= 0.5 <= auroc.high


async def test_a_detective_that_never_decides_is_reported_as_undetermined(paths: Paths) -> None:
    async with workspace_with(paths, never) as (workspace, _):
        summary, _ = await evaluate(workspace, EvalRequest("demo", n=6), baselines=True)
    for system in ("interrogation", "signal:alone", "are-you-sure"):
        assert figure(summary, "undetermined", system) == 1.0
        assert figure(summary, "accuracy", system) == 0.0
        assert figure(summary, "recall", system) == 0.0
        assert math.isnan(figure(summary, "precision", system))  # no "false" verdict at all
        assert summary.systems[system].failed == 0  # undetermined is a verdict, not a failure


async def test_wrong_on_exactly_k_items_gives_the_expected_precision_and_recall(
        paths: Paths) -> None:
    items = demo(paths, 10, seed=2)
    false_ones = [i.key for i in items if not i.label]
    true_ones = [i.key for i in items if i.label]
    wrong = false_ones[:2] + true_ones[:1]  # two false claims missed, one true one accused
    async with workspace_with(paths, knows(items, wrong)) as (workspace, _):
        summary, _ = await evaluate(workspace, EvalRequest("demo", n=10, seed=2))
    caught = len(false_ones) - 2
    assert figure(summary, "precision") == pytest.approx(caught / (caught + 1))
    assert figure(summary, "recall") == pytest.approx(caught / len(false_ones))
    assert figure(summary, "accuracy") == pytest.approx((10 - 3) / 10)


async def test_three_runs_give_a_majority_that_overrules_one_wrong_run(paths: Paths) -> None:
    items = demo(paths, 6, seed=3)
    right = knows(items)
    asked: Counter[str] = Counter()

    def first_audit_wrong(claim: str) -> tuple[str, float]:
        asked[claim] += 1
        value, p = right(claim)
        if asked[claim] == 1:  # whichever interrogation audits first gets it wrong
            return ("false", 0.95) if value == "true" else ("true", 0.05)
        return value, p

    async with workspace_with(paths, first_audit_wrong) as (workspace, _):
        summary, _ = await evaluate(workspace, EvalRequest("demo", n=6, seed=3), runs=3,
                                    concurrency=1)
    assert summary.systems["majority"].n == 6
    assert figure(summary, "f1", "majority") == 1.0
    # run 1's detective read each claim wrong first: its rounds' denial still decides the
    # false claims (a denial is not outvoted), its true ones stay undetermined
    assert figure(summary, "accuracy", "interrogation") == 0.5
    # each run reads each claim twice: the detective alone, then its round
    assert all(count == 6 for count in asked.values())


async def test_a_rerun_skips_what_is_finished_and_runs_only_what_was_added(
        paths: Paths) -> None:
    items = demo(paths, 4)
    async with workspace_with(paths, knows(items)) as (workspace, models):
        request = EvalRequest("demo", n=4)
        _, first = await evaluate(workspace, request)
        asked = len(models.detective.chats)
        _, again = await evaluate(workspace, request)
        assert isinstance(again[0], EvalStarted) and again[0].skipped == again[0].total == 4
        assert len(models.detective.chats) == asked  # nothing asked twice
        _, more = await evaluate(workspace, request, runs=3)
        assert isinstance(more[0], EvalStarted) and (more[0].skipped, more[0].total) == (4, 12)
        assert len([e for e in more if isinstance(e, EvalItemDone)]) == 8
        assert len(workspace.evals.runs()) == 1  # the same run, grown


async def test_result_lines_lost_after_their_sessions_ended_are_made_again_from_them(
        paths: Paths) -> None:
    """An interrogation's result line is written, not fsynced: its session's end is on the
    disk. A rerun that finds the session ended and no line (a power cut took the line) makes
    the line again from the session: nothing asked again, no new session, the same verdicts."""
    items = demo(paths, 4)
    async with workspace_with(paths, knows(items)) as (workspace, models):
        request = EvalRequest("demo", n=4)
        before, first = await evaluate(workspace, request)
        asked = len(models.detective.chats) + len(models.witness.chats)
        results = paths.data_dir / "evals" / first[0].run / "results.jsonl"
        lines = results.read_bytes().splitlines(keepends=True)
        results.write_bytes(b"".join(lines[:1]))  # the last three lines never reached the disk
        after, again = await evaluate(workspace, request)
        assert isinstance(again[0], EvalStarted) and again[0].skipped == 1
        assert len(models.detective.chats) + len(models.witness.chats) == asked
        made = {e.result.item: e.result for e in again if isinstance(e, EvalItemDone)}
        done = {e.result.item: e.result for e in first if isinstance(e, EvalItemDone)}
        assert len(made) == 3
        for item, result in made.items():
            assert (result.verdict, result.session) == (done[item].verdict, done[item].session)
        assert len(workspace.store.list()) == 4
        assert figure(after, "accuracy") == figure(before, "accuracy") == 1.0


async def test_a_dead_detective_fails_items_that_are_counted_and_retried_on_request(
        paths: Paths) -> None:
    items = demo(paths, 4)
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    async with workspace_with(paths, knows(items), detective_url=dead) as (workspace, _):
        summary, events = await evaluate(workspace, EvalRequest("demo", n=4))
        results = [e.result for e in events if isinstance(e, EvalItemDone)]
        assert all(r.failed and r.error for r in results)
        assert summary.systems["interrogation"].failed == 4
        assert figure(summary, "undetermined") == 1.0
        _, again = await evaluate(workspace, EvalRequest("demo", n=4), retry_failed=True)
        assert isinstance(again[0], EvalStarted) and again[0].skipped == 0


async def test_defend_gives_true_and_false_claims_the_same_instruction(paths: Paths) -> None:
    items = demo(paths, 4, seed=4)
    async with workspace_with(paths, knows(items)) as (workspace, models):
        await evaluate(workspace, EvalRequest("demo", n=4, seed=4, mode="defend"))
    systems = {chat[0]["content"] for chat in models.witness.chats}
    by_label = {}
    for item in items:
        prompt = next(s for s in systems if item.claim in s)
        by_label.setdefault(item.label, set()).add(prompt.replace(item.claim, "CLAIM"))
    assert by_label[True] == by_label[False] and len(by_label[True]) == 1


def test_claims_are_read_in_both_formats_and_bad_lines_are_named(tmp_path: Any) -> None:
    ours = tmp_path / "claims.jsonl"
    ours.write_text('{"claim": "Tea has caffeine.", "label": true}\n\n'
                    '{"claim": "Tea is a metal.", "label": "false", "id": "t2"}\n')
    halu = tmp_path / "qa.json"
    halu.write_text('{"knowledge": "K", "question": "Who?", "right_answer": "Ann", '
                    '"hallucinated_answer": "Bob"}\n')
    read = read_items(ours)
    assert [(i.key, i.label) for i in read] == [("line1", True), ("t2", False)]
    pair = read_items(halu)
    assert [i.label for i in pair] == [True, False] and all("K" not in i.claim for i in pair)
    assert pair[0].answer == "Ann" and pair[1].group == pair[0].group
    for text, problem in (('{"claim": "x"}', "'label' is missing"),
                          ('{"claim": "x", "label": "maybe"}', "must be true or false"),
                          ('{"claim": "x", "label": 2}', "must be true or false"),
                          ('{"claim": "x", "label": "NOT ENOUGH INFO"}', "neither true nor"),
                          ('{"question": "q"}', "an open question among labelled claims"),
                          ('{"topic": "q"}', "neither a claim"),
                          ("{not json", "not valid JSON"),
                          ('{"claim": "", "label": true}', "non-empty string")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"claim": "fine", "label": true}\n' + text + "\n")
        with pytest.raises(DatasetError, match=problem) as caught:
            read_items(bad)
        assert "line 2" in caught.value.message


def test_labels_as_labelled_sets_write_them(tmp_path: Any) -> None:
    """1 / 0 (1.0 / 0.0, as a table's export writes them) and FEVER's SUPPORTS / REFUTES are
    labels too; 2 and 0.5 are not."""
    sets = tmp_path / "claims.jsonl"
    sets.write_text('{"claim": "a", "label": 1}\n{"claim": "b", "label": 0}\n'
                    '{"claim": "c", "label": "SUPPORTS"}\n{"claim": "d", "label": "REFUTES"}\n'
                    '{"claim": "e", "label": 1.0}\n{"claim": "f", "label": 0.0}\n'
                    '{"claim": "g", "label": "1.0"}\n{"claim": "h", "label": " 0.0"}\n')
    assert [i.label for i in read_items(sets)] == [True, False, True, False] * 2
    # FActScore's S / NS, and the words sets spell several ways
    sets.write_text('{"claim": "a", "label": "S"}\n{"claim": "b", "label": "NS"}\n'
                    '{"claim": "c", "label": "Supported"}\n'
                    '{"claim": "d", "label": "NOT_SUPPORTED"}\n'
                    '{"claim": "e", "label": "accurate"}\n'
                    '{"claim": "f", "label": "not-supported"}\n')
    assert [i.label for i in read_items(sets)] == [True, False] * 3
    for neither in ('"IR"', '"NOT ENOUGH INFO"', '"not_enough_info"'):
        sets.write_text(f'{{"claim": "x", "label": {neither}}}\n')
        with pytest.raises(DatasetError, match="neither true nor false"):
            read_items(sets)
    for odd in ("2", "0.5", '"0.50"', "NaN", '"maybe"'):
        sets.write_text(f'{{"claim": "x", "label": {odd}}}\n')
        with pytest.raises(DatasetError, match="'label' must be true or false"):
            read_items(sets)


@pytest.mark.parametrize("text", [
    '{"claim": "a", "label": true}\n{"claim": "b", "label": 0}\n',
    '[{"claim": "a", "label": true}, {"claim": "b", "label": 0}]',
])
def test_a_byte_order_mark_before_the_first_line_is_no_data(tmp_path: Any, text: str) -> None:
    """What a Windows tool's UTF-8 export puts first is read past, by either reader."""
    plain, marked = tmp_path / "plain.jsonl", tmp_path / "marked.jsonl"
    plain.write_text(text, encoding="utf-8")
    marked.write_text("\ufeff" + text, encoding="utf-8")
    for read in (read_items, lambda path: list(chosen_items(path, None, 0))):
        claims = [(i.key, i.claim, i.label) for i in read(marked)]
        assert claims == [(i.key, i.claim, i.label) for i in read(plain)]
        assert claims == [("line1", "a", True), ("line2", "b", False)]


@pytest.mark.parametrize("text", ["", "\n \n", "\ufeff\n"])
def test_a_file_with_no_claims_is_refused_by_either_reader(tmp_path: Any, text: str) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text(text, encoding="utf-8")
    for read in (read_items, lambda path: chosen_items(path, None, 0)):
        with pytest.raises(DatasetError, match="empty.jsonl: no labelled claims in it"):
            read(empty)


def test_a_sample_keeps_haluevals_pairs_together_and_is_reproducible(tmp_path: Any) -> None:
    halu = tmp_path / "qa.jsonl"
    halu.write_text("".join(
        f'{{"question": "Q{i}?", "right_answer": "R{i}", "hallucinated_answer": "H{i}", '
        f'"knowledge": ""}}\n' for i in range(50)))
    items = read_items(halu)
    picked = sample(items, 10, seed=9)
    assert picked == sample(items, 10, seed=9) != sample(items, 10, seed=8)
    groups = Counter(i.group for i in picked)
    assert len(picked) == 10 and set(groups.values()) == {2}
    assert sum(i.label for i in picked) == 5




@pytest.mark.parametrize("n", [None, 1, 7, 60, 61, 150, 400])
@pytest.mark.parametrize("seed", [0, 9])
def test_a_json_lines_dataset_is_read_from_its_file_as_sampled_and_checked(
        tmp_path: Any, n: int | None, seed: int) -> None:
    """A run holds none of its claims (`ItemFile`: 8 bytes a row): it chooses exactly the
    claims `sample(read_items(...))` chooses, HaluEval pairs and our rows mixed, in the
    file's order; an id used twice is named by its line as before; a file changed under the
    run stops it with that said."""
    import json

    from engine.errors import DatasetError
    from engine.evals.items import ItemFile, chosen_items

    path = tmp_path / "mixed.jsonl"
    rows = [json.dumps({"id": f"c{i}", "claim": f"Bridge {i} stands.", "label": i % 2 == 0})
            for i in range(100)]
    for at in (3, 40, 77):
        rows.insert(at, json.dumps({"question": f"Q{at}?", "right_answer": "R",
                                    "hallucinated_answer": "H", "knowledge": "K"}))
    path.write_text("\n".join(rows) + "\n\n")
    chosen = chosen_items(path, n, seed)
    assert isinstance(chosen, ItemFile)
    expected = sample(read_items(path), n, seed)
    assert list(chosen) == expected and len(chosen) == len(expected)
    path.write_text(path.read_text() + json.dumps({"id": "c5", "claim": "x", "label": 1}))
    with pytest.raises(DatasetError, match=r"line 105: the id 'c5' is used twice"):
        chosen_items(path, n, seed)
    path.write_text("\n".join(rows) + "\n")
    changing = chosen_items(path, n, seed)
    path.write_text("\n".join(rows[:50]) + "\n")
    with pytest.raises(DatasetError, match="changed since the run started"):
        list(changing)


async def test_every_baseline_call_is_checked_against_the_budget_before_it_is_made(
        paths: Paths) -> None:
    """`--max-cost` holds for the baselines too: what they cost is spent from the run's
    budget, and a call that may pass it is never sent."""
    from engine.config.models import Price
    from engine.costs import Budget, CostLimitReached
    from engine.evals.baselines import Baselines
    from engine.models.usage import TokenTally
    from engine.routing.router import Router

    (item,) = demo(paths, 1)
    per_call = (1000, 100)
    with ScriptedModel(detective(knows([item])), usage=per_call) as sleuth, \
            ScriptedModel(witness, usage=per_call) as wit:
        config = make_config({"det": sleuth.url + "/v1", "wit": wit.url + "/v1"},
                             ["det"], ["wit"])
        config.prices = {"det": Price(input=3, output=15), "wit": Price(input=0.5, output=1.5)}
        router = Router(config, paths)
        try:
            tally, budget = TokenTally(), Budget(limit=1.0)
            judge = Baselines(router, config.interrogation, "planted", tally, budget)
            evidence = await judge.are_you_sure(item)
            await judge.verdict(item.claim, evidence)
            witness_call, judge_call = (1000 * 0.5 + 100 * 1.5) / 1e6, (1000 * 3 + 100 * 15) / 1e6
            assert tally.cost == pytest.approx(len(wit.chats) * witness_call + judge_call)
            assert budget.spent == pytest.approx(tally.cost)
            # a budget the judge's call may pass (its prompt and its 16-token reply at the
            # detective's price): refused before it reaches the detective
            asked = len(sleuth.chats)
            poor = Budget(limit=1e-5)
            with pytest.raises(CostLimitReached, match="cost limit"):
                await Baselines(router, config.interrogation, "planted", TokenTally(),
                                poor).verdict(item.claim, "")
            assert len(sleuth.chats) == asked and poor.spent == 0 and poor.stopped
        finally:
            await router.aclose()
