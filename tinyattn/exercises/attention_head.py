"""Exercise ``attention_head``: dQ, dK and dV of one scaled dot-product attention head, as a
custom autograd Function."""

from __future__ import annotations

import numpy as np

from ..ops import matmul
from ..ops.attention import attention_weights
from ..tensor import Tensor
from .exercise import (
    Case,
    Mistake,
    Values,
    attention_inputs,
    attention_scores,
    head_scale,
    through_softmax,
    transpose,
)

SUMMARY = "dQ, dK and dV of softmax(s · Q Kᵀ) V, with and without a causal mask"
FUNCTION = "AttentionHead"
ARGUMENTS = ("q", "k", "v", "causal")
INPUTS = ("q", "k", "v")
OUTPUT = "out"
SYMBOLS = {"q": "Q", "k": "K", "v": "V", "out": "O"}

STUB = '''"""Exercise: the backward pass of one attention head — dQ, dK and dV — written as a custom
autograd Function.

    S = s · Q Kᵀ     with s = 1/√D; when causal, −inf where key j > query i
    P = softmax(S)   row by row
    O = P V

Write ``AttentionHead.backward`` below with tensor operations, then check it (every element,
several shapes, with and without a causal mask):

    tinyattn exercise check attention_head.py
"""

import math

import tinyattn as torch  # the same file runs under PyTorch: write `import torch` instead

EXERCISE = "attention_head"


def attention_weights(q, k, scale, causal):
    """P = softmax(scale · q kᵀ) row by row, (..., T, S); when causal, key j > query i gets 0."""
    scores = scale * (q @ k.transpose(-2, -1))  # S (..., T, S)
    if causal:
        T, S = scores.shape[-2:]
        future = torch.ones(T, S, dtype=torch.bool).triu(1)  # True where key j > query i
        scores = scores.masked_fill(future, float("-inf"))
    return scores.softmax(dim=-1)


class AttentionHead(torch.autograd.Function):
    """out = softmax(s · q kᵀ) v, with s = 1/√D (and a causal mask when asked)."""

    @staticmethod
    def forward(ctx, q, k, v, causal):
        """q (..., T, D), k (..., S, D), v (..., S, Dv), causal a bool -> out (..., T, Dv)."""
        scale = 1.0 / math.sqrt(q.shape[-1])
        p = attention_weights(q, k, scale, causal)  # P (..., T, S)
        # the inputs are saved, not P: backward recomputes P from them (see its docstring)
        ctx.save_for_backward(q, k, v)
        ctx.scale, ctx.causal = scale, causal
        return p @ v

    @staticmethod
    def backward(ctx, grad_output):
        """grad_output = dL/dO (..., T, Dv) -> (dL/dq, dL/dk, dL/dv, None).

        One gradient per argument of forward, in order: None for causal (a flag). Work
        backwards through O = P V, then P = softmax(S), then S = s · Q Kᵀ.
        attention_weights(q, k, ctx.scale, ctx.causal) gives P again: recomputed here from the
        saved inputs, it stays connected to q and k, so that your backward (in tensor
        operations, not numpy) can itself be differentiated. t.transpose(-2, -1) transposes
        the last two dims.
        """
        q, k, v = ctx.saved_tensors
        raise NotImplementedError("write dq, dk and dv here, with tensor operations")
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


def reference(q: Tensor, k: Tensor, v: Tensor, causal: bool,
              names: dict[str, Tensor] | None = None) -> Tensor:
    """The head in tinyattn ops, each recorded: scores, mask, softmax, weights times values."""
    weights = attention_weights(q, k, is_causal=causal, scale=head_scale(q))  # P (..., T, S)
    return matmul(weights, v)


def _mistake(dq_scale: bool = True, dk_scale: bool = True, dk_transposed: bool = True,
             dv_transposed: bool = True, row_sum: bool = True):
    """The gradients of an attention-head backward with one or two steps wrong."""
    def gradients(values: Values, d_out: Tensor) -> dict[str, Tensor]:
        q, k, v = (values[n].detach() for n in INPUTS)
        s = head_scale(q)
        scores = attention_scores(values)
        dp = matmul(d_out, transpose(v))
        p = scores.softmax(dim=-1)
        ds = through_softmax(scores, dp) if row_sum else p * dp
        dq = matmul(ds, k) * (s if dq_scale else 1.0)
        dk = matmul(transpose(ds) if dk_transposed else ds, q) * (s if dk_scale else 1.0)
        dv = matmul(transpose(p) if dv_transposed else p, d_out)
        return {"q": dq, "k": dk, "v": dv}

    return gradients


MISTAKES = (
    Mistake("the scale s = 1/√D is missing in dQ: S = s · Q Kᵀ, so dQ carries the factor s",
            _mistake(dq_scale=False)),
    Mistake("the scale s = 1/√D is missing in dK: S = s · Q Kᵀ, so dK carries the factor s",
            _mistake(dk_scale=False)),
    Mistake("the scale s = 1/√D is missing in dQ and in dK: S = s · Q Kᵀ, so both carry the "
            "factor s", _mistake(dq_scale=False, dk_scale=False)),
    Mistake("a transpose is missing in dK: the keys are the columns of S, so dK is built from "
            "dSᵀ, not dS", _mistake(dk_transposed=False)),
    Mistake("a transpose is missing in dV: O = P V, so dV is built from Pᵀ, not P",
            _mistake(dv_transposed=False)),
    Mistake("the row-sum term of the softmax backward is missing: P ⊙ dP is only the diagonal "
            "of the softmax's Jacobian", _mistake(row_sum=False)),
)
