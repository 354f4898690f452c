"""``dropout``: checks its arguments and applies the :class:`Dropout` op
(:mod:`tinyattn.ops.dropout`), as ``torch.nn.functional.dropout``.

In training each element is kept with probability ``1 − p`` and scaled by ``1 / (1 − p)``, so
the expected output equals the input and evaluation needs no rescaling: there dropout is the
identity.
"""

from __future__ import annotations

from ..ops.dropout import Dropout
from ..random import draw_seed
from ..tensor import Tensor, check_float, check_kernel_dtype
from ..validation import check_probability


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 − p)``.

    The identity (``input`` itself) when ``training`` is False or ``p == 0``; all zeros when
    ``p == 1``. ``inplace`` is accepted and ignored (the result is always a new tensor).

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
    check_float("dropout", "input", input)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    check_kernel_dtype("dropout", input)
    return Dropout.apply(input, p=p, seed=draw_seed())
