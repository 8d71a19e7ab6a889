"""The price table and the budget (pure logic; the runs are in tests/cli/test_costs_cli.py)."""

from __future__ import annotations

import pytest

from engine.config.models import Config, Price
from engine.config.providers import ProviderConfig
from engine.costs import Budget, CostLimitReached, call_cost, cost_text, price_for
from engine.models.usage import TokenTally


def _config(prices: dict[str, Price]) -> Config:
    return Config(providers={
        "cloud": ProviderConfig(kind="openai", model="gpt-x", base_url="https://api.invalid/v1",
                                priority=1),
        "other": ProviderConfig(kind="anthropic", model="claude-y", priority=2),
        "box": ProviderConfig(kind="openai", model="m", base_url="http://127.0.0.1:9/v1",
                              priority=3),
        "olla": ProviderConfig(kind="ollama", model="llama3", priority=4),
    }, prices=prices)


def test_a_price_is_found_by_name_then_kind_and_model_then_model() -> None:
    by_name, by_kind, by_model = Price(input=1, output=2), Price(input=3, output=4), \
        Price(input=5, output=6)
    config = _config({"cloud": by_name, "openai:gpt-x": by_kind, "claude-y": by_model})
    assert price_for(config, "cloud") == by_name
    assert price_for(config, "other") == by_model
    del config.prices["cloud"]
    assert price_for(config, "cloud") == by_kind


def test_this_machine_costs_nothing_and_a_cloud_without_a_price_is_unpriced() -> None:
    config = _config({})
    assert price_for(config, "box") == Price(input=0, output=0)
    assert price_for(config, "olla") == Price(input=0, output=0)
    assert price_for(config, "cache") == Price(input=0, output=0)
    assert price_for(config, "cloud") is None and price_for(config, "other") is None
    config.prices["box"] = Price(input=1, output=1)  # a price set wins, even here
    assert price_for(config, "box") == Price(input=1, output=1)


def test_the_cost_of_a_call_and_how_it_is_said() -> None:
    assert call_cost(Price(input=3, output=15), 1_000_000, 100_000) == pytest.approx(4.5)
    assert cost_text(0.00123) == "$0.0012"
    assert cost_text(1.5, ["cloud"], estimated=True) == \
        "$1.50 (some tokens estimated) + unpriced calls to cloud (no [prices] entry)"


def test_a_budget_refuses_the_call_that_may_pass_it_and_then_every_call() -> None:
    budget = Budget(limit=0.01)
    price = Price(input=1000, output=1000)  # a thousand per million: 0.001 a token
    budget.check(prompt_chars=16, reply_tokens=4, prices=[price])  # 8 tokens: 0.008
    budget.spend(0.008)
    with pytest.raises(CostLimitReached, match="cost limit: \\$0.0080 spent of \\$0.01"):
        budget.check(prompt_chars=4, reply_tokens=2, prices=[None, price])  # 3 more: 0.011
    with pytest.raises(CostLimitReached):
        budget.check(prompt_chars=0, reply_tokens=0, prices=[price])  # stopped stays stopped
    free = Budget(limit=0.01)
    free.check(prompt_chars=10**6, reply_tokens=10**6, prices=[None])  # unpriced: no guess


def test_a_tally_adds_and_tells_what_came_after() -> None:
    total = TokenTally(prompt=10, completion=5, cost=0.5)
    before = total.model_copy(deep=True)
    total.add(TokenTally(prompt=3, completion=2, cost=0.25, unpriced=["cloud"], estimated=True))
    assert (total.prompt, total.completion, total.cost) == (13, 7, 0.75)
    after = total.since(before)
    assert (after.prompt, after.completion, after.cost, after.unpriced, after.estimated) == \
        (3, 2, 0.25, ["cloud"], True)


def test_each_round_says_whether_its_own_calls_were_estimated() -> None:
    """An estimated round stays estimated after an earlier one; an exact one after it is exact."""
    total = TokenTally()
    marks = []
    for estimated in (True, True, False, True):
        before = total.model_copy(deep=True)
        total.add(TokenTally(prompt=1, completion=1, estimated=estimated))
        marks.append(total.since(before).estimated)
    assert marks == [True, True, False, True]
    assert total.estimated and total.estimated_calls == 3
    stored = TokenTally.model_validate({"prompt": 4, "estimated": True})  # before the count
    assert stored.estimated_calls == 1


@pytest.mark.parametrize("reported", [("12", 3), (-5, 3), (1.5, 3), (True, 3), (None, None),
                                      (10**30, 3)])
def test_odd_usage_from_a_server_is_estimated_never_trusted(reported: tuple[object, object]
                                                           ) -> None:
    from engine.interrogation.calls import count_tokens
    from engine.providers import Usage
    from engine.routing.collect import Reply
    from engine.routing.events import Attempt

    config = _config({"cloud": Price(input=1_000_000, output=1_000_000)})  # 1 a token
    reply = Reply(attempt=Attempt("cloud", "cloud:gpt-x", False),
                  usage=Usage(*reported))  # type: ignore[arg-type]
    reply.parts = ["x" * 40]
    tally = TokenTally()
    count_tokens(tally, reply, config)
    assert tally.estimated and tally.estimated_calls == 1  # one call, estimated once
    assert tally.prompt == 0  # no fit recorded: 0
    assert tally.completion == (3 if reported[1] == 3 else 10)  # 40 characters: 10
    assert tally.cost == tally.prompt + tally.completion
