"""Pictures with matplotlib (optional: ``pip install 'tinyattn[viz]'``): attention heatmaps, loss
curves, gradient-routing maps and the scale lab's curves.

Every function draws on the non-interactive Agg canvas (no display needed, no global pyplot
state), saves to ``path`` when one is given and returns the matplotlib Figure otherwise, which
Jupyter shows inline.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..tensor import Tensor

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .gradients import AttentionGradients, GradientRollout
    from .saturation import ScaleLab


def new_figure(width: float, height: float) -> Figure:
    """A matplotlib Figure on the Agg canvas (no display, no global pyplot state)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError(
            "tinyattn.inspect plotting needs matplotlib: pip install 'tinyattn[viz]'"
        ) from err
    new = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(new)
    return new


def finish(drawn: Figure, path: str | os.PathLike | None) -> Path | Figure:
    """Save ``drawn`` to ``path`` (creating its folder) and return the path; without a path,
    return the Figure itself (Jupyter shows it inline after ``%matplotlib inline``)."""
    if path is None:
        return drawn
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    drawn.savefig(target, dpi=110)
    return target


def plot_attention(
    weights: Tensor | np.ndarray,
    tokens: Sequence[str],
    path: str | os.PathLike | None = None,
    title: str | None = None,
    query_tokens: Sequence[str] | None = None,
    panel_titles: Sequence[str] | None = None,
) -> Path | Figure:
    """Draw attention weights as heatmaps: one panel per head for ``(H, T, S)``, one for ``(T, S)``.

    Row ``t`` shows where query ``t`` looks; column ``s`` is key ``s``.

    Parameters
    ----------
    weights : Tensor or ndarray
        Post-softmax weights, ``(T, S)`` or ``(H, T, S)``.
    tokens : sequence of str
        Labels of the ``S`` keys (and of the queries, when ``query_tokens`` is not given).
    path : str or PathLike, optional
        Where to save the picture (the format follows the suffix, e.g. ``.png``); without
        it the matplotlib Figure is returned (Jupyter shows it inline).
    query_tokens : sequence of str, optional
        Labels of the ``T`` queries.
    panel_titles : sequence of str, optional
        One title per panel (default ``head 0``, ``head 1``, ... when there are several).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from tinyattn.inspect import plot_attention
    >>> w = np.full((2, 3, 3), 1 / 3)
    >>> p = plot_attention(w, ["a", "b", "c"], os.path.join(tempfile.mkdtemp(), "a.png"))
    >>> p.stat().st_size > 0
    True
    """
    array = np.asarray(weights.numpy() if isinstance(weights, Tensor) else weights,
                       dtype=np.float64)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3:
        raise ValueError(
            f"plot_attention: weights must be (T, S) or (H, T, S), got shape {array.shape}"
        )
    heads, n_queries, n_keys = array.shape
    query_tokens = list(tokens) if query_tokens is None else list(query_tokens)
    if len(tokens) != n_keys or len(query_tokens) != n_queries:
        raise ValueError(
            f"plot_attention: weights of shape {array.shape} need {n_keys} key labels and "
            f"{n_queries} query labels, got {len(tokens)} and {len(query_tokens)}"
        )
    if panel_titles is None:
        panel_titles = [f"head {h}" for h in range(heads)] if heads > 1 else [""]
    if len(panel_titles) != heads:
        raise ValueError(
            f"plot_attention: {heads} panels need {heads} titles, got {len(panel_titles)}"
        )
    columns = min(heads, 4)
    rows = -(-heads // columns)
    side = 0.22 * max(n_queries, n_keys) + 1.0
    figure = new_figure(side * columns + 0.8, side * rows + (0.5 if title else 0.0))
    axes = figure.subplots(rows, columns, squeeze=False)
    image = None
    for h, ax in enumerate(axes.flat):
        if h >= heads:
            ax.set_axis_off()
            continue
        image = ax.imshow(array[h], cmap="viridis", vmin=0.0, vmax=max(1e-12, array.max()))
        ax.set_xticks(range(n_keys), list(tokens), rotation=90, fontsize=8)
        ax.set_yticks(range(n_queries), query_tokens, fontsize=8)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        ax.set_title(panel_titles[h], fontsize=9)
    figure.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8)
    if title:
        figure.suptitle(title)
    return finish(figure, path)


