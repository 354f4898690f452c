"""``dropout``: inverted dropout, as ``torch.nn.functional.dropout``.

In training each element is kept with probability ``1 − p`` and scaled by ``1 / (1 − p)``, so
the expected output equals the input and evaluation needs no rescaling: there dropout is the
identity. The keep-mask comes from a counter-based generator keyed by a seed drawn from
:func:`tinyattn.random.generator`, so ``ta.manual_seed`` makes it repeat.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..kernels.dropout import dropout_apply
from ..random import draw_seed
from ..tensor import Tensor


class Dropout(Function):
    """``y = x ⊙ m / (1 − p)`` for a keep-mask ``m``; ``dx = g ⊙ m / (1 − p)`` (the same mask).

    The mask is never stored: it is a function of a seed (drawn from ``ta.manual_seed``'s
    generator) through the counter-based generator, so the backward recomputes it.
    """

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, p: float) -> np.ndarray:
        seed = draw_seed()
        ctx.save_for_backward(seed, p)
        return dropout_apply(x, seed, p)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        seed, p = ctx.saved
        return (dropout_apply(np.ascontiguousarray(grad), seed, p),)


def check_probability(op: str, p: float) -> float:
    """``p`` as a float, or a ValueError/TypeError unless it is a number in [0, 1]."""
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: p must be a number in [0, 1], got {type(p).__name__}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability p must be in [0, 1], got {p}")
    return float(p)


def dropout(input: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 − p)``.

    The identity (``input`` itself) when ``training`` is False or ``p == 0``; all zeros when
    ``p == 1``.

    Parameters
    ----------
    input : Tensor, float
    p : float in [0, 1], the probability of dropping an element
    training : bool

    Returns
    -------
    Tensor, shape and dtype of ``input``

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.manual_seed(0)
    >>> sorted(set(ta.F.dropout(ta.ones(1000), p=0.5).tolist()))
    [0.0, 2.0]
    >>> ta.F.dropout(ta.ones(3), p=0.25, training=False).tolist()
    [1.0, 1.0, 1.0]
    """
    p = check_probability("dropout", p)
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        raise TypeError(f"dropout: input must be a float Tensor, got {type(input).__name__} "
                        f"of dtype {getattr(input, 'dtype', None)}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    return Dropout.apply(input, p=p)
