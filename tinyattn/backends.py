"""``torch.backends``: the flags training scripts set for CUDA, cuDNN and MPS, and the float32
matmul precision.

On tinyattn they can be read and set, and do nothing: there is no GPU, and float32 matmuls
always compute in float32 (PyTorch's "highest" precision; TF32 and reduced-precision
reductions are GPU features). Their defaults are PyTorch's on a CPU-only machine, where
``torch.backends.mps.is_available()`` and ``torch.backends.cudnn.is_available()`` are False.
A misspelt flag of ``torch.backends.cuda.matmul`` is an error, as in PyTorch.

``import torch.backends.cudnn`` works too: the submodules are registered under
``tinyattn.backends.cuda``, ``.cudnn`` and ``.mps``.
"""

from __future__ import annotations

from typing import Any

from .missing import message as _message
from .missing import missing as _missing
from .missing import namespace_module as _namespace_module
from .missing import user_frame as _user_frame

__all__ = ["cuda", "cudnn", "get_float32_matmul_precision", "mps",
           "set_float32_matmul_precision"]

PRECISIONS = ("highest", "high", "medium")
_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """Record ``precision`` ('highest', 'high' or 'medium'), as
    ``torch.set_float32_matmul_precision``. It changes nothing: tinyattn's float32 matmul
    always computes in float32 ('high' and 'medium' let PyTorch use TF32 or bfloat16 on GPUs).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.set_float32_matmul_precision("high")
    >>> ta.get_float32_matmul_precision()
    'high'
    >>> ta.set_float32_matmul_precision("highest")
    """
    global _precision
    if precision not in PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: {precision!r} is not one of "
                         f"{', '.join(repr(p) for p in PRECISIONS)}")
    _precision = precision


def get_float32_matmul_precision() -> str:
    """The precision last set by :func:`set_float32_matmul_precision` ('highest' at first)."""
    return _precision


class _MatmulFlags:
    """``torch.backends.cuda.matmul``: PyTorch's flags for CUDA matmuls (no effect here); an
    unknown flag is an error, as in PyTorch."""

    __slots__ = ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                 "allow_bf16_reduced_precision_reduction")

    def __init__(self) -> None:
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __getattr__(self, name: str) -> Any:
        raise _missing(f"torch.backends.cuda.matmul.{name}", "its flags are "
                      + ", ".join(self.__slots__))

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self.__slots__:
            raise AttributeError(_message(f"torch.backends.cuda.matmul.{name}", "its flags are "
                                          + ", ".join(self.__slots__), _user_frame(0)))
        object.__setattr__(self, name, value)


def _false() -> bool:
    return False


def _sdp_flag(name: str) -> tuple[Any, Any]:
    state = {"enabled": True}

    def enable(enabled: bool) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"torch.backends.cuda.enable_{name}: expected a bool, got "
                            f"{enabled!r}")
        state["enabled"] = enabled

    def enabled() -> bool:
        return state["enabled"]

    enable.__doc__ = f"Record whether CUDA's {name} attention may be used (no effect here)."
    enabled.__doc__ = f"Whether ``enable_{name}`` last said yes (True at first)."
    return enable, enabled


_NO_GPU = "tinyattn runs on the CPU only; these flags are accepted and do nothing"

enable_flash_sdp, flash_sdp_enabled = _sdp_flag("flash_sdp")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _sdp_flag("mem_efficient_sdp")
enable_math_sdp, math_sdp_enabled = _sdp_flag("math_sdp")

cuda = _namespace_module(
    __name__ + ".cuda", "torch.backends.cuda", "CUDA flags: accepted, no effect.", _NO_GPU,
    is_built=_false, matmul=_MatmulFlags(), enable_flash_sdp=enable_flash_sdp,
    flash_sdp_enabled=flash_sdp_enabled, enable_mem_efficient_sdp=enable_mem_efficient_sdp,
    mem_efficient_sdp_enabled=mem_efficient_sdp_enabled, enable_math_sdp=enable_math_sdp,
    math_sdp_enabled=math_sdp_enabled)
cudnn = _namespace_module(
    __name__ + ".cudnn", "torch.backends.cudnn", "cuDNN flags: accepted, no effect.", _NO_GPU,
    is_available=_false, version=lambda: None, enabled=True, benchmark=False,
    deterministic=False, allow_tf32=True, benchmark_limit=10)
mps = _namespace_module(
    __name__ + ".mps", "torch.backends.mps", "Apple's MPS: not available.", _NO_GPU,
    is_available=_false, is_built=_false)


def __getattr__(name: str) -> object:
    """A ``torch.backends`` name tinyattn does not have: say so, naming the caller's line."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(f"torch.backends.{name}", "it has cuda, cudnn and mps")
