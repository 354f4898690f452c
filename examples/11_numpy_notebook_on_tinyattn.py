"""The numpy notebook (``examples/seeds/001_…txt``) redone in tinyattn: one attention head and
two heads on its fixed 3×4 input, with the weights its ``np.random.seed(42)`` draws. The results
equal what the notebook printed and what its own numpy functions return (its cells are run
here); then the gradient of every weight matrix is checked against finite differences taken
through the notebook's own numpy code.

    python examples/11_numpy_notebook_on_tinyattn.py
"""

import re
import sys
from pathlib import Path

import numpy as np

import tinyattn as ta
from tinyattn.study import TOLERANCE, compare, numeric_gradient

sys.path.insert(0, str(Path(__file__).resolve().parent / "seeds"))
import notebook  # noqa: E402  (runs a seed notebook's cells)

NAME = "001_f3b0ab7bc8ab63b6.txt"
np.set_printoptions(precision=8, suppress=True)


def seeded_weights(width: int, count: int) -> list[ta.Tensor]:
    """The notebook's weights: numpy's legacy generator seeded with 42, then ``count`` uniform
    [0, 1) matrices of ``width × width``, drawn in order (W_q, W_k, W_v, then W_o)."""
    draws = np.random.RandomState(42)
    return [ta.tensor(draws.rand(width, width), requires_grad=True) for _ in range(count)]


def self_attention(x, w_q, w_k, w_v):
    """One head over the full width C: ``softmax(Q Kᵀ / √C) V`` with Q, K, V = x W."""
    C = x.shape[-1]
    queries, keys, values = x @ w_q, x @ w_k, x @ w_v  # (T, C) each
    weights = (queries @ keys.T / C ** 0.5).softmax(dim=-1)  # (T, T), rows sum to 1
    return weights @ values  # (T, C)


def multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads):
    """``num_heads`` heads, each on a slice of D = C / num_heads columns of Q, K, V; the heads'
    outputs side by side, then W_o."""
    T, C = x.shape
    D = C // num_heads

    def heads(t):
        return t.view(T, num_heads, D).transpose(0, 1)  # (T, C) -> (H, T, D)

    queries, keys, values = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    weights = (queries @ keys.transpose(-2, -1) / D ** 0.5).softmax(dim=-1)  # (H, T, T)
    context = (weights @ values).transpose(0, 1).reshape(T, C)  # (H, T, D) -> (T, H*D)
    return context @ w_o


class GivenDraws:
    """Stands in for ``numpy.random`` inside the notebook's functions: ``seed`` does nothing and
    ``rand`` hands out the given matrices in order, so its code runs at chosen weights."""

    def __init__(self, matrices):
        self.matrices = list(matrices)

    def seed(self, _seed):
        pass

    def rand(self, *_shape):
        return self.matrices.pop(0)


class NumpyWithDraws:
    """numpy, except that ``random`` is a :class:`GivenDraws`."""

    def __init__(self, matrices):
        self.random = GivenDraws(matrices)

    def __getattr__(self, name):
        return getattr(np, name)


def notebook_at(function, weights, *args):
    """Call one of the notebook's numpy functions with ``weights`` instead of its seeded draws."""
    namespace = function.__globals__
    namespace["np"] = NumpyWithDraws(weights)
    try:
        return function(*args)
    finally:
        namespace["np"] = np


def printed_array(cell: int, after: str, shape: tuple) -> np.ndarray:
    """The array the notebook printed in ``cell`` after the text ``after``."""
    text = cells[cell].output.split(after, 1)[1]
    body = text[text.index("array("):text.index(")")]
    return np.array(re.findall(r"-?\d+\.\d*(?:e[+-]?\d+)?", body), dtype=float).reshape(shape)


print("--- the notebook's own cells ---")
run = notebook.run(NAME)
cells = {cell.number: cell for cell in notebook.cells(NAME)}
nb_self_attention = run.namespace["self_attention"]
nb_multi_head_attention = run.namespace["multi_head_attention"]
x_np = run.namespace["dummy_input_embeddings"]  # (3, 4): three words, width 4
print("input (3, 4):\n", x_np)
x = ta.tensor(x_np)  # float64, like the notebook's numpy arrays

