"""Explicit SIMD vectors for numba kernels, and the register-blocked tile product built on them.

Why explicit vectors
--------------------
A product ``C += A B`` runs at the FMA units' peak only if a small block of ``C`` stays in
registers while the sum over the inner index runs: per step, a few vectors of a row of ``B``
are loaded, one value of ``A`` per row of the tile is broadcast, and every accumulator gets
one fused multiply-add. Numba's loop vectoriser cannot produce that shape (the loop over the
inner index is a chain of dependent updates; the SIMD axis is the unrolled column block), so
the tile is written with a vector type of its own: :class:`Vector` is an LLVM vector as wide as
one register of the running CPU (``vector_unit().vector_bytes``: 16 float32 / 8 float64 lanes
with AVX-512, 8 / 4 with AVX2), and five intrinsics are all a tile needs: :func:`vload`,
:func:`vstore`, :func:`vsplat`, :func:`vfma` and :func:`vlanes`. The width is taken from the
target, not left to the vectoriser, which on some AVX-512 CPUs prefers 256-bit vectors.
Loads and stores go through numba's own item-pointer code, so ``NUMBA_BOUNDSCHECK=1`` checks
both ends of every vector like any other index.

The tile
--------
:func:`tile_product` computes a tile of ``TILE_ROWS`` rows × two vectors of ``C``: 8 rows ×
32 float32 columns with AVX-512, 4 × 16 with AVX2. Its accumulators (``2 · TILE_ROWS``
vectors), the two vectors of ``B`` and the broadcast value must fit in the register file
(32 registers with AVX-512, 16 with AVX2: 19 and 11 are used), and there are at least 8
independent FMA chains to cover the FMA latency. Callers sweep their blocks tile by tile
(and may skip tiles or shorten the sum, as the attention kernels do outside a mask's band).

Floating point: ``a·b + c`` is contracted to one FMA where the CPU has one (one rounding fewer
than the plain loop); nothing is reassociated and ``nnan``/``ninf`` are never assumed, so the
summation order over the inner index is the plain one, deterministic, and ``inf``/``NaN``
propagate as in numpy. With ``NUMBA_DISABLE_JIT=1`` (no intrinsics in pure Python) the
tile product is a numpy expression of the same math.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import config, njit, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

from .cpu import vector_unit

# Rows of C per tile: the 2 · rows accumulators, the 2 vectors of B and the broadcast value fit
# in 32 registers (AVX-512) with 8 rows and in 16 (AVX2, SSE) with 4.
TILE_ROWS = 8 if vector_unit().registers >= 32 else 4


class Vector(types.Type):
    """One SIMD register's worth of float32 or float64 values (an LLVM vector type)."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.lanes = vector_unit().vector_bytes * 8 // dtype.bitwidth
        super().__init__(name=f"Vector({dtype} x {self.lanes})")


@register_model(Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = ir.FloatType() if fe_type.dtype == types.float32 else ir.DoubleType()
        super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.lanes))


def _is_float_matrix(array) -> bool:
    return (isinstance(array, types.Array) and array.ndim == 2 and array.layout == "C"
            and array.dtype in (types.float32, types.float64))


def _vector_pointer(context, builder, array_type, array, i, j):
    """``array[i, j:j+lanes]`` as a vector pointer; both ends are bounds-checked."""
    view = context.make_array(array_type)(context, builder, array)
    lanes = Vector(array_type.dtype).lanes
    last = builder.add(j, ir.Constant(j.type, lanes - 1))
    for column in (last, j):
        first = cgutils.get_item_pointer(context, builder, array_type, view, [i, column],
                                         wraparound=False, boundscheck=True)
    vector = context.get_value_type(Vector(array_type.dtype))
    return builder.bitcast(first, vector.as_pointer())


