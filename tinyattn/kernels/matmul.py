"""Matrix product ``C = A @ B`` with numpy's batching rules, in Numba, without BLAS.

Why the kernel is shaped the way it is
--------------------------------------
A matmul does ``2·M·N·K`` flops on ``M·K + K·N`` inputs, so it can run at the FMA units' peak
only if every value loaded is reused from registers many times. The kernel is built around that:

* **Micro-tile in registers, dot-product form.** The innermost routine, :func:`_micro_tile`,
  computes a ``MR × NR = 4 × 3`` block of C as 12 dot products over a stretch of ``k``, held
  in 12 scalar accumulators. Numba runs LLVM's loop vectoriser but not its SLP (straight-line)
  vectoriser, so the only loop that can become SIMD is the innermost ``for p`` loop over
  ``k``; with ``reassoc`` allowed it turns each accumulator into a vector of partial sums
  (8 float32 / 4 float64 lanes), reduced once at the end of the stretch. Per vector step it
  loads 4 + 3 vectors and issues 12 FMAs, which keeps the two FMA pipes busy while 12
  accumulators + 4 loaded ``A`` vectors stay within the 16 AVX2 registers (a 4 × 4 tile
  spills, measured). The classic outer-product tile (broadcast A, vector of B columns) needs
  the SLP vectoriser, or accumulators in memory, which cap it at one FMA per store.
* **Packing.** The dot-product form wants, for each micro-tile, ``MR`` rows of A and ``NR``
  columns of B each contiguous in ``k``. :func:`_pack_slivers` copies A (and B read as
  ``Bᵀ``) into *slivers* ``(batch, k-block, sliver, MR or NR, kc)``, contiguous per sliver
  and zero padded to whole tiles and to a multiple of 16 in ``k``. The padded entries of A and
  B only ever meet each other (``0·0``), or land in rows/columns of C that are not written, so
  inf and NaN propagate exactly as in the unpadded product. Packing reads either layout of
  the last two dims with its own loop order, which is why a transposed view (``x.T``,
  ``x.swapaxes(-1, -2)``, the autograd backward's ``g @ Wᵀ`` and ``Xᵀ @ g``) needs no copy:
  for ``A @ Wᵀ`` the packing of B is then a plain contiguous copy.
* **k-blocking.** ``k`` is cut into blocks of ``kc`` values (2 KiB per packed row: 512
  float32 / 256 float64), so the 7 streams of one micro-tile (14 KiB) stay in the 32 KiB L1
  and a task's ``64 × kc`` block of A (128 KiB) stays in the 512 KiB L2 while it meets every
  B sliver of the task. Longer ``kc`` also amortises the final lane reduction of each tile.
* **Parallel strategy.** :func:`_gemm_packed` runs ``prange`` over independent output blocks
  of ``MC × NC = 64 × 48`` (16 × 16 micro-tiles) *across the whole batch*, so 64 small
  attention matmuls are one parallel loop with no per-matrix Python overhead. Each output
  element is owned by one task, which adds the k-blocks in order: results are bitwise
  identical run to run and for any thread count.
* **Tiny products** (under ``_TINY_MACS`` multiply-adds in all) skip packing and threads:
  :func:`_gemm_small` is a serial i-k-j loop whose inner loop over ``j`` vectorises.

Floating-point flags: the tile uses ``fastmath={'reassoc', 'contract'}``. ``reassoc`` lets
LLVM split each dot product over SIMD lanes (the summation order is fixed by the compiled
code, so it is deterministic); ``contract`` fuses ``a*b + c`` into an FMA (one rounding
fewer). ``nnan``/``ninf`` stay off, so ``inf``/``NaN`` inputs give the same non-finite
outputs as numpy. The float32 result differs from numpy's only by rounding.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

MR = 4  # rows of A per micro-tile
NR = 3  # columns of B per micro-tile
_K_ALIGN = 16  # packed k-blocks are padded to a multiple of this (no vector remainder loop)
_KC_BYTES = 2048  # bytes of one packed row of a k-block: 512 float32 or 256 float64
_MC_TILES = 16  # micro-tile rows per parallel task: 64 rows of C
_NC_TILES = 16  # micro-tile columns per parallel task: 48 columns of C
_TINY_MACS = 32768  # below this many multiply-adds in total, use the unpacked serial loop
_FASTMATH = {"reassoc", "contract"}


def matmul_numpy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`matmul` (the test oracle): ``np.matmul(a, b)``."""
    return np.matmul(a, b)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Batched matrix product with ``np.matmul`` semantics, for ``a.ndim, b.ndim >= 2``.

    Parameters
    ----------
    a : np.ndarray
        ``(..., M, K)``, float32 or float64, any strides (transposed views are read in place).
    b : np.ndarray
        ``(..., K, N)``, same dtype as ``a``; the batch dims broadcast against ``a``'s.

    Returns
    -------
    np.ndarray
        New C-contiguous ``(broadcast batch..., M, N)`` array of the input dtype.

    Examples
    --------
    >>> import numpy as np
    >>> matmul(np.ones((2, 3)), np.ones((3, 4))).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    """
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(
            f"matmul: kernel needs operands with >= 2 dims, got {a.shape} and {b.shape}"
        )
    if a.dtype != b.dtype or a.dtype not in (np.float32, np.float64):
        raise TypeError(
            f"matmul: expected two float32 or two float64 arrays, got {a.dtype} and {b.dtype}"
        )
    m, k = a.shape[-2:]
    k_b, n = b.shape[-2:]
    if k != k_b:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align: {k} != {k_b}")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: batch dims of {a.shape} and {b.shape} do not broadcast"
        ) from None
    out_shape = batch + (m, n)
    if k == 0 or 0 in out_shape:
        return np.zeros(out_shape, a.dtype)
    a_index = _batch_index(a.shape[:-2], batch)
    b_index = _batch_index(b.shape[:-2], batch)
    a3 = _stack_of_matrices(a)  # (batch_a, M, K)
    b3 = _stack_of_matrices(b)  # (batch_b, K, N)
    out = np.empty((a_index.size, m, n), a.dtype)
    if a_index.size * m * n * k < _TINY_MACS:
        _gemm_small(np.ascontiguousarray(a3), np.ascontiguousarray(b3), a_index, b_index, out)
    else:
        k_blocks, kc = _k_blocking(k, a.dtype.itemsize)
        a_packed = _pack(a3, MR, k_blocks, kc)
        b_packed = _pack(b3.swapaxes(1, 2), NR, k_blocks, kc)  # B read as Bᵀ: (batch_b, N, K)
        _gemm_packed(a_packed, b_packed, a_index, b_index, out)
    return out.reshape(out_shape)


def _batch_index(shape: tuple[int, ...], batch: tuple[int, ...]) -> np.ndarray:
    """For each matrix of the broadcast ``batch``, the index of its operand matrix (int64)."""
    own = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    return np.ascontiguousarray(np.broadcast_to(own, batch)).reshape(-1)


def _stack_of_matrices(x: np.ndarray) -> np.ndarray:
    """``x`` as ``(batch, rows, cols)`` whose last two dims are C- or F-ordered (no copy if so)."""
    x3 = x.reshape((-1,) + x.shape[-2:])
    if x3.shape[0] > 0 and not (x3[0].flags.c_contiguous or x3[0].flags.f_contiguous):
        x3 = np.ascontiguousarray(x3)
    return x3


def _k_blocking(k: int, itemsize: int) -> tuple[int, int]:
    """Number of k-blocks and their padded length ``kc`` (equal blocks, multiple of 16)."""
    kc_max = _KC_BYTES // itemsize
    k_blocks = -(-k // kc_max)
    kc = -(-k // k_blocks)
    return k_blocks, -(-kc // _K_ALIGN) * _K_ALIGN


def _pack(x3: np.ndarray, width: int, k_blocks: int, kc: int) -> np.ndarray:
    """Slivers ``(batch, k_blocks, ceil(rows / width), width, kc)`` of ``x3`` (see module doc)."""
    slivers = -(-x3.shape[1] // width)
    packed = np.empty((x3.shape[0], k_blocks, slivers, width, kc), x3.dtype)
    _pack_slivers(x3, packed)
    return packed


@njit(parallel=True, cache=True)
def _pack_slivers(x, packed):
    """``packed[b, kb, s, r, p] = x[b, s·width + r, kb·kc + p]``, zero where ``x`` has no entry.

    Rows of ``x`` contiguous in ``k``: copy row by row. Otherwise (a transposed view) each task
    takes a group of slivers spanning 16 or more rows and walks ``k`` outermost, so that the
    values read at each step are adjacent in memory.
    """
    batch, rows, k = x.shape
    _, k_blocks, slivers, width, kc = packed.shape
    zero = packed.dtype.type(0)
    k_contiguous = x.strides[2] <= x.strides[1]
    group = 1 if k_contiguous else -(-16 // width)
    groups = -(-slivers // group)
    for task in prange(batch * k_blocks * groups):
        b = task // (k_blocks * groups)
        kb = task // groups % k_blocks
        s0 = task % groups * group
        s1 = min(s0 + group, slivers)
        p0 = kb * kc
        valid_k = min(kc, k - p0)
        dst = packed[b, kb]  # (slivers, width, kc)
        if k_contiguous:
            for s in range(s0, s1):
                for r in range(min(width, rows - s * width)):
                    dst[s, r, :valid_k] = x[b, s * width + r, p0:p0 + valid_k]
        else:
            src = x[b].T  # (k, rows), rows adjacent in memory
            for p in range(valid_k):
                src_p = src[p0 + p]
                for s in range(s0, s1):
                    for r in range(min(width, rows - s * width)):
                        dst[s, r, p] = src_p[s * width + r]
        for s in range(s0, s1):
            valid_rows = max(0, min(width, rows - s * width))
            dst[s, :valid_rows, valid_k:] = zero
            dst[s, valid_rows:, :] = zero


@njit(fastmath=_FASTMATH, cache=True)
def _micro_tile(a_sliver, b_sliver, c_tile, accumulate):
    """``c_tile (+)= a_sliverᵀ-dot-b_sliver``: a ``(4, kc)`` and a ``(3, kc)`` sliver → ``(4, 3)``.

    ``c_tile[r, c] = Σ_p a_sliver[r, p] · b_sliver[c, p]``, added to the tile's current values
    when ``accumulate``. The 12 accumulators are scalars so that LLVM keeps them in (vector)
    registers; the loop over ``p`` is the one that vectorises (see module doc).
    """
    if accumulate:
        c00, c01, c02 = c_tile[0, 0], c_tile[0, 1], c_tile[0, 2]
        c10, c11, c12 = c_tile[1, 0], c_tile[1, 1], c_tile[1, 2]
        c20, c21, c22 = c_tile[2, 0], c_tile[2, 1], c_tile[2, 2]
        c30, c31, c32 = c_tile[3, 0], c_tile[3, 1], c_tile[3, 2]
    else:
        zero = c_tile.dtype.type(0)
        c00 = c01 = c02 = c10 = c11 = c12 = zero
        c20 = c21 = c22 = c30 = c31 = c32 = zero
    for p in range(a_sliver.shape[1]):
        a0 = a_sliver[0, p]
        a1 = a_sliver[1, p]
        a2 = a_sliver[2, p]
        a3 = a_sliver[3, p]
        b0 = b_sliver[0, p]
        b1 = b_sliver[1, p]
        b2 = b_sliver[2, p]
        c00 += a0 * b0
        c01 += a0 * b1
        c02 += a0 * b2
        c10 += a1 * b0
        c11 += a1 * b1
        c12 += a1 * b2
        c20 += a2 * b0
        c21 += a2 * b1
        c22 += a2 * b2
        c30 += a3 * b0
        c31 += a3 * b1
        c32 += a3 * b2
    c_tile[0, 0], c_tile[0, 1], c_tile[0, 2] = c00, c01, c02
    c_tile[1, 0], c_tile[1, 1], c_tile[1, 2] = c10, c11, c12
    c_tile[2, 0], c_tile[2, 1], c_tile[2, 2] = c20, c21, c22
    c_tile[3, 0], c_tile[3, 1], c_tile[3, 2] = c30, c31, c32


@njit(parallel=True, cache=True)
def _gemm_packed(a_packed, b_packed, a_index, b_index, out):
    """``out[o] = A[a_index[o]] @ B[b_index[o]]`` from packed slivers, parallel over C blocks.

    Full micro-tiles are computed in place in ``out``; tiles on the bottom/right edge go through
    a ``(4, 3)`` scratch tile, of which only the part inside ``out`` is copied.
    """
    batch, m, n = out.shape
    k_blocks, m_slivers = a_packed.shape[1], a_packed.shape[2]
    n_slivers = b_packed.shape[2]
    m_blocks = -(-m_slivers // _MC_TILES)
    n_blocks = -(-n_slivers // _NC_TILES)
    for task in prange(batch * m_blocks * n_blocks):
        o = task // (m_blocks * n_blocks)
        mb = task // n_blocks % m_blocks
        nb = task % n_blocks
        a_blocks = a_packed[a_index[o]]
        b_blocks = b_packed[b_index[o]]
        edge = np.empty((MR, NR), out.dtype)
        for kb in range(k_blocks):
            for js in range(nb * _NC_TILES, min((nb + 1) * _NC_TILES, n_slivers)):
                j0 = js * NR
                cols = min(NR, n - j0)
                b_sliver = b_blocks[kb, js]
                for is_ in range(mb * _MC_TILES, min((mb + 1) * _MC_TILES, m_slivers)):
                    i0 = is_ * MR
                    rows = min(MR, m - i0)
                    if rows == MR and cols == NR:
                        _micro_tile(a_blocks[kb, is_], b_sliver, out[o, i0:i0 + MR, j0:j0 + NR],
                                    kb > 0)
                    else:
                        edge[:rows, :cols] = out[o, i0:i0 + rows, j0:j0 + cols]
                        _micro_tile(a_blocks[kb, is_], b_sliver, edge, kb > 0)
                        out[o, i0:i0 + rows, j0:j0 + cols] = edge[:rows, :cols]


@njit(cache=True)
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
