"""Register tiles for numba kernels: a block of ``C`` kept in SIMD registers while ``C += A B``.

Why a register tile
-------------------
A product ``C += A B`` runs at the FMA units' peak only if a block of ``C`` stays in registers
while the sum over the inner index ``p`` runs: per step, a few vectors of row ``p`` of ``B`` are
loaded, one value of ``A`` per row of the block is broadcast to every lane, and every
accumulator gets one fused multiply-add (a rank-one update of the block). Each value loaded is
then used many times from registers, and no horizontal reduction is ever needed. Numba's loop
vectoriser cannot produce that shape (the loop over ``p`` is a chain of dependent updates; the
SIMD axis is the unrolled column block), and LLVM's SLP vectoriser only partly does (it spills
and keeps index checks). So the block is a value of its own, written with explicit vectors.

The tile
--------
A :class:`Tile` is ``rows × vectors`` SIMD vectors of one float dtype; its geometry is a
:class:`TileShape`, a compile-time constant (a module-level global of the calling kernel). Its
data model is an LLVM array of ``<lanes x float>`` vectors: a plain value that is only ever
passed from one intrinsic to the next, never stored, so that LLVM's SROA pass gives each vector
a register of its own. These intrinsics are all a kernel needs:

* :func:`tile_zero` ``(c, shape)``: a tile of zeros of ``c``'s dtype;
* :func:`tile_load` ``(c, i0, j0, shape)``: the block ``c[i0:i0+rows, j0:j0+columns]``;
* :func:`tile_store` ``(c, i0, j0, tile, first)``: stores the tile's rows ``first <= r < rows``
  (a tile that overlaps the one above it stores only its own rows);
* :func:`tile_add_row` ``(tile, row, j0)``: adds ``row[0, j0:j0+columns]`` to every row of the
  tile (the bias of a Linear layer, added once the sum is complete);
* :func:`tile_update` ``(tile, a, i0, p, b, q, j0)``: the rank-one update
  ``tile[r, x] += A[i0 + r, p] · b[q, j0 + x]`` with ``A[i, p] = a[i, p]`` (``q`` is ``p``
  itself, or ``p`` plus the offset of a block of ``B`` stacked with others in one matrix), and
  :func:`tile_update_t`, the same with ``A[i, p] = a[p, i]`` (a transposed operand, such as
  autograd's ``Xᵀ`` in ``Xᵀ @ g``, read in place). ``vectors`` vectors of ``b``'s row ``p`` are
  loaded once; each value of ``A`` is broadcast and multiply-added with each of them. The rows
  ``i0 .. i0 + rows − 1`` of ``A`` must exist (the matmul moves its last tile row up to end at
  ``A``'s last row), which keeps their addresses one stride apart for LLVM;
  :func:`tile_update_clamped` instead reads ``A``'s last row for the rows past its end: their
  results belong to rows of ``C`` that the caller ignores, so a caller with blocks shorter than
  a tile (the attention kernels) needs no padded copy of ``A``.

One more intrinsic works on registers without a tile: :func:`transpose_block` ``(src, i0, j0,
dst, r0, c0)`` copies a square block of one register's lanes transposed, as whole vectors (the
matmul's copies of a transposed ``B`` into panels).

``c`` and ``b`` are C-contiguous float matrices (whole vectors are loaded from and stored to their
rows); ``a`` is any 2-D float array, strided views included, since it is only read one value at a
time. All addresses go through numba's own item-pointer code: with ``NUMBA_BOUNDSCHECK=1`` every
index is checked like any other (for a block, its last element and each vector's first, which
covers every lane); without it, none is, as elsewhere in numba.

Geometry
--------
The vectors are as wide as one register of the running CPU (``vector_unit().vector_bytes``: 16
float32 / 8 float64 lanes with AVX-512, 8 / 4 with AVX2). The width is taken from the target,
not left to the vectoriser, which on some AVX-512 CPUs prefers 256-bit vectors. A tile's
``rows · vectors`` accumulators, its ``vectors`` vectors of ``B`` and the broadcast value must fit
in the register file (32 registers with AVX-512, 16 with AVX2), and it needs enough independent
FMA chains (accumulators) to cover the FMA latency. Two kernels build on the tile:

* the matmul's micro-tile, ``micro_tile(vector_unit())`` in :mod:`.matmul`: 6 × 4 vectors with
  AVX-512, 6 × 2 with AVX2 or SSE, the most FMAs per value loaded that fit;
* :func:`tile_product` here, the block products of the attention kernels: ``TILE_ROWS × 2``
  vectors (:data:`PRODUCT_TILE`), 8 rows × 32 float32 columns with AVX-512 and 4 × 16 with
  AVX2, so that its accumulators, two vectors of ``B`` and the broadcast value take 19 of 32
  and 11 of 16 registers, with at least 8 independent FMA chains. Callers sweep their blocks
  tile by tile, and may skip tiles or shorten the sum (the attention kernels do outside a
  mask's band).

Floating point: ``a·b + c`` is contracted to one FMA where the CPU has one (one rounding fewer
than the plain loop); nothing is reassociated and ``nnan``/``ninf`` are never assumed, so each
element of a tile is one chain of FMAs over ``p`` in the order of the updates, deterministic, and
``inf``/``NaN`` propagate as in numpy. The intrinsics exist only in compiled code: with
``NUMBA_DISABLE_JIT=1``, :func:`tile_product` is a numpy expression of the same math (and the
matmul takes its plain loop).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model, typeof_impl

from .cpu import vector_unit
from .jit import jit


@dataclass(frozen=True)
class TileShape:
    """Geometry of a register tile: ``rows × vectors`` SIMD vectors of ``vector_bytes`` each.

    A module-level instance is a compile-time constant in jitted code (its numba type carries
    the geometry), passed to :func:`tile_zero` and :func:`tile_load`.

    Attributes
    ----------
    rows : int
        Rows of ``C`` per tile, one broadcast value of ``A`` each per update.
    vectors : int
        Vectors per tile row; the tile is ``vectors · lanes`` columns wide.
    vector_bytes : int
        Width of those vectors (``vector_unit().vector_bytes`` for full registers).

    Examples
    --------
    >>> TileShape(6, 4, 64).columns(4)  # float32 columns of a 6 × 4 tile of zmm registers
    64
    """

    rows: int
    vectors: int
    vector_bytes: int

    def columns(self, itemsize: int) -> int:
        """Columns of ``C`` per tile, for values of ``itemsize`` bytes."""
        return self.vectors * self.vector_bytes // itemsize


# Rows of C per tile of tile_product: the 2 · rows accumulators, the 2 vectors of B and the
# broadcast value fit in 32 registers (AVX-512) with 8 rows and in 16 (AVX2, SSE) with 4.
TILE_ROWS = 8 if vector_unit().registers >= 32 else 4
PRODUCT_TILE = TileShape(TILE_ROWS, 2, vector_unit().vector_bytes)
# Bytes of a row of transpose_block's square (a compile-time constant): one full register.
# Code that steps over blocks of it reads this, not a tile's width, which may be narrower.
TRANSPOSE_BYTES = vector_unit().vector_bytes


class _TileShapeType(types.Dummy):
    """numba's type of a :class:`TileShape` constant: the geometry itself, no runtime data."""

    def __init__(self, shape: TileShape):
        self.shape = shape
        super().__init__(name=f"TileShape({shape.rows}x{shape.vectors}x{shape.vector_bytes})")


