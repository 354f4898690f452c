"""W5: a learner's own KV-cache generation script (a GPT-2 of 124M parameters), run as written
by PyTorch and by tinyattn.

The script is :mod:`decode_script` (greedy decoding with a ``torch.cat`` key/value cache, the
same weights on both sides; ``--top-k K`` keeps the K largest logits before each choice, as the
textbooks' ``generate`` does). The PyTorch side runs it with ``python``; the tinyattn side runs
the same file, unchanged, with ``tinyattn run``. Each side runs in a fresh process of its own,
alternating over ``--rounds`` rounds; a process reports the median time of its decoded tokens
after the prompt, the time of its prompt step and its tokens, and its peak resident memory is
read from the kernel's accounting of the finished child. The ratio is the median over rounds of
tinyattn's ms ÷ torch's ms of that round; the tokens of the two sides are compared.

Run from the repository root::

    python benchmarks/bench_decode.py [--rounds 5] [--new 48] [--threads 2] [--top-k K]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "decode_script.py"
TITLE = "# W5 — a learner's KV-cache generation script (GPT-2, 124M), as written (newest first)"


def command(side: str, new: int, threads: int, top_k: int | None) -> list[str]:
    """The command line of one side: the script under ``python`` or under ``tinyattn run``."""
    runner = ["-m", "tinyattn", "run"] if side == "tinyattn" else []
    keep = [] if top_k is None else ["--top-k", str(top_k)]
    return [sys.executable, *runner, str(SCRIPT), "--new", str(new), "--threads", str(threads),
            *keep]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--new", type=int, default=48, help="tokens decoded per process")
    parser.add_argument("--threads", type=int, default=2, help="threads of each side")
    parser.add_argument("--top-k", type=int, default=None,
                        help="keep the K largest logits before each greedy choice")
    parser.add_argument("--output", type=Path, default=HERE / "results_decode.md")
    args = parser.parse_args()

    from timing import (
        alternating_rounds,
        load_average,
        machine_header,
        prepend_section,
        ratio_of_medians,
        run_json_child,
    )

    from tinyattn.kernels.cpu import vector_unit

    load_before = load_average()
    runs = alternating_rounds(["tinyattn", "torch"], args.rounds, lambda side: run_json_child(
        command(side, args.new, args.threads, args.top_k), f"W5 {side}"))
    load_after = load_average()

    def med(side: str, key: str) -> float:
        return float(np.median([run[key] for run in runs[side]]))

    ratio, low, high = ratio_of_medians([run["ms_per_token"] for run in runs["tinyattn"]],
                                        [run["ms_per_token"] for run in runs["torch"]])
    prompt = ratio_of_medians([run["prompt_ms"] for run in runs["tinyattn"]],
                              [run["prompt_ms"] for run in runs["torch"]])[0]
    reference = runs["torch"][0]["tokens"]
    same = [sum(x == y for x, y in zip(run["tokens"], reference, strict=True))
            for run in runs["tinyattn"]]
    rss = med("tinyattn", "peak_rss_mb"), med("torch", "peak_rss_mb")
    keep = "" if args.top_k is None else f" --top-k {args.top_k}"
    cmd = (f"python benchmarks/bench_decode.py --rounds {args.rounds} --new {args.new} "
           f"--threads {args.threads}{keep}")
    choice = "greedily" if args.top_k is None else \
        f"greedily after setting the logits outside the {args.top_k} largest to -inf"
    lines = [
        f"## {machine_header()}",
        "",
        f"Vector unit (numba's target): {vector_unit().describe()}",
        "",
        f"Command: `{cmd}` (from the repository root). `benchmarks/decode_script.py` run as it "
        f"is by `python` (torch) and by `tinyattn run` (tinyattn), each in its own fresh "
        f"process with {args.threads} thread(s), {args.rounds} alternating rounds; each process "
        f"decodes {args.new} tokens after an 8-token prompt, {choice}, with its key/value "
        f"cache; ms = median over rounds of each process's median token; ratio = median over "
        f"rounds of tinyattn ms ÷ torch ms (range {low:.2f}–{high:.2f}). Load average "
        f"(1/5/15 min) before: {load_before}, after: {load_after}.",
        "",
        "| measure | tinyattn | torch | ratio |",
        "|---|---:|---:|---:|",
        f"| ms per decoded token | {med('tinyattn', 'ms_per_token'):.1f} "
        f"| {med('torch', 'ms_per_token'):.1f} | {ratio:.2f}× |",
        f"| ms of the prompt step (8 tokens) | {med('tinyattn', 'prompt_ms'):.1f} "
        f"| {med('torch', 'prompt_ms'):.1f} | {prompt:.2f}× |",
        f"| peak RSS (MB) | {rss[0]:.1f} | {rss[1]:.1f} | {rss[0] / rss[1]:.3f}× |",
        f"| tokens equal to torch's (of {len(reference)}, prompt included), per round "
        f"| {', '.join(map(str, same))} | | |",
    ]
    section = "\n".join(lines)
    print(section)
    prepend_section(args.output, TITLE, section)


if __name__ == "__main__":
    main()
