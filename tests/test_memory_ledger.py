"""inspect.memory_ledger: every array a graph saves for backward, with exact byte counts."""

import re

import numpy as np
import pytest
from printed import number

import tinyattn as ta
from tinyattn import inspect

B, H, T, D = 2, 2, 12, 4  # D != T, so that only the weights have two trailing dims of T


def saved_arrays(value):
    """Every ndarray inside a saved value, by an independent walk."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, ta.Tensor):
        return [value.numpy()]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [a for item in value for a in saved_arrays(item)]
    return []


def attention_loss(impl, dropout=0.0):
    ta.manual_seed(0)
    layer = ta.nn.MultiHeadAttention(H * D, H, causal=True, dropout=dropout, impl=impl)
    x = ta.randn(B, T, H * D)
    return (layer(x) * ta.randn(B, T, H * D)).sum()


@pytest.mark.parametrize("impl", ["composed", "fused"])
def test_byte_counts_are_the_arrays_nbytes(impl):
    loss = attention_loss(impl, dropout=0.1)
    ledger = inspect.memory_ledger(loss)
    order = ta.autograd.engine.topological_order([loss.grad_fn])
    expected = [a for node in order for _, value in node.kept_for_backward()
                for a in saved_arrays(value)]
    assert [e.nbytes for e in ledger.entries] == [a.nbytes for a in expected]
    assert [e.shape for e in ledger.entries] == [a.shape for a in expected]
    assert ledger.total_bytes == sum(a.nbytes for a in expected)
    printed = re.search(r"saved arrays: (?:\S+ [KM]iB \()?(\S+) B\)? in total", str(ledger))
    assert number(printed.group(1)) == ledger.total_bytes  # the whole figure: not 12,345 for 2,345


def test_the_composed_path_keeps_the_weights_and_the_fused_path_only_out_and_lse():
    composed = inspect.memory_ledger(attention_loss("composed"))
    fused = inspect.memory_ledger(attention_loss("fused"))
    weights = B * H * T * T * 4  # one float32 (B, H, T, T) array
    assert composed.lengths == fused.lengths == {(T, T)}
    quadratic = [e for e in composed.entries if e.quadratic]
    assert {e.name for e in quadratic} == {"Softmax", "MatMul", "MaskedFill"}
    assert composed.quadratic_bytes == weights + T * T  # the weights once, and the bool mask
    assert not any(e.quadratic for e in fused.entries)
    assert fused.quadratic_bytes == 0
    lse = [e for e in fused.entries if e.name == "FusedAttention" and e.shape == (B, H, T)]
    assert len(lse) == 1 and lse[0].nbytes == B * H * T * 4
    out = [e for e in fused.entries if e.name == "FusedAttention" and e.item == "saved[3]"]
    assert out[0].shape == (B, H, T, D)


def test_the_fused_output_and_the_output_projections_input_are_one_array():
    ledger = inspect.memory_ledger(attention_loss("fused"))
    out = next(e for e in ledger.entries if e.name == "FusedAttention" and e.item == "saved[3]")
    merged = [e for e in ledger.entries if e.name == "Linear" and e.shape == (B, T, H * D)
              and e.item == "saved[0]" and e.index < out.index]  # out_proj's input
    assert len(merged) == 1 and out.shared_with == f"#{merged[0].index} saved[0]"
    # q, k, v are saved as the strided heads of the projections' outputs, not as copies
    projections = [e for e in ledger.entries if e.name == "FusedAttention" and e.index == out.index
                   and e.item in ("saved[0]", "saved[1]", "saved[2]")]
    assert len(projections) == 3 and all(e.shape == (B, H, T, D) for e in projections)
    loss = attention_loss("fused")
    fused = next(n for n in ta.autograd.engine.topological_order([loss.grad_fn])
                 if n.name == "FusedAttention")
    for tensor, saved in zip(fused.inputs, fused.saved_tensors[:3]):
        assert saved is tensor and tensor.grad_fn.name == "Permute"
        # a (B, T, H, D) projection, not a copy
        assert saved.numpy().transpose(0, 2, 1, 3).flags.c_contiguous


def test_shared_memory_is_counted_once():
    x = ta.randn(6, 5, requires_grad=True)
    w = ta.randn(5, 5, requires_grad=True)
    loss = ((x @ w) * (x @ w)).sum()  # two products save x and w each
    ledger = inspect.memory_ledger(loss)
    assert ledger.total_bytes == 2 * (x.numpy().nbytes + w.numpy().nbytes) + 2 * 6 * 5 * 4
    shared = [e for e in ledger.entries if e.shared_with]
    assert len(shared) == 2 and all(e.name == "MatMul" for e in shared)
    distinct = x.numpy().nbytes + w.numpy().nbytes + 2 * 6 * 5 * 4  # x, w and the two products
    assert ledger.distinct_bytes == distinct


def test_seq_len_flags_the_arrays_of_that_length():
    x = ta.randn(3, 7, 7, requires_grad=True)
    loss = (x.exp() * 2.0).sum()
    assert not any(e.quadratic for e in inspect.memory_ledger(loss).entries)
    flagged = inspect.memory_ledger(loss, seq_len=7)
    assert [e.name for e in flagged.entries if e.quadratic] == ["Exp"]


def test_text_and_html():
    ledger = inspect.memory_ledger(attention_loss("composed"))
    lines = str(ledger).splitlines()
    assert lines[0].split()[:4] == ["#", "op", "saved", "shape"]
    assert "growing with T² (attention lengths: T=12, S=12)" in lines[-1]
    html = ledger._repr_html_()
    assert html.count('style="background: #fdd"') == sum(e.quadratic for e in ledger.entries)


def test_bad_input_gets_a_clear_error():
    loss = attention_loss("fused")
    loss.backward()
    with pytest.raises(RuntimeError, match="memory_ledger: the graph was freed"):
        inspect.memory_ledger(loss)
    with pytest.raises(RuntimeError, match="not in a graph"):
        inspect.memory_ledger(ta.ones(3))
