"""Composite differentiable functions (``ta.nn.functional``, also ``ta.F``), as in PyTorch."""

from ..ops import log_softmax, relu, softmax

__all__ = ["log_softmax", "relu", "softmax"]
