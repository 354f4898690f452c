"""Pictures with matplotlib (optional: ``pip install 'tinyattn[viz]'``): attention heatmaps and
loss curves.

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
    array = np.asarray(weights.data if isinstance(weights, Tensor) else weights, dtype=np.float64)
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

