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

The walkthrough is a sequence of steps. Each returns something to inspect (arrays, tensors, the
largest disagreement of each check), and printing it gives its section of the walkthrough::

    inputs = make_inputs()                               # X, W_q, W_k, W_v and G
    forward_pass = forward(inputs)                       # Q, K, V, S, P, O, L as tensors
    hand = backward_by_hand(inputs, forward_pass)        # the rules above, in numpy
    by_autograd = backward_by_autograd(forward_pass)     # L.backward(), then every .grad
    numeric = backward_by_finite_differences(inputs, forward_pass)
    gradients = compare_gradients(hand, by_autograd, numeric)  # the three side by side
    paths = compare_paths(inputs, forward_pass)          # composed vs fused attention
    traced = trace_backward(inputs, forward_pass)        # one backward pass, op by op

:func:`run` chains them and prints every section: it backs ``tinyattn walkthrough``;
``examples/08_backprop_through_attention.py`` calls the steps one by one.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

import numpy as np

import tinyattn as ta
from tinyattn.study import (
    SEED_EMBEDDINGS,
    SEED_TOKENS,
    TOLERANCE,
    numeric_gradient,
    softmax_forward_numpy,
)
from tinyattn.validation import check_int

FORMULAS = {
    "dO": "dO = G",
    "dV": "dV = P^T dO",
    "dP": "dP = dO V^T",
    "dS": "dS = P * (dP - rowsum(dP * P))",
    "dQ": "dQ = dS K * s",
    "dK": "dK = dS^T Q * s",
    "dW_q": "dW_q = X^T dQ",
    "dW_k": "dW_k = X^T dK",
    "dW_v": "dW_v = X^T dV",
}
"""The backward rule of each gradient, as the walkthrough prints it."""

_INTERMEDIATES = ("dO", "dV", "dP", "dS", "dQ", "dK")
_WEIGHTS = ("dW_q", "dW_k", "dW_v")


def _shown(name: str, array: np.ndarray) -> str:
    text = np.array2string(np.asarray(array), precision=4, suppress_small=True,
                           floatmode="fixed")
    return f"{name} =\n{text}"


def _largest_difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)))


def _arrays(forward_pass: ForwardPass, *names: str) -> tuple[np.ndarray, ...]:
    """The data of the named tensors of ``forward_pass``."""
    return tuple(getattr(forward_pass, name).numpy() for name in names)


@dataclass(frozen=True)
class Inputs:
    """What the walkthrough starts from (float64 arrays).

    Attributes
    ----------
    X : numpy.ndarray
        (T, C) embeddings of the seed sentence: T = 6 tokens, C = 3 features.
    W_q, W_k, W_v : numpy.ndarray
        (C, D) projection matrices.
    G : numpy.ndarray
        (T, D) a random cotangent: the gradient ``dL/dO`` arriving from above.
    """

    X: np.ndarray
    W_q: np.ndarray
    W_k: np.ndarray
    W_v: np.ndarray
    G: np.ndarray

    @property
    def scale(self) -> float:
        """``s = 1/√D``, the factor on the scores."""
        return 1.0 / np.sqrt(self.W_q.shape[1])

    def __str__(self) -> str:
        rule = "=" * 78
        title = 'Backprop through one attention head on "' + " ".join(SEED_TOKENS) + '"'
        T, C = self.X.shape
        return "\n".join([rule, title, rule, _shown(f"X ({T} tokens x {C} features)", self.X)])


def make_inputs(seed: int = 123, d_out: int = 2) -> Inputs:
    """Step 0: the seed sentence, weights drawn uniformly from [0, 1) and a normal cotangent.

    Parameters
    ----------
    seed : int
        Seeds a local generator (the global one is untouched).
    d_out : int
        D, the width of the query, key and value of the head.

    Examples
    --------
    >>> inputs = make_inputs()
    >>> inputs.X.shape, inputs.W_q.shape, inputs.G.shape
    ((6, 3), (3, 2), (6, 2))
    """
    check_int("walkthrough", "d_out", d_out, 1)
    rng = np.random.default_rng(seed)
    X = np.array(SEED_EMBEDDINGS)  # (T, C)
    W_q, W_k, W_v = (rng.uniform(0.0, 1.0, size=(X.shape[1], d_out)) for _ in range(3))
    G = rng.standard_normal((len(SEED_TOKENS), d_out))  # (T, D)
    return Inputs(X, W_q, W_k, W_v, G)


