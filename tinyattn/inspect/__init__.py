"""Study tools: watch, check and explain one backward pass through attention.

=====================  ==============================================================
module                 what it gives
=====================  ==============================================================
``trace.py``           :func:`trace`: the gradient norms every op saw in one backward
``dot.py``             :func:`to_dot`, :func:`render`: the graph as Graphviz DOT / SVG
``check.py``           :func:`check_graph`: every node's backward vs finite differences
``explain.py``         :func:`explain`: the symbolic gradient path to a tensor, written
                       with each op's own ``formula``
``ledger.py``          :func:`memory_ledger`: every array saved for backward
``gradients.py``       :func:`attention_gradients`: P, dP, dS per layer and head; rollout
``saturation.py``      softmax saturation statistics and the scale lab
``plots.py``           heatmaps and curves (matplotlib, optional)
``view.py``            :func:`view`: the interactive explorer of one step's graph (a
                       self-contained HTML page; inline in Jupyter)
``recording.py``       :func:`recording`: attention maps across a run's steps, module
                       scopes, the graph of one step (``tinyattn run --inspect-step``)
``summaries.py``       statistics and small heatmaps of arrays, for the page
``browser.py``         a headless Chromium on a page (tests, benchmark, screenshot)
``graph.py``           walking a recorded graph (node numbering shared by every tool)
=====================  ==============================================================

Every tool numbers the nodes of a graph the same way (``#0`` produced the output), refuses a
tensor that is not in a graph or a graph freed by ``backward`` with a clear error, and prints as
a plain-text table (an HTML table in Jupyter).
"""

from .check import CheckReport, NodeCheck, check_graph
from .dot import DotGraph, render, to_dot
from .explain import ExplainStep, Explanation, explain
from .gradients import (
    AttentionGradients,
    GradientRollout,
    LayerGradients,
    attention_gradients,
    gradient_rollout,
)
from .ledger import MemoryLedger, SavedArray, memory_ledger
from .plots import (
    plot_attention,
    plot_attention_gradients,
    plot_gradient_rollout,
    plot_losses,
    plot_scale_lab,
)
from .recording import Recording, SiteRecord, StepRecord, module_scopes, recording
from .saturation import (
    HeadSaturation,
    SaturationReport,
    ScaleLab,
    ScaleRecord,
    row_entropy,
    saturation,
    scale_lab,
    softmax_gain,
    standard_scales,
)
from .trace import Trace, TraceRow, trace
from .view import View, view

__all__ = [
    "AttentionGradients", "CheckReport", "DotGraph", "ExplainStep", "Explanation",
    "GradientRollout", "HeadSaturation", "LayerGradients", "MemoryLedger", "NodeCheck",
    "Recording", "SaturationReport", "SavedArray", "ScaleLab", "ScaleRecord", "SiteRecord",
    "StepRecord", "Trace", "TraceRow", "View", "attention_gradients", "check_graph", "explain",
    "gradient_rollout", "memory_ledger", "module_scopes", "plot_attention",
    "plot_attention_gradients", "plot_gradient_rollout", "plot_losses", "plot_scale_lab",
    "recording", "render", "row_entropy", "saturation", "scale_lab", "softmax_gain",
    "standard_scales", "to_dot", "trace", "view",
]
