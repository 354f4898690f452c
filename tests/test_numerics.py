"""Numerics at the edges: huge logits, fully masked attention rows, constant LayerNorm rows, and
``detect_anomaly`` naming the op that produced a non-finite gradient.

PyTorch defines the expected values wherever it computes the same thing.
"""

from __future__ import annotations

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

F = ta.F
DTYPES = [(np.float32, torch.float32, 1e-6), (np.float64, torch.float64, 1e-12)]
LOGITS = np.array([
    [1e4, -1e4, 0.0, 3.0],
    [-1e4, -1e4, -1e4, -1e4 + 1.0],
    [3e38, -3e38, 3e38, 0.0],
    [-3e38, 1.0, 2.0, -3e38],
])


def _pair(array: np.ndarray, dtype: np.dtype, torch_dtype: torch.dtype):
    ours = ta.tensor(array.astype(dtype), requires_grad=True)
    theirs = torch.tensor(array.astype(dtype), dtype=torch_dtype, requires_grad=True)
    return ours, theirs


def _assert_equal_to_torch(ours: np.ndarray, theirs: torch.Tensor, rtol: float,
                           finite: bool = True) -> None:
    """Equal within ``rtol``; with ``finite`` every value must be finite, otherwise the same
    entries must overflow to the same infinities."""
    expected = theirs.detach().numpy()
    if finite:
        assert np.isfinite(ours).all() and np.isfinite(expected).all()
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(expected))
    np.testing.assert_allclose(ours, expected, rtol=rtol, atol=rtol)


HUGE_LOGIT_CASES = [
    pytest.param(op, rows, np_dtype, torch_dtype, rtol,
                 id=f"{op}-{'3e38' if rows.start == 2 else '1e4'}-{np.dtype(np_dtype).name}")
    for op in ("softmax", "log_softmax")
    for rows in (slice(0, 2), slice(2, 4))
    for np_dtype, torch_dtype, rtol in DTYPES
]


@pytest.mark.parametrize("op, rows, dtype, torch_dtype, rtol", HUGE_LOGIT_CASES)
def test_softmax_of_huge_logits_equals_torch_with_finite_gradients(op, rows, dtype,
                                                                    torch_dtype, rtol):
    """Outputs are finite except log_softmax's -6e38 entries in float32, which overflow to
    -inf in PyTorch too; every gradient is finite."""
    x, tx = _pair(LOGITS[rows], dtype, torch_dtype)
    cotangent = np.random.default_rng(0).standard_normal(x.shape).astype(dtype)
    y = getattr(F, op)(x, dim=-1)
    ty = getattr(torch.nn.functional, op)(tx, dim=-1)
    _assert_equal_to_torch(y.numpy(), ty, rtol, finite=False)
    y.backward(ta.tensor(cotangent))
    ty.backward(torch.tensor(cotangent))
    _assert_equal_to_torch(x.grad.numpy(), tx.grad, rtol)


