"""TransformerLM block variants: parameter names and counts, hook points, presets, gradients
against finite differences, and errors for bad combinations."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.models import TransformerLMConfig, preset_config

SMALL = dict(vocab_size=11, context_length=6, embed_dim=8, num_heads=4, num_layers=1)
VARIANTS = {
    "default": {},
    "gpt2": {"tie_weights": True, "gelu_approximate": "tanh"},
    "no-bias": {"bias": False},
    "rope": {"positional": "rope"},
    "alibi": {"positional": "alibi", "num_kv_heads": 1},
    "none-window": {"positional": "none", "window_size": 2},
    "rmsnorm-swiglu": {"norm": "rmsnorm", "mlp": "swiglu"},
    "llama": {"positional": "rope", "norm": "rmsnorm", "mlp": "swiglu", "bias": False,
              "num_kv_heads": 2},
}


def test_default_benchmark_config_keeps_its_parameter_names_and_count():
    config = TransformerLMConfig(vocab_size=65, context_length=64, embed_dim=128, num_heads=4,
                                 num_layers=2)
    model = ta.TransformerLM(config)
    assert sum(p.numel() for p in model.parameters()) == 421_697
    names = [name for name, _ in model.named_parameters()]
    assert names[:2] == ["token_embedding.weight", "position_embedding.weight"]
    assert "blocks.1.mlp.fc.weight" in names and "lm_head.bias" in names
    assert names[-2:] == ["lm_head.weight", "lm_head.bias"]


def test_variant_parameter_counts_follow_their_layers():
    C, V, P, L = 8, 11, 6, 1
    count = {name: sum(p.numel() for p in ta.TransformerLM(
        TransformerLMConfig(**SMALL, **fields)).parameters()) for name, fields in VARIANTS.items()}
    block = 2 * 2 * C + 4 * (C * C + C) + (C * 4 * C + 4 * C) + (4 * C * C + C)
    assert count["default"] == V * C + P * C + L * block + 2 * C + (C * V + V)
    assert count["gpt2"] == count["default"] - (C * V + V)  # the head has no weight of its own
    assert count["rope"] == count["default"] - P * C  # no position table
    assert count["alibi"] == count["rope"] - 2 * (C * C + C) + 2 * (C * 2 + 2)  # one kv head
    hidden = 2 * 4 * C // 3
    swiglu_block = 2 * C + 4 * C * C + 3 * C * hidden  # RMSNorm weights, no biases
    assert count["llama"] == V * C + L * (swiglu_block - 2 * C * C // 2) + C + C * V


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_variant_keeps_the_hook_point_names(name):
    model = ta.TransformerLM(TransformerLMConfig(**SMALL, impl="composed", **VARIANTS[name]))
    points = model.hook_points()
    for hook in ("hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out",
                 "hook_resid_post", "attn.hook_q", "attn.hook_k", "attn.hook_v",
                 "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z"):
        assert f"blocks.0.{hook}" in points
    assert "hook_embed" in points
    assert ("hook_pos_embed" in points) == (model.config.positional == "learned")
    assert ("blocks.0.attn.hook_rot_q" in points) == (model.config.positional == "rope")
    _, cache = model.run_with_cache(ta.tensor([[1, 2, 3]]))
    assert cache["blocks.0.attn.hook_pattern"].shape == (1, 4, 3, 3)
    assert cache["blocks.0.attn.hook_k"].shape == (1, model.config.num_kv_heads or 4, 3, 2)


def test_rotary_hook_points_see_the_rotated_queries_and_keys():
    model = ta.TransformerLM(TransformerLMConfig(**SMALL, positional="rope", impl="composed"))
    _, cache = model.run_with_cache(ta.tensor([[1, 2, 3]]))
    rope = model.blocks[0].attn.rotary
    q, q_rot = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_rot_q"]
    np.testing.assert_allclose(rope.rotate(q).numpy(), q_rot.numpy())
    np.testing.assert_array_equal(q.numpy()[..., 0, :], q_rot.numpy()[..., 0, :])
    assert np.abs(q.numpy()[..., 1:, :] - q_rot.numpy()[..., 1:, :]).max() > 1e-3


def test_tied_head_shares_the_token_embedding_and_gets_both_gradients():
    model = ta.TransformerLM(TransformerLMConfig(**SMALL, tie_weights=True)).double()
    assert model.lm_head.weight is model.token_embedding.weight and model.lm_head.bias is None
    idx = ta.tensor([[1, 2, 3]])
    _, loss = model(idx, targets=ta.tensor([[2, 3, 4]]))
    loss.backward()
    grad = model.token_embedding.weight.grad.numpy()
    assert np.abs(grad[0]).max() > 0  # row 0 never embedded: its gradient comes from the head


def test_no_bias_means_no_bias_anywhere():
    model = ta.TransformerLM(TransformerLMConfig(**SMALL, bias=False))
    assert not [name for name, _ in model.named_parameters() if name.endswith("bias")]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_variant_gradchecks_through_the_token_embeddings(name):
    """The loss as a function of the embedded tokens (patched in at hook_embed): every block,
    the final norm and the head lie on the path."""
    model = ta.TransformerLM(TransformerLMConfig(**SMALL, impl="composed",
                                                 **VARIANTS[name])).double()
    idx = ta.tensor([[1, 5, 2, 7], [3, 3, 9, 0]])
    targets = ta.tensor([[5, 2, 7, 1], [3, 9, 0, 4]])

    def loss_of(embedded):
        return model.run_with_hooks(idx, targets=targets,
                                    fwd_hooks=[("hook_embed", lambda value, hook: embedded)])[1]

    embedded = np.random.default_rng(0).normal(size=(2, 4, 8))
    assert ta.gradcheck(loss_of, (ta.tensor(embedded, requires_grad=True),))


def test_presets():
    llama = preset_config("llama", 11, 6, 8, 4, 2)
    assert (llama.positional, llama.norm, llama.mlp, llama.bias, llama.num_kv_heads) == (
        "rope", "rmsnorm", "swiglu", False, 2)
    assert preset_config("gpt", 11, 6, 8, 4, 2) == TransformerLMConfig(11, 6, 8, 4, 2)
    gpt2 = preset_config("gpt2", 11, 6, 8, 4, 2, dropout=0.1)
    assert gpt2.tie_weights and gpt2.gelu_approximate == "tanh" and gpt2.dropout == 0.1
    assert preset_config("llama", 11, 6, 9, 3, 2).num_kv_heads == 3


@pytest.mark.parametrize("fields, message", [
    ({"num_kv_heads": 3}, r"config.num_kv_heads must be None or a positive divisor of "
                          r"config.num_heads 4, got 3"),
    ({"window_size": 0}, r"config.window_size must be None or an int >= 1, got 0"),
    ({"positional": "sinusoidal"}, r"positional"),
    ({"norm": "batchnorm"}, r"norm"),
    ({"mlp": "relu"}, r"mlp"),
    ({"embed_dim": 12, "num_heads": 4, "positional": "rope"},
     r"positional='rope' rotates feature pairs and needs an even head size"),
])
def test_bad_variant_combinations_raise_clear_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        ta.TransformerLM(TransformerLMConfig(**{**SMALL, **fields}))


def test_relative_position_model_reads_past_its_context_and_learned_does_not():
    tokens = ta.tensor(np.ones((1, 9), np.int64))
    assert ta.TransformerLM(TransformerLMConfig(**SMALL, positional="alibi"))(tokens).shape == (
        1, 9, 11)
    with pytest.raises(ValueError, match="sequence length 9 exceeds context_length 6"):
        ta.TransformerLM(TransformerLMConfig(**SMALL))(tokens)
