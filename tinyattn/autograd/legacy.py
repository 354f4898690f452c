"""Ops whose rules are still written on numpy arrays (forward/backward on arrays, plus a
``differentiable_backward`` on tensors): run and recorded as before the tensor-rule redesign."""

from __future__ import annotations

from typing import Any

from . import function
from .function import Context
from .grad_mode import is_grad_enabled


class LegacyContext(Context):
    def save_for_backward(self, *values: Any) -> None:
        self.saved = values

    @property
    def saved_tensors(self) -> tuple:
        return self.saved

    @property
    def saved_arrays(self) -> tuple:
        return tuple(v for v in self.saved if hasattr(v, "nbytes"))

    def check_versions(self) -> None:
        for counter, version in self._saved_versions:
            if counter.value != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: a tensor saved by '{self.name}' is at version "
                    f"{counter.value}; expected version {version}. Compute the in-place change "
                    "out of place (e.g. x = x.masked_fill(...)), or clone the tensor first."
                )

    def retarget_saved_output(self, output: Any, target: Any) -> None:
        self._saved_versions = tuple(
            (target._version, target._version.value) if counter is output._version else
            (counter, version) for counter, version in self._saved_versions)

    def replace_saved(self, tensor: Any, replacement: Any) -> None:
        self.saved = tuple(replacement._data if v is tensor._data else v for v in self.saved)
        self._saved_versions = tuple((c, v) for c, v in self._saved_versions
                                     if c is not tensor._version)

    def free(self) -> None:
        super().free()
        self.saved = ()
        self._saved_versions = ()


def apply_arrays(cls: Any, inputs: tuple, kwargs: dict) -> Any:
    tensor = function.TENSOR
    record = is_grad_enabled() and any(t._requires_grad for t in inputs)
    needs = tuple(t._requires_grad for t in inputs) if record else (False,) * len(inputs)
    ctx = LegacyContext(cls, inputs, needs, kwargs)
    ctx.saved = ()
    out = cls.forward(ctx, *(t._data for t in inputs), **kwargs)
    result = tensor._from_op(out, ctx if record else None)
    if cls.view:
        function._share_version(result, inputs[0])
    if record:
        ctx.out_shapes = (result.shape,)
        ctx.out_dtypes = (result.dtype,)
        ctx.edges = tuple(t.grad_fn if t.grad_fn is not None else
                          (t if t._requires_grad else None) for t in inputs)
        ctx.input_slots = tuple(t._output_nr if t.grad_fn is not None else 0 for t in inputs)
        versions = []
        for value in ctx.saved:
            if value is result._data:
                versions.append((result._version, result._version.value))
                continue
            for t in inputs:
                if value is t._data:
                    versions.append((t._version, t._version.value))
                    break
        ctx._saved_versions = tuple(versions)
        if not cls.keeps_inputs:
            ctx.release_inputs()
    return result


def call_backward(node: LegacyContext, grad: Any, create_graph: bool) -> tuple:
    tensor = function.TENSOR
    node.check_versions()
    if create_graph:
        grads = node.fn.differentiable_backward(node, grad)
    else:
        grads = node.fn.backward(node, grad._data)
    if not isinstance(grads, tuple):
        grads = (grads,)
    return tuple(g if g is None or isinstance(g, tensor) else tensor._from_op(g, None)
                 for g in grads)
