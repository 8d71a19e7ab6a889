"""How many calls the detective's and the witness's servers take at once: what an
evaluation's items and a testimony's claims run side by side within."""

from __future__ import annotations

import os
import platform
import sys
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.providers import Provider
    from engine.routing.router import Router

__all__ = ["GPU_PROMPT_RATE", "cpu_bound", "role_slots"]

ACCELERATORS = ("/dev/nvidia0", "/dev/kfd")
"""Devices that say this machine has a GPU a local server may compute on (NVIDIA's, AMD's
ROCm); an Apple Silicon Mac's llama.cpp computes on its GPU too."""


@cache
def _accelerated() -> bool:
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return True
    return any(os.path.exists(device) for device in ACCELERATORS)


GPU_PROMPT_RATE = 1000.0
"""Prompt tokens a second a server must have been measured reading at (llama.cpp's own
`timings`) to be taken for one on a GPU: the 1.5B reads 67 a second on two CPU cores, a
GPU thousands. What tells a tunnel to a GPU server from a server on this machine's CPU."""


def cpu_bound(provider: Provider) -> bool:
    """Whether `provider`'s calls share this machine's CPU cores: the embedded model
    (`Provider.shares_cores`), or a server on this machine (loopback) when the machine has no
    GPU for it and the server was not measured reading prompts at a GPU's rate (a tunnel to
    one elsewhere). Side by side, such calls mostly wait for one another: on two cores, the
    Vitamin B3 request took 160 s with its claims examined one at a time against a
    llama.cpp server on loopback, 185 s four at a time (docs/benchmarks.md, issue 74)."""
    if provider.shares_cores:
        return True
    if not provider.on_this_machine or _accelerated():
        return False
    speed = provider.speed
    return speed is None or speed.prompt < GPU_PROMPT_RATE


async def role_slots(router: Router, most: int, default: int, cores: bool = False) -> int:
    """The fewest slots the first detective and witness servers report (no more than `most`,
    whatever a server says), else `default`. With `cores`, a server whose slots share this
    machine's cores (`cpu_bound`: the embedded model, a server on a machine with no GPU)
    counts as one: side by side, its calls slow each other more than they gain."""
    found: list[int] = []
    for role in ("detective", "witness"):
        chain = router.chain(role)
        if not chain:
            continue
        provider = router.providers[chain[0]]
        if cores and cpu_bound(provider):
            found.append(1)
            continue
        try:
            slots = await provider.slots()
        except Exception:  # a server that cannot say: the default
            slots = None
        if slots:
            found.append(slots)
    return min(*found, most) if found else default
