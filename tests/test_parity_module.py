"""PyTorch code runs on tinyattn: the same class definitions, written once against a ``torch``
argument, are built with PyTorch and with tinyattn (``import tinyattn as torch``); their
names, state dicts, traversal orders, hooks, outputs, gradients and training steps agree.

The classes follow the textbook attention chapter (SelfAttention_v1, CausalAttention with a
registered mask buffer, MultiHeadAttentionWrapper, MultiHeadAttention) and nanoGPT's model.py
(ModuleDict of a ModuleList, tied embedding, ``self.apply(self._init_weights)``, scaled
residual init, AdamW with decay/no-decay parameter groups), written as those sources write
them (in-place ``masked_fill_`` on a registered mask, ``arange(..., dtype=torch.long,
device=idx.device)``, ``p.dim()``).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np
import pytest

import tinyattn

torch = pytest.importorskip("torch")

from parity import as_numpy, assert_close  # noqa: E402


def textbook(torch):
    """The attention classes of the textbook chapter, written against ``torch``."""
    nn = torch.nn

    class SelfAttentionV1(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.W_query = nn.Parameter(torch.rand(d_in, d_out))
            self.W_key = nn.Parameter(torch.rand(d_in, d_out))
            self.W_value = nn.Parameter(torch.rand(d_in, d_out))

        def forward(self, x):
            keys, queries, values = x @ self.W_key, x @ self.W_query, x @ self.W_value
            attn_scores = queries @ keys.T
            attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
            return attn_weights @ values

    class CausalAttention(nn.Module):
        def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
            super().__init__()
            self.d_out = d_out
            self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.dropout = nn.Dropout(dropout)
            self.register_buffer(
                "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

        def forward(self, x):
            b, num_tokens, d_in = x.shape
            keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
            attn_scores = queries @ keys.transpose(1, 2)
            attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
            attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
            attn_weights = self.dropout(attn_weights)
            return attn_weights @ values

    class MultiHeadAttentionWrapper(nn.Module):
        def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
            super().__init__()
            self.heads = nn.ModuleList(
                [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                 for _ in range(num_heads)])

        def forward(self, x):
            return torch.cat([head(x) for head in self.heads], dim=-1)

    class MultiHeadAttention(nn.Module):
        def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
            super().__init__()
            assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
            self.d_out, self.num_heads = d_out, num_heads
            self.head_dim = d_out // num_heads
            self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.out_proj = nn.Linear(d_out, d_out)
            self.dropout = nn.Dropout(dropout)
            self.register_buffer(
                "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

        def forward(self, x):
            b, num_tokens, d_in = x.shape
            keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim)
            queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim)
            values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim)
            keys, queries, values = (t.transpose(1, 2) for t in (keys, queries, values))
            attn_scores = queries @ keys.transpose(2, 3)
            mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
            attn_scores.masked_fill_(mask_bool, -torch.inf)
            attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
            attn_weights = self.dropout(attn_weights)
            context_vec = (attn_weights @ values).transpose(1, 2)
            context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
            return self.out_proj(context_vec)

    return SelfAttentionV1, CausalAttention, MultiHeadAttentionWrapper, MultiHeadAttention


@dataclass
class GPTConfig:
    block_size: int = 8
    vocab_size: int = 11
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 8
    dropout: float = 0.0
    bias: bool = True


def nanogpt(torch):
    """nanoGPT's model.py (training parts), written against ``torch``."""
    nn = torch.nn
    F = torch.nn.functional

    class LayerNorm(nn.Module):
        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
            self.mlp = MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias),
            ))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        def get_num_params(self, non_embedding=True):
            n_params = sum(p.numel() for p in self.parameters())
            if non_embedding:
                n_params -= self.transformer.wpe.weight.numel()
            return n_params

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters()}
            param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                            {"params": nodecay_params, "weight_decay": 0.0}]
            fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
            assert fused_available
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    return GPT