def plot_losses(
    history: Mapping[str, Sequence[tuple[int, float]]], path: str | os.PathLike | None = None,
    title: str | None = None,
) -> Path | Figure:
    """Plot loss curves: ``history`` maps a curve name (``"train"``, ``"eval"``) to
    ``(step, value)`` pairs. Saved to ``path``, or returned as a Figure without it.

    Examples
    --------
    >>> import tempfile, os
    >>> from tinyattn.inspect import plot_losses
    >>> history = {"train": [(0, 2.3), (10, 1.1)], "eval": [(10, 1.3)]}
    >>> plot_losses(history, os.path.join(tempfile.mkdtemp(), "l.png")).suffix
    '.png'
    """
    if not history or not any(len(points) for points in history.values()):
        raise ValueError("plot_losses: history has no points to plot")
    figure = new_figure(6.0, 3.6)
    ax = figure.subplots()
    for name, points in history.items():
        if len(points):
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o" if len(points) < 30 else None, ms=3, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return finish(figure, path)


def _labels(tokens: Sequence[str] | None, count: int, op: str) -> list[str]:
    if tokens is None:
        return [str(i) for i in range(count)]
    if len(tokens) != count:
        raise ValueError(f"{op}: {count} positions need {count} token labels, got {len(tokens)}")
    return list(tokens)


def plot_attention_gradients(
    maps: AttentionGradients,
    path: str | os.PathLike | None = None,
    example: int = 0,
    layers: Sequence[int] | None = None,
    tokens: Sequence[str] | None = None,
    title: str | None = None,
) -> Path | Figure:
    """Draw ``P``, ``dP`` and ``dS`` side by side: one row per layer and head.

    Row ``t`` of a panel is query ``t``, column ``s`` key ``s`` (both axes are labelled).
    ``P`` in viridis from 0; ``dP`` and ``dS`` on a red-blue scale centred at 0 (red where
    raising the entry would raise the loss), each panel with its own range.

    Parameters
    ----------
    maps : AttentionGradients
        From :func:`tinyattn.inspect.attention_gradients`.
    path : str or PathLike, optional
        Where to save the picture; without it the Figure is returned.
    example : int
        Which sequence of the batch to draw.
    layers : sequence of int, optional
        Which layers (default all).
    tokens : sequence of str, optional
        Labels of the positions (keys and queries of self-attention).
    """
    op = "plot_attention_gradients"
    chosen = range(len(maps.layers)) if layers is None else list(layers)
    if not len(chosen):
        raise ValueError(f"{op}: no layer to draw")
    for layer in chosen:
        if not 0 <= layer < len(maps.layers):
            raise IndexError(f"{op}: layer {layer} is out of range for {len(maps.layers)} layers")
    batch = maps.layers[0].P.shape[0]
    if not 0 <= example < batch:
        raise IndexError(f"{op}: example {example} is out of range for a batch of {batch}")
    panels = [(maps.layers[layer], h) for layer in chosen
              for h in range(maps.layers[layer].P.shape[1])]
    n_queries, n_keys = panels[0][0].P.shape[-2:]
    key_labels = _labels(tokens, n_keys, op)
    query_labels = key_labels if n_queries == n_keys else [str(i) for i in range(n_queries)]
    side = 0.16 * max(n_queries, n_keys) + 1.2
    figure = new_figure(3 * side + 1.5, len(panels) * side + (0.5 if title else 0.0))
    axes = figure.subplots(len(panels), 3, squeeze=False)
    for row, (layer, h) in enumerate(panels):
        for col, (label, array) in enumerate((("P", layer.P), ("dP", layer.dP),
                                              ("dS", layer.dS))):
            values = np.asarray(array[example, h], dtype=np.float64)
            ax = axes[row, col]
            if col == 0:
                image = ax.imshow(values, cmap="viridis", vmin=0.0,
                                  vmax=max(float(values.max()), 1e-12))
            else:
                bound = max(float(np.abs(values).max()), 1e-30)
                image = ax.imshow(values, cmap="RdBu_r", vmin=-bound, vmax=bound)
            figure.colorbar(image, ax=ax, shrink=0.8)
            ax.set_title(f"{layer.name} head {h}: {label}", fontsize=8)
            ax.set_xticks(range(n_keys), key_labels, rotation=90, fontsize=6)
            ax.set_yticks(range(n_queries), query_labels, fontsize=6)
            ax.set_xlabel("key", fontsize=7)
            ax.set_ylabel("query", fontsize=7)
    if title:
        figure.suptitle(title)
    return finish(figure, path)


