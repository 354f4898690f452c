"""One process at a time compiles a function into numba's on-disk cache: claims across processes.

numba keeps one index file per jitted function, mapping each signature to a numbered data file
of machine code. To save, it reads the index, takes the first free number, and writes the index
and the data back. Two processes compiling the same function at once (two commands started
together on an empty cache, or a command and its compile-ahead helper, :mod:`.compile_ahead`)
could both take the same number: the index would then send one signature to the other's
machine code. They would also do the same work twice.

A *claim* is an exclusive ``flock`` on a file beside the function's index (``<index>.lock``),
held from a cache miss until the compiled code is saved (:class:`~.jit._LoadingCache`). A
process that misses while another holds the claim waits for it, then looks in the cache again
and usually loads what the other saved. The save itself always holds the claim.

No deadlock: a process compiles one function at a time (numba's compiler lock), holding its
claim while the functions it calls compile, and calls do not form cycles. A claim not had
within :data:`WAIT_SECONDS` is given up (the process compiles unclaimed, as numba alone would),
and the operating system drops the claims of a process that exits. Where ``flock`` or the file
cannot be had (another OS, a read-only cache directory) nothing is claimed.

A process with other work to do need not wait: within :func:`putting_off`, the miss of an
outermost compilation (not of a function that one calls, :mod:`.jit`) on a function another
process holds raises :class:`Busy` instead, and the compilation fails. The compile-ahead helper
does this, to compile another family meanwhile and come back later.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

try:
    import fcntl
except ImportError:  # not POSIX: no claims
    fcntl = None

#: The longest a process waits for another's claim before compiling unclaimed.
WAIT_SECONDS = 120.0
_POLL_SECONDS = 0.005

_held: dict[str, int] = {}  # lock file → its open descriptor, for the claims of this process


class Busy(Exception):
    """Another process holds the claim of a function this one missed, within
    :func:`putting_off`."""


class PutOff:
    """What :func:`putting_off` yields: ``busy`` tells whether a claim was found held (numba
    may pass :class:`Busy` on inside an error of its own)."""

    def __init__(self) -> None:
        self.busy = False


_putting_off: list[PutOff] = []


@contextlib.contextmanager
def putting_off(enabled: bool = True) -> Iterator[PutOff]:
    """Within (when ``enabled``): a claim that :func:`claim` is asked for with
    ``may_put_off=True`` and another process holds raises :class:`Busy` at once."""
    record = PutOff()
    if not enabled:
        yield record
        return
    _putting_off.append(record)
    try:
        yield record
    finally:
        _putting_off.pop()


def available() -> bool:
    """Whether claims work here (``flock`` exists)."""
    return fcntl is not None


def claim(path: str, wait: float = WAIT_SECONDS, may_put_off: bool = False) -> bool:
    """Hold the claim ``path`` (a lock file, created if missing), waiting up to ``wait`` seconds
    while another process holds it. True when held, now or already by this process.

    With ``may_put_off``, within :func:`putting_off`, a claim another process holds raises
    :class:`Busy` instead of being waited for.
    """
    if path in _held:
        return True
    if fcntl is None:
        return False
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return False
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if may_put_off and _putting_off:
                os.close(descriptor)
                _putting_off[-1].busy = True
                raise Busy(path) from None
            if time.monotonic() >= deadline:
                os.close(descriptor)
                return False
            time.sleep(_POLL_SECONDS)
            continue
        except OSError:
            os.close(descriptor)
            return False
        _held[path] = descriptor
        return True


def release(path: str) -> None:
    """Give up the claim ``path`` if this process holds it."""
    descriptor = _held.pop(path, None)
    if descriptor is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(descriptor, fcntl.LOCK_UN)
        os.close(descriptor)


def held() -> list[str]:
    """The claims this process holds."""
    return list(_held)
