"""``Tensor``: one numpy array, plus what reverse-mode autograd needs to know about it.

Dtype rules: a numpy float array keeps its dtype (float32 or float64; float16 becomes float32);
Python floats become float32, Python ints int64, bools bool. Only floating point tensors can
require grad. Every operator and method delegates to a differentiable op in :mod:`tinyattn.ops`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import autograd

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)


def _to_array(data: Any, dtype: Any = None) -> np.ndarray:
    """Convert ``data`` to an ndarray following tinyattn's dtype rules (no copy when possible)."""
    if isinstance(data, Tensor):
        data = data.data
    if dtype is not None:
        return np.asarray(data, dtype=np.dtype(dtype))
    array = np.asarray(data)
    kind = array.dtype.kind
    if kind == "f":
        if array.dtype not in (float32, float64) or not isinstance(data, np.ndarray):
            array = array.astype(float32)
    elif kind in "iu":
        array = array.astype(int64, copy=False)
    elif kind != "b":
        raise TypeError(f"tensor: cannot make a tensor from data of dtype {array.dtype}")
    return array


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
        if requires_grad:
            self.requires_grad = True

    @classmethod
    def _from_op(cls, data: np.ndarray, ctx: autograd.Context | None) -> Tensor:
        out = cls.__new__(cls)
        out.data = np.asarray(data)
        out.grad = None
        out.grad_fn = ctx
        out._requires_grad = ctx is not None
        out._hooks = []
        return out

    # ---- attributes -------------------------------------------------------------------------
    @property
    def data(self) -> np.ndarray:
        """The underlying numpy array."""
        return self._data

    @data.setter
    def data(self, value: np.ndarray) -> None:
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
            raise TypeError(
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
    dtype = property(lambda self: self.data.dtype, doc="The numpy dtype.")
    is_leaf = property(lambda self: self.grad_fn is None, doc="True unless an op produced it.")

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        """The shape, or the size of one dim, as ``torch.Tensor.size``."""
        if dim is None:
            return self.shape
        return self.shape[_ops.normalize_dim("size", dim, self.ndim)]

    def numel(self) -> int:
        """The number of elements."""
        return self.data.size

    def numpy(self) -> np.ndarray:
        """The data as a numpy array (shared, not copied)."""
        return self.data

    def item(self) -> float | int | bool:
        """The value of a one-element tensor as a Python number."""
        if self.data.size != 1:
            raise ValueError(f"item: only one-element tensors can be converted, got {self.shape}")
        return self.data.item()

    def tolist(self) -> Any:
        """The data as nested Python lists."""
        return self.data.tolist()

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        body = np.array2string(self.data, separator=", ", prefix="tensor(")
        extra = ""
        if self.dtype not in (float32, int64, bool_):
            extra += f", dtype={self.dtype}"
        if self.grad_fn is not None:
            extra += f", grad_fn={self.grad_fn!r}"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    # ---- autograd ---------------------------------------------------------------------------
    def backward(self, gradient: Any = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) · ``gradient`` into the ``.grad`` of every leaf.

        ``gradient`` may be omitted only for a one-element tensor (it is then 1).
        """
        if not self.requires_grad:
            raise RuntimeError(
                "backward: this tensor does not require grad and has no grad_fn "
                "(did an input have requires_grad=True, and was grad mode on?)"
            )
        grad = self._seed_gradient("backward", gradient)
        autograd.backward(self, grad, retain_graph=retain_graph)

    def _seed_gradient(self, op: str, gradient: Any) -> np.ndarray:
        """The gradient a backward pass starts from: ones for a one-element tensor, else
        ``gradient`` checked against this tensor's shape and cast to its dtype."""
        if gradient is None:
            if self.data.size != 1:
                raise RuntimeError(
                    f"{op}: grad can be implicitly created only for one-element outputs; "
                    f"this tensor has shape {self.shape}, so pass gradient= of that shape"
                )
            return np.ones(self.shape, dtype=self.dtype)
        grad = np.asarray(gradient.data if isinstance(gradient, Tensor) else gradient)
        if grad.shape != self.shape:
            raise ValueError(
                f"{op}: gradient has shape {grad.shape} but the tensor has shape "
                f"{self.shape}; they must match"
            )
        return grad.astype(self.dtype, copy=False)

    def _accumulate_grad(self, grad: np.ndarray) -> None:
        if self.grad is None:
            self.grad = Tensor(np.array(grad, dtype=self.dtype, copy=True))
        else:
            self.grad = Tensor(self.grad.data + grad)

    def detach(self) -> Tensor:
        """A new leaf sharing this tensor's data, cut from the graph."""
        return Tensor(self.data)

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

    # ---- operators --------------------------------------------------------------------------
    def __add__(self, other: Any) -> Tensor:
        return _ops.add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _ops.add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _ops.sub(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _ops.sub(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _ops.mul(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _ops.mul(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _ops.div(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _ops.div(other, self)

    def __pow__(self, other: Any) -> Tensor:
        return _ops.pow(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return _ops.pow(other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return _ops.matmul(self, as_tensor(other, like=self))

    def __rmatmul__(self, other: Any) -> Tensor:
        return _ops.matmul(as_tensor(other, like=self), self)

    def __neg__(self) -> Tensor:
        return _ops.neg(self)

    def __getitem__(self, index: Any) -> Tensor:
        return _ops.getitem(self, index)

    def _compare(self, other: Any, fn: Callable) -> Tensor:
        other_data = other.data if isinstance(other, Tensor) else other
        return Tensor(np.asarray(fn(self.data, other_data)))

    def __lt__(self, other: Any) -> Tensor:
        return self._compare(other, np.less)

    def __le__(self, other: Any) -> Tensor:
        return self._compare(other, np.less_equal)

    def __gt__(self, other: Any) -> Tensor:
        return self._compare(other, np.greater)

    def __ge__(self, other: Any) -> Tensor:
        return self._compare(other, np.greater_equal)

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return self._compare(other, np.equal)

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return self._compare(other, np.not_equal)

    __hash__ = object.__hash__

    def _logical(self, other: Any, fn: Callable) -> Tensor:
        if self.dtype != bool_:
            raise TypeError(f"logical ops need boolean tensors, got dtype {self.dtype}")
        return self._compare(other, fn)

    def __and__(self, other: Any) -> Tensor:
        return self._logical(other, np.logical_and)

    def __or__(self, other: Any) -> Tensor:
        return self._logical(other, np.logical_or)

    def __invert__(self) -> Tensor:
        return self._logical(None, lambda a, _: np.logical_not(a))

    # ---- methods ----------------------------------------------------------------------------
    def sum(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return _ops.sum(self, dim, keepdim)

    def mean(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return _ops.mean(self, dim, keepdim)

    def max(self, dim: int | None = None, keepdim: bool = False) -> Any:
        return _ops.max(self, dim, keepdim)

    def var(self, dim: Any = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        return _ops.var(self, dim, keepdim, correction)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """Indices of the maxima (no gradient)."""
        if dim is None:
            return Tensor(np.asarray(np.argmax(self.data), dtype=np.int64))
        axis = _ops.normalize_dim("argmax", dim, self.ndim)
        return Tensor(np.argmax(self.data, axis=axis, keepdims=keepdim).astype(np.int64))

    def exp(self) -> Tensor:
        return _ops.exp(self)

    def log(self) -> Tensor:
        return _ops.log(self)

    def sqrt(self) -> Tensor:
        return _ops.sqrt(self)

    def tanh(self) -> Tensor:
        return _ops.tanh(self)

    def sigmoid(self) -> Tensor:
        return _ops.sigmoid(self)

    def relu(self) -> Tensor:
        return _ops.relu(self)

    def softmax(self, dim: int) -> Tensor:
        return _ops.softmax(self, dim)

    def log_softmax(self, dim: int) -> Tensor:
        return _ops.log_softmax(self, dim)

    def reshape(self, *shape: Any) -> Tensor:
        return _ops.reshape(self, *shape)

    def view(self, *shape: Any) -> Tensor:
        return _ops.reshape(self, *shape)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        return _ops.transpose(self, dim0, dim1)

    def permute(self, *dims: Any) -> Tensor:
        return _ops.permute(self, *dims)

    @property
    def T(self) -> Tensor:
        """All dims reversed (the matrix transpose for 2-D tensors)."""
        return _ops.permute(self, *reversed(range(self.ndim)))

    def unsqueeze(self, dim: int) -> Tensor:
        return _ops.unsqueeze(self, dim)

    def squeeze(self, dim: int | None = None) -> Tensor:
        return _ops.squeeze(self, dim)

    def expand(self, *sizes: Any) -> Tensor:
        return _ops.expand(self, *sizes)

    def contiguous(self) -> Tensor:
        return _ops.contiguous(self)

    def split(self, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
        return _ops.split(self, split_size, dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        return _ops.chunk(self, chunks, dim)

    def masked_fill(self, mask: Any, value: float) -> Tensor:
        return _ops.masked_fill(self, mask, value)

    def to(self, dtype: Any) -> Tensor:
        """This tensor in ``dtype`` (differentiable between float dtypes)."""
        return _ops.cast(self, dtype)

    def float(self) -> Tensor:
        return _ops.cast(self, float32)

    def double(self) -> Tensor:
        return _ops.cast(self, float64)

    def long(self) -> Tensor:
        return _ops.cast(self, int64)


def as_tensor(value: Any, like: Tensor | None = None) -> Tensor:
    """``value`` as a Tensor; Python numbers take ``like``'s float dtype so they never promote it.

    Used by binary ops so that ``x * 2.0`` keeps a float32 ``x`` in float32.
    """
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float, np.number)) and like is not None:
        is_float = isinstance(value, (float, np.floating))
        if like.dtype.kind == "f":
            return Tensor(np.asarray(value, dtype=like.dtype))
        if is_float:
            return Tensor(np.asarray(value, dtype=float32))
        return Tensor(np.asarray(value, dtype=like.dtype))
    if isinstance(value, (np.ndarray, list, tuple, bool, int, float, np.number)):
        return Tensor(value)
    raise TypeError(f"expected a tensor, number or array, got {type(value).__name__}")


from . import ops as _ops  # noqa: E402  (ops import Tensor; this import closes the cycle)
