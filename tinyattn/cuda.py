"""``ta.cuda``: tinyattn runs on the CPU only. ``is_available()`` is False (so code that picks
``'cuda' if torch.cuda.is_available() else 'cpu'`` runs on the CPU); anything else is a clear
error."""

from __future__ import annotations


def is_available() -> bool:
    """Always False: tinyattn has no GPU backend."""
    return False


def device_count() -> int:
    """Always 0."""
    return 0


def __getattr__(name: str) -> object:
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"tinyattn has no torch.cuda.{name}: tinyattn runs on the CPU only "
                         "(torch.cuda.is_available() is False)")
