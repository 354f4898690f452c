"""Side-by-side timing for the benchmarks.

The machines are shared and noisy, so absolute times drift; a ratio taken from two measurements
made back to back holds. Every figure runs each side in a fresh process of its own,
alternating A, B, B, A, ... over rounds (:func:`alternating_rounds`), and report the median over
rounds of the ratio of the two sides' medians: numba's, torch's and OpenBLAS's OpenMP threads
spin after a parallel region and steal each other's cores when two runtimes alternate inside one
process.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np


def alternating_rounds(sides: Sequence[str], rounds: int,
                       run: Callable[[str], dict]) -> dict[str, list[dict]]:
    """Call ``run(side)`` (which runs one side in a fresh process and returns its measurements)
    for every side, over ``rounds`` rounds whose order alternates (A B, B A, ...), so that
    neither side always follows the other. Returns every side's results, in round order."""
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            results[side].append(run(side))
    return results


def tinyattn_trees(trees: Sequence[str] | None) -> dict[str, str | None]:
    """The tinyattn sides of a benchmark, each label with the source tree its children import
    first: one side of the installed tinyattn (None), or one per tree given to ``--trees``."""
    if not trees:
        return {"tinyattn": None}
    return {f"tinyattn ({tree})": os.path.abspath(tree) for tree in trees}


def add_tree_options(parser: argparse.ArgumentParser, output: Path) -> None:
    """The options every benchmark of tinyattn trees against torch shares: ``--trees A B``,
    ``--output`` (default ``output``) and the hidden ``--child SIDE`` its children run with."""
    parser.add_argument("--trees", nargs=2, metavar="DIR",
                        help="time two tinyattn source trees (and torch)")
    parser.add_argument("--output", type=Path, default=output)
    parser.add_argument("--child", choices=["tinyattn", "torch"], help=argparse.SUPPRESS)


def tree_rounds(trees: Sequence[str] | None, rounds: int,
                run: Callable[[str, str | None], dict]) -> tuple[list[str], dict[str, list[dict]]]:
    """The sides of a benchmark of tinyattn against torch (:func:`tinyattn_trees`, then
    ``"torch"``) and every side's results over alternating rounds (:func:`alternating_rounds`):
    ``run(side, tree)`` runs one side in a fresh process, ``tree`` the source tree its child
    imports first (None for the installed tinyattn, and for torch)."""
    labels = tinyattn_trees(trees)
    sides = [*labels, "torch"]
    return sides, alternating_rounds(sides, rounds, lambda side: run(side, labels.get(side)))


def run_side(script: str | os.PathLike, side: str, options: Sequence[Any],
             tree: str | None) -> dict:
    """``script --child SIDE options`` in a fresh process (:func:`run_json_child`): the same
    source under ``python`` for torch and under ``python -P -m tinyattn run`` for tinyattn.
    ``-P``: the working directory does not go first on sys.path, so that ``tree``, put first
    on PYTHONPATH, decides which tinyattn the child imports even when run from a checkout."""
    runner = [] if side == "torch" else ["-P", "-m", "tinyattn", "run"]
    argv = [sys.executable, *runner, Path(script).resolve(), "--child",
            "torch" if side == "torch" else "tinyattn", *options]
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
    return run_json_child(argv, f"{Path(script).stem} {side}", env)


def call_seconds(run: Callable[[], Any], calls: int) -> list[float]:
    """Call ``run()`` ``calls`` times; its wall time in seconds, call by call.

    Each result is dropped as soon as its call returns, as in a training loop, so that the next
    call can reuse its memory: holding every result would make each call fault in fresh pages
    (for the W3 kernels that doubled or tripled the measured time, on both sides alike).
    """
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return seconds


def ratio_of_medians(ours: Sequence[float], reference: Sequence[float]) -> tuple[float, float,
                                                                                 float]:
    """Median, min and max over rounds of ``ours[r] / reference[r]``."""
    ratios = np.asarray(ours, dtype=float) / np.asarray(reference, dtype=float)
    return float(np.median(ratios)), float(ratios.min()), float(ratios.max())


