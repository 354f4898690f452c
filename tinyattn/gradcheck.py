"""Check analytic gradients — and gradients of gradients — against central finite differences,
in float64.

For a function ``f`` with outputs ``y`` and a random cotangent ``v`` (never a bare ``.sum()``:
the sum of a softmax is constant, so its gradient would be zero whatever the backward did),
the scalar ``L(x) = Σ <v, y(x)>`` has the gradient that one backward pass with ``gradient=v``
computes. Each element of that gradient is compared with the central difference
``(L(x + eps·e_i) − L(x − eps·e_i)) / (2·eps)``; for large inputs, random directions ``u``
replace the unit vectors ``e_i`` and ``<∇L, u>`` is compared instead (a directional check that
catches any wrong element with probability one). :func:`central_difference` is the one
finite-difference formula of the package: the ``tinyattn gradcheck`` table and
:func:`tinyattn.study.numeric_gradient` use it too.

:func:`gradgradcheck` checks second derivatives the same way: the vector-Jacobian product
``(x, v) ↦ vᵀ ∂f/∂x``, computed with ``create_graph=True``, is itself a function whose
gradient (with respect to ``x``: the second derivative; with respect to ``v``: the Jacobian)
:func:`gradcheck` compares with finite differences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .autograd import enable_grad, grad, no_grad
from .tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` when an analytic gradient disagrees with finite differences."""


def _as_outputs(value: Any) -> list[Tensor]:
    outputs = list(value) if isinstance(value, (tuple, list)) else [value]
    return [t for t in outputs if isinstance(t, Tensor)]


def _float64_inputs(op: str, inputs: Tensor | Sequence[Any]) -> tuple[list[Any], list[int]]:
    """The inputs with float tensors copied to float64, and the indices of those to check."""
    items = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    args = [Tensor(a.numpy().astype(np.float64), requires_grad=a.requires_grad)
            if isinstance(a, Tensor) and a.dtype.kind == "f" else a for a in items]
    checked = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    if not checked:
        raise ValueError(f"{op}: no input has requires_grad=True, so there is nothing to check")
    return args, checked


def _objective(fn: Callable, inputs: Sequence[Any], cotangents: list[np.ndarray]) -> float:
    with no_grad():
        outputs = _as_outputs(fn(*inputs))
    terms = (np.sum(out.numpy().astype(np.float64) * v) for out, v in zip(outputs, cotangents))
    return float(sum(terms))


def gradcheck(
    fn: Callable[..., Any],
    inputs: Tensor | Sequence[Any],
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    max_elements: int = 512,
    directions: int = 8,
    seed: int = 0,
) -> bool:
    """Compare the backward of ``fn`` with central finite differences.

    Parameters
    ----------
    fn : callable
        Takes ``inputs`` and returns a tensor or a tuple of tensors.
    inputs : Tensor or sequence
        Tensors with ``requires_grad=True`` are checked; float ones are copied to float64 first.
        Other items (integer tensors, numbers) are passed through unchanged.
    eps, atol, rtol : float
        Step, absolute and relative tolerance: pass when
        ``|analytic − numeric| <= atol + rtol·|numeric|`` for every element/direction.
    raise_exception : bool
        Raise :class:`GradcheckError` with a report on failure (else return False).
    max_elements : int
        Inputs with at most this many elements are checked element by element; larger ones
        along ``directions`` random directions.
    seed : int
        Seeds the cotangent and directions (a local generator: the global one is untouched).

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.randn(3, 4, dtype="float64", requires_grad=True)
    >>> ta.gradcheck(lambda t: (t * t).softmax(dim=-1), (x,))
    True
    """
    rng = np.random.default_rng(seed)
    args, checked = _float64_inputs("gradcheck", inputs)

    outputs = _as_outputs(fn(*args))
    differentiable = [out for out in outputs if out.requires_grad]
    if not differentiable:
        raise ValueError("gradcheck: no output of fn requires grad (was the graph recorded?)")
    cotangents = [rng.standard_normal(out.shape) for out in outputs]
    total = None
    for out, v in zip(outputs, cotangents):
        if out.requires_grad:
            term = (out * Tensor(v.astype(out.dtype))).sum()
            total = term if total is None else total + term
    total.backward()

    for i in checked:
        x = args[i]
        analytic = np.zeros(x.shape) if x.grad is None else x.grad.numpy().astype(np.float64)
        if x.numpy().size <= max_elements:
            probes = np.eye(x.numpy().size).reshape((x.numpy().size,) + x.shape)
            exact = analytic.reshape(-1)
        else:
            probes = rng.standard_normal((directions,) + x.shape)
            exact = np.array([np.sum(analytic * u) for u in probes])
        loss = _loss_of_input(fn, args, i, cotangents)
        numeric = np.array([central_difference(loss, x.numpy(), u, eps) for u in probes])
        excess = np.abs(exact - numeric) - (atol + rtol * np.abs(numeric))
        excess[np.isnan(excess)] = np.inf
        worst = int(np.argmax(excess))
        if excess[worst] > 0:
            where = (
                f"element {tuple(int(k) for k in np.unravel_index(worst, x.shape))}"
                if x.numpy().size <= max_elements else f"random direction {worst}"
            )
            failing = int(np.sum(excess > 0))
            report = (
                f"gradcheck: the gradient of input {i} (shape {x.shape}) disagrees with finite "
                f"differences at {failing} of {len(probes)} probes; worst at {where}: analytic "
                f"{exact[worst]:.10g}, numeric {numeric[worst]:.10g}, difference "
                f"{abs(exact[worst] - numeric[worst]):.3g} > atol {atol:g} + "
                f"rtol {rtol:g}·|numeric|"
            )
            if raise_exception:
                raise GradcheckError(report)
            return False
    return True


