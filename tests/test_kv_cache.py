"""Key/value-cache decoding: equal, step by step, to recomputing the context from scratch."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.models import TransformerLMConfig

VARIANTS = {
    "learned": {},
    "learned-window": {"window_size": 3},
    "rope-gqa": {"positional": "rope", "num_kv_heads": 2},
    "rope-mqa-window": {"positional": "rope", "num_kv_heads": 1, "window_size": 4},
    "alibi": {"positional": "alibi"},
    "none": {"positional": "none"},
    "llama": {"positional": "rope", "norm": "rmsnorm", "mlp": "swiglu", "bias": False,
              "num_kv_heads": 2},
}


def _model(impl="composed", layers=2, **fields):
    ta.manual_seed(0)
    config = TransformerLMConfig(vocab_size=13, context_length=8, embed_dim=16, num_heads=4,
                                 num_layers=layers, impl=impl, **fields)
    return ta.TransformerLM(config).double().eval()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_cached_logits_equal_recomputed_logits_at_every_step_past_the_context(name):
    model = _model(**VARIANTS[name])
    tokens = np.random.default_rng(0).integers(0, 13, (2, 30))
    cache = model.new_cache()
    for n in range(3, 31):  # a prompt of 3, then one token per step, far past context 8
        cached = model.next_token_logits(tokens[:, :n], cache).numpy()
        recomputed = model.next_token_logits(tokens[:, :n]).numpy()
        np.testing.assert_allclose(cached, recomputed, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["alibi", "none", "rope-gqa"])
def test_relative_positions_recompute_equals_the_whole_sequence(name):
    """Past the context, relative-position models read the whole sequence with a sliding
    attention span; the last token only depends on num_layers·(span − 1) + 1 of them."""
    model = _model(**VARIANTS[name])
    assert model.max_length == 2 * (8 - 1) + 1
    tokens = np.random.default_rng(1).integers(0, 13, (1, model.max_length + 6))
    tail = model(ta.tensor(tokens[:, -model.max_length:])).numpy()[:, -1]
    np.testing.assert_allclose(model.next_token_logits(tokens).numpy(), tail, atol=1e-12)
    if name != "rope-gqa":  # no RoPE table limit: the full sequence itself
        full = model(ta.tensor(tokens)).numpy()[:, -1]
        np.testing.assert_allclose(tail, full, atol=1e-12)
        shorter = model(ta.tensor(tokens[:, -model.max_length + 1:])).numpy()[:, -1]
        assert np.abs(shorter - full).max() > 1e-6  # the receptive field is exactly that


def test_learned_positions_restart_the_cache_past_the_context_and_relative_ones_slide():
    tokens = np.random.default_rng(2).integers(0, 13, (1, 20))
    for fields, prefills in (({}, 1 + (20 - 8)), ({"positional": "rope"}, 1)):
        model = _model(**fields)
        cache = model.new_cache()
        for n in range(4, 21):
            model.next_token_logits(tokens[:, :n], cache)
        assert cache.prefills == prefills
        assert all(layer.length <= 8 for layer in cache.layers)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_greedy_and_sampled_generation_is_the_same_with_and_without_cache(name):
    model = _model(**VARIANTS[name])
    prompt = ta.tensor(np.random.default_rng(3).integers(0, 13, (2, 3)))
    greedy = [model.generate(prompt, 20, top_k=1, use_cache=c).numpy() for c in (True, False)]
    np.testing.assert_array_equal(*greedy)
    sampled = []
    for use_cache in (True, False):
        ta.manual_seed(7)
        sampled.append(model.generate(prompt, 20, temperature=0.9, use_cache=use_cache).numpy())
    np.testing.assert_array_equal(*sampled)


def test_float32_model_cached_logits_agree_to_float32_round_off():
    model = _model(positional="rope", num_kv_heads=2).float()
    tokens = np.random.default_rng(4).integers(0, 13, (2, 16))
    cache = model.new_cache()
    for n in range(2, 17):
        np.testing.assert_allclose(model.next_token_logits(tokens[:, :n], cache).numpy(),
                                   model.next_token_logits(tokens[:, :n]).numpy(), atol=2e-5)


@pytest.mark.parametrize("rotary, alibi, window", [(False, False, None), (True, False, 3),
                                                    (False, True, None), (True, True, 2)])
def test_attention_layer_with_cache_equals_full_causal_attention(rotary, alibi, window):
    ta.manual_seed(1)
    rope = ta.nn.RotaryEmbedding(4, 16) if rotary else None
    mha = ta.nn.MultiHeadAttention(16, 4, causal=True, num_kv_heads=2, window_size=window,
                                   rotary=rope, alibi=alibi, impl="composed").double()
    x = ta.tensor(np.random.default_rng(5).normal(size=(2, 9, 16)))
    full = mha(x).numpy()
    cache = ta.nn.KVCache(16)
    steps = [mha(x[:, :4], kv_cache=cache)] + [mha(x[:, t:t + 2], kv_cache=cache)
                                               for t in (4, 6)] + [mha(x[:, 8:], kv_cache=cache)]
    np.testing.assert_allclose(np.concatenate([s.numpy() for s in steps], axis=1), full,
                               atol=1e-12)


def test_kv_cache_keeps_the_last_positions_when_sliding():
    cache = ta.nn.KVCache(3, sliding=True)
    keys = np.arange(2 * 1 * 5 * 2, dtype=float).reshape(2, 1, 5, 2)
    out, _ = cache.update(ta.tensor(keys[:, :, :4]), ta.tensor(keys[:, :, :4]))
    assert out.shape == (2, 1, 4, 2) and cache.length == 3
    out, _ = cache.update(ta.tensor(keys[:, :, 4:]), ta.tensor(keys[:, :, 4:]))
    np.testing.assert_array_equal(out.numpy(), keys[:, :, 1:])
    np.testing.assert_array_equal(cache.keys.numpy(), keys[:, :, 2:])


@pytest.mark.parametrize("bad, message", [
    (lambda: _fill(ta.nn.KVCache(4), 3, 2), r"KVCache.update: the cache holds 3 positions; 2 "
                                            r"more would exceed max_length 4"),
    (lambda: ta.nn.KVCache(4).update(ta.randn(1, 2, 3, 4), ta.randn(1, 3, 3, 4)),
     r"KVCache.update: key and value must be"),
    (lambda: _fill(ta.nn.KVCache(8), 2, 1, heads=(2, 1)), r"do not match the cached"),
    (lambda: ta.nn.KVCache(-1), r"KVCache: max_length must be an int >= 0, got -1"),
    (lambda: _model()(ta.tensor([[1] * 6]), cache=_primed(_model(), 3)),
     r"TransformerLM: sequence length 6 after the 3 cached positions exceeds context_length 8"),
    (lambda: ta.nn.MultiHeadAttention(8, 2)(ta.randn(1, 3, 8), ta.randn(1, 3, 8),
                                            kv_cache=ta.nn.KVCache(4)),
     r"kv_cache serves self-attention only"),
    (lambda: _model().next_token_logits(np.array([[1, 2]]), _primed(_model(), 2)),
     r"the cache has read 2 tokens; tokens \(B, 2\) has no new one"),
    (lambda: _model(positional="rope")(ta.tensor([[1] * 16])),
     r"TransformerLM: sequence length 16 exceeds the 15 positions of the RoPE table"),
    (lambda: _model(layers=1)(ta.tensor([[1]]), cache=_model(layers=2).new_cache()),
     r"the cache has 2 layers, the model 1"),
])
def test_bad_cache_use_raises_a_clear_error(bad, message):
    with pytest.raises(ValueError, match=message):
        bad()


def _fill(cache, first, second, heads=(2, 2)):
    cache.update(ta.randn(1, heads[0], first, 4), ta.randn(1, heads[0], first, 4))
    cache.update(ta.randn(1, heads[1], second, 4), ta.randn(1, heads[1], second, 4))


def _primed(model, n):
    cache = model.new_cache()
    model.next_token_logits(np.ones((1, n), np.int64), cache)
    return cache


@pytest.mark.parametrize("name", ["learned", "rope-gqa", "rope-mqa-window", "alibi"])
def test_fused_path_cached_decoding_equals_the_composed_path(name):
    fused, composed = _model("fused", **VARIANTS[name]), _model("composed", **VARIANTS[name])
    tokens = np.random.default_rng(6).integers(0, 13, (2, 14))
    cache_f, cache_c = fused.new_cache(), composed.new_cache()
    for n in range(3, 15):
        np.testing.assert_allclose(fused.next_token_logits(tokens[:, :n], cache_f).numpy(),
                                   composed.next_token_logits(tokens[:, :n], cache_c).numpy(),
                                   atol=1e-10)
