"""``nn.MultiheadAttention``: PyTorch's layer with PyTorch's parameters, arguments and masks.

A PyTorch state dict loads as it is, and in float64 the outputs, the attention weights and
every gradient (inputs and parameters) agree with ``torch.nn.MultiheadAttention`` across
layouts, key/value widths, extra key/value rows and masks; conversions to and from tinyattn's
separate-projection ``MultiHeadAttention`` give the same outputs.
"""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn

torch = pytest.importorskip("torch")

E, H = 8, 2
T, S, B = 4, 5, 3


def assert_close(ours, theirs, rel=1e-10):
    ours = ours.numpy() if isinstance(ours, ta.Tensor) else ours
    theirs = theirs.detach().numpy()
    assert ours.shape == theirs.shape
    scale = max(float(np.abs(theirs).max(initial=0.0)), 1e-300)
    np.testing.assert_allclose(ours, theirs, rtol=rel, atol=rel * scale)


def twins(**options):
    """A torch layer (float64, random non-zero biases) and ours with its state dict loaded."""
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(E, H, dtype=torch.float64, **options)
    with torch.no_grad():
        for name, param in theirs.named_parameters():
            if "bias" in name:
                param.normal_()
    ours = nn.MultiheadAttention(E, H, dtype=ta.float64, **options)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def inputs(shape, seed):
    array = np.random.default_rng(seed).normal(size=shape)
    return ta.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


def layout(batched, batch_first, length, width):
    if not batched:
        return (length, width)
    return (B, length, width) if batch_first else (length, B, width)


def masks(kind, batched, extra=0):
    """Masks in the layer's convention with no fully masked query row (PyTorch gives NaN)."""
    rng = np.random.default_rng(7)
    blocked = rng.random((B * H, T, S)) < 0.3
    blocked[..., 0] = False  # every query may attend key 0
    padding = np.zeros((B, S), dtype=bool)
    padding[0, 3:] = True
    padding[2, 1] = True
    result = {}
    if "attn2d" in kind:
        result["attn_mask"] = blocked[0]
    if "attn3d" in kind:
        result["attn_mask"] = blocked if batched else blocked[:H]
    if "kpm" in kind:
        result["key_padding_mask"] = padding if batched else padding[0]
    if "float" in kind:
        result = {k: np.where(v, -np.inf, rng.normal(size=v.shape)) for k, v in result.items()}
    return result


def run_both(ours, theirs, batched=True, batch_first=False, kdim=E, vdim=E, mask_kind="",
             self_attention=False, **call):
    q, tq = inputs(layout(batched, batch_first, S if self_attention else T, E), 1)
    if self_attention:
        (k, tk), (v, tv) = (q, tq), (q, tq)
    else:
        k, tk = inputs(layout(batched, batch_first, S, kdim), 2)
        v, tv = inputs(layout(batched, batch_first, S, vdim), 3)
    mask_args = masks(mask_kind, batched)
    out, weights = ours(q, k, v, **{key: ta.tensor(m) for key, m in mask_args.items()}, **call)
    tout, tweights = theirs(tq, tk, tv, **{key: torch.tensor(m) for key, m in mask_args.items()},
                            **call)
    assert_close(out, tout)
    if tweights is None:
        assert weights is None
    else:
        assert_close(weights, tweights)
    cotangent = np.random.default_rng(9).normal(size=tuple(tout.shape))
    out.backward(ta.tensor(cotangent))
    tout.backward(torch.tensor(cotangent))
    assert_close(q.grad, tq.grad)
    if not self_attention:
        assert_close(k.grad, tk.grad)
        assert_close(v.grad, tv.grad)
    their_params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        assert_close(param.grad, their_params[name].grad)


@pytest.mark.parametrize("options", [
    {}, {"batch_first": True}, {"bias": False}, {"add_bias_kv": True}, {"add_zero_attn": True},
    {"add_bias_kv": True, "add_zero_attn": True, "batch_first": True},
    {"kdim": 5, "vdim": 3}, {"kdim": 5, "vdim": 3, "add_bias_kv": True, "bias": False},
])
@pytest.mark.parametrize("mask_kind", ["", "attn2d", "attn3d+kpm", "float+attn2d+kpm", "kpm"])
def test_outputs_weights_and_every_gradient_match_torch(options, mask_kind):
    ours, theirs = twins(**options)
    run_both(ours, theirs, batch_first=options.get("batch_first", False),
             kdim=options.get("kdim", E), vdim=options.get("vdim", E), mask_kind=mask_kind)


