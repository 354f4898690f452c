"""LayerNorm, GELU, softmax, cross-entropy, embedding and AdamW kernels at the W3 shapes, float32.

Three sides: tinyattn's numba kernels, their plain-numpy twins and PyTorch (eager autograd /
``torch.optim``). Each case is one forward + backward (or one optimizer step) on inputs built
from a fixed seed. The parent first runs all three sides once on every case and checks that
they produce the same numbers. Then each side runs in a fresh process of its own (numba's and
torch's OpenMP threads spin after a parallel region and steal each other's cores when both live
in one process), alternating tinyattn, numpy, torch, then torch, numpy, tinyattn, ... over
``--rounds`` rounds. A process times every case: a first call (the numba cache load, or the
compile on an empty cache), one warm-up call, then ``--calls`` timed calls, of which it reports
the median. A figure is the median over rounds of the ratio of the two sides' medians.
Writes benchmarks/results_kernels.md (newest run first).

Run: ``python benchmarks/bench_kernels.py [--rounds 5] [--calls 21] [--threads 2]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

ROWS, D_MODEL, D_MLP, VOCAB = 16 * 64, 128, 512, 65
SIDES = ("tinyattn", "numpy", "torch")
TITLE = "# Kernel benchmarks (float32, W3 shapes; newest first)"


def _kernels(module: str, side: str, *names: str):
    """The tinyattn kernels ``names`` of ``tinyattn.kernels.<module>``, or their numpy twins."""
    import importlib

    found = importlib.import_module(f"tinyattn.kernels.{module}")
    suffix = "_numpy" if side == "numpy" else ""
    return [getattr(found, name + suffix) for name in names]


def layer_norm_case(rng, side):
    x = rng.standard_normal((ROWS, D_MODEL)).astype(np.float32)
    w, b = (rng.standard_normal(D_MODEL).astype(np.float32) for _ in range(2))
    g = rng.standard_normal(x.shape).astype(np.float32)
    if side == "torch":
        import torch

        tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))

        def torch_step():
            tx.grad = tw.grad = tb.grad = None
            y = torch.nn.functional.layer_norm(tx, (D_MODEL,), tw, tb, 1e-5)
            y.backward(torch.from_numpy(g))
            return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()
        return torch_step
    forward, backward = _kernels("layer_norm", side, "layer_norm_forward", "layer_norm_backward")

    def step():
        y, mean, rstd = forward(x, w, b, 1e-5)
        return (y, *backward(g, x, w, mean, rstd))
    return step


def gelu_case(rng, side, approximate="none"):
    x = rng.standard_normal((ROWS, D_MLP)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    if side == "torch":
        import torch

        tx = torch.tensor(x, requires_grad=True)

        def torch_step():
            tx.grad = None
            y = torch.nn.functional.gelu(tx, approximate=approximate)
            y.backward(torch.from_numpy(g))
            return y.detach().numpy(), tx.grad.numpy()
        return torch_step
    forward, backward = _kernels("gelu", side, "gelu_forward", "gelu_backward")
    return lambda: (forward(x, approximate), backward(x, g, approximate))


def softmax_case(rng, side, shape):
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    if side == "torch":
        import torch

        tx = torch.tensor(x, requires_grad=True)

        def torch_step():
            tx.grad = None
            y = torch.softmax(tx, dim=-1)
            y.backward(torch.from_numpy(g))
            return y.detach().numpy(), tx.grad.numpy()
        return torch_step
    forward, backward = _kernels("softmax", side, "softmax_forward", "softmax_backward")

    def step():
        y = forward(x)
        return y, backward(y, g)
    return step


def cross_entropy_case(rng, side):
    logits = (rng.standard_normal((ROWS, VOCAB)) * 2).astype(np.float32)
    target = rng.integers(0, VOCAB, ROWS)
    grad_rows = np.full(ROWS, 1.0 / ROWS, dtype=np.float32)
    if side == "torch":
        import torch

        t_logits = torch.tensor(logits, requires_grad=True)
        t_target = torch.from_numpy(target)

        def torch_step():
            t_logits.grad = None
            loss = torch.nn.functional.cross_entropy(t_logits, t_target)
            loss.backward()
            return loss.item(), t_logits.grad.numpy()
        return torch_step
    forward, backward = _kernels("cross_entropy", side, "cross_entropy_forward",
                                 "cross_entropy_backward")

    def step():
        loss, lse = forward(logits, target, -100, 0.0)
        return loss.mean(dtype=np.float64), backward(logits, target, lse, grad_rows, -100, 0.0)
    return step


def embedding_case(rng, side):
    weight = rng.standard_normal((VOCAB, D_MODEL)).astype(np.float32)
    indices = rng.integers(0, VOCAB, (16, 64))
    g = rng.standard_normal((16, 64, D_MODEL)).astype(np.float32)
    if side == "torch":
        import torch

        t_weight = torch.tensor(weight, requires_grad=True)
        t_indices = torch.from_numpy(indices)

        def torch_step():
            t_weight.grad = None
            out = torch.nn.functional.embedding(t_indices, t_weight)
            out.backward(torch.from_numpy(g))
            return out.detach().numpy(), t_weight.grad.numpy()
        return torch_step
    forward, backward = _kernels("embedding", side, "embedding_forward", "embedding_backward")
    return lambda: (forward(weight, indices), backward(g, indices, VOCAB, None))


def w3_parameter_shapes():
    """The 30 parameter arrays of the W3 model in torch's layout (421,697 elements)."""
    block = [(D_MODEL,), (D_MODEL,), (3 * D_MODEL, D_MODEL), (3 * D_MODEL,),
             (D_MODEL, D_MODEL), (D_MODEL,), (D_MODEL,), (D_MODEL,), (D_MLP, D_MODEL), (D_MLP,),
             (D_MODEL, D_MLP), (D_MODEL,)]
    return ([(VOCAB, D_MODEL), (64, D_MODEL)] + block * 2
            + [(D_MODEL,), (D_MODEL,), (VOCAB, D_MODEL), (VOCAB,)])


