"""The meaning guard of the response cache on a labelled set (tests/data/cache_pairs.tsv):
what surface similarity cannot tell apart, the guard must."""

from __future__ import annotations

import pytest
from rapidfuzz import fuzz

from engine.cache.guard import check_meaning
from engine.cache.normalise import keywords, normalise, stem
from tests.support.servers import GUARD_SCORES, ROOT

PAIRS = [
    (a, b, c == "1")
    for line in (ROOT / "tests" / "data" / "cache_pairs.tsv").read_text().splitlines()
    if line and not line.startswith("#")
    for a, b, c in [line.split("\t")]
]


def test_normalise_is_loose_on_surface() -> None:
    assert normalise("What's the   Café's PRICE?!") == "what is the cafe s price"
    assert normalise("Isn't it WON'T can't") == "is not it will not can not"
    assert normalise("Ｆｕｌｌ　ｗｉｄｔｈ 3.5% -2") == "full width 3.5% 2"
    assert keywords("What are the risks of smoking?") == ["risk", "smok"]
    assert stem("boxes") == stem("box") and stem("increases") == stem("increase")
    assert stem("studies") == "study" and stem("class") == "class"


def test_the_guard_never_accepts_a_pair_of_different_meaning() -> None:
    wrong = [(a, b, check_meaning(a, b)) for a, b, same in PAIRS
             if not same and check_meaning(a, b).passed]
    assert wrong == []


def test_the_guard_accepts_most_true_paraphrases_and_says_why_when_not() -> None:
    same = [(a, b) for a, b, s in PAIRS if s]
    accepted = [(a, b) for a, b in same if check_meaning(a, b).passed]
    assert len(accepted) >= 0.9 * len(same), [
        (a, b, check_meaning(a, b).rejected_by) for a, b in same
        if not check_meaning(a, b).passed]


def test_surface_similarity_alone_would_serve_the_opposites() -> None:
    """The reason for the guard: token_set_ratio scores many opposites at 90 or more."""
    fooled = [(a, b) for a, b, same in PAIRS
              if not same and fuzz.token_set_ratio(normalise(a), normalise(b)) >= 90]
    assert len(fooled) >= 10
    assert all(not check_meaning(a, b).passed for a, b in fooled)


@pytest.mark.parametrize(("a", "b", "name"), [
    ("Is coffee bad?", "Is coffee not bad?", "negation"),
    ("Is coffee bad?", "Is coffee good?", "antonyms"),
    ("Walk 5 km", "Walk 5 miles", "quantities"),
    ("How big is Jupiter?", "How big is Saturn?", "content"),
    ("Is Jupiter bigger than Saturn?", "Is Saturn bigger than Jupiter?", "order"),
])
def test_each_rejection_names_its_check(a: str, b: str, name: str) -> None:
    result = check_meaning(a, b)
    assert not result.passed and result.rejected_by is not None
    assert result.rejected_by.name == name and result.rejected_by.detail
    assert [c.name for c in result.checks][-1] == name


def test_precision_and_recall_on_the_labelled_set(request: pytest.FixtureRequest) -> None:
    """Printed at the end of every run (CI's log): a hit is a positive."""
    hits = [(same, check_meaning(a, b).passed) for a, b, same in PAIRS]
    true_pos = sum(1 for same, hit in hits if same and hit)
    false_pos = sum(1 for same, hit in hits if not same and hit)
    false_neg = sum(1 for same, hit in hits if same and not hit)
    precision = true_pos / max(1, true_pos + false_pos)
    recall = true_pos / max(1, true_pos + false_neg)
    request.config.stash[GUARD_SCORES] = (
        f"meaning guard on {len(PAIRS)} labelled pairs ({sum(s for s, _ in hits)} same, "
        f"{sum(not s for s, _ in hits)} different): precision {precision:.3f}, recall "
        f"{recall:.3f}, wrong hits {false_pos}")
    assert len(PAIRS) >= 150 and false_pos == 0 and recall >= 0.9
