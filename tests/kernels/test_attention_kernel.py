"""Fused attention kernels against their numpy twins, finite differences and PyTorch.

The twins are themselves checked against independent formulas: the grouped-query twin against
the plain twin on explicitly repeated keys and values, the window twin against the plain twin
with the band given as a −inf bias.
"""

import numpy as np
import pytest
from kernel_helpers import numba_threads

from tinyattn.kernels import attention
from tinyattn.kernels.attention import attention_backward, attention_forward
from tinyattn.kernels.attention_reference import (
    attention_backward_numpy,
    attention_forward_numpy,
)
from tinyattn.kernels.counter_rng import dropout_keep_mask
from tinyattn.kernels.simd import TILE_ROWS, tile_columns

TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}
BQ, BK = attention._BLOCK_Q, attention._BLOCK_K


def _inputs(B, H, T, S, D, Dv, dtype, seed=0, Hkv=None):
    """Random ``q (B, H, T, D)``, ``k (B, Hkv, S, D)``, ``v (B, Hkv, S, Dv)``, ``dout``."""
    Hkv = H if Hkv is None else Hkv
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, T, D)).astype(dtype)
    k = rng.standard_normal((B, Hkv, S, D)).astype(dtype)
    v = rng.standard_normal((B, Hkv, S, Dv)).astype(dtype)
    dout = rng.standard_normal((B, H, T, Dv)).astype(dtype)
    return q, k, v, dout


def _fused(q, k, v, dout, **options):
    out, lse = attention_forward(q, k, v, **options)
    return (out, lse, *attention_backward(q, k, v, out, lse, dout, **options))


def _twin(q, k, v, dout, **options):
    out, lse = attention_forward_numpy(q, k, v, **options)
    return (out, lse, *attention_backward_numpy(q, k, v, out, lse, dout, **options))


def _assert_close(ours, theirs, dtype):
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), ours, theirs, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, name
        np.testing.assert_allclose(a, b, err_msg=name, **TOL[dtype])


def _assert_matches_twin(q, k, v, dout, **options):
    ours = _fused(q, k, v, dout, **options)
    _assert_close(ours, _twin(q, k, v, dout, **options), q.dtype.type)
    assert all(x.dtype == q.dtype for x in ours)
    return ours


def _band_bias(T, S, window, is_causal, dtype):
    """The mask of a (causal) sliding window as a −inf bias ``(1, 1, T, S)``."""
    offset = np.arange(T)[:, None] - np.arange(S)[None, :]  # i − j
    allowed = np.abs(offset) < window
    if is_causal:
        allowed &= offset >= 0
    return np.where(allowed, 0.0, -np.inf).astype(dtype)[None, None]