def twins(build):
    """``build(lib)`` with torch and with tinyattn, in float64, with torch's weights in both."""
    torch.manual_seed(0)
    theirs = build(torch).double()
    ours = build(tinyattn).double()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def inputs(shape, seed=0):
    array = np.random.default_rng(seed).normal(size=shape)
    return (tinyattn.tensor(array, requires_grad=True),
            torch.tensor(array, requires_grad=True))


def backward_both(out_ours, out_theirs, seed=1):
    cotangent = np.random.default_rng(seed).normal(size=tuple(out_theirs.shape))
    out_ours.backward(tinyattn.tensor(cotangent))
    out_theirs.backward(torch.tensor(cotangent))


@pytest.mark.parametrize("which", ["SelfAttentionV1", "CausalAttention",
                                   "MultiHeadAttentionWrapper", "MultiHeadAttention"])
def test_textbook_attention_classes_match_torch(which):
    classes = dict(zip(["SelfAttentionV1", "CausalAttention", "MultiHeadAttentionWrapper",
                        "MultiHeadAttention"], range(4)))

    def build(lib):
        cls = textbook(lib)[classes[which]]
        if which == "SelfAttentionV1":
            return cls(3, 2)
        if which == "CausalAttention":
            return cls(3, 2, context_length=6, dropout=0.5).eval()
        return cls(3, 4, context_length=6, dropout=0.5, num_heads=2).eval()

    ours, theirs = twins(build)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    for name, buffer in ours.named_buffers():
        assert buffer.dtype == np.float64 == as_numpy(dict(theirs.named_buffers())[name]).dtype
    shape = (6, 3) if which == "SelfAttentionV1" else (2, 6, 3)
    x, tx = inputs(shape)
    out, tout = ours(x), theirs(tx)
    assert_close(out, tout)
    backward_both(out, tout)
    assert_close(x.grad, tx.grad)
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        assert_close(p.grad, tp.grad)


def test_nanogpt_names_traversal_and_tied_weights_match_torch():
    GPTs = [nanogpt(torch), nanogpt(tinyattn)]
    ours, theirs = twins(lambda lib: GPTs[lib is tinyattn](GPTConfig()))
    assert ours.transformer.wte.weight is ours.lm_head.weight
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert "lm_head.weight" in ours.state_dict()
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    ours_order, theirs_order = [], []
    ours.apply(lambda m: ours_order.append(type(m).__name__))
    theirs.apply(lambda m: theirs_order.append(type(m).__name__))
    assert ours_order == theirs_order
    assert ours.get_num_params() == theirs.get_num_params()
    assert ours.get_num_params(False) == theirs.get_num_params(False)


def test_nanogpt_init_scheme_gives_torchs_statistics():
    config = GPTConfig(n_embd=64, n_layer=3, vocab_size=500)
    torch.manual_seed(0)
    tinyattn.manual_seed(0)
    theirs, ours = nanogpt(torch)(config), nanogpt(tinyattn)(config)
    residual_std = 0.02 / math.sqrt(2 * config.n_layer)
    their_params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        values, reference = param.numpy(), as_numpy(their_params[name])
        if name.endswith(".bias"):
            assert not values.any() and not reference.any()
        elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or "ln_f" in name:
            assert (values == 1).all() and (reference == 1).all()
        else:
            expected = residual_std if name.endswith("c_proj.weight") else 0.02
            # >= 4096 samples: the sample std is within 3% of the true one
            assert abs(values.std() - expected) < 0.03 * expected, name
            assert abs(reference.std() - expected) < 0.03 * expected, name


