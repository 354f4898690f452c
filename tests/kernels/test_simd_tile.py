"""The register tile of ``kernels.simd``: its intrinsics against exact FMA chains, the attention
kernels' tile product against numpy, and the block transpose against numpy's."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from numba import config, njit
from numba.core.errors import TypingError

from tinyattn.kernels.cpu import vector_unit
from tinyattn.kernels.simd import (
    PRODUCT_TILE,
    TILE_ROWS,
    TileShape,
    tile_columns,
    tile_load,
    tile_product,
    tile_store,
    tile_update,
    tile_update_clamped,
    tile_update_t,
    tile_zero,
    transpose_block,
    transpose_lanes,
)

ROOT = Path(__file__).resolve().parents[2]
compiled_only = pytest.mark.skipif(config.DISABLE_JIT, reason="the intrinsics need compiled code")


def test_tile_shape_follows_the_vector_unit():
    unit = vector_unit()
    assert PRODUCT_TILE == TileShape(TILE_ROWS, 2, unit.vector_bytes)
    assert tile_columns(np.float32) == 2 * unit.vector_bytes // 4
    assert tile_columns(np.float64) == 2 * unit.vector_bytes // 8
    # accumulators, two vectors of B and the broadcast value fit in the register file
    assert 2 * TILE_ROWS + 3 <= unit.registers


# --- the intrinsics, on tiles of several shapes ---------------------------------------------

def _fused() -> bool:
    """Whether numba's target contracts ``a·b + c`` into one FMA (x86 needs the FMA extension;
    every 64-bit ARM CPU has it)."""
    x86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
    return "fma" in vector_unit().features if x86 else True


def _rounded(exact: Fraction, dtype: type) -> np.floating:
    """``exact`` rounded once to ``dtype``, to nearest with ties to even."""
    guess = dtype(float(exact))  # within an ulp of the answer (float64 rounding, then dtype's)
    candidates = [np.nextafter(guess, dtype(-np.inf)), guess, np.nextafter(guess, dtype(np.inf))]
    bits = np.uint32 if dtype == np.float32 else np.uint64
    return min(candidates, key=lambda x: (abs(Fraction(float(x)) - exact),
                                          int(np.array(x).view(bits)) & 1))


def _fma_chains(a_rows: np.ndarray, b: np.ndarray, start: np.ndarray) -> np.ndarray:
    """``c[r, x] = a_rows[r, p] · b[p, x] + c[r, x]`` for ``p`` in order, each step rounded once
    (an FMA) or, where the target has no FMA, the product and the sum rounded each."""
    dtype = start.dtype.type
    out = start.copy()
    for (r, x), _ in np.ndenumerate(out):
        total = out[r, x]
        for p in range(b.shape[0]):
            if _fused():
                exact = Fraction(float(a_rows[r, p])) * Fraction(float(b[p, x]))
                total = _rounded(exact + Fraction(float(total)), dtype)
            else:
                total = dtype(a_rows[r, p] * b[p, x]) + total
        out[r, x] = total
    return out


def _tile_kernel(shape: TileShape):
    """A jitted ``c[ci+r, cj:cj+columns] (+)= Σ_{p0<=p<p1} A[i0+r, p] · b[p+shift, j0:j0+columns]``
    for ``first <= r < rows``, on tiles of ``shape`` (a constant of the closure)."""

    @njit
    def run(a, how, i0, b, j0, c, ci, cj, p0, p1, accumulate, first, shift=0):
        tile = tile_load(c, ci, cj, shape) if accumulate else tile_zero(c, shape)
        for p in range(p0, p1):
            if how == 0:
                tile = tile_update(tile, a, i0, p, b, p + shift, j0)
            elif how == 1:
                tile = tile_update_t(tile, a, i0, p, b, p + shift, j0)
            else:
                tile = tile_update_clamped(tile, a, i0, p, b, p + shift, j0)
        tile_store(c, ci, cj, tile, first)

    return run


_WIDTH = vector_unit().vector_bytes
SHAPES = [TileShape(1, 1, _WIDTH), TileShape(3, 2, _WIDTH), TileShape(6, 4, _WIDTH),
          TileShape(TILE_ROWS, 2, _WIDTH)]
if _WIDTH > 16:
    SHAPES.append(TileShape(5, 3, _WIDTH // 2))  # narrower vectors than the registers
_KERNELS = {shape: _tile_kernel(shape) for shape in SHAPES}


@compiled_only
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_tile_is_one_fma_chain_per_element_in_the_order_of_the_updates(shape, dtype):
    """Bit for bit: plain and transposed ``A``, from zero and accumulated, only the tile's
    block of ``c`` written; row ``p`` of ``A``'s sum meets row ``p + 3`` of ``b``."""
    rng = np.random.default_rng(shape.rows * 10 + shape.vectors)
    rows, cols, inner = shape.rows, shape.columns(np.dtype(dtype).itemsize), 11
    a = rng.standard_normal((rows + 3, inner + 2)).astype(dtype)
    b = rng.standard_normal((inner + 5, cols + 5)).astype(dtype)
    a_rows = a[2 : 2 + rows, 1 : 1 + inner]
    for how, operand in ((0, a), (1, np.ascontiguousarray(a.T))):
        for accumulate in (False, True):
            c = rng.standard_normal((rows + 4, cols + 7)).astype(dtype)
            block = c[1 : 1 + rows, 6 : 6 + cols]
            start = block.copy() if accumulate else np.zeros_like(block)
            expected = c.copy()
            b_rows = b[4 : 4 + inner, 4 : 4 + cols]
            expected[1 : 1 + rows, 6 : 6 + cols] = _fma_chains(a_rows, b_rows, start)
            _KERNELS[shape](operand, how, 2, b, 4, c, 1, 6, 1, 1 + inner, accumulate, 0, 3)
            np.testing.assert_array_equal(c, expected)


