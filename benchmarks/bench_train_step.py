"""W3: one training step of a small GPT, tinyattn vs PyTorch eager, each in its own process.

Model (BENCHMARKS.md): vocab 65, d_model 128, 4 heads, 2 pre-LN blocks, MLP 4x with exact GELU,
learned positions, dropout 0.1, final LayerNorm, Linear head, cross-entropy, AdamW lr 3e-4,
context 64, batch 16 — 421,697 parameters. One step = forward, loss, zero_grad, backward,
optimizer step, ``loss.item()``.

The parent first checks, with dropout off, that both sides give the same losses over 5 steps.
Then each side runs in a fresh process of its own (numba's and torch's OpenMP threads spin after
a parallel region and steal each other's cores when both live in one process; the torch process
does not import tinyattn, so its memory is torch's alone), alternating tinyattn, torch, torch,
tinyattn, ... over ``--rounds`` rounds. A process takes one step, then times ``--steps`` steps;
it reports their median, its peak RSS, its resident memory at the end split into anonymous
memory and shared-library pages (whose count depends on the page cache: ``timing.py``), minor
page faults per step and the time from process start to the end of its first step (warm numba
cache). The ratio is the median over rounds of tinyattn's median ÷ torch's. ``--cold`` also
times a tinyattn process with an empty numba cache.

The builders (:func:`tinyattn_model`, :func:`torch_model`, :func:`batch`, ...) are shared with
``bench_hvp.py``.

Run: ``python benchmarks/bench_train_step.py [--rounds 9] [--steps 30] [--threads 2] [--cold]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TITLE = "# W3 — one training step of a small GPT, float32 (newest first)"
LR = 3e-4


@dataclass(frozen=True)
class Shape:
    """Sizes of the model and its batch."""

    vocab: int = 65
    context: int = 64
    width: int = 128
    heads: int = 4
    layers: int = 2
    batch: int = 16
    dropout: float = 0.1


W3 = Shape()


def batch(shape: Shape = W3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and targets, each ``(batch, context)`` int64, from a fixed seed."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, shape.vocab, (shape.batch, shape.context)),
            rng.integers(0, shape.vocab, (shape.batch, shape.context)))


def tinyattn_model(shape: Shape = W3, seed: int = 0):
    """The model in tinyattn, initialised from ``seed``."""
    import tinyattn as ta

    ta.manual_seed(seed)
    return ta.TransformerLM(ta.models.TransformerLMConfig(
        vocab_size=shape.vocab, context_length=shape.context, embed_dim=shape.width,
        num_heads=shape.heads, num_layers=shape.layers, dropout=shape.dropout))


def tinyattn_step(model, idx: np.ndarray, targets: np.ndarray):
    """One AdamW training step of ``model`` on a fixed batch, returning the loss."""
    import tinyattn as ta

    optimizer = ta.optim.AdamW(model.parameters(), lr=LR)
    idx, targets = ta.tensor(idx), ta.tensor(targets)

    def step() -> float:
        _, loss = model(idx, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def torch_state(ours: dict[str, np.ndarray], layers: int) -> dict[str, np.ndarray]:
    """tinyattn's state dict in the names and layout of :func:`torch_model` (the three input
    projections of each attention layer stacked into ``in_proj``)."""
    state = {"tok.weight": ours["token_embedding.weight"],
             "pos.weight": ours["position_embedding.weight"],
             "ln_f.weight": ours["ln_f.weight"], "ln_f.bias": ours["ln_f.bias"],
             "head.weight": ours["lm_head.weight"], "head.bias": ours["lm_head.bias"]}
    for i in range(layers):
        p = f"blocks.{i}."
        for kind in ("weight", "bias"):
            for name in ("ln_1", "ln_2"):
                state[p + f"{name}.{kind}"] = ours[p + f"{name}.{kind}"]
            state[p + f"attn.in_proj_{kind}"] = np.concatenate(
                [ours[p + f"attn.{x}_proj.{kind}"] for x in "qkv"])
            state[p + f"attn.out_proj.{kind}"] = ours[p + f"attn.out_proj.{kind}"]
            for name in ("fc", "proj"):
                state[p + f"{name}.{kind}"] = ours[p + f"mlp.{name}.{kind}"]
    return state


def torch_model(state: dict[str, np.ndarray], shape: Shape = W3):
    """The same model in PyTorch eager with the weights ``state`` (see :func:`torch_state`)
    loaded; float64 if the weights are."""
    import torch
    from torch import nn

    C, p = shape.width, shape.dropout

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.attn = nn.MultiheadAttention(C, shape.heads, dropout=p, batch_first=True)
            self.drop_1 = nn.Dropout(p)
            self.ln_2 = nn.LayerNorm(C)
            self.fc = nn.Linear(C, 4 * C)
            self.proj = nn.Linear(4 * C, C)
            self.drop_2 = nn.Dropout(p)
            mask = torch.triu(torch.ones(shape.context, shape.context), 1).bool()
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, x):
            T = x.shape[1]
            h = self.ln_1(x)
            h, _ = self.attn(h, h, h, attn_mask=self.mask[:T, :T], need_weights=False)
            x = x + self.drop_1(h)
            return x + self.drop_2(self.proj(nn.functional.gelu(self.fc(self.ln_2(x)))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(shape.vocab, C)
            self.pos = nn.Embedding(shape.context, C)
            self.drop = nn.Dropout(p)
            self.blocks = nn.ModuleList(Block() for _ in range(shape.layers))
            self.ln_f = nn.LayerNorm(C)
            self.head = nn.Linear(C, shape.vocab)

        def forward(self, idx):
            x = self.drop(self.tok(idx) + self.pos(torch.arange(idx.shape[1])))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    model = GPT()
    if state["tok.weight"].dtype == np.float64:
        model = model.double()
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})
    return model


def torch_loss(model, idx, targets):
    """Mean cross-entropy of ``model`` on a batch (torch tensors)."""
    from torch import nn

    logits = model(idx)  # (B, T, vocab)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def torch_step(model, idx: np.ndarray, targets: np.ndarray):
    """One AdamW training step of the torch ``model`` on a fixed batch, returning the loss."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    idx, targets = torch.from_numpy(idx), torch.from_numpy(targets)

    def step() -> float:
        loss = torch_loss(model, idx, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def numpy_state(model) -> dict[str, np.ndarray]:
    """A tinyattn model's state dict as numpy arrays."""
    return {k: v.numpy() for k, v in model.state_dict().items()}


def check_agreement() -> str:
    """Without dropout, both sides must produce the same losses over 5 steps (float32)."""
    shape = Shape(dropout=0.0)
    model = tinyattn_model(shape)
    state = torch_state(numpy_state(model), shape.layers)
    reference = torch_step(torch_model(state, shape), *batch(shape))
    ours = tinyattn_step(model, *batch(shape))
    losses = [(ours(), reference()) for _ in range(5)]
    worst = max(abs(a - b) for a, b in losses)
    if worst > 1e-3:
        raise SystemExit(f"W3: tinyattn and torch disagree: losses {losses}")
    return f"losses agree over 5 steps without dropout (max |diff| {worst:.1e})"


def child(side: str, steps: int, weights: str | None, threads: int) -> None:
    """In a fresh process: one step, then ``steps`` timed steps; print the results as JSON."""
    from timing import (
        call_seconds,
        minor_page_faults,
        peak_rss_mb,
        resident_split_mb,
        set_threads,
    )

    set_threads(side, threads)
    if side == "tinyattn":
        import tinyattn as ta

        ta.memory.keep_freed_memory()  # as the training entry points (tinyattn train/run) do
        step = tinyattn_step(tinyattn_model(), *batch())
    else:
        with np.load(weights) as saved:
            step = torch_step(torch_model(dict(saved)), *batch())
    step()
    first_step_end = time.time()
    faults_before = minor_page_faults()
    losses: list[float] = []
    times = call_seconds(lambda: losses.append(step()), steps)
    anonymous_mb, file_backed_mb = resident_split_mb()
    print(json.dumps({
        "first_step_end": first_step_end,
        "ms": float(np.median(times) * 1e3),
        "best_ms": float(np.min(times) * 1e3),
        "peak_rss_mb": peak_rss_mb(),
        "anonymous_mb": anonymous_mb,
        "file_backed_mb": file_backed_mb,
        "faults_per_step": (minor_page_faults() - faults_before) / steps,
        "finite": bool(np.all(np.isfinite(losses))),
    }))


def run_child(side: str, steps: int, weights: str, threads: int,
              env: dict | None = None) -> dict:
    start = time.time()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", side, "--steps", str(steps),
         "--weights", weights, "--threads", str(threads)],
        capture_output=True, text=True, check=False, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise SystemExit(f"W3 {side} child failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not result["finite"]:
        raise SystemExit(f"W3 {side}: a loss was not finite")
    result["start_to_first_step_s"] = result["first_step_end"] - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="alternating rounds")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per process")
    parser.add_argument("--threads", type=int, default=2, help="threads of each side")
    parser.add_argument("--cold", action="store_true",
                        help="also time a tinyattn process with an empty numba cache")
    parser.add_argument("--output", type=Path, default=HERE / "results_train_step.md")
    parser.add_argument("--child", choices=["tinyattn", "torch"], help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.weights, args.threads)
        return

    from timing import alternating_rounds, load_average, machine_header, prepend_section

    from tinyattn.kernels.cpu import vector_unit

    agreement = check_agreement()
    load_before = load_average()
    with tempfile.TemporaryDirectory() as folder:
        weights = os.path.join(folder, "w3.npz")
        np.savez(weights, **torch_state(numpy_state(tinyattn_model()), W3.layers))
        runs = alternating_rounds(["tinyattn", "torch"], args.rounds,
                                  lambda side: run_child(side, args.steps, weights,
                                                         args.threads))
        cold = None
        if args.cold:
            with tempfile.TemporaryDirectory() as cache:
                cold = run_child("tinyattn", 3, weights, args.threads,
                                 env={"NUMBA_CACHE_DIR": cache})
    load_after = load_average()

    def med(side: str, key: str) -> float:
        return float(np.median([run[key] for run in runs[side]]))

    ours_ms, ref_ms = ([run["ms"] for run in runs[side]] for side in ("tinyattn", "torch"))
    ratios = np.array(ours_ms) / np.array(ref_ms)
    rss = med("tinyattn", "peak_rss_mb"), med("torch", "peak_rss_mb")
    best = [min(run["best_ms"] for run in runs[side]) for side in ("tinyattn", "torch")]
    command = (f"python benchmarks/bench_train_step.py --rounds {args.rounds} --steps "
               f"{args.steps} --threads {args.threads}")
    lines = [
        f"## {machine_header()}",
        "",
        f"Vector unit (numba's target): {vector_unit().describe()}",
        "",
        f"Command: `{command}`{' --cold' if args.cold else ''} (from the repository root); "
        f"{agreement}. Each side in its own fresh process with {args.threads} thread(s), "
        f"{args.rounds} alternating rounds of "
        f"{args.steps} timed steps; ms = median over rounds of each process's median step; "
        f"ratio = median over rounds of tinyattn ms ÷ torch ms (range "
        f"{ratios.min():.2f}–{ratios.max():.2f}). Load average (1/5/15 min) before: "
        f"{load_before}, after: {load_after}.",
        "",
        "| measure | tinyattn | torch | ratio |",
        "|---|---:|---:|---:|",
        f"| step time (ms) | {med('tinyattn', 'ms'):.1f} | {med('torch', 'ms'):.1f} "
        f"| {np.median(ratios):.2f}× |",
        f"| fastest step over all rounds (ms; less sensitive to other work) "
        f"| {best[0]:.1f} | {best[1]:.1f} | {best[0] / best[1]:.2f}× |",
        f"| peak RSS (MB) | {rss[0]:.1f} | {rss[1]:.1f} | {rss[0] / rss[1]:.3f}× |",
        f"| resident at the end: anonymous (MB) | {med('tinyattn', 'anonymous_mb'):.0f} "
        f"| {med('torch', 'anonymous_mb'):.0f} "
        f"| {med('tinyattn', 'anonymous_mb') / med('torch', 'anonymous_mb'):.2f}× |",
        f"| resident at the end: shared-library pages (MB; depends on the page cache) "
        f"| {med('tinyattn', 'file_backed_mb'):.0f} | {med('torch', 'file_backed_mb'):.0f} | |",
        f"| minor page faults per step | {med('tinyattn', 'faults_per_step'):.0f} "
        f"| {med('torch', 'faults_per_step'):.0f} | |",
        f"| process start → end of first step, warm numba cache (s) "
        f"| {med('tinyattn', 'start_to_first_step_s'):.2f} "
        f"| {med('torch', 'start_to_first_step_s'):.2f} | |",
    ]
    if cold is not None:
        lines.append(f"| process start → end of first step, cold numba cache (s) "
                     f"| {cold['start_to_first_step_s']:.2f} | | |")
    section = "\n".join(lines)
    print(section)
    prepend_section(args.output, TITLE, section)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
