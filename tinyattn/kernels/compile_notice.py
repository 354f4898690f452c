"""One line on stderr when a family of kernels is compiled, instead of a silent pause.

The first call of a kernel for new argument types makes numba compile it (seconds per kernel;
about a minute for a whole training step on an empty cache), or load it from its on-disk cache
(milliseconds). numba signals only a real compilation, as a ``numba:compile`` event: a load
from the cache sends none. :func:`install` registers a listener for that event which, on the
first compilation of a kernel of ``tinyattn.kernels.<module>`` for a dtype, prints::

    tinyattn: compiling matmul kernels for float32 (first run only)...

once per (module, dtype) and process, on a line of its own even while a tqdm progress bar is
drawn (:func:`_write`); the helpers a kernel compiles along with it (nested events) say
nothing. Set the environment variable ``TINYATTN_QUIET_COMPILE=1`` to silence the
line; :func:`silenced` silences it for a block of code (``tinyattn warmup`` draws a progress
bar of its own). The same moment, silenced or not, asks the compile-ahead helper to compile the
rest of the family in a second process (:mod:`.compile_ahead`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

from numba.core import event, types

QUIET_VARIABLE = "TINYATTN_QUIET_COMPILE"
_PACKAGE = "tinyattn.kernels."
# run_tasks compiles its launcher for a task just after the task itself, whose family has
# then been announced: it is not a family of its own.
_LAUNCHER = "tinyattn.kernels.parallel"

_announced: set[tuple[str, str]] = set()
_state = threading.local()  # depth: compilations in progress in this thread; silenced: bool


def family(module: str) -> str:
    """The kernel family named in the line: the module's name, with spaces.

    Examples
    --------
    >>> family("tinyattn.kernels.layer_norm")
    'layer norm'
    """
    return module.rsplit(".", 1)[-1].replace("_", " ")


def _dtype(args: tuple) -> str | None:
    """The dtype of the first float array among numba's argument types, if any."""
    for arg in args:
        if isinstance(arg, types.Array) and isinstance(arg.dtype, types.Float):
            return str(arg.dtype)
    return None


def _quiet() -> bool:
    return os.environ.get(QUIET_VARIABLE, "") not in ("", "0") or getattr(_state, "silenced",
                                                                          False)


def notice(module: str, dtype: str | None) -> str:
    """The line printed for a compilation of the kernels of ``module`` for ``dtype``.

    Examples
    --------
    >>> notice("tinyattn.kernels.matmul", "float32")
    'tinyattn: compiling matmul kernels for float32 (first run only)...'
    """
    for_dtype = f" for {dtype}" if dtype else ""
    return f"tinyattn: compiling {family(module)} kernels{for_dtype} (first run only)..."


def _write(line: str) -> None:
    """Print ``line`` on stderr on a line of its own.

    A compilation starts inside the first step of a loop, often while a tqdm progress bar is
    drawn on stderr without its newline: a plain print would land at the end of the bar's line.
    When tqdm is in use (imported), its ``write`` clears the bars on stderr, prints the line and
    draws them again below it.
    """
    tqdm = sys.modules.get("tqdm")
    if tqdm is not None and hasattr(tqdm, "tqdm"):
        tqdm.tqdm.write(line, file=sys.stderr)
        sys.stderr.flush()
    else:
        print(line, file=sys.stderr, flush=True)


class _Listener(event.Listener):
    """Prints :func:`notice` at the start of an outermost compilation of a tinyattn kernel."""

    def on_start(self, ev: event.Event) -> None:
        depth = getattr(_state, "depth", 0)
        _state.depth = depth + 1
        if depth:
            return
        module = getattr(ev.data["dispatcher"].py_func, "__module__", "") or ""
        if not module.startswith(_PACKAGE) or module == _LAUNCHER:
            return
        dtype = _dtype(tuple(ev.data["args"]))
        from .compile_ahead import request  # it imports this module

        request(module, dtype)  # a second process compiles the rest of the family
        if _quiet():
            return
        key = (module, dtype or "")
        if key in _announced:
            return
        _announced.add(key)
        _write(notice(module, key[1] or None))

    def on_end(self, ev: event.Event) -> None:
        _state.depth = max(0, getattr(_state, "depth", 1) - 1)


_listener = _Listener()
_installed: list[bool] = []


def install() -> None:
    """Register the listener (once); importing :mod:`tinyattn.kernels` does it."""
    if not _installed:
        event.register("numba:compile", _listener)
        _installed.append(True)


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """No compile line from this thread inside the block."""
    previous = getattr(_state, "silenced", False)
    _state.silenced = True
    try:
        yield
    finally:
        _state.silenced = previous
