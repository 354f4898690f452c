"""Attention as today's models use it, and where the gradient goes in each piece:

1. grouped-query attention: one key/value head serves several query heads, so its gradient
   is the sum of what those query heads send back;
2. rotary positions (RoPE): q and k are rotated by their position; a rotation is orthogonal,
   so the gradient is rotated back by the same angle;
3. a sliding window: scores outside the band are −inf before the softmax, so the band is
   where dS can be non-zero;
4. decoding with a key/value cache: one new query per step over cached keys and values gives
   the same logits as recomputing the whole context.

    python examples/10_modern_attention.py
"""

import numpy as np

import tinyattn as ta
from tinyattn.functional.positional import rotary_angles
from tinyattn.models import TransformerLMConfig
from tinyattn.study import compare

np.set_printoptions(precision=3, suppress=True, linewidth=100)
rng = np.random.default_rng(0)
B, H, Hkv, T, D = 1, 4, 2, 6, 4

print("=== 1. grouped-query attention: H = 4 query heads share Hkv = 2 key/value heads ===")
q = ta.tensor(rng.normal(size=(B, H, T, D)), requires_grad=True)
k = ta.tensor(rng.normal(size=(B, Hkv, T, D)), requires_grad=True)
v = ta.tensor(rng.normal(size=(B, Hkv, T, D)), requires_grad=True)
grad_out = ta.tensor(rng.normal(size=(B, H, T, D)))
ta.F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True,
                                  impl="composed").backward(grad_out)
# the same attention with every key/value head copied to its query heads
k_rep = ta.tensor(np.repeat(k.numpy(), H // Hkv, axis=1), requires_grad=True)  # (B, H, T, D)
v_rep = ta.tensor(np.repeat(v.numpy(), H // Hkv, axis=1), requires_grad=True)  # (B, H, T, D)
ta.F.scaled_dot_product_attention(q.detach(), k_rep, v_rep, is_causal=True,
                                  impl="composed").backward(grad_out)
print("dK per copied head (query heads 0, 1 use kv head 0; heads 2, 3 use kv head 1):")
print(np.round(k_rep.grad.numpy()[0, :, -1], 3), "(last position)")
per_group = k_rep.grad.numpy().reshape(B, Hkv, H // Hkv, T, D)  # (B, Hkv, group, T, D)
compare("dK of a shared head == the sum over its query heads", k.grad, per_group.sum(axis=2))
compare("dV of a shared head == the sum over its query heads", v.grad,
        v_rep.grad.numpy().reshape(B, Hkv, H // Hkv, T, D).sum(axis=2))

print("\n=== 2. RoPE: position p turns each feature pair by p·θ_i; backward turns it back ===")
rope = ta.nn.RotaryEmbedding(D, max_positions=T)
q1 = ta.tensor(rng.normal(size=(1, 1, T, D)), requires_grad=True)
k1 = ta.tensor(rng.normal(size=(1, 1, T, D)), requires_grad=True)
q_rot, k_rot = rope(q1, k1)
g_rot = rng.normal(size=(1, 1, T, D))
q_rot.backward(ta.tensor(g_rot))
angles = rotary_angles(D, np.arange(T))  # (T, D): p·θ_i for each feature
half = D // 2
back = g_rot * np.cos(angles) + np.concatenate([g_rot[..., half:], -g_rot[..., :half]],
                                               axis=-1) * np.sin(angles)  # rotate by −p·θ
compare("dq == d q_rot rotated by −p·θ", q1.grad, back)
print("norms per position, |dq| vs |d q_rot| (a rotation keeps lengths):")
print(np.linalg.norm(q1.grad.numpy()[0, 0], axis=-1), np.linalg.norm(g_rot[0, 0], axis=-1))
q0, k0 = q1[:, :, :1], k1[:, :, :1]  # one query vector and one key vector


def score(m: int, n: int) -> float:
    """q0 placed at position m against k0 placed at position n."""
    return (rope.rotate(q0, m) * rope.rotate(k0, n)).sum().item()


print(f"score(q at 4, k at 2) = {score(4, 2):.6f} = score(q at 3, k at 1) = {score(3, 1):.6f}: "
      "only the distance counts")
compare("score(4, 2) == score(3, 1)", np.array(score(4, 2)), np.array(score(3, 1)))

print("\n=== 3. sliding window (w = 2, causal): dS is zero outside the band ===")
kept = []
out, _ = ta.ops.attention.attention_composed(
    q1, k1, k1, is_causal=True, scale=D ** -0.5, window_size=2,
    scores_hook=lambda s: (s.retain_grad(), kept.append(s), s)[2])
out.backward(ta.tensor(rng.normal(size=out.shape)))
d_scores = kept[0].grad.numpy()[0, 0]
print("dS (rows: queries, columns: keys):")
print(d_scores)
i, j = np.arange(T)[:, None], np.arange(T)[None, :]
band = (j <= i) & (i - j < 2)
compare("dS == 0 outside the band j in (i − 2, i]", d_scores[~band], np.zeros((~band).sum()))
compare("every row of dS sums to 0 (softmax)", d_scores.sum(axis=-1), np.zeros(T))

print("\n=== 4. key/value cache: prefill, then one query per step ===")
ta.manual_seed(0)
model = ta.TransformerLM(TransformerLMConfig(
    vocab_size=20, context_length=8, embed_dim=16, num_heads=4, num_layers=2,
    positional="rope", num_kv_heads=2, norm="rmsnorm", mlp="swiglu", bias=False,
    impl="composed")).double().eval()
tokens = rng.integers(0, 20, (1, 24))
cache = model.new_cache()
worst = 0.0
for n in range(4, 25):  # a 4-token prompt, then 20 steps: far past the context of 8
    cached = model.next_token_logits(tokens[:, :n], cache).numpy()
    recomputed = model.next_token_logits(tokens[:, :n]).numpy()
    worst = max(worst, float(np.abs(cached - recomputed).max()))
print(f"keys kept per layer: {[layer.length for layer in cache.layers]} "
      f"(the span − 1 = {model.span - 1}); prefills: {cache.prefills}")
compare("cached logits == recomputed logits at every step", np.array(worst), np.array(0.0))
greedy = [model.generate(ta.tensor(tokens[:, :4]), 20, top_k=1, use_cache=c).numpy()
          for c in (True, False)]
print("greedy tokens with cache:   ", greedy[0][0, 4:])
print("greedy tokens without cache:", greedy[1][0, 4:])
compare("greedy tokens identical", greedy[0], greedy[1], tol=0)
print("\nall checks passed")
