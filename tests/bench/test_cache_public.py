"""`bench.cache_public`: each public set's file format read as its publisher lays it out (a
few lines of our own in each layout), labels mapped to served / never served, and the
measurement counting a wrong answer as one."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cache_public import assin, mrpc, report, sick, sts


def test_mrpc_reads_its_quality_column(tmp_path: Path) -> None:
    path = tmp_path / "msr.txt"
    path.write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                    "1\t1\t2\tThe cat sat on the mat.\tOn the mat sat the cat.\n"
                    "0\t3\t4\tThe dog barked.\tThe dog slept.\n", encoding="utf-8")
    assert [(p.question, p.candidate, p.served) for p in mrpc(path)] == [
        ("The cat sat on the mat.", "On the mat sat the cat.", True),
        ("The dog barked.", "The dog slept.", False)]


def test_sick_keeps_both_directions_and_leaves_one_way_entailment_out(tmp_path: Path) -> None:
    path = tmp_path / "sick.txt"
    path.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                    "1\tA man is running\tA man runs\t4.8\tENTAILMENT\n"
                    "2\tA man is running fast\tA man is running\t3.9\tENTAILMENT\n"
                    "3\tA man is running\tNobody is running\t2.1\tCONTRADICTION\n",
                    encoding="utf-8")
    found = sick(path)
    assert [(p.question, p.served) for p in found] == [
        ("A man is running", True), ("A man runs", True),
        ("A man is running", False), ("Nobody is running", False)]


def test_sts_reads_its_score_and_leaves_the_middle_out(tmp_path: Path) -> None:
    path = tmp_path / "sts.csv"
    path.write_text("genre\tfile\tyear\tid\t5.000\tA girl sings.\tA girl is singing.\n"
                    "genre\tfile\tyear\tid\t3.800\tA girl sings.\tA girl sings loudly.\n"
                    "genre\tfile\tyear\tid\t0.500\tA girl sings.\tA boy swims.\n"
                    "source\ttype\tyear\tindex\tscore\tsent1\tsent2\n", encoding="utf-8")
    assert [p.served for p in sts(path)] == [True, True, False, False]


def test_assin_reads_its_xml(tmp_path: Path) -> None:
    path = tmp_path / "assin.xml"
    path.write_text(
        "<?xml version='1.0' encoding='utf-8'?>\n<entailment-corpus>\n"
        '<pair entailment="Paraphrase" id="1" similarity="4.8"><t>O gato dorme.</t>'
        "<h>O gato está dormindo.</h></pair>\n"
        '<pair entailment="None" id="2" similarity="1.5"><t>O gato dorme.</t>'
        "<h>O cão corre.</h></pair>\n"
        '<pair entailment="None" id="3" similarity="3.5"><t>O gato dorme.</t>'
        "<h>O gato dorme muito.</h></pair>\n"
        '<pair entailment="Entailment" id="4" similarity="4.0"><t>O gato dorme.</t>'
        "<h>Um animal dorme.</h></pair>\n</entailment-corpus>\n", encoding="utf-8")
    assert [(p.question, p.candidate, p.served) for p in assin(path)] == [
        ("O gato dorme.", "O gato está dormindo.", True),
        ("O gato está dormindo.", "O gato dorme.", True),
        ("O gato dorme.", "O cão corre.", False),
        ("O cão corre.", "O gato dorme.", False)]


def test_a_wrong_answer_is_counted_and_named(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.cache_sets import Pair

    report("set", [Pair("t", "en", "Why is the sky blue?", "why is the sky blue", False),
                   Pair("t", "en", "Is coffee good for you?", "Is coffee bad for you?", False)])
    out = capsys.readouterr().out
    assert "of 2 of different meaning, 1 served (wrong answers)" in out
    assert "wrong: 'Why is the sky blue?' -> 'why is the sky blue'" in out
