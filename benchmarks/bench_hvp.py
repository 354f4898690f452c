"""Hessian-vector product of the W3 model's loss w.r.t. all its parameters, tinyattn vs PyTorch.

The model and batch are W3's (``bench_train_step.py`` builds both sides), with dropout off so
that the loss is one deterministic function of the parameters; ``v`` is a fixed standard normal
vector over all 421,697 parameters. Two ways of computing ``H v``, each on both sides:

* **grad of g·v** — ``g = grad(loss, params, create_graph=True)``, then
  ``grad(Σ g·v, params)``: two reverse passes, the second through the recorded first.
* **functional.hvp** — ``ta.autograd.functional.hvp`` and ``torch.autograd.functional.hvp``
  (with ``torch.func.functional_call``): both use the double-vjp trick, one reverse pass more.

torch runs its attention on the composed ("math") path here: its fused CPU attention kernel has
no double backward (``derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward
is not implemented``). tinyattn's fused op differentiates its backward through the composed
path too.

First, in one process, both sides compute ``H v`` both ways in float64 on a small configuration
and must agree to 1e-8 relative (‖difference‖ ÷ ‖torch's H v‖). Then each side runs in a fresh
process of its own in float32, alternating tinyattn, torch, torch, tinyattn, ... over
``--rounds`` rounds; a process times ``--calls`` HVPs of each method after a warm-up. The ratio
is the median over rounds of tinyattn's median ÷ torch's.

Run: ``python benchmarks/bench_hvp.py [--rounds 7] [--calls 5] [--threads 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_train_step import (  # noqa: E402
    W3,
    Shape,
    batch,
    numpy_state,
    tinyattn_model,
    torch_loss,
    torch_model,
    torch_state,
)

TITLE = "# Hessian-vector product of the W3 loss w.r.t. all parameters (newest first)"
METHODS = ("grad of g·v", "functional.hvp")
W3_NO_DROPOUT = Shape(**{**W3.__dict__, "dropout": 0.0})
CHECK_SHAPE = Shape(context=16, width=32, heads=4, layers=2, batch=4, dropout=0.0)


def vectors(model, seed: int = 1) -> dict[str, np.ndarray]:
    """A standard normal ``v`` for every parameter of a tinyattn model, in its dtype."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(p.shape).astype(p.dtype)
            for name, p in model.named_parameters()}


