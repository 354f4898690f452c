"""Per-call cost of common ops on one mid-sized tensor, no grad, tinyattn vs PyTorch.

The ops a learner's script calls outside the layers (reductions, selections, sorts, indexing,
elementwise functions, shape copies, losses, sampling), each on a float32 tensor of ``64 ×
4096`` (1 MiB: larger than a core's L1 and L2 caches together on most laptops, small enough to
be called often), or on the index and vector shapes of the same call in a script. It finds the
ops whose cost is far from torch's: a numpy pass on one thread, an index built where a view
would do, a reduction that waits on each addition.

The same source runs on both sides: under ``python`` it imports PyTorch, under ``python -m
tinyattn run`` tinyattn. Each side runs in a fresh process; the parent alternates the sides
over ``--rounds`` rounds. A process times each op as the fastest of 5 blocks of ``--calls``
calls; a figure is each side's median over rounds, a ratio the median over rounds of the
per-round ratios. ``--trees A B`` times two tinyattn source trees against each other and
against torch. 2 threads (``--threads``). Writes benchmarks/results_ops.md (newest first),
the ops sorted by their ratio to torch.

Run from the repository root::

    python benchmarks/bench_ops.py [--rounds 3] [--calls 20] [--trees A B]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import timeit
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TITLE = "# Per-call cost of common ops on a 64 × 4096 float32 tensor, no grad (newest first)"
ROWS, COLUMNS = 64, 4096


def _cases(torch) -> dict:
    """Each op's name and a call of it, on inputs made here (seeded)."""
    F = torch.nn.functional
    x, y = torch.randn(ROWS, COLUMNS), torch.randn(ROWS, COLUMNS)
    index = torch.randint(0, COLUMNS, (ROWS, ROWS))
    rows = torch.randint(0, ROWS, (512,))
    v = torch.randn(COLUMNS)
    positive = x.abs() + 0.01
    probs = F.softmax(x, -1)
    return {
        "sum(-1)": lambda: x.sum(-1), "mean(-1)": lambda: x.mean(-1),
        "var(-1)": lambda: x.var(-1), "norm(dim=-1)": lambda: x.norm(dim=-1),
        "sum()": lambda: x.sum(), "max(dim=-1)": lambda: x.max(dim=-1),
        "argmax(-1)": lambda: x.argmax(-1), "logsumexp(-1)": lambda: torch.logsumexp(x, -1),
        "cumsum(-1)": lambda: torch.cumsum(x, dim=-1), "prod(-1)": lambda: positive.prod(-1),
        "softmax(-1)": lambda: F.softmax(x, -1), "log_softmax(-1)": lambda: F.log_softmax(x, -1),
        "sort(-1)": lambda: torch.sort(x, dim=-1), "topk(10)": lambda: torch.topk(x, 10, dim=-1),
        "gather": lambda: torch.gather(x, 1, index), "x[rows]": lambda: x[rows],
        "index_select": lambda: x.index_select(0, rows),
        "scatter_add": lambda: torch.zeros(ROWS, COLUMNS).scatter_add(1, index, x[:, :ROWS]),
        "where": lambda: torch.where(x > 0, x, y), "masked_fill": lambda: x.masked_fill(x > 0, 0.0),
        "clamp": lambda: x.clamp(-1, 1), "relu": lambda: F.relu(x), "gelu": lambda: F.gelu(x),
        "silu": lambda: F.silu(x), "sigmoid": lambda: torch.sigmoid(x), "tanh": lambda: x.tanh(),
        "exp": lambda: x.exp(), "log": lambda: positive.log(), "sqrt": lambda: positive.sqrt(),
        "abs": lambda: x.abs(), "x ** 2": lambda: x ** 2, "x + y": lambda: x + y,
        "x * y": lambda: x * y, "x / y": lambda: x / y, "minimum": lambda: torch.minimum(x, y),
        "x == y": lambda: x == y, "any": lambda: (x > 3).any(),
        "flip(-1)": lambda: x.flip(-1), "tril": lambda: torch.tril(x[:, :ROWS]),
        "cat": lambda: torch.cat([x, y], 0), "stack": lambda: torch.stack([x, y]),
        "transpose.contiguous": lambda: x.transpose(0, 1).contiguous(),
        "expand.contiguous": lambda: v.expand(ROWS, COLUMNS).contiguous(),
        "repeat": lambda: x[:8].repeat(2, 2), "clone": lambda: x.clone(),
        "outer": lambda: torch.outer(v, v[:ROWS]),
        "bmm (16 × 4 × 4096 · 4096 × 4)": lambda: torch.bmm(x.view(16, 4, COLUMNS),
                                                           y.view(16, COLUMNS, 4)),
        "cross_entropy": lambda: F.cross_entropy(x, index[:, 0]),
        "mse_loss": lambda: F.mse_loss(x, y), "layer_norm": lambda: F.layer_norm(x, (COLUMNS,)),
        "dropout": lambda: F.dropout(x, 0.1), "multinomial": lambda: torch.multinomial(probs, 1),
        "randn": lambda: torch.randn(ROWS, COLUMNS), "zeros": lambda: torch.zeros(ROWS, COLUMNS),
        "nonzero": lambda: torch.nonzero(x > 1), "to(long)": lambda: x.long(),
    }