register_model(_TileShapeType)(models.OpaqueModel)


@typeof_impl.register(TileShape)
def _typeof_tile_shape(value, context):
    return _TileShapeType(value)


class Tile(types.Type):
    """A ``rows × vectors`` block of SIMD vectors of one float dtype (see the module doc)."""

    def __init__(self, dtype, shape: TileShape):
        self.dtype = dtype
        self.shape = shape
        self.lanes = shape.vector_bytes * 8 // dtype.bitwidth
        super().__init__(name=f"Tile({dtype}, {shape.rows}x{shape.vectors}x{self.lanes})")


@register_model(Tile)
class _TileModel(models.PrimitiveModel):
    """An LLVM array of vectors; LLVM's SROA pass gives each element a register of its own."""

    def __init__(self, dmm, fe_type):
        element = ir.FloatType() if fe_type.dtype == types.float32 else ir.DoubleType()
        vector = ir.VectorType(element, fe_type.lanes)
        slots = fe_type.shape.rows * fe_type.shape.vectors
        super().__init__(dmm, fe_type, ir.ArrayType(vector, slots))


def _is_float_2d(array) -> bool:
    return (isinstance(array, types.Array) and array.ndim == 2
            and array.dtype in (types.float32, types.float64))


def _is_float_matrix(array) -> bool:
    """A C-contiguous float matrix: its rows are read and written as whole vectors."""
    return _is_float_2d(array) and array.layout == "C"


