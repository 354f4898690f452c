"""Higher-level derivatives of a whole function: ``vjp``, ``jvp``, ``jacobian``, ``hessian``,
``hvp`` and ``vhp``, with the signatures of ``torch.autograd.functional``.

All of them are built on reverse mode (:func:`tinyattn.autograd.grad`):

- ``vjp(f, x, v)`` is one backward pass: ``vᵀ J``;
- ``jacobian`` stacks one ``vjp`` per output element (a row of ``J`` each);
- ``jvp(f, x, v)`` uses the *double-vjp trick*: ``u ↦ Jᵀu`` is linear in ``u``, so the
  gradient of ``⟨Jᵀu, v⟩`` with respect to ``u`` is ``J v`` — two reverse passes instead of a
  forward-mode pass (the second differentiates the first, so it needs ``create_graph``);
- ``vhp(f, x, v)`` differentiates the gradient once more: ``vᵀ H``; ``hvp`` is ``H v`` by the
  same double-vjp trick applied to the gradient; ``hessian`` is the Jacobian of the gradient.

Inputs are copied to fresh leaves (``detach().requires_grad_()``), so ``f``'s own graph is
never touched; results are detached unless ``create_graph=True``. With ``strict=True`` an input
that the outputs do not depend on is an error; otherwise its derivative is zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import function
from .engine import grad
from .grad_mode import enable_grad


def _tuple(value: Any, label: str, op: str) -> tuple[tuple, bool]:
    if isinstance(value, function.TENSOR):
        return (value,), True
    if isinstance(value, (tuple, list)) and all(isinstance(v, function.TENSOR) for v in value):
        return tuple(value), False
    raise TypeError(f"{op}: {label} must be a Tensor or a tuple of Tensors, got "
                    f"{type(value).__name__}")


def _leaves(inputs: tuple, create_graph: bool) -> tuple:
    """Fresh leaves for the inputs (kept in the caller's graph when ``create_graph``)."""
    if create_graph:
        return tuple(x if x.requires_grad else x.detach().requires_grad_(True) for x in inputs)
    return tuple(x.detach().requires_grad_(True) for x in inputs)


def _float_inputs(inputs: Any, op: str) -> tuple[tuple, bool]:
    """``inputs`` as a tuple of float tensors, and whether it was a single tensor."""
    xs, single = _tuple(inputs, "inputs", op)
    for i, x in enumerate(xs):
        if x.dtype.kind != "f":
            raise TypeError(f"{op}: inputs[{i}] must be a floating point tensor, got {x.dtype}")
    return xs, single


def _vectors(v: Any, like: tuple, op: str, label: str = "v") -> tuple:
    """``v`` as a tuple matching ``like`` in shapes; ones allowed only for one-element ``like``."""

    if v is None:
        if any(t.numpy().size != 1 for t in like):
            raise RuntimeError(f"{op}: {label} can be omitted only when the function's "
                               "inputs/outputs have a single element each")
        return tuple(t.new_ones(t.shape) for t in like)
    vs, _ = _tuple(v, label, op)
    if len(vs) != len(like) or any(a.shape != b.shape for a, b in zip(vs, like)):
        raise RuntimeError(f"{op}: {label} has shapes {[t.shape for t in vs]}, expected "
                           f"{[t.shape for t in like]}")
    return vs


def _grads(outputs: tuple, inputs: tuple, vs: tuple, create_graph: bool, strict: bool,
           op: str) -> tuple:
    """``Σ_k v_kᵀ ∂outputs_k/∂inputs``, zeros (or an error when ``strict``) for unused inputs."""

    pairs = [(o, v) for o, v in zip(outputs, vs) if o.requires_grad]
    if not pairs:
        found: tuple = (None,) * len(inputs)
    else:
        found = grad([o for o, _ in pairs], inputs, [v for _, v in pairs], retain_graph=True,
                     create_graph=create_graph, allow_unused=True)
    results = []
    for i, (x, g) in enumerate(zip(inputs, found)):
        if g is None:
            if strict:
                raise RuntimeError(f"{op}: the output is independent of inputs[{i}] "
                                   "(strict=True)")
            g = x.new_zeros(x.shape)
        results.append(g if create_graph else g.detach())
    return tuple(results)


def _call(func: Callable, inputs: tuple, op: str) -> tuple[tuple, bool]:
    with enable_grad():
        outputs = func(*inputs)
    return _tuple(outputs, "the output of func", op)


def _gradient(out: Any, leaves: tuple, strict: bool, op: str) -> tuple:
    """``∂out/∂leaves`` of a one-element ``out``, recorded for a second differentiation."""
    return _grads((out,), leaves, _vectors(None, (out,), op), True, strict, op)


def _shaped(values: tuple, single: bool) -> Any:
    return values[0] if single else values


def _detach(values: tuple, create_graph: bool) -> tuple:
    return values if create_graph else tuple(v.detach() for v in values)


def vjp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), vᵀ J)``: one backward pass through ``func`` from the cotangent ``v``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 3.0])
    >>> ta.autograd.functional.vjp(lambda t: t ** 2, x, ta.ones_like(x))[1].tolist()
    [2.0, 6.0]
    """
    xs, single_in = _float_inputs(inputs, "vjp")
    xs = _leaves(xs, create_graph)
    outputs, single_out = _call(func, xs, "vjp")
    vs = _vectors(v, outputs, "vjp")
    result = _grads(outputs, xs, vs, create_graph, strict, "vjp")
    return _shaped(_detach(outputs, create_graph), single_out), _shaped(result, single_in)


def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), J v)``: a Jacobian-vector product by the double-vjp trick.

    ``g(u) = Jᵀ u`` is computed with ``create_graph=True`` for a dummy cotangent ``u``; since
    ``g`` is linear in ``u``, ``∂⟨g(u), v⟩/∂u = J v``. Two reverse passes (the second through
    the recorded first one), not a forward-mode pass, so every op needs a differentiable
    backward.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.autograd.functional.jvp(lambda t: t ** 2, ta.tensor([1.0, 3.0]),
    ...                            ta.tensor([1.0, 0.5]))[1].tolist()
    [2.0, 3.0]
    """

    xs, single_in = _float_inputs(inputs, "jvp")
    vs = _vectors(v, xs, "jvp")
    xs = _leaves(xs, create_graph)
    outputs, single_out = _call(func, xs, "jvp")
    dummies = tuple(o.new_zeros(o.shape, requires_grad=True) for o in outputs)
    with enable_grad():
        pulled = _grads(outputs, xs, dummies, True, strict, "jvp")
    used = [(p, v) for p, v in zip(pulled, vs) if p.requires_grad]
    if used:
        found = grad([p for p, _ in used], dummies, [v for _, v in used],
                     create_graph=create_graph, allow_unused=True)
    else:
        found = (None,) * len(dummies)
    result = []
    for d, g in zip(dummies, found):
        if g is None:
            g = d.new_zeros(d.shape)
        result.append(g if create_graph else g.detach())
    return _shaped(_detach(outputs, create_graph), single_out), _shaped(tuple(result), single_out)


