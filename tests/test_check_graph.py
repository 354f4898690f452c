"""inspect.check_graph: every node's backward against finite differences, on live graphs."""

import re
from collections import OrderedDict

import numpy as np
import pytest
from printed import number

import tinyattn as ta
from tinyattn import inspect
from tinyattn.autograd import Function, ReleasedInput


class Swish(Function):
    """``y = x σ(x)``; ``dx = g (σ + x σ (1 − σ))``."""

    @staticmethod
    def forward(ctx, x):
        sigma = 1.0 / (1.0 + (-x).exp())
        ctx.save_for_backward(x, sigma)
        return x * sigma

    @staticmethod
    def backward(ctx, grad):
        x, sigma = ctx.saved_tensors
        return grad * (sigma + x * sigma * (1.0 - sigma))


class SwishWithoutProductRule(Swish):
    """A classic mistake: differentiating ``x σ(x)`` as if σ were a constant."""

    @staticmethod
    def backward(ctx, grad):
        _, sigma = ctx.saved_tensors
        return grad * sigma


class Activation(ta.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn.apply(x)


def small_lm(dropout=0.0, impl="auto", seed=0):
    ta.manual_seed(seed)
    config = ta.models.TransformerLMConfig(vocab_size=11, context_length=8, embed_dim=16,
                                           num_heads=2, num_layers=2, dropout=dropout, impl=impl)
    return ta.TransformerLM(config)


def tokens(seed=0, shape=(2, 6)):
    return ta.tensor(np.random.default_rng(seed).integers(0, 11, shape))


def independent_order(root):
    """The graph's nodes, output side first, by a walk of its own (Kahn's algorithm)."""
    nodes, stack = {}, [root.grad_fn]
    while stack:
        node = stack.pop()
        if id(node) not in nodes:
            nodes[id(node)] = node
            stack += [e for e in node.edges if isinstance(e, ta.autograd.Context)]
    users = {key: 0 for key in nodes}
    for node in nodes.values():
        for e in node.edges:
            if isinstance(e, ta.autograd.Context):
                users[id(e)] += 1
    return users, nodes


@pytest.mark.parametrize("impl", ["composed", "fused"])
def test_every_node_of_a_causal_dropout_attention_passes(impl):
    ta.manual_seed(3)
    q, k, v = (ta.randn(2, 2, 5, 4, requires_grad=True) for _ in range(3))
    out = ta.F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.3, impl=impl)
    report = inspect.check_graph((out * ta.randn(2, 2, 5, 4)).sum())
    assert report.ok, str(report)
    names = [n.name for n in report.nodes]
    if impl == "fused":
        assert "FusedAttention" in names and "Softmax" not in names
    else:
        assert {"Softmax", "MaskedFill", "MatMul"} <= set(names)
    assert all(n.status == "ok" for n in report.nodes if n.checked)


def test_a_transformer_lm_with_dropout_passes_node_by_node():
    model = small_lm(dropout=0.2)
    _, loss = model(tokens(), targets=tokens(1))
    report = inspect.check_graph(loss)
    users, nodes = independent_order(loss)
    assert report.ok, str(report)
    assert len(report.nodes) == len(nodes)
    by_name = {n.name: n for n in report.nodes}
    assert by_name["Embedding"].checked == (0,)  # the integer indices are held fixed
    assert by_name["CrossEntropy"].checked == (0,)  # so are the integer targets
    assert {"Dropout", "FusedAttention", "LayerNorm", "Gelu"} <= set(by_name)
    # numbering: #0 produced the output, every node after all the nodes that use it
    assert [n.index for n in report.nodes] == list(range(len(nodes)))
    assert report.nodes[0].name == loss.grad_fn.name


def test_a_wrong_custom_function_inside_a_real_model_is_caught_and_named():
    model = small_lm()
    block = model.blocks[1]
    mlp = block.mlp
    block.mlp = ta.nn.Sequential(OrderedDict(
        fc=mlp.fc, act=Activation(SwishWithoutProductRule), proj=mlp.proj))
    _, loss = model(tokens(), targets=tokens(1))
    users, nodes = independent_order(loss)
    report = inspect.check_graph(loss)
    assert not report.ok
    assert [n.name for n in report.failures] == ["SwishWithoutProductRule"]
    first = report.first_failure
    assert report.nodes[first.index] is first
    assert first.max_rel_error > 0.05
    assert f"first failing node: #{first.index} SwishWithoutProductRule" in str(report)
    assert "FAIL" in str(report)
    # the same model with the correct rule passes: the check tells the two apart
    block.mlp = ta.nn.Sequential(OrderedDict(fc=mlp.fc, act=Activation(Swish), proj=mlp.proj))
    _, loss = model(tokens(), targets=tokens(1))
    assert inspect.check_graph(loss).ok


def test_a_float32_backward_ten_percent_off_is_caught():
    class ScaledWrong(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2.2 * x

    x = ta.randn(40, requires_grad=True)  # float32, probed along random directions
    report = inspect.check_graph((ScaledWrong.apply(x) * ta.randn(40)).sum())
    assert [n.name for n in report.failures] == ["ScaledWrong"]
    assert 0.05 < report.first_failure.max_rel_error < 0.2


def test_a_wrong_linear_op_is_caught_though_its_inputs_were_not_kept():
    class DoubledAdd(Function):
        keeps_inputs = False  # linear: the graph keeps only the inputs' shapes

        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, grad):
            return grad, 2.0 * grad  # wrong for b

    x = ta.randn(5, 4, dtype=ta.float64, requires_grad=True)
    y = DoubledAdd.apply(x * 2.0, x.exp())
    report = inspect.check_graph((y * y).sum())
    assert isinstance(y.grad_fn.inputs[0], ReleasedInput)  # rerun on random values instead
    assert [n.name for n in report.failures] == ["DoubledAdd"]
    assert report.first_failure.max_rel_error > 0.4
    assert [n.status for n in report.nodes if n.name != "DoubledAdd"] == ["ok"] * 4


