"""``ta.device``: tinyattn runs on the CPU, and says so clearly when asked for anything else."""

from __future__ import annotations

from typing import Any


class device:  # noqa: N801  (PyTorch's name)
    """``ta.device('cpu')``: the only device tinyattn has; any other is a clear error."""

    def __init__(self, type: Any = "cpu", index: int | None = None):
        name = type.type if isinstance(type, device) else str(type)
        if name.split(":")[0] != "cpu":
            raise RuntimeError(f"tinyattn runs on the CPU only: device {name!r} is not "
                               "available (use 'cpu')")
        self.type = "cpu"
        self.index = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (device, str)) and str(other).split(":")[0] == "cpu"

    def __hash__(self) -> int:
        return hash("cpu")

    def __str__(self) -> str:
        return "cpu"

    def __repr__(self) -> str:
        return "device(type='cpu')"


CPU = device("cpu")


def check_device(device_: Any, op: str) -> None:
    """Accept ``None`` or the CPU; any other device is a clear error naming ``op``."""
    if device_ is not None:
        try:
            device(device_)
        except RuntimeError as err:
            raise RuntimeError(f"{op}: {err}") from None