@pytest.mark.parametrize("call", [
    {"need_weights": False}, {"average_attn_weights": False},
    {"need_weights": False, "impl": "fused"}, {"impl": "composed"},
])
@pytest.mark.parametrize("batch_first", [False, True])
def test_weights_options_and_paths_match_torch(call, batch_first):
    ours, theirs = twins(batch_first=batch_first)
    impl = call.pop("impl", None)
    if impl:
        ours.impl = impl
    run_both(ours, theirs, batch_first=batch_first, mask_kind="attn3d+kpm", **call)


@pytest.mark.parametrize("options", [{}, {"add_bias_kv": True, "add_zero_attn": True}])
@pytest.mark.parametrize("mask_kind", ["", "attn3d+kpm", "float+attn2d"])
def test_unbatched_inputs_match_torch(options, mask_kind):
    ours, theirs = twins(**options)
    run_both(ours, theirs, batched=False, mask_kind=mask_kind, average_attn_weights=False)


@pytest.mark.parametrize("need_weights", [False, True])
def test_self_attention_uses_one_packed_projection_and_matches_torch(need_weights):
    ours, theirs = twins(batch_first=True)
    run_both(ours, theirs, batch_first=True, self_attention=True, need_weights=need_weights)


@pytest.mark.parametrize("need_weights, padding", [(False, False), (True, False),
                                                   (False, True)])
def test_is_causal_hint_with_the_causal_mask_matches_torch(need_weights, padding):
    ours, theirs = twins(batch_first=True)
    q, tq = inputs((B, T, E), 1)
    causal = np.triu(np.ones((T, T), dtype=bool), k=1)
    kpm = np.zeros((B, T), dtype=bool)
    kpm[1, 2] = padding
    extra = {"key_padding_mask": kpm} if padding else {}
    out, _ = ours(q, q, q, attn_mask=ta.tensor(causal), is_causal=True,
                  need_weights=need_weights, **{k: ta.tensor(v) for k, v in extra.items()})
    tout, _ = theirs(tq, tq, tq, attn_mask=torch.tensor(causal), is_causal=True,
                     need_weights=need_weights, **{k: torch.tensor(v) for k, v in extra.items()})
    assert_close(out, tout)


def test_parameter_names_shapes_and_torchs_init():
    torch.manual_seed(0)
    ta.manual_seed(0)
    C = 64
    for options in ({}, {"kdim": 32, "vdim": 16, "add_bias_kv": True}):
        ours = nn.MultiheadAttention(C, 4, **options)
        theirs = torch.nn.MultiheadAttention(C, 4, **options)
        shapes = {name: p.shape for name, p in ours.named_parameters()}
        assert shapes == {name: tuple(p.shape) for name, p in theirs.named_parameters()}
        assert [name for name, _ in ours.named_modules()] == [
            name for name, _ in theirs.named_modules()]
        for name, param in ours.named_parameters():
            values, reference = param.numpy(), dict(theirs.named_parameters())[name]
            reference = reference.detach().numpy()
            if name in ("in_proj_bias", "out_proj.bias"):
                assert not values.any() and not reference.any()
            elif name in ("bias_k", "bias_v"):  # xavier normal of (1, 1, C): std √(2 / 2C)
                assert values.shape == (1, 1, C) and values.std() > 0
            elif name == "out_proj.weight":  # a Linear's init: U(±1/√C)
                assert np.abs(values).max() <= 1 / math.sqrt(C)
            else:  # xavier uniform
                fan_out, fan_in = values.shape
                bound = math.sqrt(6 / (fan_in + fan_out))
                assert np.abs(values).max() <= bound
                assert np.abs(values).max() > 0.98 * bound
                assert np.abs(reference).max() > 0.98 * bound
    assert ours.in_proj_weight is None and ours.q_proj_weight.shape == (C, C)
    assert ours.k_proj_weight.shape == (C, 32) and ours.v_proj_weight.shape == (C, 16)
    assert isinstance(ours.out_proj, nn.Linear)


