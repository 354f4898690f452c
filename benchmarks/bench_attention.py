"""W2: causal scaled-dot-product attention, forward + backward, float32, tinyattn vs PyTorch.

For each shape (B, H, T, d_head) the fused kernels (``attention_forward`` then
``attention_backward``) are timed against ``torch.nn.functional.scaled_dot_product_attention``
followed by ``.backward(g)`` with 2 torch threads, in interleaved pairs (``timing.compare``),
after checking that outputs and gradients agree. The unfused numpy twins (which materialise the
``(T, S)`` weights) are timed the same way, with fewer pairs. The table is printed and written to
``results_attention.md``.

Run from the repository root::

    python benchmarks/bench_attention.py
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import compare, machine_header  # noqa: E402

from tinyattn.kernels.attention import attention_backward, attention_forward  # noqa: E402
from tinyattn.kernels.attention_reference import (  # noqa: E402
    attention_backward_numpy,
    attention_forward_numpy,
)

SHAPES = [(8, 8, 64, 32), (8, 8, 256, 64), (4, 8, 1024, 64)]  # (B, H, T, d_head)
COMMAND = "python benchmarks/bench_attention.py"


def _fused(q, k, v, dout):
    out, lse = attention_forward(q, k, v, is_causal=True)
    return (out, *attention_backward(q, k, v, out, lse, dout, is_causal=True))


def _unfused(q, k, v, dout):
    out, lse = attention_forward_numpy(q, k, v, is_causal=True)
    return (out, *attention_backward_numpy(q, k, v, out, lse, dout, is_causal=True))


def _torch_runner(torch, q, k, v, dout):
    tq, tk, tv = (torch.from_numpy(x).requires_grad_(True) for x in (q, k, v))
    tdout = torch.from_numpy(dout)

    def run():
        for t in (tq, tk, tv):
            t.grad = None
        out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        out.backward(tdout)
        return tuple(x.detach().numpy() for x in (out, tq.grad, tk.grad, tv.grad))

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15, help="interleaved pairs per shape")
    parser.add_argument("--numpy-pairs", type=int, default=3,
                        help="pairs for the unfused numpy column (0 to skip it)")
    parser.add_argument("--output", type=Path,
                        default=Path(__file__).with_name("results_attention.md"))
    args = parser.parse_args()

    import torch

    torch.set_num_threads(2)
    load_before = os.getloadavg()[0]
    rng = np.random.default_rng(0)
    rows = []
    compile_s = None
    for shape in SHAPES:
        q, k, v, dout = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
        ours = functools.partial(_fused, q, k, v, dout)
        reference = _torch_runner(torch, q, k, v, dout)
        if compile_s is None:
            start = time.perf_counter()
            ours()
            compile_s = time.perf_counter() - start
        ours_out, torch_out = ours(), reference()
        out_diff = float(np.abs(ours_out[0] - torch_out[0]).max())
        grad_diff = max(float(np.abs(a - b).max()) for a, b in zip(ours_out[1:], torch_out[1:]))
        if not (out_diff < 1e-4 and grad_diff < 1e-3):
            raise SystemExit(f"{shape}: tinyattn and torch disagree: |out| {out_diff:.2e}, "
                             f"|grad| {grad_diff:.2e}")
        result = compare(ours, reference, pairs=args.pairs)
        numpy_ms = None
        if args.numpy_pairs:
            numpy_ms = compare(functools.partial(_unfused, q, k, v, dout), reference,
                               pairs=args.numpy_pairs, warmup=1).ratio * result.ref_ms
        rows.append((shape, result, numpy_ms, out_diff, grad_diff))
        print(f"{shape}: {result.ours_ms:.1f} ms vs torch {result.ref_ms:.1f} ms, "
              f"ratio {result.ratio:.2f}", flush=True)

    lines = [
        "| (B, H, T, d_head) | tinyattn ms | torch ms | ratio | numpy unfused ms (ratio) "
        "| max abs out diff | max abs grad diff |",
        "|---|---|---|---|---|---|---|",
    ]
    for shape, result, numpy_ms, out_diff, grad_diff in rows:
        numpy_cell = "—"
        if numpy_ms is not None:
            numpy_cell = f"{numpy_ms:.1f} ({numpy_ms / result.ref_ms:.1f}×)"
        lines.append(f"| {shape} | {result.ours_ms:.1f} | {result.ref_ms:.1f} | "
                     f"{result.ratio:.2f} | {numpy_cell} | {out_diff:.1e} | {grad_diff:.1e} |")
    table = "\n".join(lines)
    print(table)
    header = machine_header()
    report = (
        "# W2 — causal attention forward + backward, float32\n\n"
        f"{header}\n\n"
        f"Command: `{COMMAND} --pairs {args.pairs} --numpy-pairs {args.numpy_pairs}` "
        "(from the repository root). ratio = median over interleaved pairs of tinyattn / torch "
        "(torch: `scaled_dot_product_attention(q, k, v, is_causal=True)` then `.backward(g)`, "
        "2 threads); ms are medians. numpy unfused = the materialising numpy twins, its ms "
        f"derived from its own ratio to torch. First tinyattn call (compile or cache load): "
        f"{compile_s:.2f} s. 1-minute load average before / after the run: "
        f"{load_before:.1f} / {os.getloadavg()[0]:.1f} (the machine is shared; ratios taken in "
        f"interleaved pairs are the figure to read).\n\n{table}\n"
    )
    args.output.write_text(report)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
