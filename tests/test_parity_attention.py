"""PyTorch parity of attention, multi-head attention, the transformer block and the LM.

Float64 throughout, weights copied in; forward values and every gradient must agree to 1e-8
relative to the size of PyTorch's result.
"""

from collections import OrderedDict

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


def assert_close(ours, theirs):
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    ours = ours.numpy() if isinstance(ours, ta.Tensor) else ours
    assert ours.shape == theirs.shape
    # the floor matters only for exact-zero gradients (the key bias: softmax ignores a shift)
    scale = max(float(np.abs(theirs).max()), 1.0e-4)
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-8 * scale)


def pair(array, requires_grad=True):
    """The same float64 data as a tinyattn leaf and a torch leaf."""
    return (ta.tensor(array, dtype=np.float64, requires_grad=requires_grad),
            torch.tensor(array, dtype=torch.float64, requires_grad=requires_grad))


# ---- scaled_dot_product_attention -----------------------------------------------------------
def sdpa_case(kind, L, S, rng, mask_grad):
    """(tinyattn kwargs, torch kwargs, a float mask pair to compare gradients of, or None)."""
    if kind == "none":
        return {}, {}, None
    if kind == "causal":
        return {"is_causal": True}, {"is_causal": True}, None
    if kind == "scale":
        return {"scale": 0.37}, {"scale": 0.37}, None
    if kind == "bool":
        allowed = rng.random((L, S)) > 0.4
        allowed[:, 0] = True  # torch's math path gives NaN on fully masked rows
        return {"attn_mask": ta.tensor(allowed)}, {"attn_mask": torch.tensor(allowed)}, None
    if kind == "bool_padding":
        allowed = np.ones((2, 1, 1, S), dtype=bool)
        allowed[0, ..., -2:] = False
        return {"attn_mask": ta.tensor(allowed)}, {"attn_mask": torch.tensor(allowed)}, None
    ours, theirs = pair(rng.standard_normal((3, 1, S)), mask_grad)  # per head, rows broadcast
    return {"attn_mask": ours}, {"attn_mask": theirs}, (ours, theirs) if mask_grad else None


@pytest.mark.parametrize("impl", ["composed", "fused", "auto"])
@pytest.mark.parametrize("kind", ["none", "bool", "bool_padding", "float", "causal", "scale"])
@pytest.mark.parametrize("L,S", [(5, 5), (4, 6), (6, 3)])
def test_sdpa_matches_torch(impl, kind, L, S):
    rng = np.random.default_rng(L * 7 + S)
    # the fused kernel has no float-mask gradient ('auto' routes such a mask to 'composed')
    ours_kw, torch_kw, mask_pair = sdpa_case(kind, L, S, rng, mask_grad=impl != "fused")
    tensors = [pair(rng.standard_normal(shape)) for shape in
               [(2, 3, L, 4), (2, 3, S, 4), (2, 3, S, 5)]]
    out = ta.F.scaled_dot_product_attention(*(t for t, _ in tensors), impl=impl, **ours_kw)
    expected = torch.nn.functional.scaled_dot_product_attention(*(t for _, t in tensors),
                                                                **torch_kw)
    assert_close(out, expected)
    g = rng.standard_normal(out.shape)
    out.backward(g)
    expected.backward(torch.tensor(g))
    for ours, theirs in tensors + ([mask_pair] if mask_pair else []):
        assert_close(ours.grad, theirs.grad)


# ---- MultiHeadAttention ------------------------------------------------------------------------
def torch_mha(E=8, H=2, bias=True, seed=0):
    torch.manual_seed(seed)
    return torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True, dtype=torch.float64)


def assert_mha_grads_match(ours, theirs):
    E = ours.embed_dim
    projections = (ours.q_proj, ours.k_proj, ours.v_proj)
    for i, proj in enumerate(projections):
        assert_close(proj.weight.grad, theirs.in_proj_weight.grad[i * E:(i + 1) * E])
        if ours.bias:
            assert_close(proj.bias.grad, theirs.in_proj_bias.grad[i * E:(i + 1) * E])
    assert_close(ours.out_proj.weight.grad, theirs.out_proj.weight.grad)
    if ours.bias:
        assert_close(ours.out_proj.bias.grad, theirs.out_proj.bias.grad)


