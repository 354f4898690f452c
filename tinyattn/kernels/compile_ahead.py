"""On an empty cache, a second process compiles the rest of each kernel family this one starts.

numba compiles on one thread, so while a first training step waits for its kernels to compile,
the machine's other cores sit idle. When this process first compiles a kernel of a family
(``tinyattn.kernels.<module>``) for a dtype, the moment :mod:`.compile_notice` prints its
line, it asks a helper process to run that family's kernels for that dtype
(:data:`.families.FAMILIES`). The helper starts with the first request and compiles into the
same numba cache: the family's other kernels, typically its backward while this process goes on
with the forward pass. Claims (:mod:`.cache_claims`) make one of the two processes compile each
function while the other waits and loads it, so nothing is compiled twice, and the helper only
compiles families this process has started to compile.

It runs where it can help: two or more cores, a numba cache directory, claims that work
(POSIX), and a process that is not a helper itself; ``TINYATTN_COMPILE_AHEAD=0`` turns it off.
The helper runs at a lower priority, prints nothing and is stopped when this process exits; what
it has saved stays in the cache (numba writes each file whole, under a temporary name first).

The helper runs :func:`main`: it reads ``<family> <dtype>`` lines on its standard input and runs
each family once.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from numba.core import config

from . import cache_claims, machine_cache
from .compile_notice import QUIET_VARIABLE
from .families import FAMILIES

VARIABLE = "TINYATTN_COMPILE_AHEAD"

_requested: set[tuple[str, str]] = set()
_helper: list[subprocess.Popen | None] = []  # empty until the first request; None: no helper


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def enabled() -> bool:
    """Whether this process may start a helper (see the module docstring)."""
    return (os.environ.get(VARIABLE, "") != "0" and cache_claims.available()
            and not config.DISABLE_JIT and _cores() >= 2 and bool(sys.executable)
            and machine_cache.directory() is not None)


def _start() -> subprocess.Popen | None:
    """The helper process, started on the first call when :func:`enabled`."""
    if not _helper:
        helper = None
        if enabled():
            environment = dict(os.environ, **{VARIABLE: "0", QUIET_VARIABLE: "1"})
            if config.CACHE_DIR:
                environment["NUMBA_CACHE_DIR"] = config.CACHE_DIR
            # this tinyattn first on the helper's path: ahead of the working directory, which
            # ``-c`` puts first and which may hold another tinyattn (a checkout, say)
            source_root = str(Path(__file__).resolve().parents[2])
            code = f"import sys; sys.path.insert(0, {source_root!r}); " \
                   f"from {__name__} import main; main()"
            with contextlib.suppress(OSError):
                helper = subprocess.Popen(
                    [sys.executable, "-c", code],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment,
                    text=True)
                atexit.register(_stop, helper, os.getpid())
        _helper.append(helper)
    return _helper[0]


def _stop(helper: subprocess.Popen, owner: int) -> None:
    """Stop the helper at the exit of the process that started it (not of a forked child)."""
    if os.getpid() == owner and helper.poll() is None:
        helper.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            helper.wait(timeout=5)


def request(module: str, dtype: str | None) -> None:
    """Ask the helper to run the family of ``module`` (``tinyattn.kernels.<family>``) for
    ``dtype``, once per family and dtype; nothing when there is no such family or helper."""
    family = module.rsplit(".", 1)[-1]
    if dtype is None or family not in FAMILIES or (family, dtype) in _requested:
        return
    _requested.add((family, dtype))
    helper = _start()
    if helper is not None:
        with contextlib.suppress(OSError):  # a helper that has exited: compile here
            helper.stdin.write(f"{family} {dtype}\n")
            helper.stdin.flush()


def main() -> None:
    """The helper's loop: run each requested family once, in the order asked, at a lower
    priority than the process that asked: once that process runs its kernels on every core,
    the helper's compiling yields to them."""
    with contextlib.suppress(OSError):
        os.nice(10)
    for line in sys.stdin:
        family, dtype = line.split()
        FAMILIES[family](np.dtype(dtype))
