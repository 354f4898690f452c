"""``Tensor``: one numpy array, plus what reverse-mode autograd needs to know about it.

Dtype rules (PyTorch's): a numpy float array keeps its dtype; Python floats become the default
dtype (float32), Python ints int64, bools bool; ops promote as :mod:`tinyattn.dtypes` says.
Only floating point tensors can require grad. Every operator and method is a function of
:mod:`tinyattn.ops`; they are written out in the mixin
:class:`tinyattn.tensor_methods.TensorMethods`.

In-place ops (``x.add_(y)``, ``x.masked_fill_(m, v)``, ``x[i] = v``) follow PyTorch's autograd
rules: the new value is computed by the ordinary op, written into ``x``'s memory (so views of
``x`` see it), and ``x`` takes the op's ``grad_fn``. Each tensor has a version counter (shared
with its views) that every in-place change bumps; an op that saved a tensor for its backward
checks it, so using a value that was overwritten is an error, not a silently wrong gradient.
An in-place change of a leaf that requires grad is refused, as in PyTorch.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import autograd, dtypes, tensor_methods
from .autograd import function
from .devices import CPU, check_device, device
from .dtypes import float32, float64, int64
from .errors import DTypeError, ShapeError
from .tensor_methods import TensorMethods
from .validation import normalize_dim

__all__ = ["CPU", "Size", "Tensor", "as_tensor", "check_device", "check_float",
           "check_kernel_dtype", "check_tensor", "device", "from_numpy"]


class _Version:
    """A tensor's version counter, shared with its views; in-place ops increment it."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


def _to_array(data: Any, dtype: Any = None) -> np.ndarray:
    """Convert ``data`` to an ndarray following tinyattn's dtype rules (no copy when possible)."""
    if isinstance(data, Tensor):
        data = data._data
    if dtype is not None:
        return np.asarray(data, dtype=dtypes.as_dtype(dtype, "tensor"))
    if isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in _flat(data)):
        data = _nested_values(data)
    array = np.asarray(data)
    kind = array.dtype.kind
    if kind == "f":
        if array.dtype not in (dtypes.float16, float32, float64) or not isinstance(
                data, (np.ndarray, np.generic)):
            array = array.astype(dtypes.get_default_dtype())
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
    return data._data if isinstance(data, Tensor) else data


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


