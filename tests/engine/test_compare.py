"""The witness leaderboard's arithmetic (`engine.evals.compare`): paired bootstrap intervals,
Holm's correction, the sentences — pure logic on results written into run folders."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.evals.board import board_json, board_lines, board_table
from engine.evals.compare import SHARES, Paired, holm_levels, leaderboard
from engine.evals.folder import EvalResult, EvalRunInfo, RunFolder


def folder(root: Path, name: str, verdicts: list[tuple[bool, str, float]],
           comparison: str = "cmp") -> RunFolder:
    """A run of `name` whose item i (label, verdict, p-false) is `verdicts[i]`."""
    made = RunFolder(root / name)
    made.open()
    made.save_info(EvalRunInfo(id=name, dataset="d", dataset_file="d", checksum="0",
                               witness=[name], witness_label=f"{name}:m",
                               comparison=comparison))
    for index, (label, verdict, p) in enumerate(verdicts):
        made.add_result(EvalResult(item=f"i{index}", label=label, claim=f"c{index}",
                                   status="completed", verdict=verdict,  # type: ignore[arg-type]
                                   probability_false=p, session=f"s{name}{index}"))
    return made


def questions(root: Path, name: str, counts: list[dict[str, int]]) -> RunFolder:
    made = RunFolder(root / name)
    made.open()
    made.save_info(EvalRunInfo(id=name, dataset="q", dataset_file="q", checksum="0",
                               mode="open", witness=[name], comparison="cmp"))
    for index, claims in enumerate(counts):
        made.add_result(EvalResult(item=f"q{index}", label=None, claim=f"q{index}?",
                                   status="completed", claims=claims))
    return made


def right(n: int, label: bool = True) -> list[tuple[bool, str, float]]:
    verdict, p = ("true", 0.1) if label else ("false", 0.9)
    return [(label, verdict, p)] * n


def wrong(n: int, label: bool = True) -> list[tuple[bool, str, float]]:
    verdict, p = ("false", 0.9) if label else ("true", 0.1)
    return [(label, verdict, p)] * n


def test_holm_steps_down_and_stops_at_the_first_pair_it_keeps() -> None:
    # m = 3: the smallest p-value is held to 0.05/3, the next to 0.05/2, the last to 0.05
    assert holm_levels([0.001, 0.01, 0.04]) == pytest.approx(
        [1 - 0.05 / 3, 1 - 0.05 / 2, 1 - 0.05])
    # the second smallest (0.03 > 0.025) is kept: it and every one after share its level
    assert holm_levels([0.2, 0.001, 0.03]) == pytest.approx(
        [1 - 0.05 / 2, 1 - 0.05 / 3, 1 - 0.05 / 2])
    assert holm_levels([0.5]) == pytest.approx([0.95])


def test_a_paired_difference_is_said_in_a_plain_sentence() -> None:
    ahead = Paired("A", "B", "accuracy", 0.12, 0.04, 0.20, 0.002, 0.95, 40)
    assert ahead.shown
    assert ahead.sentence() == "accuracy: B is ahead of A by 0.12, 95 % CI 0.04–0.20 (40 items)"
    behind = Paired("A", "B", "accuracy", -0.12, -0.20, -0.04, 0.002, 1 - 0.05 / 3, 40)
    assert behind.sentence() == ("accuracy: A is ahead of B by 0.12, 98.33 % CI 0.04–0.20 "
                                 "(40 items)")
    level = Paired("A", "B", "auroc", 0.05, -0.03, 0.13, 0.3, 0.95, 40)
    assert not level.shown
    assert level.sentence() == ("AUROC: no difference shown between A and B (B − A = +0.05, "
                                "95 % CI -0.03 to +0.13, 40 items)")
    nothing = Paired("A", "B", "AUROC", math.nan, math.nan, math.nan, 1.0, 0.95, 0)
    assert "cannot be compared" in nothing.sentence()


def test_the_pairs_are_paired_on_the_same_items(tmp_path: Path) -> None:
    # B is right exactly where A is, plus on 10 items more: a paired difference of 10 of 40
    # with no item going the other way, so every resample shows B ahead
    a = folder(tmp_path, "a", right(20) + wrong(10) + wrong(10, label=False))
    b = folder(tmp_path, "b", right(20) + right(10) + wrong(10, label=False))
    board = leaderboard("cmp", [a, b], resamples=400)
    accuracy = next(p for p in board.pairs if p.figure == "accuracy")
    assert accuracy.difference == pytest.approx(0.25) and accuracy.n == 40
    assert 0 < accuracy.low <= 0.25 <= accuracy.high and accuracy.shown
    assert accuracy.sentence().startswith("accuracy: b is ahead of a by 0.25, 95 % CI ")
    assert not board.holm and accuracy.level == 0.95
    table = board_table(board)
    assert table[0][:3] == ["witness", "provider", "accuracy"]
    assert [row[0] for row in table[1:]] == ["b", "a"]  # the best first
    assert table[1][2].startswith("0.750 [")


def test_the_same_witness_twice_shows_no_difference(tmp_path: Path) -> None:
    answers = right(12) + wrong(8) + right(10, label=False) + wrong(10, label=False)
    board = leaderboard("cmp", [folder(tmp_path, "a", answers),
                                folder(tmp_path, "b", answers)], resamples=200)
    for pair in board.pairs:
        assert pair.difference == 0 and not pair.shown
        assert "no difference shown" in pair.sentence()


def test_three_witnesses_are_corrected_for_their_three_pairs(tmp_path: Path) -> None:
    base = right(15) + wrong(5) + right(15, label=False) + wrong(5, label=False)
    better = right(20) + right(15, label=False) + wrong(5, label=False)
    board = leaderboard("cmp", [folder(tmp_path, "a", base), folder(tmp_path, "b", better),
                                folder(tmp_path, "c", base)], resamples=300)
    assert board.holm
    accuracy = [p for p in board.pairs if p.figure == "accuracy"]
    assert len(accuracy) == 3
    assert max(p.level for p in accuracy) == pytest.approx(1 - 0.05 / 3)
    assert any("Holm" in line for line in board_lines(board))
    levels = {(p.a, p.b): p.level for p in accuracy}
    assert levels[("a", "c")] < levels[("a", "b")]  # kept, so at the level it stopped at
    data = board_json(board)
    assert [w["witness"] for w in data["witnesses"]] == ["a", "b", "c"]
    assert len(data["pairs"]) == 6 and data["holm"]


def test_open_questions_count_the_shares_of_claims_and_pair_them_by_question(
        tmp_path: Path) -> None:
    a = questions(tmp_path, "a", [{"held": 3, "contradicted": 1}] * 10)
    b = questions(tmp_path, "b", [{"held": 1, "unsure": 2, "not checkable": 1,
                                   "not examined": 5}] * 10)
    board = leaderboard("cmp", [a, b], resamples=200)
    assert not board.labelled and board.headline == "held"
    rows = {row.witness: row for row in board.rows}
    assert rows["a"].figure("held").value == 0.75 and rows["a"].claims == 40
    assert rows["b"].figure("held").value == 0.25  # `not examined` is not counted
    assert rows["b"].figure("not checkable").value == 0.25 and rows["b"].claims == 40
    for row in rows.values():  # the four states share every claim counted
        assert sum(row.figure(state).value for state in SHARES) == pytest.approx(1.0)
    assert rows["b"].figure("unsure").value == 0.5 and rows["a"].figure("unsure").value == 0
    (held,) = board.pairs
    assert held.figure == "held" and held.difference == pytest.approx(-0.5) and held.shown
    assert held.sentence().startswith("held: a is ahead of b by 0.50")
    assert any("FActScore" in line for line in board_lines(board))


def test_with_a_document_the_reference_s_readings_are_counted_apart_from_the_states(
        tmp_path: Path) -> None:
    """The reference may be unsure of a claim the witness held: its `unsure` is not the
    claim state `unsure` (each share over its own family)."""
    made = []
    for name, claims, reference in (
            ("a", {"held": 3, "unsure": 1}, {"supported": 2, "unsure": 2}),
            ("b", {"held": 1, "contradicted": 3}, {"supported": 1, "not supported": 3})):
        folder = RunFolder(tmp_path / name)
        folder.open()
        folder.save_info(EvalRunInfo(id=name, dataset="q", dataset_file="q", checksum="0",
                                     mode="document", witness=[name], comparison="cmp"))
        for index in range(6):
            folder.add_result(EvalResult(item=f"q{index}", label=None, claim="q?",
                                         status="completed", claims=claims,
                                         reference=reference))
        made.append(folder)
    board = leaderboard("cmp", made, resamples=100)
    a, b = board.rows
    assert (a.figure("held").value, a.figure("unsure").value) == (0.75, 0.25)
    assert a.figure("supported").value == 0.5 and b.figure("supported").value == 0.25
    assert board.headline == "supported"
    (pair,) = board.pairs
    assert pair.figure == "supported" and pair.difference == pytest.approx(-0.25)