def _index(context, builder, value, value_type):
    """An integer argument as an ``intp``, the type of array indices."""
    return context.cast(builder, value, value_type, types.intp)


def _plus(builder, value, constant: int):
    return builder.add(value, ir.Constant(value.type, constant))


def _item_pointer(context, builder, array_type, array, i, j):
    """Pointer to ``array[i, j]``, bounds-checked when numba's boundscheck is on."""
    view = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, view, [i, j],
                                    wraparound=False, boundscheck=context.enable_boundscheck)


def _vector_pointers(context, builder, array_type, array, i0, j0, rows, vectors, lanes):
    """Pointers to the vectors ``array[i0 + r, j0 + v·lanes : j0 + (v+1)·lanes]``.

    In order ``(r, v)`` for ``r < rows``, ``v < vectors``. Under boundscheck the block's last
    element is checked as well as each vector's first, which covers every lane.
    """
    vector_pointer = ir.VectorType(context.get_value_type(array_type.dtype), lanes).as_pointer()
    if context.enable_boundscheck:
        _item_pointer(context, builder, array_type, array, _plus(builder, i0, rows - 1),
                      _plus(builder, j0, vectors * lanes - 1))
    pointers = []
    for r in range(rows):
        for v in range(vectors):
            item = _item_pointer(context, builder, array_type, array, _plus(builder, i0, r),
                                 _plus(builder, j0, v * lanes))
            pointers.append(builder.bitcast(item, vector_pointer))
    return pointers


def _tile_pointers(context, builder, c_type, c, i0, j0, index_types, tile):
    """Pointers to the vectors of the block ``c[i0:i0+rows, j0:j0+columns]`` of ``tile``."""
    i0, j0 = (_index(context, builder, x, t) for x, t in zip((i0, j0), index_types, strict=True))
    return _vector_pointers(context, builder, c_type, c, i0, j0, tile.shape.rows,
                            tile.shape.vectors, tile.lanes)


@intrinsic
def tile_zero(typingctx, c, shape):
    """A tile of geometry ``shape`` (a :class:`TileShape` constant) of zeros of ``c``'s dtype."""
    if not (_is_float_matrix(c) and isinstance(shape, _TileShapeType)):
        return None
    tile = Tile(c.dtype, shape.shape)

    def codegen(context, builder, signature, args):
        return ir.Constant(context.get_value_type(tile), None)

    return tile(c, shape), codegen


