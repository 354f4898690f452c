"""Grouped-query / multi-query attention and sliding windows: torch's enable_gqa semantics,
finite differences, the explicit band mask, and clear errors.

The cases parametrized with ``impl="fused"`` run the fused kernel on grouped key/value heads
and windows (the composed path is the reference in each)."""

import numpy as np
import pytest

import tinyattn as ta

IMPLS = ["composed", "fused"]


def _qkv(H, Hkv, T=5, S=5, D=4, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(2, H, T, D)), rng.normal(size=(2, Hkv, S, D)),
            rng.normal(size=(2, Hkv, S, D)))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("H, Hkv, causal", [(4, 2, True), (4, 1, False), (6, 3, True),
                                            (4, 4, True)])
def test_enable_gqa_matches_torch_values_and_gradients(impl, H, Hkv, causal):
    torch = pytest.importorskip("torch")
    q, k, v = _qkv(H, Hkv)
    ours = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = ta.F.scaled_dot_product_attention(*ours, is_causal=causal, enable_gqa=True, impl=impl)
    ref = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=causal,
                                                           enable_gqa=True)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), atol=1e-12)
    grad = np.random.default_rng(9).normal(size=out.shape)
    out.backward(ta.tensor(grad))
    ref.backward(torch.tensor(grad))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-11)


@pytest.mark.parametrize("impl", IMPLS)
def test_enable_gqa_with_a_float_mask_matches_torch(impl):
    torch = pytest.importorskip("torch")
    q, k, v = _qkv(4, 2, T=3, S=6)
    mask = np.random.default_rng(5).normal(size=(1, 4, 3, 6))
    out = ta.F.scaled_dot_product_attention(*(ta.tensor(a) for a in (q, k, v)),
                                            attn_mask=ta.tensor(mask), enable_gqa=True,
                                            impl=impl)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a) for a in (q, k, v)), attn_mask=torch.tensor(mask), enable_gqa=True)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-12)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("H, Hkv", [(4, 2), (3, 1)])
def test_grouped_query_attention_gradchecks(impl, H, Hkv):
    inputs = [ta.tensor(a, requires_grad=True) for a in _qkv(H, Hkv, T=4, S=4, D=3)]
    assert ta.gradcheck(lambda q, k, v: ta.F.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=True, impl=impl), inputs)


def test_shared_kv_head_gradient_is_the_sum_over_its_query_heads():
    q, k, v = _qkv(4, 2)
    grad = np.random.default_rng(2).normal(size=(2, 4, 5, 4))
    grouped = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
    ta.F.scaled_dot_product_attention(*grouped, is_causal=True, enable_gqa=True,
                                      impl="composed").backward(ta.tensor(grad))
    repeated = [ta.tensor(q, requires_grad=True)] + [
        ta.tensor(np.repeat(a, 2, axis=1), requires_grad=True) for a in (k, v)]
    ta.F.scaled_dot_product_attention(*repeated, is_causal=True,
                                      impl="composed").backward(ta.tensor(grad))
    for shared, full in zip(grouped[1:], repeated[1:]):
        summed = full.grad.numpy().reshape(2, 2, 2, 5, 4).sum(axis=2)  # heads (0, 1), (2, 3)
        np.testing.assert_allclose(shared.grad.numpy(), summed, atol=1e-13)


@pytest.mark.parametrize("bad, error, message", [
    (lambda: ta.F.scaled_dot_product_attention(ta.randn(1, 4, 3, 2), ta.randn(1, 3, 3, 2),
                                               ta.randn(1, 3, 3, 2), enable_gqa=True),
     ValueError, r"the number of query heads 4 must be a multiple of the number of key/value "
                 r"heads 3"),
    (lambda: ta.F.scaled_dot_product_attention(ta.randn(1, 4, 3, 2), ta.randn(1, 2, 3, 2),
                                               ta.randn(1, 2, 3, 2)),
     ValueError, r"pass enable_gqa=True for fewer key/value heads"),
    (lambda: ta.nn.MultiHeadAttention(8, 4, num_kv_heads=3), ValueError,
     r"MultiHeadAttention: num_heads 4 must be divisible by num_kv_heads 3"),
    (lambda: ta.nn.MultiHeadAttention(8, 4, num_kv_heads=0), ValueError,
     r"MultiHeadAttention: num_kv_heads must be an int >= 1, got 0"),
    (lambda: ta.F.scaled_dot_product_attention(ta.randn(1, 1, 3, 2), ta.randn(1, 1, 3, 2),
                                               ta.randn(1, 1, 3, 2), window_size=0),
     ValueError, r"scaled_dot_product_attention: window_size must be an int >= 1, got 0"),
    (lambda: ta.nn.MultiHeadAttention(8, 4, window_size=0), ValueError,
     r"MultiHeadAttention: window_size must be an int >= 1, got 0"),
    (lambda: ta.interop.to_torch(ta.nn.MultiHeadAttention(8, 4, num_kv_heads=2)), ValueError,
     r"torch.nn.MultiheadAttention has no grouped key/value heads"),
])
def test_bad_grouped_or_windowed_arguments_raise_clear_errors(bad, error, message):
    with pytest.raises(error, match=message):
        bad()


