"""Eight heads, d_model = 512, on a three-token sentence — every projection written out.

Each head h has its own W_q^h, W_k^h, W_v^h of shape (512, 64); the eight (3, 64) head outputs
are concatenated to (3, 512) and mixed by W_O (512, 512). The same computation is then done by
``ta.nn.MultiHeadAttention(512, 8)`` with the per-head matrices stacked into its projections,
and the gradients of every per-head matrix are found again as slices of the layer's gradients.

    python examples/06_eight_heads_d512.py
"""

import numpy as np

import tinyattn as ta
from tinyattn.study import compare

np.set_printoptions(precision=4, suppress=True)
tokens = ["Your", "journey", "starts"]
d_model, num_heads = 512, 8
d_head = d_model // num_heads  # 64
ta.manual_seed(0)
embedding = ta.nn.Embedding(len(tokens), d_model).double()
x = embedding(ta.arange(len(tokens))).detach()  # (3, 512)
print(f"{len(tokens)} tokens, d_model {d_model}, {num_heads} heads of width {d_head}")


def init(*shape):
    return ta.nn.Parameter(ta.randn(*shape, dtype=ta.float64) / shape[0] ** 0.5)


W_q = [init(d_model, d_head) for _ in range(num_heads)]
W_k = [init(d_model, d_head) for _ in range(num_heads)]
W_v = [init(d_model, d_head) for _ in range(num_heads)]
W_o = init(d_model, d_model)

heads = []
for h in range(num_heads):
    q, k, v = x @ W_q[h], x @ W_k[h], x @ W_v[h]  # (3, 64) each
    weights = (q @ k.T / d_head**0.5).softmax(dim=-1)  # (3, 3)
    heads.append(weights @ v)  # (3, 64)
    if h == 0:
        print("head 0: q, k, v", q.shape, "weights", weights.shape, "\n", weights.numpy())
concatenated = ta.cat(heads, dim=-1)  # (3, 512)
output = concatenated @ W_o  # (3, 512)
print("concatenated heads", concatenated.shape, "-> output", output.shape)

mha = ta.nn.MultiHeadAttention(d_model, num_heads, bias=False).double()
for name, per_head in (("q_proj", W_q), ("k_proj", W_k), ("v_proj", W_v)):
    # Linear keeps (out, in): head h's rows are h*64:(h+1)*64 of the stacked transposes
    getattr(mha, name).weight.data = np.concatenate([W.numpy().T for W in per_head], axis=0)
mha.out_proj.weight.data = W_o.numpy().T.copy()
layer_output = mha(x)
compare("MultiHeadAttention(512, 8) == the eight heads written out", layer_output, output)

print("\n--- backward ---")
G = ta.tensor(np.random.default_rng(0).standard_normal(output.shape))  # random dL/doutput
(output * G).sum().backward()
(layer_output * G).sum().backward()
compare("dW_O == out_proj.weight.grad^T", W_o.grad, mha.out_proj.weight.grad.numpy().T)
worst = 0.0
for h in range(num_heads):
    rows = slice(h * d_head, (h + 1) * d_head)
    for name, per_head in (("q_proj", W_q), ("k_proj", W_k), ("v_proj", W_v)):
        sliced = getattr(mha, name).weight.grad.numpy()[rows].T
        worst = max(worst, compare(f"head {h} dW_{name[0]} == slice of {name}.weight.grad",
                                   per_head[h].grad, sliced))
print(f"largest difference over all 24 per-head gradients: {worst:.2e}")
print("gradient norm per head (W_q):",
      " ".join(f"{np.linalg.norm(W.grad.numpy()):.3f}" for W in W_q))
print("\ndone: eight heads at d_model 512, forward and backward")