def adamw_case(rng, side):
    """One AdamW step over the W3 parameters; every call takes the next step from the state
    the previous call left (the step counts of the three sides stay equal)."""
    shapes = w3_parameter_shapes()
    assert sum(int(np.prod(s)) for s in shapes) == 421_697
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if side == "torch":
        import torch

        t_params = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in start]
        for t_param, g in zip(t_params, grads, strict=True):
            t_param.grad = torch.from_numpy(g)
        optimizer = torch.optim.AdamW(t_params, lr=3e-4)

        def torch_step():
            optimizer.step()
            return [p.detach().numpy() for p in t_params]
        return torch_step
    (adamw_step,) = _kernels("adamw", side, "adamw_step")
    hyper = {"lr": 3e-4, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
             "decoupled": True}
    params = [p.copy() for p in start]
    moments = [[np.zeros_like(p) for p in start] for _ in range(2)]
    count = [0]

    def step():
        count[0] += 1
        adamw_step(params, grads, *moments, count[0], **hyper)
        return params
    return step


CASES = [("LayerNorm fwd+bwd (1024, 128)", layer_norm_case),
         ("GELU exact fwd+bwd (1024, 512)", gelu_case),
         ("GELU tanh fwd+bwd (1024, 512)", lambda rng, side: gelu_case(rng, side, "tanh")),
         ("softmax fwd+bwd (16, 4)", lambda rng, side: softmax_case(rng, side, (16, 4))),
         ("softmax fwd+bwd (4096, 64)", lambda rng, side: softmax_case(rng, side, (4096, 64))),
         ("cross-entropy fwd+bwd (1024, 65)", cross_entropy_case),
         ("embedding fwd+bwd (16, 64) into (65, 128)", embedding_case),
         ("AdamW step, 30 arrays, 421,697 params", adamw_case)]


