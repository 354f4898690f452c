"""GPT-2-layout state dicts into a :class:`~tinyattn.models.TransformerLM`.

GPT-2 (and checkpoints saved in its layout, e.g. by Hugging Face ``GPT2Model`` /
``GPT2LMHeadModel``) stores its linear layers as ``Conv1D``: ``y = x W + b`` with ``W`` of shape
``(in_features, out_features)``, the transpose of ``Linear``'s ``(out_features, in_features)``;
the query, key and value projections are packed column-wise in one ``c_attn``. The mapping, for
every block ``N`` (a ``transformer.`` prefix on the keys is accepted; the attention-mask
buffers ``h.N.attn.bias`` and ``h.N.attn.masked_bias`` are skipped):

==============================  =================================================  ============
GPT-2 key                       tinyattn key                                       conversion
==============================  =================================================  ============
``wte.weight``  (V, C)          ``token_embedding.weight``, ``lm_head.weight``     tied
``wpe.weight``  (P, C)          ``position_embedding.weight``                      —
``h.N.ln_1.weight`` / ``bias``  ``blocks.N.ln_1.weight`` / ``bias``                —
``h.N.attn.c_attn.weight``      ``blocks.N.attn.{q,k,v}_proj.weight``              split the
(C, 3C)                                                                            columns in 3,
                                                                                   transpose each
``h.N.attn.c_attn.bias`` (3C)   ``blocks.N.attn.{q,k,v}_proj.bias``                split in 3
``h.N.attn.c_proj.weight``      ``blocks.N.attn.out_proj.weight``                  transpose
``h.N.attn.c_proj.bias``        ``blocks.N.attn.out_proj.bias``                    —
``h.N.ln_2.weight`` / ``bias``  ``blocks.N.ln_2.weight`` / ``bias``                —
``h.N.mlp.c_fc.weight`` (C, 4C) ``blocks.N.mlp.fc.weight``                         transpose
``h.N.mlp.c_fc.bias``           ``blocks.N.mlp.fc.bias``                           —
``h.N.mlp.c_proj.weight``       ``blocks.N.mlp.proj.weight``                       transpose
``h.N.mlp.c_proj.bias``         ``blocks.N.mlp.proj.bias``                         —
``ln_f.weight`` / ``bias``      ``ln_f.weight`` / ``bias``                         —
``lm_head.weight`` (optional)   tied to ``wte.weight``                             must equal it
==============================  =================================================  ============

The model is GPT-2-shaped: learned positions, LayerNorm (eps 1e-5) with biases, tanh GELU,
biases everywhere, the head tied to the token embedding (:func:`gpt2_config`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from .interop import split_projections
from .models import TransformerLM, TransformerLMConfig
from .tensor import from_numpy

_SKIPPED = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)$")


def _arrays(state_dict: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The state dict as numpy arrays (torch tensors are detached and copied), without the
    ``transformer.`` prefix and the mask buffers."""
    arrays = {}
    for key, value in state_dict.items():
        key = key.removeprefix("transformer.")
        if _SKIPPED.match(key):
            continue
        if hasattr(value, "detach"):
            value = value.detach().cpu().numpy()
        arrays[key] = np.asarray(value)
    return arrays


def gpt2_config(state_dict: Mapping[str, Any], num_heads: int, **fields: Any
                ) -> TransformerLMConfig:
    """The GPT-2-shaped :class:`~tinyattn.models.TransformerLMConfig` of a GPT-2-layout state
    dict: sizes read from the weights (``num_heads`` cannot be: pass it), ``fields`` override
    the rest (e.g. ``dropout``)."""
    arrays = _arrays(state_dict)
    for key in ("wte.weight", "wpe.weight", "h.0.mlp.c_fc.weight"):
        if key not in arrays:
            raise KeyError(f"gpt2_config: no {key!r} in the state dict: not the GPT-2 layout "
                           f"(keys: {sorted(arrays)[:8]} …)")
    vocab_size, C = arrays["wte.weight"].shape
    layers = 1 + max(int(k.split(".")[1]) for k in arrays if k.startswith("h."))
    hidden = arrays["h.0.mlp.c_fc.weight"].shape[1]
    if hidden % C:
        raise ValueError(f"gpt2_config: MLP width {hidden} is not a multiple of the width {C}")
    return TransformerLMConfig(
        vocab_size=int(vocab_size), context_length=int(arrays["wpe.weight"].shape[0]),
        embed_dim=int(C), num_heads=num_heads, num_layers=layers, mlp_ratio=hidden // C,
        **{"tie_weights": True, "gelu_approximate": "tanh", **fields})


def gpt2_to_tinyattn(state_dict: Mapping[str, Any], num_layers: int) -> dict[str, np.ndarray]:
    """A GPT-2-layout state dict under tinyattn's keys and layouts (the table above)."""
    arrays = _arrays(state_dict)
    out = {"token_embedding.weight": arrays.pop("wte.weight"),
           "position_embedding.weight": arrays.pop("wpe.weight")}
    tied = arrays.pop("lm_head.weight", out["token_embedding.weight"])
    if not np.array_equal(tied, out["token_embedding.weight"]):
        raise ValueError("gpt2_to_tinyattn: lm_head.weight differs from wte.weight, but a "
                         "GPT-2 head is tied to the token embedding")
    out["lm_head.weight"] = tied
    for name in ("weight", "bias"):
        out[f"ln_f.{name}"] = arrays.pop(f"ln_f.{name}")
    for n in range(num_layers):
        src, dst = f"h.{n}.", f"blocks.{n}."
        for norm in ("ln_1", "ln_2"):
            for name in ("weight", "bias"):
                out[f"{dst}{norm}.{name}"] = arrays.pop(f"{src}{norm}.{name}")
        # c_attn (C, 3C) holds q, k, v in column blocks: transposed, it is PyTorch's packed
        # in_proj_weight (3C, C), which interop splits into the three projections
        packed = {"in_proj_weight": from_numpy(arrays.pop(f"{src}attn.c_attn.weight").T),
                  "in_proj_bias": from_numpy(arrays.pop(f"{src}attn.c_attn.bias"))}
        for key, value in split_projections(packed).items():
            out[f"{dst}attn.{key}"] = value.numpy()  # (C, C) and (C,)
        for gpt2_name, name in (("attn.c_proj", "attn.out_proj"), ("mlp.c_fc", "mlp.fc"),
                                ("mlp.c_proj", "mlp.proj")):
            out[f"{dst}{name}.weight"] = arrays.pop(f"{src}{gpt2_name}.weight").T  # (out, in)
            out[f"{dst}{name}.bias"] = arrays.pop(f"{src}{gpt2_name}.bias")
    if arrays:
        raise KeyError(f"gpt2_to_tinyattn: unexpected keys {sorted(arrays)}")
    return {key: np.ascontiguousarray(value) for key, value in out.items()}


def load_gpt2_state_dict(model: TransformerLM, state_dict: Mapping[str, Any]) -> TransformerLM:
    """Load a GPT-2-layout state dict into a GPT-2-shaped ``model`` (in its float dtype: the
    state dict's is kept when the model is converted first); returns ``model``."""
    config = model.config
    shaped = (config.positional == "learned" and config.tie_weights and config.bias
              and config.norm == "layernorm" and config.mlp == "gelu"
              and config.num_kv_heads in (None, config.num_heads))
    if not shaped:
        raise ValueError("load_gpt2_state_dict: the model must be GPT-2-shaped (learned "
                         "positions, tie_weights, bias, layernorm, gelu MLP, no grouped heads); "
                         f"got {config}")
    arrays = gpt2_to_tinyattn(state_dict, config.num_layers)
    model.to(arrays["token_embedding.weight"].dtype)
    model.load_state_dict(arrays)
    return model


def from_gpt2(state_dict: Mapping[str, Any], num_heads: int, **fields: Any) -> TransformerLM:
    """A GPT-2-shaped :class:`~tinyattn.models.TransformerLM` with the weights of a GPT-2-layout
    state dict (numpy arrays or torch tensors), in eval mode."""
    model = TransformerLM(gpt2_config(state_dict, num_heads, **fields))
    return load_gpt2_state_dict(model, state_dict).eval()
