"""Gradient-routing maps (P, dP, dS per layer and head), the rollout, saturation and the scale
lab."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import inspect
from tinyattn.gradcheck import central_difference

B, T, C, H, V = 2, 6, 16, 2, 11
D = C // H


def language_model(layers=2, seed=0, dropout=0.0):
    ta.manual_seed(seed)
    return ta.TransformerLM(ta.models.TransformerLMConfig(V, 8, C, H, layers, dropout=dropout))


def batch(seed=0):
    rng = np.random.default_rng(seed)
    return ta.tensor(rng.integers(0, V, (B, T))), ta.tensor(rng.integers(0, V, (B, T)))


def squares(out):
    return (out * out).sum()


def test_the_maps_equal_the_hook_points_values_and_gradients():
    model = language_model()
    idx, targets = batch()
    maps = inspect.attention_gradients(model, (idx, targets))
    (_, loss), cache = model.run_with_cache(idx, targets=targets)
    assert [layer.name for layer in maps.layers] == ["blocks.0.attn", "blocks.1.attn"]
    assert maps.loss == pytest.approx(loss.item(), rel=1e-6)
    for i, layer in enumerate(maps.layers):
        assert layer.P.shape == layer.dP.shape == layer.dS.shape == (B, H, T, T)
        prefix = f"blocks.{i}.attn"
        np.testing.assert_array_equal(layer.P, cache[f"{prefix}.hook_pattern"].numpy())
        np.testing.assert_allclose(layer.dP, cache.grad(f"{prefix}.hook_pattern").numpy(),
                                   rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(layer.dS, cache.grad(f"{prefix}.hook_attn_scores").numpy(),
                                   rtol=1e-6, atol=1e-9)
    assert all(p.grad is None for p in model.parameters())


def test_dP_matches_finite_differences_of_a_patched_pattern():
    model = language_model(layers=1).double()
    idx, targets = batch(1)
    maps = inspect.attention_gradients(model, (idx, targets))
    pattern = maps[0].P

    def loss_with(patched):
        def patch(value, hook):
            return ta.tensor(patched)

        _, loss = model.run_with_hooks(idx, targets=targets,
                                       fwd_hooks=[("blocks.0.attn.hook_pattern", patch)])
        return loss.item()

    for where in [(0, 0, 3, 1), (1, 1, 5, 5), (0, 1, 2, 4)]:  # the last one above the diagonal
        direction = np.zeros_like(pattern)
        direction[where] = 1.0
        numeric = central_difference(loss_with, pattern, direction, 1e-6)
        assert maps[0].dP[where] == pytest.approx(numeric, rel=1e-5, abs=1e-9)


def test_causal_attention_sends_exactly_no_gradient_above_the_diagonal():
    model = language_model(dropout=0.2)  # training mode: dropout on the weights too
    maps = inspect.attention_gradients(model, batch())
    assert maps.causal_leak() == 0.0
    above = np.triu(np.ones((T, T), bool), 1)
    assert np.abs(maps[1].dP[..., above]).max() > 0  # dP = dO Vᵀ does not vanish there
    ta.manual_seed(0)
    free = inspect.attention_gradients(ta.nn.MultiHeadAttention(C, H), ta.randn(B, T, C),
                                       squares)
    assert free.causal_leak() > 0


def test_causal_leak_is_the_largest_value_above_the_diagonal_of_hand_built_maps():
    # one non-zero value strictly above the diagonal in each layer, both on the first
    # superdiagonal, where a causal off-by-one leaks; larger values on and below the diagonal
    below = np.tril(np.ones((5, 5)))
    P = np.broadcast_to(0.9 * below, (2, 2, 5, 5)).copy()
    dS = np.broadcast_to(-0.8 * below, (2, 2, 5, 5)).copy()
    P[1, 0, 2, 3] = 0.25
    first = inspect.LayerGradients("first", P, np.zeros_like(P), dS)
    later = np.zeros((1, 1, 5, 5))
    later[0, 0, 3, 4] = -0.375  # in dS only: |−0.375| is the largest, in the second layer
    second = inspect.LayerGradients("second", np.zeros_like(later), np.zeros_like(later), later)
    assert inspect.AttentionGradients([first, second], 0.0).causal_leak() == 0.375
    assert inspect.AttentionGradients([second, first], 0.0).causal_leak() == 0.375
    assert inspect.AttentionGradients([first], 0.0).causal_leak() == 0.25
    causal = inspect.LayerGradients("causal", 0.9 * below[None, None], np.ones((1, 1, 5, 5)),
                                    -0.8 * below[None, None])  # dP itself is not looked at
    assert inspect.AttentionGradients([causal], 0.0).causal_leak() == 0.0


def test_causal_leak_reports_what_a_mask_off_by_one_lets_through():
    """A mask that hides keys j >= i + 2 instead of j >= i + 1 lets query i see key i + 1: the
    reported leak is the largest |P| or |dS| there, recomputed here in numpy from the weights."""
    ta.manual_seed(3)
    mha = ta.nn.MultiHeadAttention(C, H).double()
    x = np.random.default_rng(3).normal(size=(B, T, C))
    off_by_one = np.triu(np.ones((T, T), bool), k=2)  # True = may not attend

    class OffByOne(ta.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = mha

        def forward(self, x):
            return self.attn(x, attn_mask=off_by_one)

    maps = inspect.attention_gradients(OffByOne(), ta.tensor(x), squares)
    w = {k: v.numpy() for k, v in mha.state_dict().items()}

    def heads(name):  # (B, H, T, D)
        y = x @ w[f"{name}.weight"].T + w[f"{name}.bias"]
        return y.reshape(B, T, H, D).transpose(0, 2, 1, 3)

    q, k, v = heads("q_proj"), heads("k_proj"), heads("v_proj")
    scores = np.where(off_by_one, -np.inf, q @ k.transpose(0, 1, 3, 2) / np.sqrt(D))
    P = np.exp(scores - scores.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    z = (P @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
    out = z @ w["out_proj.weight"].T + w["out_proj.bias"]
    dz = (2 * out @ w["out_proj.weight"]).reshape(B, T, H, D).transpose(0, 2, 1, 3)
    dP = dz @ v.transpose(0, 1, 3, 2)
    dS = P * (dP - (dP * P).sum(-1, keepdims=True))
    np.testing.assert_allclose(maps[0].P, P, rtol=1e-12, atol=1e-15)
    first_superdiagonal = np.eye(T, k=1, dtype=bool)
    assert not P[..., np.triu(np.ones((T, T), bool), k=1) & ~first_superdiagonal].any()
    leak = max(np.abs(P[..., first_superdiagonal]).max(),
               np.abs(dS[..., first_superdiagonal]).max())
    assert leak > 0.1
    assert maps.causal_leak() == pytest.approx(leak, rel=1e-12)


def test_every_kind_of_attention_layer_gives_maps_per_head():
    ta.manual_seed(0)
    x = ta.randn(B, T, 8)
    wrapper = ta.nn.MultiHeadAttentionWrapper(8, 4, num_heads=3, causal=True)
    maps = inspect.attention_gradients(wrapper, x, squares)
    assert [layer.name for layer in maps.layers] == ["model"]
    assert maps[0].P.shape == (B, 3, T, T)
    # head h of the wrapper is its own SelfAttention: the same weights alone
    alone = inspect.attention_gradients(wrapper.heads[1], x, lambda out: (out * out).sum())
    np.testing.assert_allclose(maps[0].P[:, 1], alone[0].P[:, 0], atol=1e-7)
    head = ta.nn.SelfAttention(8, 4)
    unbatched = inspect.attention_gradients(head, x[0], squares)
    assert unbatched[0].P.shape == (1, 1, T, T)
    mha = ta.nn.MultiHeadAttention(8, num_heads=2)
    assert inspect.attention_gradients(mha, x[0], squares)[0].P.shape == (1, 2, T, T)

    class Twice(ta.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = ta.nn.MultiHeadAttention(8, num_heads=2)

        def forward(self, x):
            return self.attn(self.attn(x))

    twice = inspect.attention_gradients(Twice(), x, squares)
    assert [layer.name for layer in twice.layers] == ["attn", "attn (call 2)"]


def test_the_layers_still_return_what_their_callers_ask_for():
    ta.manual_seed(0)
    mha = ta.nn.MultiHeadAttention(8, num_heads=2)
    x = ta.randn(B, T, 8)

    def loss_fn(pair):
        out, averaged = pair
        assert averaged.shape == (B, T, T)  # need_weights with the default averaging
        return squares(out)

    class AsksForWeights(ta.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = mha

        def forward(self, x):
            return self.attn(x, need_weights=True)

    maps = inspect.attention_gradients(AsksForWeights(), x, loss_fn)
    assert maps[0].P.shape == (B, 2, T, T)
    assert "forward" not in mha.__dict__  # the layer is left as it was


def test_the_gradient_rollout_multiplies_the_layers_maps():
    model = language_model()
    maps = inspect.attention_gradients(model, batch())
    rollout = inspect.gradient_rollout(maps, example=1)
    flows = [np.maximum(0.0, np.float64(layer.dP[1]) * np.float64(layer.P[1]))
             for layer in maps.layers]  # (H, T, T) each
    expected = np.eye(T)
    for flow in flows:
        expected = (np.eye(T) + flow.mean(axis=0)) @ expected
    np.testing.assert_allclose(rollout.matrix, expected, rtol=1e-10)
    np.testing.assert_allclose(rollout.per_head[0], flows[0].sum(axis=1), rtol=1e-10)
    assert np.all(np.triu(rollout.matrix, 1) == 0)  # causal: nothing flows to the future
    assert rollout.per_head.shape == (2, H, T)
    assert rollout.layers == ["blocks.0.attn", "blocks.1.attn"]
    with pytest.raises(IndexError, match="example 5 is out of range"):
        inspect.gradient_rollout(maps, example=5)


def test_plots_of_the_maps_and_the_rollout(tmp_path):
    pytest.importorskip("matplotlib")
    maps = inspect.attention_gradients(language_model(), batch())
    path = inspect.plot_attention_gradients(maps, tmp_path / "maps.png", tokens=list("abcdef"))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    figure = inspect.plot_attention_gradients(maps, layers=[1])
    assert len(figure.axes) == 2 * H * 3  # P, dP, dS for each head, each with a colorbar
    rollout = inspect.plot_gradient_rollout(inspect.gradient_rollout(maps), tmp_path / "r.png")
    assert rollout.stat().st_size > 1000
    with pytest.raises(IndexError, match="layer 2 is out of range"):
        inspect.plot_attention_gradients(maps, layers=[2])
    with pytest.raises(ValueError, match="6 positions need 6 token labels, got 2"):
        inspect.plot_attention_gradients(maps, tokens=["a", "b"])


def test_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match="has no attention layer"):
        inspect.attention_gradients(ta.nn.Linear(3, 3), ta.randn(2, 3), lambda out: out.sum())
    with pytest.raises(ValueError, match="the loss must be a scalar Tensor.*pass loss_fn="):
        inspect.attention_gradients(ta.nn.SelfAttention(4, 2), ta.randn(1, 3, 4))
    with pytest.raises(TypeError, match="expected a tinyattn Module"):
        inspect.attention_gradients(lambda x: x, ta.randn(2, 3))

    class Unused(ta.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = ta.nn.SelfAttention(4, 2)
            self.proj = ta.nn.Linear(4, 1)

        def forward(self, x):
            return self.proj(x).sum()

    with pytest.raises(RuntimeError, match="no attention layer was called"):
        inspect.attention_gradients(Unused(), ta.randn(1, 3, 4))


# ---- saturation and the scale lab -----------------------------------------------------------


def test_entropy_and_softmax_gain_agree_with_their_definitions():
    rng = np.random.default_rng(0)
    rows = rng.dirichlet(np.full(7, 0.3), size=(3, 5))
    rows[0, 0] = [0.5, 0.5, 0, 0, 0, 0, 0]  # a tie; masked keys
    rows[0, 1] = [1.0, 0, 0, 0, 0, 0, 0]  # saturated
    jacobians = rows[..., :, None] * np.eye(7) - rows[..., :, None] * rows[..., None, :]
    np.testing.assert_allclose(inspect.softmax_gain(rows), np.linalg.eigvalsh(jacobians)[..., -1],
                               atol=1e-12)
    assert inspect.softmax_gain(rows)[0, 1] == pytest.approx(0.0, abs=1e-15)
    entropy = inspect.row_entropy(rows)
    np.testing.assert_allclose(entropy[1:], -(rows[1:] * np.log(rows[1:])).sum(-1), rtol=1e-12)
    assert entropy[0, 0] == pytest.approx(np.log(2)) and entropy[0, 1] == 0.0


def test_saturation_report_per_head():
    maps = inspect.attention_gradients(language_model(), batch())
    report = inspect.saturation(maps)
    assert [(h.layer, h.head) for h in report.heads] == [
        (f"blocks.{i}.attn", h) for i in range(2) for h in range(H)]
    first = report.heads[0]
    causal_keys = np.log(np.arange(1, T + 1)).mean()  # row t sees t + 1 keys
    assert first.max_entropy == pytest.approx(causal_keys)
    assert first.entropy <= first.max_entropy
    dP, dS = maps[0].dP[:, 0], maps[0].dS[:, 0]
    assert first.grad_ratio == pytest.approx(np.linalg.norm(dS) / np.linalg.norm(dP))
    assert "λ_max" in str(report) and report._repr_html_().count("<tr") == 1 + 2 * H


def test_the_scale_lab_measures_what_a_plain_backward_gives():
    model = language_model()
    idx, targets = batch()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    lab = inspect.scale_lab(model, (idx, targets), inspect.standard_scales(D, 8.0), steps=2)
    for key, value in model.state_dict().items():  # the weights are restored
        np.testing.assert_array_equal(value, before[key])
    assert all(p.grad is None for p in model.parameters())  # and so are the gradients
    _, loss = model(idx, targets=targets)
    loss.backward()
    standard = [r for r in lab.records if r.scale == "1/√D" and r.step == 0]
    assert standard[0].loss == pytest.approx(loss.item(), rel=1e-6)
    for record in standard:
        layer = model.blocks[int(record.layer.split(".")[1])].attn
        rows = slice(record.head * D, (record.head + 1) * D)
        assert record.grad_q == pytest.approx(
            np.linalg.norm(layer.q_proj.weight.grad.numpy()[rows]), rel=1e-4)
        assert record.grad_k == pytest.approx(
            np.linalg.norm(layer.k_proj.weight.grad.numpy()[rows]), rel=1e-4)
    # the entropy of softmax(β s) falls as β grows: in layer 0 (same scores s for every β)
    entropy = {r.factor: r.entropy for r in lab.records
               if r.step == 0 and r.layer == "blocks.0.attn" and r.head == 0}
    ordered = [entropy[f] for f in sorted(entropy)]
    assert ordered == sorted(ordered, reverse=True)
    assert {r.step for r in lab.records} == {0, 1}
    lines = str(lab).splitlines()
    assert len(lines) == 2 + 4 * 2 + 1 and lines[2].split()[:3] == ["1/√D", "0.3536", "0"]


def test_the_scale_lab_plot_and_its_errors(tmp_path):
    pytest.importorskip("matplotlib")
    model = language_model(layers=1)
    lab = inspect.scale_lab(model, batch(), [("1/√D", 1 / np.sqrt(D)), ("2", 2.0)])
    assert inspect.plot_scale_lab(lab, tmp_path / "scale.png").stat().st_size > 1000
    assert len(inspect.plot_scale_lab(lab).axes) == 5
    with pytest.raises(ValueError, match="only MultiHeadAttention layers have"):
        inspect.scale_lab(ta.nn.SelfAttention(4, 2), ta.randn(1, 3, 4), [("1", 1.0)], squares)
    with pytest.raises(ValueError, match="must be a positive finite number"):
        inspect.scale_lab(model, batch(), [("bad", -1.0)])
    with pytest.raises(ValueError, match="steps must be a positive int"):
        inspect.scale_lab(model, batch(), [("1", 1.0)], steps=0)
