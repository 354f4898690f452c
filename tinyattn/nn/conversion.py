"""Converting a module's tensors: ``Module.to`` and its shorthands, and the device and dtype
arguments of layers.

tinyattn runs on the CPU in float32 or float64: ``to`` accepts PyTorch's forms of a device
and a dtype, converts floating-point parameters, their gradients and buffers in place, and
refuses other devices and dtypes with an error naming the layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..dtypes import NoStorageDtype, get_default_dtype
from ..tensor import Tensor, float32, float64

if TYPE_CHECKING:
    from .module import Module


def check_device(owner: str, device: Any) -> None:
    """Accept ``None``, ``"cpu"`` (``"cpu:0"``) or a device object of type cpu; refuse others.

    Examples
    --------
    >>> check_device("Linear", "cpu")
    >>> check_device("Linear", "cuda")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Linear: tinyattn runs on the CPU only; device 'cuda' is not available ...
    """
    if device is None:
        return
    kind = device if isinstance(device, str) else getattr(device, "type", None)
    if isinstance(kind, str) and kind.split(":")[0] == "cpu":
        return
    raise ValueError(f"{owner}: tinyattn runs on the CPU only; device {device!r} is not "
                     "available (use 'cpu' or leave the device unset)")


def float_dtype(owner: str, dtype: Any) -> np.dtype:
    """``dtype`` as float32 or float64 (None gives the default dtype, float32), or a TypeError
    naming ``owner``. Layers compute with the kernels, which take float32 and float64 only, so
    float16 is refused here, and bfloat16 (which tinyattn has no storage for).

    Examples
    --------
    >>> float_dtype("Linear", None), float_dtype("Linear", "float64")
    (dtype('float32'), dtype('float64'))
    """
    if dtype is None:
        dtype = get_default_dtype()
    if isinstance(dtype, NoStorageDtype):
        raise dtype.error(owner)
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{owner}: expected a dtype such as ta.float32 or ta.float64, got "
                        f"{dtype!r}") from None
    if target.kind != "f":
        raise TypeError(f"{owner}: expected a float dtype, got {target}")
    if target not in (float32, float64):
        raise TypeError(f"{owner}: tinyattn computes in float32 and float64 only, got {target} "
                        "(its layers run on kernels of those dtypes)")
    return target


class ConversionMixin:
    """``Module``'s dtype and device conversions (``to``, ``double``, ``float``, …)."""

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Convert floating-point parameters, their gradients and floating-point buffers to a
        dtype, in place; return ``self``.

        Accepts PyTorch's forms ``to(dtype)``, ``to(device)``, ``to(device, dtype)``,
        ``to(tensor)`` (its dtype) and the keywords ``device``, ``dtype``, ``non_blocking``.
        The only device is the CPU; integer and boolean tensors keep their dtype.

        Examples
        --------
        >>> import tinyattn as ta
        >>> layer = ta.nn.Linear(2, 3).to("cpu", ta.float64)
        >>> layer.weight.dtype
        dtype('float64')
        """
        device, dtype = _parse_to_arguments(args, kwargs)
        check_device("Module.to", device)
        if dtype is not None:
            self._convert_floats(float_dtype("Module.to", dtype))
        return self

    def _convert_floats(self, dtype: np.dtype) -> None:
        for module in self.modules():
            for tensor in (*module._parameters.values(), *module._buffers.values()):
                if tensor is None or tensor.dtype.kind != "f" or tensor.dtype == dtype:
                    continue
                tensor.data = tensor.numpy().astype(dtype)
                if tensor.grad is not None:
                    tensor.grad.data = tensor.grad.numpy().astype(dtype)

    def double(self) -> Module:
        """Convert floating-point parameters and buffers to float64."""
        return self.to(float64)

    def float(self) -> Module:
        """Convert floating-point parameters and buffers to float32."""
        return self.to(float32)

    def cpu(self) -> Module:
        """Return ``self``: tinyattn modules always live on the CPU."""
        return self

    def cuda(self, device: Any = None) -> Module:
        """Refuse: tinyattn runs on the CPU only."""
        raise ValueError("Module.cuda: tinyattn runs on the CPU only; there is no CUDA device "
                         "(use .cpu() or leave the module where it is)")

    def half(self) -> Module:
        """Refuse: tinyattn's layers compute in float32 and float64 only (float16 tensors exist
        for elementwise ops; the kernels of matmul, softmax, layer_norm … refuse them)."""
        raise TypeError("Module.half: tinyattn computes in float32 and float64 only, got "
                        "float16 (its layers run on kernels of those dtypes)")

    def bfloat16(self) -> Module:
        """Refuse: tinyattn has no bfloat16 storage."""
        raise TypeError("Module.bfloat16: tinyattn has no bfloat16 storage; its layers compute "
                        "in float32 and float64")


def _parse_to_arguments(args: tuple, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """``(device, dtype)`` from the arguments of ``Module.to``."""
    unknown = set(kwargs) - {"device", "dtype", "non_blocking"}
    if unknown:
        raise TypeError(f"Module.to: unexpected keyword arguments {sorted(unknown)}")
    if len(args) > 3:
        raise TypeError(f"Module.to: expected at most 3 positional arguments, got {len(args)}")
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    for arg in args:
        if isinstance(arg, bool):
            continue  # non_blocking: meaningless on the CPU
        if isinstance(arg, Tensor):
            dtype = arg.dtype
        elif isinstance(arg, str):
            try:
                dtype = np.dtype(arg)
            except TypeError:
                device = arg
        elif hasattr(arg, "type") and not isinstance(arg, (type, np.dtype)):
            device = arg  # a device object
        else:
            dtype = arg
    return device, dtype
