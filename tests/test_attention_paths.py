"""The attention path is explicit at every level: each layer takes ``impl``, says which path
its last forward took and why, a trace shows it, and asking the fused path for what it cannot
give is an error, not a silent switch."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import inspect

nn = ta.nn


def _lm(impl):
    ta.manual_seed(0)
    config = ta.models.TransformerLMConfig(vocab_size=11, context_length=8, embed_dim=16,
                                           num_heads=2, num_layers=2, impl=impl)
    return ta.TransformerLM(config)


def _op_counts(loss):
    names = [row.name for row in inspect.trace(loss)]
    return {name: names.count(name) for name in set(names)}


def test_trace_of_a_composed_model_shows_softmax_and_matmuls_per_block():
    model = _lm("composed")
    idx = ta.tensor(np.arange(12).reshape(2, 6) % 11)
    _, loss = model(idx, targets=idx)
    counts = _op_counts(loss)
    assert counts.get("Softmax") == 2 and "FusedAttention" not in counts
    assert counts["MatMul"] == 4  # Q Kᵀ and P V in each of the 2 blocks


def test_trace_of_a_fused_model_shows_one_fused_attention_node_per_block():
    model = _lm("fused")
    idx = ta.tensor(np.arange(12).reshape(2, 6) % 11)
    _, loss = model(idx, targets=idx)
    counts = _op_counts(loss)
    assert counts.get("FusedAttention") == 2 and "Softmax" not in counts


def test_composed_and_fused_models_agree():
    idx = ta.tensor(np.arange(12).reshape(2, 6) % 11)
    losses, grads = {}, {}
    for impl in ("composed", "fused"):
        model = _lm(impl)
        _, loss = model(idx, targets=idx)
        loss.backward()
        losses[impl] = loss.item()
        grads[impl] = model.blocks[0].attn.q_proj.weight.grad.numpy()
    assert abs(losses["composed"] - losses["fused"]) < 1e-5
    np.testing.assert_allclose(grads["composed"], grads["fused"], atol=1e-5)


@pytest.mark.parametrize("make", [
    lambda impl: nn.SelfAttention(8, 4, impl=impl),
    lambda impl: nn.MultiHeadAttentionWrapper(8, 4, num_heads=2, impl=impl),
    lambda impl: nn.MultiHeadAttention(8, 2, impl=impl),
], ids=["SelfAttention", "MultiHeadAttentionWrapper", "MultiHeadAttention"])
def test_each_layer_says_which_path_it_took_and_why(make):
    x = ta.randn(2, 5, 8)
    auto = make("auto")
    auto(x)
    assert auto.attention_path.impl == "fused"
    auto(x, need_weights=True)
    assert auto.attention_path.impl == "composed"
    assert "need_weights=True" in auto.attention_path.reason
    composed = make("composed")
    composed(x)
    assert composed.attention_path == ("composed", "impl='composed' was asked for")
    with pytest.raises(ValueError, match="impl='fused' cannot serve this call: need_weights"):
        make("fused")(x, need_weights=True)


def test_a_hook_on_the_attention_pattern_makes_auto_take_the_composed_path():
    model = _lm("auto")
    idx = ta.tensor([[1, 2, 3]])
    model(idx)
    assert model.blocks[0].attn.attention_path.impl == "fused"
    _, cache = model.run_with_cache(idx, names_filter="blocks.0.attn.hook_pattern")
    assert model.blocks[0].attn.attention_path.impl == "composed"
    assert "hook_pattern" in model.blocks[0].attn.attention_path.reason
    assert model.blocks[1].attn.attention_path.impl == "fused"
    assert cache["blocks.0.attn.hook_pattern"].shape == (1, 2, 3, 3)


def test_impl_is_checked_at_every_level():
    for make in (lambda: nn.SelfAttention(4, 2, impl="flash"),
                 lambda: nn.MultiHeadAttention(4, 2, impl="flash"),
                 lambda: nn.TransformerBlock(4, 2, impl="flash"),
                 lambda: _lm("flash")):
        with pytest.raises(ValueError, match="impl must be 'auto', 'composed' or 'fused'"):
            make()


def test_the_engine_imports_no_backend():
    from pathlib import Path

    for path in (Path(ta.__file__).parent / "autograd").glob("*.py"):
        imports = [line for line in path.read_text().splitlines()
                   if line.lstrip().startswith(("import ", "from "))]
        assert not [line for line in imports if "kernels" in line or "numba" in line], path.name
