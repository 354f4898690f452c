"""``Tensor``: one numpy array, plus what reverse-mode autograd needs to know about it.

Dtype rules (PyTorch's): a numpy float array keeps its dtype; Python floats become float32,
Python ints int64, bools bool; ops promote as :mod:`tinyattn.dtypes` says. Only floating point
tensors can require grad. Every operator and method is a function of :mod:`tinyattn.ops` (the
operators and methods are bound in :mod:`tinyattn.tensor_methods`).

In-place ops (``x.add_(y)``, ``x.masked_fill_(m, v)``, ``x[i] = v``) follow PyTorch's autograd
rules: the new value is computed by the ordinary op, written into ``x``'s memory (so views of
``x`` see it), and ``x`` takes the op's ``grad_fn``. Each tensor has a version counter (shared
with its views) that every in-place change bumps; an op that saved a tensor for its backward
checks it, so using a value that was overwritten is an error, not a silently wrong gradient.
An in-place change of a leaf that requires grad is refused, as in PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import autograd, dtypes
from .devices import CPU, check_device, device
from .dtypes import float32, float64, int64

__all__ = ["CPU", "Size", "Tensor", "as_tensor", "check_device", "device"]


class _Version:
    """A tensor's version counter, shared with its views; in-place ops increment it."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


def _to_array(data: Any, dtype: Any = None) -> np.ndarray:
    """Convert ``data`` to an ndarray following tinyattn's dtype rules (no copy when possible)."""
    if isinstance(data, Tensor):
        data = data.data
    if dtype is not None:
        return np.asarray(data, dtype=dtypes.as_dtype(dtype, "tensor"))
    if isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in _flat(data)):
        data = _nested_values(data)
    array = np.asarray(data)
    kind = array.dtype.kind
    if kind == "f":
        if array.dtype not in (float32, float64) or not isinstance(data, (np.ndarray,
                                                                         np.generic)):
            array = array.astype(float32)
    elif kind in "iu":
        if not isinstance(data, (np.ndarray, np.generic)):
            array = array.astype(int64, copy=False)
        elif array.dtype not in (dtypes.uint8, dtypes.int8, dtypes.int16, dtypes.int32, int64):
            array = array.astype(int64)
    elif kind != "b":
        raise TypeError(f"tensor: cannot make a tensor from data of dtype {array.dtype}")
    return array


def _flat(data: Any) -> Iterator[Any]:
    for item in data:
        if isinstance(item, (list, tuple)):
            yield from _flat(item)
        else:
            yield item


def _nested_values(data: Any) -> Any:
    """Nested lists with 0-d/1-element tensors replaced by their values (``tensor([t0, t1])``)."""
    if isinstance(data, (list, tuple)):
        return [_nested_values(item) for item in data]
    return data.data if isinstance(data, Tensor) else data


class Size(tuple):
    """A shape, as ``torch.Size``: a tuple of ints (``x.size()`` returns one)."""

    def __repr__(self) -> str:
        return f"tinyattn.Size({list(self)})"

    def numel(self) -> int:
        """The number of elements of a tensor of this shape."""
        n = 1
        for size in self:
            n *= size
        return n


class _HookHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    def __init__(self, hooks: list[Callable], hook: Callable):
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


