"""LayerNorm, GELU, softmax, cross-entropy, embedding and AdamW kernels at the W3 shapes, float32.

Each kernel (forward + backward, or one optimizer step) is timed against its plain-numpy twin
and against PyTorch (2 threads, eager autograd / torch.optim) in interleaved pairs, after
checking that all three produce the same numbers. Writes benchmarks/results_kernels.md.

Run: python benchmarks/bench_kernels.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from timing import compare, machine_header

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinyattn.kernels import (  # noqa: E402
    adamw,
    cross_entropy,
    embedding,
    gelu,
    layer_norm,
    softmax,
)

ROWS, D_MODEL, D_MLP, VOCAB = 16 * 64, 128, 512, 65
RESULTS = Path(__file__).with_name("results_kernels.md")


def layer_norm_case(rng):
    x = rng.standard_normal((ROWS, D_MODEL)).astype(np.float32)
    w, b = (rng.standard_normal(D_MODEL).astype(np.float32) for _ in range(2))
    g = rng.standard_normal(x.shape).astype(np.float32)

    def run(forward, backward):
        def step():
            y, mean, rstd = forward(x, w, b, 1e-5)
            return (y, *backward(g, x, w, mean, rstd))
        return step

    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))

    def torch_step():
        tx.grad = tw.grad = tb.grad = None
        y = torch.nn.functional.layer_norm(tx, (D_MODEL,), tw, tb, 1e-5)
        y.backward(torch.from_numpy(g))
        return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()

    return (run(layer_norm.layer_norm_forward, layer_norm.layer_norm_backward),
            run(layer_norm.layer_norm_forward_numpy, layer_norm.layer_norm_backward_numpy),
            torch_step)


def gelu_case(rng, approximate="none"):
    x = rng.standard_normal((ROWS, D_MLP)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)

    def run(forward, backward):
        return lambda: (forward(x, approximate), backward(x, g, approximate))

    tx = torch.tensor(x, requires_grad=True)

    def torch_step():
        tx.grad = None
        y = torch.nn.functional.gelu(tx, approximate=approximate)
        y.backward(torch.from_numpy(g))
        return y.detach().numpy(), tx.grad.numpy()

    return (run(gelu.gelu_forward, gelu.gelu_backward),
            run(gelu.gelu_forward_numpy, gelu.gelu_backward_numpy), torch_step)


def softmax_case(rng, shape):
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)

    def run(forward, backward):
        def step():
            y = forward(x)
            return y, backward(y, g)
        return step

    tx = torch.tensor(x, requires_grad=True)

    def torch_step():
        tx.grad = None
        y = torch.softmax(tx, dim=-1)
        y.backward(torch.from_numpy(g))
        return y.detach().numpy(), tx.grad.numpy()

    return (run(softmax.softmax_forward, softmax.softmax_backward),
            run(softmax.softmax_forward_numpy, softmax.softmax_backward_numpy), torch_step)


def cross_entropy_case(rng):
    logits = (rng.standard_normal((ROWS, VOCAB)) * 2).astype(np.float32)
    target = rng.integers(0, VOCAB, ROWS)
    grad_rows = np.full(ROWS, 1.0 / ROWS, dtype=np.float32)

    def run(forward, backward):
        def step():
            loss, lse = forward(logits, target, -100, 0.0)
            return loss.mean(dtype=np.float64), backward(logits, target, lse, grad_rows, -100, 0.0)
        return step

    t_logits = torch.tensor(logits, requires_grad=True)
    t_target = torch.from_numpy(target)

    def torch_step():
        t_logits.grad = None
        loss = torch.nn.functional.cross_entropy(t_logits, t_target)
        loss.backward()
        return loss.item(), t_logits.grad.numpy()

    return (run(cross_entropy.cross_entropy_forward, cross_entropy.cross_entropy_backward),
            run(cross_entropy.cross_entropy_forward_numpy,
                cross_entropy.cross_entropy_backward_numpy), torch_step)


def embedding_case(rng):
    weight = rng.standard_normal((VOCAB, D_MODEL)).astype(np.float32)
    indices = rng.integers(0, VOCAB, (16, 64))
    g = rng.standard_normal((16, 64, D_MODEL)).astype(np.float32)

    def run(forward, backward):
        return lambda: (forward(weight, indices), backward(g, indices, VOCAB, None))

    t_weight = torch.tensor(weight, requires_grad=True)
    t_indices = torch.from_numpy(indices)

    def torch_step():
        t_weight.grad = None
        out = torch.nn.functional.embedding(t_indices, t_weight)
        out.backward(torch.from_numpy(g))
        return out.detach().numpy(), t_weight.grad.numpy()

    return (run(embedding.embedding_forward, embedding.embedding_backward),
            run(embedding.embedding_forward_numpy, embedding.embedding_backward_numpy),
            torch_step)


def w3_parameter_shapes():
    """The 30 parameter arrays of the W3 model in torch's layout (421,697 elements)."""
    block = [(D_MODEL,), (D_MODEL,), (3 * D_MODEL, D_MODEL), (3 * D_MODEL,),
             (D_MODEL, D_MODEL), (D_MODEL,), (D_MODEL,), (D_MODEL,), (D_MLP, D_MODEL), (D_MLP,),
             (D_MODEL, D_MLP), (D_MODEL,)]
    return ([(VOCAB, D_MODEL), (64, D_MODEL)] + block * 2
            + [(D_MODEL,), (D_MODEL,), (VOCAB, D_MODEL), (VOCAB,)])


