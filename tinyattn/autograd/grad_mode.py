"""Grad mode and anomaly mode: two per-thread flags, and the context managers that set them.

Grad mode decides whether :meth:`Function.apply <tinyattn.autograd.Function.apply>` records an
op for backward. ``no_grad``, ``enable_grad``, ``set_grad_enabled`` and ``inference_mode`` are
PyTorch's: each works as a context manager and as a decorator, and ``set_grad_enabled(False)``
called as a plain function switches the mode at once.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class _State(threading.local):
    """The two flags, per thread (a new thread starts with grad mode on, anomaly mode off)."""

    grad_enabled = True
    anomaly = False


_state = _State()


def is_grad_enabled() -> bool:
    """Whether operations are recorded for backward in this thread."""
    return _state.grad_enabled


def _set_grad_enabled(mode: bool) -> None:
    _state.grad_enabled = bool(mode)


class _GradModeContext:
    """Base of the grad-mode context managers; an instance is also a decorator."""

    mode = True

    def __enter__(self) -> None:
        self._previous = is_grad_enabled()
        _set_grad_enabled(self.mode)

    def __exit__(self, *exc: object) -> None:
        _set_grad_enabled(self._previous)

    def __call__(self, fn: Callable) -> Callable:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _GradMode(mode):
                return fn(*args, **kwargs)

        return wrapper


class _GradMode(_GradModeContext):
    def __init__(self, mode: bool):
        self.mode = mode


class no_grad(_GradModeContext):  # noqa: N801  (PyTorch's name)
    """Disable graph recording, as a context manager (``with ta.no_grad():``) or decorator.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.ones(2, requires_grad=True)
    >>> with ta.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    mode = False


class enable_grad(_GradModeContext):  # noqa: N801
    """Re-enable graph recording inside a ``no_grad`` region."""

    mode = True


class inference_mode(_GradModeContext):  # noqa: N801
    """``no_grad`` under PyTorch's other name (``inference_mode(False)`` records as usual)."""

    def __init__(self, mode: bool = True):
        self.mode = not mode


class set_grad_enabled(_GradModeContext):  # noqa: N801
    """Set grad mode to ``mode``: at once when called, restored on exit when used with ``with``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> with ta.set_grad_enabled(False):
    ...     ta.is_grad_enabled()
    False
    >>> ta.is_grad_enabled()
    True
    """

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._previous = is_grad_enabled()
        _set_grad_enabled(self.mode)

    def __enter__(self) -> None:
        pass

    def __call__(self, fn: Callable) -> Callable:
        _set_grad_enabled(self._previous)  # as a decorator it only applies inside ``fn``
        return super().__call__(fn)


def is_anomaly_enabled() -> bool:
    """Whether :func:`detect_anomaly` is active in this thread."""
    return _state.anomaly


@contextmanager
def detect_anomaly(check_nan: bool = True) -> Iterator[None]:
    """Check every gradient for NaN/inf during backward and name the op that produced it.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([0.0, 1.0], requires_grad=True)
    >>> with ta.detect_anomaly():
    ...     try:
    ...         x.sqrt().sum().backward()
    ...     except RuntimeError as err:
    ...         print(str(err).split(":")[0])
    detect_anomaly
    """
    previous = is_anomaly_enabled()
    _state.anomaly = bool(check_nan)
    try:
        yield
    finally:
        _state.anomaly = previous
