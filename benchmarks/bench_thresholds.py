"""Where the attention, GELU, LayerNorm and embedding kernels should start running in parallel.

Each kernel below picks its serial or its parallel path by the size of its input (a threshold
in its module). This script times both paths of each at a ladder of sizes around the
thresholds, float32: the attention forward and backward (causal, one sequence, the head shapes
of sampling from a small GPT and of GPT-2), the GELU forward and backward (the MLP widths of
a small GPT at 16 to 128 tokens), and the LayerNorm and embedding forward and backward (rows of
128 features, 16 to 768 tokens). Both paths run tinyattn's own kernels on numba's threads, so
they share one process: blocks of ``--calls`` calls of each path alternate, ``--blocks`` times,
and a figure is the median over blocks of the time per call, with the median of the per-block
ratios parallel ÷ serial. Before timing, the two paths are checked to give the same bits.
Writes benchmarks/results_thresholds.md (newest run first).

Run: ``python benchmarks/bench_thresholds.py [--blocks 21] [--calls 100] [--threads 2]``
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

TITLE = "# Serial against parallel paths of the multi-threaded kernels (newest first)"
ATTENTION_SHAPES = ((1, 4, 8, 32), (1, 4, 16, 32), (1, 4, 32, 32), (1, 4, 64, 32),
                    (1, 2, 64, 32), (1, 12, 16, 64), (1, 12, 32, 64))
GELU_SIZES = (4096, 8192, 16384, 32768, 65536)
ROWS, WIDTH, VOCAB = (16, 64, 128, 256, 768), 128, 65  # LayerNorm and embedding: rows of 128


@contextlib.contextmanager
def _path(kernel: str, parallel: bool):
    """Inside the block, ``kernel`` takes its parallel path (or its serial one) at any size."""
    module, name = _threshold(kernel)
    saved = getattr(module, name)
    setattr(module, name, 0 if parallel else 2**62)
    try:
        yield
    finally:
        setattr(module, name, saved)


def _threshold(kernel: str):
    """The module of ``kernel`` and the name of its threshold."""
    from tinyattn.kernels import attention, embedding, gelu, layer_norm

    return {"attention": (attention, "_PARALLEL_MIN_WORK"),
            "embedding": (embedding, "_PARALLEL_MIN_ELEMENTS"),
            "GELU": (gelu, "_PARALLEL_MIN_ELEMENTS"),
            "LayerNorm": (layer_norm, "_PARALLEL_MIN_ELEMENTS")}[kernel.split()[0]]


def _cases():
    """``(kernel, size label, work, call)`` per case: ``call()`` runs the kernel once."""
    from tinyattn.kernels import attention, embedding, gelu, layer_norm

    rng = np.random.default_rng(0)
    for shape in ATTENTION_SHAPES:
        B, H, T, D = shape
        q, k, v, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
        out, lse = attention.attention_forward(q, k, v, is_causal=True)
        label, work = "B, H, T, D = " + ", ".join(map(str, shape)), B * H * T * T * 2 * D
        yield "attention forward", label, work, functools.partial(
            attention.attention_forward, q, k, v, is_causal=True)
        yield "attention backward", label, work, functools.partial(
            attention.attention_backward, q, k, v, out, lse, g, is_causal=True)
    for size in GELU_SIZES:
        x, g = (rng.standard_normal(size).astype(np.float32) for _ in range(2))
        yield "GELU forward", f"{size} elements", size, functools.partial(gelu.gelu_forward, x)
        yield "GELU backward", f"{size} elements", size, functools.partial(
            gelu.gelu_backward, x, g)
    for rows in ROWS:
        x, g = (rng.standard_normal((rows, WIDTH)).astype(np.float32) for _ in range(2))
        w, b = (rng.standard_normal(WIDTH).astype(np.float32) for _ in range(2))
        label, size = f"{rows} rows of {WIDTH}", rows * WIDTH
        _, mean, rstd = layer_norm.layer_norm_forward(x, w, b, 1e-5)
        yield "LayerNorm forward", label, size, functools.partial(
            layer_norm.layer_norm_forward, x, w, b, 1e-5)
        yield "LayerNorm backward", label, size, functools.partial(
            layer_norm.layer_norm_backward, g, x, w, mean, rstd)
        table = rng.standard_normal((VOCAB, WIDTH)).astype(np.float32)
        indices = rng.integers(0, VOCAB, rows)
        yield "embedding forward", label, size, functools.partial(
            embedding.embedding_forward, table, indices)
        yield "embedding backward", label, size, functools.partial(
            embedding.embedding_backward, g, indices, VOCAB)


def _same_bits(a, b) -> bool:
    pairs = zip(a, b, strict=True) if isinstance(a, tuple) else ((a, b),)
    return all(np.array_equal(x, y, equal_nan=True) for x, y in pairs)


def _time(call, calls: int) -> float:
    """Mean µs per call over ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=21, help="alternating blocks per case")
    parser.add_argument("--calls", type=int, default=100, help="calls per block")
    parser.add_argument("--threads", type=int, default=2, help="numba threads")
    parser.add_argument("--only", default="", help="only the kernels whose name starts so "
                        "(attention, GELU, LayerNorm, embedding)")
    parser.add_argument("--output", type=Path, default=HERE / "results_thresholds.md")
    args = parser.parse_args()
    import numba
    from timing import load_average, machine_header, prepend_section

    from tinyattn.kernels.cpu import vector_unit

    numba.set_num_threads(args.threads)
    load, started = load_average(), time.strftime("%H:%M UTC", time.gmtime())
    lines = ["| kernel | size | work | serial µs | parallel µs | parallel ÷ serial | "
             "path taken |", "|---|---|---:|---:|---:|---:|---|"]
    for kernel, label, work, call in _cases():
        if not kernel.startswith(args.only):
            continue
        results = []
        for parallel in (False, True):
            with _path(kernel, parallel):
                results.append(call())
        if not _same_bits(*results):
            raise SystemExit(f"{kernel} {label}: the serial and parallel paths differ")
        times: list[list[float]] = [[], []]
        for _ in range(args.blocks):
            for parallel in (False, True):
                with _path(kernel, parallel):
                    times[parallel].append(_time(call, args.calls))
        ratio = float(np.median(np.array(times[1]) / np.array(times[0])))
        module, name = _threshold(kernel)
        taken = "parallel" if work >= getattr(module, name) else "serial"
        lines.append(f"| {kernel} | {label} | {work} | {np.median(times[0]):.1f} | "
                     f"{np.median(times[1]):.1f} | {ratio:.2f} | {taken} |")
        print(lines[-1], flush=True)
    command = (f"python benchmarks/bench_thresholds.py --blocks {args.blocks} --calls "
               f"{args.calls} --threads {args.threads}" + (f" --only {args.only}" if args.only
                                                          else ""))
    body = [f"## {machine_header()}", "", f"Vector unit (numba's target): "
            f"{vector_unit().describe()}; {args.threads} thread(s); started at {started}, load "
            f"average then: {load}.", "", f"Command: `{command}`. Work: multiply-adds of the "
            "attention (B·H·T·T·2D, before the causal mask halves it), elements otherwise; "
            "\"path taken\": the path the kernel's threshold picks at that size.", "", *lines]
    prepend_section(args.output, TITLE, "\n".join(body))


if __name__ == "__main__":
    main()