def plot_gradient_rollout(
    rollout: GradientRollout, path: str | os.PathLike | None = None,
    tokens: Sequence[str] | None = None, title: str | None = None,
) -> Path | Figure:
    """Draw a gradient rollout: the ``(T, T)`` matrix, and per layer the gradient each input
    position receives through each head."""
    T = rollout.matrix.shape[0]
    labels = _labels(tokens, T, "plot_gradient_rollout")
    L, H, _ = rollout.per_head.shape
    figure = new_figure(4.5 + 3.2 * L, 3.8 + (0.4 if title else 0.0))
    axes = figure.subplots(1, L + 1, squeeze=False)[0]
    image = axes[0].imshow(rollout.matrix, cmap="viridis")
    figure.colorbar(image, ax=axes[0], shrink=0.8)
    axes[0].set_title("rollout R (query × input position)", fontsize=8)
    axes[0].set_xticks(range(T), labels, rotation=90, fontsize=6)
    axes[0].set_yticks(range(T), labels, fontsize=6)
    width = 0.8 / H
    for layer in range(L):
        ax = axes[layer + 1]
        for h in range(H):
            ax.bar(np.arange(T) + h * width - 0.4 + width / 2, rollout.per_head[layer, h],
                   width, label=f"head {h}")
        ax.set_title(f"{rollout.layers[layer]}: gradient received", fontsize=8)
        ax.set_xticks(range(T), labels, rotation=90, fontsize=6)
        ax.legend(fontsize=6)
    if title:
        figure.suptitle(title)
    return finish(figure, path)


SCALE_PANELS = (("entropy", "row entropy of P (nats)"), ("gain", "λ_max of diag(p) − ppᵀ"),
                ("grad_ratio", "|dS| / |dP|"), ("grad_q", "|dW_q| per head"),
                ("grad_k", "|dW_k| per head"))


def plot_scale_lab(lab: ScaleLab, path: str | os.PathLike | None = None,
                   title: str | None = None) -> Path | Figure:
    """Draw the scale lab: each statistic (mean over heads) per scale — bars for one step,
    curves over the steps otherwise."""
    figure = new_figure(3.2 * len(SCALE_PANELS), 3.4 + (0.4 if title else 0.0))
    axes = figure.subplots(1, len(SCALE_PANELS), squeeze=False)[0]
    labels = [label for label, _ in lab.scales]
    for ax, (key, name) in zip(axes, SCALE_PANELS):
        if lab.steps == 1:
            ax.bar(range(len(labels)), [lab.means(label, 0)[key] for label in labels])
            ax.set_xticks(range(len(labels)), labels)
            ax.set_xlabel("scale of q·k")
        else:
            for label in labels:
                ax.plot(range(lab.steps), [lab.means(label, s)[key] for s in range(lab.steps)],
                        marker="o", ms=2, label=label)
            ax.set_xlabel("step")
            ax.legend(fontsize=7, title="scale", title_fontsize=7)
        if key in ("grad_q", "grad_k"):
            ax.set_yscale("log")
        ax.set_title(name, fontsize=9)
        ax.grid(True, alpha=0.3)
    if title:
        figure.suptitle(title)
    return finish(figure, path)