def set_threads(side: str, threads: int) -> None:
    """Use ``threads`` threads in this process: numba's for tinyattn (at most the pool size it
    was started with), torch's intra-op pool for torch."""
    if side == "torch":
        import torch

        torch.set_num_threads(threads)
    else:
        import numba

        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


def keep_freed_memory() -> bool:
    """Apply :func:`tinyattn.memory.keep_freed_memory` (glibc keeps freed blocks for reuse) to
    this process, as tinyattn's training entry points do; True when it took effect.

    The module is loaded from its file, so that a torch child gets the same allocator setting
    without importing tinyattn and numba.
    """
    path = Path(__file__).resolve().parent.parent / "tinyattn" / "memory.py"
    spec = importlib.util.spec_from_file_location("_tinyattn_memory", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.keep_freed_memory()


def run_json_child(argv: Sequence[str], label: str, env: dict[str, str] | None = None) -> dict:
    """Run ``argv`` in a fresh process: the JSON object of its last line of output, with its
    wall time (``wall_s``) and its own peak resident memory in MB (``peak_rss_mb``).

    The child is reaped with ``wait4``, which returns that child's ``ru_maxrss``
    (``RUSAGE_CHILDREN`` would give the largest over every child so far). A failed child stops
    the benchmark with its ``label`` and the end of its stderr. ``env``: the child's
    environment (this process's when None).
    """
    argv = [str(arg) for arg in argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ if env is None else env, file_actions=[
            (os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{label} failed:\n{stderr[-3000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    result["peak_rss_mb"] = usage.ru_maxrss / 1024.0
    return result


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as ``a/b/c``."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def prepend_section(path: str | os.PathLike, title: str, section: str) -> None:
    """Write ``title``, then ``section``, then the sections already in ``path`` (everything
    after its first line), so that results files keep every earlier run, newest first."""
    earlier = ""
    if os.path.exists(path):
        with open(path) as file:
            earlier = file.read().partition("\n")[2].lstrip("\n")
    with open(path, "w") as file:
        file.write(f"{title}\n\n{section.rstrip()}\n\n{earlier}".rstrip() + "\n")


def _status_mb(*fields: str) -> dict[str, float] | None:
    """The named ``/proc/self/status`` fields (``"VmHWM"``, ...) in MB; None where Linux does
    not provide the file."""
    found: dict[str, float] = {}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in fields:
                    found[name] = int(value.split()[0]) / 1024.0
    except OSError:
        return None
    return found


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB.

    Read from ``VmHWM`` where Linux provides it: ``ru_maxrss`` survives ``fork`` + ``exec``, so in
    a child process it would report the parent's high-water mark.
    """
    status = _status_mb("VmHWM")
    if status and "VmHWM" in status:
        return status["VmHWM"]
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def resident_split_mb() -> tuple[float, float]:
    """This process's resident memory now, in MB: ``(anonymous, file-backed)``.

    File-backed pages are the mapped code and data of shared libraries (``libllvmlite.so``,
    ``libtorch_cpu.so``, ...). How many of them are resident depends on the state of the page
    cache, not only on the program: while a library file that pip has just written is still
    cached, a process maps much more of it than once the file has been read back from disk
    (W3, Linux 6.18: tinyattn 128–138 MB instead of 88–90, torch 176 MB instead of 99; reading
    the cached file again does not change it). Anonymous memory (heap, arrays, thread stacks)
    does not depend on it. Zeros where Linux does not say.
    """
    status = _status_mb("RssAnon", "RssFile") or {}
    return status.get("RssAnon", 0.0), status.get("RssFile", 0.0)


def minor_page_faults() -> int:
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def machine_header() -> str:
    """One line naming the date, CPU model, cores and package versions, for the results table."""
    cpu = platform.processor() or "unknown CPU"
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    versions = [f"numpy {np.__version__}", f"numba {metadata.version('numba')}"]
    try:  # without importing torch, which would weigh on the memory of the calling process
        versions.append(f"torch {metadata.version('torch')}")
    except metadata.PackageNotFoundError:
        versions.append("torch not installed")
    date = time.strftime("%Y-%m-%d")
    return f"{date} · {cpu} · {os.cpu_count()} cores · " + ", ".join(versions)
