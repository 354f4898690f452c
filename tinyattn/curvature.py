"""Second order through attention, step by step: how the gradient itself changes.

Every quantity here comes from tinyattn's own higher-order autograd (``create_graph=True``,
:mod:`tinyattn.autograd.functional`) and is checked against a formula or finite differences:

1. :func:`softmax_jacobian` — the Jacobian of one row of attention weights with respect to its
   scores, from ``jacobian(softmax)``: it equals ``diag(p) − p pᵀ`` and its rows sum to zero.
2. :func:`saturation` — the same row at two score scales: scaled by ``1/√d_k`` the weights
   stay spread and the Jacobian's largest eigenvalue (how much gradient the softmax passes)
   stays large; unscaled, a row saturates towards one-hot and the eigenvalue collapses.
3. :func:`hessian_eigenvalues` — the top eigenvalue of the loss's Hessian along ``W_q`` and
   along ``W_v``, by power iteration on Hessian-vector products (two reverse passes each).
4. :func:`gradient_penalty` — a few training steps on ``loss + λ ‖∂loss/∂W_q‖²``: the penalty
   is differentiated through the recorded backward pass.

:func:`run` chains them; it backs ``tinyattn walkthrough --second-order`` and
``examples/09_second_order.py``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import TextIO

import numpy as np

import tinyattn as ta
from tinyattn.study import SEED_EMBEDDINGS, SEED_TOKENS

TOLERANCE = 1e-10
"""Largest difference accepted between a derivative and its closed form."""


def _head_loss(X: np.ndarray, target: np.ndarray, scale: float):
    """``L(W_q, W_k, W_v) = ½ ‖softmax(X W_q (X W_k)ᵀ · s) X W_v − Y‖²`` for one head."""
    x, y = ta.tensor(X), ta.tensor(target)

    def loss(w_q: ta.Tensor, w_k: ta.Tensor, w_v: ta.Tensor) -> ta.Tensor:
        weights = ((x @ w_q) @ (x @ w_k).T * scale).softmax(-1)  # (T, T)
        error = weights @ (x @ w_v) - y  # (T, d_v)
        return 0.5 * (error * error).sum()

    return loss


@dataclass
class Head:
    """The walkthrough's head on the seed sentence, with a regression target ``Y``."""

    X: np.ndarray
    weights: dict[str, np.ndarray]
    target: np.ndarray
    scale: float

    def loss(self):
        return _head_loss(self.X, self.target, self.scale)

    def scores(self) -> np.ndarray:
        q, k = self.X @ self.weights["W_q"], self.X @ self.weights["W_k"]
        return q @ k.T * self.scale  # (T, T)


def make_head(seed: int = 123, d_out: int = 2) -> Head:
    """The seed sentence ``X (6, 3)``, uniform weights ``(3, d_out)`` and a target ``Y``."""
    rng = np.random.default_rng(seed)
    X = np.array(SEED_EMBEDDINGS)
    weights = {name: rng.uniform(0.0, 1.0, (X.shape[1], d_out)) for name in
               ("W_q", "W_k", "W_v")}
    target = rng.standard_normal((len(SEED_TOKENS), d_out))
    return Head(X, weights, target, 1.0 / math.sqrt(d_out))


@dataclass
class Jacobian:
    """One row ``p = softmax(s)`` and ``J = ∂p/∂s`` from autograd, next to ``diag(p) − p pᵀ``."""

    token: str
    p: np.ndarray
    J: np.ndarray
    error: float

    def __str__(self) -> str:
        matrix = np.array2string(self.J, precision=4, suppress_small=True, floatmode="fixed")
        return (f'1. Softmax Jacobian of the row of "{self.token}": p = '
                f"{np.array2string(self.p, precision=4, floatmode='fixed')}\n"
                f"J = d softmax(s) / d s (from ta.autograd.functional.jacobian) =\n{matrix}\n"
                f"  max |J - (diag(p) - p p^T)| = {self.error:.2e}; rows sum to "
                f"{np.abs(self.J.sum(axis=1)).max():.1e}")


def softmax_jacobian(head: Head, row: int = 1) -> Jacobian:
    """The Jacobian of attention row ``row`` with respect to its scores, and its error against
    the closed form ``diag(p) − p pᵀ``."""
    s = ta.tensor(head.scores()[row])
    J = ta.autograd.functional.jacobian(lambda scores: scores.softmax(-1), s).numpy()
    p = np.exp(s.numpy() - s.numpy().max())
    p /= p.sum()
    error = float(np.abs(J - (np.diag(p) - np.outer(p, p))).max())
    return Jacobian(SEED_TOKENS[row], p, J, error)


@dataclass
class Saturation:
    """A row at several score scales: its entropy and the Jacobian's largest eigenvalue."""

    rows: list[tuple[str, float, float, float]]  # (scale label, max weight, entropy, λ_max)

    def __str__(self) -> str:
        lines = ["2. Saturation: one row of scores of d_k = 64 projections, scaled two ways",
                 "   scale        max weight   entropy   largest eigenvalue of diag(p) - pp^T"]
        for label, top, entropy, eigen in self.rows:
            lines.append(f"   {label:<12} {top:10.4f} {entropy:9.4f}   {eigen:.3e}")
        return "\n".join(lines)