print("\n--- one head ---")
w_q, w_k, w_v = seeded_weights(4, 3)
print("W_q (numpy's first draw after seed 42):\n", w_q.numpy())
out = self_attention(x, w_q, w_k, w_v)
print("self-attention output:\n", out.numpy())
compare("== what the notebook printed (cell 1)", out, printed_array(1, "Output:", (3, 4)),
        tol=5e-9)
compare("== the notebook's self_attention(X)", out, nb_self_attention(x_np), tol=1e-12)

print("\n--- two heads ---")
w_q2, w_k2, w_v2, w_o = seeded_weights(4, 4)
out2 = multi_head_attention(x, w_q2, w_k2, w_v2, w_o, num_heads=2)
print("multi-head output:\n", out2.numpy())
compare("== what the notebook printed (cell 2)", out2, printed_array(2, "Output:", (3, 4)),
        tol=5e-9)
compare("== the notebook's multi_head_attention(X, 2)", out2,
        nb_multi_head_attention(x_np, 2), tol=1e-12)
# The same heads through PyTorch's fused attention function: (H, T, D) in, (H, T, D) out.
queries, keys, values = (t.view(3, 2, 2).transpose(0, 1) for t in (x @ w_q2, x @ w_k2, x @ w_v2))
fused = ta.nn.functional.scaled_dot_product_attention(queries, keys, values)  # (H, T, D)
compare("== F.scaled_dot_product_attention per head, then W_o", fused.transpose(0, 1).reshape(
    3, 4) @ w_o, out2, tol=1e-12)

print("\n--- the notebook's 'Hello world' input (cell 3) ---")
hello = run.namespace["input_embeddings"]  # (2, 4), numpy's seed 0
print("input (2, 4):\n", hello)
compare("self-attention == notebook's printout",
        self_attention(ta.tensor(hello), *seeded_weights(4, 3)),
        printed_array(3, "Self-Attention Output:", (2, 4)), tol=5e-9)
compare("multi-head == notebook's printout",
        multi_head_attention(ta.tensor(hello), *seeded_weights(4, 4), num_heads=2),
        printed_array(3, "Multi-Head Attention Output:", (2, 4)), tol=5e-9)

print("\n--- backward: the gradient of every weight ---")
G = np.random.default_rng(0).standard_normal((3, 4))  # a random dL/d(output)
(out * ta.tensor(G)).sum().backward()
(out2 * ta.tensor(G)).sum().backward()
# Two rules by hand: out = P V and V = X W_v give dW_v = Xᵀ (Pᵀ G); out2 = Z W_o gives dW_o = Zᵀ G.
with ta.no_grad():
    P = (x @ w_q @ (x @ w_k).T / 4 ** 0.5).softmax(dim=-1).numpy()  # the weights (T, T)
    identity = ta.eye(4, dtype=ta.float64)
    Z = multi_head_attention(x, w_q2, w_k2, w_v2, identity, num_heads=2).numpy()  # (T, H*D)
compare("dW_v == X^T P^T G (one head)", w_v.grad, x_np.T @ P.T @ G)
compare("dW_o == Z^T G (two heads)", w_o.grad, Z.T @ G)


def loss_through_notebook(function, weights, index, *args):
    """``W ↦ Σ G ⊙ notebook_function(X)`` with weight ``index`` replaced by W."""
    def loss(w):
        chosen = [p.detach().numpy() for p in weights]
        chosen[index] = w
        return float(np.sum(notebook_at(function, chosen, *args) * G))
    return loss


print("finite differences through the notebook's own numpy functions:")
for label, function, weights, args in (
        ("one head", nb_self_attention, [w_q, w_k, w_v], (x_np,)),
        ("two heads", nb_multi_head_attention, [w_q2, w_k2, w_v2, w_o], (x_np, 2))):
    for index, (name, weight) in enumerate(zip(["W_q", "W_k", "W_v", "W_o"], weights)):
        numeric = numeric_gradient(loss_through_notebook(function, weights, index, *args),
                                   weight.detach().numpy())
        compare(f"{label}: d{name} (autograd) vs finite differences", weight.grad, numeric,
                tol=TOLERANCE)
print("dW_q of the two-head version:\n", w_q2.grad.numpy())
print("gradcheck of both functions w.r.t. all weights:",
      ta.gradcheck(lambda *w: self_attention(x, *w), [w_q, w_k, w_v]),
      ta.gradcheck(lambda *w: multi_head_attention(x, *w, num_heads=2), [w_q2, w_k2, w_v2, w_o]))
print("\ndone: the numpy notebook in tinyattn, forward and backward")
