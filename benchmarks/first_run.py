"""First run of W3: process start to the end of the first training step, cold and warm cache.

Each run is a fresh Python process. *Cold*: ``NUMBA_CACHE_DIR`` points to a new empty directory,
so every kernel the step uses is compiled. *Warm*: it points to a directory that a cold run has
filled, so every kernel is loaded from the cache. The time is taken from just before the process
is started to the end of the first step (``loss.item()`` returned), the model built as in
``bench_train_step.py``; the CPU time of the process is reported too, with that of its
compile-ahead helper (``tinyattn.kernels.compile_ahead``, reaped when the process exits): the
two compile side by side, so the CPU time exceeds the wall time. Cold and warm runs alternate;
the figures are the medians. ``--trees A B`` compares two source trees (say, two checkouts),
alternating A B, B A, ... between them.

``--profile`` runs one cold process that reports, per compiled function, the number of
signatures it was compiled for and the CPU seconds spent compiling it (its callees excluded):
what that process compiled itself, not what its helper compiled.

Run: ``python benchmarks/first_run.py [--runs 3] [--profile] [--trees DIR DIR]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def child(profile: bool) -> None:
    """In a fresh process: build W3, run one step, print the wall-clock time it ended at."""
    records = _compile_recorder() if profile else None
    from bench_train_step import batch, tinyattn_model, tinyattn_step

    step = tinyattn_step(tinyattn_model(), *batch())
    loss = step()
    end = time.time()
    result = {"end": end, "loss": loss}
    if records is not None:
        result["profile"] = _compile_profile(records)
    print(json.dumps(result))


def _compile_recorder() -> list:
    """Start recording numba's compile events (start and end of each dispatcher compile)."""
    from numba.core import event

    records: list = []

    class Listener(event.Listener):
        def on_start(self, ev):
            records.append(("start", time.process_time(), ev.data["dispatcher"]))

        def on_end(self, ev):
            records.append(("end", time.process_time(), ev.data["dispatcher"]))

    event.register("numba:compile", Listener())
    return records


def _compile_profile(records: list) -> list:
    """``[name, signatures, exclusive seconds]`` per dispatcher, most expensive first."""
    own: dict = {}
    stack: list = []  # [dispatcher, start, seconds spent in nested compiles]
    for kind, when, dispatcher in records:
        if kind == "start":
            stack.append([dispatcher, when, 0.0])
            continue
        disp, start, nested = stack.pop()
        total = when - start
        if stack:
            stack[-1][2] += total
        name = disp.py_func.__module__ + "." + disp.py_func.__qualname__
        entry = own.setdefault(name, [name, len(disp.signatures), 0.0])
        entry[1] = len(disp.signatures)
        entry[2] += total - nested
    return sorted(own.values(), key=lambda e: -e[2])


def run(cache_dir: str, profile: bool = False, tree: str | None = None) -> dict:
    """One fresh process with ``NUMBA_CACHE_DIR=cache_dir`` (importing tinyattn from ``tree``
    when given); adds the wall-clock ``seconds`` and the process's ``cpu_seconds``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
    command = [sys.executable, os.path.abspath(__file__), "--child"]
    if profile:
        command.append("--profile")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["seconds"] = result["end"] - start
    result["cpu_seconds"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    result["stderr"] = out.stderr
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="cold and warm runs each")
    parser.add_argument("--profile", action="store_true",
                        help="one cold run, reporting compile time per function")
    parser.add_argument("--trees", nargs="+", metavar="DIR",
                        help="source trees to compare (tinyattn imported from each), their runs "
                             "alternating A B, B A, ... (default: the installed tinyattn)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.profile)
        return

    from timing import machine_header

    from tinyattn.kernels.cpu import vector_unit

    print(machine_header())
    print(f"vector unit: {vector_unit().describe()}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.profile:
        with tempfile.TemporaryDirectory() as cache:
            result = run(cache, profile=True)
        print(f"cold run: {result['seconds']:.1f} s to the end of the first step")
        print(f"{'compile CPU s':>13}  {'sigs':>4}  function")
        for name, signatures, seconds in result["profile"]:
            print(f"{seconds:13.2f}  {signatures:4d}  {name}")
        print(f"{sum(e[2] for e in result['profile']):13.2f}  total")
        return

    trees = args.trees or [None]
    results: dict = {tree: {"cold": [], "warm": []} for tree in trees}
    with contextlib.ExitStack() as stack:
        warm_caches = {tree: stack.enter_context(tempfile.TemporaryDirectory()) for tree in trees}
        for tree in trees:
            run(warm_caches[tree], tree=tree)  # fills the warm cache
        for round_ in range(args.runs):
            for tree in trees if round_ % 2 == 0 else trees[::-1]:
                with tempfile.TemporaryDirectory() as cold_cache:
                    cold = run(cold_cache, tree=tree)
                warm = run(warm_caches[tree], tree=tree)
                results[tree]["cold"].append(cold)
                results[tree]["warm"].append(warm)
                print(f"{tree or 'installed'}: cold {cold['seconds']:.2f} s "
                      f"({cold['cpu_seconds']:.1f} s CPU), warm {warm['seconds']:.2f} s "
                      f"({warm['cpu_seconds']:.2f} s CPU), load {os.getloadavg()[0]:.2f}",
                      flush=True)
    for tree, cases in results.items():
        for case, runs in cases.items():
            wall = [r["seconds"] for r in runs]
            cpu = [r["cpu_seconds"] for r in runs]
            print(f"{tree or 'installed'}, {case} first step: median {np.median(wall):.2f} s "
                  f"wall, {np.median(cpu):.2f} s CPU over {args.runs} runs "
                  f"(wall {', '.join(f'{x:.2f}' for x in wall)})")
        stderr_lines = [line for line in cases["cold"][-1]["stderr"].splitlines() if line]
        if stderr_lines:
            print("stderr of its last cold run:")
            print("\n".join("  " + line for line in stderr_lines))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

if __name__ == "__main__":
    main()
