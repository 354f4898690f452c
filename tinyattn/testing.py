"""``torch.testing.assert_close``: compare tensors, numbers and nests of them, with PyTorch's
default tolerances per dtype and the facts its messages give.

Two values are close where ``|actual − expected| <= atol + rtol · |expected|`` (infinities must
be equal, NaNs only with ``equal_nan``). Without ``rtol`` and ``atol`` (give both or neither)
the tolerances are PyTorch's for the dtype: float16 ``(1e-3, 1e-5)``, bfloat16
``(1.6e-2, 1e-5)``, float32 ``(1.3e-6, 1e-5)``, float64 ``(1e-7, 1e-7)``, and exact for
integers and bool. A failure is an ``AssertionError`` saying how many elements mismatched, the
greatest absolute and relative differences, where, and what was allowed; a dtype or shape that
differs is reported before any value. Tensors and numpy arrays compare with tensors and arrays
respectively, Python numbers with numbers of the same type, lists and tuples item by item,
dicts key by key (the failure names the item, e.g. ``item [1]['w']``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import dtypes
from .tensor import Tensor

__all__ = ["assert_close"]

_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5),
               "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}
"""PyTorch's default ``(rtol, atol)`` of the float dtypes; other dtypes compare exactly."""


def default_tolerances(dtype: Any) -> tuple[float, float]:
    """``(rtol, atol)`` that ``assert_close`` uses for ``dtype`` when none are given.

    Examples
    --------
    >>> import tinyattn as ta
    >>> default_tolerances(ta.float32), default_tolerances(ta.int64)
    ((1.3e-06, 1e-05), (0.0, 0.0))
    """
    name = getattr(dtype, "name", str(dtype))
    return _TOLERANCES.get(name, (0.0, 0.0))