def child(calls: int, threads: int, side: str) -> None:
    """In a fresh process (torch, or tinyattn through ``tinyattn run``): µs per call of each
    op, the fastest of 5 blocks of ``calls`` calls, as JSON."""
    import torch
    from timing import set_threads

    set_threads(side, threads)
    torch.manual_seed(0)
    result = {}
    with torch.no_grad():
        for name, call in _cases(torch).items():
            call()  # compiles, on a first run
            result[name] = min(timeit.repeat(call, number=calls, repeat=5)) / calls * 1e6
    print(json.dumps(result))


def _rows(runs: dict, sides: list[str]) -> list[str]:
    """The table, the ops sorted by the last tinyattn side's ratio to torch, largest first."""
    tiny = [side for side in sides if side != "torch"]
    ops = [name for name in runs["torch"][0] if name not in ("wall_s", "peak_rss_mb")]

    def times(side: str, name: str) -> np.ndarray:
        return np.asarray([run[name] for run in runs[side]])

    ratio = {(side, name): float(np.median(times(side, name) / times("torch", name)))
             for side in tiny for name in ops}
    lines = ["| op | " + " | ".join(f"{side} µs" for side in sides) + " | " + " | ".join(
        f"{side} ÷ torch" for side in tiny) + " |", "|---|" + "---:|" * (len(sides) + len(tiny))]
    for name in sorted(ops, key=lambda op: -ratio[(tiny[-1], op)]):
        cells = [name] + [f"{np.median(times(side, name)):.1f}" for side in sides]
        cells += [f"{ratio[(side, name)]:.2f}×" for side in tiny]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    from timing import add_tree_options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--calls", type=int, default=20, help="calls in each timed block")
    parser.add_argument("--threads", type=int, default=2, help="threads per side")
    add_tree_options(parser, HERE / "results_ops.md")
    args = parser.parse_args()
    if args.child:
        child(args.calls, args.threads, args.child)
        return

    from timing import load_average, machine_header, prepend_section, run_side, tree_rounds

    from tinyattn.kernels.cpu import vector_unit

    load_before, started = load_average(), time.strftime("%H:%M UTC", time.gmtime())
    sides, runs = tree_rounds(args.trees, args.rounds, lambda side, tree: run_side(
        __file__, side, ["--calls", args.calls, "--threads", args.threads], tree))
    command = (f"python benchmarks/bench_ops.py --rounds {args.rounds} --calls {args.calls} "
               f"--threads {args.threads}" + (" --trees " + " ".join(args.trees)
                                              if args.trees else ""))
    section = "\n".join([
        f"## {machine_header()}", "",
        f"Vector unit (numba's target): {vector_unit().describe()}; started at {started}; load "
        f"average (1/5/15 min) before: {load_before}, after: {load_average()}.", "",
        f"Command: `{command}` (from the repository root). Each side in its own fresh process, "
        f"{args.threads} thread(s), {args.rounds} alternating rounds; a process times each op "
        f"as the fastest of 5 blocks of {args.calls} calls; a figure is the median over rounds, "
        "a ratio the median over rounds of the per-round ratios.", "",
        *_rows(runs, sides),
    ])
    print(section)
    prepend_section(args.output, TITLE, section)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
