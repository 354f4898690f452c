"""Matrix product ``C = A @ B`` with numpy's batching rules, in Numba, without BLAS.

Why the kernel is shaped the way it is
--------------------------------------
A matmul does ``2·M·N·K`` flops on ``M·K + K·N`` inputs, so it can run at the FMA units' peak
only if every value loaded is reused from registers many times. The kernel is built around that:

* **Micro-tile in registers, outer-product form.** The innermost routine, :func:`_micro_tile`,
  keeps a ``MR × NR`` block of C (6 rows × two SIMD vectors: 6 × 16 float32 or 6 × 8 float64
  on AVX2) in 12 vector accumulators. For each ``p`` along ``k`` it loads the two vectors
  ``B[p, j0:j0+NR]``, broadcasts each of the 6 values ``A[i0+r, p]`` and issues 12 FMAs:
  8 loads per 12 FMAs, 12 accumulators + 2 ``B`` vectors + 1 broadcast = 15 of the 16 AVX2
  registers, and no horizontal reduction ever. Numba's loop vectoriser cannot produce this
  (the loop over ``p`` is a chain of dependent updates, the SIMD dimension is the unrolled
  ``j``), and LLVM's SLP vectoriser, which numba leaves off by default, only partly does
  (measured: with ``NUMBA_SLP_VECTORIZE=1`` a tile of 96 scalar accumulators does become
  ymm FMAs, but spills to the stack and keeps index wrap-around checks: 35 GF/s float32,
  10 GF/s float64, against 87 and 39 for the tile below, one thread). So the tile is written
  with a small vector type of its own: ``_Vector`` is an LLVM ``<8 x float>`` /
  ``<4 x double>`` value, and four intrinsics (:func:`_vload`, :func:`_vsplat`,
  :func:`_vfma`, :func:`_vstore`) are all the tile needs.
  They read and write through numba's own item-pointer code, so ``NUMBA_BOUNDSCHECK=1``
  checks them (both ends of every vector) like any other index.
* **Packing.** The tile wants, for each ``p``, 6 values of A and 16 (8) of B side by side.
  :func:`_pack` copies A into *panels* ``(batch, ceil(M/MR), K, MR)`` and B into
  ``(batch, ceil(N/NR), K, NR)``, zero padded to whole panels: every load of the tile is then
  from one sequential stream, whatever the strides of the inputs. Without packing, rows of A
  or B that are a power-of-two number of bytes apart (K or N = 256, 512, ...) fall into the
  same L1 sets and evict each other (measured on an unpacked float64 prototype: 6 GF/s with A
  row-major, 18 with A column-major); reading A unpacked with B packed measured no faster
  than packing both. Packing reads each
  input in its own memory order (:func:`_pack_along_k` for rows contiguous in ``k``,
  :func:`_pack_across_k` for the transposed layout), so a transposed view (``x.T``, the
  autograd backward's ``g @ Wᵀ`` and ``Xᵀ @ g``) is packed directly, without a copy first.
  It costs ``M·K + K·N`` copies against ``M·N·K`` FMAs. The padded entries of A and B only
  land in rows/columns of C that are not written, so inf and NaN propagate exactly as in
  the unpadded product.
* **k-blocking.** ``k`` is cut into equal blocks of at most 256 values, so that one B
  micro-panel (``256 × NR``: 16 KiB) stays in the 32 KiB L1 while it meets every A panel of
  its task, and a task's ``72 × 256`` slice of A stays in L2.
* **Parallel strategy.** :func:`_gemm_packed` runs ``prange`` over independent output blocks
  of ``MC × NC`` = 12 × 8 micro-tiles *across the whole batch*, so 64 small attention
  matmuls are one parallel loop with no per-matrix Python overhead. Each output element is
  owned by one task, which adds the k-blocks in order: results are bitwise identical run to
  run and for any thread count.
* **Tiny products** (under ``_TINY_MACS`` multiply-adds in all, fewer than ``MR`` rows, or
  any product when ``NUMBA_DISABLE_JIT=1`` turns the vector intrinsics off)
  skip packing and threads: :func:`_gemm_small` is a serial i-k-j loop whose inner loop over
  ``j`` vectorises.

Floating-point: the tile's ``a·b + c`` is contracted to an FMA where the CPU has one (one
rounding fewer); nothing is reassociated and ``nnan``/``ninf`` are never assumed, so the
summation order is fixed by the code (deterministic) and ``inf``/``NaN`` inputs give the same
non-finite outputs as numpy. The float32 result differs from numpy's only by rounding.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import config, njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

MR = 6  # rows of C per micro-tile
_VECTOR_BYTES = 32  # one AVX2 register; a micro-tile is MR rows × 2 vectors of C
_KC_MAX = 256  # longest k-block: a 256 × NR panel of B is 16 KiB
_MC_PANELS = 12  # micro-tile rows per parallel task: 72 rows of C
_NC_PANELS = 8  # micro-tile columns per parallel task: 128 (float32) or 64 (float64) columns
_TINY_MACS = 32768  # below this many multiply-adds in total, use the unpacked serial loop


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
    if a_index.size * m * n * k < _TINY_MACS or m < MR or config.DISABLE_JIT:
        _gemm_small(np.ascontiguousarray(a3), np.ascontiguousarray(b3), a_index, b_index, out)
    else:
        nr = 2 * _VECTOR_BYTES // a.itemsize
        k_blocks = -(-k // _KC_MAX)
        kc = -(-k // k_blocks)
        a_packed = _pack(a3, MR)  # (batch_a, M panels, K, MR)
        b_packed = _pack(b3.swapaxes(1, 2), nr)  # B read as Bᵀ: (batch_b, N panels, K, NR)
        _gemm_packed(a_packed, b_packed, a_index, b_index, out, kc)
    return out.reshape(out_shape)


def _batch_index(shape: tuple[int, ...], batch: tuple[int, ...]) -> np.ndarray:
    """For each matrix of the broadcast ``batch``, the index of its operand matrix (int64)."""
    own = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    return np.broadcast_to(own, batch).flatten()  # always a fresh writable array: one signature


def _stack_of_matrices(x: np.ndarray) -> np.ndarray:
    """``x`` as ``(batch, rows, cols)`` whose last two dims are C- or F-ordered (no copy if so)."""
    x3 = x.reshape((-1,) + x.shape[-2:])
    if x3.shape[0] > 0 and not (x3[0].flags.c_contiguous or x3[0].flags.f_contiguous):
        x3 = np.ascontiguousarray(x3)
    return x3


def _pack(x3: np.ndarray, width: int) -> np.ndarray:
    """Panels ``(batch, ceil(rows / width), k, width)`` of ``x3 (batch, rows, k)``.

    ``packed[b, s, p, r] = x3[b, s·width + r, p]``, zero where ``x3`` has no row.
    """
    batch, rows, k = x3.shape
    packed = np.empty((batch, -(-rows // width), k, width), x3.dtype)
    if x3[0].flags.c_contiguous:
        _pack_along_k(x3, packed)
    else:
        _pack_across_k(x3.swapaxes(1, 2), packed)  # (batch, k, rows), rows adjacent
    return packed


@njit(parallel=True, cache=True)
def _pack_along_k(x, packed):
    """``packed[b, s, p, r] = x[b, s·width + r, p]`` reading each row of ``x`` in order."""
    batch, rows, k = x.shape
    panels, width = packed.shape[1], packed.shape[3]
    for task in prange(batch * panels):
        b = task // panels
        s = task % panels
        panel = packed[b, s]  # (k, width)
        valid = min(width, rows - s * width)
        for r in range(valid):
            row = x[b, s * width + r]
            for p in range(k):
                panel[p, r] = row[p]
        panel[:, valid:] = 0


@njit(parallel=True, cache=True)
def _pack_across_k(x_t, packed):
    """``packed[b, s, p, r] = x_t[b, p, s·width + r]`` for ``x_t`` with rows adjacent in memory."""
    batch, k, rows = x_t.shape
    panels, width = packed.shape[1], packed.shape[3]
    for task in prange(batch * panels):
        b = task // panels
        s = task % panels
        panel = packed[b, s]  # (k, width)
        r0 = s * width
        valid = min(width, rows - r0)
        for p in range(k):
            panel[p, :valid] = x_t[b, p, r0:r0 + valid]
        panel[:, valid:] = 0


class _Vector(types.Type):
    """A SIMD register's worth of float32 or float64 values (LLVM vector type)."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.lanes = _VECTOR_BYTES * 8 // dtype.bitwidth
        super().__init__(name=f"Vector({dtype} x {self.lanes})")


