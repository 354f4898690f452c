"""Simplified self-attention (no trainable weights) on "Your journey starts with one step".

Forward: dot-product scores, naive normalisation vs softmax, context vectors.
Backward: the gradient of every intermediate (kept with ``retain_grad``), checked by hand.

    python examples/01_simplified_attention.py
"""

import numpy as np

import tinyattn as ta
from tinyattn.study import (
    SEED_EMBEDDINGS,
    SEED_TOKENS,
    TOLERANCE,
    compare,
    numeric_gradient,
    softmax_forward_numpy,
)

np.set_printoptions(precision=4, suppress=True)
inputs = ta.tensor(np.array(SEED_EMBEDDINGS), requires_grad=True)  # (6, 3), float64
print("tokens:", " ".join(SEED_TOKENS))
print("embeddings (6, 3):\n", inputs.numpy())

print("\n--- 1. One query: 'journey' ---")
query = inputs[1]  # (3,)
scores_2 = inputs @ query  # (6,) dot product of every token with 'journey'
print("attention scores:", scores_2.numpy())
naive = scores_2 / scores_2.sum()
print("naive normalisation (x / sum x):", naive.numpy(), "sum =", round(naive.sum().item(), 6))
softmax_2 = scores_2.softmax(dim=0)
print("softmax:", softmax_2.numpy(), "sum =", round(softmax_2.sum().item(), 6))
exp_scores = np.exp(scores_2.numpy())
compare("softmax = exp(x) / sum exp(x)", softmax_2, exp_scores / exp_scores.sum())
context_2 = softmax_2 @ inputs  # (3,) weighted sum of all embeddings
print("context vector of 'journey':", context_2.numpy())

print("\n--- 2. Every token at once ---")
scores = inputs @ inputs.T  # (6, 6)
weights = scores.softmax(dim=-1)  # each row sums to 1
context = weights @ inputs  # (6, 3)
print("attention weights (6, 6):\n", weights.numpy())
compare("every row of the weights sums to 1", weights.sum(dim=-1), np.ones(6))
compare("row 'journey' equals the single-query result", context[1], context_2)
print("context vectors (6, 3):\n", context.numpy())

print("\n--- 3. Backward: gradients of every intermediate ---")
for t in (scores, weights, context):
    t.retain_grad()
G = np.random.default_rng(0).standard_normal(context.shape)  # a random dL/dcontext
loss = (context * ta.tensor(G)).sum()
loss.backward()
X, P = inputs.numpy(), weights.numpy()
dP = G @ X.T  # context = P X        ->  dP = dC X^T
dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))  # softmax backward, row by row
print("d loss / d weights:\n", weights.grad.numpy())
compare("d weights = dC X^T", weights.grad, dP)
print("d loss / d scores:\n", scores.grad.numpy())
compare("d scores = P * (dP - rowsum(dP * P))", scores.grad, dS)
# X is used three times (as query, key and value), so three paths add up:
dX = P.T @ G + dS @ X + dS.T @ X
compare("d inputs = P^T dC + dS X + dS^T X", inputs.grad, dX)


def loss_of(x):
    return float(np.sum(softmax_forward_numpy(x @ x.T) @ x * G))  # the forward pass in numpy


compare("d inputs vs finite differences", inputs.grad, numeric_gradient(loss_of, X),
        tol=TOLERANCE)
print("\ndone: simplified attention, forward and backward")