@compiled_only
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_store_keeps_the_rows_above_first_and_the_clamped_update_repeats_the_last_row(dtype):
    shape = SHAPES[2]  # 6 rows
    rng = np.random.default_rng(3)
    cols = shape.columns(np.dtype(dtype).itemsize)
    a = rng.standard_normal((4, 9)).astype(dtype)
    b = rng.standard_normal((9, cols)).astype(dtype)
    c = rng.standard_normal((shape.rows, cols)).astype(dtype)
    expected = c.copy()
    _KERNELS[shape](a, 2, 1, b, 0, c, 0, 0, 0, 9, False, 2)  # rows 1, 2, 3, 3, 3, 3 of a
    rows = np.minimum(np.arange(1, 1 + shape.rows), 3)
    expected[2:] = _fma_chains(a[rows], b, np.zeros((shape.rows, cols), dtype))[2:]
    np.testing.assert_array_equal(c, expected)


@compiled_only
def test_a_may_be_any_strided_view():
    shape = SHAPES[1]
    rng = np.random.default_rng(4)
    cols = shape.columns(8)
    big = rng.standard_normal((20, 30))
    a = big[1::3, ::-2]  # (7, 15), no unit stride
    b = rng.standard_normal((15, cols))
    c = np.zeros((shape.rows, cols))
    expected = _fma_chains(a[2 : 2 + shape.rows], b, c)
    _KERNELS[shape](a, 0, 2, b, 0, c, 0, 0, 0, 15, False, 0)
    np.testing.assert_array_equal(c, expected)


@compiled_only
@pytest.mark.parametrize("case", ["b not C-contiguous", "c not C-contiguous", "dtypes differ"])
def test_operands_the_tile_cannot_use_are_rejected_when_compiling(case):
    shape = SHAPES[1]
    cols = shape.columns(8)
    a, b, c = np.ones((4, 4)), np.ones((4, 2 * cols)), np.zeros((4, 2 * cols))
    if case == "b not C-contiguous":
        b = b[:, ::2]
    elif case == "c not C-contiguous":
        c = c[:, ::2]
    else:
        a = a.astype(np.float32)
    with pytest.raises(TypingError):
        _tile_kernel(shape)(a, 0, 0, b, 0, c, 0, 0, 0, 4, True, 0)


@njit
def _transpose_blocks(src, dst, starts):
    """``transpose_block(src, i0, j0, dst, r0, c0)`` for each row ``(i0, j0, r0, c0)``."""
    for n in range(starts.shape[0]):
        i0, j0, r0, c0 = starts[n]
        transpose_block(src, i0, j0, dst, r0, c0)


@compiled_only
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transpose_block_writes_one_square_block_of_the_transpose(dtype):
    """Every value distinct, so that any lane sent to the wrong place shows; nothing outside
    the block is written; blocks at offsets that are not multiples of the width."""
    lanes = transpose_lanes(dtype)
    assert lanes == vector_unit().vector_bytes // np.dtype(dtype).itemsize
    src = np.arange(3 * lanes * (2 * lanes + 5), dtype=dtype).reshape(3 * lanes, 2 * lanes + 5)
    dst = np.full((2 * lanes + 3, 3 * lanes + 1), -1.0, dtype)
    expected = dst.copy()
    starts = np.array([[0, 0, 0, 0], [lanes + 1, 3, 2, lanes], [2 * lanes, lanes + 5, lanes + 3,
                                                                 2 * lanes + 1]])
    for i0, j0, r0, c0 in starts:
        expected[r0 : r0 + lanes, c0 : c0 + lanes] = src[i0 : i0 + lanes, j0 : j0 + lanes].T
    _transpose_blocks(src, dst, starts)
    np.testing.assert_array_equal(dst, expected)