@pytest.mark.parametrize("dtype, torch_dtype, rtol", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_cross_entropy_of_huge_logits_is_finite_and_equals_torch(reduction, dtype, torch_dtype,
                                                                 rtol):
    """Targets sit on large logits: a target on -3e38 has a true loss of ~6e38, which
    overflows float32 in PyTorch too."""
    target = np.array([0, 3, 2, 2])
    x, tx = _pair(LOGITS, dtype, torch_dtype)
    loss = F.cross_entropy(x, ta.tensor(target), reduction=reduction, label_smoothing=0.0)
    tloss = torch.nn.functional.cross_entropy(tx, torch.tensor(target), reduction=reduction)
    _assert_equal_to_torch(loss.numpy(), tloss, rtol)
    cotangent = np.random.default_rng(1).standard_normal(loss.shape).astype(dtype)
    loss.backward(ta.tensor(cotangent))
    tloss.backward(torch.tensor(cotangent))
    _assert_equal_to_torch(x.grad.numpy(), tx.grad, rtol)


# ---- fully masked attention rows ----------------------------------------------------------------

def _attention_inputs(seed: int):
    rng = np.random.default_rng(seed)
    q, k, v = (ta.tensor(rng.standard_normal(shape), requires_grad=True)
               for shape in [(2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 2)])
    allowed = rng.random((2, 1, 4, 5)) > 0.3  # True = may attend
    allowed[0, 0, 1] = False  # query 1 of batch 0 sees no key
    allowed[1, 0, 3] = False  # query 3 of batch 1 sees no key
    allowed[:, :, 0, 0] = True
    return q, k, v, allowed


@pytest.mark.parametrize("impl", ["composed", "fused"])
def test_fully_masked_query_gets_zero_output_and_finite_gradients(impl):
    q, k, v, allowed = _attention_inputs(0)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=ta.tensor(allowed), impl=impl)
    cotangent = np.random.default_rng(2).standard_normal(out.shape)
    out.backward(ta.tensor(cotangent))
    assert np.isfinite(out.numpy()).all()
    np.testing.assert_array_equal(out.numpy()[0, :, 1], 0.0)
    np.testing.assert_array_equal(out.numpy()[1, :, 3], 0.0)
    for grad in (q.grad, k.grad, v.grad):
        assert np.isfinite(grad.numpy()).all()
    np.testing.assert_array_equal(q.grad.numpy()[0, :, 1], 0.0)
    np.testing.assert_array_equal(q.grad.numpy()[1, :, 3], 0.0)

    # Every other row, and the gradients through it, as PyTorch computes them.
    tq, tk, tv = (torch.tensor(t.numpy(), requires_grad=True) for t in (q, k, v))
    partly = allowed.any(axis=-1, keepdims=True)
    tout = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=torch.tensor(allowed | ~partly))  # give empty rows a dummy mask
    (tout * torch.tensor(cotangent * partly)).sum().backward()
    keep = np.broadcast_to(partly, out.shape[:-1] + (1,))
    np.testing.assert_allclose(out.numpy() * keep, tout.detach().numpy() * keep, rtol=1e-10)
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(k.grad.numpy(), tk.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(q.grad.numpy(), tq.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_multihead_attention_with_a_fully_padded_batch_row_is_finite():
    """All keys of batch element 1 padded: its attention output is zero, so the layer's
    output is ``out_proj(0) = out_proj.bias`` at every position, and gradients are finite."""
    ta.manual_seed(0)
    mha = ta.nn.MultiHeadAttention(8, num_heads=2).double()
    x = ta.randn(2, 3, 8, dtype=ta.float64, requires_grad=True)
    padding = np.array([[False, False, True], [True, True, True]])  # True = padded
    out = mha(x, key_padding_mask=ta.tensor(padding))
    assert np.isfinite(out.numpy()).all()
    np.testing.assert_allclose(out.numpy()[1], np.broadcast_to(mha.out_proj.bias.numpy(), (3, 8)),
                               rtol=1e-12)
    out.backward(ta.tensor(np.random.default_rng(3).standard_normal(out.shape)))
    for tensor in [x] + list(mha.parameters()):
        assert np.isfinite(tensor.grad.numpy()).all()
    np.testing.assert_array_equal(x.grad.numpy()[1], 0.0)

    torch_mha = ta.interop.to_torch(mha)
    tx = torch.tensor(x.numpy())
    expected, _ = torch_mha(tx[:1], tx[:1], tx[:1], key_padding_mask=torch.tensor(padding[:1]))
    np.testing.assert_allclose(out.numpy()[:1], expected.detach().numpy(), rtol=1e-10)


# ---- LayerNorm on constant rows ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_of_constant_rows_is_finite_and_equals_torch(dtype):
    """The reference is PyTorch in float64 on the same (float32-representable) values: for
    the constant row of -1e4, PyTorch's own float32 gradient is off by up to 8%, while the
    exact answer ``rstd · (ĝ − mean ĝ)`` is representable to float32 precision."""
    rows = np.array([[5.0] * 6, [0.0] * 6, [-1e4] * 6, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])
    rng = np.random.default_rng(4)
    weight = rng.standard_normal(6).astype(dtype)
    bias = rng.standard_normal(6).astype(dtype)
    x, tx = _pair(rows, dtype, torch.float64)
    w, tw = _pair(weight, dtype, torch.float64)
    b, tb = _pair(bias, dtype, torch.float64)
    y = F.layer_norm(x, (6,), w, b)
    ty = torch.nn.functional.layer_norm(tx, (6,), tw, tb)
    _assert_equal_to_torch(y.numpy(), ty, 1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(y.numpy()[:3], np.broadcast_to(bias.astype(dtype), (3, 6)),
                               rtol=1e-6)
    cotangent = rng.standard_normal(rows.shape).astype(dtype)
    y.backward(ta.tensor(cotangent))
    ty.backward(torch.tensor(cotangent))
    tolerance = 1e-4 if dtype == np.float32 else 1e-10
    for ours, theirs in ((x.grad, tx.grad), (w.grad, tw.grad), (b.grad, tb.grad)):
        _assert_equal_to_torch(ours.numpy(), theirs, tolerance)


# ---- detect_anomaly ---------------------------------------------------------------------------

def test_detect_anomaly_names_linear_when_its_weight_holds_a_nan():
    layer = ta.nn.Linear(3, 2)
    layer.weight.numpy()[0, 0] = np.nan
    x = ta.randn(4, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"detect_anomaly: the backward of 'Linear' produced "
                                           r"non-finite values"):
        with ta.detect_anomaly():
            layer(x).sum().backward()


@pytest.mark.parametrize("op, values, name", [
    ("sqrt", [4.0, -1.0], "Sqrt"),  # sqrt(-1) = nan, and so is its derivative
    ("log", [1.0, 0.0], "Log"),  # d log(x)/dx = 1/x = inf at 0 (PyTorch only flags NaN)
])
def test_detect_anomaly_names_the_op_whose_backward_is_not_finite(op, values, name):
    x = ta.tensor(values, dtype=ta.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=rf"the backward of '{name}' produced non-finite"):
        with ta.detect_anomaly():
            getattr(x, op)().sum().backward()


def test_pytorch_also_flags_the_nan_from_sqrt_of_a_negative():
    tx = torch.tensor([4.0, -1.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"SqrtBackward0"):
        with pytest.warns(UserWarning), torch.autograd.detect_anomaly(check_nan=True):
            tx.sqrt().sum().backward()
