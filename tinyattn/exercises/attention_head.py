"""Exercise ``attention_head``: dQ, dK and dV of one scaled dot-product attention head."""

from __future__ import annotations

import numpy as np

from ..functional.attention import scaled_dot_product_attention
from ..tensor import Tensor
from .exercise import Case, Mistake, attention_inputs, attention_weights, swap

SUMMARY = "dQ, dK and dV of softmax(s · Q Kᵀ) V, with and without a causal mask"
INPUTS = ("q", "k", "v")

STUB = '''"""Exercise: the backward pass of one attention head — dQ, dK and dV.

    S = s · Q Kᵀ     with s = 1/√D; when causal, −inf where key j > query i
    P = softmax(S)   row by row
    O = P V

Write ``backward`` below, then check it (every element, several shapes, with and without a
causal mask):

    tinyattn exercise check attention_head.py
"""

import numpy as np

EXERCISE = "attention_head"


def forward(q, k, v, causal):
    """q (..., T, D), k (..., S, D), v (..., S, Dv) -> O (..., T, Dv), and the cache."""
    s = 1.0 / np.sqrt(q.shape[-1])
    scores = s * q @ np.swapaxes(k, -1, -2)  # (..., T, S)
    if causal:
        T, S = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((T, S), dtype=bool)), scores, -np.inf)
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = shifted / shifted.sum(axis=-1, keepdims=True)  # (..., T, S)
    return p @ v, (q, k, v, p, s)


def backward(d_out, cache):
    """dL/dO (..., T, Dv) -> (dL/dQ, dL/dK, dL/dV), shaped like q, k and v.

    Work backwards through O = P V, then P = softmax(S), then S = s · Q Kᵀ.
    np.swapaxes(a, -1, -2) transposes the last two axes.
    """
    q, k, v, p, s = cache
    raise NotImplementedError("write dQ, dK and dV here")
'''


def cases(rng: np.random.Generator) -> list[Case]:
    return [
        Case("one head, T = S = 4, D = 3, causal", attention_inputs(rng, (), 4, 4, 3, 3),
             {"causal": True}),
        Case("batch of 2, T = 3 queries, S = 5 keys, D = 2, Dv = 3",
             attention_inputs(rng, (2,), 3, 5, 2, 3), {"causal": False}),
        Case("(B, H) = (2, 2), T = S = 5, D = 4, causal",
             attention_inputs(rng, (2, 2), 5, 5, 4, 4), {"causal": True}),
    ]


def reference(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    return scaled_dot_product_attention(q, k, v, is_causal=causal)


def _intermediates(case: Case, d_out: np.ndarray) -> dict[str, np.ndarray]:
    """The quantities of the correct backward, for building the wrong ones."""
    q, k, v = (case.arrays[n] for n in "qkv")
    p, s = attention_weights(q, k, case.options["causal"])
    dp = d_out @ swap(v)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return {"q": q, "k": k, "p": p, "s": s, "dp": dp, "ds": ds, "dv": swap(p) @ d_out}


def _mistake(dq_scale: bool = True, dk_scale: bool = True, dk_transposed: bool = True,
             dv_transposed: bool = True, row_sum: bool = True):
    def gradients(case: Case, d_out: np.ndarray) -> dict[str, np.ndarray]:
        m = _intermediates(case, d_out)
        ds = m["ds"] if row_sum else m["p"] * m["dp"]
        dq = (m["s"] if dq_scale else 1.0) * ds @ m["k"]
        dk = (m["s"] if dk_scale else 1.0) * (swap(ds) if dk_transposed else ds) @ m["q"]
        dv = m["dv"] if dv_transposed else m["p"] @ d_out
        return {"q": dq, "k": dk, "v": dv}

    return gradients


MISTAKES = (
    Mistake("the scale s = 1/√D is missing in dQ: S = s · Q Kᵀ, so dQ = s · dS K",
            _mistake(dq_scale=False)),
    Mistake("the scale s = 1/√D is missing in dK: S = s · Q Kᵀ, so dK = s · dSᵀ Q",
            _mistake(dk_scale=False)),
    Mistake("the scale s = 1/√D is missing in dQ and in dK (dQ = s · dS K, "
            "dK = s · dSᵀ Q)", _mistake(dq_scale=False, dk_scale=False)),
    Mistake("a transpose is missing in dK: dK = s · dSᵀ Q (keys are the columns of S), "
            "not s · dS Q", _mistake(dk_transposed=False)),
    Mistake("a transpose is missing in dV: O = P V gives dV = Pᵀ dO, not P dO",
            _mistake(dv_transposed=False)),
    Mistake("the row-sum term of the softmax backward is missing: dS = P ⊙ (dP − "
            "rowsum(dP ⊙ P)), not P ⊙ dP", _mistake(row_sum=False)),
)
