"""RoPE and ALiBi: independent numpy formulas, finite differences, and errors."""

import numpy as np
import pytest

import tinyattn as ta


def numpy_rope(x, positions, base=10000.0):
    """Rotate each pair (x_i, x_{i+D/2}) by p · base^(−2i/D), written as 2×2 rotations."""
    D = x.shape[-1]
    out = np.empty_like(x)
    for t, p in enumerate(positions):
        for i in range(D // 2):
            theta = p * base ** (-2.0 * i / D)
            a, b = x[..., t, i], x[..., t, i + D // 2]
            out[..., t, i] = a * np.cos(theta) - b * np.sin(theta)
            out[..., t, i + D // 2] = a * np.sin(theta) + b * np.cos(theta)
    return out


def numpy_alibi_slopes(n):
    """The slopes as the ALiBi paper states them: 2^(−8/n), then times 2^(−8/n) again …,
    for a power of two n; otherwise those of the nearest lower power of two P, then the
    odd-numbered slopes of 2P heads."""
    def power_of_two(m):
        start = 2 ** (-8 / m)
        return [start * start ** i for i in range(m)]
    if (n & (n - 1)) == 0:
        return power_of_two(n)
    P = 2 ** int(np.floor(np.log2(n)))
    return power_of_two(P) + power_of_two(2 * P)[0::2][: n - P]


@pytest.mark.parametrize("offset", [0, 3])
def test_rope_matches_pairwise_rotations(offset):
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 3, 5, 8)), rng.normal(size=(2, 1, 5, 8))
    rope = ta.nn.RotaryEmbedding(8, max_positions=16, base=100.0)
    q_rot, k_rot = rope(ta.tensor(q), ta.tensor(k), offset=offset)
    positions = range(offset, offset + 5)
    np.testing.assert_allclose(q_rot.numpy(), numpy_rope(q, positions, 100.0), atol=1e-13)
    np.testing.assert_allclose(k_rot.numpy(), numpy_rope(k, positions, 100.0), atol=1e-13)


def test_rope_scores_depend_only_on_the_distance():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(1, 1, 1, 16)), rng.normal(size=(1, 1, 1, 16))
    rope = ta.nn.RotaryEmbedding(16, max_positions=64)
    scores = {}
    for m, n in [(5, 2), (13, 10), (40, 37)]:
        q_rot, _ = rope(ta.tensor(q), ta.tensor(k), offset=m)
        _, k_rot = rope(ta.tensor(q), ta.tensor(k), offset=n)
        scores[(m, n)] = float((q_rot.numpy() * k_rot.numpy()).sum())
    values = list(scores.values())
    np.testing.assert_allclose(values, values[0], rtol=1e-12)
    q_rot, _ = rope(ta.tensor(q), ta.tensor(k), offset=6)
    assert abs(float((q_rot.numpy() * k_rot.numpy()).sum()) - values[0]) > 1e-6


def test_rope_gradchecks_and_its_backward_is_the_inverse_rotation():
    rng = np.random.default_rng(2)
    rope = ta.nn.RotaryEmbedding(6, max_positions=8)
    q = ta.tensor(rng.normal(size=(2, 2, 4, 6)), requires_grad=True)
    k = ta.tensor(rng.normal(size=(2, 1, 4, 6)), requires_grad=True)
    assert ta.gradcheck(lambda a, b: rope(a, b, offset=2), (q, k))
    grad = rng.normal(size=(2, 2, 4, 6))
    out, _ = rope(q, k, offset=2)
    out.backward(ta.tensor(grad))
    # the rotation is orthogonal: the gradient is the output gradient rotated back by −p·θ
    inverse = numpy_rope(grad, [-p for p in range(2, 6)])
    np.testing.assert_allclose(q.grad.numpy(), inverse, atol=1e-13)


