"""Small files of machine code and facts about numba's target, kept beside tinyattn's kernels.

Two things a process would otherwise make with LLVM's code generator every time it starts:
numba's runtime library (the reference counting that compiled code calls, :mod:`.jit`) and the
width of the vectors LLVM keeps whole in a register (:func:`~.cpu.vector_unit`). Kernels
themselves come from numba's on-disk cache, but these two were compiled again in every process,
and running the code generator maps in pages of LLVM's shared library (its optimisation passes
and instruction selection) that loading cached machine code never touches: 16 MB for the probe
and 28 MB for the runtime's library, each measured alone, largely the same pages. So each is
made once, saved here, and read back by every later process.

A file's name holds its purpose and a digest of what its contents depend on: numba's target
(triple, CPU name, feature string, the tuple numba keys its own cache with) and the numba and
llvmlite versions, so another CPU or another numba never reads it. It lives in the directory
numba caches this package's kernels in (``NUMBA_CACHE_DIR`` when set, else ``__pycache__`` beside
the source, else numba's user-wide cache directory). Its first 32 bytes are the SHA-256 of the
rest; a file that is missing, unreadable or does not match is made again. Files are written to
a temporary name and renamed, so two processes starting at once never read half a file.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import uuid
from pathlib import Path

import llvmlite
import numba
from numba.core.caching import FunctionCache

_DIGEST_BYTES = 32


def _anchor() -> None:
    """A function of this module: numba's cache locators find the cache directory from it."""


@functools.cache
def _locator():
    """numba's cache locator for this package (the same choice numba makes for its kernels), or
    None where numba finds no usable directory."""
    try:
        return FunctionCache(_anchor)._impl.locator
    except RuntimeError:
        return None


def directory() -> Path | None:
    """The directory numba caches this package's kernels in, or None where it has none."""
    locator = _locator()
    return None if locator is None else Path(locator.get_cache_path())


def path(name: str, target: tuple[str, ...]) -> Path | None:
    """The file holding ``name`` for numba's ``target`` (triple, CPU name, feature string), or
    None without a cache directory."""
    cache = directory()
    if cache is None:
        return None
    key = repr((name, tuple(target), numba.__version__, llvmlite.__version__))
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache / f"tinyattn-{name}-{digest}.bin"


def read(name: str, target: tuple[str, ...]) -> bytes | None:
    """What :func:`write` saved for ``name`` and ``target``, or None (missing or damaged)."""
    file = path(name, target)
    if file is None:
        return None
    try:
        blob = file.read_bytes()
    except OSError:
        return None
    digest, data = blob[:_DIGEST_BYTES], blob[_DIGEST_BYTES:]
    return data if hashlib.sha256(data).digest() == digest else None


def write(name: str, target: tuple[str, ...], data: bytes) -> None:
    """Save ``data`` for ``name`` and ``target``; an unwritable directory only means that the
    next process makes it again."""
    destination = path(name, target)
    if destination is None:
        return
    temporary = destination.with_name(f"{destination.name}.tmp.{uuid.uuid4().hex[:16]}")
    try:
        _locator().ensure_cache_path()
        with open(temporary, "wb") as file:  # the umask's permissions, as numba's cache files
            file.write(hashlib.sha256(data).digest() + data)
        os.replace(temporary, destination)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