def _step(case: int, side: str):
    """The step function of one case and side, on the inputs of the case's own seed."""
    return CASES[case][1](np.random.default_rng(case), side)


def check_agreement() -> None:
    """Every case, one call per side in this process: all three must give the same numbers."""
    for case, (label, _) in enumerate(CASES):
        ours, twin, reference = (_step(case, side)() for side in SIDES)
        for name, other in (("numpy", twin), ("torch", reference)):
            for a, b in zip(ours, other, strict=True):
                np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5,
                                           err_msg=f"{label}: tinyattn vs {name}")


def child(side: str, calls: int, threads: int) -> None:
    """In a fresh process: every case of one side, timed; print JSON."""
    from timing import call_seconds, set_threads

    set_threads(side, threads)
    results = []
    for case in range(len(CASES)):
        step = _step(case, side)
        start = time.perf_counter()
        step()
        first_call_s = time.perf_counter() - start
        step()
        times = call_seconds(step, calls)
        results.append({"ms": float(np.median(times) * 1e3), "first_call_s": first_call_s})
    print(json.dumps(results))


def _run_child(side: str, calls: int, threads: int) -> list[dict]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", side, "--calls",
               str(calls), "--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{side} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--calls", type=int, default=21, help="timed calls per case and process")
    parser.add_argument("--threads", type=int, default=2, help="threads of each side")
    parser.add_argument("--output", type=Path, default=HERE / "results_kernels.md")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls, args.threads)
        return

    from timing import (
        alternating_rounds,
        load_average,
        machine_header,
        prepend_section,
        ratio_of_medians,
    )

    from tinyattn.kernels.cpu import vector_unit

    check_agreement()
    load_before = load_average()
    runs = alternating_rounds(list(SIDES), args.rounds,
                              lambda side: _run_child(side, args.calls, args.threads))
    load_after = load_average()
    rows = []
    for case, (label, _) in enumerate(CASES):
        ms = {side: [run[case]["ms"] for run in runs[side]] for side in SIDES}
        vs_numpy = ratio_of_medians(ms["tinyattn"], ms["numpy"])
        vs_torch = ratio_of_medians(ms["tinyattn"], ms["torch"])
        first_call = np.median([run[case]["first_call_s"] for run in runs["tinyattn"]])
        rows.append(f"| {label} | {np.median(ms['tinyattn']):.3f} | {np.median(ms['numpy']):.3f}"
                    f" | {vs_numpy[0]:.2f}× | {np.median(ms['torch']):.3f} | "
                    f"{vs_torch[0]:.2f}× ({vs_torch[1]:.2f}–{vs_torch[2]:.2f}) | "
                    f"{first_call:.3f} |")
    command = (f"python benchmarks/bench_kernels.py --rounds {args.rounds} --calls {args.calls} "
               f"--threads {args.threads}")
    section = "\n".join([
        f"## {machine_header()}",
        "",
        f"Vector unit (numba's target): {vector_unit().describe()}",
        "",
        f"Command: `{command}` (from the repository root); the three sides agree on every case. "
        f"Each side in its own fresh process with {args.threads} thread(s), {args.rounds} "
        f"alternating rounds; ms = median over rounds of each process's median of {args.calls} "
        "calls; ratio = median over rounds of tinyattn ms ÷ the other side's ms (< 1: tinyattn "
        "is faster; the range over rounds in brackets). First call: tinyattn's first call in a "
        "process (a numba cache load), in seconds. Load average (1/5/15 min) before: "
        f"{load_before}, after: {load_after}.",
        "",
        "| kernel | tinyattn ms | numpy ms | ÷ numpy | torch ms | ÷ torch (range) "
        "| first call s |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
    ])
    print(section)
    prepend_section(args.output, TITLE, section)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
