"""Causal attention two ways, and dropout on the attention weights.

(a) softmax first, then zero the future and renormalise each row;
(b) set future scores to -inf, then softmax.
They give the same weights AND the same gradients: renormalising a masked softmax is a softmax
over the allowed entries. Then dropout: kept weights are scaled by 1/(1-p) and dropped ones
pass no gradient back.

    python examples/03_causal_and_dropout.py
"""

import numpy as np

import tinyattn as ta
from tinyattn.study import SEED_EMBEDDINGS, compare

np.set_printoptions(precision=4, suppress=True)
T, d_out = 6, 2
ta.manual_seed(789)
layer = ta.nn.SelfAttention(3, d_out).double()
x = ta.tensor(np.array(SEED_EMBEDDINGS))  # (6, 3)
G = ta.tensor(np.random.default_rng(0).standard_normal((T, d_out)))  # random dL/dcontext
future = np.triu(np.ones((T, T), dtype=bool), k=1)  # True above the diagonal


def scores_of(q, k):
    return (q @ k.T) / d_out**0.5  # (T, T)


def make_leaves():
    q, k, v = layer.q_proj(x), layer.k_proj(x), layer.v_proj(x)
    return [ta.tensor(t.numpy(), requires_grad=True) for t in (q, k, v)]


print("--- (a) mask after softmax, then renormalise ---")
qa, ka, va = make_leaves()
weights = scores_of(qa, ka).softmax(dim=-1)
masked = weights * ta.tensor(~future)  # zero the future
weights_a = masked / masked.sum(dim=-1, keepdim=True)  # rows sum to 1 again
print(weights_a.numpy())

print("\n--- (b) -inf before softmax ---")
qb, kb, vb = make_leaves()
weights_b = scores_of(qb, kb).masked_fill(future, float("-inf")).softmax(dim=-1)
print(weights_b.numpy())
compare("weights (a) == weights (b)", weights_a, weights_b)

(weights_a @ va * G).sum().backward()
(weights_b @ vb * G).sum().backward()
compare("dQ (a) == dQ (b)", qa.grad, qb.grad)
compare("dK (a) == dK (b)", ka.grad, kb.grad)
compare("dV (a) == dV (b)", va.grad, vb.grad)
qc, kc, vc = make_leaves()
fused = ta.F.scaled_dot_product_attention(qc, kc, vc, is_causal=True)
(fused * G).sum().backward()
compare("is_causal=True (fused kernel) == (b)", fused, weights_b @ vb)
compare("dQ fused == dQ (b)", qc.grad, qb.grad)
qd, kd, vd = make_leaves()
third = ta.F.scaled_dot_product_attention(qd, kd, vd, is_causal=True)[2]  # 'starts' only
(third * G[2]).sum().backward()
print("dK from the output of 'starts' alone (it sees keys 0..2):\n", kd.grad.numpy())
compare("no gradient reaches the keys after 'starts'", kd.grad[3:], np.zeros((T - 3, d_out)))

print("\n--- dropout on the attention weights (p = 0.5, training mode) ---")
dropout = ta.nn.Dropout(0.5)
ta.manual_seed(123)
mask_scaled = dropout(ta.ones(T, T, dtype=ta.float64))  # 0 where dropped, 1/(1-p) = 2 where kept
print("dropout of a matrix of ones:\n", mask_scaled.numpy())
ta.manual_seed(123)  # the same seed draws the same mask
w = ta.tensor(weights_b.numpy(), requires_grad=True)
dropped = dropout(w)
print("dropout of the causal weights:\n", dropped.numpy())
compare("dropped weights == weights * mask / (1 - p)", dropped, w.numpy() * mask_scaled.numpy())
upstream = np.random.default_rng(1).standard_normal((T, T))
dropped.backward(upstream)
compare("gradient == upstream * mask / (1 - p)", w.grad, upstream * mask_scaled.numpy())
dropout.eval()
compare("in eval mode dropout is the identity", dropout(w), w)
print("\ndone: causal masking and dropout, forward and backward")
