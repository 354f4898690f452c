"""Scaled dot-product attention (composed and fused) and the attention layers.

Expected values come from finite differences (``ta.gradcheck``), from numpy written out here,
or from algebra; the two SDPA paths are also checked against each other.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import leaf, seeds

import tinyattn as ta

sdpa = ta.F.scaled_dot_product_attention
IMPLS = ["composed", "fused"]


def qkv(L=3, S=4, E=2, Ev=2, lead=(1, 2), seed=0):
    return leaf(lead + (L, E), seed), leaf(lead + (S, E), seed + 1), leaf(lead + (S, Ev), seed + 2)


def numpy_weights(q, k, allowed=None, bias=None):
    """softmax(q kᵀ / √E + bias) with −inf where not allowed, rows of −inf giving zeros."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def mask_kwargs(kind, L, S, rng):
    if kind == "none":
        return {}
    if kind == "causal":
        return {"is_causal": True}
    if kind == "bool":
        allowed = rng.random((L, S)) > 0.4
        allowed[:, 0] = True  # no fully masked row here: that case has its own test
        return {"attn_mask": ta.tensor(allowed)}
    return {"attn_mask": ta.tensor(rng.standard_normal((2, 1, S)), dtype=np.float64)}


MASKS = ["none", "bool", "float", "causal"]


# ---- scaled_dot_product_attention: gradients ---------------------------------------------------
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("L,S", [(3, 4), (4, 2)])
def test_sdpa_gradcheck(impl, kind, L, S):
    rng = np.random.default_rng(L * 10 + S)
    q, k, v = qkv(L=L, S=S, seed=L + S)
    kw = mask_kwargs(kind, L, S, rng)
    assert ta.gradcheck(lambda a, b, c: sdpa(a, b, c, impl=impl, **kw), (q, k, v))


@pytest.mark.parametrize("impl", IMPLS)
def test_sdpa_gradcheck_with_dropout_under_a_fixed_seed(impl):
    q, k, v = qkv(L=4, S=5, seed=3)

    def fn(a, b, c):
        ta.manual_seed(11)  # the same seed on every call freezes the dropout mask
        return sdpa(a, b, c, dropout_p=0.3, impl=impl)

    assert ta.gradcheck(fn, (q, k, v))


def test_float_mask_gradient_in_composed_path():
    q, k, v = qkv(L=3, S=4, seed=5)
    bias = leaf((2, 1, 4), 9)
    assert ta.gradcheck(lambda a, b, c, m: sdpa(a, b, c, attn_mask=m), (q, k, v, bias))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("float_mask", [False, True])
def test_fully_masked_rows_give_zero_output_and_finite_zero_gradients(impl, float_mask):
    q, k, v = qkv(L=3, S=4, seed=2)
    allowed = np.ones((3, 4), dtype=bool)
    allowed[1] = False  # query 1 may attend nothing
    mask = np.where(allowed, 0.0, -np.inf) if float_mask else allowed
    out = sdpa(q, k, v, attn_mask=ta.tensor(mask), impl=impl)
    assert np.all(out.numpy()[..., 1, :] == 0.0)
    out.backward(np.random.default_rng(0).standard_normal(out.shape))
    for t in (q, k, v):
        assert np.all(np.isfinite(t.grad.numpy()))
    assert np.all(q.grad.numpy()[..., 1, :] == 0.0)
    assert ta.gradcheck(lambda a, b, c: sdpa(a, b, c, attn_mask=ta.tensor(mask), impl=impl),
                       (q, k, v))


# ---- the two paths agree -----------------------------------------------------------------------
def run_with_grads(impl, q, k, v, cotangent, **kw):
    for t in (q, k, v):
        t.grad = None
    out = sdpa(q, k, v, impl=impl, **kw)
    out.backward(cotangent)
    return [out.numpy()] + [t.grad.numpy() for t in (q, k, v)]


@pytest.mark.parametrize("kind", MASKS)
def test_composed_and_fused_agree_in_float64(kind):
    rng = np.random.default_rng(4)
    q, k, v = qkv(L=6, S=7, E=5, Ev=3, lead=(2, 2), seed=4)
    kw = mask_kwargs(kind, 6, 7, rng)
    g = rng.standard_normal((2, 2, 6, 3))
    composed = run_with_grads("composed", q, k, v, g, **kw)
    fused = run_with_grads("fused", q, k, v, g, **kw)
    for a, b in zip(composed, fused):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)


