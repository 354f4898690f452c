"""Hook points, run_with_cache and run_with_hooks, checked against hand computations."""

import numpy as np
import pytest
from printed import assert_rounded, number

import tinyattn as ta

B, T, C, H, L, V = 2, 5, 16, 2, 2, 11
D = C // H


def model_and_batch(seed=0, dropout=0.0):
    ta.manual_seed(seed)
    model = ta.TransformerLM(ta.models.TransformerLMConfig(V, 8, C, H, L, dropout=dropout))
    rng = np.random.default_rng(seed)
    idx = ta.tensor(rng.integers(0, V, (B, T)))
    targets = ta.tensor(rng.integers(0, V, (B, T)))
    return model, idx, targets


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_every_hook_point_is_cached_by_name():
    model, idx, _ = model_and_batch()
    logits, cache = model.run_with_cache(idx)
    per_block = ["hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out",
                 "hook_resid_post", "attn.hook_q", "attn.hook_k", "attn.hook_v",
                 "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z"]
    expected = {"hook_embed", "hook_pos_embed"} | {f"blocks.{i}.{n}" for i in range(L)
                                                   for n in per_block}
    assert set(cache) == expected == set(model.hook_points())
    assert cache["blocks.0.attn.hook_pattern"].shape == (B, H, T, T)
    assert cache["blocks.1.attn.hook_z"].shape == (B, H, T, D)
    assert logits.shape == (B, T, V)
    np.testing.assert_allclose(logits.numpy(), model(idx).numpy(), atol=1e-5)  # composed vs fused


def test_cached_activations_match_a_hand_computation():
    model, idx, _ = model_and_batch()
    _, cache = model.run_with_cache(idx)
    attn = model.blocks[0].attn
    q, k, v = (cache[f"blocks.0.attn.hook_{n}"].numpy().astype(np.float64) for n in "qkv")
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    scores[..., np.triu(np.ones((T, T), bool), 1)] = -np.inf
    np.testing.assert_allclose(cache["blocks.0.attn.hook_attn_scores"].numpy(), scores,
                               rtol=1e-5, atol=1e-6)
    pattern = softmax(scores)
    np.testing.assert_allclose(cache["blocks.0.attn.hook_pattern"].numpy(), pattern, atol=1e-6)
    z = pattern @ v
    np.testing.assert_allclose(cache["blocks.0.attn.hook_z"].numpy(), z, atol=1e-5)
    merged = z.transpose(0, 2, 1, 3).reshape(B, T, C)
    attn_out = merged @ attn.out_proj.weight.numpy().T + attn.out_proj.bias.numpy()
    np.testing.assert_allclose(cache["blocks.0.hook_attn_out"].numpy(), attn_out, atol=1e-5)
    np.testing.assert_allclose(cache["blocks.0.hook_resid_mid"].numpy(),
                               cache["blocks.0.hook_resid_pre"].numpy() + attn_out, atol=1e-5)
    tokens = model.token_embedding.weight.numpy()[idx.numpy()]
    np.testing.assert_array_equal(cache["hook_embed"].numpy(), tokens)


def test_gradients_at_the_hook_points_follow_the_chain_rule():
    model, idx, targets = model_and_batch()
    (_, loss), cache = model.run_with_cache(idx, targets=targets)
    assert cache.has_grads and all(p.grad is None for p in model.parameters())
    attn = model.blocks[1].attn
    g = {n: cache.grad(f"blocks.1.attn.hook_{n}").numpy().astype(np.float64)
         for n in ("z", "pattern", "attn_scores", "q", "k", "v")}
    d_out = cache.grad("blocks.1.hook_attn_out").numpy().astype(np.float64)
    d_merged = d_out @ attn.out_proj.weight.numpy()  # (B, T, C): out = merged W_oᵀ + b
    np.testing.assert_allclose(g["z"], d_merged.reshape(B, T, H, D).transpose(0, 2, 1, 3),
                               atol=1e-7)
    v = cache["blocks.1.attn.hook_v"].numpy().astype(np.float64)
    k = cache["blocks.1.attn.hook_k"].numpy().astype(np.float64)
    q = cache["blocks.1.attn.hook_q"].numpy().astype(np.float64)
    P = cache["blocks.1.attn.hook_pattern"].numpy().astype(np.float64)
    np.testing.assert_allclose(g["pattern"], g["z"] @ v.transpose(0, 1, 3, 2), atol=1e-7)
    dS = P * (g["pattern"] - (g["pattern"] * P).sum(-1, keepdims=True))
    np.testing.assert_allclose(g["attn_scores"], dS, atol=1e-7)
    np.testing.assert_allclose(g["q"], dS @ k / np.sqrt(D), atol=1e-7)
    np.testing.assert_allclose(g["k"], dS.transpose(0, 1, 3, 2) @ q / np.sqrt(D), atol=1e-7)
    np.testing.assert_allclose(g["v"], P.transpose(0, 1, 3, 2) @ g["z"], atol=1e-7)
    # the embeddings: the position rows get the batch sum; the token table, a scatter-add
    d_embed = cache.grad("hook_embed").numpy()
    np.testing.assert_allclose(cache.grad("hook_pos_embed").numpy(), d_embed.sum(0), atol=1e-7)
    model.zero_grad()
    model(idx, targets=targets)[1].backward()
    scattered = np.zeros((V, C))
    np.add.at(scattered, idx.numpy(), d_embed)
    np.testing.assert_allclose(model.token_embedding.weight.grad.numpy(), scattered, atol=1e-6)
    assert loss.item() == pytest.approx(model(idx, targets=targets)[1].item(), rel=1e-6)


