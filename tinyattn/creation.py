"""Making tensors, with PyTorch's names, signatures and dtype defaults: ``tensor``,
``as_tensor``, ``from_numpy``, ``empty``, ``zeros``, ``ones``, ``full``, ``eye``, ``arange``,
``linspace``, the random ``rand``/``randn``/``randint``/``randperm`` and every ``*_like``.

Float factories default to float32 (PyTorch's default dtype; ``set_default_dtype`` changes
it); ``device`` may be None or ``'cpu'``. Random factories draw from the generator that
``ta.manual_seed`` seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes
from .devices import check_device
from .errors import ShapeError
from .random import generator, numpy_generator
from .tensor import Tensor, check_tensor, from_numpy
from .validation import check_int, is_int, shape_arg


def _make(array: np.ndarray, device: Any, requires_grad: bool, op: str) -> Tensor:
    check_device(device, op)
    out = Tensor(array)
    return out.requires_grad_(True) if requires_grad else out


def _float_dtype(dtype: Any, op: str) -> np.dtype:
    return dtypes.get_default_dtype() if dtype is None else dtypes.as_dtype(dtype, op)


def _size(op: str, size: tuple) -> tuple[int, ...]:
    shape = shape_arg(op, size)
    if any(n < 0 for n in shape):
        raise ShapeError(f"{op}: expected non-negative int sizes, got {shape}")
    return shape


def tensor(data: Any, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """A new tensor from nested lists, numbers, a numpy array or a tensor (always a copy).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0]).dtype, ta.tensor([1, 2]).dtype, ta.tensor(True).dtype
    (dtype('float32'), dtype('int64'), dtype('bool'))
    """
    source = data.numpy() if isinstance(data, Tensor) else data
    out = Tensor(source, dtype=dtype)
    if out.numpy() is source or np.shares_memory(out.numpy(), np.asarray(source)):
        out = Tensor(out.numpy().copy())
    return _make(out.numpy(), device, requires_grad, "tensor")


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``data`` as a tensor, sharing memory with a tensor or numpy array where possible."""
    check_device(device, "as_tensor")
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    return Tensor(data, dtype=dtype)