TC = tile_columns(np.float32)
CASES = {  # name: (B, H, Hkv, T, S, D, Dv, is_causal, window_size)
    "no_mask": (2, 3, 3, 17, 17, 8, 8, False, None),
    "causal_square": (2, 2, 2, 65, 65, 16, 16, True, None),
    "causal_fewer_queries": (1, 2, 2, 3, 17, 5, 5, True, None),
    "causal_more_queries": (1, 2, 2, 130, 70, 8, 8, True, None),
    "sizes_one": (1, 1, 1, 1, 1, 1, 1, True, None),
    "dv_differs_from_d": (2, 1, 1, 17, 33, 65, 3, False, None),
    "block_edges_minus_one": (1, 2, 2, BQ - 1, BK - 1, 4, 4, True, None),
    "block_edges_plus_one": (1, 1, 1, BQ + 1, BK + 1, 3, 5, True, None),
    "several_blocks_noncausal": (1, 1, 1, BQ + 3, 2 * BK + 1, 7, 6, False, None),
    "tile_edges": (1, 2, 2, TC + 1, TILE_ROWS + 1, TC + 1, TC - 1, True, None),
    "multi_query": (2, 4, 1, 37, 41, 8, 6, True, None),
    "grouped_query": (2, 6, 2, 70, 70, 9, 7, False, None),
    "grouped_query_long": (1, 4, 2, BQ + 40, BQ + 40, 16, 16, True, None),
    "window_one": (1, 2, 2, 40, 40, 8, 8, True, 1),
    "window_one_noncausal": (1, 2, 2, 40, 33, 8, 8, False, 1),
    "window_small": (2, 2, 1, 2 * BQ + 7, 2 * BQ + 7, 8, 5, True, 5),
    "window_small_noncausal": (1, 4, 2, 2 * BQ + 7, BQ + 3, 6, 8, False, 9),
    "window_across_blocks": (1, 2, 2, 3 * BK + 5, 3 * BK + 5, 8, 8, True, BK + 3),
    "window_at_least_t": (1, 2, 2, 50, 60, 8, 8, True, 60),
    "window_at_least_t_noncausal": (1, 2, 1, 50, 60, 8, 8, False, 200),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_and_backward_match_numpy_twin(case, dtype):
    B, H, Hkv, T, S, D, Dv, is_causal, window = CASES[case]
    q, k, v, dout = _inputs(B, H, T, S, D, Dv, dtype, Hkv=Hkv)
    _assert_matches_twin(q, k, v, dout, is_causal=is_causal, window_size=window)


@pytest.mark.parametrize("sizes", [(0, 2, 1, 5, 4, 3, 3), (1, 2, 1, 0, 5, 3, 3),
                                   (1, 2, 1, 5, 0, 3, 3), (1, 2, 2, 5, 4, 0, 3),
                                   (1, 2, 2, 5, 4, 3, 0)])
def test_empty_sizes_match_the_twin(sizes):
    B, H, Hkv, T, S, D, Dv = sizes
    q, k, v, dout = _inputs(B, H, T, S, D, Dv, np.float64, Hkv=Hkv)
    out, lse, *_ = _assert_matches_twin(q, k, v, dout, is_causal=True, window_size=2)
    if S == 0:  # no key at all: every row is fully masked
        assert (out == 0).all() and np.isneginf(lse).all()


@pytest.mark.parametrize("Hkv", [1, 2, 6])
def test_grouped_twin_is_the_plain_twin_on_repeated_heads_with_summed_grads(Hkv):
    q, k, v, dout = _inputs(2, 6, 11, 13, 4, 3, np.float64, Hkv=Hkv)
    options = dict(is_causal=True, dropout_p=0.3, seed=17)
    k_rep, v_rep = (np.repeat(x, 6 // Hkv, axis=1) for x in (k, v))  # (B, H, S, D|Dv)
    out, lse, dq, dk, dv = _twin(q, k, v, dout, **options)
    plain = _twin(q, k_rep, v_rep, dout, **options)
    np.testing.assert_allclose(out, plain[0], rtol=1e-12)
    np.testing.assert_allclose(dq, plain[2], rtol=1e-12)
    for grad, plain_grad in ((dk, plain[3]), (dv, plain[4])):
        summed = plain_grad.reshape(2, Hkv, 6 // Hkv, *plain_grad.shape[2:]).sum(axis=2)
        np.testing.assert_allclose(grad, summed, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("window", [1, 4, 30])
def test_window_twin_is_the_plain_twin_with_the_band_as_bias(window, is_causal):
    q, k, v, dout = _inputs(1, 2, 21, 17, 4, 3, np.float64)
    bias = _band_bias(21, 17, window, is_causal, np.float64)
    windowed = _twin(q, k, v, dout, is_causal=is_causal, window_size=window)
    banded = _twin(q, k, v, dout, bias=bias)
    _assert_close(windowed, banded, np.float64)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_grouped_heads_read_the_same_keys_as_repeated_heads_in_the_kernel(dtype):
    """GQA is repeated K/V: the outputs agree bitwise, dk/dv are the sums over each group."""
    q, k, v, dout = _inputs(2, 4, 45, 45, 8, 8, dtype, Hkv=2)
    options = dict(is_causal=True, window_size=12, dropout_p=0.25, seed=3)
    k_rep, v_rep = (np.repeat(x, 2, axis=1) for x in (k, v))
    grouped = _fused(q, k, v, dout, **options)
    repeated = _fused(q, k_rep, v_rep, dout, **options)
    for a, b in zip(grouped[:3], repeated[:3], strict=True):
        np.testing.assert_array_equal(a, b)
    for grad, per_head in zip(grouped[3:], repeated[3:], strict=True):
        np.testing.assert_allclose(grad, per_head.reshape(2, 2, 2, 45, 8).sum(axis=2),
                                   **TOL[dtype])


def test_window_covering_every_key_is_no_window():
    q, k, v, dout = _inputs(2, 2, 70, 50, 8, 8, np.float32)
    for is_causal in (False, True):
        plain = _fused(q, k, v, dout, is_causal=is_causal)
        wide = _fused(q, k, v, dout, is_causal=is_causal, window_size=120)
        for a, b in zip(plain, wide, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("is_causal", [False, True])
def test_keys_far_outside_the_window_are_never_read(is_causal):
    """NaN keys and values far outside a query's window leave its results untouched (0 · NaN
    would be NaN had their blocks been visited)."""
    q, k, v, dout = _inputs(1, 2, 600, 600, 8, 8, np.float64)
    window, poisoned = 10, slice(300, 320)
    k_nan, v_nan = k.copy(), v.copy()
    k_nan[:, :, poisoned] = np.nan
    v_nan[:, :, poisoned] = np.nan
    options = dict(is_causal=is_causal, window_size=window)
    clean = _fused(q, k, v, dout, **options)
    out, lse, dq, dk, dv = _fused(q, k_nan, v_nan, dout, **options)
    far = np.r_[: 300 - 2 * BK - window, 320 + 2 * BK + window : 600]  # queries and keys
    for ours, theirs in ((out, clean[0]), (lse, clean[1]), (dq, clean[2])):
        np.testing.assert_array_equal(ours[:, :, far], theirs[:, :, far])
    for ours, theirs in ((dk, clean[3]), (dv, clean[4])):
        np.testing.assert_array_equal(ours[:, :, far], theirs[:, :, far])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_window_causal_grouped_dropout_and_bias_together(dtype):
    q, k, v, dout = _inputs(2, 6, BQ + 19, BQ + 5, 12, 10, dtype, seed=4, Hkv=3)
    bias = np.random.default_rng(5).standard_normal((2, 6, 1, BQ + 5)).astype(dtype)
    _assert_matches_twin(q, k, v, dout, bias=bias, is_causal=True, window_size=23,
                         dropout_p=0.2, seed=99)


def test_explicit_scale_is_used():
    q, k, v, dout = _inputs(1, 2, 9, 11, 4, 4, np.float64)
    ours = _assert_matches_twin(q, k, v, dout, scale=0.3)
    default = attention_forward(q, k, v)[0]
    assert not np.allclose(ours[0], default)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_boolean_mask_converted_to_bias(dtype):
    q, k, v, dout = _inputs(2, 2, 19, 23, 6, 6, dtype)
    allowed = np.random.default_rng(3).random((2, 2, 19, 23)) < 0.6
    allowed[..., 0] = True  # every query keeps one key
    bias = np.where(allowed, 0.0, -np.inf).astype(dtype)
    out = _assert_matches_twin(q, k, v, dout, bias=bias)[0]
    # a masked key has no influence: changing its value leaves the output unchanged
    v_changed = v.copy()
    v_changed[0, 0, 5] += 100.0
    blocked = ~allowed[0, 0, :, 5]
    changed = attention_forward(q, k, v_changed, bias=bias)[0]
    np.testing.assert_array_equal(changed[0, 0][blocked], out[0, 0][blocked])


@pytest.mark.parametrize("bias_shape", [(2, 4, 13, 21), (1, 1, 13, 21), (2, 1, 1, 21),
                                        (1, 4, 13, 1)])
@pytest.mark.parametrize("Hkv", [1, 4])
def test_float_bias_and_its_broadcast_shapes(bias_shape, Hkv):
    q, k, v, dout = _inputs(2, 4, 13, 21, 5, 4, np.float64, Hkv=Hkv)
    bias = np.random.default_rng(4).standard_normal(bias_shape)
    _assert_matches_twin(q, k, v, dout, bias=bias, is_causal=True)


def test_key_padding_mask_as_bias():
    q, k, v, dout = _inputs(3, 2, 16, 16, 8, 8, np.float64)
    lengths = np.array([16, 9, 1])
    padding = np.arange(16)[None, :] >= lengths[:, None]  # (B, S), True = padded key
    bias = np.where(padding, -np.inf, 0.0)[:, None, None, :]  # (B, 1, 1, S)
    out, lse, dq, dk, dv = _assert_matches_twin(q, k, v, dout, bias=bias)
    # padded keys get exactly zero gradient
    assert (dk[1, :, 9:] == 0).all() and (dv[1, :, 9:] == 0).all()
    assert (dk[2, :, 1:] == 0).all() and (dv[2, :, 1:] == 0).all()


@pytest.mark.parametrize("dropout_p", [0.0, 0.4])
def test_fully_masked_rows_give_zero_output_and_finite_gradients(dropout_p):
    q, k, v, dout = _inputs(2, 2, 9, 12, 4, 4, np.float64)
    bias = np.zeros((2, 1, 9, 12))
    bias[0, :, 3] = -np.inf  # query 3 of batch 0 sees no key
    bias[1] = -np.inf  # batch 1 sees nothing at all
    out, lse, dq, dk, dv = _assert_matches_twin(q, k, v, dout, bias=bias, is_causal=True,
                                                dropout_p=dropout_p, seed=11)
    assert (out[0, :, 3] == 0).all() and (out[1] == 0).all()
    assert np.isneginf(lse[0, :, 3]).all() and np.isneginf(lse[1]).all()
    for grad in (dq, dk, dv):
        assert np.isfinite(grad).all()
    assert (dq[0, :, 3] == 0).all() and (dq[1] == 0).all()
    assert (dk[1] == 0).all() and (dv[1] == 0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_nan_score_makes_its_row_nan_not_zero(dtype):
    """NaN is not a mask: the rows that meet a NaN key are NaN (as numpy's twin and PyTorch
    give), the rows that do not (causal: queries before the key) stay finite."""
    q, k, v, dout = _inputs(1, 2, 6, 6, 4, 4, dtype)
    k[0, 1, 2, 0] = np.nan  # key 2 of head 1
    out, lse = attention_forward(q, k, v, is_causal=True)
    ref_out, ref_lse = attention_forward_numpy(q, k, v, is_causal=True)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref_out))
    np.testing.assert_array_equal(np.isnan(lse), np.isnan(ref_lse))
    assert np.isnan(out[0, 1, 2:]).all() and np.isnan(lse[0, 1, 2:]).all()
    assert np.isfinite(out[0, 1, :2]).all() and np.isfinite(out[0, 0]).all()
    dq, _, _ = attention_backward(q, k, v, out, lse, dout, is_causal=True)
    assert np.isnan(dq[0, 1, 2:]).all() and np.isfinite(dq[0, 0]).all()


@pytest.mark.parametrize("is_causal", [False, True])
def test_rows_with_an_empty_window_give_zero_output_and_gradients(is_causal):
    """With T > S, query i >= S + w − 1 has no key in its window; a −inf bias on the band
    empties a row too."""
    q, k, v, dout = _inputs(1, 4, 30, 12, 4, 4, np.float64, Hkv=2)
    empty = np.arange(30) >= 12 + 3 - 1  # past the last key by a whole window
    bias = None
    if not is_causal:
        bias = np.zeros((1, 1, 30, 12))
        bias[0, 0, 4] = -np.inf
        empty[4] = True
    out, lse, dq, dk, dv = _assert_matches_twin(q, k, v, dout, bias=bias, is_causal=is_causal,
                                                window_size=3, dropout_p=0.3, seed=2)
    assert empty.any() and (out[:, :, empty] == 0).all() and np.isneginf(lse[:, :, empty]).all()
    assert (dq[:, :, empty] == 0).all()
    assert all(np.isfinite(x).all() for x in (out, dq, dk, dv))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("is_causal", [False, True])
def test_dropout_uses_the_counter_rng_mask_of_the_numpy_twin(dtype, is_causal):
    q, k, v, dout = _inputs(2, 2, 70, 90, 6, 5, dtype)
    options = dict(is_causal=is_causal, dropout_p=0.3, seed=2**63 + 5)
    _assert_matches_twin(q, k, v, dout, **options)
    out, _ = attention_forward(q, k, v, **options)
    # the output is the softmax weights times exactly the counter RNG's keep mask / (1 − p)
    scores = (q @ np.swapaxes(k, -1, -2)).astype(np.float64) / np.sqrt(6)  # (B, H, T, S)
    if is_causal:
        scores = np.where(np.tri(70, 90, dtype=bool), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    keep = dropout_keep_mask(options["seed"], 2, 2, 70, 90, 0.3)
    np.testing.assert_allclose(out, (weights * keep / 0.7) @ v, **TOL[dtype])
    assert not np.allclose(out, weights @ v, **TOL[dtype])


def test_grouped_dropout_is_keyed_by_the_query_head():
    """Two query heads sharing a key/value head drop different weights: the keep mask of query
    head h is the counter RNG's (seed, b, h, i, j)."""
    q, k, v, _ = _inputs(1, 2, 30, 30, 4, 4, np.float64, Hkv=1)
    q[:, 1] = q[:, 0]  # identical heads: only the dropout mask can tell them apart
    out, _ = attention_forward(q, k, v, dropout_p=0.5, seed=8)
    assert not np.allclose(out[:, 0], out[:, 1])
    plain = attention_forward_numpy(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1),
                                    dropout_p=0.5, seed=8)[0]
    np.testing.assert_allclose(out, plain, rtol=1e-12)


def test_different_seeds_give_different_dropout():
    q, k, v, _ = _inputs(1, 1, 8, 8, 4, 4, np.float64)
    first = attention_forward(q, k, v, dropout_p=0.5, seed=1)[0]
    second = attention_forward(q, k, v, dropout_p=0.5, seed=2)[0]
    assert not np.allclose(first, second)


def test_dropout_of_one_drops_everything():
    q, k, v, dout = _inputs(1, 2, 5, 6, 3, 3, np.float64)
    out, lse, dq, dk, dv = _assert_matches_twin(q, k, v, dout, dropout_p=1.0)
    assert (out == 0).all() and (dq == 0).all() and (dk == 0).all() and (dv == 0).all()


@pytest.mark.parametrize("Hkv, window", [(2, None), (1, 3), (2, 4)])
def test_backward_matches_central_differences(Hkv, window):
    """Dropout, a bias, the causal mask, grouped heads and a window, in float64."""
    rng = np.random.default_rng(5)
    q, k, v, dout = _inputs(1, 4, 6, 7, 3, 4, np.float64, seed=6, Hkv=Hkv)
    bias = rng.standard_normal((1, 1, 6, 7))
    options = dict(bias=bias, is_causal=True, dropout_p=0.35, seed=123, window_size=window)
    out, lse = attention_forward(q, k, v, **options)
    grads = attention_backward(q, k, v, out, lse, dout, **options)

    def loss(q_, k_, v_):
        return float(np.sum(attention_forward(q_, k_, v_, **options)[0] * dout))

    eps = 1e-6
    for index, grad in enumerate(grads):
        direction = rng.standard_normal(grad.shape)
        plus = [q, k, v]
        minus = [q, k, v]
        plus[index] = plus[index] + eps * direction
        minus[index] = minus[index] - eps * direction
        numeric = (loss(*plus) - loss(*minus)) / (2 * eps)
        assert np.isclose(np.sum(grad * direction), numeric, rtol=1e-6, atol=1e-8), index


@pytest.mark.parametrize("case", ["causal", "bool_mask", "float_mask", "grouped", "window"])
def test_matches_torch_scaled_dot_product_attention_in_float64(case):
    torch = pytest.importorskip("torch")
    Hkv = 1 if case == "grouped" else 3
    q, k, v, dout = _inputs(2, 3, 21, 30 if "mask" in case else 21, 8, 5, np.float64, Hkv=Hkv)
    rng = np.random.default_rng(7)
    mask = None
    bias = None
    window = None
    if case == "bool_mask":
        mask = rng.random((2, 1, 21, 30)) < 0.7
        mask[..., 0] = True
        bias = np.where(mask, 0.0, -np.inf)
    elif case == "float_mask":
        mask = rng.standard_normal((1, 3, 21, 30))
        bias = mask
    elif case == "window":  # torch has no window argument: the band as a boolean mask
        window = 4
        mask = np.isfinite(_band_bias(21, 21, window, True, np.float64))
    is_causal = case in ("causal", "grouped", "window")
    out, lse, dq, dk, dv = _fused(q, k, v, dout, bias=bias, is_causal=is_causal,
                                  window_size=window)
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    t_mask = None if mask is None else torch.tensor(mask)
    t_out = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=t_mask, is_causal=is_causal and t_mask is None,
        enable_gqa=case == "grouped")
    t_out.backward(torch.tensor(dout))
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    for ours, theirs in ((dq, tq), (dk, tk), (dv, tv)):
        np.testing.assert_allclose(ours, theirs.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_results_are_bitwise_identical_across_runs_and_thread_counts():
    q, k, v, dout = _inputs(2, 4, BQ + 5, BQ + 5, 8, 8, np.float32, Hkv=2)
    for options in (dict(is_causal=True, dropout_p=0.2, seed=9),
                    dict(is_causal=True, window_size=40, dropout_p=0.2, seed=9)):
        first = _fused(q, k, v, dout, **options)
        with numba_threads(1):
            single = _fused(q, k, v, dout, **options)
        again = _fused(q, k, v, dout, **options)
        for a, b, c in zip(first, single, again, strict=True):
            assert np.array_equal(a, b, equal_nan=True) and np.array_equal(a, c, equal_nan=True)


@pytest.mark.parametrize("dropout_p", [0.0, 0.3])
def test_serial_and_parallel_paths_agree_bitwise(dropout_p, monkeypatch):
    q, k, v, dout = _inputs(2, 4, 40, 33, 8, 5, np.float32, Hkv=2)
    bias = np.random.default_rng(8).standard_normal((2, 1, 40, 33)).astype(np.float32)
    options = dict(bias=bias, is_causal=True, dropout_p=dropout_p, seed=4, window_size=9)
    choose = attention._parallel
    assert not choose(1, 2**30) and not choose(64, 1000) and choose(64, 64 * 64 * 64 * 64)
    results = []
    for parallel in (False, True):
        monkeypatch.setattr(attention, "_parallel", lambda n_tasks, work, chosen=parallel: chosen)
        out, lse = attention_forward(q, k, v, **options)
        results.append((out, lse, *attention_backward(q, k, v, out, lse, dout, **options)))
    for serial, threaded in zip(*results, strict=True):
        np.testing.assert_array_equal(serial, threaded)


def _owner(x):
    """The array that owns the memory ``x`` views."""
    while x.base is not None:
        x = x.base
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pad", [0, 5, 15])
def test_the_heads_of_a_split_packed_projection_are_read_in_place(dtype, pad):
    """nanoGPT's q, k, v = c_attn(x).split(C, dim=2), each viewed as heads: the kernels read
    the packed rows where they are (no copy) and give the bits of contiguous inputs, also when
    the projection's memory starts ``pad`` values into its buffer (as an aligned buffer does,
    :mod:`tinyattn.kernels.aligned`)."""
    B, T, H, D = 2, 9, 3, 4
    C = H * D
    rng = np.random.default_rng(3)
    buffer = rng.standard_normal(B * T * 3 * C + 15).astype(dtype)
    packed = buffer[pad : pad + B * T * 3 * C].reshape(B * T, 3 * C)  # a Linear's output
    q, k, v = (packed.reshape(B, T, 3 * C)[:, :, i * C:(i + 1) * C]
               .reshape(B, T, H, D).transpose(0, 2, 1, 3) for i in range(3))
    for i, x in enumerate((q, k, v)):
        rows, c0 = attention._token_rows(x)
        assert np.shares_memory(rows, packed) and rows.shape == (B, T, 3 * C)
        assert c0 == i * C or pad  # the column in the projection's row, unless padded
        np.testing.assert_array_equal(
            rows[:, :, c0 : c0 + C].reshape(B, T, H, D).transpose(0, 2, 1, 3), x)
    dout = rng.standard_normal((B, H, T, D)).astype(dtype)
    copies = [np.ascontiguousarray(x) for x in (q, k, v)]
    out, lse = attention_forward(q, k, v, is_causal=True)
    expected_out, expected_lse = attention_forward(*copies, is_causal=True)
    np.testing.assert_array_equal(out, expected_out)
    np.testing.assert_array_equal(lse, expected_lse)
    grads = attention_backward(q, k, v, out, lse, dout, is_causal=True)
    separate = attention_backward(*copies, out, lse, dout, is_causal=True)
    for got, expected in zip(grads, separate, strict=True):
        np.testing.assert_array_equal(got, expected)
    # dq, dk, dv are the pieces of one (B, T, 3C) array, in the columns of q, k, v
    whole = _owner(grads[0])
    assert all(_owner(g) is whole for g in grads)
    assert whole.shape == (B, T, 3 * C) and whole.flags.c_contiguous
    for i, g in enumerate(grads):
        np.testing.assert_array_equal(
            whole[:, :, i * C:(i + 1) * C].reshape(B, T, H, D).transpose(0, 2, 1, 3), g)
    assert not any(np.shares_memory(a, b) for a in separate for b in separate if a is not b)
    # head-major memory is not token rows: it is read as (B·H, L, W) instead
    assert attention._token_rows(np.zeros((1, 2, 3, 4))) is None


@pytest.mark.parametrize("order", [(0, 1, 2), (1, 2, 0)])
def test_packed_gradients_follow_the_projection_s_layout_with_grouped_heads(order):
    """A fused projection of H query heads and Hkv key/value heads, its pieces in any order:
    the gradients fill one array laid out as the projection, bitwise those of copies."""
    B, T, H, Hkv, D = 2, 7, 4, 2, 3
    widths = (H * D, Hkv * D, Hkv * D)
    rng = np.random.default_rng(5)
    packed = rng.standard_normal((B, T, sum(widths)))
    starts = {}
    column = 0
    for piece in order:  # pieces laid out in this order along the row
        starts[piece] = column
        column += widths[piece]
    q, k, v = (packed[:, :, starts[i]:starts[i] + widths[i]]
               .reshape(B, T, -1, D).transpose(0, 2, 1, 3) for i in range(3))
    dout = rng.standard_normal((B, H, T, D))
    out, lse = attention_forward(q, k, v, is_causal=True)
    grads = attention_backward(q, k, v, out, lse, dout, is_causal=True)
    copies = [np.ascontiguousarray(x) for x in (q, k, v)]
    for got, expected in zip(grads, attention_backward(*copies, out, lse, dout, is_causal=True),
                             strict=True):
        np.testing.assert_array_equal(got, expected)
    whole = _owner(grads[0]).reshape(B, T, sum(widths))
    assert all(_owner(g) is _owner(grads[0]) for g in grads)
    for i, g in enumerate(grads):
        np.testing.assert_array_equal(
            whole[:, :, starts[i]:starts[i] + widths[i]].reshape(B, T, -1, D)
            .transpose(0, 2, 1, 3), g)


def test_one_token_major_view_as_q_k_and_v_gets_three_gradients():
    """Self-attention on one projection (q, k and v the same view): the three gradients are
    written apart, not into one buffer, and are those of three copies."""
    B, T, H, D = 2, 6, 2, 4
    rows = np.random.default_rng(7).standard_normal((B, T, H * D))  # a projection's output
    x = rows.reshape(B, T, H, D).transpose(0, 2, 1, 3)
    dout = np.random.default_rng(8).standard_normal((B, H, T, D))
    out, lse = attention_forward(x, x, x, is_causal=True)
    grads = attention_backward(x, x, x, out, lse, dout, is_causal=True)
    copies = [np.ascontiguousarray(x) for _ in range(3)]
    for got, expected in zip(grads, attention_backward(*copies, out, lse, dout, is_causal=True),
                             strict=True):
        np.testing.assert_array_equal(got, expected)


def test_non_contiguous_inputs_are_accepted():
    q, k, v, dout = _inputs(2, 4, 8, 8, 4, 4, np.float64)
    q_view = np.swapaxes(np.ascontiguousarray(np.swapaxes(q, 1, 2)), 1, 2)  # (B, H, T, D)
    assert not q_view.flags.c_contiguous
    _assert_matches_twin(q_view, k, v, dout, is_causal=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_head_major_and_token_major_inputs_give_the_same_bits_and_token_major_outputs(dtype):
    q, k, v, dout = _inputs(2, 4, 9, 7, 5, 6, dtype, Hkv=2)
    options = dict(is_causal=True, dropout_p=0.25, seed=3)

    def token_major(x):  # the same values, laid out (B, T, H, ·) in memory
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)

    head = _fused(q, k, v, dout, **options)
    for layouts in ((1, 1, 1), (1, 0, 1), (0, 1, 0), (1, 1, 0)):  # q, (k and v), dout
        given = [token_major(x) if flag else x for x, flag in zip((q, k, dout), layouts)]
        v_given = token_major(v) if layouts[1] else v
        assert all(x.flags.c_contiguous != bool(flag) for x, flag in zip(given, layouts))
        mixed = _fused(given[0], given[1], v_given, given[2], **options)
        for a, b in zip(head, mixed, strict=True):
            np.testing.assert_array_equal(a, b)
    out, lse, dq, dk, dv = head
    for x in (out, dq, dk, dv):
        assert x.transpose(0, 2, 1, 3).flags.c_contiguous
    reference = attention_forward_numpy(q, k, v, **options)
    np.testing.assert_allclose(out, reference[0], rtol=1e-5, atol=1e-6)  # float32-sized
    mixed_kv = attention_forward(q, token_major(k), v, **options)[0]  # k and v differ: copied
    np.testing.assert_array_equal(mixed_kv, out)


def test_preconditions_are_asserted_before_any_kernel_runs():
    q, k, v, dout = _inputs(2, 4, 5, 7, 4, 6, np.float64, Hkv=2)
    with pytest.raises(AssertionError, match=r"attention_forward: q \(2, 4, 5, 4\), k "):
        attention_forward(q, k[..., :3], v)
    with pytest.raises(AssertionError, match="H % Hkv == 0"):
        attention_forward(q[:, :3], k, v)
    with pytest.raises(AssertionError, match="attention_forward.*v"):
        attention_forward(q, k, v[:, :, :6])
    with pytest.raises(AssertionError, match="attention_forward: q, k, v must be 4-D"):
        attention_forward(q[0], k, v)
    with pytest.raises(AssertionError, match="attention_forward: q, k, v must share one float"):
        attention_forward(q.astype(np.float32), k, v)
    with pytest.raises(AssertionError, match=r"bias \(2, 4, 5, 2\) does not broadcast"):
        attention_forward(q, k, v, bias=np.zeros((2, 4, 5, 2)))
    with pytest.raises(AssertionError, match="dropout_p must be in"):
        attention_forward(q, k, v, dropout_p=1.5)
    with pytest.raises(AssertionError, match="seed must be in"):
        attention_forward(q, k, v, seed=-1)
    with pytest.raises(AssertionError, match="window_size must be None or >= 1, got 0"):
        attention_forward(q, k, v, window_size=0)
    out, lse = attention_forward(q, k, v)
    with pytest.raises(AssertionError, match=r"attention_backward: lse has shape \(2, 4, 4\)"):
        attention_backward(q, k, v, out, lse[..., :4], dout)
    with pytest.raises(AssertionError, match=r"attention_backward: dout has shape"):
        attention_backward(q, k, v, out, lse, dout[..., :5])
