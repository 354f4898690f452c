"""A learner's own KV-cache generation script, written for PyTorch: the W5 workload.

A GPT-2 of 124M parameters (vocabulary 50257, 12 blocks of width 768 with 12 heads, context
1024, no biases in the attention projections), written the way the build-an-LLM textbooks
write it: separate query, key and value ``Linear`` layers, heads by ``view`` / ``transpose``,
a key/value cache that grows by ``torch.cat`` (a ``use_cache`` flag on the model, a
``reset_cache`` between generations), scores ``queries @ keys.transpose(2, 3)`` masked by a
causal ``triu`` buffer and a softmax, GELU, LayerNorm and an output head of its own. Greedy
decoding feeds the prompt once, then one token per step; with ``--top-k K`` each step first
sets the logits outside the K largest to -inf (``torch.topk`` and ``torch.where``), as the
textbooks' ``generate`` does before it samples (the token chosen is the same). The weights are
drawn from numpy (normal, standard deviation 0.02) and copied in, so both frameworks decode
with the same numbers and their tokens can be compared.

``benchmarks/bench_decode.py`` runs it as it is with PyTorch and through ``tinyattn run`` with
tinyattn, each in its own process. It prints one JSON line: the milliseconds of each decoded
token after the prompt (median), of the prompt step, and the tokens.

Run: ``python benchmarks/decode_script.py [--prompt 8] [--new 48] [--threads 2] [--top-k K]``
(PyTorch), or
``tinyattn run benchmarks/decode_script.py ...`` (tinyattn).
"""

import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length),
                                                diagonal=1), persistent=False)
        self.cache_k, self.cache_v = None, None

    def forward(self, x, use_cache=False):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads,
                                      self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads,
                                       self.head_dim).transpose(1, 2)
        if use_cache:
            if self.cache_k is not None:
                keys = torch.cat([self.cache_k, keys], dim=2)
                values = torch.cat([self.cache_v, values], dim=2)
            self.cache_k, self.cache_v = keys, values
        num_keys = keys.shape[2]
        attn_scores = queries @ keys.transpose(2, 3)
        mask = self.mask.bool()[num_keys - num_tokens:num_keys, :num_keys]
        attn_scores.masked_fill_(mask, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)
        context = (attn_weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, -1)
        return self.out_proj(context)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None


class TransformerBlock(nn.Module):
    def __init__(self, emb_dim, context_length, n_heads):
        super().__init__()
        self.att = MultiHeadAttention(emb_dim, emb_dim, context_length, n_heads)
        self.ff = nn.Sequential(nn.Linear(emb_dim, 4 * emb_dim), nn.GELU(approximate="tanh"),
                                nn.Linear(4 * emb_dim, emb_dim))
        self.norm1, self.norm2 = nn.LayerNorm(emb_dim), nn.LayerNorm(emb_dim)

    def forward(self, x, use_cache=False):
        x = x + self.att(self.norm1(x), use_cache=use_cache)
        return x + self.ff(self.norm2(x))


class GPTModel(nn.Module):
    def __init__(self, vocab_size, context_length, emb_dim, n_heads, n_layers):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, emb_dim)
        self.pos_emb = nn.Embedding(context_length, emb_dim)
        self.trf_blocks = nn.ModuleList(
            [TransformerBlock(emb_dim, context_length, n_heads) for _ in range(n_layers)])
        self.final_norm = nn.LayerNorm(emb_dim)
        self.out_head = nn.Linear(emb_dim, vocab_size, bias=False)
        self.current_pos = 0

    def forward(self, idx, use_cache=False):
        seq_len = idx.shape[1]
        if use_cache:
            pos_ids = torch.arange(self.current_pos, self.current_pos + seq_len)
            self.current_pos += seq_len
        else:
            pos_ids = torch.arange(0, seq_len)
        x = self.tok_emb(idx) + self.pos_emb(pos_ids).unsqueeze(0)
        for block in self.trf_blocks:
            x = block(x, use_cache=use_cache)
        return self.out_head(self.final_norm(x))

    def reset_kv_cache(self):
        for block in self.trf_blocks:
            block.att.reset_cache()
        self.current_pos = 0


def generate(model, idx, max_new_tokens, top_k=None):
    """Greedy decoding with the cache, the logits outside the ``top_k`` largest set to -inf
    first when ``top_k`` is given (as the textbooks' ``generate`` does before sampling); the
    seconds of the prompt step and of each new token."""
    model.reset_kv_cache()
    times = []
    with torch.no_grad():
        start = time.perf_counter()
        logits = model(idx, use_cache=True)
        for _ in range(max_new_tokens):
            logits = logits[:, -1]
            if top_k is not None:
                top_logits, _ = torch.topk(logits, top_k)
                logits = torch.where(logits < top_logits[:, -1:], torch.tensor(float("-inf")),
                                     logits)
            next_idx = logits.argmax(dim=-1, keepdim=True)
            idx = torch.cat([idx, next_idx], dim=1)
            times.append(time.perf_counter() - start)
            start = time.perf_counter()
            logits = model(next_idx, use_cache=True)
    return idx, times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompt", type=int, default=8)
    parser.add_argument("--new", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--top-k", type=int, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = GPTModel(vocab_size=50257, context_length=1024, emb_dim=768, n_heads=12,
                     n_layers=12).eval()
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.from_numpy(
                (0.02 * rng.standard_normal(tuple(param.shape))).astype(np.float32)))
    prompt = torch.from_numpy(rng.integers(0, 50257, (1, args.prompt)).astype(np.int64))
    generate(model, prompt, 2, args.top_k)  # a first pass: numba compiles, torch warms up
    tokens, times = generate(model, prompt, args.new, args.top_k)
    print(json.dumps({"ms_per_token": float(np.median(times[1:]) * 1e3),
                      "prompt_ms": times[0] * 1e3, "tokens": tokens[0].tolist()}))


if __name__ == "__main__":
    main()