def test_composed_and_fused_drop_the_same_weights_under_the_same_seed():
    q, k, v = qkv(L=6, S=7, seed=8)
    g = np.random.default_rng(1).standard_normal((1, 2, 6, 2))
    ta.manual_seed(5)
    composed = run_with_grads("composed", q, k, v, g, dropout_p=0.4)
    ta.manual_seed(5)
    fused = run_with_grads("fused", q, k, v, g, dropout_p=0.4)
    ta.manual_seed(6)
    other_seed = run_with_grads("fused", q, k, v, g, dropout_p=0.4)
    for a, b in zip(composed, fused):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)
    assert not np.allclose(fused[0], other_seed[0])


@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=3), L=st.integers(1, 5),
       S=st.integers(1, 5), E=st.integers(1, 4), seed=seeds)
def test_any_leading_dims_match_numpy(lead, L, S, E, seed):
    q, k, v = qkv(L=L, S=S, E=E, Ev=2, lead=tuple(lead), seed=seed)
    expected = numpy_weights(q.numpy(), k.numpy()) @ v.numpy()
    for impl in IMPLS:
        np.testing.assert_allclose(sdpa(q, k, v, impl=impl).numpy(), expected, atol=1e-12)


def test_need_weights_returns_numpy_softmax_and_auto_uses_it():
    rng = np.random.default_rng(3)
    q, k, v = qkv(L=4, S=5, seed=6)
    allowed = rng.random((1, 2, 4, 5)) > 0.3
    allowed[..., 0] = True
    out, weights = sdpa(q, k, v, attn_mask=ta.tensor(allowed), need_weights=True)
    expected = numpy_weights(q.numpy(), k.numpy(), allowed=allowed)
    np.testing.assert_allclose(weights.numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(out.numpy(), expected @ v.numpy(), atol=1e-12)


def test_need_weights_are_the_weights_the_output_used_under_dropout():
    q, k, v = qkv(L=4, S=5, seed=7)
    ta.manual_seed(2)
    out, weights = sdpa(q, k, v, dropout_p=0.5, need_weights=True)
    kept = weights.numpy() != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(out.numpy(), weights.numpy() @ v.numpy(), atol=1e-12)
    undropped = numpy_weights(q.numpy(), k.numpy())
    np.testing.assert_allclose(weights.numpy()[kept], 2.0 * undropped[kept], atol=1e-12)


def test_auto_is_fused_unless_weights_are_needed():
    q, k, v = qkv()
    assert sdpa(q, k, v).grad_fn.name == "FusedAttention"
    assert sdpa(q, k, v, impl="composed").grad_fn.name == "MatMul"
    out, weights = sdpa(q, k, v, need_weights=True)
    assert out.grad_fn.name == "MatMul" and weights.grad_fn.name == "Softmax"


def test_composed_intermediates_expose_their_gradients():
    q, k, v = qkv(L=3, S=4, seed=1)
    out, weights = sdpa(q, k, v, need_weights=True, impl="composed")
    weights.retain_grad()
    g = np.random.default_rng(2).standard_normal(out.shape)
    out.backward(g)
    # out = W V  =>  dL/dW = G Vᵀ
    np.testing.assert_allclose(weights.grad.numpy(), g @ np.swapaxes(v.numpy(), -1, -2), atol=1e-12)


@pytest.mark.parametrize("impl", IMPLS)
def test_causal_mask_blocks_gradient_from_future_keys(impl):
    q, k, v = qkv(L=4, S=4, seed=9)
    out = sdpa(q, k, v, is_causal=True, impl=impl)
    g = np.zeros(out.shape)
    g[..., 1, :] = 1.0  # only query 1's output
    out.backward(g)
    assert np.all(k.grad.numpy()[..., 2:, :] == 0) and np.all(v.grad.numpy()[..., 2:, :] == 0)
    assert np.any(k.grad.numpy()[..., :2, :] != 0)


def test_causal_is_top_left_aligned_when_L_differs_from_S():
    q, k, v = qkv(L=3, S=5, seed=12)
    allowed = np.tril(np.ones((3, 5), dtype=bool))
    expected = numpy_weights(q.numpy(), k.numpy(), allowed=allowed) @ v.numpy()
    for impl in IMPLS:
        np.testing.assert_allclose(sdpa(q, k, v, is_causal=True, impl=impl).numpy(), expected,
                                   atol=1e-12)


def test_float32_inputs_stay_float32_and_match_float64():
    q, k, v = qkv(L=5, S=6, seed=13)
    expected = sdpa(q, k, v).numpy()
    for impl in IMPLS:
        out = sdpa(q.float(), k.float(), v.float(), impl=impl, is_causal=False)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out.numpy(), expected, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"attn_mask": np.ones((3, 5), dtype=bool)}, ValueError, "does not broadcast"),
        ({"attn_mask": np.ones((3, 4), dtype=np.int64)}, TypeError, "boolean or have"),
        ({"attn_mask": np.ones((3, 4), dtype=np.float32)}, TypeError, "float64"),
        ({"attn_mask": np.ones((3, 4), dtype=bool), "is_causal": True}, ValueError, "not both"),
        ({"dropout_p": 1.5}, ValueError, r"\[0, 1\]"),
        ({"impl": "flash"}, ValueError, "impl"),
        ({"impl": "fused", "need_weights": True}, ValueError, "materialises"),
        ({"scale": float("nan")}, ValueError, "scale"),
    ],
)
def test_sdpa_bad_options_raise_clear_errors(kwargs, error, match):
    q, k, v = qkv(L=3, S=4)
    with pytest.raises(error, match=match):
        sdpa(q, k, v, **kwargs)