@dataclass(frozen=True)
class ForwardPass:
    """One head's forward pass as recorded float64 tensors.

    ``W_q``, ``W_k``, ``W_v`` are leaves; ``Q``, ``K``, ``V`` (T, D), ``S``, ``P`` (T, T) and
    ``O`` (T, D) keep their gradient after a backward (``retain_grad``); ``loss`` is
    ``L = Σ O ⊙ G``.
    """

    W_q: ta.Tensor
    W_k: ta.Tensor
    W_v: ta.Tensor
    Q: ta.Tensor
    K: ta.Tensor
    V: ta.Tensor
    S: ta.Tensor
    P: ta.Tensor
    O: ta.Tensor
    loss: ta.Tensor

    def __str__(self) -> str:
        D = self.Q.shape[-1]
        return "\n".join([
            f"\n1. Forward, in tinyattn (float64), d_out = {D}, scale s = 1/sqrt({D})",
            _shown("P = softmax(Q K^T * s)", self.P.numpy()),
            _shown("O = P V (context vectors)", self.O.numpy()),
            f"L = sum(O * G) = {self.loss.item():.6f}   (G is a random cotangent: dL/dO = G)",
        ])


def forward(inputs: Inputs) -> ForwardPass:
    """Step 1: the forward pass in tinyattn, every intermediate a tensor that keeps its gradient.

    Examples
    --------
    >>> forward_pass = forward(make_inputs())
    >>> forward_pass.S.shape, forward_pass.O.shape
    ((6, 6), (6, 2))
    >>> bool(np.allclose(forward_pass.P.numpy().sum(axis=-1), 1.0))   # each row of P sums to 1
    True
    """
    x = ta.tensor(inputs.X)
    weights = (inputs.W_q, inputs.W_k, inputs.W_v)
    W_q, W_k, W_v = (ta.tensor(w, requires_grad=True) for w in weights)  # (C, D) each
    Q, K, V = x @ W_q, x @ W_k, x @ W_v  # (T, D) each
    S = (Q @ K.T) * inputs.scale  # (T, T)
    P = S.softmax(dim=-1)
    O = P @ V  # (T, D)
    for t in (Q, K, V, S, P, O):
        t.retain_grad()
    loss = (O * ta.tensor(inputs.G)).sum()
    return ForwardPass(W_q, W_k, W_v, Q, K, V, S, P, O, loss)


@dataclass(frozen=True)
class Gradients:
    """``dL/d`` every intermediate and weight of one head, as float64 arrays.

    The same fields come out of :func:`backward_by_hand`, :func:`backward_by_autograd` and
    :func:`backward_by_finite_differences`; :data:`FORMULAS` names the rule of each.
    """

    dO: np.ndarray  # (T, D)
    dV: np.ndarray  # (T, D)
    dP: np.ndarray  # (T, T)
    dS: np.ndarray  # (T, T)
    dQ: np.ndarray  # (T, D)
    dK: np.ndarray  # (T, D)
    dW_q: np.ndarray  # (C, D)
    dW_k: np.ndarray  # (C, D)
    dW_v: np.ndarray  # (C, D)


def backward_by_hand(inputs: Inputs, forward_pass: ForwardPass) -> Gradients:
    """Step 2a: the backward pass written out with the chain rule, in numpy.

    Examples
    --------
    >>> inputs = make_inputs()
    >>> hand = backward_by_hand(inputs, forward(inputs))
    >>> bool(np.allclose(hand.dS.sum(axis=-1), 0.0))   # softmax ignores a shift of its row
    True
    """
    Q, K, V, P = _arrays(forward_pass, "Q", "K", "V", "P")
    scale = inputs.scale
    dO = inputs.G
    dV = P.T @ dO  # O = P V is linear in V ...
    dP = dO @ V.T  # ... and in P
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))  # softmax backward, row by row
    dQ = dS @ K * scale  # S = s · Q Kᵀ
    dK = dS.T @ Q * scale
    X = inputs.X
    return Gradients(dO, dV, dP, dS, dQ, dK, X.T @ dQ, X.T @ dK, X.T @ dV)