def central_difference(
    f: Callable[[np.ndarray], float], x: np.ndarray, direction: np.ndarray, eps: float = 1e-6
) -> float:
    """The derivative of ``f`` at ``x`` along ``u``: ``(f(x + eps·u) − f(x − eps·u)) / (2·eps)``.

    Its error is O(eps²) (the even terms of the Taylor series cancel) plus the rounding of the
    two evaluations divided by ``2·eps``; in float64, ``eps = 1e-6`` balances the two. A unit
    vector ``u = e_i`` gives the partial derivative ``∂f/∂x_i``.

    Parameters
    ----------
    f : callable
        Maps an array shaped like ``x`` to a number.
    x, direction : numpy.ndarray
        The point and the direction ``u`` (same shape).
    eps : float
        The step.

    Examples
    --------
    >>> import numpy as np
    >>> from tinyattn.gradcheck import central_difference
    >>> cube = lambda x: float(np.sum(x ** 3))               # gradient 3x²: (3, 12) at (1, 2)
    >>> round(central_difference(cube, np.array([1.0, 2.0]), np.array([1.0, 1.0])), 6)
    15.0
    """
    return float((f(x + eps * direction) - f(x - eps * direction)) / (2 * eps))


def _loss_of_input(
    fn: Callable, args: list[Any], index: int, cotangents: list[np.ndarray]
) -> Callable[[np.ndarray], float]:
    """``L`` as a function of the data of ``args[index]``, every other input held fixed."""
    x = args[index]

    def loss(data: np.ndarray) -> float:
        original = x.numpy()
        try:
            x.data = data
            return _objective(fn, args, cotangents)
        finally:
            x.data = original

    return loss


def gradgradcheck(
    fn: Callable[..., Any],
    inputs: Tensor | Sequence[Any],
    grad_outputs: Sequence[Tensor] | None = None,
    *,
    seed: int = 0,
    **options: Any,
) -> bool:
    """Compare the second derivatives of ``fn`` with central finite differences.

    The function checked is the vector-Jacobian product ``(x, v) ↦ vᵀ ∂fn(x)/∂x`` (one
    backward pass with ``create_graph=True``), for random cotangents ``v`` (or
    ``grad_outputs``); :func:`gradcheck` then differentiates it with respect to both ``x``
    and ``v`` and compares with finite differences. ``seed`` and the other keyword arguments
    (``eps``, ``atol``, ``rtol``, ``raise_exception``, ``max_elements``, ``directions``) are
    those of :func:`gradcheck`, keyword-only as in PyTorch.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.randn(2, 3, dtype="float64", requires_grad=True)
    >>> v = ta.randn(2, 3, dtype="float64")  # the cotangent of the first backward pass
    >>> ta.gradgradcheck(lambda t: (t * t).softmax(dim=-1), (x,), grad_outputs=[v])
    True
    """
    rng = np.random.default_rng(seed + 1)
    args, checked = _float64_inputs("gradgradcheck", inputs)
    outputs = [out for out in _as_outputs(fn(*args)) if out.requires_grad]
    if grad_outputs is None:
        cotangents = [Tensor(rng.standard_normal(out.shape), requires_grad=True)
                      for out in outputs]
    else:
        cotangents = [Tensor(np.asarray(g.numpy() if isinstance(g, Tensor) else g, np.float64),
                             requires_grad=True) for g in grad_outputs]
    n_args = len(args)

    def vector_jacobian_product(*values: Any) -> tuple[Tensor, ...]:
        xs, vs = list(values[:n_args]), values[n_args:]
        with enable_grad():
            outs = [out for out in _as_outputs(fn(*xs)) if out.requires_grad]
            found = grad(outs, [xs[i] for i in checked], list(vs), create_graph=True,
                         allow_unused=True)
        return tuple(g for g in found if g is not None)

    return gradcheck(vector_jacobian_product, [*args, *cotangents], seed=seed, **options)