def adamw_case(rng):
    shapes = w3_parameter_shapes()
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    hyper = {"lr": 3e-4, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
             "decoupled": True}

    def run(step_fn):
        params = [p.copy() for p in start]
        moments = [[np.zeros_like(p) for p in start] for _ in range(2)]
        count = [0]

        def step():
            count[0] += 1
            step_fn(params, grads, *moments, count[0], **hyper)
            return params
        return step

    t_params = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in start]
    for t_param, g in zip(t_params, grads, strict=True):
        t_param.grad = torch.from_numpy(g)
    optimizer = torch.optim.AdamW(t_params, lr=3e-4)

    def torch_step():
        optimizer.step()
        return [p.detach().numpy() for p in t_params]

    assert sum(int(np.prod(s)) for s in shapes) == 421_697
    return run(adamw.adamw_step), run(adamw.adamw_step_numpy), torch_step


def assert_same(ours, reference, label):
    for a, b in zip(ours, reference, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5, err_msg=label)


def main() -> None:
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    cases = [("LayerNorm fwd+bwd (1024, 128)", layer_norm_case),
             ("GELU exact fwd+bwd (1024, 512)", gelu_case),
             ("GELU tanh fwd+bwd (1024, 512)", lambda rng: gelu_case(rng, "tanh")),
             ("softmax fwd+bwd (16, 4)", lambda rng: softmax_case(rng, (16, 4))),
             ("softmax fwd+bwd (4096, 64)", lambda rng: softmax_case(rng, (4096, 64))),
             ("cross-entropy fwd+bwd (1024, 65)", cross_entropy_case),
             ("embedding fwd+bwd (16, 64) into (65, 128)", embedding_case),
             ("AdamW step, 30 arrays, 421,697 params", adamw_case)]
    rows = []
    load_before = os.getloadavg()[0]
    for label, make in cases:
        ours, twin, torch_step = make(rng)
        start = time.perf_counter()
        first = ours()
        compile_s = time.perf_counter() - start
        if label.startswith("AdamW"):
            ours_check, twin_check, torch_check = (make(np.random.default_rng(1)))
            results = [fn() for fn in (ours_check, twin_check, torch_check)]
        else:
            results = [first, twin(), torch_step()]
        assert_same(results[0], results[1], label + " vs numpy")
        assert_same(results[0], results[2], label + " vs torch")
        vs_numpy = compare(ours, twin)
        vs_torch = compare(ours, torch_step)
        rows.append(f"| {label} | {vs_numpy.ours_ms:.3f} | {vs_numpy.ref_ms:.3f} | "
                    f"{vs_numpy.ratio:.2f} | {vs_torch.ours_ms:.3f} | {vs_torch.ref_ms:.3f} | "
                    f"{vs_torch.ratio:.2f} | {compile_s:.2f} |")
        print(rows[-1], flush=True)
    table = "\n".join([
        "# Kernel benchmarks (float32, W3 shapes)",
        "",
        machine_header(),
        "",
        "Command: `python benchmarks/bench_kernels.py` (torch with 2 threads; medians of 15",
        "interleaved pairs; ratio = median of per-pair ours / reference, < 1 means faster).",
        "First call = compile or cache load, in seconds.",
        "",
        f"1-minute load average before / after: {load_before:.1f} / "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores. Above the core count the",
        "parallel kernels wait on descheduled threads and these times mean little.",
        "",
        "| kernel | ours ms | numpy ms | ours/numpy | ours ms | torch ms | ours/torch "
        "| first call s |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ])
    RESULTS.write_text(table)


if __name__ == "__main__":
    main()
