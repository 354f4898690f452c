"""W1: throughput of tinyattn's matmul kernel against numpy (OpenBLAS), float32 and float64.

Shapes: 512³; the Linear shapes of W3 with their two backward products (``g @ Bᵀ`` and
``Aᵀ @ g``, read through transposed views as autograd passes them); the attention shapes of W2 as
batched matmuls. Each case checks the outputs agree, then times both sides in interleaved pairs
(:func:`timing.compare`). Prints a markdown table of GFLOP/s and the ratio tinyattn ÷ numpy
(higher is better for tinyattn; the target is ≥ 0.5 everywhere, the goal ≥ 0.8).

Run: ``python benchmarks/bench_matmul.py [--pairs 15] [--threads 2] [--out results_matmul.md]``
(``--threads`` sets both numba's and OpenBLAS's thread count, by re-running the script with
``NUMBA_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` set before either library loads.)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import compare, machine_header  # noqa: E402

from tinyattn.kernels.matmul import matmul  # noqa: E402

LINEAR_SHAPES = [(1024, 128, 384), (1024, 128, 512), (1024, 512, 128)]  # (M, K, N)
BATCHED_SHAPES = [(64, 64, 32, 64), (64, 256, 64, 256)]  # (batch, M, K, N)


def cases(rng: np.random.Generator, dtype: type) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, a, b) for every W1 product, inputs standard normal in ``dtype``."""

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(dtype)

    out = [("512×512 · 512×512", normal(512, 512), normal(512, 512))]
    for m, k, n in LINEAR_SHAPES:
        a, b, g = normal(m, k), normal(k, n), normal(m, n)
        out.append((f"{m}×{k} · {k}×{n}", a, b))
        out.append((f"{m}×{n} · ({k}×{n})ᵀ  [g @ Bᵀ]", g, b.T))
        out.append((f"({m}×{k})ᵀ · {m}×{n}  [Aᵀ @ g]", a.T, g))
    for batch, m, k, n in BATCHED_SHAPES:
        out.append((f"{batch} × {m}×{k} · {k}×{n}", normal(batch, m, k), normal(batch, k, n)))
    return out


def gflops(a: np.ndarray, b: np.ndarray, ms: float) -> float:
    """GFLOP/s of ``a @ b`` done in ``ms`` milliseconds (2 flops per multiply-add)."""
    out_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    return 2.0 * np.prod(out_shape) * a.shape[-1] / (ms * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15, help="interleaved timing pairs per case")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument("--threads", type=int, default=None, help="threads for both sides")
    args = parser.parse_args()
    if args.threads is not None and os.environ.get("NUMBA_NUM_THREADS") != str(args.threads):
        threads = str(args.threads)
        env = {**os.environ, "NUMBA_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    rng = np.random.default_rng(0)
    load_before = os.getloadavg()[0]

    rows = []
    compile_s = {}
    for dtype in (np.float32, np.float64):
        start = time.perf_counter()
        for _, a, b in cases(rng, dtype):
            matmul(a, b)
        compile_s[dtype.__name__] = time.perf_counter() - start
        for label, a, b in cases(rng, dtype):
            ours, ref = matmul(a, b), np.matmul(a, b)
            scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
            tol = 1e-5 if dtype == np.float32 else 1e-12
            if not np.all(np.abs(ours - ref) <= tol * scale):
                raise AssertionError(f"matmul disagrees with numpy on {label} {dtype.__name__}")
            result = compare(lambda a=a, b=b: matmul(a, b), lambda a=a, b=b: np.matmul(a, b),
                             pairs=args.pairs)
            rows.append((label, dtype.__name__, gflops(a, b, result.ours_ms),
                         gflops(a, b, result.ref_ms), 1.0 / result.ratio))

    lines = [
        f"{machine_header()}",
        "",
        f"Command: `python benchmarks/bench_matmul.py --pairs {args.pairs}"
        + (f" --threads {args.threads}`" if args.threads else "`")
        + " · first calls "
        "(numba compile or cache load, all shapes): "
        + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in compile_s.items()),
        "",
        "| shape (a · b) | dtype | tinyattn GF/s | numpy GF/s | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    for label, dtype_name, ours_gf, ref_gf, ratio in rows:
        lines.append(f"| {label} | {dtype_name} | {ours_gf:.1f} | {ref_gf:.1f} | {ratio:.2f}× |")
    lines.append("")
    lines.append("ratio = median over interleaved pairs of numpy time ÷ tinyattn time "
                 "(> 1: tinyattn faster).")
    lines.append(f"1-minute load average: {load_before:.1f} before, "
                 f"{os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs).")
    table = "\n".join(lines)
    print(table)
    if args.out is not None:
        args.out.write_text("## W1 — matmul kernel\n\n" + table + "\n")


if __name__ == "__main__":
    main()
