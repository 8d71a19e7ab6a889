"""Running an interrogation in-process for engine tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine import Config, Paths
from engine.interrogation.loop import Interrogation
from engine.models.events import (
    InterrogationEvent,
)
from engine.routing.router import Router
from engine.storage.sessions import SessionStore

EQUAL_POOLING = Path(__file__).resolve().parent.parent / "data" / "pooling-equal.json"
"""A pool whose readings each weigh the same (the mean of their log-odds): the tests' rules
stay the rules they state, whatever weights the shipped pool was fitted to."""

#: Small budgets so a round takes a few seconds on the tiny model.
FAST = {
    "pooling": str(EQUAL_POOLING),
    "max_gaps": 1,
    "question_max_tokens": 24,
    "answer_max_tokens": 32,
    "analysis_max_tokens": 160,
    "audit_max_tokens": 200,
    "temperature": 0,
    "rounds_samples": 1,  # a tiny model's sampled answers show nothing: one, at temperature 0
}


async def interrogate(
    config: Config, paths: Paths, store: SessionStore, hypothesis: str = "Water boils at 100 C",
    limit: int = 5,
) -> tuple[list[InterrogationEvent], Path]:
    router = Router(config, paths, persist=False)
    journal = store.create(hypothesis, limit)
    try:
        events = [e async for e in Interrogation(router, journal, config.interrogation).run()]
    finally:
        await router.aclose()
    return events, journal.directory


def make_config(providers: dict[str, str], detective: list[str], witness: list[str],
                **settings: Any) -> Config:
    return Config.model_validate({
        "providers": {
            name: {"kind": "openai", "model": "gemma", "base_url": url, "priority": i + 1,
                   "first_token_timeout": 20, "stall_timeout": 10}
            for i, (name, url) in enumerate(providers.items())
        },
        "roles": {"detective": detective, "witness": witness},
        "interrogation": {**FAST, **settings},
    })