def test_dropout_acts_only_in_training_and_repeats_under_manual_seed():
    layer = nn.MultiheadAttention(E, H, dropout=0.5, batch_first=True)
    x = ta.randn(2, 6, E)
    ta.manual_seed(1)
    first = layer(x, x, x)
    ta.manual_seed(1)
    second = layer(x, x, x)
    np.testing.assert_array_equal(first[0].numpy(), second[0].numpy())
    sums = first[1].numpy().sum(-1)
    assert not np.allclose(sums, 1.0)  # weights after dropout, as in PyTorch
    layer.eval()
    out, weights = layer(x, x, x)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, rtol=1e-5)


def test_a_fully_masked_query_gets_zeros_not_nan():
    layer = nn.MultiheadAttention(E, H, batch_first=True, bias=False)
    x = ta.randn(1, 3, E)
    blocked = np.zeros((3, 3), dtype=bool)
    blocked[1] = True
    out, weights = layer(x, x, x, attn_mask=ta.tensor(blocked))
    assert np.isfinite(out.numpy()).all()
    assert not out.numpy()[0, 1].any() and not weights.numpy()[0, 1].any()


# ---- conversions with the separate-projection layer ---------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
def test_packed_and_separate_give_the_same_outputs_and_gradients(bias):
    separate = nn.MultiHeadAttention(E, H, bias=bias).double()
    packed = ta.interop.packed(separate)
    assert packed.batch_first and packed.in_proj_weight.dtype == np.float64
    back = ta.interop.separate(packed)
    x = ta.randn(B, T, E, dtype=ta.float64)
    memory = ta.randn(B, S, E, dtype=ta.float64)
    padding = np.zeros((B, S), dtype=bool)
    padding[0, -2:] = True
    for layer in (separate, back):
        expected, expected_weights = layer(x, memory, memory, need_weights=True,
                                           key_padding_mask=ta.tensor(padding))
        out, weights = packed(x, memory, memory, key_padding_mask=ta.tensor(padding))
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(weights.numpy(), expected_weights.numpy(), rtol=1e-12)
    for name, param in back.named_parameters():
        np.testing.assert_array_equal(param.numpy(), dict(separate.named_parameters())[name]
                                      .numpy())
    packed_seq_first = ta.interop.packed(separate, batch_first=False)
    out, _ = packed_seq_first(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
    np.testing.assert_allclose(out.transpose(0, 1).numpy(), separate(x).numpy(), rtol=1e-12,
                               atol=1e-14)


def test_a_causal_separate_layer_equals_the_packed_one_with_a_causal_mask():
    separate = nn.MultiHeadAttention(E, H, causal=True, dropout=0.25).double().eval()
    packed = ta.interop.packed(separate)
    assert packed.dropout == 0.25 and not packed.training
    x = ta.randn(B, T, E, dtype=ta.float64, requires_grad=True)
    causal = ta.tensor(np.triu(np.ones((T, T), dtype=bool), k=1))
    out, _ = packed(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
    np.testing.assert_allclose(out.numpy(), separate(x).numpy(), rtol=1e-12, atol=1e-14)


def test_separate_refuses_layouts_it_cannot_hold():
    for options in ({"kdim": 3}, {"add_bias_kv": True}, {"add_zero_attn": True}):
        with pytest.raises(ValueError, match="separate: only a layer with kdim == vdim"):
            ta.interop.separate(nn.MultiheadAttention(E, H, **options))
    with pytest.raises(TypeError, match="packed: expected a tinyattn.nn.MultiHead"):
        ta.interop.packed(nn.Linear(2, 2))


def test_a_torch_state_dict_round_trips_through_ours():
    ours, theirs = twins(add_bias_kv=True)
    fresh = torch.nn.MultiheadAttention(E, H, add_bias_kv=True, dtype=torch.float64)
    fresh.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    for name, param in fresh.named_parameters():
        assert torch.equal(param, dict(theirs.named_parameters())[name])
