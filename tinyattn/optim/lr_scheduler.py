"""Learning-rate schedules: PyTorch's ``LambdaLR``, ``StepLR``, ``LinearLR`` and
``CosineAnnealingLR``, and (+) ``CosineWarmup``, a cosine decay after a linear warm-up.

A scheduler rewrites ``group["lr"]`` of every parameter group of its optimizer. As in PyTorch,
making one already sets the learning rate of step 0, and each ``scheduler.step()`` (called
after ``optimizer.step()``) moves to the next step. The first learning rate of each group is
kept in ``group["initial_lr"]``, the base of the schedule. ``StepLR``, ``LinearLR`` and
``CosineAnnealingLR`` update the current ``group["lr"]`` recursively, with PyTorch's formulas,
so they give PyTorch's numbers and compose with other changes to the learning rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..validation import check_int, check_number
from .optimizer import Optimizer


def cosine_warmup_lr(step: int, base_lr: float, warmup_steps: int, total_steps: int,
                     min_lr: float = 0.0) -> float:
    """The learning rate at ``step`` (0-based) of a linear warm-up followed by a cosine decay.

    With ``w = warmup_steps`` and ``N = total_steps``::

        lr(s) = base_lr · (s + 1) / (w + 1)                                     s < w
        lr(s) = min_lr + (base_lr − min_lr) · (1 + cos(π (s − w) / (N − w))) / 2   w <= s < N
        lr(s) = min_lr                                                          s >= N

    The warm-up starts above zero, so no step is wasted, and reaches the peak ``base_lr``
    exactly at ``s = w``, where the cosine starts; the cosine reaches ``min_lr`` at ``s = N``.

    Examples
    --------
    >>> [round(cosine_warmup_lr(s, 1.0, 3, 7), 3) for s in range(9)]
    [0.25, 0.5, 0.75, 1.0, 0.854, 0.5, 0.146, 0.0, 0.0]
    """
    name = "cosine_warmup_lr"
    check_int(name, "step", step, 0)
    check_int(name, "warmup_steps", warmup_steps, 0)
    check_int(name, "total_steps", total_steps, warmup_steps + 1)
    check_number(name, "base_lr", base_lr, low=0.0)
    check_number(name, "min_lr", min_lr, low=0.0)
    if min_lr > base_lr:
        raise ValueError(f"{name}: min_lr must be <= base_lr, got min_lr={min_lr}, "
                         f"base_lr={base_lr}")
    if step < warmup_steps:
        return base_lr * (step + 1) / (warmup_steps + 1)
    if step >= total_steps:
        return float(min_lr)
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


class LRScheduler:
    """Base class: subclasses define ``get_lr()``, the learning rates at ``self.last_epoch``.

    ``last_epoch`` counts scheduler steps (-1 before the first); pass the last finished step to
    resume a schedule, in which case every group must already hold ``"initial_lr"``.
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        name = type(self).__name__
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{name}: expected an Optimizer, got {type(optimizer).__name__}")
        check_int(name, "last_epoch", last_epoch, -1)
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            missing = [i for i, group in enumerate(optimizer.param_groups)
                       if "initial_lr" not in group]
            if missing:
                raise ValueError(f"{name}: resuming at last_epoch={last_epoch} needs "
                                 f"'initial_lr' in every parameter group; groups {missing} "
                                 "have none")
        self.optimizer = optimizer
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._is_initial = True  # the step made by the constructor
        self.step()
        self._is_initial = False

    def get_lr(self) -> list[float]:
        """The learning rate of every group at step ``self.last_epoch``."""
        raise NotImplementedError(f"{type(self).__name__} does not define get_lr()")

    def _current_lrs(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def step(self) -> None:
        """Advance one step and write the new learning rates into the optimizer's groups."""
        self.last_epoch += 1
        groups = self.optimizer.param_groups
        lrs = self.get_lr()
        if len(lrs) != len(groups):
            raise ValueError(f"{type(self).__name__}.step: {len(lrs)} learning rates for "
                             f"{len(groups)} parameter groups (was a group added after the "
                             "scheduler was made?)")
        for group, lr in zip(groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in groups]

    def get_last_lr(self) -> list[float]:
        """The learning rates the last ``step()`` set, one per parameter group."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (and functions, which cannot be saved)."""
        return {key: value for key, value in self.__dict__.items()
                if key not in ("optimizer", "lr_lambdas")}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; its keys must be exactly this scheduler's."""
        own = self.state_dict()
        if set(state_dict) != set(own):
            raise ValueError(f"{type(self).__name__}.load_state_dict: expected keys "
                             f"{sorted(own)}, got {sorted(state_dict)}")
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """``lr = initial_lr · lr_lambda(step)`` per group, as ``torch.optim.lr_scheduler.LambdaLR``.

    Parameters
    ----------
    optimizer : Optimizer
    lr_lambda : callable or list of callables
        A function of the step (an int), or one such function per parameter group.
    last_epoch : int, default -1

    Examples
    --------
    >>> import tinyattn as ta
    >>> opt = ta.optim.SGD([ta.nn.Parameter(ta.zeros(1))], lr=1.0)
    >>> scheduler = LambdaLR(opt, lambda step: 0.5 ** step)
    >>> scheduler.step(); scheduler.step()
    >>> scheduler.get_last_lr(), opt.param_groups[0]["lr"]
    ([0.25], 0.25)
    """

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        count = len(optimizer.param_groups) if isinstance(optimizer, Optimizer) else 0
        lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * count
        if len(lambdas) != count:
            raise ValueError(f"LambdaLR: expected {count} lr_lambdas (one per parameter "
                             f"group), got {len(lambdas)}")
        for index, function in enumerate(lambdas):
            if not callable(function):
                raise TypeError(f"LambdaLR: lr_lambda[{index}] must be callable, got "
                                f"{type(function).__name__}")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base_lr * function(self.last_epoch)
                for base_lr, function in zip(self.base_lrs, self.lr_lambdas)]


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` steps, as
    ``torch.optim.lr_scheduler.StepLR``: ``lr = initial_lr · gamma^⌊step / step_size⌋``.

    Parameters
    ----------
    optimizer : Optimizer
    step_size : int >= 1
    gamma : float, default 0.1
    last_epoch : int, default -1

    Examples
    --------
    >>> import tinyattn as ta
    >>> opt = ta.optim.SGD([ta.nn.Parameter(ta.zeros(1))], lr=1.0)
    >>> scheduler = ta.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> lrs = []
    >>> for _ in range(5):
    ...     lrs.append(scheduler.get_last_lr()[0])
    ...     scheduler.step()
    >>> lrs
    [1.0, 1.0, 0.5, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        check_int("StepLR", "step_size", step_size, 1)
        check_number("StepLR", "gamma", gamma, low=0.0)
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current_lrs()
        return [lr * self.gamma for lr in self._current_lrs()]


class LinearLR(LRScheduler):
    """Scale the learning rate by a factor going linearly from ``start_factor`` to
    ``end_factor`` over ``total_iters`` steps, as ``torch.optim.lr_scheduler.LinearLR``.

    ``lr = initial_lr · (start + (end − start) · min(step, total_iters) / total_iters)``,
    computed recursively as PyTorch does.

    Parameters
    ----------
    optimizer : Optimizer
    start_factor : float in (0, 1], default 1/3
    end_factor : float in [0, 1], default 1.0
    total_iters : int >= 1, default 5
    last_epoch : int, default -1

    Examples
    --------
    >>> import tinyattn as ta
    >>> opt = ta.optim.SGD([ta.nn.Parameter(ta.zeros(1))], lr=1.0)
    >>> scheduler = ta.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    >>> lrs = []
    >>> for _ in range(5):
    ...     lrs.append(round(scheduler.get_last_lr()[0], 6))
    ...     scheduler.step()
    >>> lrs
    [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        if check_number("LinearLR", "start_factor", start_factor, 0.0, 1.0) == 0.0:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        check_number("LinearLR", "end_factor", end_factor, 0.0, 1.0)
        check_int("LinearLR", "total_iters", total_iters, 1)
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._current_lrs()]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current_lrs()
        change = self.end_factor - self.start_factor
        ratio = 1.0 + change / (self.total_iters * self.start_factor
                                + (self.last_epoch - 1) * change)
        return [lr * ratio for lr in self._current_lrs()]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from each group's initial lr to ``eta_min`` over ``T_max`` steps, as
    ``torch.optim.lr_scheduler.CosineAnnealingLR``.

    ``lr = eta_min + (initial_lr − eta_min) · (1 + cos(π · step / T_max)) / 2``, computed
    recursively as PyTorch does (so after ``T_max`` it climbs back up, without restarts).

    Parameters
    ----------
    optimizer : Optimizer
    T_max : int >= 1
    eta_min : float, default 0.0
    last_epoch : int, default -1

    Examples
    --------
    >>> import tinyattn as ta
    >>> opt = ta.optim.SGD([ta.nn.Parameter(ta.zeros(1))], lr=1.0)
    >>> scheduler = ta.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    >>> lrs = []
    >>> for _ in range(5):
    ...     lrs.append(round(scheduler.get_last_lr()[0], 6))
    ...     scheduler.step()
    >>> lrs
    [1.0, 0.853553, 0.5, 0.146447, 0.0]
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        check_int("CosineAnnealingLR", "T_max", T_max, 1)
        check_number("CosineAnnealingLR", "eta_min", eta_min, low=0.0)
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return self._current_lrs()
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            lift = (1 - math.cos(math.pi / self.T_max)) / 2
            return [lr + (base_lr - self.eta_min) * lift
                    for lr, base_lr in zip(self._current_lrs(), self.base_lrs)]
        ratio = ((1 + math.cos(math.pi * self.last_epoch / self.T_max))
                 / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max)))
        return [ratio * (lr - self.eta_min) + self.eta_min for lr in self._current_lrs()]


class CosineWarmup(LRScheduler):
    """Linear warm-up to each group's initial lr, then cosine decay to ``min_lr``.

    The learning rate at step ``s`` is ``cosine_warmup_lr(s, initial_lr, warmup_steps,
    total_steps, min_lr)`` (see :func:`cosine_warmup_lr`); it stays at ``min_lr`` after
    ``total_steps``.

    Parameters
    ----------
    optimizer : Optimizer
    warmup_steps : int >= 0
    total_steps : int > warmup_steps
    min_lr : float, default 0.0
        The final learning rate, at most every group's initial lr.
    last_epoch : int, default -1

    Examples
    --------
    >>> import tinyattn as ta
    >>> opt = ta.optim.AdamW([ta.nn.Parameter(ta.zeros(1))], lr=1e-3)
    >>> scheduler = CosineWarmup(opt, warmup_steps=1, total_steps=3)
    >>> lrs = [scheduler.get_last_lr()[0]]
    >>> for _ in range(3):
    ...     scheduler.step()
    ...     lrs.append(scheduler.get_last_lr()[0])
    >>> [round(lr, 6) for lr in lrs]
    [0.0005, 0.001, 0.0005, 0.0]
    """

    def __init__(self, optimizer: Optimizer, warmup_steps: int, total_steps: int,
                 min_lr: float = 0.0, last_epoch: int = -1) -> None:
        if isinstance(optimizer, Optimizer):
            for group in optimizer.param_groups:
                cosine_warmup_lr(0, group.get("initial_lr", group["lr"]), warmup_steps,
                                 total_steps, min_lr)
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.min_lr = min_lr
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [cosine_warmup_lr(self.last_epoch, base_lr, self.warmup_steps, self.total_steps,
                                 self.min_lr) for base_lr in self.base_lrs]