def test_zeroing_a_head_equals_zeroing_its_columns_of_the_output_projection():
    model, idx, _ = model_and_batch()
    plain = model(idx).numpy()

    def zero_head_1(z, hook):
        return z * ta.tensor([1.0, 0.0])[:, None, None]  # (H, 1, 1) over (B, H, T, D)

    patched = model.run_with_hooks(idx, fwd_hooks=[("blocks.0.attn.hook_z", zero_head_1)])
    weight = model.blocks[0].attn.out_proj.weight
    saved = weight.numpy().copy()
    weight.numpy()[:, D:2 * D] = 0.0  # head 1's columns of W_o
    by_weights = model(idx).numpy()
    weight.data = saved
    np.testing.assert_allclose(patched.numpy(), by_weights, atol=1e-6)
    assert np.abs(patched.numpy() - plain).max() > 1e-3
    np.testing.assert_array_equal(model(idx).numpy(), plain)  # the hook is gone afterwards


def test_only_a_hooked_attention_intermediate_forces_the_composed_path():
    model, idx, _ = model_and_batch()
    model(idx)
    assert [b.attn.attention_path.impl for b in model.blocks] == ["fused", "fused"]
    model.run_with_hooks(idx, fwd_hooks=[("blocks.1.attn.hook_q", lambda x, hook: None)])
    assert [b.attn.attention_path.impl for b in model.blocks] == ["fused", "fused"]
    model.run_with_hooks(idx, fwd_hooks=[("blocks.0.attn.hook_pattern", lambda x, hook: None)])
    paths = [b.attn.attention_path for b in model.blocks]
    assert [p.impl for p in paths] == ["composed", "fused"]
    assert "a hook on hook_pattern needs the composed path" in paths[0].reason
    _, cache = model.run_with_cache(idx, names_filter=lambda name: "hook_pattern" not in name
                                    and "hook_attn_scores" not in name)
    assert [b.attn.attention_path.impl for b in model.blocks] == ["fused", "fused"]
    assert "blocks.0.attn.hook_z" in cache and "blocks.0.attn.hook_pattern" not in cache


def test_the_cache_prints_as_a_table():
    model, idx, targets = model_and_batch()
    _, cache = model.run_with_cache(idx, targets=targets, names_filter=["hook_embed",
                                                                        "blocks.1.hook_mlp_out"])
    lines = str(cache).splitlines()
    assert lines[0].split() == ["hook", "point", "shape", "|grad|"]
    assert lines[2].startswith("hook_embed") and "(2, 5, 16)" in lines[2]
    norm = np.linalg.norm(cache.grad("hook_embed").numpy().astype(np.float64))
    assert_rounded(number(lines[2].split()[-1]), norm, 3)  # printed as 1.23e-01
    assert cache._repr_html_().count("<tr") == 3
    assert repr(cache) == "<ActivationCache of 2 hook points, with gradients>"


def test_bad_use_gets_a_clear_error():
    model, idx, _ = model_and_batch()
    with pytest.raises(KeyError, match="no hook point named \\['blocks.0.hook_nope'\\]"):
        model.run_with_hooks(idx, fwd_hooks=[("blocks.0.hook_nope", lambda x, h: None)])
    with pytest.raises(TypeError, match="must be callable"):
        model.run_with_hooks(idx, fwd_hooks=[("hook_embed", 3)])
    with pytest.raises(ValueError, match="must return None or a Tensor of the value's shape"):
        model.run_with_hooks(idx, fwd_hooks=[("hook_embed", lambda x, h: x[:, :1])])
    assert not any(p.active for p in model.hook_points().values())  # all removed again
    _, cache = model.run_with_cache(idx)
    with pytest.raises(KeyError, match="pass targets="):
        cache.grad("hook_embed")
    with pytest.raises(KeyError, match="no hook point named 'hook_nope' was cached"):
        cache["hook_nope"]
    with pytest.raises(KeyError, match="selects no hook point"):
        model.run_with_cache(idx, names_filter=lambda name: False)