def tinyattn_hvps(shape: Shape, dtype: str, v_seed: int = 1):
    """Both HVP methods on tinyattn's model; each returns ``H v`` by parameter name."""
    import tinyattn as ta

    model = tinyattn_model(shape)
    if dtype == "float64":
        model = model.double()
    names = [name for name, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    vs = [ta.tensor(x) for x in vectors(model, v_seed).values()]
    idx, targets = (ta.tensor(x) for x in batch(shape))

    def grad_of_gv() -> dict[str, np.ndarray]:
        _, loss = model(idx, targets)
        grads = ta.autograd.grad(loss, params, create_graph=True)
        dot = sum((g * v).sum() for g, v in zip(grads, vs))
        return dict(zip(names, (h.numpy() for h in ta.autograd.grad(dot, params))))

    modules = dict(model.named_modules())
    owners = [(modules[name.rpartition(".")[0]], name.rpartition(".")[2]) for name in names]

    def loss_of(*leaves):  # the loss as a function of the parameters
        for (module, attr), leaf in zip(owners, leaves):
            module._parameters[attr] = leaf
        try:
            return model(idx, targets)[1]
        finally:
            for (module, attr), param in zip(owners, params):
                module._parameters[attr] = param

    def functional_hvp() -> dict[str, np.ndarray]:
        _, hv = ta.autograd.functional.hvp(loss_of, tuple(p.detach() for p in params), tuple(vs))
        return dict(zip(names, (h.numpy() for h in hv)))

    return model, {"grad of g·v": grad_of_gv, "functional.hvp": functional_hvp}


def torch_hvps(state: dict[str, np.ndarray], v: dict[str, np.ndarray], shape: Shape):
    """Both HVP methods on the torch model with weights ``state`` and vector ``v`` (both in
    torch's layout); each returns ``H v`` by torch parameter name."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def math_attention():  # the fused CPU attention kernel has no double backward
        return sdpa_kernel(SDPBackend.MATH)

    model = torch_model(state, shape)
    names = [name for name, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    vs = tuple(torch.from_numpy(np.array(v[name])) for name in names)
    idx, targets = (torch.from_numpy(x) for x in batch(shape))

    def grad_of_gv() -> dict[str, np.ndarray]:
        with math_attention():
            loss = torch_loss(model, idx, targets)
            grads = torch.autograd.grad(loss, params, create_graph=True)
            dot = sum((g * x).sum() for g, x in zip(grads, vs))
            return dict(zip(names, (h.numpy() for h in torch.autograd.grad(dot, params))))

    def loss_of(*leaves):  # the loss as a function of the parameters
        bound = dict(zip(names, leaves))
        return torch_loss(lambda x: torch.func.functional_call(model, bound, (x,)), idx,
                          targets)

    def functional_hvp() -> dict[str, np.ndarray]:
        detached = tuple(p.detach() for p in params)
        with math_attention():
            _, hv = torch.autograd.functional.hvp(loss_of, detached, vs)
        return dict(zip(names, (h.numpy() for h in hv)))

    return {"grad of g·v": grad_of_gv, "functional.hvp": functional_hvp}


def check_agreement() -> str:
    """Float64 on a small configuration: both methods on both sides agree to 1e-8 relative."""
    model, ours = tinyattn_hvps(CHECK_SHAPE, "float64")
    state = torch_state(numpy_state(model), CHECK_SHAPE.layers)
    v = torch_state(vectors(model), CHECK_SHAPE.layers)
    theirs = torch_hvps(state, v, CHECK_SHAPE)
    reference = theirs["functional.hvp"]()
    ref_flat = np.concatenate([x.ravel() for x in reference.values()])
    worst = 0.0
    for method in METHODS:
        found = {"tinyattn": torch_state(ours[method](), CHECK_SHAPE.layers),
                 "torch": theirs[method]()}
        for side, hv in found.items():
            flat = np.concatenate([hv[name].ravel() for name in reference])
            error = float(np.linalg.norm(flat - ref_flat) / np.linalg.norm(ref_flat))
            if not error <= 1e-8:
                raise SystemExit(f"HVP: {side} {method} differs from torch functional.hvp by "
                                 f"{error:.1e} relative (float64, {CHECK_SHAPE})")
            worst = max(worst, error)
    c = CHECK_SHAPE
    return (f"float64 check (context {c.context}, width {c.width}, {c.heads} heads, {c.layers} "
            f"layers, batch {c.batch}): both methods on both sides agree with torch's "
            f"functional.hvp to {worst:.1e} relative")


def child(side: str, calls: int, files: str | None, threads: int) -> None:
    """In a fresh process: time ``calls`` HVPs of each method (float32); print JSON."""
    from timing import call_seconds, peak_rss_mb, set_threads

    set_threads(side, threads)
    if side == "tinyattn":
        _, methods = tinyattn_hvps(W3_NO_DROPOUT, "float32")
    else:
        state_file, v_file = files.split(",")
        with np.load(state_file) as state, np.load(v_file) as v:
            methods = torch_hvps(dict(state), dict(v), W3_NO_DROPOUT)
    result = {}
    for method, run in methods.items():
        run()
        times = call_seconds(run, calls)
        result[method] = float(np.median(times) * 1e3)
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


def run_child(side: str, calls: int, files: str, threads: int) -> dict:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", side, "--calls", str(calls),
         "--files", files, "--threads", str(threads)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"HVP {side} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    parser.add_argument("--calls", type=int, default=5, help="timed HVPs per method and process")
    parser.add_argument("--threads", type=int, default=2, help="threads of each side")
    parser.add_argument("--output", type=Path, default=HERE / "results_hvp.md")
    parser.add_argument("--child", choices=["tinyattn", "torch"], help=argparse.SUPPRESS)
    parser.add_argument("--files", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls, args.files, args.threads)
        return

    from timing import alternating_rounds, load_average, machine_header, prepend_section

    from tinyattn.kernels.cpu import vector_unit

    agreement = check_agreement()
    print(agreement, flush=True)
    load_before = load_average()
    with tempfile.TemporaryDirectory() as folder:
        model = tinyattn_model(W3_NO_DROPOUT)
        files = os.path.join(folder, "state.npz"), os.path.join(folder, "v.npz")
        np.savez(files[0], **torch_state(numpy_state(model), W3.layers))
        np.savez(files[1], **torch_state(vectors(model), W3.layers))
        runs = alternating_rounds(["tinyattn", "torch"], args.rounds,
                                  lambda side: run_child(side, args.calls, ",".join(files),
                                                         args.threads))
    load_after = load_average()
    rows = []
    for ours_method, ref_method in [(m, m) for m in METHODS] + [METHODS]:
        ours = np.array([run[ours_method] for run in runs["tinyattn"]])
        ref = np.array([run[ref_method] for run in runs["torch"]])
        ratios = ours / ref
        rows.append(f"| tinyattn {ours_method} ÷ torch {ref_method} | {np.median(ours):.1f} | "
                    f"{np.median(ref):.1f} | {np.median(ratios):.2f}× | "
                    f"{ratios.min():.2f}–{ratios.max():.2f} |")
    rss = [np.median([run["peak_rss_mb"] for run in runs[side]]) for side in ("tinyattn",
                                                                            "torch")]
    command = (f"python benchmarks/bench_hvp.py --rounds {args.rounds} --calls {args.calls} "
               f"--threads {args.threads}")
    section = "\n".join([
        f"## {machine_header()}",
        "",
        f"Vector unit (numba's target): {vector_unit().describe()}",
        "",
        f"Command: `{command}` (from the repository root); {agreement}. Float32, W3 model and "
        f"batch with dropout off, each side in its own fresh process with {args.threads} "
        f"thread(s), {args.rounds} alternating "
        f"rounds of {args.calls} HVPs per method; ms = median over rounds of each process's "
        "median; ratio = median over rounds of tinyattn ms ÷ torch ms. Peak RSS of a process "
        f"(both methods): tinyattn {rss[0]:.0f} MB, torch {rss[1]:.0f} MB. Load average "
        f"(1/5/15 min) before: {load_before}, after: {load_after}.",
        "",
        "| comparison | tinyattn ms | torch ms | ratio | ratio range |",
        "|---|---:|---:|---:|---:|",
        *rows,
    ])
    print(section)
    prepend_section(args.output, TITLE, section)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
