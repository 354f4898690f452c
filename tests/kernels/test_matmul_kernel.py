"""The Numba matmul kernel against its numpy twin: shapes, layouts, dtypes, determinism."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyattn.kernels import matmul as matmul_module
from tinyattn.kernels.matmul import MR, matmul, matmul_numpy

ROOT = Path(__file__).resolve().parents[2]
DTYPES = [np.float32, np.float64]
REL_TOL = {np.float32: 1e-5, np.float64: 1e-12}


def random(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def assert_matches_numpy(a: np.ndarray, b: np.ndarray) -> None:
    """Same shape, dtype and C order as np.matmul, and equal up to rounding.

    The bound is relative to ``|a| @ |b|``, the scale of each output's summands, so it holds
    for outputs that are sums cancelling to near zero.
    """
    ours, expected = matmul(a, b), matmul_numpy(a, b)
    assert ours.shape == expected.shape
    assert ours.dtype == expected.dtype
    assert ours.flags.c_contiguous
    scale = matmul_numpy(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    error = np.abs(ours.astype(np.float64) - expected)
    assert np.all(error <= REL_TOL[a.dtype.type] * scale + 1e-30), float(np.max(error))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [1, 3, 4, 17, 65])
@pytest.mark.parametrize("k", [1, 3, 33, 127, 600])
@pytest.mark.parametrize("n", [1, 3, 5, 49, 100])
def test_odd_sizes_match_numpy(dtype, m, k, n):
    rng = np.random.default_rng(m * 10_000 + k * 100 + n)
    assert_matches_numpy(random(rng, (m, k), dtype), random(rng, (k, n), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((2, 1, 5, 7), (3, 7, 4)),
        ((3, 7, 4), (2, 1, 4, 6)),
        ((5, 9), (4, 9, 3)),
        ((4, 9, 3), (3, 70)),
        ((64, 64, 32), (64, 32, 64)),
        ((2, 3, 70, 40), (1, 3, 40, 50)),
    ],
)
def test_batch_dims_broadcast_like_numpy(dtype, shape_a, shape_b):
    rng = np.random.default_rng(1)
    assert_matches_numpy(random(rng, shape_a, dtype), random(rng, shape_b, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, k, n", [(3, 5, 2), (130, 70, 40), (64, 700, 33)])
def test_transposed_views_are_read_in_place(dtype, m, k, n):
    rng = np.random.default_rng(2)
    a_t = random(rng, (k, m), dtype).T  # F-ordered (m, k) view
    b_t = random(rng, (n, k), dtype).T  # F-ordered (k, n) view
    a_bt = random(rng, (3, k, m), dtype).swapaxes(-1, -2)
    b_bt = random(rng, (3, n, k), dtype).swapaxes(-1, -2)
    a, b = np.ascontiguousarray(a_t), np.ascontiguousarray(b_t)
    for left, right in [(a_t, b), (a, b_t), (a_t, b_t), (a_bt, b_bt), (a, b_bt), (a_bt, b)]:
        assert_matches_numpy(left, right)


@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_path_handles_every_edge_tile(dtype, monkeypatch):
    """Sizes around the micro-tile (MR rows, 16 or 8 columns) and k-block (256) boundaries.

    ``_TINY_MACS = 0`` sends even the smallest of them through packing and the vector tile.
    """
    monkeypatch.setattr(matmul_module, "_TINY_MACS", 0)
    nr = 2 * 32 // np.dtype(dtype).itemsize
    rng = np.random.default_rng(6)
    for m in (MR, MR + 1, 2 * MR - 1, 13 * MR + 5):
        for n in (1, nr - 1, nr, nr + 1, 8 * nr + 3):
            for k in (1, 255, 257, 513):
                a, b = random(rng, (m, k), dtype), random(rng, (k, n), dtype)
                assert_matches_numpy(a, b)
    a_t = random(rng, (300, 2, 19), dtype).transpose(1, 2, 0)  # (2, 19, 300), k strided
    b_t = random(rng, (2, 37, 300), dtype).swapaxes(-1, -2)  # (2, 300, 37), columns strided
    assert_matches_numpy(a_t, b_t)


@pytest.mark.parametrize("dtype", DTYPES)
def test_odd_strides_are_handled(dtype):
    rng = np.random.default_rng(3)
    a = random(rng, (4, 40, 90), dtype)[::2, ::3, 1::2]  # (2, 14, 45), no unit stride
    b = random(rng, (90, 60), dtype)[::-2, ::2]  # (45, 30), negative stride
    assert_matches_numpy(a, b)
    assert_matches_numpy(a, np.broadcast_to(random(rng, (45, 1), dtype), (45, 30)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape_a, shape_b",
    [((0, 5), (5, 3)), ((4, 5), (5, 0)), ((4, 0), (0, 3)), ((0, 4, 5), (5, 3)),
     ((2, 0, 5), (2, 5, 3)), ((3, 1, 4, 0), (2, 0, 6))],
)
def test_empty_dims_give_empty_or_zero_results(dtype, shape_a, shape_b):
    a, b = np.ones(shape_a, dtype), np.ones(shape_b, dtype)
    ours = matmul(a, b)
    assert ours.shape == matmul_numpy(a, b).shape
    assert ours.dtype == dtype
    np.testing.assert_array_equal(ours, matmul_numpy(a, b))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, k, n", [(5, 7, 3), (70, 200, 50)])
def test_inf_and_nan_propagate_like_numpy(dtype, m, k, n):
    rng = np.random.default_rng(4)
    a, b = random(rng, (m, k), dtype), random(rng, (k, n), dtype)
    a[1, 2] = np.inf
    a[3, 4] = np.nan
    b[5, 0] = -np.inf
    with np.errstate(invalid="ignore"):
        ours, expected = matmul(a, b), matmul_numpy(a, b)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(expected))
    np.testing.assert_array_equal(np.isposinf(ours), np.isposinf(expected))
    np.testing.assert_array_equal(np.isneginf(ours), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(ours[finite], expected[finite], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_results_are_bitwise_deterministic(dtype):
    rng = np.random.default_rng(5)
    a, b = random(rng, (3, 300, 700), dtype), random(rng, (700, 130), dtype)
    first = matmul(a, b)
    for _ in range(3):
        np.testing.assert_array_equal(matmul(a, b), first)


def test_mismatched_inner_dims_raise_value_error():
    with pytest.raises(ValueError, match=r"matmul: shapes \(3, 4\) and \(5, 6\) do not align"):
        matmul(np.ones((3, 4)), np.ones((5, 6)))


def test_unbroadcastable_batch_dims_raise_value_error():
    with pytest.raises(ValueError, match="do not broadcast"):
        matmul(np.ones((2, 3, 4)), np.ones((3, 4, 5)))


def test_one_dim_operand_raises_value_error():
    with pytest.raises(ValueError, match=">= 2 dims"):
        matmul(np.ones(4), np.ones((4, 5)))


def test_mixed_or_integer_dtypes_raise_type_error():
    with pytest.raises(TypeError, match="float32 or two float64"):
        matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float64))
    with pytest.raises(TypeError, match="float32 or two float64"):
        matmul(np.ones((2, 2), np.int64), np.ones((2, 2), np.int64))


dims = st.integers(min_value=0, max_value=40)
batch_dim = st.sampled_from([1, 1, 2, 3])


@settings(deadline=None, max_examples=60)
@given(
    batch_a=st.lists(batch_dim, max_size=2),
    batch_b=st.lists(batch_dim, max_size=2),
    m=dims, k=dims, n=dims,
    transpose_a=st.booleans(), transpose_b=st.booleans(),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**32 - 1),
)
def test_hypothesis_shapes_match_numpy(batch_a, batch_b, m, k, n, transpose_a, transpose_b,
                                       dtype, seed):
    rank = max(len(batch_a), len(batch_b))
    batch_a = [1] * (rank - len(batch_a)) + batch_a
    batch_b = [1] * (rank - len(batch_b)) + batch_b
    batch_b = [bb if ba in (1, bb) or bb == 1 else ba for ba, bb in zip(batch_a, batch_b)]
    rng = np.random.default_rng(seed)
    a = random(rng, (*batch_a, k, m), dtype).swapaxes(-1, -2) if transpose_a else \
        random(rng, (*batch_a, m, k), dtype)
    b = random(rng, (*batch_b, n, k), dtype).swapaxes(-1, -2) if transpose_b else \
        random(rng, (*batch_b, k, n), dtype)
    if k == 0 or 0 in a.shape[:-2] + b.shape[:-2] or m == 0 or n == 0:
        assert matmul(a, b).shape == matmul_numpy(a, b).shape
        assert not np.any(matmul(a, b))
    else:
        assert_matches_numpy(a, b)


def test_kernel_stays_in_bounds_under_numba_boundscheck(tmp_path):
    """Odd shapes and layouts with NUMBA_BOUNDSCHECK=1: any out-of-bounds index raises.

    A fresh NUMBA_CACHE_DIR makes the child compile with the checks on: the on-disk cache is
    keyed by source and signature, not by the boundscheck flag. The child also checks that the
    vector loads of the micro-tile are covered, by making one read past a row on purpose.
    """
    script = textwrap.dedent(
        """
        import numpy as np
        from numba import njit
        from tinyattn.kernels import matmul as mm
        rng = np.random.default_rng(0)
        cases = [((1, 1), (1, 1)), ((5, 3), (3, 7)), ((2, 1, 9, 20), (3, 20, 4)),
                 ((33, 17), (17, 65)), ((70, 130), (130, 40)), ((3, 41, 50), (50, 31)),
                 ((21, 600), (600, 7)), ((13, 300), (300, 17))]
        for dtype in (np.float32, np.float64):
            for shape_a, shape_b in cases:
                a = rng.standard_normal(shape_a).astype(dtype)
                b = rng.standard_normal(shape_b).astype(dtype)
                for left, right in [(a, b), (np.asfortranarray(a), np.asfortranarray(b))]:
                    np.testing.assert_allclose(mm.matmul(left, right), left @ right,
                                               rtol=1e-4, atol=1e-4)

        @njit
        def load_past_row_end(x):
            return mm._vload(x, 0, 1)

        try:
            load_past_row_end(np.zeros((2, 8), np.float32))  # lanes 1..8 of an 8-wide row
        except IndexError:
            print("ok")
        """
    )
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "PYTHONPATH": str(ROOT),
           "NUMBA_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"
