"""Soak test: 10,000 float32 training steps of the W3 model, resident memory every 500 steps.

Model: ``TransformerLMConfig(vocab_size=65, context_length=64, embed_dim=128, num_heads=4,
num_layers=2, dropout=0.1)``, AdamW lr 3e-4, batches of 16×64 tokens cycling through a fixed
set of 32 random batches (so the loss falls and every step does the same work). A leak of one
graph per step (~10 MB of saved activations) or of one small object per op shows up as RSS that
keeps growing after the first few hundred steps; a healthy run is flat.

Run: ``python benchmarks/soak.py [--steps 10000] [--every 500] [--out benchmarks/results_soak.md]``
(the new table goes first in the results file; earlier runs are kept below it).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import machine_header, prepend_section

TITLE = "# Soak: memory over training steps of the W3 model (newest first)"


def rss_mb() -> float:
    """Resident set size of this process in MB, from ``/proc/self/status`` (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("soak: /proc/self/status has no VmRSS line (Linux only)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__),
                                                      "results_soak.md"))
    args = parser.parse_args()

    import tinyattn as ta

    earlier = ""
    if os.path.exists(args.out):  # rewritten at every report: keep what was there at the start
        with open(args.out) as file:
            earlier = file.read()
    ta.manual_seed(0)
    config = ta.models.TransformerLMConfig(vocab_size=65, context_length=64, embed_dim=128,
                                           num_heads=4, num_layers=2, dropout=0.1)
    model = ta.TransformerLM(config)
    optimizer = ta.optim.AdamW(model.parameters(), lr=3e-4)
    data = np.random.default_rng(0).integers(0, 65, size=(32, 16, 65))  # (batches, B, T + 1)
    rows = []
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        batch = data[step % len(data)]
        idx, targets = ta.tensor(batch[:, :-1]), ta.tensor(batch[:, 1:])  # (16, 64) each
        _, loss = model(idx, targets=targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        value = loss.item()
        if not math.isfinite(value):
            raise RuntimeError(f"soak: loss became {value} at step {step}")
        if step % args.every == 0 or step == 1:
            rows.append((step, value, rss_mb(), len(gc.get_objects()),
                         time.perf_counter() - start, os.getloadavg()[0]))
            print(f"step {step:6d}  loss {value:.4f}  rss {rows[-1][2]:.1f} MB  "
                  f"objects {rows[-1][3]}  {rows[-1][4]:.0f} s", flush=True)
            with open(args.out, "w") as file:
                file.write(earlier)
            prepend_section(args.out, TITLE, report(rows, args.steps))


def report(rows: list[tuple], total_steps: int) -> str:
    """The markdown table so far (rewritten at every report, so a stopped run leaves one)."""
    import numba

    baseline = next((r for r in rows if r[0] >= 500), rows[0])
    last = rows[-1]
    lines = [
        f"## {total_steps:,} steps"
        + ("" if last[0] == total_steps else f" (in progress: {last[0]:,} done)")
        + f" · {machine_header()}",
        "",
        f"W3 model (421,697 parameters), float32, dropout 0.1, AdamW lr 3e-4, batch 16×64; "
        f"numba {numba.threading_layer()} threading layer, {numba.get_num_threads()} "
        f"thread{'s' if numba.get_num_threads() > 1 else ''}. "
        f"Produced by `python benchmarks/soak.py --steps {total_steps}`.",
        "",
        f"| step | loss | RSS (MB) | RSS − RSS@{baseline[0]} (MB) | gc objects | elapsed (s) "
        "| load avg |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for step, value, rss, objects, elapsed, load in rows:
        lines.append(f"| {step} | {value:.4f} | {rss:.1f} | {rss - baseline[2]:+.1f} | "
                     f"{objects} | {elapsed:.0f} | {load:.1f} |")
    lines += ["", f"RSS growth from step {baseline[0]} to step {last[0]}: "
              f"{last[2] - baseline[2]:+.1f} MB; mean step time "
              f"{1000 * last[4] / last[0]:.1f} ms. The load average column shows how busy "
              "the 2-core machine was (other jobs share it), which sets the step time."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
