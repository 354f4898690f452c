"""W3 and W2 of two tinyattn source trees, against each other: did a change move them?

Each measurement runs in a fresh process that imports tinyattn from one tree (``--trees A B``,
two checkouts); the parent alternates the trees over ``--rounds`` rounds (A B, B A, ...) and
reports, per workload, each tree's median time and the median over rounds of the ratio
B ÷ A. The workloads are those of ``bench_train_step.py`` (W3: one AdamW step of the benchmark
GPT, with the allocator settings of the training entry points) and ``bench_attention.py`` (W2:
causal attention forward + backward, float32), at ``--threads`` threads.

Run from the repository root::

    python benchmarks/bench_trees.py --trees ../before . [--rounds 7] [--threads 2]
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
TITLE = "# Two source trees: W3 and W2, B ÷ A (newest first)"
W2_SHAPES = [(8, 8, 64, 32), (8, 8, 128, 64), (8, 8, 256, 64), (4, 8, 1024, 64)]
CALLS = {"w3": 30, "w2": 10}


def child(tree: str, threads: int) -> None:
    """In a fresh process, with tinyattn imported from ``tree``: the median time of each
    workload, in ms, as one JSON line."""
    sys.path.insert(0, tree)
    sys.path.insert(1, str(HERE))
    from bench_train_step import batch, tinyattn_model, tinyattn_step
    from timing import call_seconds, set_threads

    set_threads("tinyattn", threads)
    import tinyattn.nn.functional as F

    import tinyattn as ta

    assert Path(ta.__file__).resolve().is_relative_to(Path(tree).resolve()), ta.__file__
    memory = getattr(ta, "memory", None)  # (a tree whose import tuned the allocator itself)
    if memory is not None:
        memory.keep_freed_memory()
    results = {}
    step = tinyattn_step(tinyattn_model(), *batch())
    step()
    results["W3 step"] = float(np.median(call_seconds(step, CALLS["w3"])) * 1e3)
    for shape in W2_SHAPES:
        rng = np.random.default_rng(0)
        q, k, v, g = (ta.tensor(rng.standard_normal(shape).astype(np.float32))
                      for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)

        def run(q=q, k=k, v=v, g=g) -> None:
            q.grad = k.grad = v.grad = None
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)

        run()
        results[f"W2 {shape}"] = float(np.median(call_seconds(run, CALLS["w2"])) * 1e3)
    print(json.dumps(results))


def run_child(tree: str, threads: int) -> dict:
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", tree,
                           "--threads", str(threads)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": tree})
    if done.returncode != 0:
        raise SystemExit(f"trees: the child of {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs=2, metavar="DIR", required=False,
                        help="the two source trees, A then B")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    parser.add_argument("--threads", type=int, default=2, help="numba threads")
    parser.add_argument("--output", type=Path, default=HERE / "results_trees.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.threads)
        return
    if not args.trees:
        parser.error("--trees A B is required")

    from timing import alternating_rounds, load_average, machine_header, prepend_section

    from tinyattn.kernels.cpu import vector_unit

    trees = [os.path.abspath(tree) for tree in args.trees]
    load_before = load_average()
    runs = alternating_rounds(trees, args.rounds, lambda tree: run_child(tree, args.threads))
    load_after = load_average()
    a, b = trees
    lines = [
        f"## {machine_header()}",
        "",
        f"Vector unit (numba's target): {vector_unit().describe()}",
        "",
        f"Command: `python benchmarks/bench_trees.py --trees {' '.join(args.trees)} --rounds "
        f"{args.rounds} --threads {args.threads}` (from the repository root). A = `{a}`, "
        f"B = `{b}`; each measurement in a fresh process importing tinyattn from its tree, "
        f"{args.threads} thread(s), {args.rounds} alternating rounds; ms = median over rounds "
        f"of each process's median ({CALLS['w3']} W3 steps, {CALLS['w2']} W2 calls); ratio = "
        f"median over rounds of B ÷ A. Load average (1/5/15 min) before: {load_before}, "
        f"after: {load_after}.",
        "",
        "| workload | A ms | B ms | B ÷ A | range over rounds |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in runs[a][0]:
        ratios = np.array([run[name] for run in runs[b]]) / np.array([run[name] for run in runs[a]])
        lines.append(f"| {name} | {np.median([run[name] for run in runs[a]]):.2f} "
                     f"| {np.median([run[name] for run in runs[b]]):.2f} "
                     f"| {np.median(ratios):.3f}× | {ratios.min():.2f}–{ratios.max():.2f} |")
    section = "\n".join(lines)
    print(section)
    prepend_section(args.output, TITLE, section)


if __name__ == "__main__":
    main()
