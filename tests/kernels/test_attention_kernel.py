"""Fused attention kernels against their numpy twins, finite differences and PyTorch."""


import numba
import numpy as np
import pytest

from tinyattn.kernels import attention
from tinyattn.kernels.attention import attention_backward, attention_forward
from tinyattn.kernels.attention_reference import (
    attention_backward_numpy,
    attention_forward_numpy,
)
from tinyattn.kernels.counter_rng import dropout_keep_mask

TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}
BQ, BK = attention._BLOCK_Q, attention._BLOCK_K


def _inputs(B, H, T, S, D, Dv, dtype, seed=0):
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((B, H, n, D)).astype(dtype) for n in (T, S))
    v = rng.standard_normal((B, H, S, Dv)).astype(dtype)
    dout = rng.standard_normal((B, H, T, Dv)).astype(dtype)
    return q, k, v, dout


def _fused(q, k, v, dout, **options):
    out, lse = attention_forward(q, k, v, **options)
    return (out, lse, *attention_backward(q, k, v, out, lse, dout, **options))


def _twin(q, k, v, dout, **options):
    out, lse = attention_forward_numpy(q, k, v, **options)
    return (out, lse, *attention_backward_numpy(q, k, v, out, lse, dout, **options))


def _assert_matches_twin(q, k, v, dout, **options):
    ours, twins = _fused(q, k, v, dout, **options), _twin(q, k, v, dout, **options)
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), ours, twins, strict=True):
        assert a.shape == b.shape and a.dtype == q.dtype, name
        np.testing.assert_allclose(a, b, err_msg=name, **TOL[q.dtype.type])
    return ours


