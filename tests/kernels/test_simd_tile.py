"""The register-blocked tile product of ``kernels.simd`` against numpy."""

import numpy as np
import pytest

from tinyattn.kernels.cpu import vector_unit
from tinyattn.kernels.simd import TILE_ROWS, tile_columns, tile_product


def test_tile_shape_follows_the_vector_unit():
    unit = vector_unit()
    assert tile_columns(np.float32) == 2 * unit.vector_bytes // 4
    assert tile_columns(np.float64) == 2 * unit.vector_bytes // 8
    # accumulators, two vectors of B and the broadcast value fit in the register file
    assert 2 * TILE_ROWS + 3 <= unit.registers


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["C", "transposed view"])
@pytest.mark.parametrize("accumulate", [False, True])
def test_tile_product_matches_numpy(dtype, layout, accumulate):
    rng = np.random.default_rng(0)
    rows, cols, inner = TILE_ROWS, tile_columns(dtype), 37
    a = rng.standard_normal((rows + 3, inner)).astype(dtype)
    if layout != "C":
        a = np.ascontiguousarray(a.T).T  # same values, column-major
    b = rng.standard_normal((inner, cols + 5)).astype(dtype)
    c = rng.standard_normal((rows + 4, cols + 7)).astype(dtype)
    expected = c.copy()
    t0, t1 = 3, 30
    product = a[2 : 2 + rows, t0:t1].astype(np.float64) @ b[t0:t1, 4 : 4 + cols]
    window = expected[1 : 1 + rows, 6 : 6 + cols]
    window[...] = (window + product) if accumulate else product
    tile_product(a, 2, b, 4, c, 1, 6, t0, t1, accumulate)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c, expected, **tol)  # and nothing outside the tile changed
    assert (c[0] == expected[0]).all() and (c[:, :6] == expected[:, :6]).all()


def test_rows_past_the_end_of_a_repeat_its_last_row():
    rng = np.random.default_rng(1)
    cols = tile_columns(np.float64)
    a = rng.standard_normal((3, 5))
    b = rng.standard_normal((5, cols))
    c = np.zeros((TILE_ROWS, cols))
    tile_product(a, 1, b, 0, c, 0, 0, 0, 5, False)
    rows = np.minimum(np.arange(1, 1 + TILE_ROWS), 2)  # rows 1, 2, 2, 2, ...
    np.testing.assert_allclose(c, a[rows] @ b, rtol=1e-12)


def test_empty_sum_gives_zeros_or_leaves_the_tile():
    cols = tile_columns(np.float32)
    a, b = np.ones((TILE_ROWS, 4), np.float32), np.ones((4, cols), np.float32)
    c = np.full((TILE_ROWS, cols), 7.0, np.float32)
    tile_product(a, 0, b, 0, c, 0, 0, 2, 2, True)
    assert (c == 7.0).all()
    tile_product(a, 0, b, 0, c, 0, 0, 2, 2, False)
    assert (c == 0.0).all()


def test_prefer_full_width_sets_the_vector_width_of_the_calling_function():
    from numba import config, njit

    from tinyattn.kernels.simd import prefer_full_width

    if config.DISABLE_JIT:
        pytest.skip("nothing is compiled")

    @njit
    def double(x):
        prefer_full_width()
        for i in range(x.size):
            x[i] *= 2.0

    x = np.arange(5.0)
    double(x)
    assert (x == 2 * np.arange(5.0)).all()
    llvm_ir = next(iter(double.inspect_llvm().values()))
    width = 8 * vector_unit().vector_bytes
    assert f'"prefer-vector-width"="{width}"' in llvm_ir
