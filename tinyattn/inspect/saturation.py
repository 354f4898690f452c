"""How saturated is each softmax, and how much gradient can it pass: the scale lab.

For one row ``p = softmax(s)`` of the attention weights the Jacobian is ``J = diag(p) − p pᵀ``
(symmetric, positive semi-definite), and the backward pass sends ``dS = J · dP``. Three numbers
per head describe how much gradient the softmax lets through:

* the **row entropy** ``−Σ_j p_j log p_j`` (nats): ``log S`` for uniform attention, 0 for a
  one-hot row;
* the **largest eigenvalue of J**: at most 1/2 (reached by two keys sharing the row), tending
  to 0 as the row saturates on one key — then ``dS ≈ 0`` whatever ``dP`` is;
* the **gain** ``‖dS‖ / ‖dP‖`` actually measured in a backward pass.

:func:`scale_lab` runs one batch again and again with the scores scaled by ``1/√D`` (the
paper's choice), ``1/D``, ``1`` (no scaling) and any factor you give, and tabulates these with
the gradient norm reaching each head's slice of ``W_q`` and ``W_k``: with large scores the
softmax saturates and the gradient to the queries and keys collapses.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..nn.attention import MultiHeadAttention
from ..nn.module import Module
from ..ops.attention import default_scale
from ..optim import AdamW
from ..tables import Row, TableReport
from ..tensor import Tensor
from .gradients import AttentionGradients, LossFn, attention_gradients, attention_layers


def row_entropy(P: np.ndarray) -> np.ndarray:
    """``−Σ_j p_j log p_j`` of every row (``0 · log 0 = 0``); shape ``P.shape[:-1]``.

    Examples
    --------
    >>> float(row_entropy(np.full(4, 0.25))) == float(np.log(4))
    True
    """
    p = np.asarray(P, dtype=np.float64)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -np.sum(p * logs, axis=-1)


def softmax_gain(P: np.ndarray) -> np.ndarray:
    """The largest eigenvalue of ``diag(p) − p pᵀ`` for every row ``p``; shape ``P.shape[:-1]``.

    ``diag(p) − p pᵀ`` is a rank-one downdate of ``diag(p)``, so its largest eigenvalue lies
    between the two largest weights ``p₍₂₎ ≤ λ ≤ p₍₁₎`` and is the root there of the secular
    equation ``1 = Σ_j p_j² / (p_j − λ)`` (decreasing in ``λ`` on that interval): found by
    bisection, for all rows at once, in float64. A row with one non-zero weight ``p₁`` has
    ``λ = p₁ (1 − p₁)`` exactly (0 for a one-hot row: a query that sees one key passes no
    gradient to its score).

    Examples
    --------
    >>> softmax_gain(np.array([[0.5, 0.5], [1.0, 0.0]])).round(6).tolist()
    [0.5, 0.0]
    >>> float(softmax_gain(np.array([0.0, 1.0, 0.0])))
    0.0
    """
    p = np.asarray(P, dtype=np.float64)
    rows = p.reshape(-1, p.shape[-1])  # (N, S)
    top = np.sort(rows, axis=-1)[:, -2:] if rows.shape[-1] > 1 else \
        np.concatenate([np.zeros_like(rows), rows], axis=-1)  # (N, 2)
    low, high = top[:, 0].copy(), top[:, 1].copy()
    squares = rows * rows
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(64):
            middle = 0.5 * (low + high)
            residual = 1.0 - np.sum(squares / (rows - middle[:, None]), axis=-1)
            right = residual > 0  # the root lies above the middle
            low = np.where(right, middle, low)
            high = np.where(right, high, middle)
    gain = 0.5 * (low + high)
    single = np.count_nonzero(rows, axis=-1) == 1  # diag(p) − ppᵀ = (p₁ − p₁²) e eᵀ
    gain = np.where(single, top[:, 1] * (1.0 - top[:, 1]), gain)
    return gain.reshape(p.shape[:-1])


@dataclass(frozen=True)
class HeadSaturation:
    """The saturation statistics of one head (means over its rows and the batch)."""

    layer: str
    head: int
    entropy: float
    max_entropy: float
    gain: float
    grad_ratio: float


class SaturationReport(TableReport):
    """Per layer and head: row entropy (and its maximum ``log(#keys)``), the mean largest
    eigenvalue of the softmax Jacobian, and ``‖dS‖/‖dP‖``."""

    def __init__(self, heads: list[HeadSaturation]):
        self.heads = heads

    def table_header(self) -> Row:
        return ("layer", "head", "entropy", "max entropy", "λ_max(diag(p) − ppᵀ)",
                "|dS|/|dP|")

    def table_rows(self) -> list[Row]:
        return [(h.layer, str(h.head), f"{h.entropy:.3f}", f"{h.max_entropy:.3f}",
                 f"{h.gain:.4f}", f"{h.grad_ratio:.4f}") for h in self.heads]


def saturation(maps: AttentionGradients) -> SaturationReport:
    """The saturation statistics of every head of ``maps`` (see the module docstring).

    Examples
    --------
    >>> import tinyattn as ta
    >>> mha = ta.nn.MultiHeadAttention(8, num_heads=2)
    >>> report = saturation(attention_gradients(mha, ta.randn(1, 5, 8), lambda o: o.sum()))
    >>> [h.head for h in report.heads], report.heads[0].max_entropy == float(np.log(5))
    ([0, 1], True)
    """
    heads = []
    for layer in maps.layers:
        allowed = np.log(np.maximum(np.count_nonzero(layer.P > 0, axis=-1), 1))  # (B, H, T)
        entropy = row_entropy(layer.P)
        gain = softmax_gain(layer.P)
        for h in range(layer.P.shape[1]):
            dP, dS = np.linalg.norm(layer.dP[:, h]), np.linalg.norm(layer.dS[:, h])
            heads.append(HeadSaturation(layer.name, h, float(entropy[:, h].mean()),
                                        float(allowed[:, h].mean()), float(gain[:, h].mean()),
                                        float(dS / dP) if dP > 0 else float("nan")))
    return SaturationReport(heads)


@dataclass(frozen=True)
class ScaleRecord:
    """One head at one step of one scale setting."""

    scale: str
    factor: float
    step: int
    layer: str
    head: int
    loss: float
    entropy: float
    gain: float
    grad_ratio: float
    grad_q: float
    grad_k: float


class ScaleLab(TableReport):
    """The records of :func:`scale_lab`; the table shows, per scale and step, the mean over
    heads (``per_head`` lists every head)."""

    def __init__(self, records: list[ScaleRecord], scales: list[tuple[str, float]],
                 steps: int):
        self.records = records
        self.scales = scales
        self.steps = steps

    def means(self, scale: str, step: int) -> dict[str, float]:
        """The mean over heads of each statistic, for one scale setting and step."""
        rows = [r for r in self.records if r.scale == scale and r.step == step]
        keys = ("loss", "entropy", "gain", "grad_ratio", "grad_q", "grad_k")
        return {k: float(np.mean([getattr(r, k) for r in rows])) for k in keys}

    def table_header(self) -> Row:
        return ("scale", "factor", "step", "loss", "entropy", "λ_max", "|dS|/|dP|",
                "|dW_q| per head", "|dW_k| per head")

    def table_rows(self) -> list[Row]:
        rows = []
        shown = sorted({0, self.steps - 1})
        for label, factor in self.scales:
            for step in shown:
                m = self.means(label, step)
                rows.append((label, f"{factor:.4g}", str(step), f"{m['loss']:.4f}",
                             f"{m['entropy']:.3f}", f"{m['gain']:.4f}", f"{m['grad_ratio']:.4f}",
                             f"{m['grad_q']:.3e}", f"{m['grad_k']:.3e}"))
        return rows

    def summary(self) -> str:
        return "means over layers and heads; entropy in nats, λ_max of the softmax Jacobian"


def standard_scales(head_size: int, factor: float | None = None) -> list[tuple[str, float]]:
    """``1/√D``, ``1/D``, ``1`` and an optional factor, as ``(label, factor)`` pairs.

    Examples
    --------
    >>> standard_scales(16, 4.0)
    [('1/√D', 0.25), ('1/D', 0.0625), ('1', 1.0), ('4', 4.0)]
    """
    scales = [("1/√D", 1.0 / math.sqrt(head_size)), ("1/D", 1.0 / head_size), ("1", 1.0)]
    if factor is not None:
        scales.append((f"{factor:g}", float(factor)))
    return scales


def scale_lab(model: Module, batch: Any, scales: Sequence[tuple[str, float]],
              loss_fn: LossFn | None = None, steps: int = 1, lr: float = 3e-3) -> ScaleLab:
    """Run the same batch with the attention scores scaled by each factor and record, per
    head and step, the saturation statistics and the gradient reaching ``W_q`` and ``W_k``.

    Every setting starts from the model's current weights; weights and ``.grad`` are restored
    afterwards. With ``steps > 1`` each setting also trains on the batch (AdamW, ``lr``),
    recording every step before its update (one forward and one backward pass per step).

    Parameters
    ----------
    model : Module
        A model with :class:`~tinyattn.nn.MultiHeadAttention` layers (their
        ``hook_attn_scores`` rescales the scores).
    batch, loss_fn
        As for :func:`attention_gradients`.
    scales : sequence of (label, factor)
        The factor multiplying ``q · k`` (``1/√D`` is the standard one); see
        :func:`standard_scales`.
    """
    op = "scale_lab"
    layers = [(name, layer) for name, layer, _ in attention_layers(model, op)]
    missing = [name for name, layer in layers if not isinstance(layer, MultiHeadAttention)]
    if missing:
        raise ValueError(f"{op}: rescales the scores through hook_attn_scores, which only "
                         f"MultiHeadAttention layers have; these layers are not: {missing}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"{op}: steps must be a positive int, got {steps!r}")
    for label, factor in scales:
        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
            raise ValueError(f"{op}: the factor of scale {label!r} must be a positive finite "
                             f"number, got {factor!r}")
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    grads = [(p, p.grad) for p in model.parameters()]
    records: list[ScaleRecord] = []
    try:
        for label, factor in scales:
            model.load_state_dict(initial)
            optimizer = AdamW(model.parameters(), lr=lr) if steps > 1 else None
            for step in range(steps):
                measured, grads_now = _measure(model, layers, batch, loss_fn, label, factor,
                                               step)
                records += measured
                if optimizer is not None and step < steps - 1:  # train on what was measured
                    for param, grad in zip(model.parameters(), grads_now):
                        param.grad = Tensor(grad)
                    optimizer.step()
    finally:
        model.load_state_dict(initial)
        for param, grad in grads:
            param.grad = grad
    return ScaleLab(records, list(scales), steps)


@contextmanager
def _scores_scaled(layers: list, factor: float) -> Iterator[None]:
    """Multiply every layer's scores ``q · k / √D`` by ``factor · √D`` (so that they are
    ``factor · q · k``) through its ``hook_attn_scores``, for a ``with`` block."""
    hooks = []
    for _, layer in layers:
        ratio = factor / default_scale(layer.d_head)

        def hook(scores: Tensor, point: Any, ratio: float = ratio) -> Tensor:
            return scores * ratio

        hooks.append((layer.hook_attn_scores, hook))
        layer.hook_attn_scores.fwd_hooks.append(hook)
    try:
        yield
    finally:
        for point, hook in hooks:
            point.fwd_hooks.remove(hook)


def _measure(model: Module, layers: list, batch: Any, loss_fn: LossFn | None, label: str,
             factor: float, step: int) -> tuple[list[ScaleRecord], list[np.ndarray]]:
    """The records of one setting and step, and the gradient of every parameter (one forward
    and one backward pass)."""
    params = list(model.parameters())
    position = {id(p): i for i, p in enumerate(params)}
    with _scores_scaled(layers, factor):
        maps = attention_gradients(model, batch, loss_fn, extra=params)
    by_name = dict(layers)
    records = []
    for stats in saturation(maps).heads:
        layer = by_name[stats.layer.split(" (call ")[0]]
        D, h = layer.d_head, stats.head
        kv = h // (layer.num_heads // layer.num_kv_heads)  # the key head that query head h reads
        grad_q = maps.extra[position[id(layer.q_proj.weight)]]  # head h: rows h·D:(h+1)·D
        grad_k = maps.extra[position[id(layer.k_proj.weight)]]
        records.append(ScaleRecord(
            label, factor, step, stats.layer, h, maps.loss, stats.entropy, stats.gain,
            stats.grad_ratio, float(np.linalg.norm(grad_q[h * D:(h + 1) * D])),
            float(np.linalg.norm(grad_k[kv * D:(kv + 1) * D]))))
    return records, maps.extra
