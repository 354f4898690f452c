"""Tensor methods: each is the function of the same name in :mod:`tinyattn.ops`, bound to the
class (``x.softmax(-1)`` is ``ta.softmax(x, -1)``), plus the in-place forms (``x.add_(y)``)
and the operators (``x + y`` is ``ta.add(x, y)``, ``2 - x`` is ``ta.sub(2, x)``).

An in-place method computes the ordinary op out of place and writes the result into ``x``
(:meth:`Tensor._assign`): the op is recorded as usual, and ``x`` takes its ``grad_fn``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from . import dtypes, ops
from .devices import check_device
from .random import generator
from .tensor import Tensor

_FUNCTIONS = (
    "abs", "add", "allclose", "amax", "amin", "argmax", "argmin", "bmm", "chunk", "clamp", "clone",
    "contiguous", "cos", "cumsum", "div", "dot", "eq", "equal", "erf", "exp", "expand",
    "expand_as", "flatten", "flip", "gather", "ge", "gt", "index_select", "isclose", "isfinite",
    "isinf", "isnan", "le", "log", "log_softmax", "logical_not", "logsumexp", "lt", "masked_fill",
    "matmul", "max", "maximum", "mean", "min", "minimum", "mm", "movedim", "mul", "ne", "neg",
    "permute", "pow", "relu", "repeat", "repeat_interleave", "reshape", "rsqrt", "sigmoid", "sin",
    "softmax", "split", "sqrt", "squeeze", "std", "sub", "sum", "tanh", "topk", "transpose",
    "tril", "triu", "unbind", "unflatten", "unsqueeze", "var", "view",
)

_IN_PLACE = (
    "abs", "add", "clamp", "cos", "div", "exp", "log", "masked_fill", "mul", "neg", "pow",
    "relu", "sigmoid", "sin", "sqrt", "sub", "tanh", "tril", "triu",
)


_OPERATORS = {
    "add": ops.add, "sub": ops.sub, "mul": ops.mul, "truediv": ops.div,
    "floordiv": ops.floor_divide, "mod": ops.remainder, "pow": ops.pow, "matmul": ops.matmul,
    "lt": ops.lt, "le": ops.le, "gt": ops.gt, "ge": ops.ge, "and": partial(ops.logical_op, "and"),
    "or": partial(ops.logical_op, "or"), "xor": partial(ops.logical_op, "xor"),
}
"""``x.__NAME__(y)`` is ``FUNCTION(x, y)``."""
_REFLECTED = ("add", "sub", "mul", "truediv", "floordiv", "pow", "matmul", "and", "or")
"""``x.__rNAME__(y)`` is ``FUNCTION(y, x)``."""
_AUGMENTED = {"iadd": "add_", "isub": "sub_", "imul": "mul_", "itruediv": "div_"}
"""``x.__NAME__(y)`` is the in-place method ``x.METHOD(y)``."""


def _operator(fn: Callable[..., Tensor], reflected: bool) -> Callable[[Tensor, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return fn(other, self) if reflected else fn(self, other)

    return method


def _in_place(name: str, fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        self._check_inplace(f"{name}_")
        return self._assign(fn(self, *args, **kwargs), f"{name}_")

    method.__name__ = f"{name}_"
    method.__doc__ = f"In-place :func:`{name}`: ``x.{name}_(...)`` writes ``{name}(x, ...)`` " \
                     "into ``x`` and returns it."
    return method


def to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other)`` (its dtype).

    The only device is the CPU: another one is a clear error.
    """
    dtype = kwargs.pop("dtype", None)
    check_device(kwargs.pop("device", None), "to")
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to: unexpected arguments {sorted(kwargs)}")
    for arg in args:
        if isinstance(arg, Tensor):
            dtype = arg.dtype
        elif isinstance(arg, str) or type(arg).__name__ == "device":
            check_device(arg, "to")
        elif arg is not None:
            dtype = arg
    result = self if dtype is None else ops.cast(self, dtype)
    return ops.clone(result) if copy and result is self else result


def type_(self: Tensor, dtype: Any = None) -> Any:
    """With no argument the type name (``'tinyattn.FloatTensor'``); else ``to(dtype)``."""
    if dtype is None:
        names = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int",
                 "bool": "Bool", "uint8": "Byte", "int8": "Char",
                 "int16": "Short"}
        return f"tinyattn.{names[self.dtype.name]}Tensor"
    return ops.cast(self, dtype)


def _cast_method(dtype: np.dtype) -> Callable[[Tensor], Tensor]:
    def method(self: Tensor) -> Tensor:
        return ops.cast(self, dtype)

    method.__doc__ = f"This tensor as {dtype}."
    return method


def _fill(self: Tensor, value: Any) -> Tensor:
    """Write ``value`` everywhere (a recorded op: the old value gets no gradient)."""
    return ops.index_put(self, (Ellipsis,), value)


def _copy(self: Tensor, src: Any) -> Tensor:
    """Write ``src`` (broadcast, cast to this dtype) into this tensor; the gradient goes to
    ``src``."""
    return ops.index_put(self, (Ellipsis,), src)


