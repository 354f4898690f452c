"""The embedding / U-matrix / ``bmm`` notebook (``examples/seeds/000_…txt``) redone in tinyattn:
token ids → ``nn.Embedding(10, 16)`` → attention of the embeddings with themselves (no
weights, no scaling), then U_query/U_key/U_value projections, eight full-width heads computed
with ``repeat`` and ``bmm``, and a Linear over the heads side by side. Then the backward pass:
where the gradients go — into the rows of the embedding table (a scatter-add), through ``bmm``
(two more batched matmuls) and ``repeat`` (a sum over the copies).

The random numbers come from tinyattn's generator, not PyTorch's, so they differ from the
numbers the notebook printed; the notebook's own cells, run on tinyattn with the same seeds,
draw the same ones as this script, which is checked.

    python examples/12_embedding_heads_with_bmm.py
"""

import sys
from pathlib import Path

import numpy as np

import tinyattn as ta
from tinyattn.study import compare

sys.path.insert(0, str(Path(__file__).resolve().parent / "seeds"))
import notebook  # noqa: E402  (runs a seed notebook's cells)

F = ta.nn.functional
np.set_printoptions(precision=4, suppress=True)
run = notebook.run("000_8e39ccec83aaef2e.txt")  # its cells, imports swapped to tinyattn
cells = run.namespace

print("--- 1. token ids -> embeddings ---")
ids = ta.tensor([0, 7, 1, 2, 5, 6, 4, 3])  # a sentence of 8 token ids from a vocabulary of 10
ta.manual_seed(123)
embed = ta.nn.Embedding(10, 16).double()  # the table: one 16-d row per token id
X = embed(ids)  # (T, C) = (8, 16): row t is table row ids[t]
X.retain_grad()
T, C = X.shape
print("embedded sentence:", X.shape, "(the notebook detaches it; here the graph is kept)")
compare("rows of X == rows ids of the table", X, embed.weight.numpy()[ids.numpy()], tol=0)
compare("== the notebook's embedded_sentence", X, cells["embedded_sentence"], tol=0)

print("\n--- 2. attention without weights: omega = X X^T, softmax, weighted sum ---")
omega = X @ X.T  # (T, T): omega[i, j] = <x_i, x_j>, not scaled
by_loop = np.array([[ta.dot(x_i, x_j).item() for x_j in X] for x_i in X])
compare("X @ X.T == a dot product per pair", omega, by_loop, tol=1e-12)
weights = F.softmax(omega, dim=1)
compare("every row of the weights sums to 1", weights.sum(dim=1), np.ones(T))
context = weights @ X  # (T, C)
second = sum(weights[1, j] * X[j] for j in range(T))  # the notebook's loop for token 2
compare("row 2 of weights @ X == sum_j w[1, j] x_j", context[1], second, tol=1e-12)
print("largest weight in each row (unscaled scores saturate on the diagonal):",
      weights.max(dim=1).values.numpy())

print("\n--- 3. U_query, U_key, U_value: column-vector convention, U @ x ---")
ta.manual_seed(123)
U_query, U_key, U_value = (ta.rand(C, C).double() for _ in range(3))  # (C, C) each
for name, U in (("U_query", U_query), ("U_key", U_key), ("U_value", U_value)):
    compare(f"{name} == the notebook's draw", U, cells[name], tol=0)
x_2 = X[1]
query_2 = U_query @ x_2  # (C,)
keys = (U_key @ X.T).T  # (T, C): U x_j for every j at once
values = (U_value @ X.T).T
compare("U_key @ x_2 == keys[1]", U_key @ x_2, keys[1], tol=1e-12)
weights_2 = F.softmax(query_2 @ keys.T / C ** 0.5, dim=0)  # scaled by sqrt(d) now
context_2 = weights_2 @ values
print("weights of query 2:", weights_2.numpy())
compare("context vector 2 == the notebook's (cell 61)", context_2, cells["context_vec2"],
        tol=2e-5)  # the notebook's cells compute in float32

print("\n--- 4. eight heads with repeat and bmm ---")
H = 8
ta.manual_seed(123)
ta.rand(C, C)  # the notebook draws one single-head matrix first (one_U_query)
U_q, U_k, U_v = (ta.rand(H, C, C).double().requires_grad_() for _ in range(3))  # (H, C, C)
compare("multihead_U_key == the notebook's", U_k, cells["multihead_U_key"], tol=0)
stacked = X.T.repeat(H, 1, 1)  # (H, C, T): one copy of Xᵀ per head
stacked.retain_grad()
raw = {}  # bmm outputs (H, C, T), kept to look at their gradients
for name, U in (("q", U_q), ("k", U_k), ("v", U_v)):
    raw[name] = ta.bmm(U, stacked)  # (H, C, C) @ (H, C, T) -> (H, C, T)
    raw[name].retain_grad()