def band(T, S, window, causal):
    i, j = np.arange(T)[:, None], np.arange(S)[None, :]
    if causal:
        return (j <= i) & (i - j < window)
    return np.abs(i - j) < window


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("window, causal", [(1, True), (2, True), (3, False), (7, True)])
def test_window_equals_the_composed_path_with_an_explicit_band_mask(impl, window, causal):
    q, k, v = _qkv(2, 2, T=6, S=6)
    ours = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
    explicit = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = ta.F.scaled_dot_product_attention(*ours, is_causal=causal, window_size=window,
                                            impl=impl)
    ref = ta.F.scaled_dot_product_attention(*explicit, attn_mask=band(6, 6, window, causal),
                                            impl="composed")
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-12)
    grad = ta.tensor(np.random.default_rng(4).normal(size=out.shape))
    out.backward(grad)
    ref.backward(grad)
    for a, b in zip(ours, explicit):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("impl", IMPLS)
def test_window_with_grouped_heads_matches_torch_with_the_band_mask(impl):
    torch = pytest.importorskip("torch")
    q, k, v = _qkv(4, 2, T=7, S=7)
    out = ta.F.scaled_dot_product_attention(*(ta.tensor(a) for a in (q, k, v)), is_causal=True,
                                            enable_gqa=True, window_size=3, impl=impl)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a) for a in (q, k, v)), attn_mask=torch.tensor(band(7, 7, 3, True)),
        enable_gqa=True)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-12)


def test_window_zeroes_the_score_gradient_outside_the_band():
    q, k, v = _qkv(1, 1, T=6, S=6)
    ours = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
    scores = []
    out, _ = ta.ops.attention.attention_composed(
        *ours, is_causal=True, scale=0.5, window_size=2,
        scores_hook=lambda s: (s.retain_grad(), scores.append(s), s)[2])
    out.backward(ta.tensor(np.random.default_rng(1).normal(size=out.shape)))
    d_scores = scores[0].grad.numpy()[0, 0]
    outside = ~band(6, 6, 2, True)
    assert np.all(d_scores[outside] == 0)
    assert np.all(np.abs(d_scores[~outside][1:]) > 0)


@pytest.mark.parametrize("impl", IMPLS)
def test_windowed_attention_gradchecks(impl):
    inputs = [ta.tensor(a, requires_grad=True) for a in _qkv(2, 1, T=5, S=5, D=3)]
    assert ta.gradcheck(lambda q, k, v: ta.F.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=True, window_size=2, impl=impl), inputs)


@pytest.mark.parametrize("impl", IMPLS)
def test_grouped_windowed_layer_matches_the_full_head_layer_with_repeated_weights(impl):
    ta.manual_seed(0)
    gqa = ta.nn.MultiHeadAttention(12, 6, causal=True, num_kv_heads=2, window_size=3,
                                   impl=impl).double()
    full = ta.nn.MultiHeadAttention(12, 6, causal=True, impl="composed").double()
    D = 2
    for role in ("q_proj", "out_proj"):
        for name in ("weight", "bias"):
            getattr(getattr(full, role), name).data = getattr(getattr(gqa, role), name).numpy()
    for role in ("k_proj", "v_proj"):
        w = getattr(gqa, role).weight.numpy().reshape(2, D, 12)  # (Hkv, D, C)
        b = getattr(gqa, role).bias.numpy().reshape(2, D)
        getattr(full, role).weight.data = np.repeat(w, 3, axis=0).reshape(12, 12)
        getattr(full, role).bias.data = np.repeat(b, 3, axis=0).reshape(12)
    x = ta.tensor(np.random.default_rng(3).normal(size=(2, 7, 12)))
    mask = ~band(7, 7, 3, True)  # True = NOT allowed, as torch.nn.MultiheadAttention
    np.testing.assert_allclose(gqa(x).numpy(), full(x, attn_mask=mask).numpy(), atol=1e-12)
