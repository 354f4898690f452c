"""Gradient utilities for training loops: ``clip_grad_norm_`` and ``clip_grad_value_``, as
``torch.nn.utils``."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..tensor import Tensor
from ..validation import check_number


def _vector_norm(array: np.ndarray, norm_type: float) -> np.floating:
    """The ``norm_type``-norm of all entries of ``array``, in its dtype (0 when it is empty)."""
    flat = array.reshape(-1)
    if flat.size == 0:
        return array.dtype.type(0)
    return array.dtype.type(np.linalg.norm(flat, ord=norm_type))


def _tensors(op: str, parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    """``parameters`` as a list of Tensors (a single Tensor is accepted)."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for index, param in enumerate(params):
        if not isinstance(param, Tensor):
            raise TypeError(f"{op}: parameters[{index}] must be a Tensor, got "
                            f"{type(param).__name__}")
    return params


def _float_grads(op: str, params: list[Tensor]) -> list[np.ndarray]:
    """The gradient arrays of the parameters that have one (all float, or a TypeError)."""
    grads = [param.grad.numpy() for param in params if param.grad is not None]
    for grad in grads:
        if grad.dtype.kind != "f":
            raise TypeError(f"{op}: gradients must be float arrays, got dtype {grad.dtype}")
    return grads


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale all gradients in place so that their joint norm is at most ``max_norm``.

    The joint norm is the ``norm_type``-norm of all gradient entries taken together (the norm
    of the per-parameter norms); ``norm_type=inf`` gives the largest absolute entry. Every
    gradient is multiplied by ``min(max_norm / (total_norm + 1e-6), 1)``, as in PyTorch, so
    gradients already within the bound are left unchanged. Parameters without a gradient are
    skipped.

    Parameters
    ----------
    parameters : Tensor or iterable of Tensors
    max_norm : float
        The largest allowed joint norm (>= 0; ``inf`` only measures).
    norm_type : float, default 2.0
        The order p > 0 of the norm, or ``inf``.
    error_if_nonfinite : bool, default False
        Raise RuntimeError instead of clipping when the joint norm is NaN or infinite.
    foreach : bool or None
        Accepted for PyTorch compatibility (it picks an implementation there); no effect.

    Returns
    -------
    Tensor
        The joint norm of the gradients before clipping (a 0-d tensor of their dtype; float32
        0.0 when no parameter has a gradient).

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.Parameter(ta.zeros(2))
    >>> w.grad = ta.tensor([3.0, 4.0])
    >>> ta.nn.utils.clip_grad_norm_([w], max_norm=1.0).item()
    5.0
    >>> [round(g, 4) for g in w.grad.tolist()]
    [0.6, 0.8]
    """
    name = "clip_grad_norm_"
    params = _tensors(name, parameters)
    max_norm = check_number(name, "max_norm", max_norm, finite=False)
    norm_type = check_number(name, "norm_type", norm_type, finite=False)
    if math.isnan(max_norm) or max_norm < 0:
        raise ValueError(f"{name}: max_norm must be >= 0, got {max_norm}")
    if math.isnan(norm_type) or norm_type <= 0:
        raise ValueError(f"{name}: norm_type must be a number > 0 or inf, got {norm_type}")
    grads = _float_grads(name, params)
    if not grads:
        return Tensor(np.array(0.0, dtype=np.float32))
    dtype = np.result_type(*grads)
    per_param = np.array([_vector_norm(grad, norm_type) for grad in grads], dtype=dtype)
    total_norm = _vector_norm(per_param, norm_type)
    if error_if_nonfinite and not np.isfinite(total_norm):
        raise RuntimeError(f"{name}: the total norm of order {norm_type} of the gradients is "
                           f"{total_norm}, so they cannot be clipped; pass "
                           "error_if_nonfinite=False to clip anyway")
    clip_coef = np.minimum(dtype.type(max_norm) / (total_norm + dtype.type(1e-6)), dtype.type(1))
    for grad in grads:
        grad *= grad.dtype.type(clip_coef)
    return Tensor(np.array(total_norm, dtype=dtype))


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient entry into ``[-clip_value, clip_value]``, in place.

    Parameters without a gradient are skipped; ``foreach`` is accepted for PyTorch
    compatibility and has no effect.

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.Parameter(ta.zeros(3))
    >>> w.grad = ta.tensor([-5.0, 0.5, 2.0])
    >>> ta.nn.utils.clip_grad_value_([w], clip_value=1.0)
    >>> w.grad.tolist()
    [-1.0, 0.5, 1.0]
    """
    name = "clip_grad_value_"
    params = _tensors(name, parameters)
    clip_value = check_number(name, "clip_value", clip_value, finite=False)
    if math.isnan(clip_value) or clip_value < 0:
        raise ValueError(f"{name}: clip_value must be >= 0, got {clip_value}")
    for grad in _float_grads(name, params):
        np.clip(grad, -clip_value, clip_value, out=grad)