Q, K, V = (raw[name].permute(0, 2, 1) for name in "qkv")  # (H, T, C)
compare("Q[:, 1] == U_q @ x_2 for every head", Q[:, 1], U_q @ x_2, tol=1e-12)
compare("K == the notebook's multihead_keys (cell 82)", K, cells["multihead_keys"], tol=2e-5)
head_weights = F.softmax(ta.bmm(Q, K.transpose(1, 2)) / C ** 0.5, dim=-1)  # (H, T, T)
Z = ta.bmm(head_weights, V)  # (H, T, C): every head keeps the full width 16
concat = Z.permute(1, 0, 2).reshape(T, H * C)  # (T, H*C): the heads side by side per token
Z.retain_grad()
concat.retain_grad()
linear = ta.nn.Linear(H * C, C).double()
out = linear(concat)  # (T, C)
print("heads:", Z.shape, "-> side by side:", concat.shape, "-> Linear(8*16, 16):", out.shape)
compare("head 3 == softmax(q k^T/sqrt(16)) v for head 3 alone", Z[3],
        F.softmax(Q[3] @ K[3].T / 4.0, dim=-1) @ V[3], tol=1e-12)

print("\n--- 5. backward: where the gradients go ---")
G = np.random.default_rng(0).standard_normal((T, C))  # a random dL/d(out)
(out * ta.tensor(G)).sum().backward()
W = linear.weight.numpy()  # (C, H*C)
compare("Linear: dW == G^T concat", linear.weight.grad, G.T @ concat.detach().numpy())
compare("Linear: d concat == G W", concat.grad, G @ W)
compare("head 3 gets columns 48:64 of G W", Z.grad[3], (G @ W)[:, 3 * C:4 * C])
# bmm(U, S) = U @ S per head, so dU = dOut Sᵀ and dS = Uᵀ dOut, again per head.
S = stacked.detach().numpy()
for name, U in (("q", U_q), ("k", U_k), ("v", U_v)):
    d_raw = raw[name].grad.numpy()  # (H, C, T)
    compare(f"bmm: dU_{name} == bmm(d out, stacked^T)", U.grad, d_raw @ S.transpose(0, 2, 1))
d_stacked = sum(np.swapaxes(U.detach().numpy(), 1, 2) @ raw[name].grad.numpy()
                for name, U in (("q", U_q), ("k", U_k), ("v", U_v)))
compare("bmm: d stacked == sum over q, k, v of bmm(U^T, d out)", stacked.grad, d_stacked)
# repeat made H copies of Xᵀ: the gradient of Xᵀ is the sum of the copies' gradients.
compare("repeat: dX == (sum over heads of d stacked)^T", X.grad, stacked.grad.numpy().sum(0).T)
# The embedding lookup copied row ids[t] of the table to row t of X: its backward adds row t
# of dX into table row ids[t] (a scatter-add); tokens 8 and 9 do not occur.
table_grad = embed.weight.grad.numpy()
compare("table rows of the sentence's ids == dX", table_grad[ids.numpy()], X.grad)
compare("rows 8 and 9 (not in the sentence) get zero", table_grad[[8, 9]], np.zeros((2, C)),
        tol=0)
embed.zero_grad()
repeated = ta.tensor([3, 3, 5])  # token 3 twice
G_rep = np.random.default_rng(1).standard_normal((3, C))
(embed(repeated) * ta.tensor(G_rep)).sum().backward()
compare("token 3 twice: its row gets the sum of both gradients", embed.weight.grad[3],
        G_rep[0] + G_rep[1], tol=1e-15)


def whole_path(U_q, U_k, U_v, table):
    x = F.embedding(ids, table)  # (T, C)
    s = x.T.repeat(H, 1, 1)  # (H, C, T)
    q, k, v = (ta.bmm(U, s).permute(0, 2, 1) for U in (U_q, U_k, U_v))  # (H, T, C)
    z = ta.bmm(F.softmax(ta.bmm(q, k.transpose(1, 2)) / C ** 0.5, dim=-1), v)
    return linear(z.permute(1, 0, 2).reshape(T, H * C))


# Small U entries keep the softmax away from saturation, where finite differences are poor.
small = [(0.1 * U.detach()).requires_grad_() for U in (U_q, U_k, U_v)]
table = embed.weight.detach().requires_grad_()
print("gradcheck of ids -> Embedding -> repeat/bmm heads -> Linear w.r.t. U_q, U_k, U_v and "
      "the table:", ta.gradcheck(whole_path, small + [table]))
print("\ndone: embeddings, U projections and bmm heads, forward and backward")