def test_rope_attention_matches_torch_formulation():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(1, 2, 5, 4)) for _ in range(3))
    rope = ta.nn.RotaryEmbedding(4, max_positions=5)
    tq, tk = (torch.tensor(numpy_rope(a, range(5)), requires_grad=True) for a in (q, k))
    ours = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
    q_rot, k_rot = rope(ours[0], ours[1])
    out = ta.F.scaled_dot_product_attention(q_rot, k_rot, ours[2], is_causal=True,
                                            impl="composed")
    tv = torch.tensor(v, requires_grad=True)
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), atol=1e-13)
    g = rng.normal(size=out.shape)
    out.backward(ta.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(ours[2].grad.numpy(), tv.grad.numpy(), atol=1e-12)
    # dL/dq = R(−p) dL/dq_rot
    np.testing.assert_allclose(ours[0].grad.numpy(),
                               numpy_rope(tq.grad.numpy(), [-p for p in range(5)]), atol=1e-12)


@pytest.mark.parametrize("bad, error, message", [
    (lambda: ta.nn.RotaryEmbedding(7, 16), ValueError, r"RotaryEmbedding: head_dim must be "
                                                       r"even .* got 7"),
    (lambda: ta.nn.RotaryEmbedding(8, 4)(ta.randn(1, 1, 3, 8), ta.randn(1, 1, 3, 8), offset=2),
     ValueError, r"RotaryEmbedding: positions 2..4 exceed max_positions 4"),
    (lambda: ta.nn.RotaryEmbedding(8, 4)(ta.randn(1, 1, 3, 6), ta.randn(1, 1, 3, 8)),
     ValueError, r"RotaryEmbedding: q must have shape \(..., T, 8\), got \(1, 1, 3, 6\)"),
    (lambda: ta.nn.RotaryEmbedding(8, 4, base=1.0), ValueError, r"base must be > 1"),
    (lambda: ta.F.alibi_bias(2, 4, 3), ValueError, r"alibi_bias: query_len 4 must be <= "
                                                   r"key_len 3"),
    (lambda: ta.F.alibi_slopes(0), ValueError,
     r"alibi_slopes: num_heads must be an int >= 1, got 0"),
])
def test_bad_positional_arguments_raise_clear_errors(bad, error, message):
    with pytest.raises(error, match=message):
        bad()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 8, 12, 16])
def test_alibi_slopes_follow_the_paper(n):
    np.testing.assert_allclose(ta.F.alibi_slopes(n), numpy_alibi_slopes(n), rtol=1e-13)


def test_alibi_slopes_of_eight_heads_are_halves():
    np.testing.assert_allclose(ta.F.alibi_slopes(8), [2.0 ** -i for i in range(1, 9)])


@pytest.mark.parametrize("T, S", [(4, 4), (1, 5), (2, 6)])
def test_alibi_bias_is_minus_slope_times_distance_bottom_right(T, S):
    bias = ta.F.alibi_bias(3, T, S, dtype=np.float64).numpy()
    slopes = numpy_alibi_slopes(3)
    for h in range(3):
        for i in range(T):
            for j in range(S):
                assert bias[h, i, j] == pytest.approx(-slopes[h] * abs(S - T + i - j))


def test_attention_with_alibi_gradchecks_and_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(2, 3, 5, 4)) for _ in range(3))
    bias = ta.F.alibi_bias(3, 5, 5, dtype=np.float64)
    causal = np.tril(np.ones((5, 5), bool))
    mask = ta.tensor(np.where(causal, bias.numpy(), -np.inf))

    def attend(a, b, c):
        return ta.F.scaled_dot_product_attention(a, b, c, attn_mask=mask, impl="composed")

    inputs = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
    assert ta.gradcheck(attend, inputs)
    slopes = torch.tensor(numpy_alibi_slopes(3), dtype=torch.float64)
    i, j = torch.arange(5)[:, None], torch.arange(5)[None, :]
    torch_bias = (-slopes[:, None, None] * (i - j)).masked_fill(j > i, float("-inf"))
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a) for a in (q, k, v)), attn_mask=torch_bias)
    np.testing.assert_allclose(attend(*inputs).numpy(), ref.numpy(), atol=1e-13)