def zeros(*size: Any, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of the given size."""
    return _make(np.zeros(_size("zeros", size), _float_dtype(dtype, "zeros")), device,
                 requires_grad, "zeros")


def ones(*size: Any, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor of ones of the given size."""
    return _make(np.ones(_size("ones", size), _float_dtype(dtype, "ones")), device,
                 requires_grad, "ones")


def empty(*size: Any, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """A tensor of the given size (filled with zeros: tinyattn never hands out garbage)."""
    return _make(np.zeros(_size("empty", size), _float_dtype(dtype, "empty")), device,
                 requires_grad, "empty")


def full(size: Any, fill_value: Any, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (dtype inferred from it, as PyTorch)."""
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    chosen = dtypes.as_dtype(dtype, "full") if dtype is not None else \
        dtypes.result_type(fill_value)
    return _make(np.full(_size("full", (size,)), fill_value, chosen), device, requires_grad,
                 "full")


def eye(n: int, m: int | None = None, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    """The ``n × m`` identity matrix."""
    n = check_int("eye", "n", n, 0)
    m = n if m is None else check_int("eye", "m", m, 0)
    return _make(np.eye(n, m, dtype=_float_dtype(dtype, "eye")), device, requires_grad, "eye")


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Values ``start, start + step, …`` below ``end``: int64 when all arguments are ints,
    else float32 (PyTorch's rule)."""
    if end is None:
        start, end = 0, start
    values = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if dtype is None:
        dtype = dtypes.int64 if all(is_int(v) for v in values) else dtypes.get_default_dtype()
    array = np.arange(*values, dtype=np.float64 if dtypes.as_dtype(dtype).kind == "f" else None)
    return _make(array.astype(dtypes.as_dtype(dtype, "arange")), device, requires_grad,
                 "arange")


def linspace(start: float, end: float, steps: int, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    steps = check_int("linspace", "steps", steps, 0)
    array = np.linspace(start, end, steps).astype(_float_dtype(dtype, "linspace"))
    return _make(array, device, requires_grad, "linspace")


def rand(*size: Any, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1)."""
    array = generator().random(_size("rand", size)).astype(_float_dtype(dtype, "rand"))
    return _make(array, device, requires_grad, "rand")


def randn(*size: Any, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    array = generator().standard_normal(_size("randn", size)).astype(
        _float_dtype(dtype, "randn"))
    return _make(array, device, requires_grad, "randn")


def randint(low: int, high: Any = None, size: Any = None, dtype: Any = None,
            device: Any = None, requires_grad: bool = False) -> Tensor:
    """Integers uniform in ``[low, high)``: ``randint(high, size)`` or ``randint(low, high,
    size)``."""
    if size is None:
        low, high, size = 0, low, high
    if size is None:
        raise TypeError("randint: size must be given, e.g. randint(10, (3,))")
    if high <= low:
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    array = generator().integers(low, high, _size("randint", (size,)))
    chosen = dtypes.int64 if dtype is None else dtypes.as_dtype(dtype, "randint")
    return _make(array.astype(chosen), device, requires_grad, "randint")


def randperm(n: int, *, generator: Any = None, dtype: Any = None,
             device: Any = None) -> Tensor:
    """A random permutation of ``0 … n−1``, drawn from ``generator`` (a ``ta.Generator``) or
    the global generator.

    Examples
    --------
    >>> import tinyattn as ta
    >>> first = ta.randperm(5, generator=ta.Generator().manual_seed(1337))
    >>> again = ta.randperm(5, generator=ta.Generator().manual_seed(1337))
    >>> first.tolist() == again.tolist(), sorted(first.tolist())
    (True, [0, 1, 2, 3, 4])
    """
    array = numpy_generator(generator, "randperm").permutation(check_int("randperm", "n", n, 0))
    chosen = dtypes.int64 if dtype is None else dtypes.as_dtype(dtype, "randperm")
    return _make(array.astype(chosen), device, False, "randperm")


def _like(factory: Any) -> Any:
    def like(input: Tensor, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
        return factory(*input.shape, dtype=input.dtype if dtype is None else dtype,
                       device=device, requires_grad=requires_grad)

    like.__name__ = f"{factory.__name__}_like"
    like.__doc__ = f"``{factory.__name__}`` of ``input``'s shape (and dtype unless given)."
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)
rand_like = _like(rand)
randn_like = _like(randn)


def full_like(input: Tensor, fill_value: Any, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """``input``'s shape filled with ``fill_value`` (and its dtype unless given)."""
    return full(input.shape, fill_value, dtype=input.dtype if dtype is None else dtype,
                device=device, requires_grad=requires_grad)


def multinomial(input: Any, num_samples: int, replacement: bool = False) -> Any:
    """Indices sampled from the rows of ``input`` (non-negative weights, not necessarily
    normalised), as ``torch.multinomial``: shape ``(num_samples,)`` or ``(B, num_samples)``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.manual_seed(0)
    >>> ta.multinomial(ta.tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
    [1, 1]
    """
    check_tensor("multinomial", "input", input)
    num_samples = check_int("multinomial", "num_samples", num_samples, 1)
    weights = input.numpy().astype(np.float64)
    if weights.ndim not in (1, 2):
        raise ShapeError(f"multinomial: input must be 1-D or 2-D, got shape {input.shape}")
    rows = weights.reshape(-1, weights.shape[-1])
    if rows.size and not (rows.min() >= 0.0 and rows.max() < np.inf):  # NaN fails both
        raise ValueError("multinomial: probabilities must be finite and non-negative")
    totals = rows.sum(axis=1)
    if (totals <= 0).any():
        raise ShapeError("multinomial: each row must have a positive sum")
    if not replacement and num_samples > 1 and \
            (np.count_nonzero(rows, axis=1) < num_samples).any():
        raise ShapeError(f"multinomial: cannot draw {num_samples} samples without "
                           "replacement from a row with fewer non-zero weights")
    draws = np.empty((rows.shape[0], num_samples), np.int64)
    if replacement or num_samples == 1:
        # numpy's ``Generator.choice(n, size, p=row / total)`` for these, row by row, with the
        # draws it would make (the same uniforms, the same cumulative sums): a sample is the
        # number of cumulative weights at or below a uniform draw
        cdf = np.cumsum(rows / totals[:, None], axis=1)
        cdf /= cdf[:, -1:]
        uniforms = generator().random((rows.shape[0], num_samples))
        for r in range(rows.shape[0]):
            draws[r] = np.searchsorted(cdf[r], uniforms[r], side="right")
    else:
        for r in range(rows.shape[0]):
            draws[r] = generator().choice(rows.shape[1], size=num_samples, replace=False,
                                          p=rows[r] / totals[r])
    return from_numpy(draws.reshape(weights.shape[:-1] + (num_samples,)))


# ---- PyTorch's legacy typed constructors: torch.FloatTensor, torch.LongTensor, ... ------------
class _TypedTensorMeta(type):
    """The type of ``torch.FloatTensor`` and its kin: calling one makes a tensor of its dtype,
    and ``isinstance(x, torch.FloatTensor)`` asks whether ``x`` is a tensor of that dtype."""

    dtype: np.dtype

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:
        op = f"torch.{cls.__name__}"
        check_device(device, op)
        if not args:
            return Tensor(np.zeros(0, cls.dtype))
        if all(is_int(a) for a in args) or (len(args) == 1 and isinstance(args[0], tuple)
                                            and all(is_int(a) for a in args[0])
                                            and type(args[0]) is not tuple):
            sizes = args[0] if len(args) == 1 and isinstance(args[0], tuple) else args
            return Tensor(np.zeros(_size(op, tuple(sizes)), cls.dtype))  # PyTorch: uninitialized
        if len(args) == 1:
            data = args[0]
            if isinstance(data, Tensor):
                if data.dtype != cls.dtype:
                    raise TypeError(f"{op}(tensor): expected a tensor of dtype {cls.dtype}, got "
                                    f"{data.dtype} (use tensor.to(...) to convert it)")
                return data.detach()
            return tensor(data, dtype=cls.dtype)
        raise TypeError(f"{op}: expected sizes (ints) or one sequence of data, got "
                        f"{', '.join(type(a).__name__ for a in args)}")

    def __repr__(cls) -> str:
        return f"<class 'tinyattn.{cls.__name__}'>"


def _typed(name: str, dtype: Any) -> type:
    doc = (f"``torch.{name}``, PyTorch's legacy constructor of {np.dtype(dtype).name} tensors: "
           f"``{name}(data)`` is ``tensor(data, dtype={np.dtype(dtype).name})``, "
           f"``{name}(2, 3)`` a (2, 3) tensor of zeros (PyTorch leaves it uninitialized), "
           f"``{name}()`` an empty one; ``isinstance(x, {name})`` tests the dtype.")
    return _TypedTensorMeta(name, (), {"dtype": np.dtype(dtype), "__doc__": doc,
                                       "__module__": "tinyattn"})


FloatTensor = _typed("FloatTensor", np.float32)
DoubleTensor = _typed("DoubleTensor", np.float64)
HalfTensor = _typed("HalfTensor", np.float16)
LongTensor = _typed("LongTensor", np.int64)
IntTensor = _typed("IntTensor", np.int32)
ShortTensor = _typed("ShortTensor", np.int16)
CharTensor = _typed("CharTensor", np.int8)
ByteTensor = _typed("ByteTensor", np.uint8)
BoolTensor = _typed("BoolTensor", np.bool_)
TYPED_TENSORS = {cls.__name__: cls for cls in (
    FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor, ShortTensor, CharTensor,
    ByteTensor, BoolTensor)}
"""The legacy constructors by name (``Tensor.type('torch.LongTensor')`` reads this)."""