def backward_by_autograd(forward_pass: ForwardPass) -> Gradients:
    """Step 2b: ``L.backward()``, then every ``.grad``.

    Call it once per :func:`forward`: the backward pass frees the graph.

    Examples
    --------
    >>> inputs = make_inputs()
    >>> auto = backward_by_autograd(forward(inputs))
    >>> bool(np.array_equal(auto.dO, inputs.G))   # L = Σ O ⊙ G, so dL/dO = G
    True
    """
    forward_pass.loss.backward()
    # field "dQ" is Q.grad, "dW_q" is W_q.grad, and so on
    return Gradients(**{name: getattr(forward_pass, name[1:]).grad.numpy()
                        for name in _INTERMEDIATES + _WEIGHTS})


def backward_by_finite_differences(inputs: Inputs, forward_pass: ForwardPass) -> Gradients:
    """Step 2c: every gradient again by central differences of numpy functions, no autograd.

    For an intermediate, ``L`` is written as a function of it alone, everything before it held
    at its recorded value (``dS`` differentiates ``S ↦ Σ softmax(S) V ⊙ G``); for a weight, it
    is the whole forward pass in numpy.

    Examples
    --------
    >>> inputs = make_inputs()
    >>> numeric = backward_by_finite_differences(inputs, forward(inputs))
    >>> bool(np.abs(numeric.dO - inputs.G).max() < 1e-8)
    True
    """
    X, G, scale = inputs.X, inputs.G, inputs.scale
    Q, K, V, S, P, O = _arrays(forward_pass, "Q", "K", "V", "S", "P", "O")
    softmax = softmax_forward_numpy

    def loss_of_weights(W_q: np.ndarray, W_k: np.ndarray, W_v: np.ndarray) -> float:
        q, k, v = X @ W_q, X @ W_k, X @ W_v
        return float(np.sum(softmax(q @ k.T * scale) @ v * G))

    return Gradients(
        dO=numeric_gradient(lambda o: np.sum(o * G), O),
        dV=numeric_gradient(lambda v: np.sum(P @ v * G), V),
        dP=numeric_gradient(lambda p: np.sum(p @ V * G), P),
        dS=numeric_gradient(lambda s: np.sum(softmax(s) @ V * G), S),
        dQ=numeric_gradient(lambda q: np.sum(softmax(q @ K.T * scale) @ V * G), Q),
        dK=numeric_gradient(lambda k: np.sum(softmax(Q @ k.T * scale) @ V * G), K),
        dW_q=numeric_gradient(lambda w: loss_of_weights(w, inputs.W_k, inputs.W_v), inputs.W_q),
        dW_k=numeric_gradient(lambda w: loss_of_weights(inputs.W_q, w, inputs.W_v), inputs.W_k),
        dW_v=numeric_gradient(lambda w: loss_of_weights(inputs.W_q, inputs.W_k, w), inputs.W_v),
    )


@dataclass(frozen=True)
class Comparison:
    """The largest disagreement of each check of one step, and the text the step prints."""

    errors: dict[str, float]
    report: str

    def __str__(self) -> str:
        return self.report


