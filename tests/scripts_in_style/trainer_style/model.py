"""A small decoder-only transformer written the explicit way: attention scores masked with a
registered lower-triangular buffer, decay and no-decay parameter groups chosen by module type,
and ``generate`` (greedy by top-1, or sampled with temperature and top-k)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from config import Config


class MaskedSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads, self.width = cfg.heads, cfg.width
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.out = nn.Linear(cfg.width, cfg.width)
        self.drop_weights = nn.Dropout(cfg.dropout)
        self.drop_out = nn.Dropout(cfg.dropout)
        causal = torch.tril(torch.ones(cfg.context, cfg.context))
        self.register_buffer("causal", causal.view(1, 1, cfg.context, cfg.context))

    def forward(self, x):
        batch, steps, width = x.size()
        per_head = width // self.heads

        def heads(t):
            return t.view(batch, steps, self.heads, per_head).transpose(1, 2)

        q, k, v = map(heads, self.qkv(x).split(width, dim=2))
        scores = q @ k.transpose(-2, -1) / math.sqrt(per_head)
        scores = scores.masked_fill(self.causal[:, :, :steps, :steps] == 0, float("-inf"))
        weights = self.drop_weights(F.softmax(scores, dim=-1))
        mixed = (weights @ v).transpose(1, 2).contiguous().view(batch, steps, width)
        return self.drop_out(self.out(mixed))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm_attn = nn.LayerNorm(cfg.width)
        self.attn = MaskedSelfAttention(cfg)
        self.norm_mlp = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(nn.Linear(cfg.width, 4 * cfg.width), nn.GELU(),
                                 nn.Linear(4 * cfg.width, cfg.width), nn.Dropout(cfg.dropout))

    def forward(self, x):
        x = x + self.attn(self.norm_attn(x))
        return x + self.mlp(self.norm_mlp(x))


class TinyGPT(nn.Module):
    @staticmethod
    def defaults():
        return Config(layers=2, heads=2, width=32, vocab=None, context=None, dropout=0.1)

    def __init__(self, cfg):
        super().__init__()
        self.context = cfg.context
        self.embed = nn.ModuleDict({"tokens": nn.Embedding(cfg.vocab, cfg.width),
                                    "positions": nn.Embedding(cfg.context, cfg.width)})
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)
        self.apply(self._init)
        print(f"model: {sum(p.numel() for p in self.parameters())} parameters")

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def make_optimizer(self, cfg):
        groups = {"decay": [], "no_decay": []}
        for module in self.modules():
            for name, param in module.named_parameters(recurse=False):
                decays = isinstance(module, nn.Linear) and name == "weight"
                groups["decay" if decays else "no_decay"].append(param)
        assert sum(map(len, groups.values())) == len(list(self.parameters()))
        return torch.optim.AdamW(
            [{"params": groups["decay"], "weight_decay": cfg.weight_decay},
             {"params": groups["no_decay"], "weight_decay": 0.0}],
            lr=cfg.lr, betas=cfg.betas)

    def forward(self, idx, targets=None):
        steps = idx.size(1)
        positions = torch.arange(steps, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.drop(self.embed["tokens"](idx) + self.embed["positions"](positions))
        for layer in self.layers:
            x = layer(x)
        logits = self.head(self.norm(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1)
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, new_tokens, temperature=1.0, do_sample=False, top_k=None):
        for _ in range(new_tokens):
            logits, _ = self(idx[:, -self.context:])
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                kth = torch.topk(logits, top_k).values[:, [-1]]
                logits[logits < kth] = -float("inf")
            probs = F.softmax(logits, dim=-1)
            if do_sample:
                chosen = torch.multinomial(probs, num_samples=1)
            else:
                chosen = torch.topk(probs, k=1, dim=-1).indices
            idx = torch.cat((idx, chosen), dim=1)
        return idx
