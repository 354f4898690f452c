"""Fused (flash-style) scaled-dot-product attention, forward and hand-derived backward.

Shapes: ``q (B, H, T, D)``, ``k (B, H, S, D)``, ``v (B, H, S, Dv)``; ``bias`` is an additive
float array with 4 dimensions each equal to 1 (broadcast) or to ``B, H, T, S``. For one head::

    s_ij = scale · q_i·k_j + bias_ij          (−inf where masked; causal masks j > i)
    p_ij = e^(s_ij − lse_i),   lse_i = log Σ_j e^(s_ij)
    z_ij = keep_ij / (1 − p_drop)            (inverted dropout; keep from counter_rng)
    o_i  = Σ_j p_ij z_ij v_j

Forward (online softmax). Keys are visited block by block; each query keeps a running max
``m``, a running sum ``l = Σ e^(s−m)`` and an accumulator ``acc = Σ e^(s−m) z v``. A new block
with larger max ``m'`` rescales both by ``α = e^(m−m')`` before adding its terms, so that at the
end ``o = acc / l`` and ``lse = m + log l``. Only ``o`` and ``lse`` are stored: memory is
``O(T·D)`` per head plus one (keys × queries) block, never the full ``(T, S)`` matrix. With
``is_causal``, key blocks that lie entirely above the diagonal are skipped.

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

A fully masked query row (every ``s_ij = −inf``) has ``l = 0``: its output is zero,
``lse = −inf``, its recomputed weights are zero and so are the gradients flowing through it —
never NaN (PyTorch's math path returns NaN there).

Layout and parallelism. Every kernel runs ``prange`` over the ``B·H`` heads (a plain loop
when the work is under ``_PARALLEL_MIN_WORK`` multiply-adds); a head computes
all of its outputs (including the ``dq`` of every key block) sequentially, so nothing is shared
between threads and results are bitwise identical run to run and for any thread count. Inside a
head, blocks are held transposed (keys × queries) so that every inner loop — the five block
products, the running max/sum, the exponentials — runs over contiguous memory and vectorises
without reassociating floating-point sums.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .attention_reference import (  # noqa: F401  (the twins, also reachable from here)
    attention_backward_numpy,
    attention_forward_numpy,
)
from .counter_rng import fold_key, state_to_uniform
from .softmax import fast_exp

# Queries per block (the contiguous, vectorised axis) and keys per block.
_BLOCK_Q = 256
_BLOCK_K = 64
# Below this many multiply-adds (B·H·T·S·(D + Dv)) the heads run serially: waking the thread
# pool then costs more than the work.
_PARALLEL_MIN_WORK = 2**21


@njit(cache=True)
def _matmul_accumulate(c, a, b, c_col0, b_col0, n_cols):
    """``c[r, c_col0 + x] += Σ_t a[r, t] · b[t, b_col0 + x]`` for ``x < n_cols``.

    ``a`` may be any 2-D view (only scalars are read from it); the rows of ``b`` and ``c`` are
    contiguous, so the innermost loop over ``x`` vectorises. Two rows of ``c`` are updated per
    pass (they share the loads of ``b``) and four terms of the sum over ``t`` are added per
    pass, in order, so the rounding is that of the plain loop.
    """
    n_rows, n_inner = a.shape
    n_inner_4 = n_inner - n_inner % 4
    for r in range(0, n_rows, 2):
        pair = r + 1 < n_rows
        c0 = c[r, c_col0 : c_col0 + n_cols]
        c1 = c[r + 1 if pair else r, c_col0 : c_col0 + n_cols]
        for t in range(0, n_inner_4, 4):
            b0 = b[t, b_col0 : b_col0 + n_cols]
            b1 = b[t + 1, b_col0 : b_col0 + n_cols]
            b2 = b[t + 2, b_col0 : b_col0 + n_cols]
            b3 = b[t + 3, b_col0 : b_col0 + n_cols]
            a00, a01, a02, a03 = a[r, t], a[r, t + 1], a[r, t + 2], a[r, t + 3]
            if pair:
                a10, a11, a12, a13 = a[r + 1, t], a[r + 1, t + 1], a[r + 1, t + 2], a[r + 1, t + 3]
                for x in range(n_cols):
                    c0[x] = c0[x] + a00 * b0[x] + a01 * b1[x] + a02 * b2[x] + a03 * b3[x]
                    c1[x] = c1[x] + a10 * b0[x] + a11 * b1[x] + a12 * b2[x] + a13 * b3[x]
            else:
                for x in range(n_cols):
                    c0[x] = c0[x] + a00 * b0[x] + a01 * b1[x] + a02 * b2[x] + a03 * b3[x]
        for t in range(n_inner_4, n_inner):
            b0 = b[t, b_col0 : b_col0 + n_cols]
            a00 = a[r, t]
            for x in range(n_cols):
                c0[x] = c0[x] + a00 * b0[x]
            if pair:
                a10 = a[r + 1, t]
                for x in range(n_cols):
                    c1[x] = c1[x] + a10 * b0[x]


@njit(cache=True)
def _transpose_into(dst, src):
    """``dst[d, i] = src[i, d]`` for a (N, D) source and a (D, N) destination."""
    n_rows, n_cols = src.shape
    for i in range(n_rows):
        for d in range(n_cols):
            dst[d, i] = src[i, d]


@njit(cache=True)
def _scores_block(st, lo, q_t, k_head, bias, has_bias, is_causal, scale, b, h, i0, nq, j0, nk):
    """Fill ``st[:nk, lo:nq]`` with ``s_ij = scale · k_j·q_i + bias_ij`` (−inf where masked).

    ``st`` is (keys × queries): row ``jj`` is key ``j0 + jj``, column ``ii`` query ``i0 + ii``.
    ``q_t`` is the head's queries transposed, ``(D, T)``; ``k_head`` its keys, ``(S, D)``.
    """
    st[:nk, lo:nq] = 0.0
    _matmul_accumulate(st, k_head[j0 : j0 + nk], q_t, lo, i0 + lo, nq - lo)
    bias_b = b if bias.shape[0] > 1 else 0
    bias_h = h if bias.shape[1] > 1 else 0
    query_step = 1 if bias.shape[2] > 1 else 0
    key_step = 1 if bias.shape[3] > 1 else 0
    for jj in range(nk):
        row = st[jj, lo:nq]  # queries i0 + lo ... i0 + nq − 1
        if has_bias:
            bias_col = bias[bias_b, bias_h, :, (j0 + jj) * key_step]
            for x in range(nq - lo):
                row[x] = row[x] * scale + bias_col[(i0 + lo + x) * query_step]
        else:
            for x in range(nq - lo):
                row[x] = row[x] * scale
        if is_causal:
            # query i may attend key j only if j <= i: mask the queries i0 + lo + x < j0 + jj
            row[: max(0, j0 + jj - i0 - lo)] = -np.inf


@njit(cache=True)
def _apply_dropout_block(st, lo, head_state, p, keep_scale, i0, nq, j0, nk):
    """Multiply ``st[:nk, lo:nq]`` by ``z_ij = keep_ij / (1 − p)`` (zero where dropped)."""
    for ii in range(lo, nq):
        query_state = fold_key(head_state, i0 + ii)
        for jj in range(nk):
            if state_to_uniform(fold_key(query_state, j0 + jj)) >= p:
                st[jj, ii] *= keep_scale
            else:
                st[jj, ii] = 0.0


@njit(cache=True)
def _forward_head(q, k, v, bias, has_bias, is_causal, scale, dropout_p, seed, block_q, block_k,
                  out, lse, bh):
    """Forward of head ``bh`` (flattened batch × head index) into ``out`` and ``lse``."""
    n_batch, n_heads, n_queries, d_head = q.shape
    n_keys = k.shape[2]
    d_value = v.shape[3]
    dtype = q.dtype.type
    scale_t = dtype(scale)
    keep_scale = dtype(1.0 / (1.0 - dropout_p)) if dropout_p < 1.0 else dtype(0.0)
    b = bh // n_heads
    h = bh % n_heads
    head_state = fold_key(fold_key(seed, b), h)
    k_head = k[b, h]  # (S, D)
    v_head = v[b, h]  # (S, Dv)
    q_t = np.empty((d_head, n_queries), q.dtype)  # (D, T)
    _transpose_into(q_t, q[b, h])
    st = np.empty((block_k, block_q), q.dtype)  # scores, then weights: (keys, queries)
    acc_t = np.empty((d_value, block_q), q.dtype)  # Σ e^(s−m) z v, transposed: (Dv, queries)
    run_max = np.empty(block_q, q.dtype)  # m
    run_sum = np.empty(block_q, q.dtype)  # l
    new_max = np.empty(block_q, q.dtype)  # m'
    shift = np.empty(block_q, q.dtype)  # m', or 0 while the row is all −inf
    alpha = np.empty(block_q, q.dtype)  # e^(m − m')
    for i0 in range(0, n_queries, block_q):
        nq = min(block_q, n_queries - i0)
        acc_t[:, :nq] = 0.0
        run_max[:nq] = -np.inf
        run_sum[:nq] = 0.0
        key_stop = min(n_keys, i0 + nq) if is_causal else n_keys
        for j0 in range(0, key_stop, block_k):
            nk = min(block_k, key_stop - j0)
            # causal: the queries before j0 see none of these keys; skip their columns
            lo = max(0, j0 - i0) if is_causal else 0
            _scores_block(st, lo, q_t, k_head, bias, has_bias, is_causal, scale_t, b, h,
                          i0, nq, j0, nk)
            # 1-D views of the active columns, so that the loops below vectorise
            n_cols = nq - lo
            block_max, block_shift, block_alpha = new_max[lo:nq], shift[lo:nq], alpha[lo:nq]
            block_run_max, block_run_sum = run_max[lo:nq], run_sum[lo:nq]
            block_max[:] = block_run_max
            for jj in range(nk):
                row = st[jj, lo:nq]
                for x in range(n_cols):
                    if row[x] > block_max[x]:
                        block_max[x] = row[x]
            for x in range(n_cols):
                block_shift[x] = block_max[x] if block_max[x] > -np.inf else 0.0
                block_alpha[x] = fast_exp(block_run_max[x] - block_shift[x])
                block_run_max[x] = block_max[x]
                block_run_sum[x] *= block_alpha[x]
            for jj in range(nk):
                row = st[jj, lo:nq]
                for x in range(n_cols):
                    weight = fast_exp(row[x] - block_shift[x])
                    row[x] = weight
                    block_run_sum[x] += weight
            if dropout_p > 0.0:
                _apply_dropout_block(st, lo, head_state, dropout_p, keep_scale, i0, nq, j0,
                                     nk)
            for e in range(d_value):
                acc_row = acc_t[e, lo:nq]
                for x in range(n_cols):
                    acc_row[x] *= block_alpha[x]
            _matmul_accumulate(acc_t, v_head[j0 : j0 + nk].T, st, lo, lo, n_cols)
        for ii in range(nq):
            i = i0 + ii
            if run_sum[ii] > 0.0:
                inv_sum = dtype(1.0) / run_sum[ii]
                for e in range(d_value):
                    out[b, h, i, e] = acc_t[e, ii] * inv_sum
                lse[b, h, i] = run_max[ii] + math.log(run_sum[ii])
            else:
                out[b, h, i, :] = 0.0
                lse[b, h, i] = -np.inf


@njit(cache=True, parallel=True)
def _attention_forward_kernel(q, k, v, bias, has_bias, is_causal, scale, dropout_p, seed,
                              block_q, block_k, out, lse, parallel):
    n_heads_total = q.shape[0] * q.shape[1]
    if parallel:
        for bh in prange(n_heads_total):
            _forward_head(q, k, v, bias, has_bias, is_causal, scale, dropout_p, seed, block_q,
                          block_k, out, lse, bh)
    else:
        for bh in range(n_heads_total):
            _forward_head(q, k, v, bias, has_bias, is_causal, scale, dropout_p, seed, block_q,
                          block_k, out, lse, bh)


@njit(cache=True)
def _backward_head(q, k, v, out, lse, dout, bias, has_bias, is_causal, scale, dropout_p, seed,
                   block_q, block_k, dq, dk, dv, bh):
    """Backward of head ``bh`` into ``dq``, ``dk``, ``dv``."""
    n_batch, n_heads, n_queries, d_head = q.shape
    n_keys = k.shape[2]
    d_value = v.shape[3]
    dtype = q.dtype.type
    scale_t = dtype(scale)
    keep_scale = dtype(1.0 / (1.0 - dropout_p)) if dropout_p < 1.0 else dtype(0.0)
    b = bh // n_heads
    h = bh % n_heads
    head_state = fold_key(fold_key(seed, b), h)
    q_head = q[b, h]  # (T, D)
    k_head = k[b, h]  # (S, D)
    v_head = v[b, h]  # (S, Dv)
    dout_head = dout[b, h]  # (T, Dv)
    q_t = np.empty((d_head, n_queries), q.dtype)  # (D, T)
    _transpose_into(q_t, q_head)
    dout_t = np.empty((d_value, n_queries), q.dtype)  # (Dv, T)
    _transpose_into(dout_t, dout_head)
    dq_t = np.zeros((d_head, n_queries), q.dtype)  # (D, T)
    # δ_i = dO_i · O_i, and the lse to subtract (+inf for fully masked rows: weight 0)
    delta = np.empty(n_queries, q.dtype)
    lse_safe = np.empty(n_queries, q.dtype)
    for i in range(n_queries):
        total = 0.0
        for e in range(d_value):
            total += dout_head[i, e] * out[b, h, i, e]
        delta[i] = total
        lse_safe[i] = lse[b, h, i] if lse[b, h, i] > -np.inf else np.inf
    st = np.empty((block_k, block_q), q.dtype)  # scores, then weights p: (keys, queries)
    dpt = np.empty((block_k, block_q), q.dtype)  # dL/dp, then dL/ds: (keys, queries)
    p_kept = np.empty((block_k, block_q), q.dtype)  # p ⊙ z: (keys, queries)
    dk_block = np.empty((block_k, d_head), q.dtype)
    dv_block = np.empty((block_k, d_value), q.dtype)
    for j0 in range(0, n_keys, block_k):
        nk = min(block_k, n_keys - j0)
        dk_block[:nk] = 0.0
        dv_block[:nk] = 0.0
        # with a causal mask only queries i >= j0 see this key block
        query_start = j0 if is_causal else 0
        for i0 in range(query_start, n_queries, block_q):
            nq = min(block_q, n_queries - i0)
            _scores_block(st, 0, q_t, k_head, bias, has_bias, is_causal, scale_t, b, h,
                          i0, nq, j0, nk)
            block_lse = lse_safe[i0 : i0 + nq]
            block_delta = delta[i0 : i0 + nq]
            for jj in range(nk):
                row = st[jj, :nq]
                for x in range(nq):
                    row[x] = fast_exp(row[x] - block_lse[x])
            dpt[:nk, :nq] = 0.0
            _matmul_accumulate(dpt, v_head[j0 : j0 + nk], dout_t, 0, i0, nq)
            if dropout_p > 0.0:
                p_kept[:nk, :nq] = st[:nk, :nq]
                _apply_dropout_block(p_kept, 0, head_state, dropout_p, keep_scale,
                                     i0, nq, j0, nk)
                _apply_dropout_block(dpt, 0, head_state, dropout_p, keep_scale,
                                     i0, nq, j0, nk)
                _matmul_accumulate(dv_block, p_kept[:nk, :nq], dout_head[i0 : i0 + nq],
                                   0, 0, d_value)
            else:
                _matmul_accumulate(dv_block, st[:nk, :nq], dout_head[i0 : i0 + nq],
                                   0, 0, d_value)
            for jj in range(nk):
                p_row, dp_row = st[jj, :nq], dpt[jj, :nq]
                for x in range(nq):
                    dp_row[x] = p_row[x] * (dp_row[x] - block_delta[x])
            _matmul_accumulate(dk_block, dpt[:nk, :nq], q_head[i0 : i0 + nq], 0, 0, d_head)
            _matmul_accumulate(dq_t, k_head[j0 : j0 + nk].T, dpt, i0, 0, nq)
        for jj in range(nk):
            for d in range(d_head):
                dk[b, h, j0 + jj, d] = scale_t * dk_block[jj, d]
            for e in range(d_value):
                dv[b, h, j0 + jj, e] = dv_block[jj, e]
    for i in range(n_queries):
        for d in range(d_head):
            dq[b, h, i, d] = scale_t * dq_t[d, i]


@njit(cache=True, parallel=True)
def _attention_backward_kernel(q, k, v, out, lse, dout, bias, has_bias, is_causal, scale,
                               dropout_p, seed, block_q, block_k, dq, dk, dv, parallel):
    n_heads_total = q.shape[0] * q.shape[1]
    if parallel:
        for bh in prange(n_heads_total):
            _backward_head(q, k, v, out, lse, dout, bias, has_bias, is_causal, scale, dropout_p,
                           seed, block_q, block_k, dq, dk, dv, bh)
    else:
        for bh in range(n_heads_total):
            _backward_head(q, k, v, out, lse, dout, bias, has_bias, is_causal, scale, dropout_p,
                           seed, block_q, block_k, dq, dk, dv, bh)


def _parallel(q: np.ndarray, k: np.ndarray, d_value: int) -> bool:
    """Whether to spread the heads over threads: several heads and enough multiply-adds."""
    B, H, T, D = q.shape
    return B * H > 1 and B * H * T * k.shape[2] * (D + d_value) >= _PARALLEL_MIN_WORK


def _check_float_array(name: str, label: str, x: np.ndarray, ndim: int) -> None:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name}: {label} must be a numpy array, got {type(x).__name__}")
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: {label} must be float32 or float64, got {x.dtype}")
    if x.ndim != ndim:
        raise ValueError(f"{name}: {label} must have {ndim} dimensions, got shape {x.shape}")


def _prepare_inputs(name, q, k, v, bias, scale, dropout_p, seed):
    """Validate shapes, dtypes and options; return contiguous arrays and kernel arguments."""
    _check_float_array(name, "q", q, 4)
    _check_float_array(name, "k", k, 4)
    if v is not None:
        _check_float_array(name, "v", v, 4)
    dtypes = {x.dtype for x in (q, k, v) if x is not None}
    if len(dtypes) > 1:
        raise TypeError(f"{name}: q, k, v must share one dtype, got {sorted(map(str, dtypes))}")
    (B, H, T, D), S = q.shape, k.shape[2]
    if k.shape != (B, H, S, D) or (v is not None and v.shape[:3] != (B, H, S)):
        got = f"q {q.shape}, k {k.shape}" + (f", v {v.shape}" if v is not None else "")
        raise ValueError(
            f"{name}: {got} do not fit; expected q (B, H, T, D), k (B, H, S, D), "
            f"v (B, H, S, Dv) with B={B}, H={H}, D={D}, S={S}"
        )
    if bias is None:
        bias_arr, has_bias = np.zeros((1, 1, 1, 1), q.dtype), False
    else:
        _check_float_array(name, "bias", bias, 4)
        if any(n not in (1, full) for n, full in zip(bias.shape, (B, H, T, S), strict=True)):
            raise ValueError(f"{name}: bias of shape {bias.shape} does not broadcast to "
                             f"(B, H, T, S) = {(B, H, T, S)}; each size must be 1 or full")
        bias_arr, has_bias = np.ascontiguousarray(bias, dtype=q.dtype), True
    if scale is None:
        scale = 1.0 / math.sqrt(D) if D > 0 else 1.0
    if not math.isfinite(scale):
        raise ValueError(f"{name}: scale must be finite, got {scale}")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{name}: dropout_p must be in [0, 1], got {dropout_p}")
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"{name}: seed must be in [0, 2**64), got {seed}")
    arrays = tuple(None if x is None else np.ascontiguousarray(x) for x in (q, k, v))
    options = (bias_arr, has_bias, float(scale), float(dropout_p), np.uint64(seed))
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
) -> tuple[np.ndarray, np.ndarray]:
    """Fused attention forward: ``o = (softmax(scale · q kᵀ + bias) ⊙ z) v`` and its ``lse``.

    Parameters
    ----------
    q, k, v : np.ndarray
        ``(B, H, T, D)``, ``(B, H, S, D)``, ``(B, H, S, Dv)``, one float dtype.
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
        Key of the counter-based dropout mask (see ``counter_rng``); the backward must get the
        same seed.

    Returns
    -------
    out : np.ndarray
        ``(B, H, T, Dv)``; zero for fully masked rows.
    lse : np.ndarray
        ``(B, H, T)``, ``log Σ_j e^(s_ij)`` before dropout; ``-inf`` for fully masked rows.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.standard_normal((1, 2, 5, 4)) for _ in range(3))
    >>> out, lse = attention_forward(q, k, v, is_causal=True)
    >>> ref_out, ref_lse = attention_forward_numpy(q, k, v, is_causal=True)
    >>> bool(np.allclose(out, ref_out) and np.allclose(lse, ref_lse))
    True
    """
    (q, k, v), (bias_arr, has_bias, scale, dropout_p, seed) = _prepare_inputs(
        "attention_forward", q, k, v, bias, scale, dropout_p, seed
    )
    B, H, T, _ = q.shape
    out = np.empty((B, H, T, v.shape[3]), q.dtype)
    lse = np.empty((B, H, T), q.dtype)
    _attention_forward_kernel(q, k, v, bias_arr, has_bias, bool(is_causal), scale, dropout_p,
                              seed, _BLOCK_Q, _BLOCK_K, out, lse, _parallel(q, k, v.shape[3]))
    return out, lse


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
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fused attention backward from the saved ``out`` and ``lse``: returns ``(dq, dk, dv)``.

    With ``p = e^(s − lse)``, ``z`` the dropout factor and ``δ_i = dout_i · out_i``:
    ``dv = (p⊙z)ᵀ dout``, ``ds = p ⊙ ((dout vᵀ) ⊙ z − δ)``, ``dq = scale · ds k``,
    ``dk = scale · dsᵀ q`` (the module docstring derives ``δ``). The other arguments must be
    those given to :func:`attention_forward`.
    """
    name = "attention_backward"
    (q, k, v), (bias_arr, has_bias, scale, dropout_p, seed) = _prepare_inputs(
        name, q, k, v, bias, scale, dropout_p, seed
    )
    B, H, T, _ = q.shape
    expected_out = (B, H, T, v.shape[3])
    for label, x, shape in (("out", out, expected_out), ("dout", dout, expected_out),
                            ("lse", lse, (B, H, T))):
        _check_float_array(name, label, x, len(shape))
        if x.shape != shape or x.dtype != q.dtype:
            raise ValueError(f"{name}: {label} has shape {x.shape} and dtype {x.dtype}; "
                             f"expected {shape} and {q.dtype}")
    out, lse, dout = (np.ascontiguousarray(x) for x in (out, lse, dout))
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    _attention_backward_kernel(q, k, v, out, lse, dout, bias_arr, has_bias, bool(is_causal),
                               scale, dropout_p, seed, _BLOCK_Q, _BLOCK_K, dq, dk, dv,
                               _parallel(q, k, v.shape[3]))
    return dq, dk, dv
