"""Allocator settings that keep a training step from re-faulting its temporaries every time.

A training step allocates and frees the same large temporaries (activations, gradients) on
every iteration. glibc serves blocks above a dynamic threshold with fresh ``mmap`` calls and
returns freed heap tops to the OS, so each step touches new pages and pays a minor page fault per
4 KiB page: thousands per step for the small GPT of the benchmarks, about 40% of its step time.
Raising the mmap threshold and the trim threshold keeps freed blocks in the heap, where the next
step reuses them (faults per step drop to about zero). Peak memory is unchanged: the pages kept are
the ones the previous step already used. The trim threshold is the largest glibc takes (2 GiB):
with 256 MiB, minGPT's chargpt (gpt-mini, 2.3 GB at its peak) gave back the top of its heap
after each step and faulted 20,000 pages back in during the next, a fifth of its time.

This changes the allocator of the whole process, so it is opt-in: ``import tinyattn`` leaves
the allocator alone. The training entry points turn it on (``tinyattn train`` and ``tinyattn
run``; glibc only): set ``TINYATTN_KEEP_FREED_MEMORY=0`` to keep them from doing so. A script
of your own calls :func:`keep_freed_memory` once, before its training loop.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's maximum on 64-bit systems
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes a C int


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed blocks for reuse; return True when the settings took effect.

    Examples
    --------
    >>> import tinyattn as ta
    >>> isinstance(ta.memory.keep_freed_memory(), bool)
    True
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS, Windows)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def keep_freed_memory_unless_disabled() -> bool:
    """:func:`keep_freed_memory`, unless ``TINYATTN_KEEP_FREED_MEMORY=0`` says not to (what the
    training entry points call)."""
    if os.environ.get("TINYATTN_KEEP_FREED_MEMORY", "1") == "0":
        return False
    return keep_freed_memory()