def compare_gradients(hand: Gradients, autograd: Gradients, numeric: Gradients) -> Comparison:
    """Step 2d: the hand-derived gradients next to autograd's and the finite differences.

    ``errors`` has ``"<name> autograd"`` and ``"<name> finite-diff"`` for every field of
    :class:`Gradients`: the largest ``|hand − other|``.

    Examples
    --------
    >>> inputs = make_inputs()
    >>> forward_pass = forward(inputs)
    >>> hand = backward_by_hand(inputs, forward_pass)
    >>> check = compare_gradients(hand, backward_by_autograd(forward_pass), hand)
    >>> check.errors["dS autograd"] < 1e-12, check.errors["dS finite-diff"]
    (True, 0.0)
    """
    errors: dict[str, float] = {}
    for name in _INTERMEDIATES + _WEIGHTS:
        by_hand = getattr(hand, name)
        errors[f"{name} autograd"] = _largest_difference(by_hand, getattr(autograd, name))
        errors[f"{name} finite-diff"] = _largest_difference(by_hand, getattr(numeric, name))
    lines = ["\n2. Backward by hand (numpy), next to autograd and finite differences"]
    for name in _INTERMEDIATES:
        lines += [
            _shown(f"\n{FORMULAS[name]}  (by hand)", getattr(hand, name)),
            f"  max |hand - autograd|     = {errors[f'{name} autograd']:.2e}",
            f"  max |hand - finite diff.| = {errors[f'{name} finite-diff']:.2e}",
        ]
    lines.append("\nThe weights receive X^T times the gradient of their projection:")
    for name in _WEIGHTS:
        lines.append(
            f"  {FORMULAS[name]}: max |hand - autograd| = {errors[f'{name} autograd']:.2e}, "
            f"max |hand - finite diff.| = {errors[f'{name} finite-diff']:.2e}"
        )
    return Comparison(errors, "\n".join(lines))


def compare_paths(inputs: Inputs, forward_pass: ForwardPass) -> Comparison:
    """Step 3: ``scaled_dot_product_attention`` composed vs fused, plain and causal.

    Both paths get the recorded Q, K, V and the cotangent G; ``errors`` holds the largest
    difference over the output and its three gradients for each mask.

    Examples
    --------
    >>> inputs = make_inputs()
    >>> paths = compare_paths(inputs, forward(inputs))
    >>> sorted(paths.errors), max(paths.errors.values()) < 1e-12
    (['fused vs composed', 'fused vs composed (causal)'], True)
    """
    errors: dict[str, float] = {}
    lines = ["\n3. The composed path (each step a recorded op) vs the fused kernel"]
    for causal in (False, True):
        results = {}
        for impl in ("composed", "fused"):
            q, k, v = (ta.tensor(a[None, None], requires_grad=True)  # (1, 1, T, D)
                       for a in _arrays(forward_pass, "Q", "K", "V"))
            attended = ta.F.scaled_dot_product_attention(q, k, v, is_causal=causal, impl=impl)
            attended.backward(ta.tensor(inputs.G[None, None]))  # (1, 1, T, D)
            results[impl] = [attended.numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()]
        name = f"fused vs composed{' (causal)' if causal else ''}"
        errors[name] = max(
            _largest_difference(a, b) for a, b in zip(results["composed"], results["fused"])
        )
        lines.append(f"  {name}: max difference over output, dQ, dK, dV = {errors[name]:.2e}")
    return Comparison(errors, "\n".join(lines))


@dataclass(frozen=True)
class BackwardTrace:
    """One backward pass through the composed attention path, op by op (output side first)."""

    trace: ta.inspect.Trace

    def __str__(self) -> str:
        heading = "\n4. A trace of the backward pass through the composed path (output side first)"
        return heading + "\n" + self.trace.table()


def trace_backward(inputs: Inputs, forward_pass: ForwardPass) -> BackwardTrace:
    """Step 4: trace the backward of ``Σ sdpa(Q, K, V) ⊙ G`` on the composed path.

    Examples
    --------
    >>> inputs = make_inputs()
    >>> traced = trace_backward(inputs, forward(inputs))
    >>> [row.name for row in traced.trace][:4]
    ['Sum', 'Mul', 'MatMul', 'Softmax']
    """
    q, k, v = (ta.tensor(a[None], requires_grad=True)  # (1, T, D)
               for a in _arrays(forward_pass, "Q", "K", "V"))
    attended = ta.F.scaled_dot_product_attention(q, k, v, impl="composed")
    return BackwardTrace(ta.inspect.trace((attended * ta.tensor(inputs.G[None])).sum()))


