"""Fused (flash-style) scaled-dot-product attention, forward and hand-derived backward.

Shapes: ``q (B, H, T, D)``, ``k (B, Hkv, S, D)``, ``v (B, Hkv, S, Dv)`` with ``H % Hkv == 0``:
query head ``h`` reads key/value head ``h // G``, ``G = H / Hkv`` (grouped-query attention;
``Hkv = 1`` is multi-query attention, ``Hkv = H`` the plain case). ``bias`` is an additive
float array with 4 dimensions each equal to 1 (broadcast) or to ``B, H, T, S``. For one head::

    s_ij = scale · q_i·k_j + bias_ij          (−inf where masked)
    p_ij = e^(s_ij − lse_i),   lse_i = log Σ_j e^(s_ij)
    z_ij = keep_ij / (1 − p_drop)            (inverted dropout; keep from counter_rng)
    o_i  = Σ_j p_ij z_ij v_j

Masks. Query ``i`` may see key ``j`` only inside a band of offsets ``i − j``: causal keeps
``j <= i``; a sliding window of size ``w`` keeps ``i − w < j <= i`` with ``is_causal`` and
``|i − j| < w`` without. Key blocks that lie entirely outside the band are never visited, so
the work grows with ``T·w``, not ``T·S``. A row whose band holds no key (a window past the
last key, or a bias of −inf over the band) is fully masked (below).

Forward (online softmax). Keys are visited block by block; each query keeps a running max
``m``, a running sum ``l = Σ e^(s−m)`` and an accumulator ``acc = Σ e^(s−m) z v``. A new block
with larger max ``m'`` rescales both by ``α = e^(m−m')`` before adding its terms, so that at the
end ``o = acc / l`` and ``lse = m + log l``. Only ``o`` and ``lse`` are stored: memory is
``O(T·D)`` per head plus one (keys × queries) block, never the full ``(T, S)`` matrix.

Backward. Given ``g = dL/do``, the weights ``p`` are recomputed block by block from ``q, k``
and the saved ``lse`` (``p = e^(s − lse)`` needs no second normalisation pass)::

    dv_j  = Σ_i p_ij z_ij g_i                        (dL/dv = (p ⊙ z)ᵀ g)
    dp_ij = z_ij (g_i · v_j)                          (dL/dp, dropout included)
    ds_ij = p_ij (dp_ij − Σ_l p_il dp_il)             (softmax backward, row by row)
    dq_i  = scale Σ_j ds_ij k_j,    dk_j = scale Σ_i ds_ij q_i

The row term needs the whole row of ``p``, which is never held at once. It equals
``δ_i = g_i · o_i``: ``Σ_l p_il dp_il = Σ_l p_il z_il (g_i · v_l) = g_i · (Σ_l p_il z_il v_l)
= g_i · o_i`` — the dropout factor ``z`` sits inside ``o`` exactly as it sits inside ``dp``, so
the identity holds with dropout too. ``δ`` is computed once per query from ``g`` and ``o``.
With grouped heads, ``dk`` and ``dv`` of a key/value head are the sums over the ``G`` query
heads that read it (the backward of repeating ``k`` and ``v`` is a sum).

A fully masked query row (every ``s_ij = −inf``) has ``l = 0``: its output is zero,
``lse = −inf``, its recomputed weights are zero and so are the gradients flowing through it —
never NaN (PyTorch's math path returns NaN there). A NaN score, on the other hand, makes its
row's output, ``lse`` and gradients NaN, as in PyTorch: a diverged run stays visible.

Layout. Inside a head, blocks are held transposed (keys × queries): the queries are the
contiguous axis, so the running max/sum, the exponentials and the masks are elementwise loops
that vectorise without reassociating a sum, and every block product reads keys and values as
broadcast scalars, straight from ``k`` and ``v`` (never copied, never repeated per query head).
Only ``q`` (times ``scale``) and ``g`` are transposed, once per head (per query block in the
forward). The block products — ``sᵀ = k qᵀ`` and ``accᵀ += vᵀ pᵀ`` forward; ``sᵀ``,
``dpᵀ = v gᵀ``, ``dv += pᵀ g``, ``dk += dsᵀ q`` and ``dqᵀ += kᵀ dsᵀ`` backward — run on the
register-blocked tile of :mod:`.simd`, whose size follows the CPU's vector unit; tiles that
meet no (query, key) pair of the band are skipped and sums stop at the band's edge, so a
causal or windowed mask costs only the work inside it (to the tile's granularity).

Two memory layouts. A ``(B, H, T, ·)`` input is read in place whether its memory is
head-major (C-contiguous ``(B, H, T, ·)``) or token-major (``(B, T, H, ·)``, the layout of a
projection's output split into heads, ``x.view(B, T, H, D).transpose(1, 2)``): a flag per
operand (``q``; ``k`` and ``v``; ``dout``) tells the kernels which, and :func:`_head` takes a
head's ``(T, D)`` rows from either, so one compiled kernel serves both. An input laid out
neither way is copied once. ``out``, ``dq``, ``dk``, ``dv`` are written token-major and
returned as ``(B, H, T, ·)`` views (as PyTorch's flash attention returns its output), so the
heads are merged back without a copy (``out.transpose(1, 2).reshape(B, T, H·Dv)`` is a view)
and, in a model, no copy is made on the way in or out, forward or backward: the graph keeps
one array for a projection's output and the attention's saved ``q``, ``k`` or ``v`` (likewise
for ``out`` and the output projection's input). When ``q``, ``k`` and ``v`` are the pieces of
one packed projection (``qkv.split(C, dim=2)``), ``dq``, ``dk``, ``dv`` are written into one
buffer of that layout, which the split's backward passes on as the gradient of ``qkv``
instead of concatenating the three. A token-major head's rows are ``H·D`` apart;
they are read as scalars or copied into the blocks, so only the tile products' C-contiguous
operands are ever loaded as vectors.

Parallelism. The forward runs (batch, query head, query block) tasks, the
backward over (batch, key/value head) tasks, each of which loops over its group's query heads
in order and adds their ``dk``, ``dv`` in that order; a task also computes the ``dq`` of its
query heads whole. No two tasks write the same output, so results are bitwise identical run
to run and for any thread count. The backward has only ``B·Hkv`` tasks: with fewer than there
are threads (one sequence with multi-query attention), some threads idle. Below
``_PARALLEL_MIN_WORK`` multiply-adds the tasks run serially: waking the thread pool then
costs more than the work (or as much). On the AMD EPYC of ``benchmarks/README.md``
(``bench_thresholds.py``, three runs, 2 threads, causal), in parallel four heads of 32 queries
(``D = 32``, 2¹⁸ multiply-adds) took 0.82–0.88× the serial time backward and 0.86–1.26×
forward, four heads of 64 queries (sampling from a small GPT) 0.71–0.76× backward and
0.74–1.13× forward, and twelve heads of 16 or 32 queries (``D = 64``, GPT-2) 0.61–0.76×; four
heads of 8 or 16 queries took 0.93–1.26×. Which path wins at these sizes varies from process
to process (in one run of the three most small cases were slower in parallel).

Compile cost. The per-task functions (:func:`_forward_block`, :func:`_backward_kv_head`) are
task functions of :func:`~.parallel.run_tasks`: each is compiled once, on its own, and called by
address from the loop shared by every kernel, serial or parallel.
The ``a`` operands of the tile products are the strided heads of ``k`` and ``v`` and blocks of
weights; the blocks are passed as ``[:nk, ::1]`` views, which numba types as strided like the
heads, so that the tile product is compiled for one layout of ``a``, not two.
Each helper is compiled for one signature per dtype: the task index reaches the per-task
function as an ``int64``, constant arguments are numpy scalars rather than literals (numba
would compile a helper once more for a literal ``0`` or ``True``), and blocks are copied
element by element (a slice assignment would also compile numba's shape-mismatch error
message).
"""