def test_sdpa_bad_shapes_and_dtypes_raise_clear_errors():
    q, k, v = qkv(L=3, S=4, E=3, Ev=2)
    with pytest.raises(ValueError, match="same feature size D"):
        sdpa(q, leaf((1, 2, 4, 5), 0), v)
    with pytest.raises(ValueError, match="same length S"):
        sdpa(q, k, leaf((1, 2, 6, 2), 0))
    with pytest.raises(ValueError, match="leading"):
        sdpa(q, leaf((3, 2, 4, 3), 0), leaf((3, 2, 4, 2), 0))
    with pytest.raises(TypeError, match="one dtype"):
        sdpa(q, k.float(), v)
    with pytest.raises(ValueError, match="at least 2 dims"):
        sdpa(leaf((3,), 0), k, v)
    with pytest.raises(ValueError, match="impl='fused' cannot"):
        sdpa(q, k, v, attn_mask=leaf((3, 4), 0), impl="fused")


# ---- layers ------------------------------------------------------------------------------------
def module_gradcheck(module, *inputs, **kwargs):
    """Gradcheck ``module(*inputs, **kwargs)`` w.r.t. the inputs and every parameter."""
    module.double()
    named = list(module.named_parameters())

    def owner(name):
        path, _, attr = name.rpartition(".")
        mod = module
        for part in filter(None, path.split(".")):
            mod = getattr(mod, part)
        return mod, attr

    def fn(*args):
        xs, params = args[: len(inputs)], args[len(inputs):]
        for (name, _), p in zip(named, params):
            object.__setattr__(*owner(name), p)  # swap the checked copy in, unregistered
        try:
            return module(*xs, **kwargs)
        finally:
            for name, original in named:
                object.__setattr__(*owner(name), original)

    return ta.gradcheck(fn, list(inputs) + [p for _, p in named])


def test_self_attention_gradcheck():
    ta.manual_seed(0)
    assert module_gradcheck(ta.nn.SelfAttention(4, 3, qkv_bias=True, causal=True), leaf((2, 5, 4),
                                                                                      1))


def test_wrapper_gradcheck_and_weights():
    ta.manual_seed(1)
    wrapper = ta.nn.MultiHeadAttentionWrapper(4, 2, num_heads=2, causal=True)
    assert module_gradcheck(wrapper, leaf((2, 3, 4), 2))
    out, weights = wrapper(leaf((2, 3, 4), 2), need_weights=True)
    assert out.shape == (2, 3, 4) and weights.shape == (2, 2, 3, 3)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0)


def test_multi_head_attention_gradcheck_with_cross_attention_and_masks():
    ta.manual_seed(2)
    mha = ta.nn.MultiHeadAttention(4, num_heads=2)
    kpm = np.array([[False, False, True], [False, False, False]])
    assert module_gradcheck(mha, leaf((2, 4, 4), 3), leaf((2, 3, 4), 4), leaf((2, 3, 4), 5),
                            key_padding_mask=kpm)


def test_multi_head_attention_gradcheck_with_weights_and_causal():
    ta.manual_seed(3)
    mha = ta.nn.MultiHeadAttention(4, num_heads=2, causal=True)
    assert module_gradcheck(mha, leaf((2, 3, 4), 6), need_weights=True,
                            average_attn_weights=False)


