"""Adam and AdamW on the fused ``kernels.adamw.adamw_step`` kernel, with PyTorch's formulas."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..kernels.adamw import adamw_step
from ..kernels.parallel import kernel_section
from ..tensor import Tensor
from .optimizer import Optimizer, check_hyperparameter


class Adam(Optimizer):
    """Adam, with PyTorch's update rule (weight decay as an L2 term added to the gradient).

    For a parameter ``p`` with gradient ``g`` at step ``t`` (1-based, counted per parameter),
    moments ``m`` and ``v`` (both start at zero), ``λ`` weight decay::

        g ← g + λ p                 (AdamW instead: p ← p (1 − lr λ))
        m ← β1 m + (1 − β1) g
        v ← β2 v + (1 − β2) g²
        p ← p − lr / (1 − β1^t) · m / (sqrt(v) / sqrt(1 − β2^t) + eps)

    Per-parameter state, as in PyTorch: ``"step"`` (an int), ``"exp_avg"`` (m) and
    ``"exp_avg_sq"`` (v). ``p.grad`` is never modified.

    Parameters
    ----------
    params : iterable of Tensors or of dicts (parameter groups)
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
        Decay rates of the two moments, each in [0, 1).
    eps : float, default 1e-8
    weight_decay : float, default 0

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.Parameter(ta.tensor([1.0, -1.0], dtype=ta.float64))
    >>> w.grad = ta.tensor([3.0, -0.5], dtype=ta.float64)
    >>> opt = ta.optim.Adam([w], lr=0.1)
    >>> opt.step()
    >>> w.data.round(6).tolist()    # the first step moves each entry by lr · sign(g)
    [0.9, -0.9]
    >>> opt.state[w]["step"]
    1
    """

    _state_arrays = ("exp_avg", "exp_avg_sq")
    _state_counters = ("step",)
    #: True for AdamW: weight decay shrinks ``p`` directly instead of adding ``λ p`` to ``g``.
    _decoupled = False

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)

    def _check_group(self, group: Mapping[str, Any]) -> None:
        name = type(self).__name__
        for key in ("lr", "eps", "weight_decay"):
            check_hyperparameter(name, key, group[key])
        betas = group["betas"]
        if isinstance(betas, (str, bytes)) or not isinstance(betas, Iterable):
            raise TypeError(f"{name}: betas must be a pair of floats, got {betas!r}")
        betas = tuple(betas)
        if len(betas) != 2:
            raise ValueError(f"{name}: betas must be a pair of floats, got {betas!r}")
        for index, beta in enumerate(betas):
            if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
                raise TypeError(f"{name}: betas[{index}] must be a real number, got "
                                f"{type(beta).__name__}")
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"{name}: betas[{index}] must be in [0, 1), got {beta}")

    def _update(self, group: dict[str, Any], params: list[Tensor],
                grads: list[np.ndarray]) -> None:
        beta1, beta2 = group["betas"]
        for param in params:
            state = self.state[param]
            if state and (state["exp_avg"].shape != param.shape
                          or state["exp_avg"].dtype != param.dtype):
                raise ValueError(
                    f"{type(self).__name__}.step: the state of a parameter of shape "
                    f"{param.shape} {param.dtype} holds moments of shape "
                    f"{state['exp_avg'].shape} {state['exp_avg'].dtype} (was the parameter "
                    "replaced or converted after the optimizer was made?)"
                )
        # One kernel call per distinct step count (parameters added later lag behind).
        batches: dict[int, list[tuple[Tensor, np.ndarray]]] = {}
        for param, grad in zip(params, grads):
            state = self.state[param]
            if not state:
                state["step"] = 0
                state["exp_avg"] = np.zeros(param.shape, dtype=param.dtype)
                state["exp_avg_sq"] = np.zeros(param.shape, dtype=param.dtype)
            state["step"] += 1
            batches.setdefault(state["step"], []).append((param, grad))
        for step, batch in batches.items():
            # The kernel needs C-contiguous arrays; a strided parameter is updated through a
            # contiguous copy that is written back into the same array.
            arrays = [np.ascontiguousarray(param.data) for param, _ in batch]
            with kernel_section:
                adamw_step(arrays, [grad for _, grad in batch],
                           [self.state[param]["exp_avg"] for param, _ in batch],
                           [self.state[param]["exp_avg_sq"] for param, _ in batch],
                           step, float(group["lr"]), float(beta1), float(beta2),
                           float(group["eps"]), float(group["weight_decay"]), self._decoupled)
            for array, (param, _) in zip(arrays, batch):
                if array is not param.data:
                    param.data[...] = array


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as ``torch.optim.AdamW``.

    Same as :class:`Adam` except the decay step ``p ← p (1 − lr λ)`` replaces the L2 term, and
    ``weight_decay`` defaults to 0.01.

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.Parameter(ta.tensor([2.0], dtype=ta.float64))
    >>> w.grad = ta.tensor([0.0], dtype=ta.float64)
    >>> ta.optim.AdamW([w], lr=0.1, weight_decay=0.5).step()
    >>> w.data.tolist()    # a zero gradient leaves only the decay: 2 · (1 − 0.1 · 0.5)
    [1.9]
    """

    _decoupled = True

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
