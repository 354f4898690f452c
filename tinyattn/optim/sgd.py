"""Stochastic gradient descent with momentum, dampening, weight decay and Nesterov, as PyTorch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..tensor import Tensor
from ..validation import check_number
from .optimizer import Optimizer


class SGD(Optimizer):
    """Stochastic gradient descent, with PyTorch's update rule.

    For a parameter ``p`` with gradient ``g`` (``μ`` momentum, ``τ`` dampening, ``λ`` weight
    decay)::

        g ← −g                     if maximize
        g ← g + λ p
        b ← g                      on the first step (the buffer starts as a copy of g)
        b ← μ b + (1 − τ) g        afterwards
        g ← g + μ b  if nesterov,  else  g ← b          (only when μ ≠ 0)
        p ← p − lr g

    The momentum buffer is the per-parameter state ``"momentum_buffer"`` (kept only when
    ``momentum != 0``). ``p.grad`` is never modified.

    Parameters
    ----------
    params : iterable of Tensors or of dicts (parameter groups)
    lr : float, default 1e-3
    momentum, dampening, weight_decay : float, default 0
    nesterov : bool, default False
        Nesterov momentum; needs ``momentum > 0`` and ``dampening == 0``.
    maximize : bool, default False
        Ascend the objective instead of descending it.
    foreach, fused : bool or None
        Accepted for PyTorch compatibility (they pick an implementation there); no effect.

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.Parameter(ta.tensor([1.0, 2.0], dtype=ta.float64))
    >>> w.grad = ta.tensor([0.5, -1.0], dtype=ta.float64)
    >>> opt = ta.optim.SGD([w], lr=0.1)
    >>> opt.step()
    >>> w.numpy().tolist()
    [0.95, 2.1]
    """

    _state_arrays = ("momentum_buffer",)

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 momentum: float = 0, dampening: float = 0, weight_decay: float = 0,
                 nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, fused: bool | None = None) -> None:
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, fused=fused)
        super().__init__(params, defaults)

    def _check_group(self, group: Mapping[str, Any]) -> None:
        for key in ("lr", "momentum", "weight_decay"):
            check_number("SGD", key, group[key], low=0.0)
        check_number("SGD", "dampening", group["dampening"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(f"SGD: nesterov=True requires momentum > 0 and dampening = 0, got "
                             f"momentum={group['momentum']}, dampening={group['dampening']}")

    def _update(self, group: dict[str, Any], params: list[Tensor],
                grads: list[np.ndarray]) -> None:
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov = group["weight_decay"], group["nesterov"]
        for param, grad in zip(params, grads):
            dtype = param.dtype.type  # scalars in the parameter's dtype, as PyTorch does
            if group["maximize"]:
                grad = -grad
            if weight_decay != 0:
                grad = grad + dtype(weight_decay) * param.numpy()
            if momentum != 0:
                state = self.state[param]
                buffer = state.get("momentum_buffer")
                if buffer is None:
                    buffer = state["momentum_buffer"] = grad.copy(order="C")
                else:
                    buffer *= dtype(momentum)
                    buffer += dtype(1 - dampening) * grad
                grad = grad + dtype(momentum) * buffer if nesterov else buffer
            param.numpy()[...] += dtype(-lr) * grad
