"""One-line notices on stderr, each said once per process (or per ``tinyattn run``).

The stand-ins for what tinyattn does not do — ``torch.compile`` runs the model eagerly,
``torch.autocast`` computes in the tensors' own dtypes — say so in one line, the first time, so
a training script's output shows it once and not at every step.
"""

from __future__ import annotations

import sys
import warnings

_said: set[str] = set()


def say_once(key: str, text: str) -> bool:
    """Write ``tinyattn: {text}`` to stderr unless ``key`` was said already; return whether it
    was written.

    Examples
    --------
    >>> forget()
    >>> say_once("example", "an example notice")
    True
    >>> say_once("example", "an example notice")
    False
    """
    if key in _said:
        return False
    _said.add(key)
    print(f"tinyattn: {text}", file=sys.stderr, flush=True)
    return True


def forget() -> None:
    """Let every notice be said again (``tinyattn run`` calls this at the start of a run)."""
    _said.clear()


def warn(text: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(text, category)`` attributed to the first line outside tinyattn (the
    script's call), as PyTorch's warnings are attributed to the caller's line."""
    from .missing import user_frame

    frame, level = sys._getframe(1), 2
    target = user_frame(1)
    while frame is not None and frame is not target:
        frame, level = frame.f_back, level + 1
    warnings.warn(text, category, stacklevel=level if frame is not None else 2)
