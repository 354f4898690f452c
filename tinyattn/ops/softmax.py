"""Softmax and log-softmax along one dim, on the numba row kernels of
:mod:`tinyattn.kernels.softmax` (max-shifted, so huge scores never overflow).

For one row ``x`` with ``y = softmax(x)`` the Jacobian is ``∂y_i/∂x_j = y_i (δ_ij − y_j)``,
i.e. ``diag(y) − y yᵀ``; applying its transpose to the upstream gradient ``g`` gives
``dx = y ⊙ (g − ⟨g, y⟩)``: each score's gradient is its weight times how much better its own
gradient is than the weighted average. The row of ``dx`` sums to zero (adding a constant to
all scores changes nothing).

A row that is entirely ``-inf`` (a fully masked attention row) has no softmax; tinyattn defines
it as all zeros with a zero gradient (PyTorch returns NaN) — a documented deviation.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function, is_grad_enabled
from ..errors import DTypeError
from ..kernels.softmax import (
    log_softmax_backward,
    log_softmax_forward,
    softmax_backward,
    softmax_forward,
)
from ..tensor import Tensor, check_kernel_dtype, check_tensor, from_numpy
from ..validation import normalize_dim
from .notation import operand


def _along(kernel, dim: int, *arrays: np.ndarray) -> np.ndarray:
    """Run a last-axis row kernel along ``dim``: move that axis last, and back afterwards (the
    last axis itself goes to the kernel as it is)."""
    if arrays[0].ndim == 0:
        return kernel(*(a.reshape(1) for a in arrays)).reshape(())
    if dim == arrays[0].ndim - 1:  # already last (attention's scores, a row of logits)
        return kernel(*arrays)
    moved = [np.ascontiguousarray(np.moveaxis(a, dim, -1)) for a in arrays]
    return np.moveaxis(kernel(*moved), -1, dim)


class Softmax(Function):
    """``y = e^(x − max) / Σ e^(x − max)``; ``dx = y ⊙ (g − Σ g⊙y)`` along ``dim``.

    The backward is the Jacobian ``diag(y) − y yᵀ`` of each row applied to ``g``; the row term
    ``Σ g⊙y`` is why a whole row of scores' gradients sums to zero.
    """

    named_gradient = True

    @staticmethod
    def forward(ctx: Context, x: Tensor, dim: int) -> Tensor:
        y = from_numpy(_along(softmax_forward, dim, x.numpy()))
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None]:
        (y,) = ctx.saved_tensors
        if not is_grad_enabled():  # fast path: the row kernel, when no graph is being built
            return from_numpy(_along(softmax_backward, ctx.dim, y.numpy(), grad.numpy())), None
        return y * (grad - (grad * y).sum(ctx.dim, keepdim=True)), None

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{out} ⊙ ({g} − rowsum({operand(g)} ⊙ {out}))"


class LogSoftmax(Function):
    """``y = x − max − log Σ e^(x − max)``; ``dx = g − e^y · Σ g`` along ``dim``."""

    named_gradient = True

    @staticmethod
    def forward(ctx: Context, x: Tensor, dim: int) -> Tensor:
        y = from_numpy(_along(log_softmax_forward, dim, x.numpy()))
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None]:
        (y,) = ctx.saved_tensors
        if not is_grad_enabled():  # fast path: the row kernel, when no graph is being built
            return from_numpy(_along(log_softmax_backward, ctx.dim, y.numpy(),
                                     grad.numpy())), None
        return grad - y.exp() * grad.sum(ctx.dim, keepdim=True), None

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} − softmax({x[0]}) ⊙ rowsum({g})"


def _checked(op: str, x: Tensor, dim: int | None, dtype: object) -> tuple[Tensor, int]:
    if dim is None:
        raise TypeError(f"{op}: dim must be given (softmax of which dim?)")
    check_tensor(op, "input", x)
    if dtype is not None:
        x = x.to(dtype)
    if x.dtype.kind != "f" and x.numel():
        raise DTypeError(f"{op}: expected a floating point tensor, got dtype {x.dtype} (PyTorch "
                         "has no integer softmax either; use .float() first)")
    check_kernel_dtype(op, x)
    return x, normalize_dim(op, dim, x.ndim) if x.ndim else 0


def softmax(input: Tensor, dim: int | None = None, dtype: object = None) -> Tensor:
    """Softmax along ``dim``: non-negative, sums to 1 (0 for a fully ``-inf`` row).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.softmax(ta.tensor([[0.0, 0.0]]), dim=-1).tolist()
    [[0.5, 0.5]]
    """
    x, axis = _checked("softmax", input, dim, dtype)
    return Softmax.apply(x, axis) if x.numel() else x


def log_softmax(input: Tensor, dim: int | None = None, dtype: object = None) -> Tensor:
    """``log(softmax(x))`` along ``dim``, computed without overflow."""
    x, axis = _checked("log_softmax", input, dim, dtype)
    return LogSoftmax.apply(x, axis) if x.numel() else x
