"""Matrix product ``C = A @ B`` with numpy's batching rules, in Numba, without BLAS.

Why the kernel is shaped the way it is
--------------------------------------
A matmul does ``2·M·N·K`` flops on ``M·K + K·N`` inputs, so it can run at the FMA units' peak
only if every value loaded is reused from registers many times. How many registers there are,
and how wide, depends on the CPU (16 × 32 bytes with AVX2, 32 × 64 bytes with AVX-512), so the
kernel is sized from :func:`~tinyattn.kernels.cpu.vector_unit` (what numba compiles for) and
:func:`~tinyattn.kernels.cpu.data_caches`, never from one machine's constants:

* **Register tile, outer-product form.** The innermost step holds an ``MR × NR`` block of C
  in ``MR · vectors`` vector registers: the register tile of :mod:`.simd`, with geometry
  :data:`TILE`. For each ``p`` along ``k`` it loads the ``vectors`` vectors
  ``B[p, j0:j0+NR]``, broadcasts each of the ``MR`` values ``A[i0+r, p]`` and issues
  ``MR · vectors`` FMAs (:func:`~.simd.tile_update`); no horizontal reduction ever. (Why the
  tile is an LLVM value of its own rather than a loop left to the vectoriser, and how its
  loads and stores are bounds-checked, is told in :mod:`.simd`.)
  :func:`micro_tile` picks the shape by rule: accumulators + B vectors + one broadcast
  register within the register file, ``vectors`` a power of two (``NR`` then divides the
  power-of-two widths of models), and the most FMAs per value loaded. With AVX-512 that is
  6 × 4 zmm (24 accumulators, ``NR`` = 64 float32 or 32 float64, 24 FMAs per 10 loads); with
  AVX2 or SSE 6 × 2 (12 accumulators, 12 FMAs per 8 loads). Vectors are the unit's full width:
  numba's functions carry no ``min-legal-vector-width``, so LLVM keeps 512-bit vectors whole on
  every AVX-512 CPU it knows (``vector_unit`` asks LLVM, and would report 32 bytes for a target
  that splits them). The same register budget in half-width vectors, the AVX2 tile and other
  shapes that fit (14 × 2, 12 × 2, 8 × 3, 4 × 4) were each slower on some shapes and not
  clearly faster on any, even on a CPU whose 512-bit FMAs run as two 256-bit halves (the
  measurements behind this choice are in ``benchmarks/results_matmul.md``, "measurements
  behind the kernel's design choices").
* **A read in place; B packed only when it must be, its panels copied by each task.** A is
  never copied: the tile broadcasts ``A[i, p]`` from ``a[i, p]`` of a C-ordered matrix or from
  ``a[p, i]`` of a transposed view (autograd's ``Xᵀ @ g``; :func:`~.simd.tile_update_t`), one
  value at a time either way. A B whose rows are contiguous and whose ``N`` is a multiple of
  ``NR`` is never packed as a whole: the tile loads ``B[p, j0:j0+NR]`` from the rows. Otherwise
  (a transposed view such as the Linear forward's ``x @ Wᵀ``, or a ragged last column of tiles)
  :func:`_pack_b` copies B once into zero-padded panels ``(N/NR, K, NR)`` starting on a cache
  line, reading it in its own memory order. A pass over all of B costs far more per value than
  an FMA, so it weighs most on small products: packing a row-major B that way was slower than
  reading it in place on every shape measured but one, and copying A into a k-major layout was
  slower too (``benchmarks/results_matmul.md``). Read in place, though, a micro-panel's ``kc``
  row segments lie ``N`` values apart, and L1 places an address by its offset within a way
  (``l1 / ways`` bytes, 4 KiB on x86): segments 2 KiB apart (``N`` = 512 float32) all fall
  in an eighth of the sets, so the panel cannot stay in L1 and every tile row fetches it again.
  So when ``N > NR`` and a task runs at least ``_COPY_MIN_TILE_ROWS`` tile rows, it first
  copies each panel into a ``kc × NR`` buffer of its own (row by row, in whole vectors):
  ``kc · vectors`` vector loads and as many stores against ``MR · kc · vectors`` FMAs per tile
  row, for a panel that then spreads over every set. On the Intel Xeon of
  ``benchmarks/results_matmul.md``, products whose operands were in cache took 0.74–0.90× the
  time (512³, W1's 1024-row shapes, Bs of several MiB), and W1's float32 products with a
  row-major B went from 0.81–0.93× OpenBLAS to 1.02–1.16×; with 2 tile rows a task the copy
  cost more than it saved. Inside a training script, where most operands come from memory, the
  products took about as long as before.
  A transposed B each of whose panels has one reader (one task runs all of an output's tile
  rows, and no two outputs share a matrix of B) is not packed first either: the task copies
  each of its panels whole from B's columns when it first meets it, into a buffer of its own
  (:func:`_columns_into`, the packing's own loop). A pass that packs all of B writes it to
  memory and reads it back, which for a B larger than the caches costs more than the product
  of a few rows: GPT-2's 50257 × 768 output head times 8 rows took 34 ms with the pass, 16 ms
  without (2 threads; a generation step without a cache, a prompt).
  Either way a transposed B is copied from its columns (the rows of ``Bᵀ``) in square blocks
  of one register's lanes, 16 × 16 float32 with AVX-512, each transposed in registers
  (:func:`~.simd.transpose_block`): a vector of each of the block's columns is loaded and the
  panel's rows are stored as whole vectors, where a copy value by value loads and stores one
  value at a time. On the AMD EPYC of ``benchmarks/results_matmul.md`` (one thread,
  ``bench_matmul.py --alternatives``, whose "Bᵀ copied value by value" is the copy before),
  float32 products of 8 rows against GPT-2's output head and its 768 × 3072 weight took
  about a third of the time, and products of 16 to 64 rows against a small GPT's weights
  0.56–0.63× the time.
* **Edges without copies of A.** When ``M`` is not a multiple of ``MR``, the last tile row is
  moved up to end at row ``M``: it recomputes rows of the tile row above, with the same
  operations in the same order, and stores only its own. C tiles on the right edge (``N`` not
  a multiple of ``NR``, so B is packed) go through a scratch tile of which only the part inside
  C is copied; the zero padding of B only meets columns of C that are not written, so inf and
  NaN propagate exactly as in the unpadded product.
* **Cache blocking from the cache sizes** (:func:`blocking`). ``k`` is cut into equal blocks
  of at most ``kc``, so that a micro-panel of B (``kc × NR``) fills at most two thirds of L1.
  For each block, a task takes its micro-panels of B one at a time and runs down its tile rows
  with each: the panel stays in L1 and only the tiles' slices of A (``MR × kc``) stream from
  L2, about a tenth of the traffic of the other order (one slice of A in L1, the panels from
  L2). With a 48 KiB L1 and 256-byte tile rows that is ``kc`` = 128. On the Intel Xeon of
  ``benchmarks/results_matmul.md`` this order with ``kc`` = 128 took the tile from 120–140 to
  150–200 GFLOP/s per core on the products of a small GPT's training step.
  The slices of A stream from L2 only if the task's slices for one block of ``k`` fit there.
  So when the tasks share out A's rows (``N <= M``), a task runs at most as many tile rows as
  have their ``MR × kc`` values of A within L2's size (``a_block_bytes``). Before this bound a
  product of many rows ran each micro-panel of B over a slab of A several megabytes long,
  fetched again from L3 or memory for every panel. On the AMD EPYC without AVX-512 of
  ``benchmarks/README.md`` (L2 512 KiB), nanoGPT's MLP at its default batch
  (16384 × 384 · 384 × 1536, float32) ran at 53 GFLOP/s, 0.41× OpenBLAS's speed, and at
  120–123 GFLOP/s (0.84–0.85×) with the bound (``bench_matmul.py --large``). Products of 1024
  rows, whose slabs are about L2's size, took 0.96–1.05× the time. A run of B's columns over
  all of A's rows (``N > M``) is not cut: B is the larger operand there, and each further
  block of rows would read all of it again (cut at half of L2,
  ``(16384 × 384)ᵀ · (16384 × 1536)`` took 1.06–1.13× the time).
* **No call, no spill inside a tile.** The loop over ``p`` is written out in
  :func:`_gemm_block` and reads every matrix of B from one 2-D stack of rows (a row offset per
  matrix or panel, not a view per tile): a call or a new array view between the tile's first
  update and its store makes numba count references there (atomic increments and decrements),
  and the call spills the 24 accumulators to the stack and back, a fifth of the time of a
  tile with ``kc`` = 64.
* **Output on a cache line.** numpy promises 16-byte alignment; C is allocated on a 64-byte
  boundary (:func:`~.aligned.aligned_empty`), so that no store of a 64-byte vector straddles
  two cache lines when ``N · itemsize`` is a multiple of 64, and a product that reads it as B
  later does not straddle either.
* **Parallel strategy.** :func:`_gemm_tiled` runs tasks of whole micro-tiles, each a
  block of tile rows × tile columns of one output matrix, *across the whole batch*: 64 small
  attention matmuls are one parallel loop with no per-matrix Python overhead, and a single
  large product is cut into at least ``_TASKS_PER_THREAD`` near-equal row blocks per thread,
  and into as many more as keep each block's slices of A in L2 (above) (numba's TBB layer
  balances them between the threads; its OpenMP layer gives each thread one contiguous run of
  tasks, and one task per thread there was no faster in W4).
  When B is wider than A is tall (``N > M``, B the larger operand, as in the weight gradient
  ``gᵀ X`` of a Linear that narrows its input, ``X`` the input and ``g`` the output's
  gradient), the threads share out B's columns rather than A's rows, so that each reads only
  its part of B: in a training script (W4), ``gᵀ X`` with 128 rows of output and 512 columns
  took 0.86× the time with its columns shared out. A row-major B is cut into
  ``_TASKS_PER_THREAD`` runs of whole tile columns per thread, each task over all of A's rows:
  a task reads each k-block of A from memory once for its run, then from L2 if it fits. With
  one tile column per task, each task read all of A (1 MiB of float64 in each of the 64
  tasks of ``(1024 × 128)ᵀ · (1024 × 512)``): on the AMD EPYC without AVX-512 of
  ``benchmarks/README.md``, W1's float64 products ``Aᵀ @ g`` took 1.08–1.13× the time of the
  runs (float32 1.04–1.08×; one process, the two plans alternating).
  A transposed B wider than A is tall (a ``Linear``'s ``x @ Wᵀ`` over fewer rows than ``W``
  has, as in generation) keeps one tile column per task, and when its tile columns share out
  evenly between the threads, A's rows are not split even when there are fewer tasks than
  ``_TASKS_PER_THREAD`` per thread: each task is then the only reader of its panels and
  copies them itself, with no pass that packs B first (above). Products of 8 to 64 rows
  against weights of 128 to 384 rows, as in sampling from a small GPT, took 0.69–0.80× the
  time.
  Each output element is one FMA chain along ``k`` in order, whatever the blocking, the tasks
  or the thread count: results are bitwise identical run to run and for any thread count.
  Each parallel launch holds :data:`~tinyattn.kernels.parallel.kernel_section` (a lock only
  on numba's non-thread-safe ``workqueue`` layer), through :func:`~.parallel.run_tasks`.
* **Row sums on the way.** A Linear's bias gradient ``Σ_rows G`` is the sums of the rows of
  ``Gᵀ``, the A of its weight gradient ``Gᵀ X``. Summed by a kernel of its own after the
  product, ``G`` comes back from memory or from the other core's cache (at W4's shapes a column
  sum took 42–49 µs right after the two products that read ``G``, 26 µs with ``G`` in its own
  caches; in the script the Linear backward took 0.24–0.48 ms less per iteration with the sums
  made in the product, ``benchmarks/README.md``). With ``row_sums``, the task of
  the first tile column over each tile row adds each k-block of its rows of A to the sums,
  in float64 and in order of ``p``, just before its tiles read them (:func:`_add_row_sums`):
  one chain per row, the same bits for any thread count or split.
* **Tiny products** (under ``_TINY_MACS`` multiply-adds in all, with at least ``MR`` rows;
  or any product when ``NUMBA_DISABLE_JIT=1`` turns the intrinsics off) skip the tile and
  threads: :func:`_gemm_small` is a serial i-k-j loop whose inner loop over ``j`` vectorises.
* **Fewer rows than the tile** (``M < MR``: one token decoded with a KV cache, the last
  position's logits when sampling), of any size, go to :mod:`.matvec`, which reads B once, in
  place, whatever its layout: a transposed weight copied for one row of A cost a pass over all
  of it per token (a GPT-2 of 124M parameters decoded a token in 0.45 s that way, in 0.03 s
  now: ``benchmarks/README.md``, W5; :func:`matmul` for a 128 × 128 ``Linear`` on one row,
  small enough to count as tiny, took 18 µs with the copy and 10 µs in place, ``timeit``).
* **Compile cost.** Each kernel has one specialisation per dtype: A and B reach
  :func:`_gemm_block` as C-contiguous stacks (transposed or not, said by a runtime flag), and the
  tile is inlined into it. :func:`_gemm_block` and :func:`_pack_panel` are task functions,
  compiled once and called by address from the shared loop of
  :func:`~tinyattn.kernels.parallel.run_tasks`. Edge tiles go through
  :func:`_edge_tile`, and blocks are copied element by element: a slice assignment would also
  compile numba's shape-mismatch error, whose message formatting costs seconds. The tile's
  geometry is a compile-time constant that depends only on the vector unit, which numba's
  cache key already holds (CPU name and features), so a cache compiled for another CPU is
  never loaded.

Floating-point: the tile's ``a·b + c`` is contracted to an FMA where the CPU has one (one
rounding fewer); nothing is reassociated and ``nnan``/``ninf`` are never assumed, so the
summation order is fixed by the code (deterministic) and ``inf``/``NaN`` inputs give the same
non-finite outputs as numpy. The float32 result differs from numpy's only by rounding.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import config

from .aligned import aligned_empty
from .compiled_only import compiled_only
from .cpu import DataCaches, VectorUnit, data_caches, vector_unit
from .jit import jit
from .matvec import few_rows_product
from .parallel import get_num_threads, run_tasks
from .simd import (
    TRANSPOSE_BYTES,
    TileShape,
    prefer_full_width,
    tile_add_row,
    tile_load,
    tile_store,
    tile_update,
    tile_update_t,
    tile_zero,
    transpose_block,
)

_TINY_MACS = 32768  # below this many multiply-adds in total, use the unpacked serial loop
_TASKS_PER_THREAD = 4  # split C into at least this many blocks per thread (see module doc)
_B_PANELS_PER_TASK = 4  # micro-tile columns per task, at most (see blocking)
_COPY_MIN_TILE_ROWS = 4  # tile rows per task from which a task copies its panels of B
# Where a task of the tile reads B (see _gemm_block): in place (its rows or its packed panels),
# or from a copy of each panel that the task makes itself, from B's rows or from its columns.
_IN_PLACE, _COPY_ROWS, _COPY_COLUMNS = np.int64(0), np.int64(1), np.int64(2)
_ZERO = np.int64(0)  # a constant argument of a helper, of the type of its computed ones


def micro_tile(unit: VectorUnit) -> TileShape:
    """The register tile for ``unit``: the most FMAs per value loaded that fit its registers.

    Each step along ``k`` loads ``vectors`` vectors of B and broadcasts ``rows`` values of A,
    then issues ``rows · vectors`` FMAs. The tile needs ``rows · vectors`` accumulators, the
    ``vectors`` B vectors and one broadcast register, all within ``unit.registers``; among
    those shapes it takes the highest ``rows · vectors / (rows + vectors)`` (FMAs per load),
    with ``vectors`` a power of two so that ``NR`` divides the power-of-two widths of models.
    Tile vectors are the unit's full width.

    Examples
    --------
    >>> from tinyattn.kernels.cpu import VectorUnit
    >>> micro_tile(VectorUnit("x", frozenset(), 64, 32))  # AVX-512: 6 × 4 zmm
    TileShape(rows=6, vectors=4, vector_bytes=64)
    >>> micro_tile(VectorUnit("x", frozenset(), 32, 16))  # AVX2: 6 × 2 ymm
    TileShape(rows=6, vectors=2, vector_bytes=32)
    """
    best, best_score = TileShape(1, 1, unit.vector_bytes), 0.0
    vectors = 1
    while vectors < unit.registers:
        rows = (unit.registers - 1 - vectors) // vectors
        if rows >= 1 and rows * vectors / (rows + vectors) > best_score:
            best, best_score = TileShape(rows, vectors, unit.vector_bytes), \
                rows * vectors / (rows + vectors)
        vectors *= 2
    return best


@dataclass(frozen=True)
class Blocking:
    """Cache blocking of the product: values of ``k``, micro-tile columns, bytes of A.

    Attributes
    ----------
    kc : int
        Longest block of ``k``: a micro-panel of B, ``kc × NR``, fills at most two thirds of
        L1, so it stays there while a task runs down its tile rows with it.
    nc_panels : int
        Micro-tile columns per task, at most (how ``N`` is cut between tasks), unless B is
        wider than A is tall (then ``N`` is cut by the thread count; see the module doc).
    a_block_bytes : int
        When the tasks share out A's rows (``N <= M``), the most bytes of A a task's tile rows
        may read for one block of ``k`` (``MR × kc`` values per tile row): L2's size, so that
        they stay there while the task's micro-panels of B run over them.
    """

    kc: int
    nc_panels: int
    a_block_bytes: int


def blocking(caches: DataCaches, tile: TileShape, itemsize: int) -> Blocking:
    """Blocking for a core with ``caches``, ``tile`` and values of ``itemsize`` bytes.

    ``kc`` is as long as a ``kc × NR`` micro-panel of B may be and still fill at most two
    thirds of L1 (the rest is for the slices of A that stream past it and for C's tile),
    and at least 16; a task's slices of A for one block of ``k`` fill at most L2.

    Examples
    --------
    >>> from tinyattn.kernels.cpu import DataCaches
    >>> blocking(DataCaches(48 * 1024, 2048 * 1024), TileShape(6, 4, 64), 4)
    Blocking(kc=128, nc_panels=4, a_block_bytes=2097152)
    """
    panel_row = tile.columns(itemsize) * itemsize  # bytes of B per k and micro-panel
    kc = caches.l1 * 2 // 3 // panel_row
    return Blocking(max(16, kc), _B_PANELS_PER_TASK, caches.l2)


# The register tile of the product (a compile-time constant of the jitted code) and its rows.
TILE = micro_tile(vector_unit())
MR = TILE.rows
_PANEL_ROW = TileShape(1, TILE.vectors, TILE.vector_bytes)  # one row of a micro-panel of B
_TILE_ROW_BYTES = TILE.vectors * TILE.vector_bytes  # NR · itemsize


def matmul_numpy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`matmul` (the test oracle): ``np.matmul(a, b)``."""
    return np.matmul(a, b)


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None,
           row_sums: np.ndarray | None = None) -> np.ndarray:
    """Batched matrix product with ``np.matmul`` semantics, for ``a.ndim, b.ndim >= 2``.

    Parameters
    ----------
    a : np.ndarray
        ``(..., M, K)``, float32 or float64, any strides (transposed views are read in place).
    b : np.ndarray
        ``(..., K, N)``, same dtype as ``a``; the batch dims broadcast against ``a``'s.
    bias : np.ndarray, optional
        ``(N,)``, same dtype: added to every row of the product, each element rounded as
        ``(a @ b) + bias`` (the tile adds it before its one store, instead of a second pass
        over the output).
    row_sums : np.ndarray, optional
        ``(M,)`` float64, for a 2-D ``a``: ``row_sums[i] += Σ_p A[i, p]``, each row summed in
        order of ``p`` in float64 (the same bits for any thread count), by the tasks that run
        over that row, block of ``k`` by block of ``k`` as they read it. The bias gradient of a
        ``Linear``, ``Σ_rows G``, is the row sums of ``Gᵀ`` in its weight gradient ``Gᵀ X``:
        summed here, ``G`` is read once instead of again from memory or the other core's cache.

    Returns
    -------
    np.ndarray
        New C-contiguous ``(broadcast batch..., M, N)`` array of the input dtype.

    Examples
    --------
    >>> import numpy as np
    >>> matmul(np.ones((2, 3)), np.ones((3, 4))).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    >>> matmul(np.ones((2, 3)), np.ones((3, 2)), np.array([0.5, -1.0])).tolist()
    [[3.5, 2.0], [3.5, 2.0]]
    >>> sums = np.zeros(2)
    >>> _ = matmul(np.arange(6.0).reshape(2, 3), np.ones((3, 4)), row_sums=sums)
    >>> sums.tolist()
    [3.0, 12.0]
    """
    assert a.ndim >= 2 and b.ndim >= 2, (a.shape, b.shape)
    assert a.dtype == b.dtype and a.dtype in (np.float32, np.float64), (a.dtype, b.dtype)
    assert a.shape[-1] == b.shape[-2], (a.shape, b.shape)
    (m, k), n = a.shape[-2:], b.shape[-1]
    assert bias is None or (bias.shape == (n,) and bias.dtype == a.dtype), (bias, n, a.dtype)
    assert row_sums is None or (a.ndim == 2 and row_sums.shape == (m,) and row_sums.dtype
                                == np.float64 and row_sums.flags.c_contiguous), (a.shape, row_sums)
    batch, a_index, b_index = _batch_indices(a.shape[:-2], b.shape[:-2])
    if k == 0 or m == 0 or n == 0 or a_index.size == 0:
        out = np.zeros(batch + (m, n), a.dtype)
        return out if bias is None else out + bias
    a3 = _stack_of_matrices(a)  # (batch_a, M, K)
    b3 = _stack_of_matrices(b)  # (batch_b, K, N)
    out = aligned_empty((a_index.size, m, n), a.dtype)
    if config.DISABLE_JIT or (m >= MR and a_index.size * m * n * k < _TINY_MACS):
        _gemm_small(np.ascontiguousarray(a3), np.ascontiguousarray(b3), a_index, b_index, out)
        if bias is not None:
            out += bias
    elif m >= MR:  # the tile, which sums A's rows on the way
        _gemm_tiled(a3, b3, a_index, b_index, out, bias, row_sums)
        return out.reshape(batch + (m, n))
    else:  # too few rows for the tile: B read once, in place
        few_rows_product(a3, b3, a_index, b_index, out, bias)
    if row_sums is not None:
        row_sums += a.sum(axis=1, dtype=np.float64)
    return out.reshape(batch + (m, n))


