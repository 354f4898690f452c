"""inspect.explain: the symbolic gradient path, derived from the recorded graph."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import inspect


def one_head(scale=0.5, seed=0):
    """The head of the README's table: Q = X W_q, ..., S = Q Kᵀ · s, P = softmax(S), O = P V."""
    ta.manual_seed(seed)
    x = ta.randn(5, 4)
    w_q, w_k, w_v = (ta.randn(4, 3, requires_grad=True) for _ in range(3))
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = ((q @ k.transpose(0, 1)) * scale).softmax(dim=-1)
    loss = ((weights @ v) * ta.randn(5, 3)).sum()
    return loss, {"X": x, "W_q": w_q, "W_k": w_k, "W_v": w_v}


def test_the_known_paths_of_one_head_are_derived():
    # by hand: dV = Pᵀ dO, dP = dO Vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)), dQ = dS · s · K,
    # dK = (dS · s)ᵀ Q = s · dSᵀ · Q, and dW = Xᵀ dQ (resp. dK, dV) for Q = X W
    loss, names = one_head()
    w_q = inspect.explain(names["W_q"], loss, names=names)
    assert w_q.formula == "dW_q = Xᵀ · (dS · s · K)"
    assert inspect.explain(names["W_k"], loss, names=names).formula == "dW_k = Xᵀ · (s · dSᵀ · Q)"
    assert inspect.explain(names["W_v"], loss, names=names).formula == \
        "dW_v = Xᵀ · (Pᵀ · (broadcast(dL) ⊙ C0))"
    rules = {step.symbol: step.rule for step in w_q.steps}
    assert rules["dP"] == "dO · Vᵀ"
    assert rules["dS"] == "P ⊙ (dP − rowsum(dP ⊙ P))"
    assert w_q.paths == 1


def test_the_chain_names_the_nodes_the_formula_came_through():
    loss, names = one_head()
    explanation = inspect.explain(names["W_q"], loss, names=names)
    trace = inspect.trace(loss, retain_graph=True)
    assert [trace[i].name for i in explanation.chain] == ["Softmax", "Mul", "MatMul", "MatMul"]
    assert [trace[i].out_shape for i in explanation.chain] == [(5, 5), (5, 5), (5, 5), (5, 3)]
    text = str(explanation)
    assert text.splitlines()[0] == "dW_q = Xᵀ · (dS · s · K)"
    assert "#3 Softmax (5, 5): dS = P ⊙ (dP − rowsum(dP ⊙ P))" in text


def test_layers_with_pytorch_weight_layout_and_the_fused_path():
    # nn.Linear computes x Wᵀ, so dW = dQᵀ X; the fused op states dQ = s · dS · K itself
    ta.manual_seed(1)
    x = ta.randn(2, 5, 4)
    head = ta.nn.SelfAttention(4, 3, causal=True, impl="fused")
    loss = (head(x) * ta.randn(2, 5, 3)).sum()
    names = {"X": x, "W_q": head.q_proj.weight}
    fused = inspect.explain(head.q_proj.weight, loss, names=names)
    assert fused.formula == "dW_q = dQᵀ · X"
    assert any(s.name == "FusedAttention" and s.rule.startswith("s · dS · K  with dS = P ⊙ "
                                                                 "(dO · Vᵀ − δ)")
               for s in fused.steps)
    head.impl = "composed"
    loss = (head(x) * ta.randn(2, 5, 3)).sum()
    composed = inspect.explain(head.q_proj.weight, loss, names=names)
    assert composed.formula == "dW_q = (Kᵀ · s · (dS ⊙ ¬M)ᵀ) · X"  # the causal mask M


def test_a_tensor_used_twice_gets_both_terms():
    x = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    loss = (x @ x).sum()
    explanation = inspect.explain(x, loss, names={"X": x})
    assert explanation.formula == "dX = broadcast(dL) · Xᵀ + Xᵀ · broadcast(dL)"
    assert explanation.paths == 2
    assert all(step.accumulates for step in explanation.steps if step.symbol == "dX")


def test_residual_paths_of_a_transformer_are_counted():
    ta.manual_seed(0)
    config = ta.models.TransformerLMConfig(11, 8, 16, 2, num_layers=2)
    model = ta.TransformerLM(config)
    idx = ta.tensor(np.random.default_rng(0).integers(0, 11, (2, 6)))
    _, loss = model(idx, targets=idx)
    weight = model.blocks[0].attn.q_proj.weight
    explanation = inspect.explain(weight, loss, names=model)
    # block 0's attention output reaches the loss through 2 sublayers of block 1, each
    # either skipped (residual) or taken: through attention (q, k or v: 3 ways) or not, and
    # through the MLP or not: (1 + 3) · 2 paths from block 1, times 2 in block 0's own MLP
    assert explanation.paths == 16
    assert explanation.formula.startswith("dblocks.0.attn.q_proj.weight = reshape(permute(dQ₀")
    assert explanation.steps[0].name == "CrossEntropy"


def test_bad_input_gets_a_clear_error():
    loss, names = one_head()
    with pytest.raises(ValueError, match="not in the graph of the output"):
        inspect.explain(ta.randn(4, 3, requires_grad=True), loss)
    with pytest.raises(TypeError, match="names\\['X'\\] must be a Tensor"):
        inspect.explain(names["W_q"], loss, names={"X": 3})
    loss.backward()
    with pytest.raises(RuntimeError, match="freed"):
        inspect.explain(names["W_q"], loss)
    with pytest.raises(RuntimeError, match="not in a graph"):
        inspect.explain(names["W_q"], ta.ones(2))