def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """The Jacobian ``∂func(inputs)/∂inputs``, of shape ``output.shape + input.shape``.

    One ``vjp`` per output element (reverse mode; ``vectorize`` is accepted and ignored, and
    only ``strategy='reverse-mode'`` exists). For several inputs/outputs the result is nested
    as ``result[i][j] = ∂output_i/∂input_j``, as in PyTorch.

    Examples
    --------
    >>> import tinyattn as ta
    >>> J = ta.autograd.functional.jacobian(lambda x: x.softmax(-1),
    ...                                     ta.tensor([0.0, 0.0], dtype=ta.float64))
    >>> J.tolist()                       # diag(p) − p pᵀ with p = (½, ½)
    [[0.25, -0.25], [-0.25, 0.25]]
    """

    if strategy != "reverse-mode":
        raise ValueError(f"jacobian: only strategy='reverse-mode' is supported, got {strategy!r}")
    xs, single_in = _float_inputs(inputs, "jacobian")
    xs = _leaves(xs, create_graph)
    outputs, single_out = _call(func, xs, "jacobian")
    rows: list[tuple] = []
    for out in outputs:
        per_input: list[list] = [[] for _ in xs]
        for k in range(out.numpy().size):
            unit = np.zeros(out.numpy().size, out.dtype)
            unit[k] = 1
            cotangents = tuple(o.new_tensor(unit.reshape(o.shape)) if o is out else
                               o.new_zeros(o.shape) for o in outputs)
            for j, g in enumerate(_grads(outputs, xs, cotangents, create_graph, strict,
                                         "jacobian")):
                per_input[j].append(g)
        blocks = []
        for j, x in enumerate(xs):
            block = x.new_zeros((len(per_input[j]),) + x.shape)  # one row per output element
            for k, row in enumerate(per_input[j]):
                block[k] = row  # recorded (differentiable) when create_graph
            blocks.append(block.reshape(out.shape + x.shape))
        rows.append(tuple(blocks))
    if single_out:
        return _shaped(rows[0], single_in)
    return tuple(_shaped(r, single_in) for r in rows)


