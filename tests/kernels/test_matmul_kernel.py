"""The Numba matmul kernel against its numpy twin: shapes, layouts, dtypes, determinism."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_helpers import numba_threads

from tinyattn.kernels import matmul as matmul_module
from tinyattn.kernels import parallel as parallel_module
from tinyattn.kernels.cpu import DataCaches, VectorUnit
from tinyattn.kernels.matmul import (
    MR,
    TILE,
    Blocking,
    blocking,
    matmul,
    matmul_numpy,
    micro_tile,
)
from tinyattn.kernels.simd import TileShape

ROOT = Path(__file__).resolve().parents[2]
DTYPES = [np.float32, np.float64]
REL_TOL = {np.float32: 1e-5, np.float64: 1e-12}


@pytest.fixture(autouse=True)
def fresh_tile_plans():
    """A product's plan is worked out once per shape from the module's constants, which some
    tests here patch: each test starts and ends with no plan kept."""
    matmul_module._tile_plan.cache_clear()
    yield
    matmul_module._tile_plan.cache_clear()


def replan(monkeypatch, **constants) -> None:
    """Set constants of the matmul module for this test, and drop the plans made before."""
    for name, value in constants.items():
        monkeypatch.setattr(matmul_module, name, value)
    matmul_module._tile_plan.cache_clear()


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


def _around(size: int) -> list[int]:
    return [size - 1, size, size + 1]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sizes_around_this_machines_micro_tile_match_numpy(dtype):
    """M around multiples of MR, N around multiples of NR, K around the k-block: full tiles,
    the last tile row moved up over the one before, the last tile column through the scratch
    tile, B read in place (N a multiple of NR) and packed (otherwise)."""
    nr = TILE.columns(np.dtype(dtype).itemsize)
    kc = blocking(matmul_module.data_caches(), TILE, np.dtype(dtype).itemsize).kc
    rng = np.random.default_rng(7)
    for m in [*_around(MR), *_around(4 * MR)]:
        for n in [*_around(nr), *_around(3 * nr)]:
            for k in (7, kc + 1):
                a, b = random(rng, (m, k), dtype), random(rng, (k, n), dtype)
                assert_matches_numpy(a, b)
                assert_matches_numpy(np.asfortranarray(a), np.asfortranarray(b))


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
def test_tiled_path_handles_every_edge_tile(dtype, monkeypatch):
    """Sizes around the micro-tile (MR rows, NR columns) and k-block boundaries, with a
    small k-block so that tiles are accumulated over several blocks.

    ``_TINY_MACS = 0`` sends even the smallest of them through the register tile.
    """
    replan(monkeypatch, _TINY_MACS=0, _blocking=lambda itemsize: Blocking(64, 2, 1 << 30))
    nr = TILE.columns(np.dtype(dtype).itemsize)
    rng = np.random.default_rng(6)
    for m in (MR, MR + 1, 2 * MR - 1, 13 * MR + 5):
        for n in (1, nr - 1, nr, nr + 1, 5 * nr + 3):
            for k in (1, 63, 65, 129):
                a, b = random(rng, (m, k), dtype), random(rng, (k, n), dtype)
                assert_matches_numpy(a, b)
                assert_matches_numpy(np.asfortranarray(a), b)  # A read transposed in place
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


@pytest.mark.parametrize("dtype", DTYPES)
def test_results_do_not_depend_on_threads_or_blocking(dtype, monkeypatch):
    """Each output is one FMA chain over k in order, whatever the thread count, the number of
    tasks or the k-block: every split gives the same bits."""
    rng = np.random.default_rng(8)
    a, b = random(rng, (2, 301, 700), dtype), random(rng, (700, 2 * TILE.columns(8) + 5), dtype)
    with numba_threads(1):
        reference = matmul(a, b)
    with numba_threads(2):
        np.testing.assert_array_equal(matmul(a, b), reference)
    replan(monkeypatch, _TASKS_PER_THREAD=13,
           _blocking=lambda itemsize: Blocking(48, 1, 2 * MR * 48 * itemsize))
    np.testing.assert_array_equal(matmul(a, b), reference)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_plan_is_kept_per_layout_and_thread_count(dtype, monkeypatch):
    """Products of one shape whose operands are laid out differently (each read in place or
    through its transpose, B a whole number of tiles wide or not), one after the other in a
    process and on one thread and two: each takes the plan of its own layout and thread
    count, and gives numpy's product."""
    rng = np.random.default_rng(12)
    m, k = 8 * MR + 3, 70
    for n in (2 * TILE.columns(np.dtype(dtype).itemsize), 50):
        a = random(rng, (m, k), dtype)
        b = random(rng, (k, n), dtype)
        a_t, b_t = np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T
        reference = matmul(a, b)
        launches = _tile_launches(monkeypatch)
        for threads in (1, 2, 1):
            with numba_threads(threads):
                for left, right in ((a, b), (a_t, b), (a, b_t), (a_t, b_t)):
                    assert_matches_numpy(left, right)
                    np.testing.assert_array_equal(matmul(left, right), reference)
        # a_transposed as each launch's plan gave it: two launches per pair
        assert [args[2] for args in launches] == [False, False, True, True] * 2 * 3