class Tensor:
    """An n-dimensional array that records the ops applied to it for backpropagation.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad.tolist()
    [2.0, 4.0, 6.0]
    """

    __array_priority__ = 1000  # numpy defers to Tensor's reflected operators

    def __init__(self, data: Any, dtype: Any = None, requires_grad: bool = False):
        self.data = _to_array(data, dtype)
        self.grad: Tensor | None = None
        self.grad_fn: autograd.Context | None = None
        self._requires_grad = False
        self._hooks: list[Callable] = []
        self._version = _Version()
        self._base: Tensor | None = None
        if requires_grad:
            self.requires_grad = True

    @classmethod
    def _from_op(cls, data: np.ndarray, ctx: autograd.Context | None) -> Tensor:
        out = cls.__new__(cls)
        out._data = data if isinstance(data, np.ndarray) else np.asarray(data)
        out.grad = None
        out.grad_fn = ctx
        out._requires_grad = ctx is not None
        out._hooks = []
        out._version = _Version()
        out._base = None
        return out

    # ---- attributes -------------------------------------------------------------------------
    @property
    def data(self) -> np.ndarray:
        """The underlying numpy array (PyTorch's ``.data`` is a tensor; here it is the array)."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        if isinstance(value, Tensor):
            value = value.data
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if not isinstance(value, np.ndarray):
            raise TypeError(f"Tensor.data must be a numpy array, got {type(value).__name__}")
        self._data = value

    @property
    def requires_grad(self) -> bool:
        """Whether gradients are computed for this tensor."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and self.data.dtype.kind != "f":
            from .ops.validate import DTypeError

            raise DTypeError(
                f"requires_grad: only floating point tensors can require gradients, "
                f"got dtype {self.data.dtype}"
            )
        if not value and self.grad_fn is not None:
            raise RuntimeError(
                "requires_grad: cannot turn off gradients of a non-leaf tensor; use .detach()"
            )
        self._requires_grad = bool(value)

    shape = property(lambda self: self.data.shape, doc="The shape, a tuple of ints.")
    ndim = property(lambda self: self.data.ndim, doc="The number of dims.")
    dtype = property(lambda self: self.data.dtype, doc="The dtype (a numpy dtype).")
    is_leaf = property(lambda self: self.grad_fn is None, doc="True unless an op produced it.")
    device = property(lambda self: CPU, doc="Always the CPU.")
    is_cuda = False

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        """The shape, or the size of one dim, as ``torch.Tensor.size``."""
        if dim is None:
            return Size(self.shape)
        from .ops.validate import normalize_dim

        return self.shape[normalize_dim("size", dim, self.ndim)] if self.ndim else 1

    def dim(self) -> int:
        """The number of dims."""
        return self.data.ndim

    def numel(self) -> int:
        """The number of elements."""
        return self.data.size

    def element_size(self) -> int:
        """Bytes per element."""
        return self.data.itemsize

    def numpy(self) -> np.ndarray:
        """The data as a numpy array (shared, not copied)."""
        return self.data

    def item(self) -> float | int | bool:
        """The value of a one-element tensor as a Python number."""
        if self.data.size != 1:
            from .ops.validate import ShapeError

            raise ShapeError(f"item: only one-element tensors can be converted to Python "
                             f"scalars, got shape {self.shape}")
        return self.data.item()

    def tolist(self) -> Any:
        """The data as nested Python lists."""
        return self.data.tolist()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if dtype is not None and np.dtype(dtype) != self.dtype:
            return self.data.astype(dtype)
        return self.data.copy() if copy else self.data

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def _scalar(self, op: str) -> Any:
        if self.data.size != 1:
            raise RuntimeError(f"{op}: only one-element tensors can be converted to Python "
                               f"scalars, got shape {self.shape}")
        return self.data.reshape(()).item()

    def __bool__(self) -> bool:
        if self.data.size != 1:
            raise RuntimeError(f"bool: the truth value of a tensor with {self.data.size} "
                               "elements is ambiguous; use .any() or .all()")
        return bool(self.data.reshape(()))

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __index__(self) -> int:
        if self.dtype.kind not in "iub" or self.data.size != 1:
            raise TypeError(f"only integer tensors of a single element can be converted to an "
                            f"index, got dtype {self.dtype} and shape {self.shape}")
        return int(self._scalar("index"))

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return format(self.data.item(), spec)
        return format(repr(self), spec)

    def __repr__(self) -> str:
        from .printing import tensor_repr

        return tensor_repr(self)

    # ---- autograd ---------------------------------------------------------------------------
    def backward(self, gradient: Any = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """Accumulate d(self)/d(leaf) · ``gradient`` into the ``.grad`` of every leaf.

        ``gradient`` may be omitted only for a one-element tensor (it is then 1);
        ``retain_graph`` defaults to ``create_graph``; with ``create_graph=True`` the gradients
        are recorded and can be differentiated again; ``inputs`` limits which tensors' ``.grad``
        is accumulated.
        """
        autograd.backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph,
                          inputs=inputs)

    def _accumulate_grad(self, grad: Any) -> None:
        if isinstance(grad, Tensor):  # create_graph: keep the graph of the gradient
            self.grad = grad if self.grad is None else self.grad + grad
        elif self.grad is None:
            self.grad = Tensor(np.array(grad, dtype=self.dtype, copy=True))
        else:  # in place, as PyTorch: the .grad tensor keeps its identity (and any grad_fn)
            self.grad.data += grad

    def detach(self) -> Tensor:
        """A new leaf sharing this tensor's data (and version counter), cut from the graph."""
        out = Tensor._from_op(self.data, None)
        out._version = self._version
        return out

    def detach_(self) -> Tensor:
        """Cut this tensor from the graph, in place."""
        self.grad_fn = None
        self._requires_grad = False
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place and return ``self``."""
        self.requires_grad = requires_grad
        return self

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad: cannot retain the gradient of a tensor without grad")
        if self.grad_fn is not None:
            self.grad_fn.retained = self

    @property
    def retains_grad(self) -> bool:
        """Whether :meth:`retain_grad` was called on this non-leaf tensor."""
        return self.grad_fn is not None and self.grad_fn.retained is self

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> _HookHandle:
        """Call ``hook(grad)`` when this tensor's gradient is computed; a return value replaces it.

        Examples
        --------
        >>> import tinyattn as ta
        >>> x = ta.tensor([1.0, 2.0], requires_grad=True)
        >>> _ = x.register_hook(lambda g: g * 10)
        >>> (x * 3).sum().backward()
        >>> x.grad.tolist()
        [30.0, 30.0]
        """
        if not self.requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor without grad")
        hooks = self.grad_fn.hooks if self.grad_fn is not None else self._hooks
        hooks.append(hook)
        return _HookHandle(hooks, hook)

    # ---- in place ---------------------------------------------------------------------------
    def _check_inplace(self, op: str) -> None:
        """Refuse an in-place change where PyTorch does (before anything is computed)."""
        if autograd.is_grad_enabled():
            if self.grad_fn is None and self.requires_grad:
                raise RuntimeError(
                    f"{op}: a leaf tensor that requires grad is being used in an in-place "
                    "operation (do it under ta.no_grad(), or on a copy: x = x.clone())"
                )
            base = self._base
            if base is not None and (self.requires_grad or base.requires_grad):
                raise RuntimeError(
                    f"{op}: in-place change of a view of a tensor that requires grad; tinyattn "
                    "does not record it (write the change out of place, e.g. with ta.where, "
                    "or clone the view first)"
                )
        if not self.data.flags.writeable:
            raise RuntimeError(
                f"{op}: this tensor's memory is read-only (an expanded view, where several "
                "elements share one memory location); clone() it first"
            )

    def _assign(self, result: Tensor, op: str) -> Tensor:
        """Make ``result`` (computed out of place from ``self``) this tensor's new value."""
        if result.shape != self.shape:
            raise RuntimeError(f"{op}: output with shape {self.shape} doesn't match the "
                               f"broadcast shape {result.shape}")
        if dtypes.category(result.dtype) > dtypes.category(self.dtype):
            raise RuntimeError(f"{op}: result type {result.dtype} can't be cast to the desired "
                               f"output type {self.dtype}")
        if result.dtype != self.dtype:
            from .ops import cast

            result = cast(result, self.dtype)
        ctx = result.grad_fn
        if ctx is not None and ctx.inputs and any(t is self for t in ctx.inputs):
            _keep_original(ctx, self)
        self.data[...] = result.data
        self._version.value += 1
        if ctx is not None:
            # the op saved its output by value: that value now lives in (and is versioned by) self
            ctx.saved_versions = tuple(
                (self._version, self._version.value) if counter is result._version else
                (counter, version) for counter, version in ctx.saved_versions)
            self.grad_fn = ctx
            self._requires_grad = True
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        from .ops import setitem

        self._check_inplace("__setitem__")
        self._assign(setitem(self, index, value), "__setitem__")

    # ---- comparison with None ---------------------------------------------------------------
    def __eq__(self, other: Any) -> Tensor | bool:  # type: ignore[override]
        if other is None:  # PyTorch: a tensor never equals None
            return False
        return _ops.eq(self, other)

    def __ne__(self, other: Any) -> Tensor | bool:  # type: ignore[override]
        if other is None:
            return True
        return _ops.ne(self, other)

    __hash__ = object.__hash__

    @property
    def T(self) -> Tensor:
        """All dims reversed (the matrix transpose for 2-D tensors)."""
        return _ops.permute(self, *reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:  # noqa: N802  (PyTorch's name)
        """The last two dims swapped."""
        return _ops.transpose(self, -2, -1)


def _keep_original(ctx: autograd.Context, x: Tensor) -> None:
    """Before ``x`` is overwritten by the in-place op ``ctx``, give ``ctx`` its own copy of the
    value ``x`` had (PyTorch's "original self"): what the op saved of ``x`` and, for a
    create_graph backward, a tensor standing for ``x`` before the change."""
    original = x.data.copy()
    edge = ctx.edges[[t is x for t in ctx.inputs].index(True)]
    before = Tensor._from_op(original, edge if isinstance(edge, autograd.Context) else None)
    ctx.saved = tuple(original if v is x.data else v for v in ctx.saved)
    ctx.saved_versions = tuple((c, v) for c, v in ctx.saved_versions if c is not x._version)
    ctx.inputs = tuple(before if t is x else t for t in ctx.inputs)


def as_tensor(value: Any, dtype: Any = None) -> Tensor:
    """``value`` as a Tensor (no copy when it already is one, or a numpy array of the dtype).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.as_tensor([1, 2]).dtype
    dtype('int64')
    """
    if isinstance(value, Tensor):
        return value if dtype is None or value.dtype == dtypes.as_dtype(dtype) else \
            _ops.cast(value, dtype)
    return Tensor(value, dtype=dtype)


from . import ops as _ops  # noqa: E402  (ops import Tensor; this import closes the cycle)