def test_transformer_block_gradcheck():
    ta.manual_seed(4)
    block = ta.nn.TransformerBlock(4, num_heads=2, mlp_ratio=2)
    assert module_gradcheck(block, leaf((2, 3, 4), 7))


def test_wrapper_heads_equal_multi_head_attention_column_slices():
    ta.manual_seed(5)
    E, H = 6, 3
    d = E // H
    mha = ta.nn.MultiHeadAttention(E, H, causal=True).double()
    wrapper = ta.nn.MultiHeadAttentionWrapper(E, d, H, qkv_bias=True, causal=True).double()
    for h, head in enumerate(wrapper.heads):
        for role in ("q_proj", "k_proj", "v_proj"):
            source, target = getattr(mha, role), getattr(head, role)
            target.weight.data = source.weight.numpy()[h * d:(h + 1) * d].copy()
            target.bias.data = source.bias.numpy()[h * d:(h + 1) * d].copy()
    mha.out_proj.weight.data = np.eye(E)  # make out_proj the identity: mha returns the heads
    mha.out_proj.bias.data = np.zeros(E)
    x = leaf((2, 5, E), 8)
    np.testing.assert_allclose(mha(x).numpy(), wrapper(x).numpy(), atol=1e-12)


def test_unbatched_inputs_match_the_batched_result():
    ta.manual_seed(6)
    x = leaf((2, 4, 6), 9)
    mha = ta.nn.MultiHeadAttention(6, 2).double()
    kpm = np.array([[False, True, False, False], [False, False, False, True]])
    out, weights = mha(x, key_padding_mask=kpm, need_weights=True, average_attn_weights=False)
    out0, weights0 = mha(x[0], key_padding_mask=kpm[0], need_weights=True,
                         average_attn_weights=False)
    assert out0.shape == (4, 6) and weights0.shape == (2, 4, 4)
    np.testing.assert_allclose(out0.numpy(), out.numpy()[0], atol=1e-12)
    np.testing.assert_allclose(weights0.numpy(), weights.numpy()[0], atol=1e-12)
    head = ta.nn.SelfAttention(6, 3).double()
    np.testing.assert_allclose(head(x[1]).numpy(), head(x).numpy()[1], atol=1e-12)


def test_masks_follow_torch_polarity_and_combine():
    ta.manual_seed(7)
    mha = ta.nn.MultiHeadAttention(4, 2).double()
    x = leaf((1, 3, 4), 10)
    kpm = np.array([[False, False, True]])  # True = padding, never attended
    causal = ~np.tril(np.ones((3, 3), dtype=bool))  # True = not allowed
    _, weights = mha(x, key_padding_mask=kpm, attn_mask=causal, need_weights=True,
                     average_attn_weights=False)
    allowed = ~causal & ~kpm[0]
    assert np.all(weights.numpy()[..., ~allowed] == 0)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0)
    float_kpm = np.where(kpm, -np.inf, 0.0)
    _, float_weights = mha(x, key_padding_mask=float_kpm, attn_mask=causal, need_weights=True,
                           average_attn_weights=False)
    np.testing.assert_allclose(float_weights.numpy(), weights.numpy(), atol=1e-12)
    _, hinted = mha(x, key_padding_mask=kpm, is_causal=True, need_weights=True,
                    average_attn_weights=False)
    np.testing.assert_allclose(hinted.numpy(), weights.numpy(), atol=1e-12)


def test_a_causal_layer_folds_its_band_into_a_float_mask():
    """``causal=True`` (or the ``is_causal`` hint) with a float ``attn_mask``: the band joins
    the mask as 0 where a query may attend and −inf above the diagonal, on both paths."""
    ta.manual_seed(7)
    causal_layer = ta.nn.MultiHeadAttention(4, 2, causal=True).double()
    plain = ta.nn.MultiHeadAttention(4, 2).double()
    plain.load_state_dict(causal_layer.state_dict())
    x = leaf((2, 3, 4), 11)
    bias = np.random.default_rng(12).normal(size=(3, 3))
    above = ~np.tril(np.ones((3, 3), dtype=bool))
    expected, expected_weights = plain(x, attn_mask=ta.tensor(np.where(above, -np.inf, bias)),
                                       need_weights=True, average_attn_weights=False)
    assert np.all(expected_weights.numpy()[..., above] == 0)
    for layer, hint in ((causal_layer, False), (plain, True)):
        out, weights = layer(x, attn_mask=ta.tensor(bias), is_causal=hint, need_weights=True,
                             average_attn_weights=False)  # the composed path
        np.testing.assert_allclose(weights.numpy(), expected_weights.numpy(), atol=1e-12)
        np.testing.assert_allclose(out.numpy(), expected.numpy(), atol=1e-12)
        fused = layer(x, attn_mask=ta.tensor(bias), is_causal=hint)  # no weights: fused
        np.testing.assert_allclose(fused.numpy(), expected.numpy(), atol=1e-12)