def test_pytorch_shaped_code_is_checked_node_by_node():
    import tinyattn as torch
    from tinyattn import nn
    from tinyattn.nn import functional as F

    class CausalHead(nn.Module):
        def __init__(self, d_in, d_out, context_length, dropout):
            super().__init__()
            self.W_query = nn.Linear(d_in, d_out, bias=False)
            self.W_key = nn.Linear(d_in, d_out, bias=False)
            self.W_value = nn.Linear(d_in, d_out, bias=False)
            self.dropout = nn.Dropout(dropout)
            self.mask = torch.triu(torch.ones(context_length, context_length), diagonal=1)

        def forward(self, x):
            b, num_tokens, d_in = x.shape
            queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
            scores = queries @ keys.transpose(1, 2)
            scores = scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
            weights = torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1)
            return self.dropout(weights) @ values

    torch.manual_seed(123)
    embedding = nn.Embedding(10, 8)
    head = CausalHead(8, 4, context_length=6, dropout=0.25)
    classifier = nn.Linear(4, 10)
    ids = torch.tensor([[1, 4, 2, 7, 3, 3], [0, 9, 8, 1, 1, 5]])
    logits = classifier(F.gelu(head(embedding(ids))))
    loss = F.cross_entropy(logits.reshape(-1, 10), ids.reshape(-1))
    report = inspect.check_graph(loss)
    assert report.ok, str(report)
    assert {"MaskedFill", "Softmax", "Dropout", "Div", "Embedding"} <= {n.name for n in
                                                                        report.nodes}


def test_a_kink_is_reported_as_such_not_as_a_failure():
    x = ta.tensor([-1.0, 0.0, 2.0, 0.0, 3.0], dtype="float64", requires_grad=True)
    report = inspect.check_graph((ta.relu(x) * ta.tensor([1.0, 2.0, 3.0, 4.0, 5.0])).sum())
    relu = next(n for n in report.nodes if n.name == "Relu")
    assert relu.status == "kink"
    assert number(re.search(r"(\S+) probes at a kink", relu.note).group(1)) == 2  # x has two 0s
    assert report.ok


def reaches(node, leaf):
    """Whether a gradient sent from ``node`` can reach ``leaf`` (an independent walk)."""
    stack = list(node.edges)
    while stack:
        edge = stack.pop()
        if edge is leaf:
            return True
        if isinstance(edge, ta.autograd.Context):
            stack += list(edge.edges)
    return False


def test_inputs_restricts_the_check_to_the_nodes_that_reach_them():
    ta.manual_seed(0)
    x = ta.randn(4, 3)
    w_q, w_k = ta.randn(3, 2, requires_grad=True), ta.randn(3, 2, requires_grad=True)
    scores = (x @ w_q) @ (x @ w_k).transpose(0, 1)
    loss = (scores.softmax(dim=-1) * ta.randn(4, 4)).sum()
    _, nodes = independent_order(loss)
    expected = sorted(n.name for n in nodes.values() if reaches(n, w_q))
    only_q = inspect.check_graph(loss, inputs=w_q)
    assert sorted(n.name for n in only_q.nodes) == expected
    assert len(only_q.nodes) == len(nodes) - 2  # not x @ w_k, nor its transpose
    everything = inspect.check_graph(loss)  # the same numbering, whatever is checked
    for node in only_q.nodes:
        same = everything.nodes[node.index]
        assert (same.name, same.input_shapes) == (node.name, node.input_shapes)
    with pytest.raises(ValueError, match="not in the graph of the output"):
        inspect.check_graph(loss, inputs=ta.randn(3, 2, requires_grad=True))


def test_the_graph_is_left_usable_and_unchanged():
    model = small_lm()
    _, loss = model(tokens(), targets=tokens(1))
    inspect.check_graph(loss)
    loss.backward()
    checked = {name: p.grad.numpy().copy() for name, p in model.named_parameters()}
    model.zero_grad()
    _, again = model(tokens(), targets=tokens(1))
    again.backward()
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(checked[name], p.grad.numpy(), err_msg=name)


def test_bad_input_gets_a_clear_error():
    x = ta.randn(3, requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="freed by a backward pass.*retain_graph=True"):
        inspect.check_graph(loss)
    with pytest.raises(RuntimeError, match="not in a graph: it has no grad_fn"):
        inspect.check_graph(ta.randn(3))
    with pytest.raises(TypeError, match="expected a Tensor, got ndarray"):
        inspect.check_graph(np.ones(3))
    kept = (x * x).sum()
    kept.backward(retain_graph=True)
    assert inspect.check_graph(kept).ok  # a retained graph can still be checked


def test_the_report_is_a_table_in_text_and_in_html():
    x = ta.randn(3, 4, dtype="float64", requires_grad=True)
    report = inspect.check_graph(SwishWithoutProductRule.apply(x).sum())
    lines = str(report).splitlines()
    assert lines[0].split()[:3] == ["#", "op", "input"]
    assert len(lines) == 2 + len(report.nodes) + 1
    html = report._repr_html_()
    assert html.startswith("<table") and html.count("<tr") == 1 + len(report.nodes)
    assert 'style="background: #fdd"' in html and "SwishWithoutProductRule" in html
