"""Per-call cost of each op of a small GPT's sampling step, no grad, tinyattn vs PyTorch.

A learner's sampling loop (nanoGPT's ``sample.py``) runs a forward pass of a 4-layer GPT of
width 128 (4 heads of 32) on up to 64 tokens, then a few ops on the last position's logits.
At these sizes an op's cost is largely the framework's own (argument checks, dispatch, the
launch of a kernel), so this script times each op of that step on its own, in the shapes the
step gives it:

* **isolated**: each op of the forward pass (``Embedding``, ``LayerNorm``, the ``Linear`` of
  each shape, ``split``/``view``/``transpose``, ``scaled_dot_product_attention``, GELU ...) at
  ``T = 1`` (almost all overhead) and at ``T = 64``, and the ``topk`` of a sampling step over
  GPT-2's vocabulary (the same at either ``T``); ``--calls`` calls, median µs;
* **in context**: the ops after a forward pass (``topk``, the masked assignment, ``softmax``,
  ``multinomial``, ``cat`` ...), each timed once per step right after the forward pass of the
  real model, as a sampling loop meets them: the forward pass has then evicted the op's code
  and data from the caches, which can make an op several times slower than in a loop of its
  own. Median over ``--steps`` steps.

The same source runs on both sides: under ``python`` it imports PyTorch, under ``python -m
tinyattn run`` tinyattn. Each side runs in a fresh process; the parent alternates the sides
over ``--rounds`` rounds and reports each side's median over rounds and the median of the
per-round ratios. ``--trees A B`` times two tinyattn source trees against each other and
against torch. 2 threads (``--threads``). Writes benchmarks/results_calls.md (newest first).

Run from the repository root::

    python benchmarks/bench_calls.py [--rounds 5] [--calls 2000] [--steps 200] [--trees A B]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TITLE = "# Per-call cost of the ops of a small GPT's sampling step, no grad (newest first)"
WIDTH, HEADS, VOCAB, LAYERS = 128, 4, 65, 4
TAIL = ("crop", "last logits / T", "topk", "v[:, [-1]]", "logits < v", "masked assignment",
        "softmax", "multinomial", "cat")


def _isolated_cases(torch, tokens: int):
    """``(name, call)`` for each op of the forward pass, on inputs of ``tokens`` tokens."""
    nn, F = torch.nn, torch.nn.functional
    C, T = WIDTH, tokens
    x = torch.randn(1, T, C)
    wide = torch.randn(1, T, 4 * C)
    idx = torch.randint(0, VOCAB, (1, T))
    qkv = torch.randn(1, T, 3 * C)
    q = x.view(1, T, HEADS, C // HEADS).transpose(1, 2)
    heads = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    embedding, layernorm = nn.Embedding(VOCAB, C), nn.LayerNorm(C, bias=False)
    qkv_proj, out_proj = nn.Linear(C, 3 * C, bias=False), nn.Linear(C, C, bias=False)
    up, down = nn.Linear(C, 4 * C, bias=False), nn.Linear(4 * C, C, bias=False)
    lm_head, last = nn.Linear(C, VOCAB, bias=False), x[:, [-1], :]
    gpt2_logits = torch.randn(1, 50257)  # a sampling step of GPT-2 keeps the first 200 of these
    return [
        ("embedding", lambda: embedding(idx)),
        ("layernorm", lambda: layernorm(x)),
        ("linear 128→384", lambda: qkv_proj(x)),
        ("linear 128→128", lambda: out_proj(x)),
        ("linear 128→512", lambda: up(x)),
        ("linear 512→128", lambda: down(wide)),
        ("lm_head on the last token", lambda: lm_head(last)),
        ("split", lambda: qkv.split(C, dim=2)),
        ("view", lambda: x.view(1, T, HEADS, C // HEADS)),
        ("transpose", lambda: q.transpose(1, 2)),
        ("scaled_dot_product_attention", lambda: F.scaled_dot_product_attention(
            q, q, q, is_causal=True)),
        ("transpose, contiguous, view", lambda: heads.transpose(1, 2).contiguous().view(
            1, T, C)),
        ("gelu", lambda: F.gelu(wide)),
        ("add", lambda: x + x),
        ("x[:, [-1], :]", lambda: x[:, [-1], :]),
        ("topk of GPT-2's 50257 logits, k = 200", lambda: torch.topk(gpt2_logits, 200)),
    ]


def _median_us(call, calls: int) -> float:
    from timing import call_seconds

    for _ in range(calls // 10 + 1):
        call()
    return float(np.median(call_seconds(call, calls))) * 1e6


def _model(torch):
    """The sampling step's model: a nanoGPT-style GPT (pre-norm blocks, packed qkv, SDPA
    ``is_causal``, exact GELU), in eval mode with random weights."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(WIDTH, bias=False), nn.LayerNorm(WIDTH, bias=False)
            self.c_attn = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
            self.c_proj = nn.Linear(WIDTH, WIDTH, bias=False)
            self.c_fc = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
            self.mlp_proj = nn.Linear(4 * WIDTH, WIDTH, bias=False)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(64, WIDTH)
            self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
            self.ln_f = nn.LayerNorm(WIDTH, bias=False)
            self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(0, idx.size(1), dtype=torch.long))
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.ln_f(x)[:, [-1], :])

    return GPT().eval()