@register_model(_Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = ir.FloatType() if fe_type.dtype == types.float32 else ir.DoubleType()
        super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.lanes))


def _item_pointer(context, builder, array_type, array, i, j):
    """Pointer to ``array[i, j]`` (bounds-checked when numba's boundscheck is on)."""
    view = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, view, [i, j],
                                    wraparound=False, boundscheck=True)


def _vector_pointer(context, builder, signature, args):
    """``array[i, j:j+lanes]`` as a vector pointer; both ends are bounds-checked."""
    array_type, i, j = signature.args[0], args[1], args[2]
    lanes = _Vector(array_type.dtype).lanes
    last = builder.add(j, ir.Constant(j.type, lanes - 1))
    _item_pointer(context, builder, array_type, args[0], i, last)
    first = _item_pointer(context, builder, array_type, args[0], i, j)
    vector = context.get_value_type(_Vector(array_type.dtype))
    return builder.bitcast(first, vector.as_pointer())


def _is_float_matrix(array) -> bool:
    return (isinstance(array, types.Array) and array.ndim == 2 and array.layout == "C"
            and array.dtype in (types.float32, types.float64))


@intrinsic
def _vload(typingctx, array, i, j):
    """``array[i, j:j+lanes]`` as a vector (``array`` a C-contiguous float matrix)."""
    if not _is_float_matrix(array):
        return None

    def codegen(context, builder, signature, args):
        pointer = _vector_pointer(context, builder, signature, args)
        return builder.load(pointer, align=array.dtype.bitwidth // 8)

    return _Vector(array.dtype)(array, i, j), codegen


@intrinsic
def _vstore(typingctx, array, i, j, vector):
    """``array[i, j:j+lanes] = vector``."""
    if not _is_float_matrix(array) or vector != _Vector(array.dtype):
        return None

    def codegen(context, builder, signature, args):
        pointer = _vector_pointer(context, builder, signature, args)
        builder.store(args[3], pointer, align=array.dtype.bitwidth // 8)

    return types.void(array, i, j, vector), codegen


@intrinsic
def _vsplat(typingctx, array, i, j):
    """A vector whose every lane is ``array[i, j]``."""
    if not _is_float_matrix(array):
        return None
    vector_type = _Vector(array.dtype)

    def codegen(context, builder, signature, args):
        value = builder.load(_item_pointer(context, builder, signature.args[0], *args))
        vector = context.get_value_type(vector_type)
        one_lane = builder.insert_element(ir.Constant(vector, ir.Undefined), value,
                                          ir.Constant(ir.IntType(32), 0))
        all_zero = ir.Constant(ir.VectorType(ir.IntType(32), vector_type.lanes), None)
        return builder.shuffle_vector(one_lane, ir.Constant(vector, ir.Undefined), all_zero)

    return vector_type(array, i, j), codegen


@intrinsic
def _vzero(typingctx, array):
    """A vector of zeros of ``array``'s dtype."""
    if not _is_float_matrix(array):
        return None
    vector_type = _Vector(array.dtype)

    def codegen(context, builder, signature, args):
        return ir.Constant(context.get_value_type(vector_type), None)

    return vector_type(array), codegen


@intrinsic
def _vfma(typingctx, a, b, c):
    """``a · b + c`` lane by lane, fused into one FMA where the CPU has it."""
    if not (isinstance(a, _Vector) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        product = builder.fmul(args[0], args[1], flags=("contract",))
        return builder.fadd(product, args[2], flags=("contract",))

    return a(a, b, c), codegen


@njit(cache=True)
def _micro_tile(a_panel, b_panel, p0, p1, c, i0, j0, accumulate):
    """``c[i0:i0+6, j0:j0+NR] (+)= a_panel[p0:p1]ᵀ-outer-b_panel[p0:p1]``.

    ``c[i0+r, j0+j] = Σ_{p0<=p<p1} a_panel[p, r] · b_panel[p, j]``, added to the tile's current
    values when ``accumulate``. ``cRV`` holds row ``r``, vector ``V`` (columns
    ``j0 + V·lanes ...``) of the tile, in a register for the whole loop (see module doc).
    """
    lanes = b_panel.shape[1] // 2
    j1 = j0 + lanes
    if accumulate:
        c00, c01 = _vload(c, i0, j0), _vload(c, i0, j1)
        c10, c11 = _vload(c, i0 + 1, j0), _vload(c, i0 + 1, j1)
        c20, c21 = _vload(c, i0 + 2, j0), _vload(c, i0 + 2, j1)
        c30, c31 = _vload(c, i0 + 3, j0), _vload(c, i0 + 3, j1)
        c40, c41 = _vload(c, i0 + 4, j0), _vload(c, i0 + 4, j1)
        c50, c51 = _vload(c, i0 + 5, j0), _vload(c, i0 + 5, j1)
    else:
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _vzero(c)
    for p in range(p0, p1):
        b0 = _vload(b_panel, p, 0)
        b1 = _vload(b_panel, p, lanes)
        a0 = _vsplat(a_panel, p, 0)
        c00, c01 = _vfma(a0, b0, c00), _vfma(a0, b1, c01)
        a1 = _vsplat(a_panel, p, 1)
        c10, c11 = _vfma(a1, b0, c10), _vfma(a1, b1, c11)
        a2 = _vsplat(a_panel, p, 2)
        c20, c21 = _vfma(a2, b0, c20), _vfma(a2, b1, c21)
        a3 = _vsplat(a_panel, p, 3)
        c30, c31 = _vfma(a3, b0, c30), _vfma(a3, b1, c31)
        a4 = _vsplat(a_panel, p, 4)
        c40, c41 = _vfma(a4, b0, c40), _vfma(a4, b1, c41)
        a5 = _vsplat(a_panel, p, 5)
        c50, c51 = _vfma(a5, b0, c50), _vfma(a5, b1, c51)
    _vstore(c, i0, j0, c00)
    _vstore(c, i0, j1, c01)
    _vstore(c, i0 + 1, j0, c10)
    _vstore(c, i0 + 1, j1, c11)
    _vstore(c, i0 + 2, j0, c20)
    _vstore(c, i0 + 2, j1, c21)
    _vstore(c, i0 + 3, j0, c30)
    _vstore(c, i0 + 3, j1, c31)
    _vstore(c, i0 + 4, j0, c40)
    _vstore(c, i0 + 4, j1, c41)
    _vstore(c, i0 + 5, j0, c50)
    _vstore(c, i0 + 5, j1, c51)


@njit(parallel=True, cache=True)
def _gemm_packed(a_packed, b_packed, a_index, b_index, out, kc):
    """``out[o] = A[a_index[o]] @ B[b_index[o]]`` from packed panels, parallel over C blocks.

    Full micro-tiles are computed in place in ``out``; tiles on the bottom/right edge go through
    an ``(MR, NR)`` scratch tile, of which only the part inside ``out`` is copied.
    """
    batch, m, n = out.shape
    m_panels, k = a_packed.shape[1], a_packed.shape[2]
    n_panels, nr = b_packed.shape[1], b_packed.shape[3]
    m_blocks = -(-m_panels // _MC_PANELS)
    n_blocks = -(-n_panels // _NC_PANELS)
    for task in prange(batch * m_blocks * n_blocks):
        o = task // (m_blocks * n_blocks)
        mb = task // n_blocks % m_blocks
        nb = task % n_blocks
        a_panels = a_packed[a_index[o]]  # (M panels, K, MR)
        b_panels = b_packed[b_index[o]]  # (N panels, K, NR)
        c = out[o]  # (M, N)
        edge = np.empty((MR, nr), out.dtype)
        for p0 in range(0, k, kc):
            p1 = min(p0 + kc, k)
            for jp in range(nb * _NC_PANELS, min((nb + 1) * _NC_PANELS, n_panels)):
                j0 = jp * nr
                cols = min(nr, n - j0)
                for ip in range(mb * _MC_PANELS, min((mb + 1) * _MC_PANELS, m_panels)):
                    i0 = ip * MR
                    rows = min(MR, m - i0)
                    if rows == MR and cols == nr:
                        _micro_tile(a_panels[ip], b_panels[jp], p0, p1, c, i0, j0, p0 > 0)
                    else:
                        if p0 > 0:
                            edge[:rows, :cols] = c[i0:i0 + rows, j0:j0 + cols]
                        _micro_tile(a_panels[ip], b_panels[jp], p0, p1, edge, 0, 0, p0 > 0)
                        c[i0:i0 + rows, j0:j0 + cols] = edge[:rows, :cols]


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