from __future__ import annotations

import math

import numpy as np

from . import FLOAT_DTYPES
from .aligned import data_address
from .attention_reference import (  # noqa: F401  (the twins, also reachable from here)
    attention_backward_numpy,
    attention_forward_numpy,
)
from .compiled_only import compiled_only
from .counter_rng import fold_key, keep_threshold, kept
from .exp import fast_exp
from .parallel import run_tasks
from .reductions import row_dot
from .simd import TILE_ROWS, prefer_full_width, tile_columns, tile_product

# Queries per block (the contiguous, vectorised axis; a whole number of tiles) and keys per
# block (a whole number of tile rows).
_BLOCK_Q = 128
_BLOCK_K = 64
_PARALLEL_MIN_WORK = 2**18
# Constant arguments of the helpers, as numpy scalars: numba compiles a function once per
# distinct argument types, and a Python literal (``0``, ``True``) at a call site is a type of
# its own, which would compile the helper again for that call site alone.
_ZERO = np.int64(0)
_TRUE, _FALSE = np.bool_(True), np.bool_(False)
# Per float dtype: the bias of an attention without one (never read: ``has_bias`` is False)
# and the width of the tile products, which a query block holds a whole number of.
_NO_BIAS = {dtype: np.zeros((1, 1, 1, 1), dtype) for dtype in FLOAT_DTYPES}
_TILE_COLUMNS = {dtype: tile_columns(dtype) for dtype in FLOAT_DTYPES}
assert all(_BLOCK_Q % columns == 0 for columns in _TILE_COLUMNS.values())
assert _BLOCK_K % TILE_ROWS == 0


