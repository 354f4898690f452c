"""Side-by-side timing for the benchmarks: interleaved A/B pairs, median of per-pair ratios.

The machines are shared and noisy, so absolute times drift; a ratio taken from two calls made
back to back holds. Every benchmark script measures tinyattn and its reference with
:func:`compare`, after checking that both produce the same numbers.
"""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class Comparison:
    """Medians of one interleaved A/B measurement (times in milliseconds)."""

    ours_ms: float
    ref_ms: float
    ratio: float  # median over pairs of ours / ref: < 1 means tinyattn is faster
    pairs: int


def compare(
    ours: Callable[[], object],
    reference: Callable[[], object],
    pairs: int = 15,
    warmup: int = 2,
) -> Comparison:
    """Time ``ours`` and ``reference`` in interleaved pairs and return the medians.

    The order inside a pair alternates (A B, B A, ...) so that neither side always runs on a
    cache warmed by the other.
    """
    for _ in range(warmup):
        ours()
        reference()
    ours_times, ref_times = [], []
    for i in range(pairs):
        order = (ours, reference) if i % 2 == 0 else (reference, ours)
        elapsed = {}
        for fn in order:
            start = time.perf_counter()
            fn()
            elapsed[fn] = time.perf_counter() - start
        ours_times.append(elapsed[ours])
        ref_times.append(elapsed[reference])
    ours_arr, ref_arr = np.array(ours_times), np.array(ref_times)
    return Comparison(
        ours_ms=float(np.median(ours_arr) * 1e3),
        ref_ms=float(np.median(ref_arr) * 1e3),
        ratio=float(np.median(ours_arr / ref_arr)),
        pairs=pairs,
    )


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB.

    Read from ``VmHWM`` where Linux provides it: ``ru_maxrss`` survives ``fork`` + ``exec``, so in
    a child process it would report the parent's high-water mark.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def minor_page_faults() -> int:
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def machine_header() -> str:
    """One line naming the date, CPU model, cores and package versions, for the results table."""
    cpu = platform.processor() or "unknown CPU"
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    import numba

    versions = [f"numpy {np.__version__}", f"numba {numba.__version__}"]
    try:
        import torch

        versions.append(f"torch {torch.__version__}")
    except ImportError:
        versions.append("torch not installed")
    date = time.strftime("%Y-%m-%d")
    return f"{date} · {cpu} · {os.cpu_count()} cores · " + ", ".join(versions)