@compiled_only
@pytest.mark.parametrize("case", ["src not C-contiguous", "dst not C-contiguous", "dtypes differ"])
def test_operands_the_transpose_cannot_use_are_rejected_when_compiling(case):
    src, dst = np.ones((16, 32)), np.zeros((16, 32))
    if case == "src not C-contiguous":
        src = src[:, ::2]
    elif case == "dst not C-contiguous":
        dst = dst[:, ::2]
    else:
        dst = dst.astype(np.float32)
    with pytest.raises(TypingError):
        _transpose_blocks(src, dst, np.zeros((1, 4), np.int64))


def test_tile_vectors_stay_in_bounds_under_numba_boundscheck(tmp_path):
    """With NUMBA_BOUNDSCHECK=1 (compiled afresh in the child), every vector load and store of
    a tile or a transposed block and every read of A is checked: reading past a row of B or C,
    past A's last row (unclamped) or column, or past a transposed block's source or target
    raises IndexError; the clamped update never reads past A's end."""
    if config.DISABLE_JIT:
        pytest.skip("nothing is compiled")
    script = textwrap.dedent(
        """
        import numpy as np
        from numba import njit
        from tinyattn.kernels import simd

        shape = simd.PRODUCT_TILE
        rows = shape.rows

        @njit
        def load_store(c, j0):
            simd.tile_store(c, 0, 0, simd.tile_load(c, 0, j0, shape), 0)

        @njit
        def update(a, i0, b, j0, p, clamped):
            out = np.zeros((rows, b.shape[1]))
            tile = simd.tile_zero(out, shape)
            if clamped:
                tile = simd.tile_update_clamped(tile, a, i0, p, b, p, j0)
            else:
                tile = simd.tile_update(tile, a, i0, p, b, p, j0)
            simd.tile_store(out, 0, 0, tile, 0)

        @njit
        def transpose(src, i0, j0, dst, r0, c0):
            simd.transpose_block(src, i0, j0, dst, r0, c0)

        lanes = simd.transpose_lanes(np.float64)
        square = np.ones((lanes, lanes))
        cols = simd.tile_columns(np.float64)
        a = np.ones((shape.rows, 3))
        b, c = np.ones((3, cols)), np.zeros((shape.rows, cols))
        checks = [
            (load_store, (c, 1)),  # columns 1 .. cols of C's rows
            (load_store, (c[:-1], 0)),  # one row of C too few
            (update, (a, 1, b, 0, 0, False)),  # rows 1 .. rows of A
            (update, (a, 0, b, 0, 3, False)),  # column 3 of A, row 3 of B
            (update, (a, 0, b, 1, 0, False)),  # columns 1 .. cols of B
            (simd.tile_product, (a, 0, b, 1, c, 0, 0, 0, 3, False)),  # B's columns, via product
            (transpose, (square, 1, 0, square.copy(), 0, 0)),  # one row of the source too few
            (transpose, (square, 0, 1, square.copy(), 0, 0)),  # past the source's rows' end
            (transpose, (square, 0, 0, square.copy(), 0, 1)),  # past the target's rows' end
        ]
        for check, args in checks:
            try:
                check(*args)
                print("not checked")
            except IndexError:
                print("ok")
        update(a, shape.rows - 1, b, 0, 0, True)  # rows past A's end read its last row
        print("clamped")
        """
    )
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "PYTHONPATH": str(ROOT),
           "NUMBA_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["ok"] * 9 + ["clamped"]


# --- the attention kernels' tile product ----------------------------------------------------

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


@compiled_only
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tile_product_is_one_fma_chain_per_element(dtype):
    rng = np.random.default_rng(5)
    cols = tile_columns(dtype)
    a = rng.standard_normal((TILE_ROWS + 2, 13)).astype(dtype)[:, ::-1]  # a strided view
    b = rng.standard_normal((13, cols)).astype(dtype)
    c = rng.standard_normal((TILE_ROWS, cols)).astype(dtype)
    expected = _fma_chains(a[1 : 1 + TILE_ROWS, 2:11], b[2:11], c)
    tile_product(a, 1, b, 0, c, 0, 0, 2, 11, True)
    np.testing.assert_array_equal(c, expected)


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
