"""Products of fewer rows than the register tile (the decoding regime): numpy, the tile's bits,
float64 sums of the dot products, threads, non-finite values, and B read in place."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_helpers import numba_threads

from tinyattn.kernels import matmul as matmul_module
from tinyattn.kernels import matvec
from tinyattn.kernels.matmul import MR, matmul
from tinyattn.kernels.matvec import column_width, few_rows_product

DTYPES = [np.float32, np.float64]
REL_TOL = {np.float32: 1e-5, np.float64: 1e-12}


def weight_and_layouts(rng, n, k, dtype):
    """A ``(N, K)`` weight, and B = Wᵀ two ways: the transposed view, and C-contiguous rows."""
    w = rng.standard_normal((n, k)).astype(dtype)
    return {"transposed": w.T, "rows": np.ascontiguousarray(w.T)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["transposed", "rows"])
@pytest.mark.parametrize("m, k, n", [(1, 768, 1000), (MR - 1, 300, 130), (2, 4096, 9),
                                     (3, 64, 2050), (1, 17, 4097), (1, 128, 65), (2, 3, 4)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_few_rows_match_numpy_in_float64(dtype, layout, m, k, n, with_bias):
    rng = np.random.default_rng(m * k + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = weight_and_layouts(rng, n, k, dtype)[layout]
    bias = rng.standard_normal(n).astype(dtype) if with_bias else None
    ours = matmul(a, b, bias)
    exact = a.astype(np.float64) @ b.astype(np.float64) + (0 if bias is None else bias)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + 1
    assert ours.shape == (m, n) and ours.dtype == dtype and ours.flags.c_contiguous
    assert np.all(np.abs(ours - exact) <= REL_TOL[dtype] * scale)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_of_b_give_the_tiles_bits(dtype):
    """B in rows: each element is the register tile's chain of fused multiply-adds along k, in
    the same order, so the rows of a product of MR rows come out bit for bit the same alone."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((MR, 700)).astype(dtype)
    b = rng.standard_normal((700, 3 * matmul_module.TILE.columns(8))).astype(dtype)
    bias = rng.standard_normal(b.shape[1]).astype(dtype)
    tiled = matmul(a, b, bias)  # MR rows: the register tile
    for i in range(MR):
        np.testing.assert_array_equal(matmul(a[i:i + 1], b, bias), tiled[i:i + 1])


def test_dot_products_are_summed_in_float64_then_rounded_once():
    """B a transposed view: float32 products, summed in float64, rounded once. The float64 sum
    is reassociated in vector lanes, which moves it by far less than a float32 ulp, so the
    result is the rounded float64 sum (or, at a rounding tie, its neighbour)."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 5000)).astype(np.float32)
    w = rng.standard_normal((300, 5000)).astype(np.float32)
    ours = matmul(a, w.T)
    products = (a[:, None, :] * w[None, :, :]).astype(np.float64)  # float32 products, exact
    rounded = np.sum(products, axis=2).astype(np.float32)
    ulps = np.abs(ours.view(np.int32).astype(np.int64) - rounded.view(np.int32))
    assert ulps.max() <= 1 and np.mean(ulps == 0) > 0.99
    float32_chain = np.zeros((2, 300), np.float32)  # what a float32 accumulator gives
    for p in range(0, 5000, 500):
        float32_chain += a[:, p:p + 500] @ w[:, p:p + 500].T
    exact = a.astype(np.float64) @ w.T.astype(np.float64)
    assert np.abs(ours - exact).max() < np.abs(float32_chain - exact).max()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["transposed", "rows"])
def test_results_do_not_depend_on_threads_or_blocks(dtype, layout, monkeypatch):
    """An element is computed whole by one task: any thread count or column block gives the
    same bits (batched, as attention over a key cache: (heads, 1, D) @ (heads, D, S))."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((12, 1, 64)).astype(dtype)
    keys = rng.standard_normal((12, 700, 64)).astype(dtype)
    b = keys.swapaxes(1, 2) if layout == "transposed" else np.ascontiguousarray(
        keys.swapaxes(1, 2))
    with numba_threads(1):
        reference = matmul(a, b)
    np.testing.assert_allclose(reference, a @ b, rtol=1e-4, atol=1e-4)
    with numba_threads(2):
        np.testing.assert_array_equal(matmul(a, b), reference)
        for tasks_per_thread in (1, 7, 64):
            monkeypatch.setattr(matvec, "_TASKS_PER_THREAD", tasks_per_thread)
            monkeypatch.setattr(matvec, "_PARALLEL_MIN_MACS", 0)
            np.testing.assert_array_equal(matmul(a, b), reference)


@pytest.mark.parametrize("layout", ["transposed", "rows"])
def test_inf_and_nan_propagate_like_numpy(layout):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 300))
    b = weight_and_layouts(rng, 200, 300, np.float64)[layout]
    a[0, 5], a[1, 7] = np.inf, np.nan
    b[9, 3], b[11, 4] = -np.inf, np.inf  # column 3: inf · a[0, 9]; column 4 also meets a's inf
    with np.errstate(invalid="ignore"):
        ours, expected = matmul(a, b), a @ b
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(expected))
    np.testing.assert_array_equal(np.isposinf(ours), np.isposinf(expected))
    np.testing.assert_array_equal(np.isneginf(ours), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(ours[finite], expected[finite], rtol=1e-12)


def test_a_transposed_weight_is_read_in_place(monkeypatch):
    """``x @ Wᵀ`` with one row reads W where it lies: no transposed copy, no packed panels (a
    GPT-2 head is 154 MB)."""
    seen = []

    def recorded(task, n_tasks, a, b, *args, **options):
        seen.append((task.py_func.__name__, b))
        return run_tasks(task, n_tasks, a, b, *args, **options)

    run_tasks = matvec.run_tasks
    monkeypatch.setattr(matvec, "run_tasks", recorded)
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3000, 400)).astype(np.float32)
    x = rng.standard_normal((1, 400)).astype(np.float32)
    np.testing.assert_allclose(matmul(x, w.T), x @ w.T, rtol=1e-4, atol=1e-4)
    [(name, b)] = seen
    assert name == "_dots_block" and np.shares_memory(b, w) and b.flags.c_contiguous


def test_the_tiny_serial_loop_and_the_tile_keep_their_shapes(monkeypatch):
    """Only products of fewer than MR rows come here, tiny ones too (the serial loop would
    copy a transposed B first)."""
    calls = []
    monkeypatch.setattr(matmul_module, "few_rows_product",
                        lambda *args: calls.append(args[4].shape) or few_rows_product(*args))
    rng = np.random.default_rng(6)
    for m, k, n in [(2, 3, 4), (MR - 1, 200, 100), (MR, 200, 100)]:
        a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        np.testing.assert_allclose(matmul(a, b), a @ b, rtol=1e-12)
    assert calls == [(1, 2, 4), (1, MR - 1, 100)]


def test_column_width_gives_whole_lines_of_rows_and_every_thread_work():
    assert column_width(1, 1000, parallel=False, align=64) == 1000
    width = column_width(1, 1000, parallel=True, align=64)
    assert width % 64 == 0 and -(-1000 // width) >= 2  # at least two tasks for two threads
    assert column_width(100, 5, parallel=True, align=1) == 5  # enough matrices: one task each
