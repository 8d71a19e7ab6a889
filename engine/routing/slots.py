"""How many calls the detective's and the witness's servers take at once: what an
evaluation's items and a testimony's claims run side by side within."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.routing.router import Router

__all__ = ["role_slots"]


async def role_slots(router: Router, most: int, default: int, cores: bool = False) -> int:
    """The fewest slots the first detective and witness servers report (no more than `most`,
    whatever a server says), else `default`. With `cores`, a server whose slots share this
    machine's cores (`Provider.shares_cores`: the embedded model) counts as one: side by side,
    its calls slow each other more than they gain."""
    found: list[int] = []
    for role in ("detective", "witness"):
        chain = router.chain(role)
        if not chain:
            continue
        provider = router.providers[chain[0]]
        if cores and provider.shares_cores:
            found.append(1)
            continue
        try:
            slots = await provider.slots()
        except Exception:  # a server that cannot say: the default
            slots = None
        if slots:
            found.append(slots)
    return min(*found, most) if found else default
