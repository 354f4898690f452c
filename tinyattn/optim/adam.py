"""Adam and AdamW on the fused ``kernels.adamw.adamw_step`` kernel, with PyTorch's formulas."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..kernels.adamw import adamw_step
from ..kernels.compile_ahead import expect
from ..tensor import Tensor, check_kernel_dtype
from ..validation import check_number
from .optimizer import Optimizer


def _amsgrad_step(params: list[np.ndarray], grads: list[np.ndarray], exp_avgs: list[np.ndarray],
                  exp_avg_sqs: list[np.ndarray], max_exp_avg_sqs: list[np.ndarray], step: int,
                  lr: float, beta1: float, beta2: float, eps: float, weight_decay: float,
                  decoupled: bool) -> None:
    """One AMSGrad step in place: Adam with ``v̂ = max(v̂, v)`` in the denominator.

    The same arithmetic as the kernel (scalars in the parameter's dtype, PyTorch's ``lerp``),
    plus the running maximum; written with numpy because the kernel has no AMSGrad variant.
    """
    avg_weight = 1.0 - beta1
    for param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq in zip(
            params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs):
        dtype = param.dtype.type
        if decoupled:
            param *= dtype(1.0 - lr * weight_decay)
        else:
            grad = grad + dtype(weight_decay) * param
        if avg_weight < 0.5:  # lerp(m, g, w) as PyTorch computes it on the CPU
            exp_avg += dtype(avg_weight) * (grad - exp_avg)
        else:
            exp_avg[...] = grad - (grad - exp_avg) * (dtype(1.0) - dtype(avg_weight))
        exp_avg_sq *= dtype(beta2)
        exp_avg_sq += dtype(1.0 - beta2) * grad * grad
        np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        denom = np.sqrt(max_exp_avg_sq) / dtype(math.sqrt(1.0 - beta2**step)) + dtype(eps)
        param += dtype(-lr / (1.0 - beta1**step)) * (exp_avg / denom)


class Adam(Optimizer):
    """Adam, with PyTorch's update rule (weight decay as an L2 term added to the gradient).

    For a parameter ``p`` with gradient ``g`` at step ``t`` (1-based, counted per parameter),
    moments ``m`` and ``v`` (both start at zero), ``λ`` weight decay::

        g ← −g                      if maximize
        g ← g + λ p                 (decoupled, as AdamW: p ← p (1 − lr λ) instead)
        m ← β1 m + (1 − β1) g
        v ← β2 v + (1 − β2) g²
        v̂ ← max(v̂, v)               if amsgrad (and v̂ replaces v below)
        p ← p − lr / (1 − β1^t) · m / (sqrt(v) / sqrt(1 − β2^t) + eps)

    Per-parameter state, as in PyTorch: ``"step"`` (an int), ``"exp_avg"`` (m),
    ``"exp_avg_sq"`` (v) and, with amsgrad, ``"max_exp_avg_sq"`` (v̂). ``p.grad`` is never
    modified. Without amsgrad the update runs on the fused numba kernel.

    Parameters
    ----------
    params : iterable of Tensors or of dicts (parameter groups)
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
        Decay rates of the two moments, each in [0, 1).
    eps : float, default 1e-8
    weight_decay : float, default 0
    amsgrad : bool, default False
    foreach, fused : bool or None
        PyTorch's choice of implementation (a loop per tensor, one call per list, or one fused
        kernel, all with the same arithmetic). tinyattn's update is always one fused kernel
        (numpy with amsgrad), so any value runs it; both True together is refused, as in
        PyTorch.
    maximize : bool, default False
        Ascend the objective instead of descending it.
    capturable, differentiable : bool, default False
        ``True`` is refused: capturable is for CUDA graphs (PyTorch's CPU refuses it too), and
        tinyattn's update is not differentiable.
    decoupled_weight_decay : bool, default False
        Decay the weights directly, which makes this optimizer AdamW.

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.Parameter(ta.tensor([1.0, -1.0], dtype=ta.float64))
    >>> w.grad = ta.tensor([3.0, -0.5], dtype=ta.float64)
    >>> opt = ta.optim.Adam([w], lr=0.1)
    >>> opt.step()
    >>> w.numpy().round(6).tolist()    # the first step moves each entry by lr · sign(g)
    [0.9, -0.9]
    >>> opt.state[w]["step"]
    1
    """

    _state_arrays = ("exp_avg", "exp_avg_sq")
    _state_counters = ("step",)

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        foreach=foreach, maximize=maximize, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)
        first = next((p for group in self.param_groups for p in group["params"]), None)
        if first is not None:
            expect(["adamw"], first.dtype)  # the family of its fused kernel

    def _state_keys(self, group: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        extra = ("max_exp_avg_sq",) if group.get("amsgrad") else ()
        return self._state_arrays + extra, self._state_counters

    def _check_group(self, group: Mapping[str, Any]) -> None:
        name = type(self).__name__
        for key in ("lr", "eps", "weight_decay"):
            check_number(name, key, group[key], low=0.0)
        betas = group["betas"]
        if isinstance(betas, (str, bytes)) or not isinstance(betas, Iterable):
            raise TypeError(f"{name}: betas must be a pair of floats, got {betas!r}")
        betas = tuple(betas)
        if len(betas) != 2:
            raise ValueError(f"{name}: betas must be a pair of floats, got {betas!r}")
        for index, beta in enumerate(betas):
            if not 0.0 <= check_number(name, f"betas[{index}]", beta) < 1.0:
                raise ValueError(f"{name}: betas[{index}] must be in [0, 1), got {beta}")
        if group.get("fused") and group.get("foreach"):
            raise RuntimeError(f"{name}: fused and foreach cannot both be True (as in PyTorch)")
        if group.get("capturable"):
            raise ValueError(f"{name}: capturable=True is for CUDA graphs, which tinyattn (on "
                             "the CPU) does not have; PyTorch refuses it for CPU parameters too")
        if group.get("differentiable"):
            raise ValueError(f"{name}: differentiable=True is not supported: tinyattn's update "
                             "runs outside autograd (differentiate through a step written with "
                             "tensor ops instead)")

    def _update(self, group: dict[str, Any], params: list[Tensor],
                grads: list[np.ndarray]) -> None:
        beta1, beta2 = group["betas"]
        amsgrad = bool(group["amsgrad"])
        if group["maximize"]:
            grads = [-grad for grad in grads]
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
        # One update per distinct step count (parameters added later lag behind).
        batches: dict[int, list[tuple[Tensor, np.ndarray]]] = {}
        for param, grad in zip(params, grads):
            state = self.state[param]
            if not state:
                state["step"] = 0
                state["exp_avg"] = np.zeros(param.shape, dtype=param.dtype)
                state["exp_avg_sq"] = np.zeros(param.shape, dtype=param.dtype)
            if amsgrad and "max_exp_avg_sq" not in state:
                state["max_exp_avg_sq"] = np.zeros(param.shape, dtype=param.dtype)
            state["step"] += 1
            batches.setdefault(state["step"], []).append((param, grad))
        options = (float(group["lr"]), float(beta1), float(beta2), float(group["eps"]),
                   float(group["weight_decay"]), bool(group["decoupled_weight_decay"]))
        if not amsgrad:
            check_kernel_dtype(type(self).__name__, *params)
        for step, batch in batches.items():
            states = [self.state[param] for param, _ in batch]
            batch_grads = [grad for _, grad in batch]
            if amsgrad:
                _amsgrad_step([param.numpy() for param, _ in batch], batch_grads,
                              [state["exp_avg"] for state in states],
                              [state["exp_avg_sq"] for state in states],
                              [state["max_exp_avg_sq"] for state in states], step, *options)
                continue
            # The kernel needs C-contiguous arrays; a strided parameter is updated through a
            # contiguous copy that is written back into the same array.
            arrays = [np.ascontiguousarray(param.numpy()) for param, _ in batch]
            adamw_step(arrays, batch_grads, [state["exp_avg"] for state in states],
                       [state["exp_avg_sq"] for state in states], step, *options)
            for array, (param, _) in zip(arrays, batch):
                if array is not param.numpy():
                    param.numpy()[...] = array


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as ``torch.optim.AdamW``.

    Same as :class:`Adam` with ``decoupled_weight_decay=True``: the decay step
    ``p ← p (1 − lr λ)`` replaces the L2 term, and ``weight_decay`` defaults to 0.01.

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.Parameter(ta.tensor([2.0], dtype=ta.float64))
    >>> w.grad = ta.tensor([0.0], dtype=ta.float64)
    >>> ta.optim.AdamW([w], lr=0.1, weight_decay=0.5).step()
    >>> w.numpy().tolist()    # a zero gradient leaves only the decay: 2 · (1 − 0.1 · 0.5)
    [1.9]
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
