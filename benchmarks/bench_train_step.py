"""W3: one training step of a small GPT, tinyattn vs PyTorch eager, side by side in one process.

Model (BENCHMARKS.md): vocab 65, d_model 128, 4 heads, 2 pre-LN blocks, MLP 4x with exact GELU,
learned positions, dropout 0.1, final LayerNorm, Linear head, cross-entropy, AdamW lr 3e-4,
context 64, batch 16 — 421,697 parameters. One step = forward, loss, zero_grad, backward,
optimizer step, ``loss.item()``.

Also measured, each in a fresh process of its own (so that the other library's memory and
threads do not count — two OpenMP runtimes in one process can slow each other down): the median
step time, peak RSS and minor page faults over 30 steps, and the time from process start to the
end of the first step with a warm and with a cold numba cache.

Run: ``python benchmarks/bench_train_step.py [--pairs 20] [--out benchmarks/results_train_step.md]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

VOCAB, CONTEXT, WIDTH, HEADS, LAYERS, BATCH, DROPOUT, LR = 65, 64, 128, 4, 2, 16, 0.1, 3e-4


def tinyattn_setup(dropout: float = DROPOUT, seed: int = 0):
    """The W3 model, optimizer and a fixed batch in tinyattn."""
    import tinyattn as ta

    ta.manual_seed(seed)
    config = ta.models.TransformerLMConfig(
        vocab_size=VOCAB, context_length=CONTEXT, embed_dim=WIDTH, num_heads=HEADS,
        num_layers=LAYERS, dropout=dropout,
    )
    model = ta.TransformerLM(config)
    optimizer = ta.optim.AdamW(model.parameters(), lr=LR)
    rng = np.random.default_rng(seed)
    idx = ta.tensor(rng.integers(0, VOCAB, (BATCH, CONTEXT)))
    targets = ta.tensor(rng.integers(0, VOCAB, (BATCH, CONTEXT)))

    def step() -> float:
        _, loss = model(idx, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return model, step


def torch_setup(tinyattn_model, dropout: float = DROPOUT, seed: int = 0):
    """The same model in PyTorch eager, with the tinyattn model's weights copied in."""
    import torch
    from torch import nn

    torch.set_num_threads(2)
    torch.manual_seed(seed)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(WIDTH)
            self.attn = nn.MultiheadAttention(WIDTH, HEADS, dropout=dropout, batch_first=True)
            self.drop_1 = nn.Dropout(dropout)
            self.ln_2 = nn.LayerNorm(WIDTH)
            self.fc = nn.Linear(WIDTH, 4 * WIDTH)
            self.proj = nn.Linear(4 * WIDTH, WIDTH)
            self.drop_2 = nn.Dropout(dropout)
            self.register_buffer("mask", torch.triu(torch.ones(CONTEXT, CONTEXT), 1).bool())

        def forward(self, x):
            h = self.ln_1(x)
            h, _ = self.attn(h, h, h, attn_mask=self.mask, need_weights=False)
            x = x + self.drop_1(h)
            return x + self.drop_2(self.proj(nn.functional.gelu(self.fc(self.ln_2(x)))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, WIDTH)
            self.pos = nn.Embedding(CONTEXT, WIDTH)
            self.drop = nn.Dropout(dropout)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(WIDTH)
            self.head = nn.Linear(WIDTH, VOCAB)

        def forward(self, idx):
            x = self.drop(self.tok(idx) + self.pos(torch.arange(idx.shape[1])))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    model = GPT()
    ours = {k: torch.tensor(v.numpy()) for k, v in tinyattn_model.state_dict().items()}
    with torch.no_grad():
        model.tok.weight.copy_(ours["token_embedding.weight"])
        model.pos.weight.copy_(ours["position_embedding.weight"])
        for i, block in enumerate(model.blocks):
            p = f"blocks.{i}."
            for name in ("ln_1", "ln_2"):
                getattr(block, name).weight.copy_(ours[p + name + ".weight"])
                getattr(block, name).bias.copy_(ours[p + name + ".bias"])
            block.attn.in_proj_weight.copy_(torch.cat(
                [ours[p + f"attn.{x}_proj.weight"] for x in "qkv"]))
            block.attn.in_proj_bias.copy_(torch.cat(
                [ours[p + f"attn.{x}_proj.bias"] for x in "qkv"]))
            block.attn.out_proj.weight.copy_(ours[p + "attn.out_proj.weight"])
            block.attn.out_proj.bias.copy_(ours[p + "attn.out_proj.bias"])
            for name in ("fc", "proj"):
                getattr(block, name).weight.copy_(ours[p + f"mlp.{name}.weight"])
                getattr(block, name).bias.copy_(ours[p + f"mlp.{name}.bias"])
        model.ln_f.weight.copy_(ours["ln_f.weight"])
        model.ln_f.bias.copy_(ours["ln_f.bias"])
        model.head.weight.copy_(ours["lm_head.weight"])
        model.head.bias.copy_(ours["lm_head.bias"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    rng = np.random.default_rng(seed)
    idx = torch.tensor(rng.integers(0, VOCAB, (BATCH, CONTEXT)))
    targets = torch.tensor(rng.integers(0, VOCAB, (BATCH, CONTEXT)))

    def step() -> float:
        logits = model(idx)
        loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return model, step


def check_agreement() -> str:
    """Without dropout, both sides must produce the same losses over 5 steps (float32)."""
    model, ours = tinyattn_setup(dropout=0.0)
    _, reference = torch_setup(model, dropout=0.0)
    losses = [(ours(), reference()) for _ in range(5)]
    worst = max(abs(a - b) for a, b in losses)
    if worst > 1e-3:
        raise SystemExit(f"W3: tinyattn and torch disagree: losses {losses}")
    return f"losses agree over 5 steps without dropout (max |diff| {worst:.2e})"


def child(side: str, steps: int) -> None:
    """Run in a fresh process: time to the end of the first step, then RSS and page faults."""
    from timing import minor_page_faults, peak_rss_mb

    if side == "tinyattn":
        _, step = tinyattn_setup()
    else:
        import tinyattn as ta  # the torch model copies its weights from a tinyattn model

        model = ta.TransformerLM(ta.models.TransformerLMConfig(
            vocab_size=VOCAB, context_length=CONTEXT, embed_dim=WIDTH, num_heads=HEADS,
            num_layers=LAYERS, dropout=DROPOUT))
        _, step = torch_setup(model)
    step()
    first_step_done = time.time()
    faults_before = minor_page_faults()
    losses, times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - start)
    result = {
        "first_step_end": first_step_done,
        "median_step_ms": float(np.median(times) * 1e3),
        "peak_rss_mb": peak_rss_mb(),
        "minor_faults_per_step": (minor_page_faults() - faults_before) / steps,
        "finite": bool(np.all(np.isfinite(losses))),
    }
    print(json.dumps(result))


def run_child(side: str, steps: int, env: dict | None = None) -> dict:
    start = time.time()
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", side, "--steps", str(steps)],
        capture_output=True, text=True, check=True, env={**os.environ, **(env or {})},
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["start_to_first_step_s"] = result["first_step_end"] - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--out", default=None, help="write the markdown table to this file")
    parser.add_argument("--child", choices=["tinyattn", "torch"], help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=30, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps)
        return

    from timing import compare, machine_header

    agreement = check_agreement()
    model, ours = tinyattn_setup()
    _, reference = torch_setup(model)
    result = compare(ours, reference, pairs=args.pairs, warmup=3)

    with tempfile.TemporaryDirectory() as cold_cache:
        cold = run_child("tinyattn", 3, env={"NUMBA_CACHE_DIR": cold_cache})
    warm = run_child("tinyattn", 30)
    torch_run = run_child("torch", 30)

    rss_ratio = warm["peak_rss_mb"] / torch_run["peak_rss_mb"]
    lines = [
        f"W3 — {machine_header()}",
        "",
        f"Command: `python benchmarks/bench_train_step.py --pairs {args.pairs}`; {agreement}.",
        "",
        "| measure | tinyattn | torch | ratio |",
        "|---|---:|---:|---:|",
        f"| step time, median of {result.pairs} interleaved pairs (ms) | {result.ours_ms:.1f} "
        f"| {result.ref_ms:.1f} | {result.ratio:.2f}× |",
        f"| step time, median of 30 steps, each side in its own process (ms) "
        f"| {warm['median_step_ms']:.1f} | {torch_run['median_step_ms']:.1f} "
        f"| {warm['median_step_ms'] / torch_run['median_step_ms']:.2f}× |",
        f"| peak RSS over 30 steps, own process (MB) | {warm['peak_rss_mb']:.0f} "
        f"| {torch_run['peak_rss_mb']:.0f} | {rss_ratio:.2f}× |",
        f"| minor page faults per step | {warm['minor_faults_per_step']:.0f} "
        f"| {torch_run['minor_faults_per_step']:.0f} | |",
        f"| process start → end of first step, warm numba cache (s) "
        f"| {warm['start_to_first_step_s']:.2f} | {torch_run['start_to_first_step_s']:.2f} | |",
        f"| process start → end of first step, cold numba cache (s) "
        f"| {cold['start_to_first_step_s']:.2f} | | |",
    ]
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as file:
            file.write(table + "\n")


if __name__ == "__main__":
    main()
