"""Self-attention with trainable weights: W_q, W_k, W_v as parameter matrices, then as Linear
layers (``ta.nn.SelfAttention``) — the same numbers, forward and backward, once the weights are
copied over (a Linear stores its weight as (out, in), the transpose of W).

    python examples/02_trainable_qkv.py
"""

import numpy as np

import tinyattn as ta
from tinyattn.study import SEED_EMBEDDINGS, compare

np.set_printoptions(precision=4, suppress=True)
x = ta.tensor(np.array(SEED_EMBEDDINGS))  # (6, 3), float64
d_in, d_out = 3, 2

print("--- 1. Parameter matrices ---")
ta.manual_seed(123)
W_query = ta.nn.Parameter(ta.rand(d_in, d_out, dtype=ta.float64))
W_key = ta.nn.Parameter(ta.rand(d_in, d_out, dtype=ta.float64))
W_value = ta.nn.Parameter(ta.rand(d_in, d_out, dtype=ta.float64))
queries, keys, values = x @ W_query, x @ W_key, x @ W_value  # (6, 2) each
print("query of 'journey':", queries[1].numpy())
scores = queries @ keys.T  # (6, 6)
d_k = keys.shape[-1]
weights = (scores / d_k**0.5).softmax(dim=-1)  # scaled by 1/sqrt(d_k)
context = weights @ values  # (6, 2)
print("attention weights:\n", weights.numpy())
print("context vectors:\n", context.numpy())

print("\n--- 2. The same with Linear layers (ta.nn.SelfAttention) ---")
layer = ta.nn.SelfAttention(d_in, d_out).double()
print(layer)
for linear, W in ((layer.q_proj, W_query), (layer.k_proj, W_key), (layer.v_proj, W_value)):
    linear.weight.data = W.numpy().T.copy()  # Linear keeps (out_features, in_features)
context_layer = layer(x)
compare("SelfAttention output == parameter-matrix output", context_layer, context)

print("\n--- 3. Backward: both give the same weight gradients ---")
G = ta.tensor(np.random.default_rng(0).standard_normal((6, d_out)))  # random dL/dcontext
(context * G).sum().backward()
(context_layer * G).sum().backward()
print("dL/dW_query:\n", W_query.grad.numpy())
compare("W_query.grad == q_proj.weight.grad^T", W_query.grad, layer.q_proj.weight.grad.numpy().T)
compare("W_key.grad   == k_proj.weight.grad^T", W_key.grad, layer.k_proj.weight.grad.numpy().T)
compare("W_value.grad == v_proj.weight.grad^T", W_value.grad, layer.v_proj.weight.grad.numpy().T)
# The value weights get Xᵀ · (Pᵀ dC): the gradient that reaches V, mapped back through X.
dV = weights.numpy().T @ G.numpy()
compare("W_value.grad == X^T P^T dC (by hand)", W_value.grad, x.numpy().T @ dV)

print("\n--- 4. One SGD step lowers the loss ---")
before = (layer(x) * G).sum().item()
optimizer = ta.optim.SGD(layer.parameters(), lr=0.1)
optimizer.step()
after = (layer(x) * G).sum().item()
print(f"loss before {before:.6f}, after one step {after:.6f}")
assert after < before
print("\ndone: trainable Q/K/V, forward and backward")
