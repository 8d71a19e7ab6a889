"""What a run costs: tokens from the providers' usage fields at the configured prices, per
round and per session, shown by `show`, `sessions --json` and exports; `--max-cost` stops a
run and an evaluation cleanly before a call would pass it; the local server costs nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Paths
from engine.storage.sessions import SessionStore
from tests.support.cli import detektiv
from tests.support.interrogation import FAST
from tests.support.scripted import KEEP_ASKING, ScriptedModel, detective
from tests.support.servers import LlamaServer

PROMPT, REPLY = 1000, 100
"""What every scripted call reports it used."""
PRICES = {"det": (3.0, 15.0), "wit": (0.5, 1.5)}
"""Per million tokens, in and out."""


def _config(home: Path, urls: dict[str, str], prices: bool = True) -> None:
    lines = []
    for priority, (name, url) in enumerate(urls.items(), start=1):
        lines += [f"[providers.{name}]", 'kind = "openai"', 'model = "m"',
                  f'base_url = "{url}"', f"priority = {priority}", ""]
    if prices:
        for name, (price_in, price_out) in PRICES.items():
            lines += [f"[prices.{name}]", f"input = {price_in}", f"output = {price_out}", ""]
    lines += ["[roles]", 'detective = ["det"]', 'witness = ["wit"]', "",
              "[interrogation]", *(f"{k} = {json.dumps(v)}" for k, v in FAST.items())]
    (home / "config.toml").write_text("\n".join(lines) + "\n")


def _call(name: str) -> float:
    price_in, price_out = PRICES[name]
    return (PROMPT * price_in + REPLY * price_out) / 1_000_000


def test_a_priced_run_counts_every_call_per_round_and_in_total(home: Path) -> None:
    with ScriptedModel(detective, usage=(PROMPT, REPLY)) as det, \
            ScriptedModel(["A: it is salty."], usage=(PROMPT, REPLY)) as wit:
        _config(home, {"det": det.url + "/v1", "wit": wit.url + "/v1"})
        result = detektiv("run", "The sea is salty")
        assert result.returncode == 0, result.stderr
        detective_calls, witness_calls = len(det.chats), len(wit.chats)
    store = SessionStore.of(Paths.at(home))
    (summary,) = store.list()
    session = store.load(summary.dir)
    expected = detective_calls * _call("det") + witness_calls * _call("wit")
    assert session.tokens.cost == pytest.approx(expected)
    assert session.tokens.prompt == (detective_calls + witness_calls) * PROMPT
    assert not session.tokens.estimated and session.tokens.unpriced == []
    for pair in session.qa_pairs:  # a round: its question, answer, judgement and analysis
        assert pair.usage is not None
        assert pair.usage.cost == pytest.approx(3 * _call("det") + _call("wit"))
    listed = json.loads(detektiv("sessions", "--json").stdout)[0]
    assert listed["cost"] == pytest.approx(expected) and listed["unpriced"] == []
    shown = detektiv("show", summary.id[:8]).stdout
    assert f"- Usage: {session.tokens.prompt:,} tokens in" in shown
    assert "## Costs" in shown and "- Round 1:" in shown
    exported = json.loads(detektiv("export", summary.id[:8], "--format", "json").stdout)
    assert exported["tokens"]["cost"] == pytest.approx(expected)


def test_max_cost_stops_before_the_call_that_would_pass_it(home: Path) -> None:
    with ScriptedModel(detective, usage=(PROMPT, REPLY)) as det, \
            ScriptedModel(["A: it is salty."], usage=(PROMPT, REPLY)) as wit:
        _config(home, {"det": det.url + "/v1", "wit": wit.url + "/v1"})
        budget = 2 * (3 * _call("det") + _call("wit")) + _call("det")  # two rounds and a bit
        result = detektiv("run", f"The sea is salty {KEEP_ASKING}", "--max-cost", str(budget))
        assert result.returncode == 130
        calls = len(det.chats) + len(wit.chats)
    store = SessionStore.of(Paths.at(home))
    session = store.load(store.list()[0].dir)
    assert session.status == "cancelled"
    assert session.error is None and session.audit_trail[-1].event == "cost_limit"
    assert "cost limit" in result.stdout + result.stderr
    assert session.tokens.cost <= budget * (1 + 1e-9)  # never passed (a float's last bit)
    assert calls < 3 * 4  # it stopped in the third round at the latest
    assert len(session.qa_pairs) == 2
    bad = detektiv("run", "x", "--max-cost", "0")
    assert bad.returncode == 2 and "--max-cost must be more than 0" in bad.stderr


def test_the_local_server_costs_nothing(home: Path, llama_server: LlamaServer) -> None:
    with ScriptedModel(detective) as det:
        _config(home, {"det": det.url + "/v1", "wit": llama_server.url}, prices=False)
        result = detektiv("run", "The sea is salty")
        assert result.returncode == 0, result.stderr
    store = SessionStore.of(Paths.at(home))
    session = store.load(store.list()[0].dir)
    assert session.tokens.total > 0 and session.tokens.cost == 0
    assert session.tokens.unpriced == []
    assert session.tokens.estimated  # the scripted detective reports no usage: said so
    assert "cost $0.00" in detektiv("show", str(session.id)[:8]).stdout


def test_an_evaluation_stops_at_its_cost_limit_and_goes_on_with_a_larger_one(
        home: Path) -> None:
    from engine.evals.folder import RunFolder
    from tests.support.cli import detektiv as run_cli
    from tests.support.evals import detective as judge, knows, witness

    items = [{"claim": f"Claim number {n} holds.", "label": n % 2 == 0} for n in range(4)]
    dataset = home / "claims.jsonl"
    dataset.write_text("".join(json.dumps(item) + "\n" for item in items))
    from engine.evals.items import read_items

    with ScriptedModel(judge(knows(read_items(dataset))), usage=(PROMPT, REPLY)) as det, \
            ScriptedModel(witness, usage=(PROMPT, REPLY)) as wit:
        _config(home, {"det": det.url + "/v1", "wit": wit.url + "/v1"})
        args = ("eval", str(dataset), "--concurrency", "1", "--json")
        stopped = run_cli(*args, "--max-cost", str(12 * _call("det")))
        assert stopped.returncode == 130, stopped.stderr
        assert "stopped at the cost limit" in stopped.stderr
        (folder,) = [RunFolder(d) for d in (home / "data" / "evals").iterdir()]
        judged = {r.item for r in folder.results()}
        assert len(judged) < 4
        summary = json.loads(stopped.stdout.splitlines()[-1])
        assert 0 < summary["cost"] <= 12 * _call("det")
        went_on = run_cli(*args, "--max-cost", "100")
        assert went_on.returncode == 0, went_on.stderr
        assert {r.item for r in folder.results()} >= judged and \
            len({r.item for r in folder.results()}) == 4
