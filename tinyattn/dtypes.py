"""Dtypes and PyTorch's type promotion.

tinyattn's dtypes are numpy dtypes under PyTorch's names (``ta.float32 == np.float32``). What
dtype an op returns follows PyTorch, not numpy: operands come in three *categories* — bool <
integer < floating — and three *kinds* — tensors with dims, 0-d tensors, Python numbers. A
weaker kind takes part in the promotion only when its category is higher than that of the
stronger kinds::

    int64 tensor + 0.5            -> float32   (a Python float means the default float dtype)
    float32 tensor + float64 0-d  -> float32   (same category: the dimensioned tensor wins)
    float32 tensor + int64 tensor -> float32   (numpy would give float64)
    bool tensor + 1               -> int64

Functions that only make sense on floats (``exp``, ``sqrt``, ``softmax``, true division …)
turn bool and integer inputs into the default float dtype, float32 unless
:func:`set_default_dtype` chose float64 (or float16).

float16 is a real dtype: tensors are made and cast in it, promotion follows PyTorch
(``float16 + float32 → float32``, ``float16 tensor + 0.5 → float16``) and numpy-backed elementwise
ops compute in it; the numba kernels (matmul, softmax, layer_norm, gelu, cross_entropy,
attention) take float32 and float64 only and refuse float16 with a ``DTypeError``.
``bfloat16`` exists only as a name (:data:`bfloat16`): numpy has no bfloat16 storage, so making
a tensor in it is an error that says so, while ``torch.bfloat16`` in a dict literal, ``finfo``
or ``x.dtype == torch.bfloat16`` (False) work as in PyTorch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import DTypeError

float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
uint8 = np.dtype(np.uint8)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

DEFAULT_FLOAT = float32
"""The default floating point dtype (PyTorch's ``get_default_dtype()``); read it through
:func:`get_default_dtype`, change it with :func:`set_default_dtype`."""

_SUPPORTED = frozenset({float16, float32, float64, uint8, int8, int16, int32, int64, bool_})


class NoStorageDtype:
    """A PyTorch dtype tinyattn has no storage for (``bfloat16``): it can be named, compared
    (equal only to itself) and given to ``finfo``, but not used to make a tensor.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.bfloat16, ta.bfloat16.is_floating_point, ta.ones(1).dtype == ta.bfloat16
    (tinyattn.bfloat16, True, False)
    """

    def __init__(self, name: str, itemsize: int) -> None:
        self.name = name
        self.itemsize = itemsize
        self.is_floating_point = True
        self.is_complex = False
        self.is_signed = True

    def __repr__(self) -> str:
        return f"tinyattn.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # pickles as the module attribute of that name

    def error(self, op: str) -> DTypeError:
        """The error for making a tensor of this dtype in ``op``."""
        return DTypeError(
            f"{op}: tinyattn has no {self.name} storage (numpy has no {self.name} type); use "
            "float32, the dtype torch.autocast and mixed-precision scripts run in on tinyattn "
            "(float16 and float64 also exist)")


bfloat16 = NoStorageDtype("bfloat16", 2)


def get_default_dtype() -> np.dtype:
    """The dtype Python floats and float factories default to: float32 unless
    :func:`set_default_dtype` changed it.

    Examples
    --------
    >>> get_default_dtype()
    dtype('float32')
    """
    return DEFAULT_FLOAT


def set_default_dtype(d: Any) -> None:
    """Make ``d`` (float32, float64 or float16) the dtype of Python floats, float factories
    (``zeros``, ``randn``, …), layers' parameters and float results of integer inputs, as
    ``torch.set_default_dtype``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.set_default_dtype(ta.float64)
    >>> ta.tensor([1.5]).dtype, ta.zeros(1).dtype, (ta.tensor([1]) / 2).dtype
    (dtype('float64'), dtype('float64'), dtype('float64'))
    >>> ta.set_default_dtype(ta.float32)
    """
    global DEFAULT_FLOAT
    target = as_dtype(d, "set_default_dtype")
    if target.kind != "f":
        raise TypeError(f"set_default_dtype: only floating point types can be the default "
                        f"type, got {target}")
    DEFAULT_FLOAT = target


def as_dtype(dtype: Any, op: str = "dtype") -> np.dtype:
    """``dtype`` (a tinyattn/numpy dtype, a numpy type, a name or a Python type) as a dtype.

    Python's ``float``/``int``/``bool`` mean float32, int64 and bool. ``bfloat16`` is an error
    saying tinyattn has no storage for it.
    """
    if isinstance(dtype, NoStorageDtype):
        raise dtype.error(op)
    if dtype is float:
        return float32
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: {dtype!r} is not a dtype") from None
    if result not in _SUPPORTED:
        raise TypeError(f"{op}: dtype {result} is not supported (tinyattn computes in float32 "
                        "and float64, float16 for elementwise ops; integers "
                        "int64/int32/int16/int8/uint8 and bool)")
    return result


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}


def category(dtype: np.dtype) -> int:
    """0 for bool, 1 for integers, 2 for floating point."""
    return _CATEGORY[dtype.kind]


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """PyTorch's ``promote_types``: the higher category wins (int64 + float32 = float32), and
    within a category the smallest dtype that holds both (uint8 + int8 = int16)."""
    if a == b:
        return a
    if category(a) != category(b):
        return a if category(a) > category(b) else b
    return np.promote_types(a, b)


def _scalar_dtype(value: Any) -> np.dtype:
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    return get_default_dtype()


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """Let ``lower`` (a weaker kind) promote ``higher`` only when its category is higher."""
    if higher is None:
        return lower
    if lower is None or higher.kind == "f":
        return higher
    if higher.kind == "b" or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def result_type(*operands: Any) -> np.dtype:
    """The dtype PyTorch gives an op on ``operands`` (tensors, arrays or Python numbers).

    Examples
    --------
    >>> import tinyattn as ta
    >>> result_type(ta.tensor([1, 2]), 0.5), result_type(ta.tensor([True]), -1)
    (dtype('float32'), dtype('int64'))
    >>> result_type(ta.ones(2), ta.tensor(1.0, dtype=ta.float64))
    dtype('float32')
    """
    dims = zero = wrapped = None
    for value in operands:
        if hasattr(value, "dtype") and hasattr(value, "ndim") and not isinstance(value,
                                                                                 np.generic):
            dtype = np.dtype(value.dtype)
            if value.ndim:
                dims = dtype if dims is None else promote_types(dims, dtype)
            else:
                zero = dtype if zero is None else promote_types(zero, dtype)
        else:
            dtype = _scalar_dtype(value)
            wrapped = dtype if wrapped is None else promote_types(wrapped, dtype)
    result = _combine(dims, _combine(zero, wrapped))
    if result is None:
        raise TypeError("result_type: no operands")
    return result


def float_result(dtype: np.dtype) -> np.dtype:
    """``dtype`` if it is floating point, else the default float dtype (for exp, sqrt, ...)."""
    return dtype if dtype.kind == "f" else get_default_dtype()


def is_floating_point(x: Any) -> bool:
    """Whether ``x`` (a tensor) has a floating point dtype."""
    return np.dtype(x.dtype).kind == "f"


# bfloat16's constants (PyTorch's ``torch.finfo(torch.bfloat16)``): 8 exponent bits as float32,
# 7 fraction bits.
_BFLOAT16_INFO = dict(bits=16, eps=2.0**-7, max=float.fromhex("0x1.fep127"),
                      tiny=2.0**-126, resolution=0.01)


class finfo:  # noqa: N801  (PyTorch's name)
    """The limits of a floating point dtype, as ``torch.finfo``: ``bits``, ``eps``, ``max``,
    ``min``, ``tiny`` (= ``smallest_normal``), ``resolution`` (Python numbers) and ``dtype``
    (the dtype's name). Without an argument, the default float dtype's.

    Examples
    --------
    >>> import tinyattn as ta
    >>> info = ta.finfo(ta.float32)
    >>> info.bits, info.eps, info.dtype
    (32, 1.1920928955078125e-07, 'float32')
    >>> ta.finfo(ta.bfloat16).eps
    0.0078125
    """

    def __init__(self, type: Any = None) -> None:
        if isinstance(type, NoStorageDtype):
            values, name = _BFLOAT16_INFO, type.name
        else:
            dtype = get_default_dtype() if type is None else as_dtype(type, "finfo")
            if dtype.kind != "f":
                raise TypeError(f"finfo: {dtype} is not a floating point dtype (use iinfo for "
                                "integers)")
            info = np.finfo(dtype)
            values = dict(bits=int(info.bits), eps=float(info.eps), max=float(info.max),
                          tiny=float(info.smallest_normal), resolution=10.0 ** -int(info.precision))
            name = dtype.name
        self.bits: int = values["bits"]
        self.eps: float = values["eps"]
        self.max: float = values["max"]
        self.min: float = -values["max"]
        self.tiny: float = values["tiny"]
        self.smallest_normal: float = values["tiny"]
        self.resolution: float = values["resolution"]
        self.dtype: str = name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801  (PyTorch's name)
    """The limits of an integer dtype, as ``torch.iinfo``: ``bits``, ``max``, ``min`` (Python
    ints) and ``dtype`` (the dtype's name).

    Examples
    --------
    >>> import tinyattn as ta
    >>> info = ta.iinfo(ta.int8)
    >>> info.bits, info.min, info.max, info.dtype
    (8, -128, 127, 'int8')
    """

    def __init__(self, type: Any) -> None:
        if isinstance(type, NoStorageDtype):
            raise TypeError(f"iinfo: {type.name} is not an integer dtype (use finfo)")
        dtype = as_dtype(type, "iinfo")
        if dtype.kind not in "iu":
            kind = "bool" if dtype.kind == "b" else "a floating point dtype"
            raise TypeError(f"iinfo: {dtype} is {kind}, not an integer dtype"
                            + (" (use finfo)" if dtype.kind == "f" else ""))
        info = np.iinfo(dtype)
        self.bits: int = int(info.bits)
        self.max: int = int(info.max)
        self.min: int = int(info.min)
        self.dtype: str = dtype.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