@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("weights", ["none", "averaged", "per_head"])
def test_multi_head_attention_matches_torch(padding, causal, weights):
    rng = np.random.default_rng(3)
    theirs = torch_mha(seed=1)
    ours = ta.interop.from_torch(theirs)
    x, x_t = pair(rng.standard_normal((2, 5, 8)))
    kw = {}
    torch_kw = {"need_weights": weights != "none", "average_attn_weights": weights == "averaged"}
    if padding:
        kpm = np.zeros((2, 5), dtype=bool)
        kpm[0, 3:] = True
        kw["key_padding_mask"], torch_kw["key_padding_mask"] = kpm, torch.tensor(kpm)
    if causal:
        mask = ~np.tril(np.ones((5, 5), dtype=bool))
        kw["attn_mask"], torch_kw["attn_mask"] = mask, torch.tensor(mask)
    result = ours(x, need_weights=weights != "none", average_attn_weights=weights == "averaged",
                  **kw)
    expected = theirs(x_t, x_t, x_t, **torch_kw)
    out, attn = result if weights != "none" else (result, None)
    assert_close(out, expected[0])
    if attn is not None:
        assert attn.shape == ((2, 5, 5) if weights == "averaged" else (2, 2, 5, 5))
        assert_close(attn, expected[1])
    g = rng.standard_normal(out.shape)
    out.backward(g)
    expected[0].backward(torch.tensor(g))
    assert_close(x.grad, x_t.grad)
    assert_mha_grads_match(ours, theirs)


@pytest.mark.parametrize("bias", [True, False])
def test_cross_attention_with_float_padding_mask_matches_torch(bias):
    rng = np.random.default_rng(4)
    theirs = torch_mha(E=6, H=3, bias=bias, seed=2)
    ours = ta.interop.from_torch(theirs)
    (q, q_t), (k, k_t), (v, v_t) = (pair(rng.standard_normal(s)) for s in
                                    [(2, 4, 6), (2, 7, 6), (2, 7, 6)])
    kpm = np.where(rng.random((2, 7)) > 0.3, 0.0, -np.inf)
    kpm[:, 0] = 0.0
    per_head = rng.standard_normal((2 * 3, 4, 7))  # (B·H, L, S) additive mask
    out, attn = ours(q, k, v, key_padding_mask=kpm, attn_mask=per_head, need_weights=True)
    out_t, attn_t = theirs(q_t, k_t, v_t, key_padding_mask=torch.tensor(kpm),
                           attn_mask=torch.tensor(per_head))
    assert_close(out, out_t)
    assert_close(attn, attn_t)
    g = rng.standard_normal(out.shape)
    out.backward(g)
    out_t.backward(torch.tensor(g))
    for mine, reference in ((q, q_t), (k, k_t), (v, v_t)):
        assert_close(mine.grad, reference.grad)
    assert_mha_grads_match(ours, theirs)


