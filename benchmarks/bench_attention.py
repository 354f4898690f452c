"""W2: causal attention forward + backward, float32, tinyattn's fused kernel vs PyTorch.

Each side runs in a fresh process of its own (numba's and torch's OpenMP threads spin after a
parallel region and steal each other's cores when both live in one process), with 2 threads
(``--threads``).
A child process builds the inputs from a fixed seed, warms up, times ``--calls`` calls and
reports their median; the parent alternates the sides (tinyattn, torch, then torch, tinyattn,
...) over ``--rounds`` rounds and reports, per case, the median over rounds of the ratio of
the two medians. Before timing, one round saves both sides' outputs and gradients and the
parent checks that they agree.

Allocator. Each call returns fresh output arrays (out, lse, dq, dk, dv: 0.5–8 MB each at
these shapes). With glibc's default settings the heap top is given back to the OS between
calls, so a numpy-based kernel faults its outputs in again on every call (0.66 ms of
tinyattn's 1.72 ms at T = 64, on 2026-11-26); torch's timings do not move with the setting.
Every child therefore first applies the allocator setting of tinyattn's training entry points
(``tinyattn run``, ``tinyattn train``: :func:`tinyattn.memory.keep_freed_memory`), torch's
side too; ``--glibc-defaults`` measures without it.

Cases:

* W2 (BENCHMARKS.md): ``scaled_dot_product_attention(q, k, v, is_causal=True)`` then
  ``.backward(g)`` against ``attention_forward`` then ``attention_backward`` (causal), at
  (B, H, T, d_head) = (8, 8, 64, 32), (8, 8, 128, 64), (8, 8, 256, 64), (4, 8, 1024, 64).
  The unfused numpy twins (which materialise the ``(T, S)`` weights) are timed as a third
  side.
* Sliding windows: the fused kernel with ``window_size`` w (causal: query i sees keys
  i − w < j <= i) at T = 1024 and 2048; torch has no window argument, so its side is the same
  band given as a boolean ``attn_mask`` (it then computes every (T, S) block). The kernel's time
  per (B·H·T·w) shows the cost growing with T·w, not T².

Run from the repository root::

    python benchmarks/bench_attention.py [--rounds 5] [--calls 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

COMMAND = "python benchmarks/bench_attention.py"
TITLE = "# W2 — causal attention forward + backward, float32 (newest first)"
THREADS = 2  # per side, unless --threads says otherwise
GLIBC_DEFAULTS = False  # set by --glibc-defaults: children keep glibc's allocator settings
# (B, H, T, d_head), window_size
W2_CASES = [((8, 8, 64, 32), None), ((8, 8, 128, 64), None), ((8, 8, 256, 64), None),
            ((4, 8, 1024, 64), None)]
WINDOW_CASES = [((4, 8, 1024, 64), 128), ((4, 8, 1024, 64), 256), ((4, 8, 1024, 64), 512),
                ((4, 8, 2048, 64), 128), ((4, 8, 2048, 64), 256)]
CASES = W2_CASES + WINDOW_CASES


def _inputs(shape):
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(shape).astype(np.float32) for _ in range(4))


def _band(T, window):
    """Boolean ``(T, T)``: query i may attend key j (causal sliding window)."""
    offset = np.arange(T)[:, None] - np.arange(T)[None, :]  # i − j
    return (offset >= 0) & (offset < window)


def _runner(side, shape, window, threads):
    """The timed callable of one side; returns (out, dq, dk, dv)."""
    q, k, v, dout = _inputs(shape)
    if side == "tinyattn":
        from tinyattn.kernels.attention import attention_backward, attention_forward

        options = dict(is_causal=True, window_size=window) if window else dict(is_causal=True)

        def run():
            out, lse = attention_forward(q, k, v, **options)
            return (out, *attention_backward(q, k, v, out, lse, dout, **options))

        return run
    if side == "numpy":
        from tinyattn.kernels.attention_reference import (
            attention_backward_numpy,
            attention_forward_numpy,
        )

        def run():
            out, lse = attention_forward_numpy(q, k, v, is_causal=True)
            return (out, *attention_backward_numpy(q, k, v, out, lse, dout, is_causal=True))

        return run
    import torch

    torch.set_num_threads(threads)
    tq, tk, tv = (torch.from_numpy(x).requires_grad_(True) for x in (q, k, v))
    tdout = torch.from_numpy(dout)
    mask = None if window is None else torch.from_numpy(_band(shape[2], window))
    options = dict(is_causal=True) if mask is None else dict(attn_mask=mask)

    def run():
        for t in (tq, tk, tv):
            t.grad = None
        out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **options)
        out.backward(tdout)
        return tuple(x.detach().numpy() for x in (out, tq.grad, tk.grad, tv.grad))

    return run


def child(side, case, calls, save, threads, glibc_defaults):
    """In a fresh process: time ``calls`` calls of one side after a warm-up; print JSON."""
    from timing import call_seconds, keep_freed_memory, set_threads

    if not glibc_defaults:
        keep_freed_memory()
    set_threads(side, threads)
    shape, window = CASES[case]
    run = _runner(side, shape, window, threads)
    start = time.perf_counter()
    results = run()
    first_call_s = time.perf_counter() - start
    run()
    times = call_seconds(run, calls)
    if save:
        np.savez(save, *results)
    print(json.dumps({"ms": float(np.median(times) * 1e3), "first_call_s": first_call_s}))


def _run_child(side, case, calls, threads, save=None):
    command = [sys.executable, str(Path(__file__).resolve()), "--child", side, "--case",
               str(case), "--calls", str(calls), "--threads", str(threads)]
    if save:
        command += ["--save", save]
    if GLIBC_DEFAULTS:
        command.append("--glibc-defaults")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{side} child failed on case {CASES[case]}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check_agreement(case, threads):
    """Run both sides once with saved results; return the max |out| and |grad| differences."""
    with tempfile.TemporaryDirectory() as folder:
        paths = {side: os.path.join(folder, f"{side}.npz") for side in ("tinyattn", "torch")}
        first = {side: _run_child(side, case, 1, threads, path) for side, path in paths.items()}
        ours, theirs = (np.load(paths[side]) for side in ("tinyattn", "torch"))
        diffs = [float(np.abs(ours[f"arr_{n}"] - theirs[f"arr_{n}"]).max()) for n in range(4)]
    out_diff, grad_diff = diffs[0], max(diffs[1:])
    if not (out_diff < 1e-4 and grad_diff < 1e-3):
        raise SystemExit(f"{CASES[case]}: tinyattn and torch disagree: |out| {out_diff:.2e}, "
                         f"|grad| {grad_diff:.2e}")
    return out_diff, grad_diff, first["tinyattn"]["first_call_s"]


def _measure(case, sides, rounds, calls, threads):
    """Per side: the median ms over rounds, the median over rounds of its ratio to torch, and
    its best (smallest) ms over rounds."""
    times = {side: [] for side in sides}
    for r in range(rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            times[side].append(_run_child(side, case, calls, threads)["ms"])
    torch_ms = np.array(times["torch"])
    return {side: (float(np.median(ms)), float(np.median(np.array(ms) / torch_ms)),
                   float(np.min(ms))) for side, ms in times.items()}


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per case")
    parser.add_argument("--calls", type=int, default=10, help="timed calls per child process")
    parser.add_argument("--numpy-rounds", type=int, default=1,
                        help="rounds of the unfused numpy twins on the W2 cases (0 skips them)")
    parser.add_argument("--skip-windows", action="store_true", help="only the W2 cases")
    parser.add_argument("--threads", type=int, default=THREADS, help="threads of each side")
    parser.add_argument("--glibc-defaults", action="store_true",
                        help="leave glibc's allocator settings as they are in every child")
    parser.add_argument("--output", type=Path, default=HERE / "results_attention.md")
    parser.add_argument("--child", choices=["tinyattn", "torch", "numpy"], help=argparse.SUPPRESS)
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--save", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.case, args.calls, args.save, args.threads, args.glibc_defaults)
        return
    global GLIBC_DEFAULTS
    GLIBC_DEFAULTS = args.glibc_defaults

    from timing import machine_header

    from tinyattn.kernels.cpu import vector_unit

    header = f"{machine_header()}\n\nVector unit (numba's target): {vector_unit().describe()}"
    print(header, flush=True)
    load_before = _load()
    w2_lines = [
        "| (B, H, T, d_head) | tinyattn ms | torch ms | ratio | ratio of best times "
        "| numpy unfused ms (ratio) | max abs out diff | max abs grad diff |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    window_lines = [
        "| (B, H, T, d_head) | window | tinyattn ms | ns per B·H·T·window | torch band-mask ms "
        "| ratio | ratio of best times | max abs grad diff |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    first_call = None
    for case, (shape, window) in enumerate(CASES):
        if window is not None and args.skip_windows:
            continue
        out_diff, grad_diff, first_call_s = _check_agreement(case, args.threads)
        first_call = first_call_s if first_call is None else first_call
        result = _measure(case, ["tinyattn", "torch"], args.rounds, args.calls, args.threads)
        (ours_ms, ratio, ours_best), (torch_ms, _, torch_best) = (result["tinyattn"],
                                                                  result["torch"])
        best_ratio = ours_best / torch_best
        print(f"{shape} window {window}: {ours_ms:.2f} ms vs torch {torch_ms:.2f} ms, "
              f"ratio {ratio:.2f}, best {ours_best:.2f} vs {torch_best:.2f} ms "
              f"(load {_load()})", flush=True)
        if window is None:
            numpy_cell = "—"
            if args.numpy_rounds:
                numpy_ms, numpy_ratio, _ = _measure(case, ["numpy", "torch"], args.numpy_rounds,
                                                    max(1, args.calls // 3),
                                                    args.threads)["numpy"]
                numpy_cell = f"{numpy_ms:.1f} ({numpy_ratio:.1f}×)"
            w2_lines.append(f"| {shape} | {ours_ms:.2f} | {torch_ms:.2f} | {ratio:.2f}× | "
                            f"{best_ratio:.2f}× | {numpy_cell} | {out_diff:.1e} | "
                            f"{grad_diff:.1e} |")
        else:
            B, H, T, _ = shape
            per_unit_ns = ours_ms * 1e6 / (B * H * T * window)
            window_lines.append(f"| {shape} | {window} | {ours_ms:.1f} | {per_unit_ns:.2f} | "
                                f"{torch_ms:.1f} | {ratio:.2f}× | {best_ratio:.2f}× | "
                                f"{grad_diff:.1e} |")
    load_after = _load()
    tables = "\n".join(w2_lines)
    if not args.skip_windows:
        tables += "\n\nSliding window (causal, `window_size` w):\n\n" + "\n".join(window_lines)
    command = (f"{COMMAND} --rounds {args.rounds} --calls {args.calls} "
               f"--numpy-rounds {args.numpy_rounds} --threads {args.threads}"
               + (" --skip-windows" if args.skip_windows else "")
               + (" --glibc-defaults" if args.glibc_defaults else ""))
    allocator = ("glibc's default allocator settings" if args.glibc_defaults else
                 "glibc keeping freed memory (`tinyattn.memory.keep_freed_memory`, as tinyattn's "
                 "training entry points set it) on both sides")
    section = (
        f"## {header}\n\n"
        f"Command: `{command}` (from the repository root). Each side in its own fresh process, "
        f"{allocator}, "
        f"{args.threads} threads; ms = median over rounds of each process's median of {args.calls} "
        f"calls; ratio = median over {args.rounds} alternating rounds of tinyattn ms / torch ms "
        "(the figure to read); ratio of best times = the smallest tinyattn ms over the rounds / "
        "the smallest torch ms (less sensitive to other work on a shared machine). "
        f"First tinyattn call in a process (numba cache load): {first_call:.2f} s. Load "
        f"average (1/5/15 min) before: {load_before}, after: {load_after}.\n\n{tables}\n"
    )
    print(section)
    earlier = ""
    if args.output.exists():  # keep the tables of earlier runs and machines below the new one
        earlier = args.output.read_text().split("\n", 1)[1].lstrip("\n")
    args.output.write_text(f"{TITLE}\n\n{section}\n{earlier}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