def test_attention_dropout_only_in_training_mode():
    ta.manual_seed(8)
    mha = ta.nn.MultiHeadAttention(4, 2, dropout=0.5).double()
    x = leaf((2, 5, 4), 11)
    reference = mha(x).numpy()  # training: weights dropped
    mha.eval()
    evaluated = mha(x).numpy()
    mha.dropout = 0.0
    np.testing.assert_allclose(evaluated, mha(x).numpy(), atol=1e-14)
    assert not np.allclose(reference, evaluated)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: ta.nn.MultiHeadAttention(10, 3), "10 must be divisible by num_heads 3"),
        (lambda: ta.nn.MultiHeadAttention(0, 1), "embed_dim must be an int >= 1"),
        (lambda: ta.nn.MultiHeadAttention(4, -2), "num_heads must be an int >= 1"),
        (lambda: ta.nn.MultiHeadAttention(4, 2, dropout=1.5), r"dropout .* \[0, 1\]"),
        (lambda: ta.nn.SelfAttention(4, 0), "d_out"),
        (lambda: ta.nn.MultiHeadAttentionWrapper(4, 2, 0), "num_heads"),
        (lambda: ta.nn.TransformerBlock(4, 2, mlp_ratio=0), "mlp_ratio"),
    ],
)
def test_layer_constructor_errors_name_the_problem(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_layer_forward_errors_name_the_problem():
    mha = ta.nn.MultiHeadAttention(4, 2).double()
    x = leaf((2, 3, 4), 12)
    with pytest.raises(ValueError, match=r"MultiHeadAttention: query must have shape \(B, T, 4\)"):
        mha(leaf((2, 3, 5), 0))
    with pytest.raises(ValueError, match=r"key_padding_mask has shape \(2, 4\), expected \(2, 3\)"):
        mha(x, key_padding_mask=np.zeros((2, 4), dtype=bool))
    with pytest.raises(ValueError, match=r"attn_mask has shape \(3, 4\)"):
        mha(x, attn_mask=np.zeros((3, 4), dtype=bool))
    with pytest.raises(TypeError, match="attn_mask must be boolean"):
        mha(x, attn_mask=np.zeros((3, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="one B"):
        mha(x, leaf((2, 3, 4), 0), leaf((2, 5, 4), 0))
    with pytest.raises(ValueError, match=r"SelfAttention: x must have shape \(B, T, 6\)"):
        ta.nn.SelfAttention(6, 2)(x)


def test_a_packed_projection_gets_its_gradient_from_attention_without_a_copy(monkeypatch):
    """nanoGPT's ``q, k, v = c_attn(x).split(C, dim=2)``: the fused backward writes dq, dk, dv
    side by side and the split passes them on as one array; the weights' gradients are those of
    contiguous copies of q, k, v (whose split backward concatenates)."""
    from tinyattn.ops import index

    joined = []

    def spy(grads, dim):
        result = original(grads, dim)
        joined.append(result is not None)
        return result

    original = index._joined_in_place
    monkeypatch.setattr(index, "_joined_in_place", spy)
    B, T, H, D = 2, 5, 3, 4
    C = H * D
    x = ta.from_numpy(np.random.default_rng(1).standard_normal((B, T, C)))
    grads = []
    for copy in (False, True):
        layer = ta.nn.Linear(C, 3 * C, dtype=ta.float64)
        layer.weight.data = ta.from_numpy(np.linspace(-1, 1, 3 * C * C).reshape(3 * C, C))
        layer.bias.data = ta.from_numpy(np.linspace(-0.5, 0.5, 3 * C))
        pieces = [p.view(B, T, H, D).transpose(1, 2) for p in layer(x).split(C, dim=2)]
        if copy:
            pieces = [p.contiguous() for p in pieces]
        y = sdpa(*pieces, is_causal=True, impl="fused")
        (y * y).sum().backward()
        grads.append((layer.weight.grad.numpy(), layer.bias.grad.numpy()))
    assert joined == [True, False]
    for got, expected in zip(grads[0], grads[1], strict=True):
        np.testing.assert_array_equal(got, expected)

