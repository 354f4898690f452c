"""Every kernel fast path equals the rule it stands in for.

An op whose forward is a numba kernel may take a kernel for its first-order backward (when no
graph is being built); its one rule, written in tensor ops, runs under ``create_graph``. Here
each op's ``backward`` runs both ways on the same node — with grad mode off (the fast path) and
on (the rule) — and the gradients must agree to float64 rounding.
"""

import numpy as np
import pytest
import tinyattn.nn.functional as F

import tinyattn as ta

RNG = np.random.default_rng(0)


def tensor(*shape, requires_grad=True, scale=1.0):
    return ta.tensor(RNG.standard_normal(shape) * scale, dtype=ta.float64,
                     requires_grad=requires_grad)


def both_ways(output):
    """The node's backward on a random cotangent: fast path (grad mode off), then the rule
    (grad mode on)."""
    node = output.grad_fn
    grad = ta.tensor(RNG.standard_normal(output.shape), dtype=output.dtype)
    with ta.no_grad():
        fast = node.fn.backward(node, grad)
    with ta.enable_grad():
        rule = node.fn.backward(node, grad)
    fast = fast if isinstance(fast, tuple) else (fast,)
    rule = rule if isinstance(rule, tuple) else (rule,)
    return node, fast, rule


CASES = {
    "matmul": lambda: tensor(3, 4) @ tensor(4, 5),
    "batched matmul, broadcast": lambda: tensor(2, 3, 4) @ tensor(4, 6),
    "linear": lambda: F.linear(tensor(2, 3, 4), tensor(5, 4), tensor(5)),
    "linear without bias": lambda: F.linear(tensor(6, 4), tensor(5, 4)),
    "linear the matmul kernel tiles, bias summed in Gᵀ X": lambda: F.linear(
        tensor(3, 40, 64), tensor(96, 64), tensor(96)),
    "softmax": lambda: tensor(3, 7).softmax(dim=-1),
    "softmax along dim 0": lambda: tensor(4, 3, 2).softmax(dim=0),
    "log_softmax": lambda: tensor(3, 7).log_softmax(dim=1),
    "layer_norm": lambda: F.layer_norm(tensor(2, 3, 8), (8,), tensor(8), tensor(8)),
    "layer_norm over two dims, no affine": lambda: F.layer_norm(tensor(2, 3, 4), (3, 4)),
    "gelu": lambda: F.gelu(tensor(5, 6, scale=2.0)),
    "gelu tanh": lambda: F.gelu(tensor(5, 6, scale=2.0), approximate="tanh"),
    "cross_entropy mean": lambda: F.cross_entropy(tensor(6, 5), ta.tensor([0, 4, 2, 2, 1, 3])),
    "cross_entropy mean, ignore_index": lambda: F.cross_entropy(  # 'mean' over 4 rows, not 6
        tensor(6, 5), ta.tensor([0, -1, 2, 2, -1, 3]), ignore_index=-1),
    "cross_entropy sum, ignore_index, smoothing": lambda: F.cross_entropy(
        tensor(6, 5), ta.tensor([0, -1, 2, 2, -1, 3]), ignore_index=-1, reduction="sum",
        label_smoothing=0.1),
    "cross_entropy none, (N, C, d)": lambda: F.cross_entropy(
        tensor(2, 5, 3), ta.tensor([[0, 1, 4], [2, 2, 3]]), reduction="none"),
    "embedding": lambda: F.embedding(ta.tensor([[1, 3, 1], [0, 3, 2]]), tensor(5, 4)),
    "embedding with padding": lambda: F.embedding(ta.tensor([[1, 3, 1], [0, 3, 2]]),
                                                  tensor(5, 4), padding_idx=1),
    "embedding with padding row 0": lambda: F.embedding(ta.tensor([[1, 0, 1], [0, 3, 2]]),
                                                        tensor(5, 4), padding_idx=0),
    "fused attention": lambda: F.scaled_dot_product_attention(
        tensor(2, 2, 5, 4), tensor(2, 2, 6, 4), tensor(2, 2, 6, 3), impl="fused"),
    "fused attention, causal": lambda: F.scaled_dot_product_attention(
        tensor(2, 2, 5, 4), tensor(2, 2, 5, 4), tensor(2, 2, 5, 4), is_causal=True,
        impl="fused"),
    "fused attention, grouped heads, window": lambda: F.scaled_dot_product_attention(
        tensor(1, 4, 6, 4), tensor(1, 2, 6, 4), tensor(1, 2, 6, 4), is_causal=True,
        enable_gqa=True, window_size=3, impl="fused"),
    "fused attention, dropout": lambda: F.scaled_dot_product_attention(
        tensor(2, 2, 5, 4), tensor(2, 2, 5, 4), tensor(2, 2, 5, 4), dropout_p=0.3,
        impl="fused"),
    "fused attention, float mask": lambda: F.scaled_dot_product_attention(
        tensor(2, 2, 5, 4), tensor(2, 2, 6, 4), tensor(2, 2, 6, 4),
        attn_mask=tensor(5, 6, requires_grad=False), impl="fused"),
    "fused attention, bool mask": lambda: F.scaled_dot_product_attention(
        tensor(2, 2, 5, 4), tensor(2, 2, 6, 4), tensor(2, 2, 6, 4),
        attn_mask=ta.tensor(RNG.random((2, 1, 5, 6)) > 0.3), impl="fused"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_fast_path_equals_the_rule(case):
    ta.manual_seed(1)
    node, fast, rule = both_ways(CASES[case]())
    compared = 0
    for i, (f, r) in enumerate(zip(fast, rule)):
        if not node.needs_input_grad[i] if i < len(node.needs_input_grad) else True:
            continue
        assert (f is None) == (r is None), f"input {i}: one way gave no gradient"
        if f is None:
            continue
        r = ta.autograd.engine.unbroadcast(r.detach(), f.shape) if r.shape != f.shape else r
        np.testing.assert_allclose(f.numpy(), r.detach().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"{node.name}, input {i}")
        compared += 1
    assert compared >= 1


def test_the_rule_is_what_create_graph_records():
    x = tensor(3, 4)
    y = x.softmax(dim=-1)
    (g,) = ta.autograd.grad(y, x, ta.ones_like(y) * tensor(3, 4, requires_grad=False),
                            create_graph=True)
    assert g.grad_fn is not None  # the rule ran recorded
    (plain,) = ta.autograd.grad(x.softmax(dim=-1), x, ta.ones_like(y) * 1.0)
    assert plain.grad_fn is None  # the fast path records nothing


def test_a_wrong_fast_path_would_be_seen(monkeypatch):
    """The comparison above can fail: a fast path with a planted slip disagrees."""
    import importlib

    softmax_module = importlib.import_module("tinyattn.ops.softmax")

    def forgetful(y, g):
        return y * g  # the row-sum term forgotten

    monkeypatch.setattr(softmax_module, "softmax_backward", forgetful)
    node, fast, rule = both_ways(tensor(3, 7).softmax(dim=-1))
    assert not np.allclose(fast[0].numpy(), rule[0].detach().numpy())
