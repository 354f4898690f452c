"""Fresh interpreters for tests of what a process compiles: numba's cache in a directory of the
test's own, this checkout first on the path, and a listener that records every compilation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tinyattn.kernels.compile_notice import QUIET_VARIABLE

ROOT = Path(__file__).resolve().parents[1]

#: Python that makes ``compiled`` the list of every function numba compiles from then on, and
#: ``compiled_modules`` the module of each.
COUNT_COMPILES = """
from numba.core import event

compiled, compiled_modules = [], []


class Count(event.Listener):
    def on_start(self, ev):
        function = ev.data["dispatcher"].py_func
        compiled.append(function.__qualname__)
        compiled_modules.append(function.__module__)

    def on_end(self, ev):
        pass


event.register("numba:compile", Count())
"""


def environment(cache_dir: str | Path, **env: str) -> dict[str, str]:
    """This process's environment with numba's cache in ``cache_dir``, this checkout first on
    the path, the compile line not silenced, and ``env`` on top."""
    environ = {k: v for k, v in os.environ.items() if k != QUIET_VARIABLE}
    environ.update(NUMBA_CACHE_DIR=str(cache_dir), **env)
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environ.get("PYTHONPATH")]))
    return environ


def run_python(args: list[str], cache_dir: str | Path, cwd: Path | None = None,
               **env: str) -> subprocess.CompletedProcess:
    """``python ARGS`` in a fresh interpreter with :func:`environment`, which must succeed."""
    result = subprocess.run([sys.executable, *args], env=environment(cache_dir, **env),
                            cwd=cwd or ROOT, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result