class Tensor(TensorMethods):
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

    # What a tensor made by an op starts with (set on the instance only when it differs: a
    # tensor is made for every op's output, so making one must be cheap).
    _grad: Tensor | None = None
    grad_fn: autograd.Context | None = None
    _requires_grad = False
    _output_nr = 0
    """Which output of its ``grad_fn`` this tensor is."""
    _base: Tensor | None = None
    """The tensor this one is a view of."""
    _hooks: list[Callable] = ()  # type: ignore[assignment]
    _version_counter: _Version | None = None

    def __init__(self, data: Any, dtype: Any = None, requires_grad: bool = False):
        self._data = _to_array(data, dtype)
        if requires_grad:
            self.requires_grad = True

    @classmethod
    def _from_op(cls, data: np.ndarray, ctx: autograd.Context | None) -> Tensor:
        """A tensor on ``data`` (no copy, no dtype rules), the output of ``ctx`` (or a leaf)."""
        out = cls.__new__(cls)
        out._data = data if type(data) is np.ndarray else np.asarray(data)
        if ctx is not None:
            out.grad_fn = ctx
            out._requires_grad = True
        return out

    @property
    def _version(self) -> _Version:
        """The version counter (shared with views), made on first use."""
        counter = self._version_counter
        if counter is None:
            counter = self._version_counter = _Version()
        return counter

    @_version.setter
    def _version(self, counter: _Version) -> None:
        self._version_counter = counter

    # ---- attributes -------------------------------------------------------------------------
    @property
    def data(self) -> Tensor:
        """This tensor's values as a new tensor cut from the graph, sharing memory (PyTorch's
        ``.data``: ``x.data.clone()``, ``p.data.add_(...)``). Changes made through it are not
        tracked by autograd; ``.numpy()`` gives the numpy array."""
        return Tensor._from_op(self._data, None)

    @data.setter
    def data(self, value: Any) -> None:
        if isinstance(value, Tensor):
            value = value._data
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if not isinstance(value, np.ndarray):
            raise TypeError(f"Tensor.data must be a Tensor or numpy array, got "
                            f"{type(value).__name__}")
        self._data = value

    @property
    def grad(self) -> Tensor | None:
        """The gradient accumulated by ``backward()`` (leaves, and tensors that called
        ``retain_grad()``); None until then."""
        if self._grad is None and self.grad_fn is not None and not self.retains_grad:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during backward(). If you indeed want "
                "the gradient for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor "
                "before backward() (or register_hook to see it).", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"Tensor.grad must be a Tensor or None, got {type(value).__name__}")
        if value is not None and value.shape != self.shape:
            raise ShapeError(f"Tensor.grad: assigned a gradient of shape {value.shape} to a "
                             f"tensor of shape {self.shape}")
        self._grad = value

    @property
    def requires_grad(self) -> bool:
        """Whether gradients are computed for this tensor."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and self._data.dtype.kind != "f":
            from .errors import DTypeError

            raise DTypeError(
                f"requires_grad: only floating point tensors can require gradients, "
                f"got dtype {self._data.dtype}"
            )
        if not value and self.grad_fn is not None:
            raise RuntimeError(
                "requires_grad: cannot turn off gradients of a non-leaf tensor; use .detach()"
            )
        self._requires_grad = bool(value)

    shape = property(lambda self: self._data.shape, doc="The shape, a tuple of ints.")
    ndim = property(lambda self: self._data.ndim, doc="The number of dims.")
    dtype = property(lambda self: self._data.dtype, doc="The dtype (a numpy dtype).")
    is_leaf = property(lambda self: self.grad_fn is None, doc="True unless an op produced it.")
    device = property(lambda self: CPU, doc="Always the CPU.")
    is_cuda = False

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        """The shape, or the size of one dim, as ``torch.Tensor.size``."""
        if dim is None:
            return Size(self.shape)
        return self.shape[normalize_dim("size", dim, self.ndim)] if self.ndim else 1

    def dim(self) -> int:
        """The number of dims."""
        return self._data.ndim

    def numel(self) -> int:
        """The number of elements."""
        return self._data.size

    nelement = numel  # PyTorch's other name for numel

    def element_size(self) -> int:
        """Bytes per element."""
        return self._data.itemsize

    def numpy(self) -> np.ndarray:
        """The data as a numpy array (shared, not copied)."""
        return self._data

    def item(self) -> float | int | bool:
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            from .errors import ShapeError

            raise ShapeError(f"item: only one-element tensors can be converted to Python "
                             f"scalars, got shape {self.shape}")
        return self._data.item()

    def tolist(self) -> Any:
        """The data as nested Python lists."""
        return self._data.tolist()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if dtype is not None and np.dtype(dtype) != self.dtype:
            return self._data.astype(dtype)
        return self._data.copy() if copy else self._data

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def _scalar(self, op: str) -> Any:
        if self._data.size != 1:
            raise RuntimeError(f"{op}: only one-element tensors can be converted to Python "
                               f"scalars, got shape {self.shape}")
        return self._data.reshape(()).item()

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"bool: the truth value of a tensor with {self._data.size} "
                               "elements is ambiguous; use .any() or .all()")
        return bool(self._data.reshape(()))

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __index__(self) -> int:
        if self.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError(f"only integer tensors of a single element can be converted to an "
                            f"index, got dtype {self.dtype} and shape {self.shape}")
        return int(self._scalar("index"))

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return format(self._data.item(), spec)
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

    def _accumulate_grad(self, grad: Tensor, owned: bool = False) -> None:
        """Add ``grad`` into ``.grad``. A first gradient is copied, unless the engine says
        nothing else holds its array (``owned``) and no other array reaches its memory
        (:func:`_private`): then, as PyTorch does, ``.grad`` takes that array as it is."""
        if grad.requires_grad:  # create_graph: keep the graph of the gradient
            self._grad = grad if self._grad is None else self._grad + grad
        elif self._grad is None:
            array = grad._data
            if not (owned and _private(array) and array.dtype == self.dtype
                    and array.flags.c_contiguous and array.flags.writeable):
                array = np.array(array, dtype=self.dtype, copy=True)
            self._grad = Tensor._from_op(array, None)
        else:  # in place, as PyTorch: the .grad tensor keeps its identity (and any grad_fn)
            self._grad._data += grad._data

    def detach(self) -> Tensor:
        """A new leaf sharing this tensor's data (and version counter), cut from the graph."""
        out = Tensor._from_op(self._data, None)
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
            self.grad_fn.retain(self._output_nr, self)

    @property
    def retains_grad(self) -> bool:
        """Whether :meth:`retain_grad` was called on this non-leaf tensor."""
        return self.grad_fn is not None and self.grad_fn.retained is not None and \
            self.grad_fn.retained.get(self._output_nr) is self

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
        if self.grad_fn is not None:
            return _HookHandle(self.grad_fn.add_hook(self._output_nr, hook), hook)
        if not self._hooks:
            self._hooks = []
        self._hooks.append(hook)
        return _HookHandle(self._hooks, hook)

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
        if not self._data.flags.writeable:
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
            result = _ops.cast(result, self.dtype)
        ctx = result.grad_fn
        if ctx is not None and ctx.inputs and any(t is self for t in ctx.inputs):
            _keep_original(ctx, self)
        self._data[...] = result._data
        self._version.value += 1
        if ctx is not None:
            # the op saved its output by value: that value now lives in (and is versioned by) self
            ctx.retarget_saved_output(result, self)
            self.grad_fn = ctx
            self._output_nr = result._output_nr
            self._requires_grad = True
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        self._check_inplace("__setitem__")
        if type(value) in (float, int) and self.grad_fn is None and not self._requires_grad \
                and self._data.dtype.kind == "f" and isinstance(index, Tensor) and \
                index.dtype == np.bool_ and index.shape == self.shape:
            # a number written where a mask of this shape is True, nothing to record (top-k
            # sampling's ``logits[logits < v[:, [-1]]] = -inf``): straight into the memory
            self._data[index._data] = value
            self._version.value += 1
            return
        self._assign(_ops.setitem(self, index, value), "__setitem__")

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
        """All dims reversed: the matrix transpose for 2-D tensors.

        As in PyTorch, any other number of dims still works but warns that it is deprecated
        (for 0-d and 1-d tensors the result is an identity view of the tensor, with a
        ``grad_fn``, not the tensor itself); ``.mT`` transposes batches of matrices.
        """
        if self.ndim == 0:
            warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the "
                          "identity in these cases.", UserWarning, stacklevel=2)
        elif self.ndim != 2:
            warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse "
                          "their shape is deprecated and it will throw an error in a future "
                          "release. Consider `x.mT` to transpose batches of matrices or "
                          "`x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the "
                          "dimensions of a tensor.", UserWarning, stacklevel=2)
        if self.ndim < 2:  # an identity view, as PyTorch's (permute would return self)
            return _ops.shape.Permute.apply(self, dims=tuple(range(self.ndim)))
        return _ops.permute(self, tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> Tensor:  # noqa: N802  (PyTorch's name)
        """The last two dims swapped (a ShapeError below 2 dims, as PyTorch's error)."""
        if self.ndim < 2:
            raise ShapeError(f"mT: tensor.mT is only supported on matrices or batches of "
                             f"matrices, got a {self.ndim}-D tensor of shape {self.shape}")
        return _ops.transpose(self, -2, -1)


def _private(array: np.ndarray) -> bool:
    """Whether ``array``'s memory is its own: it owns it, or it is the only array that refers to
    the buffer it views (as the kernels' cache-line-aligned outputs are,
    :func:`~tinyattn.kernels.aligned.aligned_empty`)."""
    base = array.base
    # the references to a buffer only ``array`` views: its .base, this name, getrefcount's argument
    return base is None or (type(base) is np.ndarray and base.base is None
                            and sys.getrefcount(base) == 3)


def _keep_original(ctx: autograd.Context, x: Tensor) -> None:
    """Before ``x`` is overwritten by the in-place op ``ctx``, give ``ctx`` a tensor standing for
    the value ``x`` had (PyTorch's "original self"), in what it saved and among its inputs, with
    ``x``'s place in the graph before the change."""
    edge = ctx.edges[[t is x for t in ctx.inputs].index(True)]
    before = Tensor._from_op(x._data.copy(), edge if isinstance(edge, autograd.Context) else None)
    before._output_nr = x._output_nr
    ctx.replace_saved(x, before)
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


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with the numpy ``array``, its dtype kept (``torch.from_numpy``).

    Examples
    --------
    >>> import numpy as np, tinyattn as ta
    >>> a = np.zeros(2)
    >>> t = ta.from_numpy(a)
    >>> a[0] = 5.0
    >>> t.tolist(), t.dtype
    ([5.0, 0.0], dtype('float64'))
    """
    if type(array) is not np.ndarray:
        if not isinstance(array, (np.ndarray, np.generic)):
            raise TypeError(f"from_numpy: expected a numpy array, got {type(array).__name__}")
        array = np.asarray(array)
    if array.dtype.kind not in "fiub":
        raise TypeError(f"from_numpy: cannot make a tensor of numpy dtype {array.dtype}")
    out = Tensor.__new__(Tensor)
    out._data = array
    return out


def check_tensor(op: str, label: str, value: Any) -> Any:
    """``value`` itself when it is a Tensor, else a TypeError naming ``op`` and ``label``."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}: {label} must be a Tensor, got {type(value).__name__}")
    return value


def check_float(op: str, label: str, value: Any) -> Any:
    """A Tensor of a floating point dtype, else an error naming ``op`` and ``label``."""
    check_tensor(op, label, value)
    if value.dtype.kind != "f":
        raise TypeError(f"{op}: {label} must be a floating point tensor, got dtype {value.dtype}")
    return value


def check_kernel_dtype(op: str, *tensors: Any) -> None:
    """Refuse float16 in ``op``, which runs on a numba kernel that takes float32 and float64
    only (numpy-backed elementwise ops do take float16), with a ``DTypeError`` naming ``op``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> check_kernel_dtype("softmax", ta.ones(2).half())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tinyattn.errors.DTypeError: softmax: float16 is not supported: ...
    """
    for value in tensors:
        if value is not None and value.dtype == dtypes.float16:
            raise DTypeError(f"{op}: float16 is not supported: tinyattn's {op} runs on a kernel "
                             "that computes in float32 and float64 (convert with .float(); "
                             "elementwise ops do take float16)")


function.TENSOR = Tensor  # the autograd layer below works on tensors without importing this module

from . import ops as _ops  # noqa: E402  (ops import Tensor; this import closes the cycle)

tensor_methods._ops = _ops  # the methods call ops; they are bound to the module here
