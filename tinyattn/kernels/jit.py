"""``@jit``: how tinyattn compiles a kernel, ``numba.njit(cache=True)`` whose cached machine
code loads without numba's compiler.

numba keeps every compiled kernel in its on-disk cache. Before it loads one, numba
"refreshes" its compiler: it imports all the implementations it has (its numpy, math, list,
dict, random ... support) and registers them with its typing and lowering contexts, since a
compilation may need any of them. Loading machine code needs none of that, only numba's
runtime (NRT, the reference counting of arrays). On a warm cache the refresh was the largest
part of what the first training step adds to the process: 0.1 s, and 26 MB resident. A kernel
that does compile still gets the refresh, from numba's compile path itself.

A dispatcher made by :func:`jit` loads its cached code after starting the runtime only. The
runtime has a small library of its own, compiled from LLVM IR when it starts (atomic reference
counts, ``NRT_incref`` / ``NRT_decref``): :func:`start_runtime` compiles it once and saves its
machine code (:mod:`.machine_cache`), and later processes load that as numba loads a cached
kernel. Compiling it ran LLVM's optimiser and code generator in every process, and mapped in
about 28 MB of LLVM's library that nothing else in a warm process touches.

On a miss the dispatcher claims the function until its code is saved, so that two processes
sharing the cache never compile it at once (:mod:`.cache_claims`). With a numba that lacks the
methods this relies on, :func:`jit` keeps numba's own loading.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import binding as ll
from numba import njit
from numba.core import config, event
from numba.core.caching import FunctionCache
from numba.core.codegen import CPUCodegen, CPUCodeLibrary
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import CPUDispatcher
from numba.core.runtime import _nrt_python, nrtdynmod, rtsys

from . import cache_claims, machine_cache

_RUNTIME_LIBRARY = "nrt"  # the library's name in numba (``nrtdynmod.create_nrt_module``)


@global_compiler_lock
def start_runtime(target_context: Any) -> None:
    """``rtsys.initialize(target_context)``, its library loaded from machine code saved by an
    earlier process when there is one (compiled and saved otherwise).

    What numba's ``initialize`` does, in its order: statistics on if ``NUMBA_NRT_STATS`` asks,
    the runtime's C functions made known to LLVM's linker under their ``NRT_`` names, then the
    library of atomics and reference counts, which calls them.
    """
    if rtsys._init:
        return
    if config.NRT_STATS:
        _nrt_python.memsys_enable_stats()
    for name, address in _nrt_python.c_helpers.items():
        ll.add_symbol(name if name.startswith("_") else "NRT_" + name, address)
    codegen = target_context.codegen()
    target = codegen.magic_tuple()
    saved = machine_cache.read("runtime", target)
    if saved is not None:
        length = int.from_bytes(saved[:8], "little")
        object_code, bitcode = saved[8:8 + length], saved[8 + length:]
        library = codegen.unserialize_library((_RUNTIME_LIBRARY, "object",
                                               (object_code, bitcode)))
    else:
        module, library = nrtdynmod.create_nrt_module(target_context)
        library.enable_object_caching()  # keep the machine code, to save it
        library.add_ir_module(module)
        library.finalize()
        _, _, (object_code, bitcode) = library.serialize_using_object_code()
        machine_cache.write("runtime", target,
                            len(object_code).to_bytes(8, "little") + object_code + bitcode)
    rtsys._library = library
    rtsys._init = True


class _LoadingCache(FunctionCache):
    """numba's on-disk cache of one function, loading without a refresh of the compiler, and
    claiming the function on a miss until its compiled code is saved (:mod:`.cache_claims`)."""

    def claim_path(self) -> str:
        """The lock file of this function's claim, beside its index."""
        return self._cache_file._index_path + ".lock"

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        start_runtime(target_context)  # what cached code needs of the refresh
        with self._guard_against_spurious_io_errors():
            loaded = self._load_overload(sig, target_context)
            # only an outermost compilation may be put off: a function called by one under
            # way is waited for, or the caller's work so far would be lost
            outermost = _Compilations.under_way == 0
            if loaded is None and self._enabled and self._claim(may_put_off=outermost):
                # Claimed, after waiting for any other process compiling this function: it may
                # have saved the code meanwhile.
                loaded = self._load_overload(sig, target_context)
                if loaded is not None:
                    cache_claims.release(self.claim_path())
            return loaded

    def save_overload(self, sig: Any, data: Any) -> None:
        self._claim()  # held since the miss; else taken for the save alone
        try:
            super().save_overload(sig, data)
        finally:
            cache_claims.release(self.claim_path())

    def _claim(self, may_put_off: bool = False) -> bool:
        try:
            self._impl.locator.ensure_cache_path()
        except OSError:
            return False
        return cache_claims.claim(self.claim_path(), may_put_off=may_put_off)


class _Compilations(event.Listener):
    """Follows numba's compilations: how many are under way (numba compiles one at a time,
    a function's callees inside it), and the claim of one that raises, released (it saves
    nothing)."""

    under_way = 0

    def on_start(self, ev: event.Event) -> None:
        _Compilations.under_way += 1

    def on_end(self, ev: event.Event) -> None:
        _Compilations.under_way = max(0, _Compilations.under_way - 1)
        # The exception it carries; not ``ev.is_failed``, which numba 0.68 answers inverted.
        failed = getattr(ev, "_exc_details", None) is not None
        cache = getattr(ev.data["dispatcher"], "_cache", None)
        if failed and isinstance(cache, _LoadingCache):
            cache_claims.release(cache.claim_path())


event.register("numba:compile", _Compilations())

_LEAN_LOADING = (
    all(hasattr(FunctionCache, name) for name in ("_load_overload",
                                                  "_guard_against_spurious_io_errors"))
    and hasattr(rtsys, "_init")
    and all(hasattr(CPUCodeLibrary, name) for name in ("enable_object_caching",
                                                       "serialize_using_object_code"))
    and all(hasattr(CPUCodegen, name) for name in ("magic_tuple", "unserialize_library"))
    and hasattr(nrtdynmod, "create_nrt_module")
    and all(hasattr(_nrt_python, name) for name in ("c_helpers", "memsys_enable_stats"))
    and hasattr(FunctionCache, "save_overload")
)
"""Whether this numba has what :class:`_LoadingCache` and :func:`start_runtime` call (numba's
private API)."""


def jit(function: Callable | None = None, /, **options: Any) -> Any:
    """``numba.njit(cache=True, **options)``, loading from the cache without numba's compiler.

    Use as ``@jit`` or ``@jit(inline="always")``.
    """
    compile_lazily = njit(cache=True, **options)

    def decorate(body: Callable) -> Any:
        dispatcher = compile_lazily(body)
        if _LEAN_LOADING and isinstance(dispatcher, CPUDispatcher) and \
                type(dispatcher._cache) is FunctionCache and \
                hasattr(dispatcher._cache, "_enabled") and \
                hasattr(getattr(dispatcher._cache, "_cache_file", None), "_index_path"):
            dispatcher._cache.__class__ = _LoadingCache
        return dispatcher

    return decorate if function is None else decorate(function)