def _scalar_function(func: Callable, op: str) -> Callable:
    def checked(*xs: Any) -> Any:
        out = func(*xs)
        outs, _ = _tuple(out, "the output of func", op)
        if len(outs) != 1 or outs[0].numpy().size != 1:
            raise RuntimeError(f"{op}: func must return a single tensor with one element, got "
                               f"shapes {[o.shape for o in outs]}")
        return outs[0]

    return checked


def hessian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Hessian of a scalar ``func``: the Jacobian of its gradient.

    Shape ``input.shape + input.shape`` (nested ``result[i][j]`` for several inputs).

    Examples
    --------
    >>> import tinyattn as ta
    >>> H = ta.autograd.functional.hessian(lambda x: (x ** 3).sum(),
    ...                                    ta.tensor([1.0, 2.0], dtype=ta.float64))
    >>> H.tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    """
    scalar = _scalar_function(func, "hessian")
    xs, single_in = _tuple(inputs, "inputs", "hessian")

    def gradient(*leaves: Any) -> Any:
        out = scalar(*leaves)
        return _gradient(out, leaves, strict, "hessian")

    result = jacobian(gradient, xs, create_graph=create_graph, strict=strict,
                      strategy=outer_jacobian_strategy)
    if single_in:
        return result[0][0]
    return result


def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), vᵀ H)`` for a scalar ``func``: the gradient differentiated once more.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0], dtype=ta.float64)
    >>> ta.autograd.functional.vhp(lambda t: (t ** 3).sum(), x, ta.ones_like(x))[1].tolist()
    [6.0, 12.0]
    """
    xs, single_in = _float_inputs(inputs, "vhp")
    vs = _vectors(v, xs, "vhp")
    xs = _leaves(xs, create_graph)
    out = _scalar_function(func, "vhp")(*xs)
    with enable_grad():
        first = _gradient(out, xs, strict, "vhp")
    result = _grads(first, xs, vs, create_graph, strict, "vhp")
    value = out if create_graph else out.detach()
    return value, _shaped(result, single_in)


def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), H v)`` for a scalar ``func``, by the double-vjp trick on its gradient.

    For a twice continuously differentiable ``func`` the Hessian is symmetric and this equals
    :func:`vhp`; it costs one reverse pass more.

    Examples
    --------
    >>> import tinyattn as ta
    >>> from tinyattn.autograd.functional import hvp, vhp
    >>> cube = lambda t: (t ** 3).sum()                # H = diag(6 x)
    >>> x, v = ta.tensor([1.0, 2.0], dtype=ta.float64), ta.tensor([1.0, -1.0], dtype=ta.float64)
    >>> hvp(cube, x, v)[1].tolist(), vhp(cube, x, v)[1].tolist()
    ([6.0, -12.0], [6.0, -12.0])
    """
    scalar = _scalar_function(func, "hvp")
    xs, single_in = _float_inputs(inputs, "hvp")
    vs = _vectors(v, xs, "hvp")

    def gradient(*leaves: Any) -> tuple:
        out = scalar(*leaves)
        return _gradient(out, leaves, strict, "hvp")

    value = scalar(*_leaves(xs, create_graph))
    _, result = jvp(gradient, xs, vs, create_graph=create_graph, strict=strict)
    value = value if create_graph else value.detach()
    return value, _shaped(result if isinstance(result, tuple) else (result,), single_in)
