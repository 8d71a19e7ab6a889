"""How many calls the detective's and the witness's servers take at once: what an
evaluation's items and a testimony's claims run side by side within."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.routing.router import Router

__all__ = ["role_slots"]


async def role_slots(router: Router, most: int, default: int) -> int:
    """The fewest slots the first detective and witness servers report (no more than `most`,
    whatever a server says), else `default`."""
    found: list[int] = []
    for role in ("detective", "witness"):
        chain = router.chain(role)
        if not chain:
            continue
        try:
            slots = await router.providers[chain[0]].slots()
        except Exception:  # a server that cannot say: the default
            slots = None
        if slots:
            found.append(slots)
    return min(*found, most) if found else default
