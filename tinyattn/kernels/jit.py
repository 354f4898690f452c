"""``@jit``: how tinyattn compiles a kernel, ``numba.njit(cache=True)`` whose cached machine
code loads without numba's compiler.

numba keeps every compiled kernel in its on-disk cache. Before it loads one, numba
"refreshes" its compiler: it imports all the implementations it has (its numpy, math, list,
dict, random ... support) and registers them with its typing and lowering contexts, since a
compilation may need any of them. Loading machine code needs none of that, only numba's
runtime (NRT, the reference counting of arrays). On a warm cache the refresh was the largest
part of what the first training step adds to the process: 0.1 s, and 26 MB resident. A kernel
that does compile still gets the refresh, from numba's compile path itself.

A dispatcher made by :func:`jit` loads its cached code after starting the runtime only. With a
numba that lacks the methods this relies on, it keeps numba's own loading.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba import njit
from numba.core.caching import FunctionCache
from numba.core.registry import CPUDispatcher
from numba.core.runtime import rtsys


class _LoadingCache(FunctionCache):
    """numba's on-disk cache of one function, loading without a refresh of the compiler."""

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        rtsys.initialize(target_context)  # what cached code needs of the refresh
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)


_LEAN_LOADING = all(hasattr(FunctionCache, name) for name in (
    "_load_overload", "_guard_against_spurious_io_errors")) and hasattr(rtsys, "initialize")
"""Whether this numba has what :class:`_LoadingCache` calls (numba's private API)."""


def jit(function: Callable | None = None, /, **options: Any) -> Any:
    """``numba.njit(cache=True, **options)``, loading from the cache without numba's compiler.

    Use as ``@jit`` or ``@jit(inline="always")``.
    """
    compile_lazily = njit(cache=True, **options)

    def decorate(body: Callable) -> Any:
        dispatcher = compile_lazily(body)
        if _LEAN_LOADING and isinstance(dispatcher, CPUDispatcher) and \
                type(dispatcher._cache) is FunctionCache:
            dispatcher._cache.__class__ = _LoadingCache
        return dispatcher

    return decorate if function is None else decorate(function)