@compiled_only
def _round_up(n, step):
    """``n`` rounded up to a multiple of ``step``."""
    return -(-n // step) * step


@compiled_only
def _head(x, c0, b, h, width, n_heads, token_major):
    """Head ``h`` of batch ``b`` as a ``(T, width)`` view (typed strided either way: one
    compile): of the token rows ``x (B, T, ·)`` starting at column ``c0`` when
    ``token_major`` (the head's columns ``c0 + h·width …``), else of ``x (B·H, T, width)``."""
    if token_major:
        return x[b, :, c0 + h * width : c0 + (h + 1) * width]
    return x[b * n_heads + h]


_TRANSPOSE_RUN = 8  # rows of the source whose values are written side by side (see below)


@compiled_only
def _transpose_into(dst, src, n, scale):
    """``dst[d, x] = scale · src[x, d]`` for ``x < n``; the columns of ``dst`` past ``n`` are 0.

    In runs of :data:`_TRANSPOSE_RUN` rows of ``src``: for each column, the run's values are
    written side by side into a row of ``dst``, so that the stores are contiguous and the run's
    rows stay in L1 while their columns are read (a whole row of ``dst`` at a time reads one
    cache line per value; at ``(64, 32)`` the runs take a fifth less time).
    """
    whole = n - n % _TRANSPOSE_RUN
    for x0 in range(0, whole, _TRANSPOSE_RUN):
        for d in range(src.shape[1]):
            for x in range(x0, x0 + _TRANSPOSE_RUN):
                dst[d, x] = src[x, d] * scale
    for x in range(whole, n):
        for d in range(src.shape[1]):
            dst[d, x] = src[x, d] * scale
    dst[:, n:] = 0.0


@compiled_only
def _padded_rows(dst, x):
    """``dst[i, :C] = x[i]`` for the rows of ``x (N, C)``; the columns of ``dst`` past ``C`` are 0
    (``dst`` is a C-contiguous ``(N, ≥ C)`` operand of the tile product; ``x`` may be strided)."""
    for i in range(x.shape[0]):
        for d in range(x.shape[1]):
            dst[i, d] = x[i, d]
    dst[:, x.shape[1]:] = 0.0


@compiled_only
def _band_columns(j, query0, band_lo, band_hi, width):
    """Columns ``[first, stop)`` of a row of width ``width`` whose queries see key ``j``.

    Column ``x`` is query ``query0 + x``; query ``i`` sees key ``j`` iff
    ``band_lo <= i − j <= band_hi``. Loops over such a range run over the slice
    ``[first:stop]`` from 0: numba cannot tell that an index starting at ``first`` is never
    negative, and its wrap-around check then keeps the loop from vectorising.
    """
    first = min(max(j + band_lo - query0, 0), width)
    stop = min(max(j + band_hi + 1 - query0, first), width)
    return first, stop


@compiled_only
def _vector_span(first, stop, lanes, width):
    """``[lo, hi)``: the columns ``[first, stop)`` widened to whole vectors of ``lanes`` values
    (``lo`` down, ``hi`` up, at most ``width``, a multiple of ``lanes``; ``lanes`` is a power of
    two, so no division). A loop over it runs on whole vectors only, with no scalar remainder:
    a causal band's rows start anywhere, and their remainders, one value at a time, cost more
    than the vectors (at ``T = 64, D = 32``, one thread, the forward takes 8.6 instead of 9.8 µs
    per head). No mask in the loop either (a mask on every vector made ``T = 1024`` up to 6%
    slower): the few columns of the span outside the band are set to ``−inf`` before the
    forward's softmax, whose weights there come out 0, and to 0 after the backward's loops."""
    return first & -lanes, min(width, (stop + lanes - 1) & -lanes)


@compiled_only
def _scores_product(c, c_col0, n_rows, n_cols, a, b, b_col0, n_inner, key0, query0, band_lo,
                    band_hi, tile_cols):
    """``c[r, c_col0 + x] = Σ_{t < n_inner} a[r, t] · b[t, b_col0 + x]``, tile by tile.

    Row ``r`` is key ``key0 + r``, column ``x`` query ``query0 + x``; tiles with no (query, key)
    pair inside the band are skipped (they keep whatever they held).
    """
    for r in range(0, n_rows, TILE_ROWS):
        first_key, last_key = key0 + r, key0 + min(r + TILE_ROWS, n_rows) - 1
        for x in range(0, n_cols, tile_cols):
            first_query, last_query = query0 + x, query0 + x + tile_cols - 1
            if last_query - first_key >= band_lo and first_query - last_key <= band_hi:
                tile_product(a, r, b, b_col0 + x, c, r, c_col0 + x, _ZERO, n_inner, _FALSE)


@compiled_only
def _over_queries_product(c, c_row0, n_rows, n_cols, a, b, n_inner, key0, query0, band_lo,
                          band_hi, tile_cols):
    """``c[c_row0 + r, x] += Σ_t a[r, t] · b[t, x]`` where row ``r`` is key ``key0 + r`` and
    ``t < n_inner`` query ``query0 + t``; the sum skips the queries outside the band of a
    tile's keys (where ``a`` is zero)."""
    for r in range(0, n_rows, TILE_ROWS):
        first_key, last_key = key0 + r, key0 + min(r + TILE_ROWS, n_rows) - 1
        t0 = max(0, first_key + band_lo - query0)
        t1 = min(n_inner, last_key + band_hi + 1 - query0)
        if t0 < t1:
            for x in range(0, n_cols, tile_cols):
                tile_product(a, r, b, x, c, c_row0 + r, x, t0, t1, _TRUE)


@compiled_only
def _over_keys_product(c, c_col0, n_rows, n_cols, a, b, b_col0, n_inner, key0, query0, band_lo,
                       band_hi, tile_cols):
    """``c[r, c_col0 + x] += Σ_t a[r, t] · b[t, b_col0 + x]`` where column ``x`` is query
    ``query0 + x`` and ``t < n_inner`` key ``key0 + t``; the sum skips the keys outside the
    band of a tile's queries (where ``b`` is zero)."""
    for x in range(0, n_cols, tile_cols):
        first_query, last_query = query0 + x, query0 + x + tile_cols - 1
        t0 = max(0, first_query - band_hi - key0)
        t1 = min(n_inner, last_query - band_lo + 1 - key0)
        if t0 < t1:
            for r in range(0, n_rows, TILE_ROWS):
                tile_product(a, r, b, b_col0 + x, c, r, c_col0 + x, t0, t1, _TRUE)


@compiled_only
def _add_bias(st, nk, c0, c1, nq, bias, b, h, i0, j0, band_lo, band_hi):
    """Add the bias to the scores ``st[:nk, c0:c1]`` inside the band.

    Row ``jj`` is key ``j0 + jj``, column ``x`` query ``i0 + x``; only real queries
    (``x < nq``) are read. (Outside the band nothing is read: the weight passes write zeros.)
    """
    bias_b = b if bias.shape[0] > 1 else 0
    bias_h = h if bias.shape[1] > 1 else 0
    query_step = 1 if bias.shape[2] > 1 else 0
    key_step = 1 if bias.shape[3] > 1 else 0
    for jj in range(nk):
        first, stop = _band_columns(j0 + jj, i0 + c0, band_lo, band_hi, min(c1, nq) - c0)
        row = st[jj, c0 + first : c0 + stop]
        bias_col = bias[bias_b, bias_h, :, (j0 + jj) * key_step]
        query0 = i0 + c0 + first
        for x in range(stop - first):
            row[x] += bias_col[(query0 + x) * query_step]


@compiled_only
def _query_states(states, head_state, query0):
    """``states[x]``: the counter state of query ``query0 + x`` of a head (its key folded in)."""
    for x in range(states.size):
        states[x] = fold_key(head_state, query0 + x)


@compiled_only
def _dropout_factors(z, c0, n_cols, query_states, threshold, keep_scale, j0, nk, query0,
                     band_lo, band_hi):
    """``z[jj, c0 + x] = z_ij`` for key ``j = j0 + jj`` and query ``i = query0 + x``,
    ``x < n_cols`` (``query_states[x]`` that query's state): ``keep_scale`` where the weight is
    kept, 0 where it is dropped or outside the band.

    The loop runs along the queries of one key, so that it vectorises: each state is
    ``mix(query_states[x] + (j + 1)·γ)``, which is ``fold_key(query_states[x], j)``.
    """
    for jj in range(nk):
        j = j0 + jj
        first, stop = _band_columns(j, query0, band_lo, band_hi, n_cols)
        z[jj, c0 : c0 + first] = 0.0
        z[jj, c0 + stop : c0 + n_cols] = 0.0
        row, states = z[jj, c0 + first : c0 + stop], query_states[first:stop]
        for x in range(stop - first):
            row[x] = keep_scale if kept(fold_key(states[x], j), threshold) else 0.0


@compiled_only
def _forward_block(q, k, v, q_c0, k_c0, v_c0, q_tokens, kv_tokens, d_head, n_kv_heads, bias,
                   has_bias, band_lo, band_hi, scale, dropout_p, seed, block_q, block_k,
                   tile_cols, out, lse, task):
    """Forward of one (batch, query head, query block) task into ``out (B, T, H, Dv)`` and
    ``lse (B, H, T)``; ``q``, ``k``, ``v`` as :func:`_head` reads them (``q`` by ``q_tokens``,
    ``k`` and ``v`` by ``kv_tokens``)."""
    prefer_full_width()
    n_batch, n_queries, n_heads, d_value = out.shape
    n_keys = k.shape[1]
    dtype = q.dtype.type
    zero = dtype(0.0)
    keep_scale = dtype(1.0 / (1.0 - dropout_p)) if dropout_p < 1.0 else dtype(0.0)
    threshold = keep_threshold(dropout_p)
    lanes = tile_cols // 2  # a tile is two vectors wide
    n_query_blocks = -(-n_queries // block_q)
    b = task // (n_heads * n_query_blocks)
    h = task // n_query_blocks % n_heads
    i0 = task % n_query_blocks * block_q
    nq = min(block_q, n_queries - i0)
    hk = h // (n_heads // n_kv_heads)
    head_state = fold_key(fold_key(seed, b), h)
    k_rows = _head(k, k_c0, b, hk, d_head, n_kv_heads, kv_tokens)  # (S, D)
    v_rows = _head(v, v_c0, b, hk, d_value, n_kv_heads, kv_tokens)  # (S, Dv)
    width = _round_up(nq, tile_cols) + tile_cols  # room for a last tile starting anywhere
    q_t = np.empty((d_head, width), q.dtype)  # scale · q of the block, transposed: (D, T)
    q_head = _head(q, q_c0, b, h, d_head, n_heads, q_tokens)  # (T, D)
    _transpose_into(q_t, q_head[i0 : i0 + nq], nq, dtype(scale))
    st = np.empty((block_k, width), q.dtype)  # scores, then weights: (keys, queries)
    acc_t = np.zeros((_round_up(d_value, TILE_ROWS), width), q.dtype)  # (Dv, queries)
    run_max = np.full(width, -np.inf, q.dtype)  # m
    run_sum = np.zeros(width, q.dtype)  # l
    new_max = np.empty(width, q.dtype)  # m'
    shift = np.empty(width, q.dtype)  # m', or 0 while the column is all −inf
    alpha = np.empty(width, q.dtype)  # e^(m − m')
    z = st  # dropout factors z_ij: (keys, queries), with dropout only
    query_states = np.empty(0, np.uint64)
    if dropout_p > 0.0:
        z = np.empty((block_k, width), q.dtype)
        query_states = np.empty(width, np.uint64)
        _query_states(query_states, head_state, i0)
    # the keys some query of the block sees: i0 − band_hi <= j < i0 + nq − band_lo
    key_start = max(0, i0 - band_hi)
    key_stop = min(n_keys, i0 + nq - band_lo)
    for j0 in range(key_start, key_stop, block_k):
        nk = min(block_k, key_stop - j0)
        # the queries that see some key of the block: j0 + band_lo <= i < j0 + nk + band_hi
        c0 = max(0, j0 + band_lo - i0)
        c1 = min(nq, j0 + nk + band_hi - i0)
        if c1 <= c0:
            continue
        c1 = c0 + _round_up(c1 - c0, tile_cols)  # whole tiles; columns past nq are unused
        n_cols = c1 - c0
        query0 = i0 + c0
        _scores_product(st, c0, nk, n_cols, k_rows[j0 : j0 + nk], q_t, c0, d_head, j0, query0,
                        band_lo, band_hi, tile_cols)
        if has_bias:
            _add_bias(st, nk, c0, c1, nq, bias, b, h, i0, j0, band_lo, band_hi)
        # 1-D views of the active columns, so that the loops below vectorise
        block_new, block_shift, block_alpha = new_max[c0:c1], shift[c0:c1], alpha[c0:c1]
        block_run_max, block_run_sum = run_max[c0:c1], run_sum[c0:c1]
        for x in range(n_cols):
            block_new[x] = block_run_max[x]
        for jj in range(nk):
            first, stop = _band_columns(j0 + jj, query0, band_lo, band_hi, n_cols)
            lo, hi = _vector_span(first, stop, lanes, n_cols)
            st[jj, c0 + lo : c0 + first] = -np.inf  # the span outside the band: weight 0
            st[jj, c0 + stop : c0 + hi] = -np.inf
            row, row_new = st[jj, c0 + lo : c0 + hi], block_new[lo:hi]
            for x in range(hi - lo):
                # every element is stored (``+ 0`` is no copy of the value loaded, as far as
                # the compiler knows): a store only where the row is larger compiles to masked
                # vector stores, which an AMD EPYC without AVX-512 ran 7 times slower
                row_new[x] = row[x] if row[x] > row_new[x] else row_new[x] + zero
        for x in range(n_cols):
            block_shift[x] = block_new[x] if block_new[x] > -np.inf else 0.0
            block_alpha[x] = fast_exp(block_run_max[x] - block_shift[x])
            block_run_max[x] = block_new[x]
            block_run_sum[x] *= block_alpha[x]
        for jj in range(nk):
            first, stop = _band_columns(j0 + jj, query0, band_lo, band_hi, n_cols)
            lo, hi = _vector_span(first, stop, lanes, n_cols)
            st[jj, c0 : c0 + lo] = 0.0
            st[jj, c0 + hi : c1] = 0.0
            row, row_shift = st[jj, c0 + lo : c0 + hi], block_shift[lo:hi]
            row_sum = block_run_sum[lo:hi]
            for x in range(hi - lo):
                weight = fast_exp(row[x] - row_shift[x])
                row[x] = weight
                row_sum[x] += weight
        if dropout_p > 0.0:
            _dropout_factors(z, c0, n_cols, query_states[c0:c1], threshold, keep_scale, j0, nk,
                             query0, band_lo, band_hi)
            for jj in range(nk):
                row, row_z = st[jj, c0:c1], z[jj, c0:c1]
                for x in range(n_cols):
                    row[x] *= row_z[x]
        for e in range(d_value):
            acc_row = acc_t[e, c0:c1]
            for x in range(n_cols):
                acc_row[x] *= block_alpha[x]
        _over_keys_product(acc_t, c0, d_value, n_cols, v_rows[j0 : j0 + nk].T, st, c0, nk, j0,
                           query0, band_lo, band_hi, tile_cols)
    for x in range(nq):
        i = i0 + x
        if run_sum[x] > 0.0:
            inv_sum = dtype(1.0) / run_sum[x]
            for e in range(d_value):
                out[b, i, h, e] = acc_t[e, x] * inv_sum
            lse[b, h, i] = run_max[x] + math.log(run_sum[x])
        elif run_sum[x] != run_sum[x]:  # a NaN score: the row is NaN, as in PyTorch
            out[b, i, h, :] = np.nan
            lse[b, h, i] = np.nan
        else:
            out[b, i, h, :] = 0.0
            lse[b, h, i] = -np.inf


@compiled_only
def _backward_kv_head(q, k, v, q_c0, k_c0, v_c0, q_tokens, kv_tokens, d_head, n_kv_heads, out,
                      lse, dout, dout_c0, dout_tokens, bias, has_bias, band_lo, band_hi, scale,
                      dropout_p, seed, block_q, block_k, tile_cols, dq, dk, dv, dq_h0, dk_h0,
                      dv_h0, task):
    """Backward of one (batch, key/value head) task: ``dq`` of its query heads, its ``dk, dv``
    (``out`` token-major; ``q``, ``k``, ``v``, ``dout`` as :func:`_head` reads them, by their
    flags; the gradients token-major, head ``h`` of ``dq`` at ``dq[b, :, dq_h0 + h]``, and so
    on)."""
    prefer_full_width()
    n_batch, n_queries, n_heads, d_value = out.shape
    n_keys = k.shape[1]  # (B, S, P) token rows or (B·Hkv, S, D) heads
    group = n_heads // n_kv_heads
    dtype = q.dtype.type
    scale_t = dtype(scale)
    keep_scale = dtype(1.0 / (1.0 - dropout_p)) if dropout_p < 1.0 else dtype(0.0)
    threshold = keep_threshold(dropout_p)
    lanes = tile_cols // 2  # a tile is two vectors wide
    b = task // n_kv_heads
    hk = task % n_kv_heads
    k_rows = _head(k, k_c0, b, hk, d_head, n_kv_heads, kv_tokens)  # (S, D)
    v_rows = _head(v, v_c0, b, hk, d_value, n_kv_heads, kv_tokens)  # (S, Dv)
    d_head_cols = _round_up(d_head, tile_cols)
    d_value_cols = _round_up(d_value, tile_cols)
    key_rows = _round_up(n_keys, TILE_ROWS)
    width = n_queries + tile_cols  # room for a last tile that starts anywhere
    dk_acc = np.zeros((key_rows, d_head_cols), q.dtype)  # Σ over the group, unscaled
    dv_acc = np.zeros((key_rows, d_value_cols), q.dtype)
    q_t = np.empty((d_head, width), q.dtype)  # scale · q, transposed: (D, T)
    dout_t = np.empty((d_value, width), q.dtype)  # (Dv, T)
    dq_t = np.empty((_round_up(d_head, TILE_ROWS), width), q.dtype)  # (D, T)
    q_rows = np.empty((n_queries, d_head_cols), q.dtype)  # q of one head, padded: (T, D)
    dout_rows = np.empty((n_queries, d_value_cols), q.dtype)  # (T, Dv)
    delta = np.zeros(width, q.dtype)  # δ_i = g_i · o_i (0 past T)
    lse_safe = np.full(width, np.inf, q.dtype)  # lse, +inf where weights must be 0
    st = np.empty((block_k, block_q), q.dtype)  # scores, then weights p: (keys, queries)
    dpt = np.empty((block_k, block_q), q.dtype)  # dL/dp, then dL/ds: (keys, queries)
    p_kept = np.empty((block_k, block_q), q.dtype)  # p ⊙ z: (keys, queries)
    z = p_kept  # dropout factors z_ij: (keys, queries), with dropout only
    query_states = np.empty(0, np.uint64)  # of the head's queries, with dropout only
    if dropout_p > 0.0:
        z = np.empty((block_k, block_q), q.dtype)
        query_states = np.empty(width, np.uint64)
    for g in range(group):
        h = hk * group + g
        if dropout_p > 0.0:
            _query_states(query_states, fold_key(fold_key(seed, b), h), _ZERO)
        q_head = _head(q, q_c0, b, h, d_head, n_heads, q_tokens)  # (T, D)
        dout_head = _head(dout, dout_c0, b, h, d_value, n_heads, dout_tokens)  # (T, Dv)
        _transpose_into(q_t, q_head, n_queries, scale_t)
        _transpose_into(dout_t, dout_head, n_queries, dtype(1.0))
        _padded_rows(q_rows, q_head)  # (T, D) for the dk product
        _padded_rows(dout_rows, dout_head)  # (T, Dv) for the dv product
        dq_t[:] = 0.0
        for i in range(n_queries):  # δ from contiguous rows, summed in vector lanes
            delta[i] = row_dot(dout_rows[i, :d_value], out[b, i, h])
            lse_safe[i] = lse[b, h, i] if lse[b, h, i] > -np.inf else np.inf
        for j0 in range(0, n_keys, block_k):
            nk = min(block_k, n_keys - j0)
            k_block, v_block = k_rows[j0 : j0 + nk], v_rows[j0 : j0 + nk]  # (keys, D|Dv)
            # the queries that see some key of the block: j0 + band_lo <= i < j0 + nk + band_hi
            query_start = max(0, j0 + band_lo)
            query_stop = min(n_queries, j0 + nk + band_hi)
            for i0 in range(query_start, query_stop, block_q):
                nq = min(block_q, query_stop - i0)
                n_cols = _round_up(nq, tile_cols)  # columns past nq get zero weight
                _scores_product(st, _ZERO, nk, n_cols, k_block, q_t, i0, d_head, j0, i0,
                                band_lo, band_hi, tile_cols)
                _scores_product(dpt, _ZERO, nk, n_cols, v_block, dout_t, i0, d_value, j0, i0,
                                band_lo, band_hi, tile_cols)
                if has_bias:
                    _add_bias(st, nk, _ZERO, n_cols, nq, bias, b, h, i0, j0, band_lo, band_hi)
                for jj in range(nk):
                    first, stop = _band_columns(j0 + jj, i0, band_lo, band_hi, n_cols)
                    lo, hi = _vector_span(first, stop, lanes, n_cols)
                    row, row_lse = st[jj, lo:hi], lse_safe[i0 + lo : i0 + hi]
                    for x in range(hi - lo):
                        row[x] = fast_exp(row[x] - row_lse[x])
                    st[jj, :first] = 0.0  # scores outside the band may be anything
                    st[jj, stop:n_cols] = 0.0
                p_z = st
                if dropout_p > 0.0:  # p ⊙ z, and dL/dp ⊙ z (zero outside the band)
                    _dropout_factors(z, _ZERO, n_cols, query_states[i0 : i0 + n_cols],
                                     threshold, keep_scale, j0, nk, i0, band_lo, band_hi)
                    for jj in range(nk):
                        row, row_kept, row_dp, row_z = st[jj], p_kept[jj], dpt[jj], z[jj]
                        for x in range(n_cols):
                            row_kept[x] = row[x] * row_z[x]
                            row_dp[x] *= row_z[x]
                    p_z = p_kept
                _over_queries_product(dv_acc, j0, nk, d_value, p_z[:nk, ::1],
                                      dout_rows[i0 : i0 + nq], nq, j0, i0, band_lo, band_hi,
                                      tile_cols)
                for jj in range(nk):
                    first, stop = _band_columns(j0 + jj, i0, band_lo, band_hi, n_cols)
                    lo, hi = _vector_span(first, stop, lanes, n_cols)
                    p_row, dp_row = st[jj, lo:hi], dpt[jj, lo:hi]
                    row_delta = delta[i0 + lo : i0 + hi]
                    for x in range(hi - lo):
                        dp_row[x] = p_row[x] * (dp_row[x] - row_delta[x])
                    dpt[jj, :first] = 0.0  # dL/dp outside the band may be anything
                    dpt[jj, stop:n_cols] = 0.0
                _over_queries_product(dk_acc, j0, nk, d_head, dpt[:nk, ::1], q_rows[i0 : i0 + nq],
                                      nq, j0, i0, band_lo, band_hi, tile_cols)
                _over_keys_product(dq_t, i0, d_head, n_cols, k_block.T, dpt, _ZERO, nk, j0, i0,
                                   band_lo, band_hi, tile_cols)
        for i in range(n_queries):
            for d in range(d_head):
                dq[b, i, dq_h0 + h, d] = scale_t * dq_t[d, i]
    for j in range(n_keys):
        for d in range(d_head):
            dk[b, j, dk_h0 + hk, d] = scale_t * dk_acc[j, d]
        for e in range(d_value):
            dv[b, j, dv_h0 + hk, e] = dv_acc[j, e]


def _band(is_causal: bool, window_size: int | None, T: int, S: int) -> tuple[int, int]:
    """The offsets ``band_lo <= i − j <= band_hi`` query ``i`` may attend key ``j`` at."""
    unbounded = T + S  # wider than any offset
    if window_size is None:
        return (0 if is_causal else -unbounded), unbounded
    return (0 if is_causal else 1 - window_size), window_size - 1


def _parallel(n_tasks: int, work: int) -> bool:
    """Whether to spread the tasks over threads: several tasks and enough multiply-adds."""
    return n_tasks > 1 and work >= _PARALLEL_MIN_WORK


def _laid_out(*arrays: np.ndarray) -> tuple:
    """``(B, H, L, W)`` arrays as the kernels read them, ``(*rows, *first_columns,
    token_major)``: the token rows of each (:func:`_token_rows`) when every one is laid out so,
    else C-contiguous ``(B·H, L, W)`` arrays (copied only if needed) with first columns 0."""
    rows, columns = [], []
    for x in arrays:
        found = _token_rows(x)
        if found is None:
            heads = [np.ascontiguousarray(x).reshape(x.shape[0] * x.shape[1], *x.shape[2:])
                     for x in arrays]  # (B·H, L, W)
            return (*heads, *[_ZERO] * len(arrays), _FALSE)
        rows.append(found[0])
        columns.append(found[1])
    return (*rows, *columns, _TRUE)


def _token_rows(x: np.ndarray) -> tuple[np.ndarray, int] | None:
    """``x (B, H, L, W)`` as ``(rows (B, L, P), c0)`` with ``x[b, h, l, w] = rows[b, l, c0 +
    h·W + w]``, when its memory is one row of ``P`` values per token with the heads side by
    side: a projection's heads (``P = H·W``), or a slice of a packed projection's (nanoGPT's
    ``qkv.split(C, dim=2)``: ``P = 3C``, ``c0 = 0, C, 2C``). ``rows`` is a C-contiguous view
    of the memory ``x`` lies in; None when there is none."""
    B, H, L, W = x.shape
    item = x.itemsize
    sb, sh, sl, sw = x.strides  # in bytes
    row = sl if L > 1 else (sb if B > 1 else H * W * item)  # bytes from a token to the next
    P = row // item
    if (W > 1 and sw != item) or (H > 1 and sh != W * item) or row % item or P < H * W or \
            (B > 1 and sb != L * row):
        return None
    owner = x
    while isinstance(owner, np.ndarray) and owner.base is not None:
        owner = owner.base
    if not isinstance(owner, np.ndarray) or not owner.flags.c_contiguous or \
            owner.dtype != x.dtype:
        return None
    offset, rest = divmod(data_address(x) - data_address(owner), item)
    # Any column c0 that keeps the rows inside the memory (0 <= offset − c0, offset − c0 +
    # B·L·P <= its size) and the heads inside a row (c0 + H·W <= P) reads the same values. The
    # column where x starts in a row of the memory is one (0, C or 2C above), unless the memory
    # does not start at a row: an aligned buffer (:mod:`.aligned`) starts a few values in.
    lowest, highest = max(0, offset + B * L * P - owner.size), min(offset, P - H * W)
    c0 = offset % P if P else 0
    if not lowest <= c0 <= highest:
        c0 = lowest
    if rest or offset < 0 or c0 > highest:
        return None
    start = offset - c0
    return owner.reshape(-1)[start : start + B * L * P].reshape(B, L, P), c0


def _kernel_options(name, q, k, v, bias, is_causal, scale, dropout_p, seed, window_size):
    """Check the preconditions; return ``(q, q_tokens), (k, v, kv_tokens)`` laid out for the
    kernels (:func:`_laid_out`) and the kernels' options."""
    assert q.dtype in (np.float32, np.float64) and q.dtype == k.dtype == v.dtype, \
        f"{name}: q, k, v must share one float dtype, got {q.dtype}, {k.dtype}, {v.dtype}"
    assert q.ndim == k.ndim == v.ndim == 4, \
        f"{name}: q, k, v must be 4-D, got shapes {q.shape}, {k.shape}, {v.shape}"
    (B, H, T, D), (Hkv, S) = q.shape, k.shape[1:3]
    assert k.shape == (B, Hkv, S, D) and v.shape[:3] == (B, Hkv, S) and Hkv > 0 \
        and H % Hkv == 0, (f"{name}: q {q.shape}, k {k.shape}, v {v.shape} do not fit "
                           "q (B, H, T, D), k (B, Hkv, S, D), v (B, Hkv, S, Dv), H % Hkv == 0")
    if bias is None:
        bias, has_bias = _NO_BIAS[q.dtype], False
    else:
        assert bias.ndim == 4 and all(
            n in (1, full) for n, full in zip(bias.shape, (B, H, T, S), strict=True)
        ), f"{name}: bias {bias.shape} does not broadcast to (B, H, T, S) = {(B, H, T, S)}"
        bias, has_bias = np.ascontiguousarray(bias, dtype=q.dtype), True
    if scale is None:
        scale = 1.0 / math.sqrt(D) if D > 0 else 1.0
    assert math.isfinite(scale), f"{name}: scale must be finite, got {scale}"
    assert 0.0 <= dropout_p <= 1.0, f"{name}: dropout_p must be in [0, 1], got {dropout_p}"
    assert 0 <= int(seed) < 2**64, f"{name}: seed must be in [0, 2**64), got {seed}"
    assert window_size is None or window_size >= 1, \
        f"{name}: window_size must be None or >= 1, got {window_size}"
    band_lo, band_hi = _band(bool(is_causal), window_size, T, S)
    arrays = _laid_out(q), _laid_out(k, v)
    options = (bias, has_bias, band_lo, band_hi, float(scale), float(dropout_p), np.uint64(seed),
               _BLOCK_Q, _BLOCK_K, _TILE_COLUMNS[q.dtype])
    return arrays, options


def attention_forward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    bias: np.ndarray | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
    seed: int = 0,
    window_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Fused attention forward: ``o = (softmax(scale · q kᵀ + bias) ⊙ z) v`` and its ``lse``.

    Parameters
    ----------
    q, k, v : np.ndarray
        ``(B, H, T, D)``, ``(B, Hkv, S, D)``, ``(B, Hkv, S, Dv)``, one float dtype, with
        ``H % Hkv == 0``: query head ``h`` reads key/value head ``h // (H // Hkv)``.
    bias : np.ndarray, optional
        Additive float mask, 4-D, each size 1 (broadcast) or equal to ``(B, H, T, S)``;
        ``-inf`` forbids attending.
    is_causal : bool
        Query ``i`` attends key ``j`` only if ``j <= i`` (top-left aligned, also for T != S).
    scale : float, optional
        Score scale; ``1 / sqrt(D)`` when None.
    dropout_p : float
        Probability of dropping a weight; kept weights are scaled by ``1 / (1 − p)``.
    seed : int
        Key of the counter-based dropout mask (see ``counter_rng``; weight ``(b, h, i, j)``
        of query head ``h``); the backward must get the same seed.
    window_size : int, optional
        Sliding window ``w >= 1``: query ``i`` attends key ``j`` only if ``i − w < j <= i``
        (with ``is_causal``) or ``|i − j| < w`` (without).

    Returns
    -------
    out : np.ndarray
        ``(B, H, T, Dv)``; zero for fully masked rows. Its memory is laid out
        ``(B, T, H, Dv)`` (see "Two memory layouts" above): ``out.transpose(0, 2, 1, 3)`` is
        contiguous, so merging the heads back into ``(B, T, H·Dv)`` copies nothing.
    lse : np.ndarray
        ``(B, H, T)``, ``log Σ_j e^(s_ij)`` before dropout; ``-inf`` for fully masked rows.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q = rng.standard_normal((1, 4, 5, 3))
    >>> k, v = (rng.standard_normal((1, 2, 5, 3)) for _ in range(2))  # 2 key/value heads
    >>> out, lse = attention_forward(q, k, v, is_causal=True, window_size=2)
    >>> ref_out, ref_lse = attention_forward_numpy(q, k, v, is_causal=True, window_size=2)
    >>> bool(np.allclose(out, ref_out) and np.allclose(lse, ref_lse))
    True
    """
    ((q_rows, q_c0, q_tokens), (k_rows, v_rows, k_c0, v_c0, kv_tokens)), options = \
        _kernel_options("attention_forward", q, k, v, bias, is_causal, scale, dropout_p, seed,
                        window_size)
    (B, H, T, D), (Hkv, S), Dv = q.shape, k.shape[1:3], v.shape[3]
    out = np.empty((B, T, H, Dv), q.dtype)
    lse = np.empty((B, H, T), q.dtype)
    n_tasks = B * H * -(-T // _BLOCK_Q)
    parallel = _parallel(n_tasks, B * H * T * S * (D + Dv))
    run_tasks(_forward_block, n_tasks, q_rows, k_rows, v_rows, q_c0, k_c0, v_c0, q_tokens,
              kv_tokens, np.int64(D), np.int64(Hkv), *options, out, lse, parallel=parallel)
    return out.transpose(0, 2, 1, 3), lse


def attention_backward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    out: np.ndarray,
    lse: np.ndarray,
    dout: np.ndarray,
    bias: np.ndarray | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
    seed: int = 0,
    window_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fused attention backward from the saved ``out`` and ``lse``: returns ``(dq, dk, dv)``.

    With ``p = e^(s − lse)``, ``z`` the dropout factor and ``δ_i = dout_i · out_i``:
    ``dv = (p⊙z)ᵀ dout``, ``ds = p ⊙ ((dout vᵀ) ⊙ z − δ)``, ``dq = scale · ds k``,
    ``dk = scale · dsᵀ q`` (the module docstring derives ``δ``); ``dk`` and ``dv`` have the
    shapes of ``k`` and ``v``, each key/value head summing the gradients of its query heads,
    laid out token-major in memory like ``out``; when ``q``, ``k``, ``v`` are the pieces of one
    packed projection, their gradients are the pieces of one array laid out as it is
    (:func:`_packed_columns`). The other arguments must be those given to
    :func:`attention_forward`.
    """
    name = "attention_backward"
    ((q_rows, q_c0, q_tokens), (k_rows, v_rows, k_c0, v_c0, kv_tokens)), options = \
        _kernel_options(name, q, k, v, bias, is_causal, scale, dropout_p, seed, window_size)
    (B, H, T, D), (Hkv, S), Dv = q.shape, k.shape[1:3], v.shape[3]
    for label, x, shape in (("out", out, (B, H, T, Dv)), ("dout", dout, (B, H, T, Dv)),
                            ("lse", lse, (B, H, T))):
        assert x.shape == shape and x.dtype == q.dtype, \
            f"{name}: {label} has shape {x.shape} and dtype {x.dtype}; expected {shape}, {q.dtype}"
    out = np.ascontiguousarray(out.transpose(0, 2, 1, 3))  # (B, T, H, Dv), as written
    dout_rows, dout_c0, dout_tokens = _laid_out(dout)
    lse = np.ascontiguousarray(lse)
    heads, sizes = (H, Hkv, Hkv), (D, D, Dv)
    columns = None
    if q_tokens and kv_tokens:
        columns = _packed_columns((q, k, v), (q_rows, k_rows, v_rows), heads, sizes)
    if columns is None:  # one (B, L, heads, d) array per gradient
        grads = [np.empty((B, n, h, d), q.dtype) for n, h, d in zip((T, S, S), heads, sizes)]
        first_heads = (_ZERO,) * 3
    else:  # one buffer laid out as q, k, v are, each gradient in its input's columns
        rows = np.empty(q_rows.shape, q.dtype)  # (B, T, P)
        grads = [rows.reshape(B, T, -1, d) for d in sizes]  # P / d heads of d values
        first_heads = tuple(np.int64(c0 // d) for c0, d in zip(columns, sizes))
    parallel = _parallel(B * Hkv, B * H * T * S * (D + Dv))
    run_tasks(_backward_kv_head, B * Hkv, q_rows, k_rows, v_rows, q_c0, k_c0, v_c0, q_tokens,
              kv_tokens, np.int64(D), np.int64(Hkv), out, lse, dout_rows, dout_c0, dout_tokens,
              *options, *grads, *first_heads, parallel=parallel)
    return tuple(x[:, :, h0 : h0 + h].transpose(0, 2, 1, 3)  # (B, heads, L, d) views
                 for x, h0, h in zip(grads, first_heads, heads, strict=True))


def _packed_columns(pieces: tuple[np.ndarray, ...], rows: tuple[np.ndarray, ...],
                    heads: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The columns of ``q``, ``k``, ``v`` in a row of one buffer, when their token ``rows`` are
    that buffer's and they fill each row side by side (nanoGPT's ``q, k, v = qkv.split(C,
    dim=2)``), each starting at a multiple of its head size; else None.

    The gradients are then written into one buffer of the same layout: ``dq``, ``dk``, ``dv``
    are the pieces of the gradient of ``qkv``, and the split's backward takes that buffer as it
    is instead of concatenating copies (:class:`~tinyattn.ops.index.Split`). The columns come
    from the pieces' addresses (the rows of an aligned buffer may start a few values before
    the memory, see :func:`_token_rows`).
    """
    width = rows[0].shape[2]
    if not rows[0].shape == rows[1].shape == rows[2].shape or rows[0].size == 0 or \
            any(d == 0 or width % d for d in sizes):
        return None
    addresses = [x.__array_interface__["data"][0] for x in pieces]
    offsets = [address - min(addresses) for address in addresses]
    if any(offset % pieces[0].itemsize for offset in offsets):
        return None
    columns = [offset // pieces[0].itemsize for offset in offsets]
    spans = sorted((c0, h * d) for c0, h, d in zip(columns, heads, sizes))
    ends = [c0 + span for c0, span in spans]
    if spans[0][0] != 0 or ends[-1] != width or \
            any(end != c0 for end, (c0, _) in zip(ends, spans[1:])) or \
            any(c0 % d for c0, d in zip(columns, sizes)):
        return None
    return tuple(columns)
