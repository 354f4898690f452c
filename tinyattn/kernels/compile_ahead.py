"""On an empty cache, a second process compiles the kernel families this one will run next.

numba compiles on one thread, so while a first training step waits for its kernels to compile,
the machine's other cores sit idle. When this process first compiles a kernel of a family
(``tinyattn.kernels.<module>``) for a dtype, the moment :mod:`.compile_notice` prints its
line, it asks a helper process to run that family's kernels for that dtype
(:data:`.families.FAMILIES`). The helper starts with the first request and compiles into the
same numba cache: the family's other kernels, typically its backward while this process goes on
with the forward pass. Claims (:mod:`.cache_claims`) make one of the two processes compile each
function while the other waits and loads it, so nothing is compiled twice.

A model says ahead which families it will run: each layer that always runs a family names it
(``Linear.kernel_families = ("matmul",)``, :class:`~tinyattn.nn.Module`), and so does an
optimizer on the fused Adam kernel. Building them calls :func:`expect`, which starts nothing;
once a helper runs, it compiles the expected families first, in the order the layers were built
(mostly the order of the forward pass), then the rest of those this process started (their
backward, needed after the whole forward pass). So while this process compiles the kernel it
needs now, the helper compiles one it will need next, and this process finds it in the cache
when it gets there. The helper does not wait on a kernel this process is compiling while it has
other families to compile: it puts that family off (:func:`.cache_claims.putting_off`) and comes
back to it when nothing else is left.

It runs where it can help: two or more cores, a numba cache directory, claims that work
(POSIX), and a process that is not a helper itself; ``TINYATTN_COMPILE_AHEAD=0`` turns it off.
The helper runs at a lower priority, prints nothing and is stopped when this process exits; what
it has saved stays in the cache (numba writes each file whole, under a temporary name first). A
process whose kernels are all in the cache compiles nothing, so it starts no helper, whatever it
expects.

The helper runs :func:`main`: it reads ``<family> <dtype> expected|started`` lines on its
standard input and runs each family once (:class:`Work`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from numba.core import config

from . import FLOAT_DTYPES, cache_claims, machine_cache
from .compile_notice import QUIET_VARIABLE
from .families import FAMILIES

VARIABLE = "TINYATTN_COMPILE_AHEAD"

_requested: set[tuple[str, str]] = set()  # (family, dtype) this process started to compile
_expected: list[tuple[str, str]] = []  # expected and not yet told to the helper
_noted: set[tuple[str, str]] = set()  # every (family, dtype) expected so far
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
            # the helper imports this tinyattn, not one in its working directory (a checkout,
            # say, which ``-c`` puts first on its path): its package made a bare module whose
            # path is this one's, without the framework its __init__ imports and the kernels do
            # not use (0.35 s to the helper's first compile instead of 0.85 s)
            package = Path(__file__).resolve().parents[1]
            code = f"import sys, types; package = types.ModuleType({package.name!r}); " \
                   f"package.__path__ = [{str(package)!r}]; " \
                   f"sys.modules[{package.name!r}] = package; " \
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


def _tell(helper: subprocess.Popen, family: str, dtype: str, kind: str) -> None:
    with contextlib.suppress(OSError):  # a helper that has exited: this process compiles
        helper.stdin.write(f"{family} {dtype} {kind}\n")
        helper.stdin.flush()


def request(module: str, dtype: str | None) -> None:
    """Ask the helper to run the family of ``module`` (``tinyattn.kernels.<family>``) for
    ``dtype``, once per family and dtype; nothing when there is no such family or helper. The
    first request starts the helper and tells it what this process expects."""
    family = module.rsplit(".", 1)[-1]
    if dtype is None or family not in FAMILIES or (family, dtype) in _requested:
        return
    _requested.add((family, dtype))
    helper = _start()
    if helper is not None:
        _tell(helper, family, dtype, "started")
        _tell_expected(helper)


def expect(families: Iterable[str], dtype: Any) -> None:
    """Note that this process will run the kernel ``families`` for ``dtype`` (a layer or an
    optimizer was built): a helper, once one runs, compiles them first, in the order expected.
    Starts no helper; cheap enough to call for every layer built. Other dtypes than the
    kernels' (float32, float64) are ignored."""
    dtype = np.dtype(dtype)
    if dtype not in FLOAT_DTYPES:
        return
    for family in families:
        if (family, dtype.name) not in _noted and family in FAMILIES:
            _noted.add((family, dtype.name))
            _expected.append((family, dtype.name))
    if _helper and _helper[0] is not None:
        _tell_expected(_helper[0])


def _tell_expected(helper: subprocess.Popen) -> None:
    while _expected:
        _tell(helper, *_expected.pop(0), "expected")


class Work:
    """The helper's queue of ``(family, dtype)`` to run, fed by :meth:`read` on a thread of its
    own: the families the process expects, in the order expected, then those it started, in the
    order started, then those put off because the process was compiling one of their kernels.
    Each runs once, unless put off.

    Examples
    --------
    >>> work = Work()
    >>> work.read(["matmul float32 started", "embedding float32 expected",
    ...            "gelu float32 expected"])
    >>> work.next(), work.next()
    (('embedding', 'float32'), ('gelu', 'float32'))
    >>> work.put_off(("gelu", "float32")); work.fresh_waiting()
    True
    >>> work.next(), work.next(), work.next()
    (('matmul', 'float32'), ('gelu', 'float32'), None)
    """

    def __init__(self) -> None:
        self._expected: list[tuple[str, str]] = []
        self._started: list[tuple[str, str]] = []
        self._put_off: list[tuple[str, str]] = []
        self._done: set[tuple[str, str]] = set()
        self._ended = False
        self._changed = threading.Condition()

    def read(self, lines: Iterable[str]) -> None:
        """Queue the requests ``lines`` (``<family> <dtype> expected|started``) until they
        end."""
        for line in lines:
            family, dtype, kind = line.split()
            with self._changed:
                (self._expected if kind == "expected" else self._started).append((family, dtype))
                self._changed.notify()
        with self._changed:
            self._ended = True
            self._changed.notify()

    def next(self) -> tuple[str, str] | None:
        """The next family to run, waiting for requests; None once they have ended and all
        have run."""
        with self._changed:
            while True:
                for queue in (self._expected, self._started, self._put_off):
                    while queue:
                        job = queue.pop(0)
                        if job not in self._done:
                            self._done.add(job)
                            return job
                if self._ended:
                    return None
                self._changed.wait()

    def fresh_waiting(self) -> bool:
        """Whether a family not yet tried waits (then one whose kernel the process is compiling
        is better put off than waited for)."""
        with self._changed:
            return any(job not in self._done for job in self._expected + self._started)

    def put_off(self, job: tuple[str, str]) -> None:
        """Run ``job`` again once the families not yet tried have run."""
        with self._changed:
            self._done.discard(job)
            self._put_off.append(job)


def main() -> None:
    """The helper's loop: run each requested family once (:class:`Work`), at a lower priority
    than the process that asked: once that process runs its kernels on every core, the
    helper's compiling yields to them."""
    with contextlib.suppress(OSError):
        os.nice(10)
    work = Work()
    threading.Thread(target=work.read, args=(sys.stdin,), daemon=True).start()
    while (job := work.next()) is not None:
        family, dtype = job
        with cache_claims.putting_off(work.fresh_waiting()) as put_off:
            try:
                FAMILIES[family](np.dtype(dtype))
            except Exception:
                if not put_off.busy:
                    raise
                work.put_off(job)