def test_parallel_launches_run_inside_the_kernel_section(monkeypatch):
    """Callers need not hold ``kernel_section``: packing and the product each take it, as
    every parallel launch does (:func:`~tinyattn.kernels.parallel.run_tasks`), when it is a
    lock."""
    events = []

    class Section:
        locked = True

        def __enter__(self):
            events.append("enter")

        def __exit__(self, *exc):
            events.append("exit")

    def recorded(run_tasks):
        def run(task, *args, **options):
            events.append(task.py_func.__name__)
            return run_tasks(task, *args, **options)
        return run

    def recorded_small(kernel):
        def run(*args):
            events.append("_gemm_small")
            return kernel(*args)
        return run

    monkeypatch.setattr(parallel_module, "kernel_section", Section())
    monkeypatch.setattr(matmul_module, "run_tasks", recorded(matmul_module.run_tasks))
    monkeypatch.setattr(matmul_module, "_gemm_small", recorded_small(matmul_module._gemm_small))
    rng = np.random.default_rng(9)
    a, b_t = random(rng, (64, 70), np.float64), random(rng, (50, 70), np.float64)
    for _ in range(2):  # the first launch of a kernel, and the ones after it
        assert_matches_numpy(a, b_t.T)
        assert events == ["_pack_panel", "enter", "exit", "_gemm_block", "enter", "exit"]
        events.clear()
    assert_matches_numpy(a[:8, :3], b_t[:3, :3].T)  # tiny, and at least MR rows: serial
    assert events == ["_gemm_small"]


@pytest.mark.parametrize("registers, vector_bytes, tile", [
    (32, 64, TileShape(6, 4, 64)),  # AVX-512: 24 zmm accumulators, 4 B vectors, 1 broadcast
    (32, 32, TileShape(6, 4, 32)),
    (16, 32, TileShape(6, 2, 32)),  # AVX2: 12 ymm accumulators, 2 B vectors, 1 broadcast
    (16, 16, TileShape(6, 2, 16)),
])
def test_micro_tile_fills_the_register_file(registers, vector_bytes, tile):
    unit = VectorUnit("test", frozenset(), vector_bytes, registers)
    chosen = micro_tile(unit)
    assert chosen == tile
    assert chosen.rows * chosen.vectors + chosen.vectors + 1 <= registers
    assert chosen.columns(4) == chosen.vectors * vector_bytes // 4


@pytest.mark.parametrize("l1, l2", [(32 << 10, 1 << 20), (48 << 10, 2 << 20),
                                    (32 << 10, 256 << 10), (4 << 10, 8 << 10)])
