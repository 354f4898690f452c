"""``torch.compile`` and ``torch.compiler`` on tinyattn: the model runs eagerly.

tinyattn has no graph compiler (its speed comes from the numba kernels every op already runs
on), so ``torch.compile(model)`` returns ``model`` itself, which runs as it is, and says so in
one line on stderr. Its options (``fullgraph``, ``dynamic``, ``backend``, ``mode``,
``options``) choose how PyTorch compiles; they are checked for PyTorch's types and values, and
have nothing to choose here. A checkpoint of a "compiled" model therefore has no
``_orig_mod.`` prefix in its state-dict keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import notices
from .missing import missing as _missing

__all__ = ["compile", "disable", "is_compiling"]

MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""PyTorch's compilation modes."""


def compile(model: Callable | None = None, *, fullgraph: bool = False,  # noqa: A001
            dynamic: bool | None = None, backend: str | Callable | None = None,
            mode: str | None = None, options: dict[str, Any] | None = None,
            name: str | None = None, disable: bool = False) -> Any:
    """``torch.compile``: return ``model`` (a module or a function) unchanged, to run eagerly.

    Called without ``model`` it returns a decorator, as in PyTorch (``@torch.compile`` and
    ``@torch.compile(mode=...)``). The first call in a process (or in a ``tinyattn run``)
    writes one line on stderr; ``disable=True`` returns the model silently, as PyTorch
    returns it uncompiled.

    Examples
    --------
    >>> import tinyattn as ta
    >>> layer = ta.nn.Linear(2, 2)
    >>> ta.compile(layer, disable=True) is layer
    True
    """
    for label, value in (("fullgraph", fullgraph), ("disable", disable)):
        if not isinstance(value, bool):
            raise TypeError(f"compile: {label} must be a bool, got {value!r}")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise TypeError(f"compile: dynamic must be a bool or None, got {dynamic!r}")
    if backend is not None and not isinstance(backend, str) and not callable(backend):
        raise TypeError(f"compile: backend must be a name or a callable, got {backend!r}")
    if mode is not None and options is not None:
        raise RuntimeError("compile: either mode or options can be given, not both (as in "
                           "PyTorch)")
    if mode not in MODES:
        raise RuntimeError(f"compile: unknown mode {mode!r}; PyTorch's modes are "
                           f"{', '.join(repr(m) for m in MODES[1:])}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"compile: options must be a dict, got {type(options).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"compile: name must be a string or None, got {name!r}")
    if model is None:
        def decorate(function: Callable) -> Callable:
            return compile(function, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                           mode=mode, options=options, name=name, disable=disable)

        return decorate
    if not callable(model):
        raise TypeError(f"compile: expected a module or a function, got "
                        f"{type(model).__name__}")
    if not disable:
        what = getattr(model, "__name__", None) or type(model).__name__
        notices.say_once("compile", f"torch.compile({what}) runs it eagerly: tinyattn has no "
                                    "graph compiler (its ops already run on numba kernels)")
    return model


def is_compiling() -> bool:
    """Always False: nothing is ever being compiled (``torch.compiler.is_compiling``)."""
    return False


def disable(fn: Callable | None = None, recursive: bool = True, *,
            reason: str | None = None) -> Any:
    """``torch.compiler.disable``: ``fn`` itself (or a decorator returning it), since nothing is
    compiled."""
    if not isinstance(recursive, bool):
        raise TypeError(f"disable: recursive must be a bool, got {recursive!r}")
    if fn is None:
        return lambda function: function
    return fn


def __getattr__(name: str) -> object:
    """A ``torch.compiler`` name tinyattn does not have: say so, naming the caller's line."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(f"torch.compiler.{name}", "tinyattn runs every model eagerly")
