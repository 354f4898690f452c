"""Dispatch: the per-op cost of a chain of small ops, forward + backward, tinyattn vs PyTorch.

The workload of the benchmark plan: a chain of 200 steps on a ``(4, 8)`` tensor — ``mul`` by a
constant tensor, ``add`` of one, ``tanh``, and every 4th step a product with an ``(8, 8)``
weight that requires grad — then ``backward()`` of its sum. On tensors this small every op is
almost all overhead (argument checks, dtype promotion, the recording, the engine's step and
the backward rule's own ops), so µs per op is the price of the framework itself. 1 thread.

Each side runs in a fresh process of its own; the parent alternates the sides over
``--rounds`` rounds and reports the median over rounds of the ratio of the two sides' medians.
``--trees A B`` times two tinyattn source trees (say, two checkouts) against each other and
against torch, each child importing tinyattn from its tree.

Run from the repository root::

    python benchmarks/bench_dispatch.py [--rounds 7] [--calls 200] [--trees DIR DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TITLE = "# Dispatch — per-op cost of a chain of small ops, forward + backward (newest first)"
STEPS = 200
SHAPE = (4, 8)


def chain(lib, x, weight, scale, shift):
    """The 200-step chain; ``lib`` is ``tinyattn`` or ``torch`` (the same source for both)."""
    for i in range(STEPS):
        if i % 4 == 3:
            x = x @ weight
        elif i % 4 == 0:
            x = x * scale
        elif i % 4 == 1:
            x = x + shift
        else:
            x = lib.tanh(x)
    return x.sum()


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    weight = (rng.standard_normal((SHAPE[1], SHAPE[1])) / np.sqrt(SHAPE[1])).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, SHAPE).astype(np.float32)
    shift = rng.standard_normal(SHAPE).astype(np.float32) * 0.1
    return x, weight, scale, shift


def child(side: str, calls: int) -> None:
    """In a fresh process: warm up, then time ``calls`` forward + backward passes."""
    from timing import call_seconds

    if side == "torch":
        import torch as lib

        lib.set_num_threads(1)
        make = lib.from_numpy
    else:
        import numba

        import tinyattn as lib

        numba.set_num_threads(1)
        make = lib.tensor
    x, weight, scale, shift = (make(a) for a in _inputs())
    x.requires_grad_(True)
    weight.requires_grad_(True)

    def run():
        x.grad = weight.grad = None
        loss = chain(lib, x, weight, scale, shift)
        loss.backward()
        return loss

    loss = run()
    for _ in range(20):
        run()
    seconds = call_seconds(run, calls)
    print(json.dumps({"us_per_op": float(np.median(seconds)) / STEPS * 1e6,
                      "loss": float(loss.item()),
                      "grad": np.asarray(weight.grad.detach().numpy()).tolist()}))


def run_child(side: str, calls: int, tree: str | None) -> dict:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child",
                           "torch" if side == "torch" else "tinyattn", "--calls", str(calls)],
                          capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"dispatch {side} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    from timing import add_tree_options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    parser.add_argument("--calls", type=int, default=200, help="timed passes per process")
    add_tree_options(parser, HERE / "results_dispatch.md")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls)
        return

    from timing import load_average, machine_header, prepend_section, tree_rounds

    load_before = load_average()
    sides, runs = tree_rounds(args.trees, args.rounds,
                              lambda side, tree: run_child(side, args.calls, tree))
    load_after = load_average()
    reference = np.asarray(runs["torch"][0]["grad"])
    for side in sides[:-1]:
        worst = float(np.abs(np.asarray(runs[side][0]["grad"]) - reference).max())
        if not worst < 1e-4:
            raise SystemExit(f"dispatch: {side} and torch disagree on the weight's gradient "
                             f"({worst:.2e})")
    torch_us = [run["us_per_op"] for run in runs["torch"]]
    command = f"python benchmarks/bench_dispatch.py --rounds {args.rounds} --calls {args.calls}"
    if args.trees:
        command += " --trees " + " ".join(args.trees)
    lines = [
        f"## {machine_header()}",
        "",
        f"Command: `{command}` (from the repository root). A chain of {STEPS} steps on "
        f"{SHAPE} float32 tensors (mul, add, tanh; every 4th a product with an (8, 8) weight), "
        f"forward + backward, 1 thread; each side in its own fresh process, {args.rounds} "
        f"alternating rounds of {args.calls} timed passes. µs per op = median pass ÷ {STEPS}; "
        f"ratio = median over rounds of the two sides' medians. Weight gradients agree with "
        f"torch's. Load average (1/5/15 min) before: {load_before}, after: {load_after}.",
        "",
        "| side | µs per op (fwd + bwd) | ÷ torch (range over rounds) |",
        "|---|---:|---:|",
    ]
    for side in sides:
        ours = [run["us_per_op"] for run in runs[side]]
        ratios = np.asarray(ours) / np.asarray(torch_us)
        lines.append(f"| {side} | {np.median(ours):.2f} | {np.median(ratios):.2f}× "
                     f"({ratios.min():.2f}–{ratios.max():.2f}) |")
    section = "\n".join(lines)
    print(section)
    prepend_section(args.output, TITLE, section)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