def test_nanogpt_training_steps_match_torch():
    GPTs = [nanogpt(torch), nanogpt(tinyattn)]
    ours, theirs = twins(lambda lib: GPTs[lib is tinyattn](GPTConfig()))
    opt = ours.configure_optimizers(0.1, 3e-3, (0.9, 0.95))
    their_opt = theirs.configure_optimizers(0.1, 3e-3, (0.9, 0.95))
    schedule = tinyattn.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    their_schedule = torch.optim.lr_scheduler.CosineAnnealingLR(their_opt, T_max=4)
    rng = np.random.default_rng(0)
    for _ in range(4):
        tokens = rng.integers(0, 11, size=(3, 9))
        idx, targets = tokens[:, :-1], tokens[:, 1:]
        _, loss = ours(tinyattn.tensor(idx), tinyattn.tensor(targets))
        _, their_loss = theirs(torch.tensor(idx), torch.tensor(targets))
        assert_close(loss, their_loss)
        opt.zero_grad(set_to_none=True)
        their_opt.zero_grad(set_to_none=True)
        loss.backward()
        their_loss.backward()
        their_params = dict(theirs.named_parameters())
        for name, param in ours.named_parameters():
            assert_close(param.grad, their_params[name].grad, rtol=1e-9)
        norm = tinyattn.nn.utils.clip_grad_norm_(ours.parameters(), 0.05)
        their_norm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.05)
        assert_close(norm, their_norm)
        opt.step()
        their_opt.step()
        schedule.step()
        their_schedule.step()
        assert schedule.get_last_lr() == their_schedule.get_last_lr()
        for name, param in ours.named_parameters():
            assert_close(param, their_params[name], rtol=1e-9)
    assert ours.transformer.wte.weight is ours.lm_head.weight


def test_buffers_persistence_and_dtype_conversion_match_torch():
    def build(torch):
        class WithBuffers(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(2, 2)
                self.register_buffer("mask", torch.ones(2, 2))
                self.register_buffer("cache", torch.zeros(2), persistent=False)
                self.register_buffer("steps", torch.tensor([3]))
                self.register_buffer("empty", None)

        return torch.nn.Sequential(WithBuffers(), torch.nn.ReLU())

    ours, theirs = build(tinyattn), build(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    ours.to(tinyattn.float64)
    theirs.to(torch.float64)
    for (name, ours_buffer), (_, theirs_buffer) in zip(ours.named_buffers(),
                                                      theirs.named_buffers()):
        assert ours_buffer.dtype == as_numpy(theirs_buffer).dtype, name
    assert ours.load_state_dict(theirs.state_dict()).missing_keys == []


def test_non_strict_load_reports_the_same_keys_as_torch():
    ours, theirs = twins(lambda lib: textbook(lib)[3](3, 4, 6, 0.0, 2))
    state = dict(theirs.state_dict())
    del state["W_key.weight"]
    state["extra.weight"] = torch.zeros(2)
    ours_result = ours.load_state_dict(state, strict=False)
    theirs_result = theirs.load_state_dict(state, strict=False)
    assert ours_result.missing_keys == theirs_result.missing_keys
    assert ours_result.unexpected_keys == theirs_result.unexpected_keys
    assert repr(ours.load_state_dict(theirs.state_dict())) == repr(
        theirs.load_state_dict(theirs.state_dict()))


def test_forward_hooks_follow_torchs_calling_conventions():
    def build(torch):
        return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))

    ours, theirs = twins(build)
    logs = {"ours": [], "theirs": []}
    for key, net in (("ours", ours), ("theirs", theirs)):
        log = logs[key]
        net[1].register_forward_pre_hook(lambda m, args, log=log: log.append(("pre", len(args))))
        net[1].register_forward_hook(lambda m, args, out, log=log: out * 2)
        net[1].register_forward_hook(lambda m, args, out, log=log: log.append(("post", 1)),
                                     prepend=True)
        handle = net[2].register_forward_pre_hook(lambda m, args: args[0] + 1)
        x = np.linspace(-1, 1, 6).reshape(2, 3)
        out = net(tinyattn.tensor(x) if key == "ours" else torch.tensor(x))
        log.append(as_numpy(out))
        handle.remove()
        log.append(as_numpy(net(tinyattn.tensor(x) if key == "ours" else torch.tensor(x))))
    assert logs["ours"][:2] == [("pre", 1), ("post", 1)] and len(logs["ours"]) == 6
    for ours_entry, theirs_entry in zip(logs["ours"], logs["theirs"]):
        if isinstance(ours_entry, np.ndarray):
            assert_close(ours_entry, theirs_entry)
        else:
            assert ours_entry == theirs_entry
