"""Reverse-mode automatic differentiation (``ta.autograd``, as ``torch.autograd``).

- :mod:`.function` — ``Function`` and ``Context``: one op, run and recorded;
- :mod:`.engine` — the backward pass (``backward``, ``grad``, ``create_graph``);
- :mod:`.grad_mode` — ``no_grad`` and friends, ``detect_anomaly``;
- :mod:`.functional` — ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp``, ``vhp``.

Nothing here knows about numba or the kernels: the engine only calls each op's rules. This
package sits below :mod:`tinyattn.tensor` and never imports it (the Tensor class registers
itself in :data:`function.TENSOR`); ``ta.autograd.gradcheck`` and ``gradgradcheck``, which are
built on the ops, are attached by the top-level package, as PyTorch names them.
"""

from . import functional
from .engine import backward, grad, run_backward, seed_gradient, unbroadcast
from .function import Context, Function, ReleasedInput
from .grad_mode import (
    detect_anomaly,
    enable_grad,
    inference_mode,
    is_anomaly_enabled,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)

__all__ = [
    "Context", "Function", "backward", "detect_anomaly", "enable_grad", "functional", "grad",
    "inference_mode", "is_anomaly_enabled", "is_grad_enabled", "no_grad", "ReleasedInput",
    "run_backward", "seed_gradient", "set_grad_enabled", "unbroadcast",
]
