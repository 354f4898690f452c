"""Optimizers and learning-rate schedules, with PyTorch's names, defaults and update rules.

>>> import tinyattn as ta
>>> w = ta.nn.Parameter(ta.tensor([1.0, 2.0]))
>>> opt = ta.optim.AdamW([w], lr=1e-2)
>>> (w * w).sum().backward()
>>> opt.step()
>>> opt.zero_grad()
>>> w.grad is None
True
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .lr_scheduler import (
    CosineAnnealingLR,
    CosineWarmup,
    LambdaLR,
    LinearLR,
    StepLR,
    cosine_warmup_lr,
)
from .optimizer import Optimizer
from .sgd import SGD

__all__ = [
    "SGD", "Adam", "AdamW", "CosineAnnealingLR", "CosineWarmup", "LambdaLR", "LinearLR",
    "Optimizer", "StepLR", "cosine_warmup_lr", "lr_scheduler",
]


def __getattr__(name: str) -> object:
    """A PyTorch optimizer tinyattn does not have: say so clearly, naming the caller's line."""
    if name.startswith("__"):
        raise AttributeError(name)
    from ..missing import missing

    raise missing(f"torch.optim.{name}", "tinyattn.optim has SGD, Adam, AdamW and the "
                                         "schedulers in lr_scheduler")
