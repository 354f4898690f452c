"""``@compiled_only``: :func:`~tinyattn.kernels.jit.jit` for a function that only compiled
code calls.

With the machine code of each jitted function, numba builds two entry points for callers
outside compiled code: a CPython wrapper, which unboxes the Python arguments and boxes the
result, and a C-callable wrapper for first-class function values. A helper that only other
kernels call, or a task function that :func:`~tinyattn.kernels.parallel.run_tasks` calls by
address, uses neither. Built, they cost compile time on the first run: about 0.03 s per
function, 1.6 s of CPU of the first training step on an empty numba cache.

Such a function cannot run from Python: calling it raises a ``TypeError`` that says so (numba
itself would jump to the missing wrapper and crash the process). Call it from a jitted
function. With ``NUMBA_DISABLE_JIT=1`` it is the plain Python function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba.core.registry import CPUDispatcher

from .jit import jit


class CompiledOnlyDispatcher(CPUDispatcher):
    """numba's dispatcher of a function compiled without its Python entry point: jitted code
    calls it as usual, a call from Python raises instead of crashing."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self.py_func.__module__}.{self.py_func.__qualname__} is compiled "
                        "without a Python entry point (@compiled_only): call it from a jitted "
                        "function")


def compiled_only(function: Callable | None = None, /, **options: Any) -> Any:
    """``jit(**options)`` without the Python and C entry points.

    Use as ``@compiled_only`` or ``@compiled_only(fastmath={"reassoc"})``.
    """
    compile_lazily = jit(no_cpython_wrapper=True, no_cfunc_wrapper=True, **options)

    def decorate(body: Callable) -> Any:
        dispatcher = compile_lazily(body)
        if isinstance(dispatcher, CPUDispatcher):  # not the function itself (DISABLE_JIT)
            dispatcher.__class__ = CompiledOnlyDispatcher
        return dispatcher

    return decorate if function is None else decorate(function)
