"""What the hook points cost when no hook is set: a W3 training step with and without them.

Side A is the W3 model as it is (24 hook points, none set: each costs one ``Module.__call__``
and a loop over an empty list). Side B is the same model with every hook point taken out of the
module tree and replaced by a plain identity callable. Each side runs in its own fresh process
(BENCHMARKS.md), alternating A, B, A, B over ``--rounds``; a process warms up, then takes the
median of ``--steps`` step times. The figure is the median over rounds of the ratio A / B.

Run: ``python benchmarks/bench_hook_points.py [--rounds 6] [--steps 30] [--out FILE]``
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


class Identity:
    """A plain callable in place of a hook point (not a Module; ``active`` as the layers ask)."""

    active = False

    def __call__(self, x):
        return x


def child(side: str, steps: int) -> None:
    from bench_train_step import batch, tinyattn_model, tinyattn_step
    from timing import call_seconds

    from tinyattn.nn.hooks import HookPoint

    model = tinyattn_model()
    step = tinyattn_step(model, *batch())
    if side == "without":
        for _, module in list(model.named_modules()):
            for name, sub in list(module._modules.items()):
                if isinstance(sub, HookPoint):
                    delattr(module, name)  # unregister the child, then
                    setattr(module, name, Identity())  # a plain attribute, not a module
        assert not any(isinstance(m, HookPoint) for m in model.modules())
    for _ in range(3):
        step()
    times = call_seconds(step, steps)
    points = sum(isinstance(m, HookPoint) for m in model.modules())
    print(json.dumps({"median_ms": float(np.median(times) * 1e3), "hook_points": points}))


def per_call_ns(calls: int = 100_000, batches: int = 20) -> dict[str, float]:
    """The time of one call of an idle hook point and of the plain callable, in ns."""
    import tinyattn as ta
    from tinyattn.nn.hooks import HookPoint

    x = ta.zeros(2)
    sides = {"hook point": HookPoint(), "plain": Identity()}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(batches):
        for name in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
            fn = sides[name]
            start = time.perf_counter()
            for _ in range(calls):
                fn(x)
            times[name].append((time.perf_counter() - start) / calls * 1e9)
    return {name: float(np.median(t)) for name, t in times.items()}


def run_child(side: str, steps: int) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", side,
                          "--steps", str(steps)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", default=None, help="append the markdown table to this file")
    parser.add_argument("--child", choices=["with", "without"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps)
        return

    from timing import machine_header

    from tinyattn.kernels.cpu import vector_unit

    call_ns = per_call_ns()
    runs: dict[str, list[dict]] = {"with": [], "without": []}
    for i in range(args.rounds):
        for side in (("with", "without") if i % 2 == 0 else ("without", "with")):
            runs[side].append(run_child(side, args.steps))
    ratios = [a["median_ms"] / b["median_ms"] for a, b in zip(runs["with"], runs["without"])]
    medians = {side: float(np.median([r["median_ms"] for r in rs])) for side, rs in runs.items()}
    lines = [
        f"Hook points, W3 step — {machine_header()}",
        f"Vector unit: {vector_unit().describe()}",
        "",
        f"Command: `python benchmarks/bench_hook_points.py --rounds {args.rounds} --steps "
        f"{args.steps}`",
        "",
        "| side | hook points | step time, median over rounds of per-process medians (ms) |",
        "|---|---:|---:|",
        f"| with hook points, none set | {runs['with'][0]['hook_points']} | "
        f"{medians['with']:.1f} |",
        f"| hook points replaced by a plain callable | {runs['without'][0]['hook_points']} | "
        f"{medians['without']:.1f} |",
        "",
        f"Ratio with / without, median over {args.rounds} rounds: "
        f"**{float(np.median(ratios)):.3f}×** (per round: "
        + ", ".join(f"{r:.3f}" for r in ratios) + ").",
        "",
        f"One call, median of 20 interleaved batches of 100,000: an idle hook point "
        f"{call_ns['hook point']:.0f} ns, the plain callable {call_ns['plain']:.0f} ns; the "
        f"{runs['with'][0]['hook_points']} hook points of a step add "
        f"{runs['with'][0]['hook_points'] * (call_ns['hook point'] - call_ns['plain']) / 1e3:.1f}"
        f" µs to a {medians['with']:.1f} ms step.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
