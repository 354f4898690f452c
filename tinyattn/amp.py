"""``torch.amp`` on a CPU-only machine: ``autocast`` and ``GradScaler``.

tinyattn has no mixed precision: ``autocast`` is a context manager (and decorator) under which
every op computes in its tensors' own dtypes. Where PyTorch would autocast —
``device_type="cpu"`` with ``enabled=True`` and dtype bfloat16 (the default) or float16 — tinyattn
computes in float32 and says so once on stderr; where PyTorch disables autocast with a warning
(a CUDA/MPS/XPU device type on a machine without one, an unsupported CPU dtype), so does
tinyattn.

``GradScaler`` does what PyTorch's does on a machine without CUDA: a ``"cuda"`` scaler that is
enabled warns and disables itself, and a disabled scaler passes everything through —
``scale(loss)`` returns ``loss``, ``step(optimizer)`` calls ``optimizer.step()``, ``update()``
and ``unscale_()`` do nothing, ``get_scale()`` is 1.0 and ``state_dict()`` is empty. A ``"cpu"``
scaler is a real one, as in PyTorch: it multiplies the loss by the scale, divides the gradients
by it, skips the steps whose gradients hold an inf or NaN and adapts the scale.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from . import dtypes, notices
from .tensor import Tensor

__all__ = ["GradScaler", "autocast"]

ACCELERATORS = {"cuda": "CUDA", "mps": "MPS", "xpu": "XPU", "hpu": "HPU", "xla": "XLA",
                "mtia": "MTIA", "ipu": "IPU", "hip": "HIP", "maia": "MAIA"}
"""Device types PyTorch knows that tinyattn (on the CPU) has none of, with their names."""


def _device_type(op: str, device_type: Any) -> str:
    if not isinstance(device_type, str):
        raise TypeError(f"{op}: device_type must be a string such as 'cpu' or 'cuda', got "
                        f"{device_type!r}")
    kind = device_type.split(":")[0]
    if kind != "cpu" and kind not in ACCELERATORS:
        raise RuntimeError(f"{op}: unknown device type {device_type!r} (expected 'cpu' or one "
                           f"of {sorted(ACCELERATORS)})")
    return kind


def _dtype_name(dtype: Any) -> str:
    return getattr(dtype, "name", str(dtype))


class autocast:  # noqa: N801  (PyTorch's name)
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a context
    manager and decorator under which tinyattn computes in the tensors' own dtypes.

    Parameters
    ----------
    device_type : str
        ``'cpu'``, or an accelerator type (``'cuda'``, ``'mps'``, …), which tinyattn does not
        have: autocast is then disabled with a warning, as PyTorch does without that device.
    dtype : dtype, optional
        The dtype PyTorch would autocast to (``'cpu'``: bfloat16 by default, or float16; any
        other dtype disables autocast with a warning, as in PyTorch).
    enabled : bool, default True
    cache_enabled : bool or None
        PyTorch's cache of casted weights; there are no casts here to cache.

    Examples
    --------
    >>> import tinyattn as ta
    >>> with ta.autocast(device_type="cpu", enabled=False):
    ...     y = ta.ones(2, 2) @ ta.ones(2, 2)
    >>> y.dtype
    dtype('float32')
    """

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        self.device = _device_type("autocast", device_type)
        if not isinstance(enabled, (bool, np.bool_)):
            raise TypeError(f"autocast: enabled must be a bool, got {enabled!r}")
        if cache_enabled is not None and not isinstance(cache_enabled, (bool, np.bool_)):
            raise TypeError(f"autocast: cache_enabled must be a bool or None, got "
                            f"{cache_enabled!r}")
        if dtype is not None and not isinstance(dtype, dtypes.NoStorageDtype):
            dtype = dtypes.as_dtype(dtype, "autocast")
        self.fast_dtype = dtype
        self.enabled = bool(enabled)
        if not self.enabled:
            return
        if self.device != "cpu":
            notices.warn(f"{ACCELERATORS[self.device]} is not available (tinyattn runs on the "
                         "CPU only). Disabling autocast.", UserWarning)
            self.enabled = False
            return
        if self.fast_dtype is None:
            self.fast_dtype = dtypes.bfloat16
        if self.fast_dtype not in (dtypes.bfloat16, dtypes.float16):
            notices.warn("In CPU autocast, but the target dtype is not supported. Disabling "
                         "autocast. CPU autocast only supports bfloat16 and float16.",
                         UserWarning)
            self.enabled = False

    def __enter__(self) -> autocast:
        if self.enabled:
            notices.say_once(
                "autocast", f"torch.autocast(device_type='cpu', "
                f"dtype={_dtype_name(self.fast_dtype)}) computes in the tensors' own dtypes "
                "(float32): tinyattn has no mixed precision")
        return self

    def __exit__(self, *exc_info: Any) -> bool:
        return False

    def __call__(self, func: Callable) -> Callable:
        """Use as a decorator: every call of ``func`` runs under this autocast."""

        @functools.wraps(func)
        def autocasted(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return autocasted


_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """``torch.amp.GradScaler(device='cuda', init_scale=2.0**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)``, as on a machine without CUDA.

    An enabled scaler for an accelerator warns and disables itself (tinyattn has none); a
    disabled one passes everything through; a ``'cpu'`` scaler scales for real (see the
    module's docstring).

    Examples
    --------
    >>> import warnings, tinyattn as ta
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     scaler = ta.amp.GradScaler("cuda", enabled=True)
    >>> scaler.is_enabled(), scaler.get_scale(), scaler.state_dict()
    (False, 1.0, {})
    >>> loss = ta.tensor(2.0, requires_grad=True)
    >>> scaler.scale(loss) is loss
    True
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = _device_type("GradScaler", device)
        if not isinstance(enabled, (bool, np.bool_)):
            raise TypeError(f"GradScaler: enabled must be a bool, got {enabled!r}")
        for label, value in (("init_scale", init_scale), ("growth_factor", growth_factor),
                             ("backoff_factor", backoff_factor)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or value <= 0:
                raise ValueError(f"GradScaler: {label} must be a positive number, got {value!r}")
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1.0, got {growth_factor}")
        if backoff_factor >= 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be < 1.0, got {backoff_factor}")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) or \
                growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got "
                             f"{growth_interval!r}")
        self._enabled = bool(enabled)
        if self._enabled and self._device != "cpu":
            notices.warn(f"GradScaler is enabled, but {ACCELERATORS[self._device]} is not "
                         "available (tinyattn runs on the CPU only). Disabling.", UserWarning)
            self._enabled = False
        self._scale = float(np.float32(init_scale))
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    # ---- the training step --------------------------------------------------------------
    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or a list/tuple/iterable of tensors) times the scale; the
        outputs themselves when disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(output) for output in outputs)
        if isinstance(outputs, Iterable):
            return map(self.scale, outputs)
        raise TypeError(f"GradScaler.scale: outputs must be a Tensor or an iterable of Tensors, "
                        f"got {type(outputs).__name__}")

    def _state(self, optimizer: Any) -> dict[str, Any]:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY,
                                                               "found_inf": None})

    def unscale_(self, optimizer: Any) -> None:
        """Divide the gradients of ``optimizer``'s parameters by the scale, in place, and note
        whether any holds an inf or NaN (nothing when disabled)."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("GradScaler.unscale_: already called on this optimizer since the "
                               "last update()")
        if state["stage"] == _STEPPED:
            raise RuntimeError("GradScaler.unscale_: called after step(); call update() first")
        inverse = 1.0 / self._scale
        found_inf = None
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad = param.grad.numpy()
                if grad.dtype == dtypes.float16:
                    raise ValueError("GradScaler.unscale_: attempting to unscale float16 "
                                     "gradients")
                grad *= grad.dtype.type(inverse)
                found_inf = bool(found_inf) or not bool(np.isfinite(grad).all())
        state["found_inf"] = found_inf
        state["stage"] = _UNSCALED

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step(*args, **kwargs)``, after ``unscale_`` if it was not called; skipped
        when a gradient holds an inf or NaN. Disabled: just ``optimizer.step(...)``."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("GradScaler.step: a closure is not supported while the scaler "
                               "is enabled (as in PyTorch)")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("GradScaler.step: already called since the last update()")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        if state["found_inf"] is None:
            raise RuntimeError("GradScaler.step: no inf checks were recorded for this optimizer "
                               "(none of its parameters has a gradient)")
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adapt the scale: times ``backoff_factor`` after a step with an inf or NaN, times
        ``growth_factor`` after ``growth_interval`` clean steps in a row; or set it to
        ``new_scale``. Nothing when disabled."""
        if not self._enabled:
            return
        if new_scale is not None:
            value = new_scale.item() if isinstance(new_scale, Tensor) else new_scale
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"GradScaler.update: new_scale must be a number or a "
                                f"one-element tensor, got {new_scale!r}")
            self._scale = float(np.float32(value))
        else:
            found = [state["found_inf"] for state in self._per_optimizer.values()
                     if state["found_inf"] is not None]
            if not found:
                raise RuntimeError("GradScaler.update: no inf checks were recorded before "
                                   "update() (call step() first)")
            if any(found):
                self._scale = float(np.float32(self._scale * self._backoff_factor))
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale = float(np.float32(self._scale * self._growth_factor))
                    self._growth_tracker = 0
        self._per_optimizer.clear()

    # ---- settings and state -------------------------------------------------------------
    def is_enabled(self) -> bool:
        """Whether the scaler scales (False for a disabled or an accelerator scaler)."""
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        """The factor the scale grows by."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the factor the scale grows by."""
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        """The factor the scale shrinks by after an inf or NaN."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the factor the scale shrinks by."""
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        """Clean steps in a row before the scale grows."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Set the clean steps in a row before the scale grows."""
        self._growth_interval = int(new_interval)

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's keys (``scale``, ``growth_factor``, ``backoff_factor``,
        ``growth_interval``, ``_growth_tracker``); empty when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (nothing happens when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("GradScaler.load_state_dict: the state dict is empty, possibly "
                               "because it was saved from a disabled GradScaler")
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                   "_growth_tracker"} - set(state_dict)
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: missing keys {sorted(missing)}")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
