"""Helpers of ``ta.utils.data`` laid out as ``torch.utils.data._utils``: ``collate``."""

from . import collate

__all__ = ["collate"]
