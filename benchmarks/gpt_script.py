"""A nanoGPT-style training script, written for PyTorch: the W4 workload of the benchmarks.

It has the shapes of nanoGPT's CPU recipe for shakespeare_char (batch 12, context 64, 4
layers of width 128 with 4 heads, vocabulary 65, no dropout) and its code patterns: a packed
query/key/value ``Linear`` applied to ``(B, T, C)``, ``split`` / ``view`` / ``transpose`` into
heads, ``scaled_dot_product_attention(is_causal=True)``, exact GELU, LayerNorm, a tied head,
AdamW with weight decay on the matrices only, ``clip_grad_norm_`` and
``cross_entropy(ignore_index=-1)``. The batches are random tokens from a fixed seed (the time of
a step does not depend on the text).

With ``--sample N`` the trained model then samples ``N`` tokens as nanoGPT's ``sample.py``
does (no gradient, the context cropped to 64 tokens, temperature, top-k, ``multinomial``),
from a prompt of 64 tokens, so that every step runs the model on 64 tokens.

``benchmarks/bench_script.py`` runs it as it is with PyTorch and through ``tinyattn run`` with
tinyattn, each in its own process. It prints one JSON line: the median milliseconds of the
timed iterations and the last loss (and, with ``--sample``, the median milliseconds of a
sampling step's forward pass and microseconds of the rest of the step).

Run: ``python benchmarks/gpt_script.py [--iters 60] [--warmup 10] [--threads 2] [--sample N]``
(PyTorch), or
``tinyattn run benchmarks/gpt_script.py ...`` (tinyattn).
"""

import argparse
import json
import math
import time

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is None:  # sampling: the logits of the last position only
            return self.lm_head(x[:, [-1], :])
        logits = self.lm_head(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1)

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = {name: p for name, p in self.named_parameters() if p.requires_grad}
        decay = [p for p in params.values() if p.dim() >= 2]
        no_decay = [p for p in params.values() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)


@torch.no_grad()
def sample(model, idx, block_size, new_tokens, temperature=0.8, top_k=200):
    """Sample ``new_tokens`` after ``idx`` as nanoGPT's ``sample.py`` does (context cropped to
    ``block_size``, temperature, top-k, ``multinomial``); the seconds of each step's forward
    pass and of the rest of the step."""
    forward_s, rest_s = [], []
    for _ in range(new_tokens):
        start = time.perf_counter()
        idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
        logits = model(idx_cond)
        middle = time.perf_counter()
        logits = logits[:, -1, :] / temperature
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
        idx_next = torch.multinomial(probs, num_samples=1)
        idx = torch.cat((idx, idx_next), dim=1)
        forward_s.append(middle - start)
        rest_s.append(time.perf_counter() - middle)
    return forward_s, rest_s


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sample", type=int, default=0,
                        help="then sample this many tokens (after 10 untimed) from a context of "
                             "64 tokens")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    batch_size, block_size, vocab_size = 12, 64, 65
    model = GPT(vocab_size, block_size, n_layer=4, n_head=4, n_embd=128)
    optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99))
    rng = np.random.default_rng(0)
    data = torch.from_numpy(rng.integers(0, vocab_size, 100_000).astype(np.int64))

    def get_batch():
        ix = torch.randint(len(data) - block_size, (batch_size,))
        x = torch.stack([data[i:i + block_size] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
        return x, y

    times = []
    for it in range(args.warmup + args.iters):
        start = time.perf_counter()
        x, y = get_batch()
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        last = loss.item()
        if it >= args.warmup:
            times.append(time.perf_counter() - start)
    result = {"ms": float(np.median(times) * 1e3), "loss": last}
    if args.sample:
        model.eval()
        forward_s, rest_s = sample(model, data[None, :block_size], block_size, 10 + args.sample)
        result["sample_forward_ms"] = float(np.median(forward_s[10:]) * 1e3)
        result["sample_rest_us"] = float(np.median(rest_s[10:]) * 1e6)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
