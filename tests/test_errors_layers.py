"""Bad input catalogue for functional ops, layers, attention, models, optimizers, checkpoints
and the command line: each case asserts the exception type and that the message names the
op/layer, the offending shapes/values and what was expected. Where PyTorch has the same call,
a second test checks that PyTorch rejects it too (its exception types differ: mostly
RuntimeError, where tinyattn raises ValueError/TypeError/IndexError as the house rules ask).

Tensor and primitive-op cases live in ``test_errors.py``.
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinyattn as ta

F, nn = ta.F, ta.nn
PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _lm() -> ta.TransformerLM:
    config = ta.models.TransformerLMConfig(vocab_size=11, context_length=4, embed_dim=8,
                                           num_heads=2, num_layers=1)
    return ta.TransformerLM(config)


def _params() -> list[nn.Parameter]:
    return [nn.Parameter(ta.ones(2))]


def _backward_twice() -> None:
    _, loss = _lm()(ta.tensor([[1, 2]]), targets=ta.tensor([[2, 3]]))
    loss.backward()
    loss.backward()


Q = ta.zeros(2, 2, 3, 4)  # (B, H, T, D)

CASES = [
    # (id, callable, exception type, regex the message must match, PyTorch call or None)
    ("linear-features", lambda: nn.Linear(4, 3)(ta.ones(2, 5)), ValueError,
     r"linear: input of shape \(2, 5\) does not match weight of shape \(3, 4\): "
     r"expected input.shape\[-1\] == in_features == 4",
     lambda t: t.nn.Linear(4, 3)(t.ones(2, 5))),
    ("linear-int-input", lambda: nn.Linear(4, 3)(ta.arange(8).reshape(2, 4)), TypeError,
     r"linear: expected all inputs to have the same dtype, got input int64, weight float32",
     lambda t: t.nn.Linear(4, 3)(t.arange(8).reshape(2, 4))),
    ("linear-bool-input", lambda: F.linear(ta.ones(2, 4) > 0, ta.ones(3, 4) > 0), TypeError,
     r"linear: bool tensors are not supported",
     lambda t: t.nn.functional.linear(t.ones(2, 4) > 0, t.ones(3, 4) > 0)),
    ("linear-bias-shape", lambda: F.linear(ta.ones(2, 4), ta.ones(3, 4), ta.ones(4)),
     ValueError, r"linear: bias must have shape \(out_features,\) = \(3,\) .* got \(4,\)",
     lambda t: t.nn.functional.linear(t.ones(2, 4), t.ones(3, 4), t.ones(4))),
    ("layernorm-features", lambda: nn.LayerNorm(4)(ta.ones(2, 5)), ValueError,
     r"layer_norm: input of shape \(2, 5\) does not end in normalized_shape \(4,\): "
     r"expected shape \(\.\.\., 4\)",
     lambda t: t.nn.LayerNorm(4)(t.ones(2, 5))),
    ("layernorm-int-input", lambda: nn.LayerNorm(4)(ta.arange(8).reshape(2, 4)), TypeError,
     r"layer_norm: input must be a floating point tensor, got dtype int64",
     lambda t: t.nn.LayerNorm(4)(t.arange(8).reshape(2, 4))),
    ("layernorm-weight-shape",
     lambda: F.layer_norm(ta.ones(2, 4), (4,), weight=ta.ones(3)), ValueError,
     r"layer_norm: weight must have shape normalized_shape \(4,\), got \(3,\)",
     lambda t: t.nn.functional.layer_norm(t.ones(2, 4), (4,), weight=t.ones(3))),
    ("embedding-index-too-big", lambda: nn.Embedding(5, 3)(ta.tensor([[1, 5]])), IndexError,
     r"embedding: index 5 is out of range for a table of 5 embeddings "
     r"\(expected 0 <= index < 5\)",
     lambda t: t.nn.Embedding(5, 3)(t.tensor([[1, 5]]))),
    ("embedding-index-negative", lambda: nn.Embedding(5, 3)(ta.tensor([[1, -1]])), IndexError,
     r"embedding: index -1 is out of range for a table of 5 embeddings",
     lambda t: t.nn.Embedding(5, 3)(t.tensor([[1, -1]]))),
    ("embedding-float-indices", lambda: nn.Embedding(5, 3)(ta.tensor([[1.0, 2.0]])), TypeError,
     r"embedding: expected integer indices \(Long or Int\), got dtype float32",
     lambda t: t.nn.Embedding(5, 3)(t.tensor([[1.0, 2.0]]))),
    ("embedding-padding-idx", lambda: nn.Embedding(5, 3, padding_idx=5), ValueError,
     r"Embedding: padding_idx 5 is out of range for 5 embeddings "
     r"\(expected -5 <= padding_idx < 5\)",
     lambda t: t.nn.Embedding(5, 3, padding_idx=5)),
    ("cross-entropy-target-too-big",
     lambda: F.cross_entropy(ta.zeros(3, 4), ta.tensor([0, 4, 1])), IndexError,
     r"cross_entropy: target value 4 is out of range for 4 classes "
     r"\(expected 0 <= target < 4 or target == ignore_index -100\)",
     lambda t: t.nn.functional.cross_entropy(t.zeros(3, 4), t.tensor([0, 4, 1]))),
    ("cross-entropy-target-negative",
     lambda: F.cross_entropy(ta.zeros(3, 4), ta.tensor([0, -1, 1])), IndexError,
     r"cross_entropy: target value -1 is out of range for 4 classes",
     lambda t: t.nn.functional.cross_entropy(t.zeros(3, 4), t.tensor([0, -1, 1]))),
    ("cross-entropy-float-class-targets",
     lambda: F.cross_entropy(ta.zeros(3, 4), ta.tensor([0.0, 1.0, 1.0])), TypeError,
     r"cross_entropy: target has the shape \(3,\) of class indices but dtype float32: class "
     r"indices must be integers \(int64, PyTorch's Long: use target.long\(\)\); a float target "
     r"is read as class probabilities and must have the input's shape \(3, 4\)",
     lambda t: t.nn.functional.cross_entropy(t.zeros(3, 4), t.tensor([0., 1., 1.]))),
    ("cross-entropy-probability-target-shape",
     lambda: F.cross_entropy(ta.zeros(3, 4), ta.zeros(3, 5)), TypeError,
     r"cross_entropy: a float target holds class probabilities and must have the input's shape "
     r"\(3, 4\), got \(3, 5\)",
     lambda t: t.nn.functional.cross_entropy(t.zeros(3, 4), t.zeros(3, 5))),
    ("cross-entropy-target-shape",
     lambda: F.cross_entropy(ta.zeros(3, 4), ta.tensor([0, 1])), ValueError,
     r"cross_entropy: input of shape \(3, 4\) needs a target of shape \(3,\), "
     r"got target of shape \(2,\)",
     lambda t: t.nn.functional.cross_entropy(t.zeros(3, 4), t.tensor([0, 1]))),
    ("cross-entropy-int-logits",
     lambda: F.cross_entropy(ta.arange(12).reshape(3, 4), ta.tensor([0, 1, 1])), TypeError,
     r"cross_entropy: input must be a floating point tensor, got dtype int64",
     lambda t: t.nn.functional.cross_entropy(t.arange(12).reshape(3, 4), t.tensor([0, 1, 1]))),
    ("dropout-p-above-one", lambda: F.dropout(ta.ones(3), p=1.5), ValueError,
     r"dropout: dropout probability p must be a number in \[0, 1\], got 1.5",
     lambda t: t.nn.functional.dropout(t.ones(3), p=1.5)),
    ("dropout-p-negative", lambda: nn.Dropout(-0.1), ValueError,
     r"Dropout: dropout probability p must be a number in \[0, 1\], got -0.1",
     lambda t: t.nn.Dropout(-0.1)),
    ("dropout-p-nan", lambda: nn.Dropout(float("nan")), ValueError,
     r"Dropout: dropout probability p must be a finite number, got nan", None),
    ("dropout-int-input", lambda: F.dropout(ta.arange(3)), TypeError,
     r"dropout: input must be a floating point tensor, got dtype int64", None),
    ("mha-heads-do-not-divide", lambda: nn.MultiHeadAttention(10, 3), ValueError,
     r"MultiHeadAttention: embed_dim 10 must be divisible by num_heads 3",
     lambda t: t.nn.MultiheadAttention(10, 3)),
    ("mha-dropout", lambda: nn.MultiHeadAttention(8, 2, dropout=1.5), ValueError,
     r"MultiHeadAttention: dropout must be a number in \[0, 1\], got 1.5", None),
    ("mha-features", lambda: nn.MultiHeadAttention(8, 2)(ta.ones(2, 3, 6)), ValueError,
     r"MultiHeadAttention: query must have shape \(B, T, 8\) or \(T, 8\), got \(2, 3, 6\)",
     lambda t: t.nn.MultiheadAttention(8, 2, batch_first=True)(*[t.ones(2, 3, 6)] * 3)),
    ("mha-int-query", lambda: nn.MultiHeadAttention(8, 2)(ta.arange(48).reshape(2, 3, 8)),
     TypeError, r"MultiHeadAttention: query must be a floating point tensor, got dtype int64",
     lambda t: t.nn.MultiheadAttention(8, 2, batch_first=True)(
         *[t.arange(48).reshape(2, 3, 8)] * 3)),
    ("mha-key-padding-mask-shape",
     lambda: nn.MultiHeadAttention(8, 2)(ta.ones(2, 3, 8), key_padding_mask=ta.ones(2, 4) > 0),
     ValueError, r"MultiHeadAttention: key_padding_mask has shape \(2, 4\), expected \(2, 3\)",
     lambda t: t.nn.MultiheadAttention(8, 2, batch_first=True)(
         *[t.ones(2, 3, 8)] * 3, key_padding_mask=t.ones(2, 4) > 0)),
    ("mha-key-padding-mask-int",
     lambda: nn.MultiHeadAttention(8, 2)(ta.ones(2, 3, 8),
                                         key_padding_mask=ta.zeros(2, 3).to(ta.int64)),
     TypeError, r"MultiHeadAttention: key_padding_mask must be boolean or have the query's "
     r"dtype float32, got int64", None),
    ("mha-attn-mask-shape",
     lambda: nn.MultiHeadAttention(8, 2)(ta.ones(2, 3, 8), attn_mask=ta.ones(3, 4) > 0),
     ValueError, r"MultiHeadAttention: attn_mask has shape \(3, 4\), expected \(3, 3\) or "
     r"\(4, 3, 3\)",
     lambda t: t.nn.MultiheadAttention(8, 2, batch_first=True)(
         *[t.ones(2, 3, 8)] * 3, attn_mask=t.ones(3, 4) > 0)),
    ("mha-attn-mask-float64",
     lambda: nn.MultiHeadAttention(8, 2)(ta.ones(2, 3, 8),
                                         attn_mask=ta.zeros(3, 3, dtype=ta.float64)),
     TypeError, r"MultiHeadAttention: attn_mask must be boolean or have the query's dtype "
     r"float32, got float64", None),
    ("self-attention-features", lambda: nn.SelfAttention(8, 4)(ta.ones(2, 3, 5)), ValueError,
     r"SelfAttention: x must have shape \(B, T, 8\) or \(T, 8\), got \(2, 3, 5\)", None),
    ("self-attention-int-input",
     lambda: nn.SelfAttention(8, 4)(ta.arange(48).reshape(2, 3, 8)), TypeError,
     r"SelfAttention: x must be a floating point tensor, got dtype int64", None),
    ("sdpa-mask-shape",
     lambda: F.scaled_dot_product_attention(Q, Q, Q, attn_mask=ta.ones(3, 4) > 0), ValueError,
     r"scaled_dot_product_attention: attn_mask of shape \(3, 4\) does not broadcast to the "
     r"scores' shape \(\.\.\., H, T, S\) = \(2, 2, 3, 3\)",
     lambda t: t.nn.functional.scaled_dot_product_attention(
         *[t.zeros(2, 2, 3, 4)] * 3, attn_mask=t.ones(3, 4) > 0)),
    ("sdpa-mask-int",
     lambda: F.scaled_dot_product_attention(Q, Q, Q, attn_mask=ta.zeros(3, 3).to(ta.int64)),
     TypeError, r"scaled_dot_product_attention: attn_mask must be boolean or have the query's "
     r"dtype float32, got int64",
     lambda t: t.nn.functional.scaled_dot_product_attention(
         *[t.zeros(2, 2, 3, 4)] * 3, attn_mask=t.zeros(3, 3, dtype=t.int64))),
    ("sdpa-dropout", lambda: F.scaled_dot_product_attention(Q, Q, Q, dropout_p=1.2),
     ValueError, r"scaled_dot_product_attention: dropout probability p must be a number in "
     r"\[0, 1\], got 1.2", None),
    ("sdpa-feature-size",
     lambda: F.scaled_dot_product_attention(Q, ta.zeros(2, 2, 3, 5), Q), ValueError,
     r"scaled_dot_product_attention: query \(\.\.\., T, D\) = \(2, 2, 3, 4\) and key "
     r"\(\.\.\., S, D\) = \(2, 2, 3, 5\) must have the same feature size D",
     lambda t: t.nn.functional.scaled_dot_product_attention(
         t.zeros(2, 2, 3, 4), t.zeros(2, 2, 3, 5), t.zeros(2, 2, 3, 4))),
    ("sdpa-mixed-dtypes", lambda: F.scaled_dot_product_attention(Q, Q.double(), Q), TypeError,
     r"scaled_dot_product_attention: query, key and value must share one dtype, got "
     r"float32, float64 and float32",
     lambda t: t.nn.functional.scaled_dot_product_attention(
         t.zeros(2, 2, 3, 4), t.zeros(2, 2, 3, 4, dtype=t.float64), t.zeros(2, 2, 3, 4))),
    ("sdpa-int-query",
     lambda: F.scaled_dot_product_attention(*[ta.arange(8).reshape(1, 2, 4)] * 3), TypeError,
     r"scaled_dot_product_attention: query must be a floating point tensor, got dtype int64", None),
    ("transformer-block-features", lambda: nn.TransformerBlock(8, 2)(ta.ones(2, 3, 6)),
     ValueError, r"layer_norm: input of shape \(2, 3, 6\) does not end in normalized_shape "
     r"\(8,\)", None),
    ("lm-sequence-too-long", lambda: _lm()(ta.zeros(1, 5).to(ta.int64)), ValueError,
     r"TransformerLM: sequence length 5 exceeds context_length 4", None),
    ("lm-float-token-ids", lambda: _lm()(ta.zeros(1, 3)), ValueError,
     r"TransformerLM: idx must be an integer Tensor of shape \(B, T\), got Tensor of dtype "
     r"float32 and shape \(1, 3\)", None),
    ("lm-token-out-of-vocab", lambda: _lm()(ta.tensor([[1, 11]])), IndexError,
     r"embedding: index 11 is out of range for a table of 11 embeddings", None),
    ("lm-targets-shape", lambda: _lm()(ta.tensor([[1, 2]]), targets=ta.tensor([[1]])),
     ValueError, r"TransformerLM: targets must be a Tensor of shape \(1, 2\), got \(1, 1\)",
     None),
    ("lm-config-heads", lambda: ta.TransformerLM(ta.models.TransformerLMConfig(
        vocab_size=11, context_length=4, embed_dim=9, num_heads=2, num_layers=1)), ValueError,
     r"MultiHeadAttention: embed_dim 9 must be divisible by num_heads 2", None),
    ("sgd-lr-nan", lambda: ta.optim.SGD(_params(), lr=float("nan")), ValueError,
     r"SGD: lr must be a finite number, got nan", None),
    ("sgd-lr-negative", lambda: ta.optim.SGD(_params(), lr=-0.1), ValueError,
     r"SGD: lr must be a number >= 0, got -0.1",
     lambda t: t.optim.SGD([t.nn.Parameter(t.ones(2))], lr=-0.1)),
    ("adam-lr-inf", lambda: ta.optim.Adam(_params(), lr=float("inf")), ValueError,
     r"Adam: lr must be a finite number, got inf", None),
    ("adamw-lr-negative", lambda: ta.optim.AdamW(_params(), lr=-1e-3), ValueError,
     r"AdamW: lr must be a number >= 0, got -0.001",
     lambda t: t.optim.AdamW([t.nn.Parameter(t.ones(2))], lr=-1e-3)),
    ("adamw-lr-string", lambda: ta.optim.AdamW(_params(), lr="0.1"), TypeError,
     r"AdamW: lr must be a real number, got str", None),
    ("adam-beta-one", lambda: ta.optim.Adam(_params(), betas=(0.9, 1.0)), ValueError,
     r"Adam: betas\[1\] must be in \[0, 1\), got 1.0",
     lambda t: t.optim.Adam([t.nn.Parameter(t.ones(2))], betas=(0.9, 1.0))),
    ("adamw-no-parameters", lambda: ta.optim.AdamW([]), ValueError,
     r"optimizer got an empty parameter list", lambda t: t.optim.AdamW([])),
    ("adamw-no-parameters-from-module", lambda: ta.optim.AdamW(nn.ReLU().parameters()),
     ValueError, r"optimizer got an empty parameter list",
     lambda t: t.optim.AdamW(t.nn.ReLU().parameters())),
    ("adam-int-parameter", lambda: ta.optim.Adam([ta.arange(3)]), TypeError,
     r"Adam: can only optimize float tensors, but params\[0\] has dtype int64", None),
    ("backward-non-scalar-layer-output",
     lambda: nn.Linear(4, 3)(ta.ones(2, 4)).backward(), RuntimeError,
     r"backward: grad can be implicitly created only for one-element outputs; this tensor "
     r"has shape \(2, 3\)",
     lambda t: t.nn.Linear(4, 3)(t.ones(2, 4)).backward()),
    ("backward-through-freed-model-graph", _backward_twice, RuntimeError,
     r"backward: trying to backward through the graph a second time \(op 'CrossEntropy'\)",
     None),
    ("load-state-dict-missing", lambda: nn.Linear(4, 3).load_state_dict(
        {"weight": np.zeros((3, 4))}), ValueError,
     r"load_state_dict into Linear failed \(nothing was changed\):\n  missing keys: bias",
     lambda t: t.nn.Linear(4, 3).load_state_dict({"weight": t.zeros(3, 4)})),
    ("load-state-dict-unexpected", lambda: nn.Linear(4, 3).load_state_dict(
        {"weight": np.zeros((3, 4)), "bias": np.zeros(3), "scale": np.ones(1)}), ValueError,
     r"unexpected keys: scale",
     lambda t: t.nn.Linear(4, 3).load_state_dict(
         {"weight": t.zeros(3, 4), "bias": t.zeros(3), "scale": t.ones(1)})),
    ("load-state-dict-shape", lambda: nn.Linear(4, 3).load_state_dict(
        {"weight": np.zeros((4, 3)), "bias": np.zeros(3)}), ValueError,
     r"weight: shape \(4, 3\) in the state dict, \(3, 4\) in the model",
     lambda t: t.nn.Linear(4, 3).load_state_dict({"weight": t.zeros(4, 3), "bias": t.zeros(3)})),
    ("load-state-dict-not-a-mapping", lambda: nn.Linear(4, 3).load_state_dict([1, 2]),
     TypeError, r"load_state_dict into Linear: expected a mapping of parameter names to "
     r"arrays, got list", lambda t: t.nn.Linear(4, 3).load_state_dict([1, 2])),
    ("module-to-int", lambda: nn.Linear(4, 3).to(np.int64), TypeError,
     r"Module.to: expected a float dtype, got int64",
     lambda t: t.nn.Linear(4, 3).to(t.int64)),
    ("module-to-cuda", lambda: nn.Linear(4, 3).to("cuda"), ValueError,
     r"Module.to: tinyattn runs on the CPU only; device 'cuda' is not available", None),
    ("module-cuda", lambda: nn.Linear(4, 3).cuda(), ValueError,
     r"Module.cuda: tinyattn runs on the CPU only", None),
    ("register-buffer-array", lambda: nn.Linear(4, 3).register_buffer("mask", np.ones(3)),
     TypeError, r"Linear.register_buffer: cannot assign 'ndarray' object to buffer 'mask' "
     r"\(Tensor or None required\)",
     lambda t: t.nn.Linear(4, 3).register_buffer("mask", np.ones(3))),
    ("register-buffer-dotted", lambda: nn.Linear(4, 3).register_buffer("a.mask", ta.ones(3)),
     KeyError, r"Linear.register_buffer: buffer name can't contain '.', got 'a.mask'",
     lambda t: t.nn.Linear(4, 3).register_buffer("a.mask", t.ones(3))),
    ("register-buffer-over-parameter",
     lambda: nn.Linear(4, 3).register_buffer("weight", ta.ones(3)), KeyError,
     r"Linear.register_buffer: 'weight' is already a parameter of Linear",
     lambda t: t.nn.Linear(4, 3).register_buffer("weight", t.ones(3))),
    ("assign-tensor-to-parameter", lambda: setattr(nn.Linear(4, 3), "weight", ta.ones(3, 4)),
     TypeError, r"Linear: cannot assign 'Tensor' as parameter 'weight' \(Parameter or None "
     r"expected", lambda t: setattr(t.nn.Linear(4, 3), "weight", t.ones(3, 4))),
    ("sequential-index", lambda: nn.Sequential(nn.ReLU())[1], IndexError,
     r"Sequential.__getitem__: index 1 is out of range for 1 modules",
     lambda t: t.nn.Sequential(t.nn.ReLU())[1]),
    ("packed-mha-heads-do-not-divide", lambda: nn.MultiheadAttention(10, 3), ValueError,
     r"MultiheadAttention: embed_dim 10 must be divisible by num_heads 3",
     lambda t: t.nn.MultiheadAttention(10, 3)),
    ("packed-mha-zero-width", lambda: nn.MultiheadAttention(0, 1), ValueError,
     r"MultiheadAttention: embed_dim must be an int >= 1, got 0",
     lambda t: t.nn.MultiheadAttention(0, 1)),
    ("packed-mha-dropout", lambda: nn.MultiheadAttention(8, 2, dropout=1.5), ValueError,
     r"MultiheadAttention: dropout probability p must be a number in \[0, 1\], got 1.5",
     lambda t: t.nn.MultiheadAttention(8, 2, dropout=1.5)(*[t.ones(3, 2, 8)] * 3)),
    ("packed-mha-device", lambda: nn.MultiheadAttention(8, 2, device="cuda"), ValueError,
     r"MultiheadAttention: tinyattn runs on the CPU only", None),
    ("packed-mha-query-width", lambda: nn.MultiheadAttention(8, 2)(*[ta.ones(3, 2, 6)] * 3),
     ValueError, r"MultiheadAttention: query must have shape \(T, B, 8\), got \(3, 2, 6\)",
     lambda t: t.nn.MultiheadAttention(8, 2)(*[t.ones(3, 2, 6)] * 3)),
    ("packed-mha-kdim", lambda: nn.MultiheadAttention(8, 2, kdim=4, batch_first=True)(
        ta.ones(2, 3, 8), ta.ones(2, 5, 8), ta.ones(2, 5, 8)), ValueError,
     r"MultiheadAttention: key must have shape \(B, S, 4\), got \(2, 5, 8\)",
     lambda t: t.nn.MultiheadAttention(8, 2, kdim=4, batch_first=True)(
         t.ones(2, 3, 8), t.ones(2, 5, 8), t.ones(2, 5, 8))),
    ("packed-mha-key-value-length", lambda: nn.MultiheadAttention(8, 2)(
        ta.ones(3, 2, 8), ta.ones(5, 2, 8), ta.ones(4, 2, 8)), ValueError,
     r"MultiheadAttention: key \(5, 2, 8\) and value \(4, 2, 8\) must share B and S",
     lambda t: t.nn.MultiheadAttention(8, 2)(t.ones(3, 2, 8), t.ones(5, 2, 8),
                                             t.ones(4, 2, 8))),
    ("packed-mha-4d-query", lambda: nn.MultiheadAttention(8, 2)(*[ta.ones(1, 3, 2, 8)] * 3),
     ValueError, r"MultiheadAttention: query, key and value must all be batched 3-D or "
     r"unbatched 2-D, got shapes \(1, 3, 2, 8\)",
     lambda t: t.nn.MultiheadAttention(8, 2)(*[t.ones(1, 3, 2, 8)] * 3)),
    ("packed-mha-int-query", lambda: nn.MultiheadAttention(8, 2)(*[ta.zeros(3, 2, 8).long()] * 3),
     TypeError, r"MultiheadAttention: query must be a float tensor, got dtype int64",
     lambda t: t.nn.MultiheadAttention(8, 2)(*[t.zeros(3, 2, 8).long()] * 3)),
    ("packed-mha-key-padding-mask-shape", lambda: nn.MultiheadAttention(8, 2)(
        *[ta.ones(3, 2, 8)] * 3, key_padding_mask=ta.ones(2, 4) > 0), ValueError,
     r"MultiheadAttention: key_padding_mask has shape \(2, 4\), expected \(2, 3\)",
     lambda t: t.nn.MultiheadAttention(8, 2)(*[t.ones(3, 2, 8)] * 3,
                                             key_padding_mask=t.ones(2, 4) > 0)),
    ("packed-mha-attn-mask-shape", lambda: nn.MultiheadAttention(8, 2)(
        *[ta.ones(3, 2, 8)] * 3, attn_mask=ta.ones(3, 4) > 0), ValueError,
     r"MultiheadAttention: attn_mask has shape \(3, 4\), expected \(3, 3\) or \(4, 3, 3\)",
     lambda t: t.nn.MultiheadAttention(8, 2)(*[t.ones(3, 2, 8)] * 3,
                                             attn_mask=t.ones(3, 4) > 0)),
    ("packed-mha-attn-mask-int", lambda: nn.MultiheadAttention(8, 2)(
        *[ta.ones(3, 2, 8)] * 3, attn_mask=ta.zeros(3, 3).long()), TypeError,
     r"MultiheadAttention: attn_mask must be boolean or have the query's dtype float32, got "
     r"int64", lambda t: t.nn.MultiheadAttention(8, 2)(*[t.ones(3, 2, 8)] * 3,
                                                       attn_mask=t.zeros(3, 3).long())),
    ("packed-mha-is-causal-without-mask",
     lambda: nn.MultiheadAttention(8, 2)(*[ta.ones(3, 2, 8)] * 3, is_causal=True), ValueError,
     r"MultiheadAttention: is_causal=True is a hint that attn_mask is the causal mask, so "
     r"attn_mask must be given too",
     lambda t: t.nn.MultiheadAttention(8, 2)(*[t.ones(3, 2, 8)] * 3, is_causal=True)),
    ("packed-mha-fused-weights",
     lambda: nn.MultiheadAttention(8, 2)(*[ta.ones(3, 2, 8)] * 3, impl="fused"), ValueError,
     r"MultiheadAttention: impl='fused' cannot serve this call: need_weights=True needs the "
     r"\(T, S\) attention weights", None),
    ("packed-mha-impl", lambda: nn.MultiheadAttention(8, 2, impl="flash"), ValueError,
     r"MultiheadAttention: impl must be 'auto', 'composed' or 'fused', got 'flash'",
     None),
]


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_bad_input_raises_a_clear_error(case):
    _, call, error, pattern, _ = case
    with pytest.raises(error, match=pattern):
        call()


TORCH_CASES = [case for case in CASES if case[4] is not None]


@pytest.mark.parametrize("case", TORCH_CASES, ids=[case[0] for case in TORCH_CASES])
def test_pytorch_rejects_the_same_call(case):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception):  # noqa: B017 - PyTorch's types vary (RuntimeError, ...)
        case[4](torch)


# ---- mixed dtypes: PyTorch's rules ------------------------------------------------------------
# Elementwise ops and cat/where promote as PyTorch does (float32 with float64 gives float64; an
# integer tensor with a float32 one gives float32); matmul, linear, layer_norm and
# scaled_dot_product_attention refuse mixed dtypes, as PyTorch does. Python and numpy scalars
# do not promote a tensor of their category.

@pytest.mark.parametrize("call", [
    lambda: nn.Linear(4, 3)(ta.randn(2, 4, dtype=ta.float64)),
    lambda: ta.ones(2, 2) @ ta.ones(2, 2, dtype=ta.float64),
    lambda: F.layer_norm(ta.ones(2, 4, dtype=ta.float64), 4, ta.ones(4), ta.zeros(4)),
])
def test_matmul_like_ops_refuse_mixed_float_dtypes_as_pytorch_does(call):
    with pytest.raises(TypeError, match=r"expected all inputs to have the same dtype"):
        call()


def test_pytorch_refuses_the_same_mixed_dtype_linear():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.nn.Linear(4, 3)(torch.randn(2, 4, dtype=torch.float64))


@pytest.mark.parametrize("op", ["add", "mul", "cat", "where"])
def test_elementwise_ops_on_float32_and_float64_give_float64(op):
    a, b = ta.ones(2, 2), ta.ones(2, 2, dtype=ta.float64)
    result = {
        "add": lambda: a + b, "mul": lambda: a * b,
        "cat": lambda: ta.cat([a, b]), "where": lambda: ta.where(a > 0, a, b),
    }[op]()
    assert result.dtype == np.float64


def test_python_and_numpy_scalars_do_not_promote_a_float32_tensor():
    x = ta.ones(2)
    assert (x * 2.5).dtype == np.float32
    assert (x * np.float64(2.5)).dtype == np.float32
    assert (x + 1).dtype == np.float32


def test_int_tensor_with_float32_tensor_gives_float32_as_in_pytorch():
    result = ta.arange(2) + ta.ones(2)
    assert result.dtype == np.float32
    torch = pytest.importorskip("torch")
    assert (torch.arange(2) + torch.ones(2)).dtype == torch.float32


# ---- checkpoint files -------------------------------------------------------------------------

def test_load_of_a_missing_file_names_the_path(tmp_path):
    path = tmp_path / "absent.npz"
    with pytest.raises(FileNotFoundError, match=r"load: no checkpoint file at .*absent\.npz"):
        nn.load(path)


@pytest.mark.parametrize("content", ["truncated", "garbage", "empty", "pickle", "npy",
                                     "object-array"])
def test_load_of_an_unreadable_file_names_the_path_and_what_was_expected(tmp_path, content):
    path = tmp_path / "model.npz"
    if content == "truncated":
        nn.Linear(4, 3).save(path)
        path.write_bytes(path.read_bytes()[:200])
    elif content == "garbage":
        path.write_bytes(b"\x00not a zip archive\xff" * 50)
    elif content == "empty":
        path.write_bytes(b"")
    elif content == "pickle":
        path.write_bytes(pickle.dumps({"weight": [1.0, 2.0]}))
    elif content == "npy":
        with open(path, "wb") as file:
            np.save(file, np.ones(3))
    else:
        np.savez(path, weight=np.array([{"a": 1}], dtype=object))
    pattern = r"load: '.*model\.npz' is not a readable tinyattn checkpoint \(\.npz of numeric"
    with pytest.raises(ValueError, match=pattern):
        nn.load(path)


# ---- command line -----------------------------------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "tinyattn", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("args, pattern", [
    (("walkthrough", "--bogus"), r"unrecognized arguments: --bogus"),
    (("frobnicate",), r"invalid choice: 'frobnicate'"),
    ((), r"the following arguments are required: COMMAND"),
    (("train", "--task", "reverse", "--steps", "0"), r"--steps: must be a positive integer"),
    (("train", "--text", "/no/such/corpus.txt"), r"--text file '/no/such/corpus.txt' does "
                                                  r"not exist"),
    (("sample", "--checkpoint", "/no/such/model.npz"), r"no checkpoint file at "
                                                        r"'/no/such/model.npz'"),
])
def test_cli_bad_usage_prints_a_message_and_exits_with_status_2(args, pattern):
    result = _cli(*args)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    assert re.search(pattern, result.stderr), result.stderr
