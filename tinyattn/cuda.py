"""``ta.cuda``: tinyattn runs on the CPU only, and answers as PyTorch does on a machine without
CUDA.

``is_available()`` and ``is_bf16_supported()`` are False and ``device_count()`` is 0 (so code
that picks ``'cuda' if torch.cuda.is_available() else 'cpu'`` runs on the CPU); seeding
(``manual_seed``, ``manual_seed_all``, ``seed``) and ``empty_cache`` do nothing, and the memory
counters are 0, as in PyTorch without CUDA; ``synchronize``, ``current_device`` and
``get_device_name`` need a device and are an error, as in PyTorch. ``torch.cuda.amp`` holds the
deprecated ``GradScaler`` and ``autocast`` (see :mod:`tinyattn.amp`); any other name is a clear
error naming the caller's line.
"""

from __future__ import annotations

from typing import Any

from . import amp as _amp
from . import notices as _notices
from .missing import missing as _missing
from .missing import namespace_module as _namespace_module

_NO_CUDA = "tinyattn runs on the CPU only (torch.cuda.is_available() is False)"


def is_available() -> bool:
    """Always False: tinyattn has no GPU backend."""
    return False


def device_count() -> int:
    """Always 0."""
    return 0


def is_initialized() -> bool:
    """Always False: CUDA is never initialized."""
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Always False: there is no CUDA device (and tinyattn has no bfloat16 storage)."""
    return False


def manual_seed(seed: int) -> None:
    """Nothing to seed: PyTorch ignores this call without CUDA too (use ``ta.manual_seed``)."""


def manual_seed_all(seed: int) -> None:
    """Nothing to seed: PyTorch ignores this call without CUDA too (use ``ta.manual_seed``)."""


def seed() -> None:
    """Nothing to seed: PyTorch ignores this call without CUDA too."""


def seed_all() -> None:
    """Nothing to seed: PyTorch ignores this call without CUDA too."""


def empty_cache() -> None:
    """Nothing to free: there is no CUDA cache (a no-op in PyTorch without CUDA too)."""


def memory_allocated(device: Any = None) -> int:
    """0: no CUDA memory is ever allocated."""
    return 0


def max_memory_allocated(device: Any = None) -> int:
    """0: no CUDA memory is ever allocated."""
    return 0


def _needs_device(name: str) -> RuntimeError:
    return RuntimeError(f"torch.cuda.{name}() needs a CUDA device: {_NO_CUDA}")


def synchronize(device: Any = None) -> None:
    """An error, as in PyTorch without CUDA: there is no device to wait for."""
    raise _needs_device("synchronize")


def current_device() -> int:
    """An error, as in PyTorch without CUDA."""
    raise _needs_device("current_device")


def get_device_name(device: Any = None) -> str:
    """An error, as in PyTorch without CUDA."""
    raise _needs_device("get_device_name")


def _grad_scaler(init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> _amp.GradScaler:
    """``torch.cuda.amp.GradScaler(...)``: deprecated in PyTorch for
    ``torch.amp.GradScaler('cuda', ...)``, which it is; without CUDA an enabled scaler warns and
    disables itself."""
    _notices.warn("torch.cuda.amp.GradScaler(args...) is deprecated; use "
                  "torch.amp.GradScaler('cuda', args...) instead", FutureWarning)
    return _amp.GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                           enabled)


def _autocast(enabled: bool = True, dtype: Any = None,
              cache_enabled: bool = True) -> _amp.autocast:
    """``torch.cuda.amp.autocast(...)``: deprecated in PyTorch for
    ``torch.amp.autocast('cuda', ...)``, which it is (disabled with a warning: no CUDA)."""
    _notices.warn("torch.cuda.amp.autocast(args...) is deprecated; use "
                  "torch.amp.autocast('cuda', args...) instead", FutureWarning)
    return _amp.autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


amp = _namespace_module(__name__ + ".amp", "torch.cuda.amp",
                       "``torch.cuda.amp``: the deprecated GradScaler and autocast.", _NO_CUDA,
                       GradScaler=_grad_scaler, autocast=_autocast)


def __getattr__(name: str) -> object:
    """A ``torch.cuda`` name tinyattn does not have: say so, naming the caller's line."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(f"torch.cuda.{name}", _NO_CUDA)