@pytest.mark.parametrize("itemsize", [4, 8])
@pytest.mark.parametrize("tile", [TileShape(6, 4, 64), TileShape(6, 2, 32)])
def test_blocks_fit_the_caches(l1, l2, itemsize, tile):
    block = blocking(DataCaches(l1, l2), tile, itemsize)
    nr = tile.columns(itemsize)
    assert block.kc >= 16 and block.nc_panels >= 1
    if block.kc > 16:
        assert block.kc * nr * itemsize <= l1 * 2 // 3  # a micro-panel of B in L1
        assert (block.kc + 1) * nr * itemsize > l1 * 2 // 3  # and as long as it can be
    assert block.a_block_bytes == l2  # a task's slices of A for a block of k in L2


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
    micro-tile's vector loads and broadcasts are covered, by reading past the end of a row of C
    and past the last row of A on purpose.
    """
    script = textwrap.dedent(
        """
        import numpy as np
        from numba import njit
        from tinyattn.kernels import matmul as mm
        from tinyattn.kernels import simd
        rng = np.random.default_rng(0)
        cases = [((1, 1), (1, 1)), ((5, 3), (3, 7)), ((2, 1, 9, 20), (3, 20, 4)),
                 ((33, 17), (17, 65)), ((70, 130), (130, 40)), ((3, 41, 50), (50, 31)),
                 ((21, 600), (600, 7)), ((13, 300), (300, 17)),
                 ((1, 700), (700, 65)), ((3, 1, 200), (3, 200, 90)),  # fewer rows than MR
                 ((7, 300), (300, 1100))]  # Fortran order: B copied by the tasks from columns
        for dtype in (np.float32, np.float64):
            for shape_a, shape_b in cases:
                a = rng.standard_normal(shape_a).astype(dtype)
                b = rng.standard_normal(shape_b).astype(dtype)
                for left, right in [(a, b), (np.asfortranarray(a), np.asfortranarray(b))]:
                    np.testing.assert_allclose(mm.matmul(left, right), left @ right,
                                               rtol=1e-4, atol=1e-4)

        @njit
        def load_past_row_end(x):
            simd.tile_store(x, 0, 0, simd.tile_load(x, 0, 1, mm.TILE), 0)

        @njit
        def broadcast_past_last_row(a, b, c):
            tile = simd.tile_zero(c, mm.TILE)
            tile = simd.tile_update(tile, a, 1, 0, b, 0, 0)
            simd.tile_store(c, 0, 0, tile, 0)

        nr = mm.TILE.columns(4)
        for check, args in [
            (load_past_row_end, (np.zeros((mm.MR, nr), np.float32),)),  # columns 1..NR
            (broadcast_past_last_row, (np.zeros((mm.MR, 3), np.float32),  # rows 1..MR
                                       np.zeros((3, nr), np.float32),
                                       np.zeros((mm.MR, nr), np.float32))),
        ]:
            try:
                check(*args)
            except IndexError:
                print("ok")
        """
    )
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "PYTHONPATH": str(ROOT),
           "NUMBA_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["ok", "ok"]


OTHER_TARGET = textwrap.dedent(
    """
    import json
    import numpy as np
    from tinyattn.kernels import matmul as mm
    rng = np.random.default_rng(0)
    worst = 0.0
    for dtype in (np.float32, np.float64):
        nr = mm.TILE.columns(np.dtype(dtype).itemsize)
        pairs = []
        for m, k, n in [(mm.MR, 40, nr), (4 * mm.MR + 1, 300, 3 * nr - 1), (50, 70, 2 * nr + 1),
                        (40 * mm.MR + 1, 300, 2 * nr)]:  # the last: tasks copy B's panels
            a = rng.standard_normal((2, m, k)).astype(dtype)
            b = rng.standard_normal((k, n)).astype(dtype)
            pairs += [(a, b), (a.swapaxes(1, 2).copy().swapaxes(1, 2), b.T.copy().T)]
        # a few rows against a wide Bᵀ: the tasks copy B's panels from its columns
        pairs.append((rng.standard_normal((mm.MR + 1, 300)).astype(dtype),
                      rng.standard_normal((20 * nr + 3, 300)).astype(dtype).T))
        for left, right in pairs:
            scale = np.abs(left).astype(np.float64) @ np.abs(right).astype(np.float64)
            error = np.abs(mm.matmul(left, right) - left @ right) / scale
            worst = max(worst, float(error.max()) / (1e-5 if dtype == np.float32 else 1e-12))
    tile = mm.TILE
    print(json.dumps({"tile": [tile.rows, tile.vectors, tile.vector_bytes], "worst": worst}))
    """
)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 CPUs")
@pytest.mark.parametrize("env, tile", [
    ({"NUMBA_CPU_NAME": "haswell",
      "NUMBA_CPU_FEATURES": "+sse,+sse2,+sse3,+ssse3,+sse4.1,+sse4.2,+avx,+avx2,+fma"},
     [6, 2, 32]),  # AVX2: 16 ymm registers
    ({"NUMBA_CPU_NAME": "generic"}, [6, 2, 16]),  # x86-64 baseline: 16 xmm registers
])
def test_other_vector_units_get_their_own_tile_and_the_same_results(tmp_path, env, tile):
    """Compiled for another CPU (in a fresh process with its own numba cache), the kernel
    takes that CPU's tile and still matches numpy, transposed operands and edges included."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU")}
    result = subprocess.run(
        [sys.executable, "-c", OTHER_TARGET], capture_output=True, text=True, cwd=ROOT,
        env={**clean, **env, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path)},
        timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["tile"] == tile
    assert report["worst"] <= 1.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, k, n, a_transposed", [
    (MR + 1, 3, 2 * TILE.columns(4) + 5, False),  # a ragged edge of tiles: B packed
    (4 * MR, 700, TILE.columns(4), False),  # several k-blocks, B read in place
    (2 * MR - 1, 300, TILE.columns(4) + 3, True),  # A transposed
    (2, 5, 3, False),  # too small for the tile: numpy adds the bias
])
def test_the_bias_is_added_to_the_finished_sum(dtype, m, k, n, a_transposed):
    """Bitwise ``(a @ b) + bias``: the tile adds the bias once, after its last k-block."""
    rng = np.random.default_rng(m + k + n)
    a = random(rng, (k, m), dtype).T if a_transposed else random(rng, (m, k), dtype)
    b, bias = random(rng, (k, n), dtype), random(rng, (n,), dtype)
    np.testing.assert_array_equal(matmul(a, b, bias), matmul(a, b) + bias)
    batch = random(rng, (3, m, k), dtype)
    np.testing.assert_array_equal(matmul(batch, b, bias), matmul(batch, b) + bias)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, k, n, a_transposed, b_batch", [
    (4 * MR + 1, 700, 2 * TILE.columns(4), True, ()),  # k-blocks, a moved-up last tile row
    (3 * MR, 50, 8 * TILE.columns(4), True, ()),  # N > M: the tasks share out B's columns
    (2 * MR - 1, 300, TILE.columns(4) + 3, False, ()),  # A row-major, B packed
    (3 * MR, 40, TILE.columns(4), True, (3,)),  # one A for a batch of three B: summed once
    (2, 5, 3, True, ()),  # too small for the tile: numpy sums the rows
])
def test_row_sums_add_the_sums_of_as_rows_in_float64(monkeypatch, dtype, m, k, n, a_transposed,
                                                    b_batch):
    """``row_sums += Σ_p A[i, p]``: numpy's float64 sums up to float64 rounding, the product
    bitwise the one without sums, and the same bits for 1 or 2 threads and other task splits
    (each row is one float64 chain over ``p`` in order)."""
    rng = np.random.default_rng(m + k + n)
    a = random(rng, (k, m), dtype).T if a_transposed else random(rng, (m, k), dtype)
    b = random(rng, (*b_batch, k, n), dtype)
    start = rng.standard_normal(m)  # added to, not overwritten
    sums = start.copy()
    np.testing.assert_array_equal(matmul(a, b, row_sums=sums), matmul(a, b))
    expected = start + a.astype(np.float64).sum(axis=1)
    scale = np.abs(start) + np.abs(a).astype(np.float64).sum(axis=1)
    assert np.all(np.abs(sums - expected) <= 1e-13 * scale)

    def summed() -> np.ndarray:
        out = start.copy()
        matmul(a, b, row_sums=out)
        return out

    with numba_threads(1):
        one_thread = summed()
    with numba_threads(2):
        np.testing.assert_array_equal(summed(), one_thread)
    replan(monkeypatch, _TASKS_PER_THREAD=13,
           _blocking=lambda itemsize: Blocking(48, 1, 2 * MR * 48 * itemsize))
    np.testing.assert_array_equal(summed(), one_thread)


