"""Every kernel family (a module of :mod:`tinyattn.kernels`) and how to run its kernels once.

Running a family's kernels on tiny inputs of a dtype compiles them for that dtype, or loads them
from numba's cache: the inputs have the layouts the ops pass (a transposed weight, a transposed
A), so a model of that dtype then compiles none of them. A family's backward runs first
wherever its inputs can be made without the forward: a process that has just started compiling
a forward kernel needs the backward next, from its compile-ahead helper (:mod:`.compile_ahead`).

Whether a kernel runs on its serial or its parallel driver depends on the size of its input;
the rest of what it compiles (its task functions and their launcher) serves both, and
:func:`~.parallel.compile_drivers` compiles the two drivers. ``tinyattn warmup`` runs every
family (:mod:`tinyattn.warmup`); the compile-ahead helper runs the families a process starts to
compile or expects to run.

The kernels of ``exp``, ``parallel``, ``reductions`` and ``simd`` are helpers, compiled into the
kernels that call them (:data:`HELPER_MODULES`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Modules of tinyattn.kernels whose jitted functions are only called by other kernels.
HELPER_MODULES = ("exp", "parallel", "reductions", "simd")


def _matmul(dtype: np.dtype) -> None:
    from .matmul import MR, TILE, matmul

    nr = TILE.columns(dtype.itemsize)
    rows, inner = 4 * MR, 64
    a = np.ones((2, rows, inner), dtype)
    matmul(a[:, :MR, :], np.ones((inner, 3), dtype))  # tiny: the serial loop
    matmul(a, np.ones((inner, nr), dtype))  # register tile, B read in place
    matmul(a, np.ones((inner, nr + 1), dtype))  # B packed from its rows
    matmul(a, np.ones((nr + 1, inner), dtype).T)  # B packed from its columns (x @ Wᵀ)
    matmul(a.swapaxes(1, 2).copy().swapaxes(1, 2), np.ones((inner, nr), dtype))  # A transposed


def _matvec(dtype: np.dtype) -> None:
    from .matvec import few_rows_product

    index, rows = np.zeros(1, np.int64), np.ones((1, 2, 4), dtype)
    for b in (np.ones((1, 3, 4), dtype).swapaxes(1, 2), np.ones((1, 4, 3), dtype)):  # Wᵀ, rows
        few_rows_product(rows, b, index, index, np.empty((1, 2, 3), dtype), np.ones(3, dtype))


def _attention(dtype: np.dtype) -> None:
    from .attention import attention_backward, attention_forward

    q = np.ones((1, 2, 5, 4), dtype)
    bias = np.zeros((1, 1, 5, 5), dtype)
    out, lse = np.zeros((1, 2, 5, 4), dtype), np.zeros((1, 2, 5), dtype)
    attention_backward(q, q, q, out, lse, out, bias=bias, is_causal=True, dropout_p=0.5, seed=1)
    attention_forward(q, q, q, bias=bias, is_causal=True, dropout_p=0.5, seed=1)


def _softmax(dtype: np.dtype) -> None:
    from . import softmax

    x = np.ones((2, 3), dtype)
    softmax.softmax_backward(softmax.softmax_forward(x), x)
    softmax.log_softmax_backward(softmax.log_softmax_forward(x), x)


def _layer_norm(dtype: np.dtype) -> None:
    from .layer_norm import layer_norm_backward, layer_norm_forward

    x, weight = np.ones((2, 3), dtype), np.ones(3, dtype)
    layer_norm_backward(x, x, weight, np.zeros(2, dtype), np.ones(2, dtype))  # mean, rstd
    layer_norm_forward(x, weight, weight, 1e-5)


def _cross_entropy(dtype: np.dtype) -> None:
    from .cross_entropy import cross_entropy_backward, cross_entropy_forward

    logits, target = np.ones((2, 3), dtype), np.array([0, 2])
    cross_entropy_backward(logits, target, np.ones(2, dtype), np.ones(2, dtype))  # lse, rows
    cross_entropy_forward(logits, target)


def _embedding(dtype: np.dtype) -> None:
    from .embedding import embedding_backward, embedding_forward

    indices = np.array([[0, 2]])
    embedding_backward(np.ones((1, 2, 4), dtype), indices, 3)
    embedding_forward(np.ones((3, 4), dtype), indices)


def _gelu(dtype: np.dtype, approximate: str = "none") -> None:
    from .gelu import gelu_backward, gelu_forward

    x = np.ones(3, dtype)
    gelu_backward(x, x, approximate)
    gelu_forward(x, approximate)


def _gelu_tanh(dtype: np.dtype) -> None:
    _gelu(dtype, "tanh")


def _dropout(dtype: np.dtype) -> None:
    from .dropout import dropout_apply

    dropout_apply(np.ones(3, dtype), seed=1, p=0.5)


def _counter_rng(dtype: np.dtype) -> None:
    from .counter_rng import dropout_keep_mask

    dropout_keep_mask(1, 1, 1, 2, 2, 0.5)  # the same kernel for every dtype


def _adamw(dtype: np.dtype) -> None:
    from .adamw import adamw_step

    arrays = [[np.ones(3, dtype)] for _ in range(4)]
    adamw_step(*arrays, step=1, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01,
               decoupled=True)


def _column_sums(dtype: np.dtype) -> None:
    from .column_sums import _PARALLEL_MIN_ELEMENTS, column_sums

    column_sums(np.ones((2, 3), dtype))  # serial
    column_sums(np.ones((2, _PARALLEL_MIN_ELEMENTS), dtype))  # parallel


def _row_sums(dtype: np.dtype) -> None:
    from .row_sums import _PARALLEL_MIN_ELEMENTS, row_sums

    row_sums(np.ones((2, 3), dtype), 1.0)  # serial (every kind of terms: one kernel)
    row_sums(np.ones((2, _PARALLEL_MIN_ELEMENTS), dtype), 1.0)  # parallel


def _cumsum(dtype: np.dtype) -> None:
    from .cumsum import _PARALLEL_MIN_ELEMENTS, cumsum_rows

    cumsum_rows(np.ones((2, 3), dtype))  # serial
    cumsum_rows(np.ones((2, _PARALLEL_MIN_ELEMENTS), dtype))  # parallel


def _elementwise(dtype: np.dtype) -> None:
    from .elementwise import run_binary, run_select

    run_binary("add", np.ones(3, dtype), np.ones(3, dtype), parallel=False)  # every op and layout
    run_select(np.ones(3, bool), np.ones(3, dtype), np.zeros((), dtype), parallel=False)


def _top_k(dtype: np.dtype) -> None:
    from .top_k import _PARALLEL_MIN_ELEMENTS, top_k

    top_k(np.ones((1, 3), dtype), 2, largest=True)  # serial
    top_k(np.ones((2, _PARALLEL_MIN_ELEMENTS), dtype), 1, largest=False)  # parallel


def _special(dtype: np.dtype) -> None:
    from .special import _PARALLEL_MIN_ELEMENTS, erf, sigmoid

    erf(np.ones(3, dtype))
    sigmoid(np.ones(3, dtype))  # serial
    sigmoid(np.ones(_PARALLEL_MIN_ELEMENTS, dtype))  # parallel


#: Every kernel family (a module of tinyattn.kernels) and how to run its kernels once.
FAMILIES: dict[str, Callable[[np.dtype], None]] = {
    "matmul": _matmul, "matvec": _matvec, "attention": _attention, "softmax": _softmax,
    "layer_norm": _layer_norm, "cross_entropy": _cross_entropy, "embedding": _embedding,
    "gelu": _gelu, "gelu_tanh": _gelu_tanh,
    "dropout": _dropout, "counter_rng": _counter_rng, "adamw": _adamw,
    "column_sums": _column_sums, "row_sums": _row_sums, "cumsum": _cumsum,
    "elementwise": _elementwise, "special": _special, "top_k": _top_k,
}
