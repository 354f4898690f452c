"""Backpropagation through one attention head, step by step, on a six-word sentence.

The forward pass (one head, scores scaled by ``s = 1/√d_k``)::

    Q = X W_q,   K = X W_k,   V = X W_v
    S = Q Kᵀ · s                    (T, T) scaled scores
    P = softmax(S)  (row-wise)      (T, T) attention weights
    O = P V                         (T, d_v) context vectors
    L = Σ O ⊙ G                     (G a random cotangent: the gradient dL/dO)

The backward pass, derived by hand with the chain rule::

    dO = G
    dV = Pᵀ dO                      (O = P V is linear in V)
    dP = dO Vᵀ                      (... and in P)
    dS = P ⊙ (dP − rowsum(dP ⊙ P))  (softmax Jacobian: diag(p) − p pᵀ, applied row by row)
    dQ = dS K · s,   dK = dSᵀ Q · s (S = s·Q Kᵀ)
    dW_q = Xᵀ dQ,  dW_k = Xᵀ dK,  dW_v = Xᵀ dV

:func:`run` prints each of these next to tinyattn's autograd result and to central finite
differences computed with plain numpy, then checks that the composed attention path (every
step a recorded op) and the fused kernel agree, and prints a backward trace
(:func:`tinyattn.inspect.trace`). It backs ``tinyattn walkthrough`` and
``examples/08_backprop_through_attention.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

import numpy as np

from . import functional as F
from .creation import tensor
from .inspect import trace
from .study import (
    SEED_EMBEDDINGS,
    SEED_TOKENS,
    TOLERANCE,
    numeric_gradient,
    softmax_forward_numpy,
)


def run(stream: TextIO | None = None, seed: int = 123, d_out: int = 2) -> dict[str, float]:
    """Print the attention backward walkthrough; return the largest disagreement of each check.

    Every check compares the hand-derived gradient with autograd and with finite differences
    (and, at the end, the composed attention path with the fused kernel); a check passes when
    its value is below :data:`TOLERANCE`.

    Examples
    --------
    >>> import io
    >>> errors = run(io.StringIO())
    >>> max(errors.values()) < TOLERANCE
    True
    """
    out = sys.stdout if stream is None else stream

    def say(*parts: object) -> None:
        print(*parts, file=out)

    def show(name: str, array: np.ndarray) -> None:
        text = np.array2string(np.asarray(array), precision=4, suppress_small=True,
                               floatmode="fixed")
        say(f"{name} =\n{text}")

    errors: dict[str, float] = {}
    rng = np.random.default_rng(seed)
    X = np.array(SEED_EMBEDDINGS)
    d_in = X.shape[1]
    weights = {name: rng.uniform(0.0, 1.0, size=(d_in, d_out)) for name in ("W_q", "W_k", "W_v")}
    G = rng.standard_normal((len(SEED_TOKENS), d_out))
    scale = 1.0 / np.sqrt(d_out)

    say("=" * 78)
    say('Backprop through one attention head on "' + " ".join(SEED_TOKENS) + '"')
    say("=" * 78)
    show("X (6 tokens x 3 features)", X)
    say(f"\n1. Forward, in tinyattn (float64), d_out = {d_out}, scale s = 1/sqrt({d_out})")
    x = tensor(X)
    w_q, w_k, w_v = (tensor(weights[n], requires_grad=True) for n in ("W_q", "W_k", "W_v"))
    Q, K, V = x @ w_q, x @ w_k, x @ w_v
    S = (Q @ K.T) * scale
    P = S.softmax(dim=-1)
    O = P @ V
    for t in (Q, K, V, S, P, O):
        t.retain_grad()
    loss = (O * tensor(G)).sum()
    show("P = softmax(Q K^T * s)", P.data)
    show("O = P V (context vectors)", O.data)
    say(f"L = sum(O * G) = {loss.item():.6f}   (G is a random cotangent: dL/dO = G)")
    loss.backward()

    say("\n2. Backward by hand (numpy), next to autograd and finite differences")
    Qn, Kn, Vn, Pn = Q.data, K.data, V.data, P.data
    dO = G
    dV = Pn.T @ dO
    dP = dO @ Vn.T
    dS = Pn * (dP - np.sum(dP * Pn, axis=-1, keepdims=True))
    dQ = dS @ Kn * scale
    dK = dS.T @ Qn * scale
    by_hand = {
        "dO = G": (dO, O, lambda o: np.sum(o * G), O.data),
        "dV = P^T dO": (dV, V, lambda v: np.sum(Pn @ v * G), Vn),
        "dP = dO V^T": (dP, P, lambda p: np.sum(p @ Vn * G), Pn),
        "dS = P * (dP - rowsum(dP * P))": (
            dS, S, lambda s: np.sum(softmax_forward_numpy(s) @ Vn * G), S.data),
        "dQ = dS K * s": (
            dQ, Q, lambda q: np.sum(softmax_forward_numpy(q @ Kn.T * scale) @ Vn * G), Qn),
        "dK = dS^T Q * s": (
            dK, K, lambda k: np.sum(softmax_forward_numpy(Qn @ k.T * scale) @ Vn * G), Kn),
    }
    for label, (hand, node, f, value) in by_hand.items():
        key = label.split(" =")[0]
        numeric = numeric_gradient(f, value)
        errors[f"{key} autograd"] = float(np.max(np.abs(hand - node.grad.data)))
        errors[f"{key} finite-diff"] = float(np.max(np.abs(hand - numeric)))
        show(f"\n{label}  (by hand)", hand)
        say(f"  max |hand - autograd|     = {errors[f'{key} autograd']:.2e}")
        say(f"  max |hand - finite diff.| = {errors[f'{key} finite-diff']:.2e}")

    say("\nThe weights receive X^T times the gradient of their projection:")

    def loss_of(Wq: np.ndarray, Wk: np.ndarray, Wv: np.ndarray) -> float:
        q, k, v = X @ Wq, X @ Wk, X @ Wv
        return float(np.sum(softmax_forward_numpy(q @ k.T * scale) @ v * G))

    for name, leaf, grad, f in (
        ("W_q", w_q, X.T @ dQ, lambda w: loss_of(w, weights["W_k"], weights["W_v"])),
        ("W_k", w_k, X.T @ dK, lambda w: loss_of(weights["W_q"], w, weights["W_v"])),
        ("W_v", w_v, X.T @ dV, lambda w: loss_of(weights["W_q"], weights["W_k"], w)),
    ):
        numeric = numeric_gradient(f, weights[name])
        errors[f"d{name} autograd"] = float(np.max(np.abs(grad - leaf.grad.data)))
        errors[f"d{name} finite-diff"] = float(np.max(np.abs(grad - numeric)))
        say(f"  d{name} = X^T d{name[-1].upper()}: max |hand - autograd| = "
            f"{errors[f'd{name} autograd']:.2e}, max |hand - finite diff.| = "
            f"{errors[f'd{name} finite-diff']:.2e}")

    errors.update(_compare_paths(say, Qn, Kn, Vn, G))

    say("\n4. A trace of the backward pass through the composed path (output side first)")
    q, k, v = (tensor(a[None], requires_grad=True) for a in (Qn, Kn, Vn))  # (1, T, d)
    attended = F.scaled_dot_product_attention(q, k, v, impl="composed")
    say(trace((attended * tensor(G[None])).sum()).table())

    worst = max(errors, key=errors.get)
    verdict = "all checks passed" if errors[worst] < TOLERANCE else "CHECK FAILED"
    say(f"\n{verdict}: {len(errors)} checks, worst {worst} = {errors[worst]:.2e} "
        f"(tolerance {TOLERANCE:.0e})")
    return errors


def _compare_paths(say: Callable[..., None], Qn: np.ndarray, Kn: np.ndarray, Vn: np.ndarray,
                   G: np.ndarray) -> dict[str, float]:
    """Run scaled_dot_product_attention composed and fused (plain and causal) and compare."""
    say("\n3. The composed path (each step a recorded op) vs the fused kernel")
    errors: dict[str, float] = {}
    for causal in (False, True):
        results = {}
        for impl in ("composed", "fused"):
            q, k, v = (tensor(a[None, None], requires_grad=True) for a in (Qn, Kn, Vn))
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=causal, impl=impl)
            attended.backward(tensor(G[None, None]))  # (1, 1, T, d_v)
            results[impl] = [attended.data, q.grad.data, k.grad.data, v.grad.data]
        worst = max(
            float(np.max(np.abs(a - b))) for a, b in zip(results["composed"], results["fused"])
        )
        name = f"fused vs composed{' (causal)' if causal else ''}"
        errors[name] = worst
        say(f"  {name}: max difference over output, dQ, dK, dV = {worst:.2e}")
    return errors
