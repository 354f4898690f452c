"""Exercise ``dropout_attention``: an attention head with inverted dropout on its weights."""

from __future__ import annotations

import numpy as np

from ..ops import masked_fill, matmul, softmax
from ..tensor import Tensor
from .exercise import Case, Mistake, attention_inputs, attention_weights, swap

SUMMARY = "dQ, dK and dV of attention with inverted dropout on the weights"
INPUTS = ("q", "k", "v")

STUB = '''"""Exercise: the backward pass of attention with dropout on the weights.

    S = s · Q Kᵀ              with s = 1/√D; when causal, −inf where key j > query i
    P = softmax(S)            row by row
    W = P ⊙ keep / (1 − p)    inverted dropout: keep is the mask of kept weights
    O = W V

The mask is given (in training it is drawn once per forward pass; the backward must use the
same one). Write ``backward`` below, then check it:

    tinyattn exercise check dropout_attention.py
"""

import numpy as np

EXERCISE = "dropout_attention"


def forward(q, k, v, keep, p, causal):
    """q (..., T, D), k (..., S, D), v (..., S, Dv), keep (..., T, S) bool, p the drop
    probability -> O (..., T, Dv), and the cache."""
    s = 1.0 / np.sqrt(q.shape[-1])
    scores = s * q @ np.swapaxes(k, -1, -2)  # (..., T, S)
    if causal:
        T, S = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((T, S), dtype=bool)), scores, -np.inf)
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = shifted / shifted.sum(axis=-1, keepdims=True)  # P (..., T, S)
    dropped = weights * keep / (1.0 - p)  # W
    return dropped @ v, (q, k, v, weights, dropped, keep, p, s)


def backward(d_out, cache):
    """dL/dO (..., T, Dv) -> (dL/dQ, dL/dK, dL/dV), shaped like q, k and v."""
    q, k, v, weights, dropped, keep, p, s = cache
    raise NotImplementedError("write dQ, dK and dV here")
'''


def cases(rng: np.random.Generator) -> list[Case]:
    def case(label: str, T: int, S: int, D: int, lead: tuple[int, ...], drop: float,
             is_causal: bool) -> Case:
        arrays = attention_inputs(rng, lead, T, S, D, D)
        keep = rng.random(lead + (T, S)) >= drop
        return Case(label, arrays, {"keep": keep, "p": drop, "causal": is_causal})

    return [
        case("one head, T = S = 4, D = 3, p = 0.25, causal", 4, 4, 3, (), 0.25, True),
        case("batch of 2, T = 3, S = 5, D = 2, p = 0.5", 3, 5, 2, (2,), 0.5, False),
        case("(B, H) = (2, 2), T = S = 5, D = 4, p = 0.4, causal", 5, 5, 4, (2, 2), 0.4, True),
    ]


def reference(q: Tensor, k: Tensor, v: Tensor, keep: np.ndarray, p: float,
               causal: bool) -> Tensor:
    scores = matmul(q, k.transpose(-2, -1)) * (1.0 / np.sqrt(q.shape[-1]))  # (..., T, S)
    if causal:
        T, S = scores.shape[-2:]
        scores = masked_fill(scores, Tensor(np.triu(np.ones((T, S), dtype=bool), 1)), -np.inf)
    factors = Tensor((keep / (1.0 - p)).astype(q.dtype))
    return matmul(softmax(scores, dim=-1) * factors, v)


def _mistake(mask_in_dp: bool = True, mask_in_dv: bool = True, rescale: bool = True):
    def gradients(case: Case, d_out: np.ndarray) -> dict[str, np.ndarray]:
        q, k, v = (case.arrays[n] for n in "qkv")
        keep, drop = case.options["keep"], case.options["p"]
        weights, s = attention_weights(q, k, case.options["causal"])
        factors = keep / (1.0 - drop)
        dw = d_out @ swap(v)
        dp = (dw * (factors if rescale else keep)) if mask_in_dp else dw
        ds = weights * (dp - (dp * weights).sum(-1, keepdims=True))
        dv = swap(weights * factors if mask_in_dv else weights) @ d_out
        return {"q": s * ds @ k, "k": s * swap(ds) @ q, "v": dv}

    return gradients


MISTAKES = (
    Mistake("the dropout mask is not reapplied in the backward: the gradient at the "
            "weights is dW = dO Vᵀ, and dP = dW ⊙ keep / (1 − p) before the softmax "
            "backward", _mistake(mask_in_dp=False)),
    Mistake("the dropout mask is not reapplied in the backward: dV = Wᵀ dO with the "
            "dropped weights W = P ⊙ keep / (1 − p), not Pᵀ dO", _mistake(mask_in_dv=False)),
    Mistake("the dropout mask is not reapplied in the backward, neither to dP nor in dV "
            "(W = P ⊙ keep / (1 − p) is what multiplied V)",
            _mistake(mask_in_dp=False, mask_in_dv=False)),
    Mistake("the mask is reapplied to dP without its 1 / (1 − p) scale: inverted dropout "
            "multiplies the kept weights by 1 / (1 − p), so dP = dW ⊙ keep / (1 − p)",
            _mistake(rescale=False)),
)