def _gemm_tiled(a3: np.ndarray, b3: np.ndarray, a_index: np.ndarray, b_index: np.ndarray,
                out: np.ndarray, bias: np.ndarray | None, row_sums: np.ndarray | None) -> None:
    """``out[o] = a3[a_index[o]] @ b3[b_index[o]] (+ bias)`` with the register tile (see
    module doc), and the sums of ``A``'s rows added to ``row_sums`` when it is given."""
    plan = _tile_plan(a3.flags.c_contiguous, b3.shape, b3.flags.c_contiguous, out.shape,
                      out.itemsize, get_num_threads())
    _, k, n = b3.shape
    a_data = a3.swapaxes(1, 2) if plan.a_transposed else a3  # C-contiguous either way
    if plan.b_source == _B_ROWS:
        b_rows = b3.reshape(-1, n)  # (batch_b · K, N), read in place
    elif plan.b_source == _B_COLUMNS:
        b_rows = b3.swapaxes(1, 2).reshape(-1, k)  # (batch_b · N, K): B's columns
    else:
        b_rows = _pack_b(b3, plan.nr).reshape(-1, plan.nr)  # (batch_b · N panels · K, NR)
    if bias is None:
        bias_row = plan.zero_bias
    else:  # the bias as one row, zero padded to whole tiles (an edge tile reads NR values)
        bias_row = np.zeros_like(plan.zero_bias)
        bias_row[0, :n] = bias
    run_tasks(_gemm_block, plan.n_tasks, a_data, plan.a_transposed, b_rows, plan.b_panels,
              plan.copy, a_index, b_index, bias_row, bias is not None,
              _NO_ROW_SUMS if row_sums is None else row_sums, row_sums is not None, out,
              plan.kc, plan.m_blocks, plan.n_blocks, parallel=True)