def verdict(errors: dict[str, float]) -> str:
    """The last line: whether every check is below :data:`TOLERANCE`; the largest difference,
    and when a check fails, which one is worst.

    A passing line does not name its largest check: those differences are rounding errors,
    and which of them is largest changes with the CPU's order of summation.

    Examples
    --------
    >>> verdict({"dS autograd": 1e-16, "dS finite-diff": 3e-3}).strip()
    'CHECK FAILED: 2 checks, worst dS finite-diff = 3.00e-03 (tolerance 1e-07)'
    >>> verdict({"dS autograd": 1e-16, "dS finite-diff": 3e-10}).strip()
    'all checks passed: 2 checks, the largest difference 3.00e-10 (tolerance 1e-07)'
    """
    if not errors:
        raise ValueError("walkthrough.verdict: got no checks, expected at least one")
    worst = max(errors, key=errors.get)
    if errors[worst] < TOLERANCE:
        found = f"all checks passed: {len(errors)} checks, the largest difference"
    else:
        found = f"CHECK FAILED: {len(errors)} checks, worst {worst} ="
    return f"\n{found} {errors[worst]:.2e} (tolerance {TOLERANCE:.0e})"


def run(stream: TextIO | None = None, seed: int = 123, d_out: int = 2) -> dict[str, float]:
    """Every step in order, each printed; return the largest disagreement of each check.

    Every check compares the hand-derived gradient with autograd and with finite differences
    (and, at the end, the composed attention path with the fused kernel); a check passes when
    its value is below :data:`TOLERANCE`.

    Examples
    --------
    >>> import io
    >>> errors = run(io.StringIO())
    >>> len(errors), max(errors.values()) < TOLERANCE
    (20, True)
    """
    out = sys.stdout if stream is None else stream
    inputs = make_inputs(seed, d_out)
    print(inputs, file=out)
    forward_pass = forward(inputs)
    print(forward_pass, file=out)
    gradients = compare_gradients(backward_by_hand(inputs, forward_pass),
                                  backward_by_autograd(forward_pass),
                                  backward_by_finite_differences(inputs, forward_pass))
    print(gradients, file=out)
    paths = compare_paths(inputs, forward_pass)
    print(paths, file=out)
    print(trace_backward(inputs, forward_pass), file=out)
    errors = {**gradients.errors, **paths.errors}
    print(verdict(errors), file=out)
    return errors


def view(seed: int = 123, causal: bool = False, d_out: int = 2,
         check: bool = True) -> ta.inspect.View:
    """The explorer page (:func:`tinyattn.inspect.view`) of the walkthrough's head: the graph of
    ``L = Σ O ⊙ G`` for the seed sentence, its tensors named as above (``X``, ``W_q``, ``Q``,
    ``S``, ``P`` ...); with ``causal`` the scores above the diagonal are masked, so query 0 sees
    only key 0 (``p = 1``: the softmax passes it no gradient). ``tinyattn view`` writes it.

    Examples
    --------
    >>> page = view()
    >>> [node["op"] for node in page.nodes][:4], page.nodes[3]["label"]
    (['Sum', 'Mul', 'MatMul', 'Softmax'], 'P')
    """
    inputs = make_inputs(seed, d_out)
    x, G = ta.tensor(inputs.X), ta.tensor(inputs.G)
    W_q, W_k, W_v = (ta.tensor(w, requires_grad=True) for w in (inputs.W_q, inputs.W_k,
                                                                inputs.W_v))
    Q, K, V = x @ W_q, x @ W_k, x @ W_v  # (T, D) each
    S = (Q @ K.T) * inputs.scale  # (T, T)
    if causal:
        T = S.shape[0]
        S = S.masked_fill(ta.tensor(np.triu(np.ones((T, T), dtype=bool), k=1)), float("-inf"))
    loss = ((S.softmax(dim=-1) @ V) * G).sum()
    sentence = " ".join(SEED_TOKENS)
    return ta.inspect.view(loss, names={"X": x, "G": G, "W_q": W_q, "W_k": W_k, "W_v": W_v},
                           check=check, title=f'One attention head on "{sentence}"'
                           + (" (causal)" if causal else ""))