@intrinsic
def vload(typingctx, array, i, j):
    """``array[i, j:j+lanes]`` as a vector (``array`` a C-contiguous float matrix)."""
    if not _is_float_matrix(array):
        return None

    def codegen(context, builder, signature, args):
        pointer = _vector_pointer(context, builder, signature.args[0], *args)
        return builder.load(pointer, align=array.dtype.bitwidth // 8)

    return Vector(array.dtype)(array, i, j), codegen


@intrinsic
def vstore(typingctx, array, i, j, vector):
    """``array[i, j:j+lanes] = vector``."""
    if not _is_float_matrix(array) or vector != Vector(array.dtype):
        return None

    def codegen(context, builder, signature, args):
        pointer = _vector_pointer(context, builder, signature.args[0], *args[:3])
        builder.store(args[3], pointer, align=array.dtype.bitwidth // 8)

    return types.void(array, i, j, vector), codegen


@intrinsic
def vsplat(typingctx, value):
    """A vector whose every lane is the float ``value``."""
    if value not in (types.float32, types.float64):
        return None
    vector_type = Vector(value)

    def codegen(context, builder, signature, args):
        vector = context.get_value_type(vector_type)
        one_lane = builder.insert_element(ir.Constant(vector, ir.Undefined), args[0],
                                          ir.Constant(ir.IntType(32), 0))
        all_zero = ir.Constant(ir.VectorType(ir.IntType(32), vector_type.lanes), None)
        return builder.shuffle_vector(one_lane, ir.Constant(vector, ir.Undefined), all_zero)

    return vector_type(value), codegen


@intrinsic
def vfma(typingctx, a, b, c):
    """``a · b + c`` lane by lane, fused into one FMA where the CPU has it."""
    if not (isinstance(a, Vector) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        product = builder.fmul(args[0], args[1], flags=("contract",))
        return builder.fadd(product, args[2], flags=("contract",))

    return a(a, b, c), codegen


@intrinsic
def vlanes(typingctx, array):
    """The number of lanes of a vector of ``array``'s dtype (a compile-time constant)."""
    if not isinstance(array, types.Array) or array.dtype not in (types.float32, types.float64):
        return None
    lanes = Vector(array.dtype).lanes

    def codegen(context, builder, signature, args):
        return ir.Constant(ir.IntType(64), lanes)

    return types.int64(array), codegen


@intrinsic
def _prefer_full_width_compiled(typingctx):
    """Ask LLVM to vectorise the calling function's loops at the full register width.

    Call it first thing in a jitted function. On some AVX-512 CPUs (Intel's
    ``skylake-avx512`` family) LLVM's loop vectoriser prefers 256-bit vectors; this sets the
    function's ``prefer-vector-width`` to ``vector_unit().vector_bytes``, so that its
    elementwise loops use the width of the tiles' explicit vectors. Elsewhere it changes nothing.
    """

    def codegen(context, builder, signature, args):
        # llvmlite's attribute set only accepts LLVM's keyword attributes: a string attribute
        # ("key"="value") goes into the underlying set directly.
        width = f'"prefer-vector-width"="{8 * vector_unit().vector_bytes}"'
        set.add(builder.function.attributes, width)
        return context.get_dummy_value()

    return types.none(), codegen


def _prefer_full_width_python() -> None:
    """Nothing to tell the vectoriser when nothing is compiled (``NUMBA_DISABLE_JIT=1``)."""


# the intrinsic only exists in compiled code
prefer_full_width = (_prefer_full_width_python if config.DISABLE_JIT
                     else _prefer_full_width_compiled)


def tile_columns(dtype: np.dtype) -> int:
    """Columns of one tile of :func:`tile_product` for ``dtype``: two vectors."""
    return 2 * vector_unit().lanes(np.dtype(dtype).itemsize)


@njit(cache=True)
def _tile_product_compiled(a, a_row0, b, b_col0, c, c_row0, c_col0, t0, t1, accumulate):
    """``c[c_row0 + r, c_col0 + x] (+)= Σ_{t0 <= t < t1} a[a_row0 + r, t] · b[t, b_col0 + x]``.

    For ``r < TILE_ROWS`` and ``x < tile_columns``: two vectors. Rows of ``a`` past its end
    repeat its last row (their results land in rows of ``c`` the caller ignores), so ``c``
    needs ``TILE_ROWS`` rows from ``c_row0`` whatever ``a``'s length. ``a`` may be any 2-D view
    (only scalars are read from it); ``b`` and ``c`` are C-contiguous. ``cRV`` is row ``r``,
    vector ``V`` of the tile, held in a register for the whole sum.
    """
    lanes = vlanes(c)
    last = a.shape[0] - 1
    b_col1, c_col1 = b_col0 + lanes, c_col0 + lanes
    r0, r1 = min(a_row0, last), min(a_row0 + 1, last)
    r2, r3 = min(a_row0 + 2, last), min(a_row0 + 3, last)
    if accumulate:
        c00, c01 = vload(c, c_row0, c_col0), vload(c, c_row0, c_col1)
        c10, c11 = vload(c, c_row0 + 1, c_col0), vload(c, c_row0 + 1, c_col1)
        c20, c21 = vload(c, c_row0 + 2, c_col0), vload(c, c_row0 + 2, c_col1)
        c30, c31 = vload(c, c_row0 + 3, c_col0), vload(c, c_row0 + 3, c_col1)
    else:
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = vsplat(c.dtype.type(0))
    if TILE_ROWS == 8:
        r4, r5 = min(a_row0 + 4, last), min(a_row0 + 5, last)
        r6, r7 = min(a_row0 + 6, last), min(a_row0 + 7, last)
        if accumulate:
            c40, c41 = vload(c, c_row0 + 4, c_col0), vload(c, c_row0 + 4, c_col1)
            c50, c51 = vload(c, c_row0 + 5, c_col0), vload(c, c_row0 + 5, c_col1)
            c60, c61 = vload(c, c_row0 + 6, c_col0), vload(c, c_row0 + 6, c_col1)
            c70, c71 = vload(c, c_row0 + 7, c_col0), vload(c, c_row0 + 7, c_col1)
        else:
            c40 = c41 = c50 = c51 = c60 = c61 = c70 = c71 = c00
        for t in range(t0, t1):
            b0, b1 = vload(b, t, b_col0), vload(b, t, b_col1)
            a_r = vsplat(a[r0, t])
            c00, c01 = vfma(a_r, b0, c00), vfma(a_r, b1, c01)
            a_r = vsplat(a[r1, t])
            c10, c11 = vfma(a_r, b0, c10), vfma(a_r, b1, c11)
            a_r = vsplat(a[r2, t])
            c20, c21 = vfma(a_r, b0, c20), vfma(a_r, b1, c21)
            a_r = vsplat(a[r3, t])
            c30, c31 = vfma(a_r, b0, c30), vfma(a_r, b1, c31)
            a_r = vsplat(a[r4, t])
            c40, c41 = vfma(a_r, b0, c40), vfma(a_r, b1, c41)
            a_r = vsplat(a[r5, t])
            c50, c51 = vfma(a_r, b0, c50), vfma(a_r, b1, c51)
            a_r = vsplat(a[r6, t])
            c60, c61 = vfma(a_r, b0, c60), vfma(a_r, b1, c61)
            a_r = vsplat(a[r7, t])
            c70, c71 = vfma(a_r, b0, c70), vfma(a_r, b1, c71)
        vstore(c, c_row0 + 4, c_col0, c40)
        vstore(c, c_row0 + 4, c_col1, c41)
        vstore(c, c_row0 + 5, c_col0, c50)
        vstore(c, c_row0 + 5, c_col1, c51)
        vstore(c, c_row0 + 6, c_col0, c60)
        vstore(c, c_row0 + 6, c_col1, c61)
        vstore(c, c_row0 + 7, c_col0, c70)
        vstore(c, c_row0 + 7, c_col1, c71)
    else:
        for t in range(t0, t1):
            b0, b1 = vload(b, t, b_col0), vload(b, t, b_col1)
            a_r = vsplat(a[r0, t])
            c00, c01 = vfma(a_r, b0, c00), vfma(a_r, b1, c01)
            a_r = vsplat(a[r1, t])
            c10, c11 = vfma(a_r, b0, c10), vfma(a_r, b1, c11)
            a_r = vsplat(a[r2, t])
            c20, c21 = vfma(a_r, b0, c20), vfma(a_r, b1, c21)
            a_r = vsplat(a[r3, t])
            c30, c31 = vfma(a_r, b0, c30), vfma(a_r, b1, c31)
    vstore(c, c_row0, c_col0, c00)
    vstore(c, c_row0, c_col1, c01)
    vstore(c, c_row0 + 1, c_col0, c10)
    vstore(c, c_row0 + 1, c_col1, c11)
    vstore(c, c_row0 + 2, c_col0, c20)
    vstore(c, c_row0 + 2, c_col1, c21)
    vstore(c, c_row0 + 3, c_col0, c30)
    vstore(c, c_row0 + 3, c_col1, c31)


def _tile_product_numpy(a, a_row0, b, b_col0, c, c_row0, c_col0, t0, t1, accumulate):
    """:func:`tile_product` as numpy expressions (``NUMBA_DISABLE_JIT=1``)."""
    rows = np.minimum(np.arange(a_row0, a_row0 + TILE_ROWS), a.shape[0] - 1)
    cols = tile_columns(c.dtype)
    product = a[rows, t0:t1] @ b[t0:t1, b_col0 : b_col0 + cols]
    target = c[c_row0 : c_row0 + TILE_ROWS, c_col0 : c_col0 + cols]
    if accumulate:
        target += product
    else:
        target[...] = product


# the intrinsics only exist in compiled code
tile_product = _tile_product_numpy if config.DISABLE_JIT else _tile_product_compiled