def _sample(draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]) -> Any:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        self._check_inplace("random fill")
        values = draw(generator(), self.shape, *args, **kwargs).astype(self.dtype)
        self.data[...] = values
        self._version.value += 1
        return self

    return method


def _new(factory: Callable[..., np.ndarray]) -> Callable[..., Tensor]:
    def method(self: Tensor, *size: Any, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
        check_device(device, "new tensor")
        shape = ops.validate.shape_arg("new tensor", size)
        out = Tensor(factory(shape, dtypes.as_dtype(dtype) if dtype else self.dtype))
        return out.requires_grad_(requires_grad)

    return method


def _new_full(self: Tensor, size: Any, fill_value: Any, dtype: Any = None,
              device: Any = None, requires_grad: bool = False) -> Tensor:
    check_device(device, "new_full")
    out = Tensor(np.full(tuple(size), fill_value, dtypes.as_dtype(dtype) if dtype else
                         self.dtype))
    return out.requires_grad_(requires_grad)


def _new_tensor(self: Tensor, data: Any, dtype: Any = None, device: Any = None,
                requires_grad: bool = False) -> Tensor:
    check_device(device, "new_tensor")
    out = Tensor(np.array(data, dtype=dtypes.as_dtype(dtype) if dtype else self.dtype))
    return out.requires_grad_(requires_grad)


def _where(self: Tensor, condition: Any, other: Any) -> Tensor:
    """``ta.where(condition, self, other)`` (PyTorch's argument order for the method)."""
    return ops.where(condition, self, other)


def _all(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    axes = ops.validate.normalize_dims("all", dim, self.ndim)
    return Tensor(np.all(self.data, axis=axes, keepdims=keepdim))


def _any(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    axes = ops.validate.normalize_dims("any", dim, self.ndim)
    return Tensor(np.any(self.data, axis=axes, keepdims=keepdim))


def _is_contiguous(self: Tensor) -> bool:
    return bool(self.data.flags.c_contiguous)


def _stride(self: Tensor, dim: int | None = None) -> Any:
    strides = tuple(s // self.data.itemsize for s in self.data.strides)
    return strides if dim is None else strides[ops.validate.normalize_dim("stride", dim,
                                                                          self.ndim)]


def _repr_html_(self: Tensor) -> str:
    """The tensor as an HTML table, which Jupyter shows (``repr`` stays the plain text)."""
    from .inspect.table import tensor_html

    return tensor_html(self)


def bind() -> None:
    """Attach every method to :class:`Tensor` (done once, on import)."""
    for name in _FUNCTIONS:
        setattr(Tensor, name, getattr(ops, name))
    for name in _IN_PLACE:
        setattr(Tensor, f"{name}_", _in_place(name, getattr(ops, name)))
    for name, function in _OPERATORS.items():
        setattr(Tensor, f"__{name}__", _operator(function, False))
        if name in _REFLECTED:
            setattr(Tensor, f"__r{name}__", _operator(function, True))
    for name, method in _AUGMENTED.items():
        setattr(Tensor, f"__{name}__", getattr(Tensor, method))
    Tensor.__invert__ = lambda self: ops.logical_op("not", self, None)
    Tensor.__neg__ = ops.neg
    Tensor.__pos__ = lambda self: self
    Tensor.__abs__ = ops.abs
    Tensor.__getitem__ = ops.getitem
    Tensor.clip = ops.clamp
    Tensor.clip_ = Tensor.clamp_
    Tensor.to = to
    Tensor.type = type_
    Tensor.type_as = lambda self, other: ops.cast(self, other.dtype)
    Tensor.view_as = lambda self, other: ops.view(self, other.shape)
    Tensor.reshape_as = lambda self, other: ops.reshape(self, other.shape)
    for name, dtype in (("float", dtypes.float32), ("double", dtypes.float64),
                        ("long", dtypes.int64),
                        ("int", dtypes.int32), ("bool", dtypes.bool_)):
        setattr(Tensor, name, _cast_method(dtype))
    Tensor.cpu = lambda self: self
    Tensor.cuda = lambda self, *args, **kwargs: check_device("cuda", "cuda") or self
    Tensor.is_floating_point = dtypes.is_floating_point
    Tensor.is_contiguous = _is_contiguous
    Tensor.stride = _stride
    Tensor.where = _where
    Tensor.all = _all
    Tensor.any = _any
    Tensor.fill_ = _in_place("fill", _fill)
    Tensor.zero_ = lambda self: Tensor.fill_(self, 0)
    Tensor.copy_ = _in_place("copy", _copy)
    Tensor.uniform_ = _sample(lambda g, shape, a=0.0, b=1.0: g.uniform(a, b, shape))
    Tensor.normal_ = _sample(lambda g, shape, mean=0.0, std=1.0: g.normal(mean, std, shape))
    Tensor.new_zeros = _new(np.zeros)
    Tensor.new_ones = _new(np.ones)
    Tensor.new_empty = _new(np.zeros)
    Tensor.new_full = _new_full
    Tensor.new_tensor = _new_tensor
    Tensor._repr_html_ = _repr_html_


bind()
