"""Shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def percentiles(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median, p95) in milliseconds of `repeat` calls."""
    runs = []
    for _ in range(repeat):
        begin = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - begin) * 1000)
    runs.sort()
    return statistics.median(runs), runs[min(len(runs) - 1, int(len(runs) * 0.95))]
