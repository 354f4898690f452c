"""``ta.utils``: ``ta.utils.data`` (datasets, samplers, ``DataLoader``), laid out as
``torch.utils.data``."""

from . import data

__all__ = ["data"]