CASES = {  # name: (B, H, T, S, D, Dv, is_causal)
    "no_mask": (2, 3, 17, 17, 8, 8, False),
    "causal_square": (2, 2, 65, 65, 16, 16, True),
    "causal_fewer_queries": (1, 2, 3, 17, 5, 5, True),
    "causal_more_queries": (1, 2, 130, 70, 8, 8, True),
    "sizes_one": (1, 1, 1, 1, 1, 1, True),
    "dv_differs_from_d": (2, 1, 17, 33, 65, 3, False),
    "block_edges_minus_one": (1, 2, BQ - 1, BK - 1, 4, 4, True),
    "block_edges_plus_one": (1, 1, BQ + 1, BK + 1, 3, 5, True),
    "several_blocks_noncausal": (1, 1, BQ + 3, 2 * BK + 1, 7, 6, False),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_and_backward_match_numpy_twin(case, dtype):
    B, H, T, S, D, Dv, is_causal = CASES[case]
    _assert_matches_twin(*_inputs(B, H, T, S, D, Dv, dtype), is_causal=is_causal)


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


@pytest.mark.parametrize("bias_shape", [(2, 3, 13, 21), (1, 1, 13, 21), (2, 1, 1, 21),
                                        (1, 3, 13, 1)])
def test_float_bias_and_its_broadcast_shapes(bias_shape):
    q, k, v, dout = _inputs(2, 3, 13, 21, 5, 4, np.float64)
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


def test_different_seeds_give_different_dropout():
    q, k, v, _ = _inputs(1, 1, 8, 8, 4, 4, np.float64)
    first = attention_forward(q, k, v, dropout_p=0.5, seed=1)[0]
    second = attention_forward(q, k, v, dropout_p=0.5, seed=2)[0]
    assert not np.allclose(first, second)


def test_dropout_of_one_drops_everything():
    q, k, v, dout = _inputs(1, 2, 5, 6, 3, 3, np.float64)
    out, lse, dq, dk, dv = _assert_matches_twin(q, k, v, dout, dropout_p=1.0)
    assert (out == 0).all() and (dq == 0).all() and (dk == 0).all() and (dv == 0).all()


def test_backward_matches_central_differences_with_dropout_bias_and_causal_mask():
    rng = np.random.default_rng(5)
    q, k, v, dout = _inputs(1, 2, 6, 7, 3, 4, np.float64, seed=6)
    bias = rng.standard_normal((1, 1, 6, 7))
    options = dict(bias=bias, is_causal=True, dropout_p=0.35, seed=123)
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


@pytest.mark.parametrize("case", ["causal", "bool_mask", "float_mask"])
def test_matches_torch_scaled_dot_product_attention_in_float64(case):
    torch = pytest.importorskip("torch")
    q, k, v, dout = _inputs(2, 3, 21, 21 if case == "causal" else 30, 8, 5, np.float64)
    rng = np.random.default_rng(7)
    mask = None
    bias = None
    if case == "bool_mask":
        mask = rng.random((2, 1, 21, 30)) < 0.7
        mask[..., 0] = True
        bias = np.where(mask, 0.0, -np.inf)
    elif case == "float_mask":
        mask = rng.standard_normal((1, 3, 21, 30))
        bias = mask
    is_causal = case == "causal"
    out, lse, dq, dk, dv = _fused(q, k, v, dout, bias=bias, is_causal=is_causal)
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    t_mask = None if mask is None else torch.tensor(mask)
    t_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=t_mask,
                                                             is_causal=is_causal)
    t_out.backward(torch.tensor(dout))
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    for ours, theirs in ((dq, tq), (dk, tk), (dv, tv)):
        np.testing.assert_allclose(ours, theirs.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_results_are_bitwise_identical_across_runs_and_thread_counts():
    q, k, v, dout = _inputs(2, 3, BQ + 5, BQ + 5, 8, 8, np.float32)
    options = dict(is_causal=True, dropout_p=0.2, seed=9)
    first = _fused(q, k, v, dout, **options)
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        single = _fused(q, k, v, dout, **options)
    finally:
        numba.set_num_threads(previous)
    again = _fused(q, k, v, dout, **options)
    for a, b, c in zip(first, single, again, strict=True):
        assert np.array_equal(a, b, equal_nan=True) and np.array_equal(a, c, equal_nan=True)


@pytest.mark.parametrize("dropout_p", [0.0, 0.3])
def test_serial_and_parallel_paths_agree_bitwise(dropout_p):
    q, k, v, dout = _inputs(2, 3, 40, 33, 8, 5, np.float32)
    bias = np.random.default_rng(8).standard_normal((2, 1, 40, 33)).astype(np.float32)
    out, lse = attention_forward(q, k, v, bias=bias, is_causal=True, dropout_p=dropout_p, seed=4)
    options = (bias, True, True, 0.25, dropout_p, np.uint64(4), BQ, BK)
    results = []
    for parallel in (False, True):
        forward = np.empty_like(out), np.empty_like(lse)
        attention._attention_forward_kernel(q, k, v, *options, *forward, parallel)
        grads = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        attention._attention_backward_kernel(q, k, v, out, lse, dout, *options, *grads, parallel)
        results.append((*forward, *grads))
    for serial, threaded in zip(*results, strict=True):
        np.testing.assert_array_equal(serial, threaded)
    assert not attention._parallel(q[:1, :1], k[:1, :1], 5)
    assert attention._parallel(np.empty((16, 4, 64, 32)), np.empty((16, 4, 64, 32)), 32)


def test_non_contiguous_inputs_are_accepted():
    q, k, v, dout = _inputs(2, 4, 8, 8, 4, 4, np.float64)
    q_view = np.swapaxes(np.ascontiguousarray(np.swapaxes(q, 1, 2)), 1, 2)  # (B, H, T, D)
    assert not q_view.flags.c_contiguous
    _assert_matches_twin(q_view, k, v, dout, is_causal=True)


def test_bad_inputs_raise_before_any_kernel_runs():
    q, k, v, dout = _inputs(2, 3, 5, 7, 4, 6, np.float64)
    with pytest.raises(ValueError, match=r"attention_forward: q \(2, 3, 5, 4\), k \(2, 3, 7, 3\)"):
        attention_forward(q, k[..., :3], v)
    with pytest.raises(ValueError, match="attention_forward.*v"):
        attention_forward(q, k, v[:, :, :6])
    with pytest.raises(ValueError, match="attention_forward: q must have 4 dimensions"):
        attention_forward(q[0], k, v)
    with pytest.raises(TypeError, match="attention_forward: q, k, v must share one dtype"):
        attention_forward(q.astype(np.float32), k, v)
    with pytest.raises(ValueError, match=r"bias of shape \(2, 3, 5, 2\) does not broadcast"):
        attention_forward(q, k, v, bias=np.zeros((2, 3, 5, 2)))
    with pytest.raises(ValueError, match="dropout_p must be in"):
        attention_forward(q, k, v, dropout_p=1.5)
    with pytest.raises(ValueError, match="seed must be in"):
        attention_forward(q, k, v, seed=-1)
    out, lse = attention_forward(q, k, v)
    with pytest.raises(ValueError, match=r"attention_backward: lse has shape \(2, 3, 4\)"):
        attention_backward(q, k, v, out, lse[..., :4], dout)
    with pytest.raises(ValueError, match=r"attention_backward: dout has shape"):
        attention_backward(q, k, v, out, lse, dout[..., :5])