def saturation(seed: int = 0, d_k: int = 64) -> Saturation:
    """Scores of random ``d_k``-dim queries and keys, scaled by ``1/√d_k`` and by 1: the
    unscaled row saturates and passes little gradient (its Jacobian's spectrum shrinks)."""
    rng = np.random.default_rng(seed)
    q, K = rng.standard_normal(d_k), rng.standard_normal((6, d_k))
    rows = []
    for label, scale in ((f"1/sqrt({d_k})", 1 / math.sqrt(d_k)), ("1", 1.0)):
        s = ta.tensor(K @ q * scale)
        J = ta.autograd.functional.jacobian(lambda t: t.softmax(-1), s).numpy()
        p = s.softmax(-1).numpy()
        entropy = float(-(p * np.log(np.maximum(p, 1e-300))).sum())
        rows.append((label, float(p.max()), entropy, float(np.linalg.eigvalsh(J).max())))
    return Saturation(rows)


@dataclass
class Curvature:
    """The top Hessian eigenvalue of the loss along each weight, by power iteration."""

    eigenvalues: dict[str, float]
    checks: dict[str, float]

    def __str__(self) -> str:
        lines = ["3. Curvature of L = 1/2 ||P V - Y||^2: top Hessian eigenvalue by power "
                 "iteration on Hessian-vector products"]
        for name, value in self.eigenvalues.items():
            lines.append(f"   along {name}: {value:.4f}   (|Hv - lambda v| / |lambda| = "
                         f"{self.checks[name]:.1e})")
        return "\n".join(lines)


def hessian_eigenvalues(head: Head, iterations: int = 60) -> Curvature:
    """``λ_max`` of ``∂²L/∂W²`` for ``W_q`` and ``W_v`` (the others held fixed): power
    iteration ``v ← H v / ‖H v‖`` with ``H v`` from ``ta.autograd.functional.hvp``."""
    loss = head.loss()
    names = ("W_q", "W_k", "W_v")
    eigenvalues, checks = {}, {}
    for name in ("W_q", "W_v"):
        def along(w: ta.Tensor, name: str = name) -> ta.Tensor:
            args = [w if n == name else ta.tensor(head.weights[n]) for n in names]
            return loss(*args)

        w = ta.tensor(head.weights[name])
        v = np.random.default_rng(0).standard_normal(w.shape)
        value = 0.0
        for _ in range(iterations):
            v /= np.linalg.norm(v)
            _, hv = ta.autograd.functional.hvp(along, w, ta.tensor(v))
            value = float(np.sum(v * hv.numpy()))
            v = hv.numpy()
        v /= np.linalg.norm(v)
        _, hv = ta.autograd.functional.hvp(along, w, ta.tensor(v))
        eigenvalues[name] = value
        checks[name] = float(np.linalg.norm(hv.numpy() - value * v) / abs(value))
    return Curvature(eigenvalues, checks)


@dataclass
class Penalty:
    """The steps of training with a gradient-norm penalty."""

    steps: list[tuple[int, float, float]]  # (step, loss, ‖∂loss/∂W_q‖²)

    def __str__(self) -> str:
        lines = ["4. Training on loss + 0.5 * ||dloss/dW_q||^2 (the penalty is differentiated "
                 "through the recorded backward pass)",
                 "   step   loss       ||dloss/dW_q||^2"]
        lines += [f"   {step:4d}   {loss:.6f}   {norm:.6f}" for step, loss, norm in self.steps]
        return "\n".join(lines)


def gradient_penalty(head: Head, steps: int = 5, lr: float = 0.1,
                     strength: float = 0.5) -> Penalty:
    """SGD on ``L + strength · ‖∂L/∂W_q‖²`` over the three weights, for a few steps."""
    params = [ta.nn.Parameter(ta.tensor(head.weights[n])) for n in ("W_q", "W_k", "W_v")]
    optimizer = ta.optim.SGD(params, lr=lr)
    loss_of = head.loss()
    history = []
    for step in range(steps):
        loss = loss_of(*params)
        (grad_q,) = ta.autograd.grad(loss, params[0], create_graph=True)
        penalty = (grad_q * grad_q).sum()
        history.append((step, loss.item(), penalty.item()))
        optimizer.zero_grad()
        (loss + strength * penalty).backward()
        optimizer.step()
    return Penalty(history)


def run(stream: TextIO | None = None, seed: int = 123) -> dict[str, float]:
    """Print the second-order walkthrough; return the largest error of each check."""
    out = sys.stdout if stream is None else stream
    head = make_head(seed)
    jacobian = softmax_jacobian(head)
    print(jacobian, file=out)
    print(saturation(), file=out)
    curvature = hessian_eigenvalues(head)
    print(curvature, file=out)
    print(gradient_penalty(head), file=out)
    return {"softmax jacobian": jacobian.error,
            **{f"eigenvector along {n}": e for n, e in curvature.checks.items()}}
