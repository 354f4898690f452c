"""W4: a learner's own nanoGPT-style training script, run as written by PyTorch and by tinyattn.

The script is :mod:`gpt_script` (nanoGPT's CPU recipe for shakespeare_char: batch 12, context
64, 4 layers × 128, 4 heads, vocabulary 65, and its code patterns). The PyTorch side runs it
with ``python``; the tinyattn side runs the same file, unchanged, with ``tinyattn run``. Each
side runs in a fresh process of its own, alternating over ``--rounds`` rounds; a process
reports the median of its timed iterations (after ``--warmup`` untimed ones), and its peak
resident memory is read from the kernel's accounting of the finished child (``wait4``).
The ratio is the median over rounds of tinyattn's ms ÷ torch's ms of that round.

With ``--sample N`` each process then samples ``N`` tokens from the model it trained, as
nanoGPT's ``sample.py`` does (:mod:`gpt_script`), and the table has the sampling step's forward
pass and the rest of the step, each the median over rounds of the processes' medians, with the
median over rounds of their ratios.

Run from the repository root::

    python benchmarks/bench_script.py [--rounds 5] [--iters 60] [--warmup 10] [--threads 2]
                                      [--sample N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "gpt_script.py"
TITLE = "# W4 — a learner's nanoGPT-style training script, as written (newest first)"


def command(side: str, iters: int, warmup: int, threads: int, sample: int) -> list[str]:
    """The command line of one side: the script under ``python`` or under ``tinyattn run``."""
    runner = ["-m", "tinyattn", "run"] if side == "tinyattn" else []
    return [sys.executable, *runner, str(SCRIPT), "--iters", str(iters), "--warmup",
            str(warmup), "--threads", str(threads), "--sample", str(sample)]


def run_child(side: str, iters: int, warmup: int, threads: int, sample: int) -> dict:
    """One process of ``side``: its JSON line, its wall time and its own peak RSS in MB."""
    from timing import run_json_child

    result = run_json_child(command(side, iters, warmup, threads, sample), f"W4 {side}")
    if not np.isfinite(result["loss"]):
        raise SystemExit(f"W4 {side}: the last loss is not finite")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--iters", type=int, default=60, help="timed iterations per process")
    parser.add_argument("--warmup", type=int, default=10, help="untimed iterations first")
    parser.add_argument("--threads", type=int, default=2, help="threads of each side")
    parser.add_argument("--sample", type=int, default=0,
                        help="then sample this many tokens as nanoGPT's sample.py does")
    parser.add_argument("--output", type=Path, default=HERE / "results_script.md")
    args = parser.parse_args()

    from timing import alternating_rounds, load_average, machine_header, prepend_section

    from tinyattn.kernels.cpu import vector_unit

    load_before = load_average()
    runs = alternating_rounds(["tinyattn", "torch"], args.rounds,
                              lambda side: run_child(side, args.iters, args.warmup,
                                                     args.threads, args.sample))
    load_after = load_average()

    def med(side: str, key: str) -> float:
        return float(np.median([run[key] for run in runs[side]]))

    ratios = np.array([run["ms"] for run in runs["tinyattn"]]) / \
        np.array([run["ms"] for run in runs["torch"]])
    best = [min(run["ms"] for run in runs[side]) for side in ("tinyattn", "torch")]
    rss = med("tinyattn", "peak_rss_mb"), med("torch", "peak_rss_mb")
    walls = med("tinyattn", "wall_s"), med("torch", "wall_s")
    cmd = (f"python benchmarks/bench_script.py --rounds {args.rounds} --iters {args.iters} "
           f"--warmup {args.warmup} --threads {args.threads}")
    if args.sample:
        cmd += f" --sample {args.sample}"
    lines = [
        f"## {machine_header()}",
        "",
        f"Vector unit (numba's target): {vector_unit().describe()}",
        "",
        f"Command: `{cmd}` (from the repository root). `benchmarks/gpt_script.py` run as it is "
        f"by `python` (torch) and by `tinyattn run` (tinyattn), each in its own fresh process "
        f"with {args.threads} thread(s), {args.rounds} alternating rounds of {args.warmup} "
        f"untimed + {args.iters} timed iterations; ms = median over rounds of each process's "
        f"median iteration; ratio = median over rounds of tinyattn ms ÷ torch ms (range "
        f"{ratios.min():.2f}–{ratios.max():.2f}). Load average (1/5/15 min) before: "
        f"{load_before}, after: {load_after}.",
        "",
        "| measure | tinyattn | torch | ratio |",
        "|---|---:|---:|---:|",
        f"| ms per iteration | {med('tinyattn', 'ms'):.1f} | {med('torch', 'ms'):.1f} "
        f"| {np.median(ratios):.2f}× |",
        f"| fastest process's median (ms) | {best[0]:.1f} | {best[1]:.1f} "
        f"| {best[0] / best[1]:.2f}× |",
        f"| process wall time, start to exit (s) | {walls[0]:.1f} | {walls[1]:.1f} "
        f"| {walls[0] / walls[1]:.2f}× |",
        f"| peak RSS (MB) | {rss[0]:.1f} | {rss[1]:.1f} | {rss[0] / rss[1]:.3f}× |",
        f"| last loss (same seed, random tokens) | {med('tinyattn', 'loss'):.3f} "
        f"| {med('torch', 'loss'):.3f} | |",
    ]
    for key, label, unit in (("sample_forward_ms", "sampling: the forward pass on 64 tokens",
                              "ms"),
                             ("sample_rest_us", "sampling: the rest of a step (top-k, masking, "
                              "softmax, multinomial, cat)", "µs")):
        if args.sample:
            ours = np.array([run[key] for run in runs["tinyattn"]])
            theirs = np.array([run[key] for run in runs["torch"]])
            lines.append(f"| {label}, {unit} (median of {args.sample} steps) | "
                         f"{np.median(ours):.2f} | {np.median(theirs):.2f} | "
                         f"{np.median(ours / theirs):.2f}× |")
    section = "\n".join(lines)
    print(section)
    prepend_section(args.output, TITLE, section)


if __name__ == "__main__":
    main()
