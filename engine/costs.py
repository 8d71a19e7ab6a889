"""What model calls cost: the price table of the config, and a budget a run may not pass.

A call's cost is its prompt and reply tokens (as the provider reported them, else estimated:
see `count_tokens`) at the price per million tokens found for the provider that answered:
`[prices.NAME]`, else `[prices."KIND:MODEL"]`, else `[prices.MODEL]`. A model on this machine
(the embedded one, Ollama, any server on loopback) with no price costs nothing; any other is
*unpriced*: its calls are counted in tokens and named, never guessed in money. No price is
shipped as fact.

A `Budget` (`--max-cost`) is checked before every call: when what was spent plus what the
next call may cost (its prompt at four characters a token, its whole reply allowance, at the
dearest price of the chain that would answer) would pass it, the call is not made and the run
stops `cancelled` with the reason "cost limit".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.config.models import Config, Price
from engine.config.providers import ProviderConfig
from engine.errors import DetektivError
from engine.models.usage import TokenTally

__all__ = ["Budget", "CostLimitReached", "call_cost", "cost_badge", "cost_text", "money",
           "price_for", "usage_line"]

FREE = Price(input=0, output=0)


class CostLimitReached(DetektivError):
    """The next call would pass the run's `--max-cost`."""


def price_for(config: Config, name: str, provider: ProviderConfig | None = None) -> Price | None:
    """The price of provider `name`'s tokens, `FREE` for one on this machine (or a cached
    answer), None when unpriced."""
    if name == "cache":
        return FREE
    provider = provider or config.providers.get(name)
    keys = [name] if provider is None else [name, f"{provider.kind}:{provider.model}",
                                            provider.model]
    for key in keys:
        if key in config.prices:
            return config.prices[key]
    if provider is not None and provider.is_local:
        return FREE
    return None


def call_cost(price: Price, prompt: int, completion: int, cached: int = 0,
              written: int = 0) -> float:
    """What one call costs: `prompt` tokens in all, of which `cached` were read from the
    provider's cache and `written` written to it (each at its own price when the table gives
    one), and `completion` tokens out (reasoning tokens among them)."""
    cached = min(max(cached, 0), prompt)
    written = min(max(written, 0), prompt - cached)
    fresh = prompt - cached - written
    read_price = price.input if price.cached_input is None else price.cached_input
    write_price = price.input if price.cache_write is None else price.cache_write
    return (fresh * price.input + cached * read_price + written * write_price
            + completion * price.output) / 1_000_000


def money(amount: float) -> str:
    """`$0.0123`: four decimals below a cent, two above."""
    return f"${amount:.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"


def cost_text(cost: float, unpriced: Iterable[str] = (), estimated: bool = False) -> str:
    """What calls cost, as every front end says it: `$0.0123`, then what it leaves out."""
    text = money(cost)
    if estimated:
        text += " (some tokens estimated)"
    names = list(unpriced)
    if names:
        text += f" + unpriced calls to {', '.join(names)} (no [prices] entry)"
    return text


def usage_line(tally: TokenTally) -> str:
    """`1,234 tokens in (1,000 cached), 56 out (40 reasoning) · cost $0.0012`: a round's, a
    session's (the parts in brackets only when the providers reported them)."""
    cached = f" ({tally.cached:,} cached)" if tally.cached else ""
    reasoning = f" ({tally.reasoning:,} reasoning)" if tally.reasoning else ""
    return (f"{tally.prompt:,} tokens in{cached}, {tally.completion:,} out{reasoning} · cost "
            f"{cost_text(tally.cost, tally.unpriced, tally.estimated)}")


def cost_badge(tally: TokenTally) -> str:
    """`cost: $0.0012 +? · ~1,234 tok`: the short form for a status line (`+?`: calls with no
    price left out; `~`: some tokens estimated)."""
    return (f"cost: {money(tally.cost)}{' +?' if tally.unpriced else ''} · "
            f"{'~' if tally.estimated else ''}{tally.total:,} tok")


@dataclass
class Budget:
    """At most `limit` (in the prices' currency) for the calls it is shared by."""

    limit: float
    spent: float = 0.0
    stopped: bool = False

    def check(self, prompt_chars: int, reply_tokens: int, prices: Iterable[Price | None]) -> None:
        """Raise `CostLimitReached` when the next call may pass the limit."""
        known = [p for p in prices if p is not None]
        dearest = max(known, key=lambda p: p.input + p.output, default=FREE)
        projected = call_cost(dearest, (prompt_chars + 3) // 4, reply_tokens)
        if self.stopped or self.spent + projected > self.limit:
            self.stopped = True
            raise CostLimitReached(
                f"cost limit: {money(self.spent)} spent of {money(self.limit)}, and the next "
                f"call may cost up to {money(projected)}")

    def spend(self, amount: float) -> None:
        self.spent += amount
