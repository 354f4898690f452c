"""Two ways to build multi-head attention, shown equal with matched weights:

- a wrapper of independent heads (``ta.nn.MultiHeadAttentionWrapper``), outputs concatenated;
- one wide projection split into heads (``ta.nn.MultiHeadAttention``): head h uses rows
  h*d_head:(h+1)*d_head of q_proj/k_proj/v_proj.weight, then an output projection out_proj.

With out_proj set to the identity the two agree, forward and backward.

    python examples/05_multihead_wrapper_vs_split.py
"""

import numpy as np

import tinyattn as ta
from tinyattn.study import SEED_EMBEDDINGS, compare

np.set_printoptions(precision=4, suppress=True)
ta.manual_seed(123)
embed_dim, num_heads = 4, 2
d_head = embed_dim // num_heads
to_width = ta.nn.Linear(3, embed_dim, bias=False).double()  # 3-d embeddings -> width 4
sentence = ta.tensor(np.array(SEED_EMBEDDINGS))
x = to_width(ta.stack([sentence, sentence.flip(0)])).detach()  # (2, 6, 4): it, and reversed
print("input batch:", x.shape)

split = ta.nn.MultiHeadAttention(embed_dim, num_heads, bias=False, causal=True).double()
split.out_proj.weight.data = np.eye(embed_dim)  # identity: compare the concatenated heads
wrapper = ta.nn.MultiHeadAttentionWrapper(embed_dim, d_head, num_heads, causal=True).double()
for h, head in enumerate(wrapper.heads):
    rows = slice(h * d_head, (h + 1) * d_head)
    head.q_proj.weight.data = split.q_proj.weight.numpy()[rows].copy()
    head.k_proj.weight.data = split.k_proj.weight.numpy()[rows].copy()
    head.v_proj.weight.data = split.v_proj.weight.numpy()[rows].copy()

out_split = split(x)  # (2, 6, 4)
out_wrapper = wrapper(x)  # (2, 6, 4) = 2 heads x 2
print("split-heads output, first sentence:\n", out_split.numpy()[0])
compare("wrapper output == split-heads output", out_wrapper, out_split)
_, weights_split = split(x, need_weights=True, average_attn_weights=False)  # (2, H, 6, 6)
_, weights_wrapper = wrapper(x, need_weights=True)  # (2, H, 6, 6)
compare("per-head attention weights agree", weights_wrapper, weights_split)

print("\n--- backward ---")
G = ta.tensor(np.random.default_rng(0).standard_normal(out_split.shape))
(out_split * G).sum().backward()
(out_wrapper * G).sum().backward()
for h, head in enumerate(wrapper.heads):
    rows = slice(h * d_head, (h + 1) * d_head)
    for name in ("q_proj", "k_proj", "v_proj"):
        compare(f"head {h} {name}.weight.grad == rows {rows.start}:{rows.stop} of the split one",
                getattr(head, name).weight.grad,
                getattr(split, name).weight.grad.numpy()[rows])
print("\nThe split form does one (B, T, E) x (E, E) matmul per projection instead of one per")
print("head, then views it as (B, H, T, d_head): same maths, fewer and larger kernels.")
print("\ndone: multi-head wrapper vs split heads, forward and backward")
