"""The meaning guard of the response cache on a labelled set (tests/data/cache_pairs.tsv):
what surface similarity cannot tell apart, the guard must."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from rapidfuzz import fuzz

from engine.cache.guard import check_meaning
from engine.cache.normalise import keywords, normalise, stem
from tests.support.cache_sets import Pair, by_kind, measure, pairs, scores
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
    assert normalise("Ｆｕｌｌ　ｗｉｄｔｈ 3.5% -2") == "full width 3.5% -2"
    assert keywords("What are the risks of smoking?") == ["what", "risk", "smok"]
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


@pytest.mark.parametrize(("a", "b", "name", "words"), [
    ("What is 12+4?", "What is 12-4?", "operators", "plus vs minus"),
    ("What is 12*4?", "What is 12/4?", "operators", "times vs divided"),
    ("Is 2^10 more than 1000?", "Is 2*10 more than 1000?", "operators", "pow vs times"),
    ("Was ist 7 mal 8?", "Was ist 7 plus 8?", "operators", "times vs plus"),
    ("Quanto é 100 dividido por 4?", "Quanto é 100 menos 4?", "operators", "divided vs minus"),
    ("Is x > 5?", "Is x < 5?", "operators", "greaterthan vs lessthan"),
    ("Is a == b in Python?", "Is a != b in Python?", "operators", "equals vs notequals"),
    ("Is x >= 5?", "Is x > 5?", "operators", "atleast vs greaterthan"),
    ("Is -5 °C freezing?", "Is 5 °C freezing?", "quantities", "-5"),
    ("Walk 5 km", "Walk 5 Meilen", "quantities", "km"),
    ("When did the Wall fall?", "Why did the Wall fall?", "interrogative", "when vs why"),
    ("Wann fiel die Mauer?", "Warum fiel die Mauer?", "interrogative", "when vs why"),
    ("Quando caiu o Muro?", "Por que caiu o Muro?", "interrogative", "when vs why"),
    ("Who built it?", "Where was it built?", "interrogative", "who vs where"),
    ("Ist Kaffee gut?", "Ist Kaffee nicht gut?", "negation", "nicht"),
    ("Café é bom?", "Café não é bom?", "negation", "nao"),
    ("Ist Kaffee gut?", "Ist Kaffee schlecht?", "antonyms", "gut"),
    ("Café faz bem?", "Café faz mal?", "antonyms", "bem"),
    ("Who am I?", "Who are you?", "person", "I vs you"),
    ("What is my name?", "What is your name?", "person", "I vs you"),
    ("Wie heißt du?", "Wie heiße ich?", "person", "you vs I"),
    ("Can I take ibuprofen?", "Must I take ibuprofen?", "modality", "can vs must"),
    ("Will the sun explode?", "Did the sun explode?", "modality", "will"),
    ("Was he a good king?", "Is he a good king?", "tense", "past vs present"),
    ("Did Alice pay Bob?", "What did Alice pay Bob?", "interrogative", "nothing vs what"),
    ("Convert $100 to euros", "Convert €100 to euros", "quantities", "usd"),
])
def test_meaning_bearing_words_are_compared_with_a_reason(a: str, b: str, name: str,
                                                         words: str) -> None:
    for x, y in ((a, b), (b, a)):
        failed = check_meaning(x, y).rejected_by
        assert failed is not None and failed.name == name, (x, y, failed)
    assert words.split(" vs ")[0] in check_meaning(a, b).rejected_by.detail  # type: ignore


@pytest.mark.parametrize(("a", "b"), [
    ("What are the side effects of vitamin B-3?", "What are the side effects of vitamin B3?"),
    ("vitamin B3 dose", "vitamin b 3 dose"),
    ("Why do cats purr?", "Why do cats actually purr?"),
    ("Warum schnurren Katzen?", "Warum schnurren Katzen eigentlich?"),
    ("Por que os gatos ronronam?", "Por que os gatos ronronam, afinal?"),
    ("How much caffeine is in coffee?", "How much caffeine is in cofee?"),
    ("Wie funktioniert eine Wärmepumpe?", "Wie funktionert eine Waermepumpe?"),
    ("Qual é a capital da Austrália?", "Qual e a captal da Australia?"),
    ("How do I install Docker on Ubuntu?", "On Ubuntu, how do I install Docker?"),
    ("What is the difference between TCP and UDP?", "What's the difference between UDP and TCP?"),
    ("What is 2+2?", "what is 2 + 2"),
    ("Can you tell me the capital of France?", "What is the capital of France?"),
    ("capital of France?", "What is the capital of France?"),
    ("Do you know why the sky is blue?", "Why is the sky blue?"),
    ("Kannst du mir sagen, wie hoch die Zugspitze ist?", "Wie hoch ist die Zugspitze?"),
    ("Você sabe por que o céu é azul?", "Por que o céu é azul?"),
    ("How do I reset my password?", "How can you reset your password?"),
    ("Can I freeze cooked rice?", "Can you freeze cooked rice?"),
    ("How many calories are in two eggs?", "How many calories are in 2 eggs?"),
    ("How long to walk 5 km?", "How long to walk 5 kilometres?"),
    ("Is -5 °C cold?", "Is -5 degrees Celsius cold?"),
    ("Convert $100 to euros", "Convert 100 dollars to euros"),
    ("whats the capital of France", "What is the capital of France?"),
    ("Wie viele Beine haben Spinnen?", "Wie viele Beine hat eine Spinne?"),
    ("Is an acoustic guitar hard to play?", "Is a guitar that is acoustic hard to play?"),
    ("How do I toast bread slices?", "How do I toast slices of bread?"),
])
def test_surface_variants_pass(a: str, b: str) -> None:
    assert check_meaning(a, b).passed and check_meaning(b, a).passed, (
        check_meaning(a, b).rejected_by, check_meaning(b, a).rejected_by)


@pytest.mark.parametrize(("a", "b", "why"), [
    ("What is the population of Gambia?", "What is the population of Zambia?", "both words"),
    ("Is a bat dangerous?", "Is a bad dangerous?", "both words"),
    ("How tall is Jupyter?", "How tall is Jupiter?", "a name"),
    ("What is vitamin B12?", "What is vitamin B13?", "a number"),
    ("Is milk chocolate healthy?", "Is chocolate milk healthy?", "two words swapped"),
    ("Why is the bride leaving the groom?", "Why are the bride and the groom leaving?",
     "two words apart in both swapped with no `or` between them"),
    ("Warum verlässt die Braut den Bräutigam?", "Warum verlassen Braut und Bräutigam?",
     "the same in German"),
    ("Is Jupiter bigger than Saturn?", "Is Saturn bigger than Jupiter?", "around a relation"),
    ("Flights from Lisboa to Paris", "Flights from Paris to Lisboa", "around a relation"),
    ("Did Alice pay Bob?", "Did Bob pay Alice?", "around a verb"),
    ("Is hypotension dangerous?", "Is hypertension dangerous?", "opposite prefixes"),
    ("Is a cat smart?", "Is a bat smart?", "another first letter"),
    ("Is C# faster than Java?", "Is C faster than Java?", "a symbol of a name"),
    ("Is http secure?", "Is https secure?", "no plural without a vowel"),
    ("Schalte ich das Licht an?", "Schalte ich das Licht aus?", "an / aus"),
    ("Ist Berlin größer als Hamburg?", "Ist Berlin groß als Hamburg?", "a comparative"),
])
def test_typos_and_word_order_are_never_stretched_over_meaning(a: str, b: str,
                                                               why: str) -> None:
    assert not check_meaning(a, b).passed, why


def test_a_typo_is_named_in_the_content_check() -> None:
    content = next(c for c in check_meaning("Is coffee bad?", "Is cofee bad?").checks
                   if c.name == "content")
    assert content.passed and content.detail == "typed differently: coffee ~ cofee"


def test_both_labelled_sets_through_the_cache(request: pytest.FixtureRequest) -> None:
    """Printed at the end of every run (CI's log): each pair's first question put in, the
    second looked up. Never a wrong answer on either set; on the held-out set (written before
    the rules of issue 23, never used while changing one) surface variants pass."""
    lines = []
    for name in ("cache_pairs.tsv", "cache_heldout.tsv"):
        outcomes = measure(pairs(name))
        lines.append(scores(outcomes).line(f"response cache on {name}"))
        if name == "cache_heldout.tsv":
            kinds = by_kind(outcomes)
            lines += [kinds[k].line(f"  {k}") for k in ("surface", "paraphrase", "opposite",
                                                        "realtime", "en", "de", "pt")]
        wrong = [(o.pair.question, o.pair.candidate, o.reason) for o in outcomes
                 if o.hit and not o.pair.served]
        assert wrong == []
    request.config.stash[GUARD_SCORES] = "\n".join(lines)
    held_out = by_kind(measure(pairs("cache_heldout.tsv")))
    assert held_out["surface"].recall >= 0.9 and held_out["opposite"].wrong == 0
    assert len(pairs("cache_heldout.tsv")) >= 300


@pytest.mark.heavy
def test_the_held_out_set_through_the_cli(home: Path, monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    """The way a user checks the cache: `cache put` then `cache match --json`, two pairs of
    every kind and language, each in a cache of its own."""
    from tests.support.cli import detektiv

    sample: dict[tuple[str, str], list[Pair]] = {}
    for pair in pairs("cache_heldout.tsv"):
        group = sample.setdefault((pair.kind, pair.language), [])
        if len(group) < 2:
            group.append(pair)
    chosen = [pair for group in sample.values() for pair in group]
    assert len(chosen) == 24
    for number, pair in enumerate(chosen):
        monkeypatch.setenv("DETEKTIV_HOME", str(tmp_path / f"home{number}"))
        put = detektiv("cache", "put", pair.question, "--answer", f"answer {number}")
        assert put.returncode == 0, put.stderr
        match = detektiv("cache", "match", pair.candidate, "--json")
        data = json.loads(match.stdout)
        served = data["answer"] == f"answer {number}"
        assert match.returncode == (0 if served else 1)
        if not pair.served:
            assert not served, (pair, data["explanation"]["reason"])
        assert data["explanation"]["reason"]


@pytest.mark.parametrize(("question", "candidate"), [
    ("Why don't people who smoke get cancer?", "Why do people who don't smoke get cancer?"),
    ("Why is the man who doesn't have money happy?",
     "Why isn't the man who has money happy?"),
    ("The problem is who doesn't have money.", "The problem isn't who has money."),
    ("Warum werden Kinder, die nicht lesen, klüger?",
     "Warum werden Kinder, die lesen, nicht klüger?"),
    ("Warum hat der Mann, der kein Geld hat, Glück?",
     "Warum hat der Mann, der Geld hat, kein Glück?"),
    ("Por que pessoas que não fumam têm câncer?", "Por que pessoas que fumam não têm câncer?"),
    ("Por que quem nunca estuda passa?", "Por que quem estuda nunca passa?"),
])
def test_a_negation_moved_to_another_word_is_another_question(question: str,
                                                              candidate: str) -> None:
    """The same negations, counted alike, applying to another verb or phrase."""
    result = check_meaning(question, candidate)
    assert not result.passed and result.rejected_by is not None
    assert result.rejected_by.name == "negation"
    assert "applies to another word" in result.rejected_by.detail


@pytest.mark.parametrize(("question", "candidate"), [
    ("Why isn't the sky green?", "why isnt the sky green"),
    ("Warum werden Kinder, die nicht lesen, klüger?",
     "warum werden kinder die nicht lesen eigentlich klüger"),
    ("Por que pessoas que não fumam têm câncer?", "por que pessoas que nao fumam tem cancer"),
])
def test_a_negation_where_it_was_still_passes(question: str, candidate: str) -> None:
    assert check_meaning(question, candidate).passed


@pytest.mark.parametrize(("question", "candidate"), [
    ("Who peeled the potato?", "Who is peeling the potato?"),
    ("The man played his guitar.", "A man is playing a guitar."),
    ("Who painted the fence?", "Who paints the fence?"),
    ("Wer schälte die Kartoffel?", "Wer schält die Kartoffel?"),
    ("Wer malte den Zaun?", "Wer malt den Zaun?"),
    ("Quem descascou a batata?", "Quem descasca a batata?"),
])
def test_the_regular_past_is_read_as_written(question: str, candidate: str) -> None:
    """`peeled` and `peeling` share a stem: the tense is read before stemming takes it."""
    result = check_meaning(question, candidate)
    assert not result.passed and result.rejected_by is not None
    assert result.rejected_by.name in ("tense", "content")
    if result.rejected_by.name == "content":  # Portuguese: the stem differs already
        assert question.startswith("Quem")


@pytest.mark.parametrize(("question", "now"), [
    ("How do I open a current account?", False), ("What is a good credit score?", False),
    ("What does price elasticity mean?", False), ("Do pharmacies open on weekends?", False),
    ("I live in Scotland, can I vote?", False), ("What is electric current?", False),
    ("What is the moment of inertia?", False), ("How accurate are weather forecasts?", False),
    ("Wie eröffne ich ein Girokonto?", False), ("Was ist noch besser als Tee?", False),
    ("Was ist noch besser als Kaffee am Morgen?", False),
    ("Como abro uma conta corrente?", False), ("O que é ainda mais importante?", False),
    ("Como consigo uma bolsa de estudos?", False),
    # prices in general, a jam or a forecast in general
    ("Warum steigen Preise bei Knappheit?", False), ("Why do prices rise in a shortage?", False),
    ("Wie entsteht ein Stau auf der Autobahn?", False),
    ("Wie genau ist eine Wettervorhersage im Allgemeinen?", False),
    ("Warum steigen die Preise bei Aldi?", True), ("Gibt es einen Stau auf der A3?", True),
    ("Há um engarrafamento na ponte?", True), ("Is there any news about the election?", True),
    ("Wie ist die Wettervorhersage für Berlin?", True),
    # a traffic jam is traffic; jams in general are not now, and "jam" alone is fruit
    ("Is there a traffic jam on the A1?", True), ("Are there traffic jams on the M25?", True),
    ("Gibt es Staus auf der A3?", True), ("What causes traffic jams?", False),
    ("Warum gibt es Staus?", False), ("How do I make strawberry jam?", False),
    ("Who is the current president of France?", True), ("What is the price of gold?", True),
    ("What's the weather in Lisbon?", True), ("What is Tesla's stock price?", True),
    ("Has GTA 6 been released yet?", True), ("How much does a Big Mac cost?", True),
    ("When is the next full moon?", True), ("What are the live results?", True),
    ("Wer ist der aktuelle Bundeskanzler?", True), ("Lebt der Papst noch?", True),
    ("Wie ist der Verkehr auf der A9?", True), ("Was gibt es Neues?", True),
    ("Qual é o preço do bitcoin?", True), ("O papa ainda está vivo?", True),
    ("Como está o trânsito na Marginal?", True), ("Qual é a previsão do tempo?", True),
    # a year gone by pins the answer; a year to come, or one a term started in, does not
    ("who is the mayor of chicago 2011", False), ("What is the price of gold in 1980?", False),
    ("Quem é o presidente do Brasil em 2003?", False), ("Who is the CEO of Apple in 2999?", True),
    ("Wer ist der Bundeskanzler seit 2021?", True),
    ("What is the price of gold today compared to 1980?", True),
    ("What is the price of 1999 shares of Apple?", True),  # an amount, not a year
])
def test_the_time_filter_fires_on_questions_about_now_only(question: str, now: bool) -> None:
    from engine.cache.validate import requires_realtime

    assert requires_realtime(question) is now


def test_a_stopword_or_a_short_word_with_two_letters_swapped_is_a_typo() -> None:
    assert check_meaning("What is the capital of Canada?", "what is teh capital of canada").passed
    assert check_meaning("Wie lange kocht man ein Ei?", "wie lange kocht man ein ie").passed
    assert check_meaning("How do I track my order?", "how do i track my order pls").passed
    assert check_meaning("Kann ich meine Lieferadresse ändern?",
                         "kann ich meine lieferadrese aendern").passed
    # both words, and nothing beside them tells: never one typed for the other
    assert not check_meaning("Is it bad?", "Is it dab?").passed
    assert not check_meaning("How do I apply a discount code?",
                             "how do i apply a discount cod").passed


def test_a_word_typed_as_a_far_rarer_word_is_read_beside_the_word_both_share() -> None:
    """`oder number` is `order number`: `oder` is far rarer than `order` (the noisy channel),
    and `order number` is a known pair where `oder number` is none. Without a shared word
    beside it, or with a rarer word common enough to be meant, the two stay two words."""
    served = check_meaning("Where can I find my order number?", "where can i find my oder number")
    assert served.passed
    assert "order ~ oder" in next(c.detail for c in served.checks if c.name == "content")
    assert check_meaning("what is a hart attack", "What is a heart attack?").passed
    # nothing beside the word that both share and that tells: a question about the rarer word
    assert not check_meaning("What is a hart?", "What is a heart?").passed
    assert not check_meaning("What does oder mean in German?",
                             "What does order mean in German?").passed
    # the rarer word common enough to be meant (the first setting, a tenth, served this)
    assert not check_meaning("What is a coda section?", "What is a code section?").passed
    # only English has the word pairs
    assert not check_meaning("Wo finde ich die Bestellnummer der Oder?",
                             "Wo finde ich die Bestellnummer der Order?").passed


def test_the_noisy_channel_counts_the_neighbours_of_the_commoner_word() -> None:
    from engine.cache.spelling import _neighbours

    counts = {"order": 9, "border": 1, "oder": 1, "odder": 1, "orders": 1, "older": 1, "xyz": 1}
    assert _neighbours("order", counts) == 5
    assert _neighbours("order", {"order": 1}) == 0


def test_the_issue_36_sets(request: pytest.FixtureRequest) -> None:
    """Written before the rules changed (tests/data/cache_heldout_scope.tsv and
    realtime_questions.tsv): no wrong answer on a moved negation, another tense or a word typed
    as another dictionary word, the time filter on ordinary questions and on questions about
    now. Printed with the guard's scores."""
    from engine.cache.validate import requires_realtime

    outcomes = measure(pairs("cache_heldout_scope.tsv"))
    kinds = by_kind(outcomes)
    wrong = [(o.pair.question, o.pair.candidate) for o in outcomes if o.hit and not o.pair.served]
    assert wrong == []
    assert all(len([p for p in pairs("cache_heldout_scope.tsv") if p.kind == kind]) >= least
               for kind, least in (("negation-moved", 40), ("past-present", 40),
                                   ("time-word", 59), ("real-word", 40),
                                   ("real-word-context", 30), ("real-word-context-2", 15)))
    rows = [line.split("\t") for line in
            (ROOT / "tests" / "data" / "realtime_questions.tsv").read_text().splitlines()
            if line and not line.startswith("#")]
    ordinary = [q for flag, q in rows if flag == "0"]
    about_now = [q for flag, q in rows if flag == "1"]
    fired = [q for q in ordinary if requires_realtime(q)]
    missed = [q for q in about_now if not requires_realtime(q)]
    assert len(ordinary) >= 300 and len(about_now) >= 100
    assert len(fired) <= 0.03 * len(ordinary) and missed == []
    assert kinds["typo-filler"].recall >= 0.95 and kinds["time-word"].recall >= 0.8
    lines = [f"issue 36 sets: time filter fires on {len(fired)} of {len(ordinary)} ordinary "
             f"questions, misses {len(missed)} of {len(about_now)} about now"]
    lines += [kinds[k].line(f"  {k}") for k in ("negation-moved", "past-present", "time-word",
                                                 "typo-filler", "real-word",
                                                 "real-word-context", "real-word-context-2")]
    previous = request.config.stash.get(GUARD_SCORES, "")
    request.config.stash[GUARD_SCORES] = "\n".join([previous, *lines]).strip()


_SIGNS = list("abcx 0123456789-+*/=<>^#°€$£¥₹₽÷×·√⁄!?.,'\"\u00a0") + [
    " x ", "divided by", "multiplied by", " percent", "per cent", "prozent", "por cento",
    "o que", "por que", "wieviel", "dividido por", "geteilt durch", "multipliziert mit"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_SIGNS), max_size=12).map("".join))
def test_the_normalisers_first_look_never_misses_a_sign(text: str) -> None:
    """The cheap look for a sign or an operator word is taken before the patterns: whatever
    any pattern would rewrite, it sees."""
    from engine.cache.normalise import _ANY_SYMBOL, _SYMBOL_HINT, fold

    folded = fold(text)
    assert not _ANY_SYMBOL.search(folded) or _SYMBOL_HINT.search(folded)


def test_the_guard_reads_a_stored_normal_form_as_it_reads_the_question() -> None:
    """A lookup hands the guard each candidate's stored normal form: the verdict and its
    reason are what the guard finds working it out itself."""
    items = pairs("cache_heldout.tsv") + pairs("cache_heldout_scope.tsv")
    assert len(items) > 600
    for pair in items:
        worked_out = check_meaning(pair.question, pair.candidate)
        handed = check_meaning(pair.question, pair.candidate, normalise(pair.candidate))
        assert handed == worked_out, (pair.question, pair.candidate)