def _in_context(torch, steps: int) -> dict[str, float]:
    """Median µs of the forward pass and of each op after it, over ``steps`` sampling steps."""
    F = torch.nn.functional
    model = _model(torch)
    idx = torch.randint(0, VOCAB, (1, 64))
    times: dict[str, list[float]] = {name: [] for name in ("forward pass", *TAIL)}
    for step in range(steps + 10):
        marks = [time.perf_counter()]
        idx_cond = idx if idx.size(1) <= 64 else idx[:, -64:]
        marks.append(time.perf_counter())
        logits = model(idx_cond)
        marks.append(time.perf_counter())
        logits = logits[:, -1, :] / 0.8
        marks.append(time.perf_counter())
        v, _ = torch.topk(logits, min(200, logits.size(-1)))
        marks.append(time.perf_counter())
        threshold = v[:, [-1]]
        marks.append(time.perf_counter())
        below = logits < threshold
        marks.append(time.perf_counter())
        logits[below] = -float("Inf")
        marks.append(time.perf_counter())
        probs = F.softmax(logits, dim=-1)
        marks.append(time.perf_counter())
        idx_next = torch.multinomial(probs, num_samples=1)
        marks.append(time.perf_counter())
        idx = torch.cat((idx, idx_next), dim=1)
        marks.append(time.perf_counter())
        if step >= 10:  # after the first steps' one-time work
            names = ("crop", "forward pass", *TAIL[1:])
            for name, start, stop in zip(names, marks[:-1], marks[1:], strict=True):
                times[name].append(stop - start)
    return {name: float(np.median(values)) * 1e6 for name, values in times.items()}


def child(side: str, calls: int, steps: int, threads: int) -> None:
    """In a fresh process (torch, or tinyattn through ``tinyattn run``): every figure, as JSON."""
    import torch
    from timing import set_threads

    set_threads(side, threads)
    torch.manual_seed(0)
    result = {"isolated": {}, "in context": {}}
    with torch.no_grad():
        for tokens in (1, 64):
            for name, call in _isolated_cases(torch, tokens):
                result["isolated"][f"{name}|{tokens}"] = _median_us(call, calls)
        result["in context"] = _in_context(torch, steps)
    print(json.dumps(result))


def _table(runs: dict, sides: list[str], part: str, keys: list[str]) -> list[str]:
    tiny = [side for side in sides if side != "torch"]
    header = "| op | " + ("T | " if part == "isolated" else "") + " | ".join(
        f"{side} µs" for side in sides) + " | " + " | ".join(
        f"{side} ÷ torch" for side in tiny) + " |"
    lines = [header, "|" + "---|" * (1 + (part == "isolated")) + "---:|" * (
        len(sides) + len(tiny))]
    for key in keys:
        values = {side: np.asarray([run[part][key] for run in runs[side]]) for side in sides}
        name, _, tokens = key.partition("|")
        cells = [name] + ([tokens] if part == "isolated" else [])
        cells += [f"{np.median(values[side]):.1f}" for side in sides]
        cells += [f"{np.median(values[side] / values['torch']):.2f}×" for side in tiny]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    from timing import add_tree_options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--calls", type=int, default=2000, help="timed calls of each op")
    parser.add_argument("--steps", type=int, default=200, help="timed sampling steps")
    parser.add_argument("--threads", type=int, default=2, help="threads per side")
    add_tree_options(parser, HERE / "results_calls.md")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls, args.steps, args.threads)
        return

    from timing import load_average, machine_header, prepend_section, run_side, tree_rounds

    from tinyattn.kernels.cpu import vector_unit

    load_before, started = load_average(), time.strftime("%H:%M UTC", time.gmtime())
    sides, runs = tree_rounds(args.trees, args.rounds, lambda side, tree: run_side(
        __file__, side, ["--calls", args.calls, "--steps", args.steps, "--threads",
                         args.threads], tree))
    command = (f"python benchmarks/bench_calls.py --rounds {args.rounds} --calls {args.calls} "
               f"--steps {args.steps} --threads {args.threads}")
    if args.trees:
        command += " --trees " + " ".join(args.trees)
    first = runs["torch"][0]
    lines = [
        f"## {machine_header()}", "",
        f"Vector unit (numba's target): {vector_unit().describe()}; started at {started}; load "
        f"average (1/5/15 min) before: {load_before}, after: {load_average()}.", "",
        f"Command: `{command}` (from the repository root). Each side in its own fresh process, "
        f"{args.threads} thread(s), {args.rounds} alternating rounds; a figure is the median "
        "over rounds of each process's median µs per call, a ratio the median over rounds of "
        "the per-round ratios.", "",
        f"Each op on its own ({args.calls} calls, no grad), at T tokens:", "",
        *_table(runs, sides, "isolated", list(first["isolated"])), "",
        f"In context: each op once per sampling step, right after the forward pass of the "
        f"{LAYERS}-layer model on 64 tokens (median over {args.steps} steps):", "",
        *_table(runs, sides, "in context", list(first["in context"])),
    ]
    section = "\n".join(lines)
    print(section)
    prepend_section(args.output, TITLE, section)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
