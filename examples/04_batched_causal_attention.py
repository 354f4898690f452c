"""A compact causal attention class on a batch, built step by step, then as
``ta.nn.SelfAttention(causal=True)``; gradients of a batch are the sums of per-example ones.

    python examples/04_batched_causal_attention.py
"""

import numpy as np

import tinyattn as ta
from tinyattn.study import SEED_EMBEDDINGS, compare

np.set_printoptions(precision=4, suppress=True)


class CausalAttention(ta.nn.Module):
    """Every step written out: projections, scores, causal mask, softmax, dropout, context."""

    def __init__(self, d_in, d_out, context_length, dropout=0.0):
        super().__init__()
        self.q_proj = ta.nn.Linear(d_in, d_out, bias=False)
        self.k_proj = ta.nn.Linear(d_in, d_out, bias=False)
        self.v_proj = ta.nn.Linear(d_in, d_out, bias=False)
        self.dropout = ta.nn.Dropout(dropout)
        self.future = np.triu(np.ones((context_length, context_length), dtype=bool), k=1)

    def forward(self, x):
        B, T, d_in = x.shape
        queries, keys, values = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, T, d_out)
        scores = queries @ keys.transpose(1, 2)  # (B, T, T)
        scores = scores.masked_fill(self.future[:T, :T], float("-inf"))
        weights = (scores / keys.shape[-1] ** 0.5).softmax(dim=-1)
        weights = self.dropout(weights)
        return weights @ values  # (B, T, d_out)


x = ta.tensor(np.array(SEED_EMBEDDINGS))  # (6, 3)
batch = ta.stack([x, x * 0.5], dim=0)  # (2, 6, 3): two "sentences"
print("batch shape:", batch.shape)

ta.manual_seed(123)
manual = CausalAttention(3, 2, context_length=6).double()
context = manual(batch)
print("context vectors (2, 6, 2):\n", context.numpy())

layer = ta.nn.SelfAttention(3, 2, causal=True).double()
layer.load_state_dict(manual.state_dict())  # same parameter names: q_proj/k_proj/v_proj
compare("SelfAttention(causal=True) == CausalAttention", layer(batch), context)

print("\n--- backward over the batch ---")
G = np.random.default_rng(0).standard_normal(context.shape)  # random dL/dcontext (2, 6, 2)
(context * ta.tensor(G)).sum().backward()
batch_grads = {name: p.grad.numpy().copy() for name, p in manual.named_parameters()}
per_example = {name: 0.0 for name in batch_grads}
for b in range(2):
    manual.zero_grad()
    (manual(batch[b:b + 1]) * ta.tensor(G[b:b + 1])).sum().backward()
    for name, p in manual.named_parameters():
        per_example[name] = per_example[name] + p.grad.numpy()
for name in batch_grads:
    print(f"d{name}:\n", batch_grads[name])
    compare(f"d{name} of the batch == sum over examples", batch_grads[name], per_example[name])

print("\n--- dropout 0.5 in training mode, off in eval mode ---")
ta.manual_seed(0)
noisy = CausalAttention(3, 2, context_length=6, dropout=0.5).double()
noisy.load_state_dict(manual.state_dict())
print("train mode, first example:\n", noisy(batch).numpy()[0])
noisy.eval()
compare("eval mode == no dropout", noisy(batch), context)
print("\ndone: batched causal attention, forward and backward")
