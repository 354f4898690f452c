"""PyTorch calls from the textbook chapters and the seed notebooks' world beyond the core tensor
surface: comparing with None, loss modules, printing options, save/load, graph walking with
``next_functions``, ``bincount``, ``Size``, grouped-query attention on the default path, and a
NaN reaching attention's output. Expected values come from PyTorch's documented behaviour or
from algebra, never from tinyattn.
"""

import numpy as np
import pytest

import tinyattn as ta

F = ta.nn.functional


def test_comparing_a_tensor_with_none_is_false():
    idx_next = ta.tensor([[16]])
    assert (idx_next == None) is False  # noqa: E711  (the comparison under test)
    assert (idx_next != None) is True  # noqa: E711


def test_loss_modules_exist():
    logits = ta.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3]])
    target = ta.tensor([0, 2])
    expected = -np.log(np.exp([2.0, 0.3]) / np.exp(logits.numpy()).sum(-1)).mean()
    assert ta.nn.CrossEntropyLoss()(logits, target).item() == pytest.approx(expected, rel=1e-6)
    mse = ta.nn.MSELoss()(ta.tensor([1.0, 3.0]), ta.tensor([0.0, 0.0]))
    assert mse.item() == pytest.approx(5.0)


def test_missing_nn_names_are_named_like_missing_torch_names():
    with pytest.raises(AttributeError, match="tinyattn has no torch.nn.TransformerEncoderLayer"):
        ta.nn.TransformerEncoderLayer  # noqa: B018
    with pytest.raises(AttributeError, match="tinyattn has no torch.nn.functional.ctc_loss"):
        F.ctc_loss  # noqa: B018


def test_set_printoptions_turns_off_scientific_notation():
    ta.set_printoptions(sci_mode=False)
    try:
        assert "e-" not in repr(ta.tensor([1e-5, 1.0, 1000.0]))
    finally:
        ta.set_printoptions(sci_mode=None)


def test_a_state_dict_survives_save_and_load(tmp_path):
    ta.manual_seed(0)
    model = ta.nn.Linear(3, 2)
    ta.save(model.state_dict(), tmp_path / "model.pth")
    copy = ta.nn.Linear(3, 2)
    copy.load_state_dict(ta.load(tmp_path / "model.pth", weights_only=True))
    np.testing.assert_array_equal(copy.weight.detach().numpy(), model.weight.detach().numpy())


def test_next_functions_are_pairs_as_in_pytorch():
    x = ta.ones(2, requires_grad=True)
    product = x * 3
    total = product.sum()
    node, index = total.grad_fn.next_functions[0]
    assert node is product.grad_fn and index == 0
    leaf_node, _ = product.grad_fn.next_functions[0]
    assert leaf_node.variable is x


def test_bincount_counts_each_value():
    assert ta.bincount(ta.tensor([0, 2, 2, 5])).tolist() == [1, 0, 2, 0, 0, 1]


def test_grouped_query_attention_on_the_default_path():
    rng = np.random.default_rng(0)
    q = ta.tensor(rng.standard_normal((1, 4, 3, 8)))  # (B, H, T, D)
    k = ta.tensor(rng.standard_normal((1, 2, 5, 8)))  # (B, Hkv, S, D)
    v = ta.tensor(rng.standard_normal((1, 2, 5, 8)))
    expected = F.scaled_dot_product_attention(  # each key/value head serves two query heads
        q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1))
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)
    layer = ta.nn.MultiHeadAttention(8, 4, num_kv_heads=2)
    assert layer(ta.randn(2, 5, 8)).shape == (2, 5, 8)


def test_shapes_compare_equal_to_torch_size():
    assert ta.ones(2, 3).shape == ta.Size([2, 3])


def test_a_nan_in_the_attention_inputs_reaches_the_output():
    q = ta.tensor([[[np.nan, 1.0], [0.5, 1.0]]])  # (B, T, D): query/key 0 is NaN
    for impl in ("composed", "fused"):  # every score row meets key 0, so every output is NaN
        out = F.scaled_dot_product_attention(q, q, q, impl=impl)
        assert np.isnan(out.numpy()).all(), impl
    assert np.isnan(ta.softmax(ta.tensor([np.nan, np.nan]), dim=-1).numpy()).all()
