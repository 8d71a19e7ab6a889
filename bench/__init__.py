"""Shared by the benchmarks."""

from __future__ import annotations

import resource
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


def peak_rss_mb() -> float:
    """This process's own peak resident memory, in MB: VmHWM, the high-water mark of its
    address space since it was started. Not `ru_maxrss`: on Linux that keeps the RSS of the
    process that spawned this one (the kernel carries it over `exec`), so a child measured
    after a parent that held 140 MB reads 140 MB however little it used itself."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux
