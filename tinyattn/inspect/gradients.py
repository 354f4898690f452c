"""Gradient-routing maps: what every attention head computed, and what gradient came back.

For each attention layer and head, one forward and one backward pass capture

* ``P``  — the attention weights ``softmax(S)``, ``(B, H, T, S)``;
* ``dP`` — the gradient of the loss arriving at the weights;
* ``dS`` — the gradient at the scores, ``dS = P ⊙ (dP − rowsum(dP ⊙ P))``: what the softmax
  lets through to the queries and keys (``dQ = s · dS · K``, ``dK = s · dSᵀ · Q``).

Where ``P`` is zero (above the diagonal of a causal layer) ``dS`` is exactly zero: no gradient
reaches a key from a query that may not see it. :meth:`AttentionGradients.causal_leak` checks
it. :func:`gradient_rollout` follows the gradient across layers: how much of the loss's
gradient each input position receives through each head.

The maps are captured without changing the model: each attention layer is asked for its
weights during the run (which makes it take the composed path, the only one that computes
them), and the backward pass computes gradients at the weights and scores only — the
parameters' ``.grad`` is left untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..autograd import Context
from ..autograd import grad as autograd_grad
from ..nn.attention import MultiHeadAttention, MultiHeadAttentionWrapper, SelfAttention
from ..nn.module import Module
from ..tables import Row, TableReport
from ..tensor import Tensor

LossFn = Callable[[Any], Tensor]


@dataclass
class LayerGradients:
    """The maps of one attention layer: arrays ``(B, H, T, S)`` (H = 1 for one head)."""

    name: str
    P: np.ndarray
    dP: np.ndarray
    dS: np.ndarray


class AttentionGradients(TableReport):
    """``P``, ``dP`` and ``dS`` of every attention layer and head, in forward order.

    ``maps[l]`` (or ``maps["blocks.0.attn"]``) is a :class:`LayerGradients`; ``str(maps)``
    tabulates the norms per layer and head: ``|P|``, ``|dP|`` and ``|dS|`` are the Euclidean
    (Frobenius) norms, over the batch, of that head's weights ``P``, of the gradient ``dP`` at
    the weights and of the gradient ``dS`` at the scores; ``|dS|/|dP|`` is how much of the
    gradient the softmax lets through. (Each row of ``P`` sums to 1, so ``|P|`` runs from
    ``√(B·T/S)`` for uniform attention to ``√(B·T)`` when every query looks at one key: it
    measures how peaked the weights are.)
    """

    def __init__(self, layers: list[LayerGradients], loss: float,
                 extra: list[np.ndarray] | None = None):
        self.layers = layers
        self.loss = loss
        self.extra = extra or []

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, key: int | str) -> LayerGradients:
        if isinstance(key, str):
            for layer in self.layers:
                if layer.name == key:
                    return layer
            raise KeyError(f"AttentionGradients: no layer {key!r}; the layers are "
                           f"{[layer.name for layer in self.layers]}")
        return self.layers[key]

    def causal_leak(self) -> float:
        """The largest ``|dS|`` and ``|P|`` strictly above the diagonal, over every layer, head
        and example: exactly 0.0 for causal attention."""
        worst = 0.0
        for layer in self.layers:
            T, S = layer.P.shape[-2:]
            above = np.triu(np.ones((T, S), dtype=bool), k=1)
            worst = max(worst, float(np.max(np.abs(layer.dS[..., above]), initial=0.0)),
                        float(np.max(np.abs(layer.P[..., above]), initial=0.0)))
        return worst

    def table_header(self) -> Row:
        return ("layer", "head", "|P|", "|dP|", "|dS|", "|dS|/|dP|")

    def table_rows(self) -> list[Row]:
        rows = []
        for layer in self.layers:
            for h in range(layer.P.shape[1]):
                norms = [float(np.linalg.norm(a[:, h])) for a in (layer.P, layer.dP, layer.dS)]
                ratio = norms[2] / norms[1] if norms[1] > 0 else float("nan")
                rows.append((layer.name, str(h), *(f"{n:.3e}" for n in norms), f"{ratio:.3f}"))
        return rows

    def summary(self) -> str:
        return ("|P|, |dP|, |dS|: norms over the batch of the head's weights P, of the gradient "
                "dP at the weights and of the gradient dS at the scores (|P| grows from "
                "√(B·T/S), uniform weights, to √(B·T), one key per query)\n"
                f"loss {self.loss:.4f}; largest |dS| or |P| above the diagonal: "
                f"{self.causal_leak():.3g}")

    def __repr__(self) -> str:
        return f"<AttentionGradients of {len(self.layers)} layers>"


def attention_layers(model: Module, op: str) -> list[tuple[str, Module, int | None]]:
    """``(layer name, attention module, head index)`` for every attention in ``model``: a
    :class:`MultiHeadAttention` or a lone :class:`SelfAttention` is a layer; the heads of a
    :class:`MultiHeadAttentionWrapper` form one layer together."""
    if not isinstance(model, Module):
        raise TypeError(f"{op}: expected a tinyattn Module, got {type(model).__name__}")
    found: list[tuple[str, Module, int | None]] = []
    in_wrapper: set[int] = set()
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttentionWrapper):
            for h, head in enumerate(module.heads):
                found.append((name or "model", head, h))
                in_wrapper.add(id(head))
        elif isinstance(module, MultiHeadAttention) or (
                isinstance(module, SelfAttention) and id(module) not in in_wrapper):
            found.append((name or "model", module, None))
    if not found:
        raise ValueError(f"{op}: the model ({type(model).__name__}) has no attention layer: "
                         "expected a SelfAttention, MultiHeadAttentionWrapper or "
                         "MultiHeadAttention inside it")
    return found


@contextmanager
def _weights_recorded(layers: list[tuple[str, Module, int | None]],
                      store: list[tuple[str, int | None, Tensor]]):
    """Make every attention layer return its per-head weights to ``store`` during the run
    (its callers still get what they asked for)."""
    wrapped = []
    for name, layer, head in layers:
        original = layer.forward

        def forward(*args: Any, _original=original, _layer=layer, _name=name, _head=head,
                    **kwargs: Any) -> Any:
            asked = kwargs.pop("need_weights", False)
            average = kwargs.pop("average_attn_weights", True)
            per_head = isinstance(_layer, MultiHeadAttention)
            if per_head:
                kwargs["average_attn_weights"] = False
            out, weights = _original(*args, need_weights=True, **kwargs)
            store.append((_name, _head, weights))
            if not asked:
                return out
            return out, weights.mean(dim=-3) if per_head and average else weights

        layer.forward = forward
        wrapped.append(layer)
    try:
        yield
    finally:
        for layer in wrapped:
            del layer.forward


def _softmax_output(weights: Tensor) -> Tensor:
    """The softmax output behind the weights a layer returned, which may have gone through
    dropout (a product with the kept-and-scaled factors) and a reshape (unbatched input): a
    tensor on the softmax's saved output ``y`` whose ``grad_fn`` is that softmax."""
    node = weights.grad_fn
    while isinstance(node, Context) and node.name in ("Reshape", "Mul"):
        node = node.edges[0]
    if not isinstance(node, Context) or node.name != "Softmax":
        raise RuntimeError("attention_gradients: the attention weights do not come from a "
                           "softmax in the graph (is grad mode on, and do the parameters "
                           "require grad?)")
    return weights if node is weights.grad_fn else node.saved_tensors[0]


def run_loss(model: Module, batch: Any, loss_fn: LossFn | None, op: str) -> tuple[Any, Tensor]:
    """Call ``model(*batch)`` and reduce its output to the loss: ``loss_fn(output)``, or the
    second item of an ``(output, loss)`` pair, or the output itself when it is a scalar."""
    args = batch if isinstance(batch, tuple) else (batch,)
    output = model(*args)
    if loss_fn is not None:
        loss = loss_fn(output)
    elif isinstance(output, tuple) and len(output) == 2 and isinstance(output[1], Tensor):
        loss = output[1]
    else:
        loss = output
    if not isinstance(loss, Tensor) or loss.ndim != 0:
        raise ValueError(f"{op}: the loss must be a scalar Tensor; got "
                         f"{getattr(loss, 'shape', type(loss).__name__)}: pass loss_fn= "
                         "(output -> scalar loss), or a batch (idx, targets) for a language "
                         "model")
    if not loss.requires_grad:
        raise RuntimeError(f"{op}: the loss does not require grad (is grad mode on, and does "
                           "the model have parameters that require grad?)")
    return output, loss


def attention_gradients(model: Module, batch: Any, loss_fn: LossFn | None = None,
                        extra: Sequence[Tensor] = ()) -> AttentionGradients:
    """Capture ``P``, ``dP`` and ``dS`` of every attention layer and head in one forward and
    backward pass.

    Parameters
    ----------
    model : Module
        Any model with attention layers: a ``TransformerLM``, a ``MultiHeadAttention``, a
        ``SelfAttention``, a ``MultiHeadAttentionWrapper`` or a module containing them.
    batch : Tensor or tuple
        The model's arguments: ``model(*batch)`` (``(idx, targets)`` for a language model).
    loss_fn : callable, optional
        ``output -> scalar loss``; not needed when the model returns ``(output, loss)`` or a
        scalar.
    extra : sequence of Tensor
        Other tensors (parameters) whose gradient the same backward pass should compute, in
        ``maps.extra`` as arrays.

    Examples
    --------
    >>> import tinyattn as ta
    >>> mha = ta.nn.MultiHeadAttention(8, num_heads=2, causal=True)
    >>> x = ta.randn(1, 5, 8)
    >>> maps = attention_gradients(mha, x, lambda out: (out * out).sum())
    >>> maps[0].P.shape, maps[0].dS.shape, maps.causal_leak()
    ((1, 2, 5, 5), (1, 2, 5, 5), 0.0)
    """
    op = "attention_gradients"
    layers = attention_layers(model, op)
    multi_head = {name: isinstance(layer, MultiHeadAttention) for name, layer, _ in layers}
    store: list[tuple[str, int | None, Tensor]] = []
    with _weights_recorded(layers, store):
        _, loss = run_loss(model, batch, loss_fn, op)
    if not store:
        raise RuntimeError(f"{op}: no attention layer was called during the forward pass")
    weights = [_softmax_output(w) for _, _, w in store]
    scores = [w.grad_fn.inputs[0] for w in weights]
    found = autograd_grad(loss, [*weights, *scores, *extra], allow_unused=True,
                          materialize_grads=True)
    n = len(weights)
    grouped: dict[tuple[str, int], list[tuple[np.ndarray, ...]]] = {}
    calls: dict[str, int] = {}
    for i, (name, head, _) in enumerate(store):
        if head in (None, 0):  # a new call (a wrapper's heads run one after another)
            calls[name] = calls.get(name, 0) + 1
        grouped.setdefault((name, calls[name]), []).append(tuple(
            _heads(a.numpy(), multi_head[name]) for a in (weights[i], found[i], found[n + i])))
    result = [LayerGradients(name if call == 1 else f"{name} (call {call})",
                             *(np.concatenate([p[j] for p in parts], axis=1) for j in range(3)))
              for (name, call), parts in grouped.items()]
    return AttentionGradients(result, loss.item(), [g.numpy() for g in found[2 * n:]])


def _heads(array: np.ndarray, per_head: bool) -> np.ndarray:
    """Weights as ``(B, H, T, S)``: a multi-head layer's ``(B, H, T, S)`` or unbatched
    ``(H, T, S)``; one head's ``(B, T, S)`` or unbatched ``(T, S)``."""
    if per_head:
        return array if array.ndim == 4 else array[None]  # (1, H, T, S)
    return array[:, None] if array.ndim == 3 else array[None, None]  # (B, 1, T, S)


@dataclass
class GradientRollout:
    """How the loss's gradient flows back to the input positions, layer by layer.

    Attributes
    ----------
    matrix : ndarray (T, T)
        ``R[i, j]``: the share of position ``i``'s gradient at the top that reaches input
        position ``j`` (rows of ``I + Σ`` relevance paths).
    per_head : ndarray (L, H, T)
        How much gradient input position ``j`` receives through head ``h`` of layer ``l``.
    layers : list of str
    """

    matrix: np.ndarray
    per_head: np.ndarray
    layers: list[str]


def gradient_rollout(maps: AttentionGradients, example: int = 0) -> GradientRollout:
    """Roll the gradient-weighted attention out across layers (Chefer, Gur and Wolf, 2021).

    Each head's routing map is ``A_{l,h} = max(0, dP ⊙ P)``: the part of the loss's gradient
    that the weight ``P[i, j]`` carried (first-order: the loss changes by ``dP[i, j] ·
    P[i, j]`` when the weight is scaled by ``1 + ε``). The heads of a layer are averaged and
    the residual stream added: ``R_0 = I``, ``R_l = R_{l−1} + mean_h A_{l,h} · R_{l−1}``. The
    amount input position ``j`` receives through head ``h`` of layer ``l`` is the column sum
    of ``A_{l,h} · R_{l−1}``. A causal model's rollout is lower triangular.

    Examples
    --------
    >>> import tinyattn as ta, numpy as np
    >>> model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 8, 16, 2, 2))
    >>> idx = ta.tensor([[1, 2, 3, 4]])
    >>> rollout = gradient_rollout(attention_gradients(model, (idx, idx)))
    >>> rollout.per_head.shape, bool(np.all(np.triu(rollout.matrix, 1) == 0))
    ((2, 2, 4), True)
    """
    if not maps.layers:
        raise ValueError("gradient_rollout: no attention layer in the maps")
    sizes = {layer.P.shape[-2:] for layer in maps.layers}
    if len(sizes) != 1 or len({*next(iter(sizes))}) != 1:
        raise ValueError(f"gradient_rollout: needs self-attention layers of one length T "
                         f"(square (T, T) maps), got shapes {sorted(sizes)}")
    batch = maps.layers[0].P.shape[0]
    if not 0 <= example < batch:
        raise IndexError(f"gradient_rollout: example {example} is out of range for a batch "
                         f"of {batch}")
    T = maps.layers[0].P.shape[-1]
    rollout = np.eye(T)
    per_head = []
    for layer in maps.layers:
        flow = np.maximum(0.0, layer.dP[example].astype(np.float64) * layer.P[example])
        through = flow @ rollout  # (H, T, T)
        per_head.append(through.sum(axis=1))  # (H, T)
        rollout = rollout + through.mean(axis=0)
    return GradientRollout(rollout, np.stack(per_head), [layer.name for layer in maps.layers])
