"""SelfCheckGPT's own prompt scorer as a baseline of `detektiv eval --baselines` (issue 72):
the peer people use, run unchanged beside detektiv's examination.

    why = missing()                                   # None, or why it cannot run (install)
    verdict, p_false = await score(router, claim, samples)

Its `SelfCheckAPIPrompt` (the `selfcheckgpt` package, 0.1.7) asks, for each sampled answer,
"Context: {sample} Sentence: {claim} Is the sentence supported by the context above? Answer
Yes or No." at temperature 0 with five tokens, reads "yes" as 0, "no" as 1 and anything else
as 0.5, and takes the mean: the claim's P(false). Here its OpenAI client is pointed at the
detective's server (an OpenAI-compatible one: llama.cpp, vLLM, OpenAI…), so the same model
reads the same samples the sessions read. Its module imports only openai, numpy and tqdm,
while the package's setup requires torch, transformers and spacy, which this scorer never
uses: it is installed without its dependencies (`pip install --no-deps selfcheckgpt==0.1.7`;
`make install` does it), and where it is missing the baseline is said to be, with that line.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import threading
from collections.abc import Sequence
from typing import Any

from engine.errors import DetektivError
from engine.routing.router import Router

__all__ = ["INSTALL", "SelfCheckFailed", "SelfCheckUnavailable", "missing", "score"]

INSTALL = "pip install openai && pip install --no-deps 'selfcheckgpt==0.1.7'"
"""How to install the scorer (its heavy dependencies are never used by it)."""

_lock = threading.Lock()


class SelfCheckUnavailable(DetektivError):
    """SelfCheckGPT's scorer cannot run here: not installed, or no OpenAI-compatible
    detective to point it at."""


class SelfCheckFailed(DetektivError):
    """SelfCheckGPT's scorer raised (its server failed, or answered off the wire): the
    baseline's unit fails with the reason, as a provider failure would."""


def missing() -> str | None:
    """Why SelfCheckGPT's prompt scorer cannot be imported, with the install line; None when
    it can."""
    try:
        from selfcheckgpt.modeling_selfcheck_apiprompt import (  # noqa: F401
            SelfCheckAPIPrompt,
        )
    except Exception as exc:  # noqa: BLE001 — any import failure: the baseline is missing
        return (f"SelfCheckGPT's prompt scorer is not installed ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else 'no module'}); install it with: "
                f"{INSTALL}")
    return None


class _Seen(set[str]):
    """The scorer's record of replies it could not read, which it prints to stdout the first
    time: read as seen, so it prints nothing (its reading, 0.5, is unchanged)."""

    def __contains__(self, item: object) -> bool:
        return True


def _scorer(base_url: str, api_key: str, model: str, timeout: float) -> Any:
    """SelfCheckGPT's scorer with its client pointed at `base_url` (its constructor makes a
    client from the environment: given ours instead, under a lock)."""
    import selfcheckgpt.modeling_selfcheck_apiprompt as module
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout,
                    max_retries=1)
    with _lock, contextlib.redirect_stdout(io.StringIO()):  # it announces itself on stdout
        made = module.OpenAI
        module.OpenAI = lambda: client
        try:
            scorer = module.SelfCheckAPIPrompt(client_type="openai", model=model)
        finally:
            module.OpenAI = made
    scorer.not_defined_text = _Seen()
    return scorer


async def score(router: Router, claim: str, samples: Sequence[str]) -> tuple[str, float]:
    """The claim's verdict and P(false) by SelfCheckGPT's prompt scorer over `samples`, the
    model the detective's chain starts with reading them. `SelfCheckUnavailable` when it
    cannot run."""
    why = missing()
    if why is not None:
        raise SelfCheckUnavailable(why)
    chain = router.chain("detective")
    provider = router.providers[chain[0]] if chain else None
    config = provider.config if provider is not None else None
    if config is None or config.kind != "openai" or not config.base_url:
        raise SelfCheckUnavailable("SelfCheckGPT's scorer speaks the OpenAI wire: its "
                                   "detective must be an OpenAI-compatible server "
                                   "(kind = \"openai\" with a base_url)")
    if not samples:
        raise SelfCheckUnavailable("no sampled answer to read the claim against")
    key = provider.api_key() if provider is not None else ""
    scorer = _scorer(config.base_url, key or "", config.model, float(config.timeout or 60))
    try:
        scores = await asyncio.to_thread(scorer.predict, [claim], list(samples))
        p_false = round(float(scores[0]), 4)
    except Exception as exc:  # noqa: BLE001 — its client's errors, or a reply off the wire
        detail = str(exc).splitlines()[0] if str(exc) else ""
        raise SelfCheckFailed(f"SelfCheckGPT's scorer failed: {type(exc).__name__}"
                              + (f": {detail[:200]}" if detail else "")) from None
    verdict = "false" if p_false > 0.6 else "true" if p_false < 0.4 else "undetermined"
    return verdict, p_false