def _tile_launches(monkeypatch) -> list[tuple]:
    """Record the arguments of each launch of the tile, ``(n_tasks, a, a_transposed, b_rows,
    b_panels, copy_panels, ..., m_blocks, n_blocks)``."""
    launches: list[tuple] = []

    def run(task, *args, **options):
        if task is matmul_module._gemm_block:
            launches.append(args)
        return run_tasks(task, *args, **options)

    run_tasks = matmul_module.run_tasks
    monkeypatch.setattr(matmul_module, "run_tasks", run)
    return launches


@pytest.mark.parametrize("dtype", DTYPES)
def test_tasks_share_out_rows_whose_slices_of_a_fit_l2(monkeypatch, dtype):
    """N <= M: each task runs as many tile rows as have their slices of A for a block of k
    (``MR × kc`` values each) within ``a_block_bytes``, so that they stay in L2 while its tile
    columns run over them; numpy's product, with the bias and the row sums. N > M: each run of
    B's columns still runs over all the rows."""
    replan(monkeypatch, _blocking=lambda itemsize: Blocking(32, 2, 3 * MR * 32 * itemsize))
    launches = _tile_launches(monkeypatch)
    nr = TILE.columns(np.dtype(dtype).itemsize)
    rng = np.random.default_rng(21)
    m, k = 20 * MR + 1, 64  # 21 tile rows and 2 k-blocks of 32: 7 tasks of 3 tile rows
    a, b = random(rng, (m, k), dtype), random(rng, (k, 3 * nr), dtype)
    bias = random(rng, (3 * nr,), dtype)
    for left, right in ((a, b), (np.asfortranarray(a), np.asfortranarray(b))):
        assert_matches_numpy(left, right)
    np.testing.assert_array_equal(matmul(a, b, bias), matmul(a, b) + bias)
    sums = np.zeros(m)
    matmul(np.asfortranarray(a), b, row_sums=sums)
    np.testing.assert_allclose(sums, a.sum(axis=1, dtype=np.float64), rtol=1e-12)
    wide = random(rng, (k, (m // nr + 2) * nr), dtype)  # N > M, a whole number of tiles
    assert_matches_numpy(a, wide)
    m_blocks = [args[-2] for args in launches]
    assert m_blocks[:5] == [7] * 5 and m_blocks[5] == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_a_b_wider_than_a_is_tall_is_shared_out_by_its_columns(monkeypatch, threads):
    """N > M: the tasks share out B's tile columns, ``_TASKS_PER_THREAD`` runs of them per
    thread (or one column each when there are fewer), each over all the rows (each thread reads
    its part of B, each task A once per run); N <= M: up to ``nc_panels`` tile columns per
    task, the rows shared out."""
    launches = _tile_launches(monkeypatch)
    nr = TILE.columns(4)
    panels_per_task = blocking(matmul_module.data_caches(), TILE, 4).nc_panels
    runs = matmul_module._TASKS_PER_THREAD * threads
    rng = np.random.default_rng(3)
    with numba_threads(threads):
        for panels in (3 * runs + 1, runs // 2):
            wide = random(rng, (64, panels * nr), np.float32)
            for m in (4 * MR, panels * nr, panels * nr + 1):  # N > M, N = M, N < M
                assert_matches_numpy(random(rng, (m, 64), np.float32), wide)
    m_blocks, n_blocks = zip(*(args[-2:] for args in launches), strict=True)
    wide_runs, few = -(-(3 * runs + 1) // panels_per_task), runs // 2
    assert n_blocks == (runs, wide_runs, wide_runs, few, -(-few // panels_per_task),
                        -(-few // panels_per_task))
    assert m_blocks[0] == 1  # each run of columns over all the rows


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_transposed", [False, True])
def test_runs_of_tile_columns_match_numpy(monkeypatch, dtype, a_transposed):
    """A row-major B wider than A is tall, in runs of several tile columns per task: numpy's
    product up to rounding, with a ragged last tile column and tile row and several k-blocks;
    the bias and the row sums as without runs, and the same bits for 1 or 2 threads."""
    itemsize = np.dtype(dtype).itemsize
    nr, kc = TILE.columns(itemsize), blocking(matmul_module.data_caches(), TILE, itemsize).kc
    runs = matmul_module._TASKS_PER_THREAD * numba.get_num_threads()
    m, k, n = 2 * MR + 1, 2 * kc + 5, (3 * runs + 1) * nr + 3
    rng = np.random.default_rng(n + k)
    a = random(rng, (k, m), dtype).T if a_transposed else random(rng, (m, k), dtype)
    b, bias = random(rng, (k, n), dtype), random(rng, (n,), dtype)
    launches = _tile_launches(monkeypatch)
    assert_matches_numpy(a, b)
    assert launches[0][-2:] == (1, runs)  # (m_blocks, n_blocks): runs over all the rows
    np.testing.assert_array_equal(matmul(a, b, bias), matmul(a, b) + bias)
    sums = np.zeros(m)
    product = matmul(a, b, row_sums=sums)
    np.testing.assert_allclose(sums, a.sum(axis=1, dtype=np.float64), rtol=1e-12)
    with numba_threads(1):
        np.testing.assert_array_equal(matmul(a, b), product)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k_rows", ["one row", "a few rows", "several k-blocks"])
@pytest.mark.parametrize("a_transposed", [False, True])
def test_panels_copied_by_each_task_give_the_product_read_in_place(monkeypatch, dtype, k_rows,
                                                                   a_transposed):
    """When each task runs enough tile rows, it copies its panels of a row-major B before
    running over them: numpy's product up to rounding, and bitwise the one that reads B in
    place (the same operations in the same order), bias and a B shared by a batch included."""
    itemsize = np.dtype(dtype).itemsize
    nr, kc = TILE.columns(itemsize), blocking(matmul_module.data_caches(), TILE, itemsize).kc
    k = {"one row": 1, "a few rows": MR + 1, "several k-blocks": 2 * kc + 5}[k_rows]
    tasks = matmul_module._TASKS_PER_THREAD * numba.get_num_threads()
    m = 4 * MR * tasks + 5  # at least 4 tile rows per task
    rng = np.random.default_rng(k + m)
    a = random(rng, (2, k, m), dtype).swapaxes(1, 2) if a_transposed else \
        random(rng, (2, m, k), dtype)
    b, bias = random(rng, (k, 3 * nr), dtype), random(rng, (3 * nr,), dtype)
    replan(monkeypatch, _TINY_MACS=0)  # every product takes the tile
    launches = _tile_launches(monkeypatch)
    assert_matches_numpy(a, b)
    products = matmul(a, b), matmul(a, b, bias)
    replan(monkeypatch, _COPY_MIN_TILE_ROWS=m)  # now B is read in place
    np.testing.assert_array_equal(products[0], matmul(a, b))
    np.testing.assert_array_equal(products[1], matmul(a, b, bias))
    copies = [args[5] for args in launches]  # where the tasks read B
    rows, in_place = matmul_module._COPY_ROWS, matmul_module._IN_PLACE
    assert copies == [rows, rows, rows, in_place, in_place]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["wider than tall", "a batch of square products"])
@pytest.mark.parametrize("a_transposed", [False, True])
def test_panels_copied_from_bs_columns_give_the_product_of_b_by_rows(monkeypatch, dtype, case,
                                                                   a_transposed):
    """A transposed B each of whose panels one task reads (every tile row in one task, each
    matrix of B for one output) is copied by that task from B's columns, each whole panel
    before its first k-block: numpy's product up to rounding, and bitwise the product of the
    same B laid out by rows (each element the same chain of multiply-adds). A ragged last
    panel, several k-blocks, several panels per task (a batch of square products), a bias and
    the row sums included."""
    itemsize = np.dtype(dtype).itemsize
    nr, kc = TILE.columns(itemsize), blocking(matmul_module.data_caches(), TILE, itemsize).kc
    k = 2 * kc + 5
    if case == "wider than tall":  # one panel per task, N > M
        batch, m, n = (), 2 * MR + 1, 9 * nr * numba.get_num_threads() + 3
    else:  # N <= M: the tasks share out matrices, several panels each
        batch, m, n = (3 * matmul_module._TASKS_PER_THREAD * numba.get_num_threads(),), \
            3 * nr + 1, 3 * nr - 2
    rng = np.random.default_rng(n + k)
    a = random(rng, (*batch, k, m), dtype).swapaxes(-1, -2) if a_transposed else \
        random(rng, (*batch, m, k), dtype)
    b = random(rng, (*batch, n, k), dtype).swapaxes(-1, -2)  # B's columns are rows in memory
    bias = random(rng, (n,), dtype)
    launches = _tile_launches(monkeypatch)
    assert_matches_numpy(a, b)

    def products(b):
        out = [matmul(a, b), matmul(a, b, bias)]
        if not batch:
            sums = np.zeros(m)
            out.append(matmul(a, b, row_sums=sums))
            np.testing.assert_allclose(sums, a.sum(axis=1, dtype=np.float64), rtol=1e-12)
        return out

    ours = products(b)
    assert {args[5] for args in launches} == {matmul_module._COPY_COLUMNS}
    assert {args[-1] for args in launches} == {n // nr + 1 if not batch else 1}  # n_blocks
    launches.clear()
    by_rows = products(np.ascontiguousarray(b))
    assert matmul_module._COPY_COLUMNS not in {args[5] for args in launches}
    for product, other in zip(ours, by_rows, strict=True):
        np.testing.assert_array_equal(product, other)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_wide_transposed_bs_panels_shared_evenly_have_one_reader_each(monkeypatch, dtype):
    """A transposed B wider than A is tall, with as many tile columns as the threads or a
    multiple: one task per tile column runs all of A's rows and copies its panel itself (no
    pass packs B first). With a column count the threads cannot share evenly, A's rows are
    split as well, for balance, and B is packed once. Both give numpy's product."""
    threads = numba.get_num_threads()
    nr = TILE.columns(np.dtype(dtype).itemsize)
    rng = np.random.default_rng(5)
    a = random(rng, (MR + 1, 300), dtype)
    launches = _tile_launches(monkeypatch)
    for panels in (threads, threads + 1, 2 * threads):
        assert_matches_numpy(a, random(rng, (panels * nr, 300), dtype).T)
    even = [panels % threads == 0 for panels in (threads, threads + 1, 2 * threads)]
    columns, in_place = matmul_module._COPY_COLUMNS, matmul_module._IN_PLACE
    assert [args[5] for args in launches] == [columns if e else in_place for e in even]
    assert [args[-2] for args in launches] == [1 if e else 2 for e in even]  # m_blocks


def test_a_transposed_b_shared_by_a_batch_is_packed_once(monkeypatch):
    """When several outputs read one matrix of B (it broadcasts over A's batch), or the tasks
    split the tile rows, a panel has several readers: B is packed once, not copied by each."""
    launches = _tile_launches(monkeypatch)
    nr = TILE.columns(4)
    rng = np.random.default_rng(11)
    b = random(rng, (9 * nr, 40), np.float32).T
    assert_matches_numpy(random(rng, (3, 2 * MR, 40), np.float32), b)  # B shared by a batch
    assert_matches_numpy(random(rng, (4 * MR * 9 * nr, 40), np.float32), b)  # N < M: rows split
    assert [args[5] for args in launches] == [matmul_module._IN_PLACE] * 2
    assert all(args[4] == 9 for args in launches)  # b_panels: B packed


def test_outputs_start_on_a_cache_line():
    rng = np.random.default_rng(0)
    for shape_a, shape_b in [((MR, 40), (40, 3 * TILE.columns(4))), ((2, 3), (3, 5))]:
        out = matmul(random(rng, shape_a, np.float32), random(rng, shape_b, np.float32))
        assert out.ctypes.data % 64 == 0