def test_to_torch_and_from_torch_round_trip():
    ta.manual_seed(3)
    ours = ta.nn.MultiHeadAttention(8, 4, dropout=0.25).double().eval()
    theirs = ta.interop.to_torch(ours)
    assert isinstance(theirs, torch.nn.MultiheadAttention) and theirs.batch_first
    assert theirs.dropout == 0.25 and not theirs.training
    back = ta.interop.from_torch(theirs)
    for (name, a), (_, b) in zip(ours.state_dict().items(), back.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    x, x_t = pair(np.random.default_rng(5).standard_normal((3, 6, 8)), requires_grad=False)
    assert_close(ours(x), theirs(x_t, x_t, x_t, need_weights=False)[0])


def test_unbatched_multi_head_attention_matches_torch():
    rng = np.random.default_rng(6)
    theirs = torch_mha(seed=4)
    ours = ta.interop.from_torch(theirs)
    x, x_t = pair(rng.standard_normal((5, 8)))
    kpm = np.array([False, False, False, True, True])
    out, attn = ours(x, key_padding_mask=kpm, need_weights=True)
    out_t, attn_t = theirs(x_t, x_t, x_t, key_padding_mask=torch.tensor(kpm))
    assert_close(out, out_t)
    assert_close(attn, attn_t)


# ---- TransformerBlock and TransformerLM ------------------------------------------------------
class TorchBlock(torch.nn.Module):
    """The pre-LN block from torch modules, with tinyattn's submodule names."""

    def __init__(self, C, H, ratio=4):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(C, dtype=torch.float64)
        self.attn = torch.nn.MultiheadAttention(C, H, batch_first=True, dtype=torch.float64)
        self.ln_2 = torch.nn.LayerNorm(C, dtype=torch.float64)
        self.mlp = torch.nn.Sequential(OrderedDict(
            fc=torch.nn.Linear(C, ratio * C, dtype=torch.float64), gelu=torch.nn.GELU(),
            proj=torch.nn.Linear(ratio * C, C, dtype=torch.float64),
        ))

    def forward(self, x):
        T = x.shape[1]
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=future, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class TorchLM(torch.nn.Module):
    def __init__(self, vocab, context, C, H, layers):
        super().__init__()
        self.token_embedding = torch.nn.Embedding(vocab, C, dtype=torch.float64)
        self.position_embedding = torch.nn.Embedding(context, C, dtype=torch.float64)
        self.blocks = torch.nn.ModuleList(TorchBlock(C, H) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(C, dtype=torch.float64)
        self.lm_head = torch.nn.Linear(C, vocab, dtype=torch.float64)

    def forward(self, idx):
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def split_in_proj(name, value):
    """torch names/arrays -> tinyattn names/arrays (the packed in_proj split into q, k, v)."""
    if ".in_proj_" not in name:
        return {name: value}
    prefix, kind = name.split(".in_proj_")
    return {f"{prefix}.{role}.{kind}": part
            for role, part in zip(("q_proj", "k_proj", "v_proj"), np.split(value, 3))}


def copy_from_torch(ours, theirs):
    state = {}
    for name, value in theirs.state_dict().items():
        state.update(split_in_proj(name, value.numpy()))
    ours.double().load_state_dict(state)


def assert_all_grads_match(ours, theirs):
    grads = dict(ours.named_parameters())
    for name, param in theirs.named_parameters():
        for our_name, expected in split_in_proj(name, param.grad.numpy()).items():
            assert_close(grads[our_name].grad, expected)


def test_transformer_block_matches_torch():
    torch.manual_seed(5)
    theirs = TorchBlock(8, 2)
    ours = ta.nn.TransformerBlock(8, 2)
    copy_from_torch(ours, theirs)
    x, x_t = pair(np.random.default_rng(7).standard_normal((2, 6, 8)))
    out, out_t = ours(x), theirs(x_t)
    assert_close(out, out_t)
    g = np.random.default_rng(8).standard_normal(out.shape)
    out.backward(g)
    out_t.backward(torch.tensor(g))
    assert_close(x.grad, x_t.grad)
    assert_all_grads_match(ours, theirs)


def test_transformer_lm_matches_torch_logits_loss_and_grads():
    torch.manual_seed(6)
    theirs = TorchLM(vocab=13, context=8, C=8, H=2, layers=2)
    ours = ta.TransformerLM(ta.models.TransformerLMConfig(13, 8, 8, 2, 2))
    copy_from_torch(ours, theirs)
    rng = np.random.default_rng(9)
    idx, targets = rng.integers(0, 13, (3, 7)), rng.integers(0, 13, (3, 7))
    logits, loss = ours(ta.tensor(idx), targets=ta.tensor(targets))
    logits_t = theirs(torch.tensor(idx))
    loss_t = torch.nn.functional.cross_entropy(logits_t.reshape(21, 13), torch.tensor(
        targets).reshape(21))
    assert_close(logits, logits_t)
    assert_close(loss, loss_t)
    loss.backward()
    loss_t.backward()
    assert_all_grads_match(ours, theirs)


def test_benchmark_lm_has_421697_parameters_like_the_torch_layout():
    config = ta.models.TransformerLMConfig(vocab_size=65, context_length=64, embed_dim=128,
                                           num_heads=4, num_layers=2)
    ours = sum(p.numel() for p in ta.TransformerLM(config).parameters())
    theirs = sum(p.numel() for p in TorchLM(65, 64, 128, 4, 2).parameters())
    assert ours == theirs == 421_697
