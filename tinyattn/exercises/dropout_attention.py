"""Exercise ``dropout_attention``: an attention head with inverted dropout on its weights, as a
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

SUMMARY = "dQ, dK and dV of attention with inverted dropout on the weights"
FUNCTION = "DropoutAttention"
ARGUMENTS = ("q", "k", "v", "keep", "p", "causal")
INPUTS = ("q", "k", "v")
OUTPUT = "out"
SYMBOLS = {"q": "Q", "k": "K", "v": "V", "out": "O"}

STUB = '''"""Exercise: the backward pass of attention with dropout on the weights, written as a
custom autograd Function.

    S = s · Q Kᵀ              with s = 1/√D; when causal, −inf where key j > query i
    P = softmax(S)            row by row
    W = P ⊙ keep / (1 − p)    inverted dropout: keep is the mask of kept weights
    O = W V

The mask is given (in training it is drawn once per forward pass; the backward must use the
same one). Write ``DropoutAttention.backward`` below with tensor operations, then check it:

    tinyattn exercise check dropout_attention.py
"""

import math

import tinyattn as torch  # the same file runs under PyTorch: write `import torch` instead

EXERCISE = "dropout_attention"


def attention_weights(q, k, scale, causal):
    """P = softmax(scale · q kᵀ) row by row, (..., T, S); when causal, key j > query i gets 0."""
    scores = scale * (q @ k.transpose(-2, -1))  # S (..., T, S)
    if causal:
        T, S = scores.shape[-2:]
        future = torch.ones(T, S, dtype=torch.bool).triu(1)  # True where key j > query i
        scores = scores.masked_fill(future, float("-inf"))
    return scores.softmax(dim=-1)


class DropoutAttention(torch.autograd.Function):
    """out = (P ⊙ keep / (1 − p)) v with P = softmax(s · q kᵀ), s = 1/√D."""

    @staticmethod
    def forward(ctx, q, k, v, keep, p, causal):
        """q (..., T, D), k (..., S, D), v (..., S, Dv), keep (..., T, S) bool, p the drop
        probability, causal a bool -> out (..., T, Dv)."""
        scale = 1.0 / math.sqrt(q.shape[-1])
        weights = attention_weights(q, k, scale, causal)  # P (..., T, S)
        dropped = weights * keep / (1.0 - p)  # W (..., T, S)
        # the inputs are saved, not P or W: backward recomputes them (see its docstring)
        ctx.save_for_backward(q, k, v, keep)
        ctx.scale, ctx.p, ctx.causal = scale, p, causal
        return dropped @ v

    @staticmethod
    def backward(ctx, grad_output):
        """grad_output = dL/dO (..., T, Dv) -> (dL/dq, dL/dk, dL/dv, None, None, None).

        One gradient per argument of forward, in order: None for keep, p and causal.
        attention_weights(q, k, ctx.scale, ctx.causal) gives P again: recomputed here from the
        saved inputs, it stays connected to q and k, so that your backward (in tensor
        operations, not numpy) can itself be differentiated.
        """
        q, k, v, keep = ctx.saved_tensors
        raise NotImplementedError("write dq, dk and dv here, with tensor operations")
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


def reference(q: Tensor, k: Tensor, v: Tensor, keep: Tensor, p: float, causal: bool,
              names: dict[str, Tensor] | None = None) -> Tensor:
    """The head in tinyattn ops, each recorded; the dropout factors ``Z = keep / (1 − p)`` and
    the dropped weights ``W`` are named in ``names`` when it is given."""
    weights = attention_weights(q, k, is_causal=causal, scale=head_scale(q))  # P (..., T, S)
    factors = Tensor((keep.numpy() / (1.0 - p)).astype(q.dtype))  # Z (..., T, S)
    dropped = weights * factors  # W (..., T, S)
    if names is not None:
        names.update(Z=factors, W=dropped)
    return matmul(dropped, v)


def _mistake(mask_in_dp: bool = True, mask_in_dv: bool = True, rescale: bool = True):
    """The gradients of a dropout-attention backward with the mask, or its scale, left out of
    one or both places it belongs."""
    def gradients(values: Values, d_out: Tensor) -> dict[str, Tensor]:
        q, k, v = (values[n].detach() for n in INPUTS)
        keep, drop = values["keep"].numpy(), values["p"]
        factors = Tensor((keep / (1.0 - drop) if rescale else keep).astype(q.dtype))
        scores = attention_scores(values)
        weights = scores.softmax(dim=-1)  # P
        dw = matmul(d_out, transpose(v))
        ds = through_softmax(scores, dw * factors if mask_in_dp else dw)
        s = head_scale(q)
        dropped = weights * Tensor((keep / (1.0 - drop)).astype(q.dtype))
        dv = matmul(transpose(dropped if mask_in_dv else weights), d_out)
        return {"q": matmul(ds, k) * s, "k": matmul(transpose(ds), q) * s, "v": dv}

    return gradients


MISTAKES = (
    Mistake("the dropout mask is not reapplied in the backward: the gradient at the weights "
            "must pass through W = P ⊙ keep / (1 − p) on its way to P, before the softmax "
            "backward", _mistake(mask_in_dp=False)),
    Mistake("the dropout mask is not reapplied in the backward: dV is built from the dropped "
            "weights W = P ⊙ keep / (1 − p), which multiplied V, not from P",
            _mistake(mask_in_dv=False)),
    Mistake("the dropout mask is not reapplied in the backward, neither on the way to P nor in "
            "dV (W = P ⊙ keep / (1 − p) is what multiplied V)",
            _mistake(mask_in_dp=False, mask_in_dv=False)),
    Mistake("the mask is reapplied without its 1 / (1 − p) scale: inverted dropout multiplies "
            "the kept weights by 1 / (1 − p), in the backward as in the forward",
            _mistake(rescale=False)),
)
