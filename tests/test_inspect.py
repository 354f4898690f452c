"""tinyattn.inspect: backward traces, DOT export, plots, and how reports render."""

import os
import re
import sys

import numpy as np
import pytest
from printed import assert_rounded, number, rounds_to
from strategies import leaf

import tinyattn as ta
from tinyattn import inspect


def attention_graph(x, w_q, w_k, w_v, cotangent):
    """One attention head as primitive ops; returns the loss and its intermediates."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = (q @ k.transpose(0, 1)) * 0.5
    weights = scores.softmax(dim=-1)
    context = weights @ v
    loss = (context * cotangent).sum()
    return loss, [q, k, v, scores, weights, context]


@pytest.fixture
def leaves():
    return [leaf((4, 3), 0), leaf((3, 2), 1), leaf((3, 2), 2), leaf((3, 2), 3)]


def fresh(leaves):
    return [ta.tensor(t.numpy(), requires_grad=True) for t in leaves]


COTANGENT = ta.tensor(np.random.default_rng(7).standard_normal((4, 2)))


def test_trace_gradient_norms_equal_those_of_a_normal_backward(leaves):
    reference = fresh(leaves)
    loss, intermediates = attention_graph(*reference, COTANGENT)
    for t in intermediates:
        t.retain_grad()
    loss.backward()

    traced = fresh(leaves)
    loss2, intermediates2 = attention_graph(*traced, COTANGENT)
    record = inspect.trace(loss2)
    for expected, t in zip(intermediates, intermediates2):
        row = record.row_for(t.grad_fn)
        assert row is not None and row.out_shape == t.shape
        np.testing.assert_allclose(row.grad_norm, np.linalg.norm(expected.grad.numpy()), rtol=1e-12)
    for ref, t in zip(reference, traced):
        np.testing.assert_array_equal(t.grad.numpy(), ref.grad.numpy())  # leaves filled as usual
    # x feeds three matmuls: the input-gradient norms of q = x @ w_q are those of its inputs' grads
    row_q = record.row_for(intermediates2[0].grad_fn)
    x_alone = fresh(leaves)
    (x_alone[0] @ x_alone[1]).backward(intermediates[0].grad.numpy())
    np.testing.assert_allclose(row_q.input_grad_norms,
                               [np.linalg.norm(x_alone[0].grad.numpy()),
                                np.linalg.norm(reference[1].grad.numpy())], rtol=1e-12)


def test_trace_lists_ops_output_side_first_and_marks_inputs_without_grad():
    x = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    record = inspect.trace((x.exp() * ta.tensor([[1.0, 0.0], [0.0, 1.0]])).sum())
    assert [row.name for row in record] == ["Sum", "Mul", "Exp"]
    assert record[1].input_grad_norms[1] is None
    expected = np.linalg.norm(np.exp(x.numpy()) * np.eye(2))
    np.testing.assert_allclose(record[2].input_grad_norms[0], expected, rtol=1e-6)


def test_trace_table_is_aligned_with_one_line_per_op(leaves):
    loss, _ = attention_graph(*fresh(leaves), COTANGENT)
    record = inspect.trace(loss)
    lines = str(record).splitlines()
    assert len(lines) == 2 + len(record)
    assert lines[0].split()[:3] == ["#", "op", "output"]
    column = lines[0].index("|grad out|")
    for line, row in zip(lines[2:], record):
        assert_rounded(number(line[column:].split()[0]), row.grad_norm, 5)  # as 1.2345e-01


def test_trace_rejects_bad_gradients():
    x = ta.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"trace: .* only for one-element outputs"):
        inspect.trace(x * 2.0)
    with pytest.raises(ValueError, match=r"\(3,\)"):
        inspect.trace(x * 2.0, gradient=np.ones(3))
    with pytest.raises(RuntimeError, match="does not require grad"):
        inspect.trace(ta.ones(2))


def graph_counts(root):
    """Independent walk: distinct ops, distinct leaf tensors, and input slots (edges)."""
    ops, tensors, edges, stack = set(), set(), 0, [root.grad_fn]
    while stack:
        node = stack.pop()
        if id(node) in ops:
            continue
        ops.add(id(node))
        for t in node.inputs:
            if not isinstance(t, (ta.Tensor, ta.autograd.ReleasedInput)):
                continue  # an option of the op (a dim, a seed), not an input
            edges += 1
            if t.grad_fn is None:
                tensors.add(id(t))
            else:
                stack.append(t.grad_fn)
    return len(ops), len(tensors), edges


def test_to_dot_has_one_node_per_op_and_leaf_and_one_edge_per_input(leaves):
    loss, _ = attention_graph(*fresh(leaves), COTANGENT)
    n_ops, n_leaves, n_edges = graph_counts(loss)
    dot = inspect.to_dot(loss)
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    nodes = re.findall(r"^\s+([nt]\d+) \[shape=(box|ellipse)", dot, flags=re.M)
    edges = re.findall(r"^\s+([nt]\d+) -> ([nt]\d+)", dot, flags=re.M)
    assert sum(kind == "box" for _, kind in nodes) == n_ops
    assert sum(kind == "ellipse" for _, kind in nodes) == n_leaves
    assert len(edges) == n_edges
    declared = {name for name, _ in nodes}
    assert {a for a, _ in edges} | {b for _, b in edges} <= declared
    assert "Softmax\\n(4, 4)" in dot


def test_to_dot_shows_gradient_norms_of_a_trace_and_parameter_names(leaves):
    x, w_q, w_k, w_v = fresh(leaves)
    loss, intermediates = attention_graph(x, w_q, w_k, w_v, COTANGENT)
    record = inspect.trace(loss, retain_graph=True)
    dot = inspect.to_dot(loss, record, names={"W_query": w_q})
    assert dot.count("|grad|") == len(record) + 4  # every op, and the four leaves
    shown = [number(token) for token in re.findall(r"\|grad\| ([^\s\"\\]+)", dot)]
    assert len(shown) == len(record) + 4
    norm = record.row_for(intermediates[4].grad_fn).grad_norm
    assert any(rounds_to(value, norm, 4) for value in shown)  # printed as 1.234e-01
    assert '"W_query\\n(3, 2)' in dot


def test_to_dot_after_a_freeing_backward_says_what_to_do(leaves):
    loss, _ = attention_graph(*fresh(leaves), COTANGENT)
    inspect.trace(loss)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        inspect.to_dot(loss)


def test_render_without_graphviz_writes_the_dot_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(inspect.dot.shutil, "which", lambda name: None)
    written = inspect.render("digraph { a -> b }", tmp_path / "graph.png")
    assert written == tmp_path / "graph.dot"
    assert written.read_text().strip() == "digraph { a -> b }"
    assert "not installed" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        inspect.render("digraph {}", tmp_path / "graph.pdf")


def is_png(path):
    return path.stat().st_size > 1000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_attention_writes_png_for_one_head_and_many(tmp_path):
    pytest.importorskip("matplotlib")
    weights = np.random.default_rng(0).dirichlet(np.ones(5), size=(3, 4))  # (H, T, S)
    tokens = ["a", "b", "c", "d", "e"]
    assert is_png(inspect.plot_attention(weights, tokens, tmp_path / "heads.png",
                                         query_tokens=tokens[:4], title="three heads"))
    assert is_png(inspect.plot_attention(ta.tensor(weights[0, :, :4]), tokens[:4],
                                         tmp_path / "one.png"))


def test_plot_attention_rejects_bad_shapes_and_labels(tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match=r"\(T, S\) or \(H, T, S\)"):
        inspect.plot_attention(np.ones(4), ["a"] * 4, tmp_path / "x.png")
    with pytest.raises(ValueError, match="3 key labels"):
        inspect.plot_attention(np.ones((3, 3)), ["a", "b"], tmp_path / "x.png")


def test_plot_losses_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    history = {"train": [(i, 2.0 / i) for i in range(1, 50)], "eval": [(10, 0.3), (40, 0.1)]}
    assert is_png(inspect.plot_losses(history, tmp_path / "loss.png"))
    with pytest.raises(ValueError, match="no points"):
        inspect.plot_losses({"train": []}, tmp_path / "empty.png")


def test_plotting_without_matplotlib_says_how_to_install_it(tmp_path, monkeypatch):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r"pip install 'tinyattn\[viz\]'"):
        inspect.plot_losses({"train": [(1, 1.0)]}, tmp_path / "loss.png")


def test_a_graph_shows_inline_as_svg_with_graphviz(tmp_path, monkeypatch):
    fake_dot = tmp_path / "dot"  # stands in for Graphviz: reads DOT, writes an SVG document
    fake_dot.write_text("#!/bin/sh\ncat > /dev/null\n"
                        "printf '<?xml version=\"1.0\"?>\\n<svg><g>graph</g></svg>\\n'\n")
    fake_dot.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    x = ta.ones(2, 2, requires_grad=True)
    dot = inspect.to_dot((x * x).sum())
    assert isinstance(dot, str) and dot.startswith("digraph")
    assert dot._repr_html_() == "<svg><g>graph</g></svg>\n"


def test_without_graphviz_a_graph_shows_its_dot_text_and_how_to_install(monkeypatch):
    monkeypatch.setattr(inspect.dot.shutil, "which", lambda name: None)
    x = ta.ones(2, 2, requires_grad=True)
    dot = inspect.to_dot((x * x).sum())
    html = dot._repr_html_()
    assert "install Graphviz" in html and "<pre>digraph tinyattn {" in html
    assert "#0 Sum" in html


def test_reports_render_as_html_tables_and_stay_text_elsewhere(leaves):
    loss, _ = attention_graph(*fresh(leaves), COTANGENT)
    record = inspect.trace(loss)
    html = record._repr_html_()
    assert html.startswith("<table") and html.count("<tr") == 1 + len(record)
    assert "<" not in str(record)


def test_a_tensor_renders_as_an_html_table_in_jupyter():
    t = ta.tensor([[1.0, 2.5], [3.0, 4.0]], requires_grad=True)
    table = t._repr_html_()
    assert "tensor of shape (2, 2), float32, requires_grad=True" in table
    assert [c for c in re.findall(r"<td>([^<]*)</td>", table)] == ["1.0000", "2.5000",
                                                                   "3.0000", "4.0000"]
    assert repr(t).startswith("tensor([[1.0000, 2.5000],")
    wide = ta.zeros(3, 40)._repr_html_()
    assert wide.count("<th>") == 9 and "…" in wide  # 8 columns and the ellipsis
    cube = ta.zeros(2, 2, 2)._repr_html_()
    assert cube.startswith("<p>tensor of shape (2, 2, 2)") and "<pre>tensor(" in cube


def test_without_a_path_plots_return_the_figure():
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    figure = inspect.plot_attention(np.full((2, 2), 0.5), ["a", "b"])
    assert isinstance(figure, Figure) and len(figure.axes) == 2  # the panel and its colorbar
