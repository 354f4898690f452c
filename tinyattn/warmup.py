"""``tinyattn warmup``: compile every kernel ahead of time, with a progress bar.

numba compiles a kernel on its first call for new argument types and keeps the machine code in
its on-disk cache; a later process loads it in milliseconds. The first training step on an
empty cache therefore waits for every kernel the step uses to compile. :func:`warmup` does
that work ahead: it runs each family of kernels (one module of :mod:`tinyattn.kernels`,
:data:`~tinyattn.kernels.families.FAMILIES`) on tiny inputs of the chosen dtypes, which
compiles them or loads them from the cache, and compiles both drivers of
:func:`~tinyattn.kernels.parallel.run_tasks`, serial and parallel.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np

from .kernels.families import FAMILIES

DTYPE_CHOICES = {"float32": ("float32",), "float64": ("float64",),
                 "all": ("float32", "float64")}


@dataclass
class WarmupReport:
    """What :func:`warmup` did: ``(family, dtype, seconds)`` per step, and the total time."""

    steps: list[tuple[str, str, float]] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        families = len({family for family, _, _ in self.steps})
        dtypes = ", ".join(dict.fromkeys(dtype for _, dtype, _ in self.steps))
        return (f"tinyattn warmup: {families} kernel families for {dtypes} compiled or loaded "
                f"from numba's cache in {self.seconds:.1f} s")


def _bar(done: int, total: int, label: str, width: int = 24) -> str:
    """A text progress bar: ``done`` of ``total`` steps, then the step's label.

    Examples
    --------
    >>> _bar(1, 4, "float32 matmul", width=8)
    '[##------] 1/4 float32 matmul'
    """
    filled = width * done // total
    count = f"{done:>{len(str(total))}}/{total}"
    return f"[{'#' * filled}{'-' * (width - filled)}] {count} {label}"


def warmup(dtypes: Iterable[str] = ("float32", "float64"),
           families: Iterable[str] | None = None,
           stream: TextIO | None = None) -> WarmupReport:
    """Compile (or load from numba's cache) every kernel of ``families`` for ``dtypes``.

    Parameters
    ----------
    dtypes : iterable of str
        ``"float32"`` and/or ``"float64"``.
    families : iterable of str, optional
        Keys of :data:`FAMILIES`; all of them when None.
    stream : text file, optional
        Where the progress bar goes (``sys.stderr`` when None); redrawn in place on a terminal,
        one line per step otherwise.

    Returns
    -------
    WarmupReport
        The families and dtypes done, with the time each took and the total.
    """
    from .kernels.compile_notice import silenced
    from .kernels.parallel import compile_drivers

    dtypes = [np.dtype(name) for name in dtypes]
    names = list(FAMILIES) if families is None else list(families)
    unknown = [name for name in names if name not in FAMILIES]
    if unknown:
        raise ValueError(f"warmup: unknown kernel families {unknown}; expected some of "
                         f"{sorted(FAMILIES)}")
    if not all(dtype in (np.float32, np.float64) for dtype in dtypes):
        raise ValueError(f"warmup: dtypes must be float32 or float64, got {dtypes}")
    stream = sys.stderr if stream is None else stream
    redraw = stream.isatty()
    total = len(dtypes) * len(names)
    report = WarmupReport()
    start = time.perf_counter()
    with silenced():
        compile_drivers()
        for dtype in dtypes:
            for name in names:
                label = f"{dtype} {name}"
                if redraw:
                    print(f"\r{_bar(len(report.steps), total, label)}\x1b[K", end="",
                          file=stream, flush=True)
                step_start = time.perf_counter()
                FAMILIES[name](dtype)
                report.steps.append((name, str(dtype), time.perf_counter() - step_start))
                line = f"{_bar(len(report.steps), total, label)} {report.steps[-1][2]:.1f} s"
                print(f"\r{line}\x1b[K" if redraw else line, end="" if redraw else "\n",
                      file=stream, flush=True)
    if redraw:
        print(file=stream)
    report.seconds = time.perf_counter() - start
    return report
