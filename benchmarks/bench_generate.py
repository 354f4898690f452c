"""Generation with and without the key/value cache: tokens per second of
``TransformerLM.generate`` for the ``tinyattn train --text`` model (TEXT_MODEL: width 128,
4 heads, 2 blocks, context 64, the vocabulary of tinyshakespeare, the default corpus).

Rows: learned positions, 8-character prompt, 256 new tokens (past the context the cache must
be re-started at every step: learned positions shift); the same model within its context
(1-character prompt, 63 new tokens); the RoPE variant, 256 new tokens (its cache slides; the
composed attention path on both sides); and the model with a context of 256, within it.
Each side runs in its own fresh process, alternating cache / no cache over ``--rounds``
rounds; in each process generation runs once to compile, then ``--repeats`` timed times.
Figure: the median over rounds of the ratio of the two sides' median times. One numba
thread, as ``tinyattn sample`` uses by default.

Run: ``python benchmarks/bench_generate.py [--rounds 5] [--out benchmarks/results_generate.md]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ROWS = {  # name -> (config fields, prompt length, new tokens, impl)
    "learned, 8 + 256 tokens (past the context)": ({}, 8, 256, "auto"),
    "learned, 1 + 63 tokens (within the context)": ({}, 1, 63, "auto"),
    "rope, 8 + 256 tokens (past the context)": ({"positional": "rope"}, 8, 256, "composed"),
    "learned, context 256, 1 + 255 tokens (within it)": ({"context_length": 256}, 1, 255,
                                                         "auto"),
}


def build(fields: dict, impl: str):
    """The untrained TEXT_MODEL (weights do not change the cost), seeded, in eval mode."""
    import tinyattn as ta
    from tinyattn.models import TransformerLMConfig
    from tinyattn.tasks import CharDataset, default_corpus
    from tinyattn.train import TEXT_MODEL

    text = default_corpus()
    dataset = CharDataset(text, context_length=64)
    ta.manual_seed(0)
    config = TransformerLMConfig(dataset.vocab_size, **{"context_length": 64, **fields},
                                 **TEXT_MODEL, impl=impl)
    return ta.TransformerLM(config).eval(), dataset.encode(text)


def child(row: str, use_cache: bool, repeats: int) -> None:
    import tinyattn as ta
    from tinyattn.train import set_threads

    set_threads(1)
    fields, prompt_len, new_tokens, impl = ROWS[row]
    model, corpus = build(fields, impl)
    prompt = ta.tensor(corpus[None, :prompt_len])
    ta.manual_seed(1)
    tokens = model.generate(prompt, new_tokens, top_k=1, use_cache=use_cache)  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.generate(prompt, new_tokens, top_k=1, use_cache=use_cache)
        times.append(time.perf_counter() - start)
    print(json.dumps({"seconds": float(np.median(times)),
                      "tokens": tokens.numpy()[0].tolist()}))


def run_child(row: str, use_cache: bool, repeats: int) -> dict:
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", row, "--repeats", str(repeats)]
        + (["--use-cache"] if use_cache else []),
        capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the markdown table to this file")
    parser.add_argument("--child", choices=sorted(ROWS), help=argparse.SUPPRESS)
    parser.add_argument("--use-cache", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.use_cache, args.repeats)
        return

    from timing import machine_header

    from tinyattn.kernels.cpu import vector_unit

    lines = [f"Generation — {machine_header()}", "",
             f"Vector unit: {vector_unit().describe()}", "",
             f"Command: `python benchmarks/bench_generate.py --rounds {args.rounds} --repeats "
             f"{args.repeats}`; greedy decoding (top_k=1), one numba thread; each side in its "
             "own process, alternating; the greedy tokens of both sides are checked equal.", "",
             "| generation | with cache (tokens/s) | without cache (tokens/s) | speed-up |",
             "|---|---:|---:|---:|"]
    for row, (_, _, new_tokens, _) in ROWS.items():
        cached, recomputed, ratios = [], [], []
        for i in range(args.rounds):
            order = (True, False) if i % 2 == 0 else (False, True)
            results = {use_cache: run_child(row, use_cache, args.repeats) for use_cache in order}
            if results[True]["tokens"] != results[False]["tokens"]:
                raise SystemExit(f"{row}: cached and recomputed greedy tokens differ")
            cached.append(results[True]["seconds"])
            recomputed.append(results[False]["seconds"])
            ratios.append(results[False]["seconds"] / results[True]["seconds"])
        lines.append(f"| {row} | {new_tokens / np.median(cached):.0f} "
                     f"| {new_tokens / np.median(recomputed):.0f} | {np.median(ratios):.2f}× |")
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as file:
            file.write(table + "\n")


if __name__ == "__main__":
    main()