class _Mismatch(AssertionError):
    """A failed comparison; ``path`` is filled in on the way out of nested containers."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text
        self.path = ""


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.number))


def _type_name(value: Any) -> str:
    return repr(type(value))


def _dtype_repr(dtype: np.dtype) -> str:
    return f"tinyattn.{dtype.name}" if dtype.name != "bool" else "tinyattn.bool"


def _scalar_message(actual: Any, expected: Any, rtol: float, atol: float) -> str:
    exact = rtol == 0 and atol == 0
    head = "Scalars are not equal!" if exact else "Scalars are not close!"
    absolute = abs(actual - expected)
    relative = absolute / abs(expected) if expected != 0 else float("inf") if absolute else 0.0
    lines = [head, "", f"Expected {expected} but got {actual}.",
             f"Absolute difference: {absolute}" + ("" if exact else f" (up to {atol} allowed)"),
             f"Relative difference: {relative}" + ("" if exact else f" (up to {rtol} allowed)")]
    return "\n".join(lines)


def _close(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float,
           equal_nan: bool) -> np.ndarray:
    """Elementwise closeness, as ``torch.isclose``."""
    if actual.dtype.kind in "biu" and expected.dtype.kind in "biu" and rtol == atol == 0:
        return actual == expected
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = (a == e) | (np.isfinite(a) & np.isfinite(e) & (np.abs(a - e) <= atol
                                                                + rtol * np.abs(e)))
    if equal_nan:
        close |= np.isnan(a) & np.isnan(e)
    return close


def _compare_arrays(actual: np.ndarray, expected: np.ndarray, rtol: float | None,
                    atol: float | None, equal_nan: bool, check_dtype: bool,
                    zero_dim_is_scalar: bool) -> None:
    if actual.shape != expected.shape:
        raise _Mismatch(f"The values for attribute 'shape' do not match: {actual.shape} != "
                        f"{expected.shape}.")
    if check_dtype and actual.dtype != expected.dtype:
        raise _Mismatch(f"The values for attribute 'dtype' do not match: "
                        f"{_dtype_repr(actual.dtype)} != {_dtype_repr(expected.dtype)}.")
    if rtol is None:  # the looser of the two dtypes' tolerances, as PyTorch
        rtol, atol = (max(a, b) for a, b in zip(default_tolerances(actual.dtype),
                                                 default_tolerances(expected.dtype)))
    close = _close(actual, expected, rtol, atol, equal_nan)
    if close.all():
        return
    if actual.ndim == 0 and zero_dim_is_scalar:
        raise _Mismatch(_scalar_message(actual.item(), expected.item(), rtol, atol))
    raise _Mismatch(_tensor_message(actual, expected, close, rtol, atol))


def _tensor_message(actual: np.ndarray, expected: np.ndarray, close: np.ndarray, rtol: float,
                    atol: float) -> str:
    exact = rtol == 0 and atol == 0
    integral = actual.dtype.kind in "biu" and expected.dtype.kind in "biu"
    common = np.result_type(actual.dtype, expected.dtype)
    if integral:
        a, e = actual.astype(np.int64), expected.astype(np.int64)
        absolute = np.abs(a - e)
        relative_dtype = dtypes.get_default_dtype()
    else:
        a, e = actual.astype(common), expected.astype(common)
        with np.errstate(invalid="ignore", over="ignore"):
            absolute = np.abs(a - e)
        relative_dtype = common
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = absolute.astype(relative_dtype) / np.abs(e).astype(relative_dtype)
    mismatched = int((~close).sum())
    total = close.size
    lines = ["Tensor-likes are not equal!" if exact else "Tensor-likes are not close!", "",
             f"Mismatched elements: {mismatched} / {total} ({100.0 * mismatched / total:.1f}%)"]
    for label, values, allowed in (("absolute", absolute, atol), ("relative", relative, rtol)):
        flat = values.reshape(-1)
        nan = np.isnan(flat) if flat.dtype.kind == "f" else np.zeros(flat.shape, bool)
        at = int(np.argmax(nan)) if nan.any() else int(np.argmax(flat))
        index = tuple(int(i) for i in np.unravel_index(at, values.shape))
        value = flat[at].item()
        lines.append(f"Greatest {label} difference: {value} at index {index}"
                     + ("" if exact else f" (up to {allowed} allowed)"))
    return "\n".join(lines)


def _compare(actual: Any, expected: Any, rtol: float | None, atol: float | None,
             equal_nan: bool, check_dtype: bool, check_stride: bool) -> None:
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        if check_stride and actual.stride() != expected.stride():
            raise _Mismatch(f"The values for attribute 'stride()' do not match: "
                            f"{actual.stride()} != {expected.stride()}.")
        _compare_arrays(actual.numpy(), expected.numpy(), rtol, atol, equal_nan, check_dtype,
                        zero_dim_is_scalar=True)
        return
    if isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray):
        _compare_arrays(actual, expected, rtol, atol, equal_nan, check_dtype,
                        zero_dim_is_scalar=True)
        return
    if _is_number(actual) and _is_number(expected) and not isinstance(
            actual, (Tensor, np.ndarray)) and not isinstance(expected, (Tensor, np.ndarray)):
        if check_dtype and type(actual) is not type(expected):
            raise _Mismatch(f"The (d)types do not match: {type(actual)} != {type(expected)}.")
        dtype = np.result_type(np.asarray(actual), np.asarray(expected))
        if rtol is None:
            rtol, atol = default_tolerances(np.dtype(np.float64) if dtype.kind == "f" else dtype)
        if not _close(np.asarray(actual), np.asarray(expected), rtol, atol, equal_nan):
            raise _Mismatch(_scalar_message(actual, expected, rtol, atol))
        return
    if actual is None and expected is None:
        return
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            raise _Mismatch("The keys of the mappings do not match:\n"
                            f"Missing keys in the actual mapping: "
                            f"{sorted(set(expected) - set(actual), key=repr)}\n"
                            f"Additional keys in the actual mapping: "
                            f"{sorted(set(actual) - set(expected), key=repr)}")
        for key in expected:
            _nested(key, actual[key], expected[key], rtol, atol, equal_nan, check_dtype,
                    check_stride)
        return
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Mismatch(f"The length of the sequences mismatch: {len(actual)} != "
                            f"{len(expected)}")
        for index, (a, e) in enumerate(zip(actual, expected)):
            _nested(index, a, e, rtol, atol, equal_nan, check_dtype, check_stride)
        return
    raise TypeError(f"assert_close: no comparison for inputs of type {_type_name(actual)} and "
                    f"{_type_name(expected)} (it compares tensors with tensors, numpy arrays "
                    "with arrays, numbers with numbers, and sequences and mappings of them)")


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _nested(key: Any, actual: Any, expected: Any, *options: Any) -> None:
    try:
        _compare(actual, expected, *options)
    except _Mismatch as mismatch:
        mismatch.path = f"[{key!r}]" + mismatch.path
        raise


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True,
                 rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False, check_device: bool = True, check_dtype: bool = True,
                 check_layout: bool = True, check_stride: bool = False,
                 msg: str | Callable[[str], str] | None = None) -> None:
    """Raise an ``AssertionError`` unless ``actual`` and ``expected`` are close, as
    ``torch.testing.assert_close`` (see the module's docstring for the rules).

    Parameters
    ----------
    actual, expected : Tensor, ndarray, number, or a sequence or mapping of them
    allow_subclasses : bool, default True
        Whether a ``Parameter`` compares with a ``Tensor`` (False: their types must match).
    rtol, atol : float, optional
        Relative and absolute tolerance; give both or neither (then PyTorch's per dtype).
    equal_nan : bool, default False
        Whether NaN equals NaN.
    check_device, check_layout : bool, default True
        Always pass: tinyattn has one device (the CPU) and one layout (strided).
    check_dtype : bool, default True
        Whether the dtypes (the types, for numbers) must be equal.
    check_stride : bool, default False
        Whether the strides must be equal.
    msg : str or callable, optional
        The message of the error instead of the default one; a callable gets the default one
        and returns the message.

    Examples
    --------
    >>> import tinyattn as ta
    >>> assert_close(ta.tensor([1.0, 2.0]), ta.tensor([1.0, 2.0 + 1e-7]))
    >>> assert_close(ta.tensor([1.0, 2.0]), ta.tensor([1.0, 2.5]))
    Traceback (most recent call last):
    ...
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 1 / 2 (50.0%)
    Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)
    Greatest relative difference: 0.20000000298023224 at index (1,) (up to 1.3e-06 allowed)
    """
    if (rtol is None) != (atol is None):
        missing = "atol" if atol is None else "rtol"
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"no {missing}.")
    for label, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and (isinstance(value, bool) or not _is_number(value)
                                  or not value >= 0):
            raise ValueError(f"assert_close: {label} must be a number >= 0, got {value!r}")
    for label, value in (("allow_subclasses", allow_subclasses), ("equal_nan", equal_nan),
                         ("check_device", check_device), ("check_dtype", check_dtype),
                         ("check_layout", check_layout), ("check_stride", check_stride)):
        if not isinstance(value, bool):
            raise TypeError(f"assert_close: {label} must be a bool, got {value!r}")
    if not allow_subclasses and type(actual) is not type(expected):
        raise TypeError(f"assert_close: inputs of types {type(actual).__name__} and "
                        f"{type(expected).__name__} (allow_subclasses=False)")
    try:
        _compare(actual, expected, rtol, atol, equal_nan, check_dtype, check_stride)
    except _Mismatch as mismatch:
        text = mismatch.text
        if mismatch.path:
            text += f"\n\nThe failure occurred for item {mismatch.path}"
        if msg is not None:
            text = msg(text) if callable(msg) else msg
        raise AssertionError(text) from None