@intrinsic
def tile_load(typingctx, c, i0, j0, shape):
    """The block ``c[i0:i0+rows, j0:j0+columns]`` as a tile of geometry ``shape``."""
    if not (_is_float_matrix(c) and isinstance(i0, types.Integer)
            and isinstance(j0, types.Integer) and isinstance(shape, _TileShapeType)):
        return None
    tile = Tile(c.dtype, shape.shape)

    def codegen(context, builder, signature, args):
        value = ir.Constant(context.get_value_type(tile), ir.Undefined)
        pointers = _tile_pointers(context, builder, c, args[0], args[1], args[2],
                                  signature.args[1:3], tile)
        for slot, pointer in enumerate(pointers):
            vector = builder.load(pointer, align=c.dtype.bitwidth // 8)
            value = builder.insert_value(value, vector, slot)
        return value

    return tile(c, i0, j0, shape), codegen


@intrinsic
def tile_store(typingctx, c, i0, j0, tile, first):
    """``c[i0+r, j0:j0+columns] = tile[r]`` for the rows ``first <= r < rows`` of the tile."""
    if not (_is_float_matrix(c) and isinstance(tile, Tile) and tile.dtype == c.dtype
            and all(isinstance(x, types.Integer) for x in (i0, j0, first))):
        return None

    def codegen(context, builder, signature, args):
        pointers = _tile_pointers(context, builder, c, args[0], args[1], args[2],
                                  signature.args[1:3], tile)
        first_row = _index(context, builder, args[4], signature.args[4])
        vectors = tile.shape.vectors
        for r in range(tile.shape.rows):
            wanted = builder.icmp_signed("<=", first_row, ir.Constant(first_row.type, r))
            with builder.if_then(wanted, likely=True):
                for v in range(vectors):
                    slot = r * vectors + v
                    builder.store(builder.extract_value(args[3], slot), pointers[slot],
                                  align=c.dtype.bitwidth // 8)

    return types.void(c, i0, j0, tile, first), codegen


@intrinsic
def tile_add_row(typingctx, tile, row, j0):
    """``tile[r, x] + row[0, j0 + x]`` for every row ``r`` of the tile: one row vector of
    ``columns`` values (a bias) added to each row, after the tile's sum."""
    if not (isinstance(tile, Tile) and _is_float_matrix(row) and row.dtype == tile.dtype
            and isinstance(j0, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        value, row_array, _ = args
        zero = ir.Constant(ir.IntType(64), 0)
        column0 = _index(context, builder, args[2], signature.args[2])
        vectors = tile.shape.vectors
        row_vectors = [builder.load(pointer, align=tile.dtype.bitwidth // 8) for pointer in
                       _vector_pointers(context, builder, row, row_array, zero, column0, 1,
                                        vectors, tile.lanes)]
        for r in range(tile.shape.rows):
            for v, row_vector in enumerate(row_vectors):
                slot = r * vectors + v
                total = builder.fadd(builder.extract_value(value, slot), row_vector)
                value = builder.insert_value(value, total, slot)
        return value

    return tile(tile, row, j0), codegen


def _rank_one_update(a_transposed: bool, clamped: bool):
    """The intrinsic ``tile + A[i0:i0+rows, p] ⊗ b[q, j0:j0+columns]``: ``rows · vectors`` FMAs.

    ``A[i, p]`` is ``a[i, p]``, or ``a[p, i]`` for ``a_transposed``. With ``clamped``, rows of
    ``A`` past its end read its last row; without, the caller guarantees that they exist (and
    LLVM keeps the rows' addresses one stride apart).
    """

    def typer(typingctx, tile, a, i0, p, b, q, j0):
        if not (isinstance(tile, Tile) and _is_float_2d(a) and a.dtype == tile.dtype
                and _is_float_matrix(b) and b.dtype == tile.dtype
                and all(isinstance(x, types.Integer) for x in (i0, p, q, j0))):
            return None

        def codegen(context, builder, signature, args):
            value, a_array, _, _, b_array, _, _ = args
            row0, step, b_row, column0 = (_index(context, builder, args[k], signature.args[k])
                                          for k in (2, 3, 5, 6))
            vectors, alignment = tile.shape.vectors, a.dtype.bitwidth // 8
            b_vectors = [builder.load(pointer, align=alignment) for pointer in
                         _vector_pointers(context, builder, b, b_array, b_row, column0, 1,
                                          vectors, tile.lanes)]
            if clamped:
                a_view = context.make_array(a)(context, builder, a_array)
                extent = cgutils.unpack_tuple(builder, a_view.shape, 2)[1 if a_transposed else 0]
                last_row = _plus(builder, extent, -1)
            vector_type = ir.VectorType(context.get_value_type(a.dtype), tile.lanes)
            undefined = ir.Constant(vector_type, ir.Undefined)
            every_lane = ir.Constant(ir.VectorType(ir.IntType(32), tile.lanes), None)
            for r in range(tile.shape.rows):
                i = _plus(builder, row0, r)
                if clamped:
                    i = builder.select(builder.icmp_signed("<", last_row, i), last_row, i)
                pointer = _item_pointer(context, builder, a, a_array,
                                        *((step, i) if a_transposed else (i, step)))
                first_lane = builder.insert_element(undefined, builder.load(pointer),
                                                    ir.Constant(ir.IntType(32), 0))
                a_vector = builder.shuffle_vector(first_lane, undefined, every_lane)
                for v, b_vector in enumerate(b_vectors):
                    slot = r * vectors + v
                    product = builder.fmul(a_vector, b_vector, flags=("contract",))
                    total = builder.fadd(product, builder.extract_value(value, slot),
                                         flags=("contract",))
                    value = builder.insert_value(value, total, slot)
            return value

        return tile(tile, a, i0, p, b, q, j0), codegen

    typer.__name__ = "tile_update" + ("_t" if a_transposed else "") + \
        ("_clamped" if clamped else "")
    typer.__doc__ = (f"``tile[r, x] += A[i0 + r, p] · b[q, j0 + x]`` with ``A[i, p] = "
                     f"{'a[p, i]' if a_transposed else 'a[i, p]'}``"
                     + (" (rows past ``A``'s end read its last row)." if clamped else "."))
    return intrinsic(typer)


tile_update = _rank_one_update(a_transposed=False, clamped=False)
tile_update_t = _rank_one_update(a_transposed=True, clamped=False)
tile_update_clamped = _rank_one_update(a_transposed=False, clamped=True)


@intrinsic
def transpose_block(typingctx, src, i0, j0, dst, r0, c0):
    """``dst[r0 + p, c0 + q] = src[i0 + q, j0 + p]`` for ``p, q < lanes``: a square block, one
    register wide (16 × 16 float32 with AVX-512), transposed in registers.

    The block's ``lanes`` rows of ``src`` are loaded as vectors, and ``log2(lanes)`` rounds of
    two-vector shuffles make its columns: round ``s`` (1, 2, 4, ...) pairs rows ``i`` and
    ``i + s`` (``i & s == 0``) and swaps bit ``s`` of each element's row index with bit ``s`` of
    its lane index, so that after the last round every element's row and lane are exchanged.
    A copy of a transposed matrix element by element loads and stores one value at a time; this
    loads and stores whole vectors. Both arrays are C-contiguous, of one float dtype.
    """
    if not (_is_float_matrix(src) and _is_float_matrix(dst) and src.dtype == dst.dtype
            and all(isinstance(x, types.Integer) for x in (i0, j0, r0, c0))):
        return None
    lanes = TRANSPOSE_BYTES * 8 // src.dtype.bitwidth

    def codegen(context, builder, signature, args):
        src_array, dst_array = args[0], args[3]
        row0, column0, out_row0, out_column0 = (
            _index(context, builder, args[k], signature.args[k]) for k in (1, 2, 4, 5))
        alignment = src.dtype.bitwidth // 8
        rows = [builder.load(pointer, align=alignment) for pointer in
                _vector_pointers(context, builder, src, src_array, row0, column0, lanes, 1,
                                 lanes)]
        mask_type = ir.VectorType(ir.IntType(32), lanes)
        s = 1
        while s < lanes:
            # lanes 0 .. lanes-1 of a shuffle are the first vector's, lanes .. 2·lanes-1 the
            # second's
            low = ir.Constant(mask_type, [j if not j & s else lanes + j - s
                                          for j in range(lanes)])
            high = ir.Constant(mask_type, [j + s if not j & s else lanes + j
                                           for j in range(lanes)])
            for i in range(lanes):
                if not i & s:
                    rows[i], rows[i + s] = (builder.shuffle_vector(rows[i], rows[i + s], low),
                                            builder.shuffle_vector(rows[i], rows[i + s], high))
            s *= 2
        pointers = _vector_pointers(context, builder, dst, dst_array, out_row0, out_column0,
                                    lanes, 1, lanes)
        for row, pointer in zip(rows, pointers, strict=True):
            builder.store(row, pointer, align=alignment)

    return types.void(src, i0, j0, dst, r0, c0), codegen


def transpose_lanes(dtype: np.dtype) -> int:
    """The side of :func:`transpose_block`'s square for ``dtype``: one vector's lanes."""
    return TRANSPOSE_BYTES // np.dtype(dtype).itemsize


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
    return PRODUCT_TILE.columns(np.dtype(dtype).itemsize)


@jit
def _tile_product_compiled(a, a_row0, b, b_col0, c, c_row0, c_col0, t0, t1, accumulate):
    """``c[c_row0 + r, c_col0 + x] (+)= Σ_{t0 <= t < t1} a[a_row0 + r, t] · b[t, b_col0 + x]``.

    For ``r < TILE_ROWS`` and ``x < tile_columns``: one :data:`PRODUCT_TILE`, held in
    registers for the whole sum. Rows of ``a`` past its end repeat its last row (their results
    land in rows of ``c`` the caller ignores), so ``c`` needs ``TILE_ROWS`` rows from ``c_row0``
    whatever ``a``'s length. ``a`` may be any 2-D view (only scalars are read from it); ``b``
    and ``c`` are C-contiguous.
    """
    if accumulate:
        tile = tile_load(c, c_row0, c_col0, PRODUCT_TILE)
    else:
        tile = tile_zero(c, PRODUCT_TILE)
    for t in range(t0, t1):
        tile = tile_update_clamped(tile, a, a_row0, t, b, t, b_col0)
    tile_store(c, c_row0, c_col0, tile, 0)


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
