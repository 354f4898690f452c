"""``tinyattn warmup``: compile every kernel ahead of time, with a progress bar.

numba compiles a kernel on its first call for new argument types and keeps the machine code in
its on-disk cache; a later process loads it in milliseconds. The first training step on an
empty cache therefore waits for every kernel the step uses to compile. :func:`warmup` does
that work ahead: it calls each family of kernels (one module of :mod:`tinyattn.kernels`) on
tiny inputs of the chosen dtypes, which compiles them or loads them from the cache. It also
compiles both drivers of :func:`~tinyattn.kernels.parallel.run_tasks`, serial and parallel:
which one a kernel takes depends on the size of its input, and the rest of what it compiles
(its task functions and their launcher) serves both.

The kernels of ``exp``, ``parallel``, ``reductions`` and ``simd`` are helpers, compiled into the
kernels that call them (:data:`HELPER_MODULES`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np

#: Modules of tinyattn.kernels whose jitted functions are only called by other kernels.
HELPER_MODULES = ("exp", "parallel", "reductions", "simd")

DTYPE_CHOICES = {"float32": ("float32",), "float64": ("float64",),
                 "all": ("float32", "float64")}


def _matmul(dtype: np.dtype) -> None:
    from .kernels.matmul import MR, TILE, matmul

    nr = TILE.columns(dtype.itemsize)
    rows, inner = 4 * MR, 64
    a = np.ones((2, rows, inner), dtype)
    matmul(a[:, :2, :], np.ones((inner, 3), dtype))  # tiny: the serial loop
    matmul(a, np.ones((inner, nr), dtype))  # register tile, B read in place
    matmul(a, np.ones((inner, nr + 1), dtype))  # B packed from its rows
    matmul(a, np.ones((nr + 1, inner), dtype).T)  # B packed from its columns (x @ Wᵀ)
    matmul(a.swapaxes(1, 2).copy().swapaxes(1, 2), np.ones((inner, nr), dtype))  # A transposed


def _attention(dtype: np.dtype) -> None:
    from .kernels.attention import attention_backward, attention_forward

    q = np.ones((1, 2, 5, 4), dtype)
    bias = np.zeros((1, 1, 5, 5), dtype)
    out, lse = attention_forward(q, q, q, bias=bias, is_causal=True, dropout_p=0.5, seed=1)
    attention_backward(q, q, q, out, lse, out, bias=bias, is_causal=True, dropout_p=0.5, seed=1)


def _softmax(dtype: np.dtype) -> None:
    from .kernels import softmax

    x = np.ones((2, 3), dtype)
    softmax.softmax_backward(softmax.softmax_forward(x), x)
    softmax.log_softmax_backward(softmax.log_softmax_forward(x), x)


def _layer_norm(dtype: np.dtype) -> None:
    from .kernels.layer_norm import layer_norm_backward, layer_norm_forward

    x, weight = np.ones((2, 3), dtype), np.ones(3, dtype)
    y, mean, rstd = layer_norm_forward(x, weight, weight, 1e-5)
    layer_norm_backward(y, x, weight, mean, rstd)


def _cross_entropy(dtype: np.dtype) -> None:
    from .kernels.cross_entropy import cross_entropy_backward, cross_entropy_forward

    logits, target = np.ones((2, 3), dtype), np.array([0, 2])
    loss, lse = cross_entropy_forward(logits, target)
    cross_entropy_backward(logits, target, lse, np.ones_like(loss))


def _embedding(dtype: np.dtype) -> None:
    from .kernels.embedding import embedding_backward, embedding_forward

    indices = np.array([[0, 2]])
    out = embedding_forward(np.ones((3, 4), dtype), indices)
    embedding_backward(out, indices, 3)


def _gelu(dtype: np.dtype) -> None:
    from .kernels.gelu import gelu_backward, gelu_forward

    x = np.ones(3, dtype)
    for approximate in ("none", "tanh"):
        gelu_backward(x, gelu_forward(x, approximate), approximate)


def _dropout(dtype: np.dtype) -> None:
    from .kernels.dropout import dropout_apply

    dropout_apply(np.ones(3, dtype), seed=1, p=0.5)


def _counter_rng(dtype: np.dtype) -> None:
    from .kernels.counter_rng import dropout_keep_mask

    dropout_keep_mask(1, 1, 1, 2, 2, 0.5)  # the same kernel for every dtype


def _adamw(dtype: np.dtype) -> None:
    from .kernels.adamw import adamw_step

    arrays = [[np.ones(3, dtype)] for _ in range(4)]
    adamw_step(*arrays, step=1, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01,
               decoupled=True)


def _column_sums(dtype: np.dtype) -> None:
    from .kernels.column_sums import _PARALLEL_MIN_ELEMENTS, column_sums

    column_sums(np.ones((2, 3), dtype))  # serial
    column_sums(np.ones((2, _PARALLEL_MIN_ELEMENTS), dtype))  # parallel


def _elementwise(dtype: np.dtype) -> None:
    from .kernels.elementwise import run_binary, run_select

    run_binary("add", np.ones(3, dtype), np.ones(3, dtype), parallel=False)  # every op and layout
    run_select(np.ones(3, bool), np.ones(3, dtype), np.zeros((), dtype), parallel=False)


def _special(dtype: np.dtype) -> None:
    from .kernels.special import erf

    erf(np.ones(3, dtype))


#: Every kernel family (a module of tinyattn.kernels) and how to run its kernels once.
FAMILIES: dict[str, Callable[[np.dtype], None]] = {
    "matmul": _matmul, "attention": _attention, "softmax": _softmax, "layer_norm": _layer_norm,
    "cross_entropy": _cross_entropy, "embedding": _embedding, "gelu": _gelu,
    "dropout": _dropout, "counter_rng": _counter_rng, "adamw": _adamw,
    "column_sums": _column_sums, "elementwise": _elementwise, "special": _special,
}


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
