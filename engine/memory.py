"""Freed memory given back to the system during a long run.

glibc's malloc keeps the memory a process frees for its next allocations: an evaluation of
20,000 claims frees as much as it allocates (every item's session, prompts and replies), but
the pieces it keeps scatter and its resident size creeps up, ~3 KB a claim, while the Python
heap stays flat (measured with `sys.getallocatedblocks` and tracemalloc). `malloc_trim(0)`
returns the free pages; called every few hundred items it costs a millisecond or two, and
the resident size stays flat. Elsewhere (musl, macOS) there is nothing to call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["give_back_memory"]


@functools.cache
def _trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim  # type: ignore[no-any-return]


def give_back_memory() -> None:
    """Return the free pages of the C heap to the system, where the C library can."""
    trim = _trim()
    if trim is not None:
        trim(0)