# Where _gemm_tiled's tasks read B: its rows in place, its columns, or panels packed first.
_B_ROWS, _B_COLUMNS, _B_PACKED = range(3)


@dataclass(frozen=True)
class TilePlan:
    """How :func:`_gemm_tiled` runs one shape of product (:func:`_tile_plan`)."""

    a_transposed: bool  # A is read through its transpose (C-contiguous ``Aᵀ``)
    b_source: int  # _B_ROWS, _B_COLUMNS or _B_PACKED
    copy: np.int64  # how a task reads its panels of B (_IN_PLACE, _COPY_ROWS, _COPY_COLUMNS)
    b_panels: int  # panels per matrix of B in the rows the tasks read (1 unless packed)
    nr: int  # columns of the register tile
    kc: int  # values of k per block
    m_blocks: int  # tasks along the rows of each output matrix
    n_blocks: int  # tasks along its columns
    n_tasks: int
    zero_bias: np.ndarray  # (1, N rounded up to whole tiles) zeros: a bias row's shape, and
    # the argument of a product without one (the tasks do not read it then)


@functools.lru_cache(maxsize=512)
def _tile_plan(a_contiguous: bool, b_shape: tuple[int, ...], b_contiguous: bool,
               out_shape: tuple[int, ...], itemsize: int, threads: int) -> TilePlan:
    """The :class:`TilePlan` of a product of ``(batch, rows, cols)`` stacks, A and B each
    C-contiguous or transposed, worked out once per shape, layout and thread count: a training
    step or a sampling loop meets the same few shapes on every step, and working it out again
    cost about 3 µs of Python per product."""
    (_, k, n), (batch_out, m, _) = b_shape, out_shape
    nr = TILE.columns(itemsize)
    block = _blocking(itemsize)
    kc = -(-k // -(-k // block.kc))  # equal k-blocks of at most block.kc
    n_panels = -(-n // nr)
    if n <= m:
        n_blocks = -(-n_panels // block.nc_panels)
    elif b_contiguous:
        # B wider than A is tall (N > M; B the larger operand): the tasks share out B's
        # columns in runs of whole micro-tile columns, so that each thread reads only its part
        # of B, and each task reads A once per run rather than once per column
        n_blocks = min(n_panels, -(-_TASKS_PER_THREAD * threads // batch_out))
    else:  # a transposed B: one micro-tile column per task, which may copy it itself (below)
        n_blocks = n_panels
    m_panels = -(-m // MR)
    m_blocks = min(m_panels, max(1, -(-_TASKS_PER_THREAD * threads // (batch_out * n_blocks))))
    if n <= m:  # the rows shared out: each task's slices of A for a block of k stay in L2
        tile_rows = max(1, block.a_block_bytes // (MR * kc * itemsize))
        m_blocks = max(m_blocks, -(-m_panels // tile_rows))
    if not b_contiguous and n > m and b_shape[0] == batch_out and \
            batch_out * n_blocks % threads == 0:
        # a transposed B wider than A is tall whose panels the threads share evenly: one task
        # per panel, which copies it itself (below) rather than wait for a pass that packs all
        # of B, which costs more than a product of a few rows
        m_blocks = 1
    copy, b_panels = _IN_PLACE, 1
    if b_contiguous and n % nr == 0:
        b_source = _B_ROWS
        # rows N values apart: each task copies a panel before its tile rows run over it
        if n > nr and m_panels // m_blocks >= _COPY_MIN_TILE_ROWS:
            copy = _COPY_ROWS
    elif not b_contiguous and m_blocks == 1 and b_shape[0] == batch_out:
        # a transposed B each of whose panels is read by one task only: that task copies it
        # from B's columns itself, instead of a pass that packs all of B first
        b_source, copy = _B_COLUMNS, _COPY_COLUMNS
    else:
        b_source, b_panels = _B_PACKED, n_panels
    dtype = np.float32 if itemsize == 4 else np.float64
    return TilePlan(not a_contiguous, b_source, copy, b_panels, nr, kc, m_blocks, n_blocks,
                    batch_out * m_blocks * n_blocks, np.zeros((1, n_panels * nr), dtype))


_NO_ROW_SUMS = np.zeros(0, np.float64)  # the row sums argument of a product that adds none


@functools.lru_cache(maxsize=4)
def _blocking(itemsize: int) -> Blocking:
    return blocking(data_caches(), TILE, itemsize)


@functools.lru_cache(maxsize=256)
def _batch_indices(
    a_batch: tuple[int, ...], b_batch: tuple[int, ...]
) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """The broadcast batch shape and, for each of its matrices, the index of A's and B's.

    Cached: the same shapes come back on every training step. The index arrays are int64,
    writable (one numba signature) and never written to.
    """
    batch = np.broadcast_shapes(a_batch, b_batch)

    def index(shape: tuple[int, ...]) -> np.ndarray:
        own = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        return np.broadcast_to(own, batch).flatten()

    return batch, index(a_batch), index(b_batch)


def _stack_of_matrices(x: np.ndarray) -> np.ndarray:
    """``x`` as ``(batch, rows, cols)``, C-contiguous with or without its last two axes swapped.

    No copy when ``x`` already is (a C array, or a transposed view of one).
    """
    x3 = x.reshape((-1,) + x.shape[-2:])
    if x3.flags.c_contiguous or x3.swapaxes(1, 2).flags.c_contiguous:
        return x3
    if abs(x3.strides[1]) < abs(x3.strides[2]):  # nearer to a transposed layout: keep it
        return np.ascontiguousarray(x3.swapaxes(1, 2)).swapaxes(1, 2)
    return np.ascontiguousarray(x3)


def _pack_b(b3: np.ndarray, width: int) -> np.ndarray:
    """Panels ``(batch, ceil(N / width), K, width)`` of ``b3 (batch, K, N)``, zero padded.

    ``packed[o, s, p, j] = b3[o, p, s·width + j]``; the array starts on a cache line.
    """
    batch, k, n = b3.shape
    packed = aligned_empty((batch, -(-n // width), k, width), b3.dtype)
    by_columns = not b3.flags.c_contiguous
    run_tasks(_pack_panel, batch * packed.shape[1],  # one task per panel
              b3.swapaxes(1, 2) if by_columns else b3, packed, by_columns,  # C-contiguous
              parallel=True)
    return packed


@compiled_only
def _pack_panel(b, packed, by_columns, task):
    """``packed[o, s, p, j] = B[o, p, s·width + j]`` for the panel ``(o, s)`` number ``task``.

    ``b`` is ``B`` itself ``(batch, K, N)`` (row segments of ``B`` are copied), or with
    ``by_columns`` its transpose ``(batch, N, K)`` (each column of ``B`` is read in order).
    """
    k, panels, width = packed.shape[2], packed.shape[1], packed.shape[3]
    n = b.shape[1] if by_columns else b.shape[2]
    o = task // panels
    s = task % panels
    panel = packed[o, s]  # (K, width)
    j0 = s * width
    valid = min(width, n - j0)
    if by_columns:
        _columns_into(panel, _ZERO, b[o], j0, k, valid)
    else:
        for p in range(k):
            for j in range(valid):
                panel[p, j] = b[o, p, j0 + j]
        panel[:, valid:] = 0


@compiled_only
def _columns_into(panel, row0, columns, first, k, valid):
    """``panel[row0 + p, j] = columns[first + j, p]`` for ``p < k`` and ``j < valid``, and 0 for
    ``valid <= j < NR``: a panel of B copied from B's columns (the rows of ``columns``, ``Bᵀ``).

    Square blocks of one vector's lanes (16 × 16 float32 with AVX-512) at a time, transposed in
    registers (:func:`~.simd.transpose_block`): a group of ``lanes`` columns is read in order
    along ``k``, a vector of each at once, and written as whole vectors along the panel's rows.
    The ends that do not fill a block go value by value. No views: a view of an array the
    threads share counts references, atomically, on memory they all touch.
    """
    lanes = TRANSPOSE_BYTES // panel.itemsize  # the side of transpose_block's square
    grouped = valid - valid % lanes
    blocked = k - k % lanes
    for g in range(0, grouped, lanes):
        for p in range(0, blocked, lanes):
            transpose_block(columns, first + g, p, panel, row0 + p, g)
        for p in range(blocked, k):
            for q in range(lanes):
                panel[row0 + p, g + q] = columns[first + g + q, p]
    for j in range(grouped, valid):
        for p in range(k):
            panel[row0 + p, j] = columns[first + j, p]
    for p in range(row0, row0 + k):
        for j in range(valid, panel.shape[1]):
            panel[p, j] = 0


@compiled_only
def _edge_tile(a, a_transposed, i0, b, q0, j0, p0, p1, bias_row, add_bias, c, cj, cols, edge,
               accumulate, first):
    """The tile of rows ``i0 + first .. i0 + MR`` and columns ``cj .. cj + cols < NR`` of ``c``,
    through the scratch tile ``edge`` (``MR × NR``): only the part inside ``c`` is copied."""
    if accumulate:
        _copy_block(c, i0 + first, cj, edge, first, 0, MR - first, cols)
    tile = tile_load(edge, 0, 0, TILE) if accumulate else tile_zero(edge, TILE)
    if a_transposed:
        for p in range(p0, p1):
            tile = tile_update_t(tile, a, i0, p, b, q0 + p, j0)
    else:
        for p in range(p0, p1):
            tile = tile_update(tile, a, i0, p, b, q0 + p, j0)
    if add_bias:
        tile = tile_add_row(tile, bias_row, cj)
    tile_store(edge, 0, 0, tile, first)
    _copy_block(edge, first, 0, c, i0 + first, cj, MR - first, cols)


@compiled_only
def _gemm_block(a_data, a_transposed, b_rows, b_panels, copy, a_index, b_index, bias_row,
                has_bias, row_sums, has_row_sums, out, kc, m_blocks, n_blocks, task):
    """Block number ``task`` of ``out[o] = A[a_index[o]] @ B[b_index[o]]`` (``M >= MR``), plus
    ``bias_row[0, :N]`` on every row when ``has_bias`` (added to the tile after its last
    k-block, before the store). With ``has_row_sums`` (one matrix ``A``), the task of the
    first tile column over each of its tile rows also adds each ``k``-block of those rows of
    ``A`` to ``row_sums``, before its tiles run over them.

    ``a_data`` is ``(batch_a, M, K)``, or ``(batch_a, K, M)`` when ``a_transposed``, read in
    place. ``b_rows`` is every matrix of B, one 2-D stack of rows: ``b_panels`` zero-padded
    panels ``(K, NR)`` per matrix (``(batch_b · N panels · K, NR)``), or the matrices
    themselves (``b_panels == 1``: ``(batch_b · K, N)``, ``N`` a multiple of ``NR``), or with
    ``copy == _COPY_COLUMNS`` the matrices of ``Bᵀ`` (``(batch_b · N, K)``: B's columns). Each
    output matrix is cut into ``m_blocks × n_blocks`` tasks of whole micro-tiles. For each
    ``kc``-long block of ``k`` in order, a task takes its micro-tile columns one by one and
    runs down its tile rows with each: that ``kc × NR`` panel of B stays in L1 while the
    tiles' slices of A stream past it. With ``copy`` (``_COPY_ROWS`` or ``_COPY_COLUMNS``),
    the task first copies the panel from B's rows or columns into a buffer of its own, where
    its rows lie side by side (zero past ``N``). The last tile
    row is moved up to end at row ``M`` and stores only its own rows (those above belong to the
    tile row before, and are computed again with the same operations); tiles on the right edge
    go through a scratch tile.
    """
    batch, m, n = out.shape
    k = a_data.shape[1] if a_transposed else a_data.shape[2]
    nr = _TILE_ROW_BYTES // out.itemsize
    m_panels = -(-m // MR)
    n_panels = -(-n // nr)
    o = task // (m_blocks * n_blocks)
    mb = task // n_blocks % m_blocks
    nb = task % n_blocks
    ip0, ip1 = mb * m_panels // m_blocks, (mb + 1) * m_panels // m_blocks
    a = a_data[a_index[o]]  # (M, K), or (K, M) when a_transposed
    c = out[o]  # (M, N)
    edge = np.empty((MR, nr), out.dtype)
    first_panel, end_panel = nb * n_panels // n_blocks, (nb + 1) * n_panels // n_blocks
    # the task's copies of panels: one k-block of one, or the whole of each of its own
    copy_rows = kc if copy == _COPY_ROWS else (end_panel - first_panel) * k
    copied = np.empty((copy_rows if copy != _IN_PLACE else 0, nr), out.dtype)
    sum_rows = has_row_sums and o == 0 and nb == 0  # one task per row adds it up
    # panel[q0 + p, j0:j0+NR] is B[p, jp·NR:(jp+1)·NR]. Chosen once per task: an array
    # assigned inside the loops has its reference count raised and lowered there, atomically,
    # on memory the other thread's tasks touch too (W4's products, in cache: 4% longer).
    panel = copied if copy != _IN_PLACE else b_rows
    for p0 in range(0, k, kc):
        p1 = min(p0 + kc, k)
        accumulate = p0 > 0
        add_bias = has_bias and p1 == k
        if sum_rows:
            _add_row_sums(a, a_transposed, ip0 * MR, min(ip1 * MR, m), p0, p1, row_sums)
        for jp in range(first_panel, end_panel):
            cj = jp * nr
            cols = min(nr, n - cj)
            if b_panels == 1:  # the rows of B[b_index[o]], read at column jp · NR
                q0, j0 = b_index[o] * k, cj
            else:  # panel jp of B[b_index[o]]
                q0, j0 = (b_index[o] * b_panels + jp) * k, 0
            if copy == _COPY_ROWS:  # row by row, in whole vectors
                for r in range(p1 - p0):
                    tile_store(copied, r, 0, tile_load(b_rows, q0 + p0 + r, j0, _PANEL_ROW), 0)
                q0, j0 = -p0, 0
            elif copy == _COPY_COLUMNS:  # the whole panel, copied when the task first meets it
                q0, j0 = (jp - first_panel) * k, 0
                if p0 == 0:
                    _columns_into(copied, q0, b_rows, b_index[o] * n + cj, k, cols)
            for ip in range(ip0, ip1):
                i0 = min(ip * MR, m - MR)
                first = ip * MR - i0  # rows of this tile that the tile row above stores
                if cols < nr:  # the right edge
                    _edge_tile(a, a_transposed, i0, panel, q0, j0, p0, p1, bias_row, add_bias,
                               c, cj, cols, edge, accumulate, first)
                    continue
                # the micro-tile, written out here: the tile stays in registers from the first
                # update to the store (a call in between would spill it)
                tile = tile_load(c, i0, cj, TILE) if accumulate else tile_zero(c, TILE)
                if a_transposed:
                    for p in range(p0, p1):
                        tile = tile_update_t(tile, a, i0, p, panel, q0 + p, j0)
                else:
                    for p in range(p0, p1):
                        tile = tile_update(tile, a, i0, p, panel, q0 + p, j0)
                if add_bias:
                    tile = tile_add_row(tile, bias_row, cj)
                tile_store(c, i0, cj, tile, first)


@compiled_only
def _add_row_sums(a, a_transposed, r0, r1, p0, p1, sums):
    """``sums[i] += Σ_{p0 <= p < p1} A[i, p]`` for ``r0 <= i < r1``, in order of ``p``, in
    float64; ``A[i, p]`` is ``a[i, p]``, or ``a[p, i]`` when ``a_transposed``."""
    prefer_full_width()
    own = sums[r0:r1]
    if a_transposed:  # add rows of a, each along the rows of A it holds (vectorised)
        for p in range(p0, p1):
            values = a[p, r0:r1]
            for i in range(own.size):
                own[i] += values[i]
    else:
        for i in range(own.size):
            values = a[r0 + i, p0:p1]
            total = own[i]
            for p in range(values.size):
                total += values[p]
            own[i] = total


@compiled_only
def _copy_block(src, si, sj, dst, di, dj, rows, cols):
    """``dst[di:di+rows, dj:dj+cols] = src[si:si+rows, sj:sj+cols]``, element by element (a
    slice assignment would compile numba's shape-mismatch error path, strings and all)."""
    for r in range(rows):
        for j in range(cols):
            dst[di + r, dj + j] = src[si + r, sj + j]


@jit
def _gemm_small(a, b, a_index, b_index, out):
    """Serial unpacked product for tiny inputs: ``out[o] = a[a_index[o]] @ b[b_index[o]]``.

    Loop order i-k-j: the inner loop over ``j`` runs along contiguous rows of ``b`` and
    ``out``, so it vectorises without reassociation.
    """
    batch, m, n = out.shape
    k = a.shape[2]
    for o in range(batch):
        a_mat = a[a_index[o]]
        b_mat = b[b_index[o]]
        for i in range(m):
            out_row = out[o, i]
            out_row[:] = 0
            for p in range(k):
                a_ip = a_mat[i, p]
                for j in range(n):
                    out_row[j] += a_ip * b_mat[p, j]
