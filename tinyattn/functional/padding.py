"""``pad``: constant padding of the last dims, as ``torch.nn.functional.pad``.

Composed of recorded ops: the input is written into a constant tensor of the padded shape
(``index_put``), so its gradient is the matching slice of the upstream gradient; negative
padding crops.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ShapeError
from ..ops import getitem, index_put
from ..tensor import Tensor, check_tensor
from ..validation import check_choice, is_int


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant",
        value: float | None = None) -> Tensor:
    """Pad the last ``len(pad) // 2`` dims: ``pad = (left, right, top, bottom, ...)``, the
    last dim first.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.pad(ta.tensor([[1, 2]]), (1, 2)).tolist()
    [[0, 1, 2, 0, 0]]
    """
    check_tensor("pad", "input", input)
    check_choice("pad", "mode", mode, ("constant",))
    if len(pad) % 2 or len(pad) // 2 > input.ndim or not all(is_int(p) for p in pad):
        raise ShapeError(f"pad: pad must be an even number of ints covering at most "
                           f"{input.ndim} dims, got {tuple(pad)}")
    crop, shape, place = [slice(None)] * input.ndim, list(input.shape), [slice(None)] * input.ndim
    for i in range(len(pad) // 2):
        dim = input.ndim - 1 - i
        before, after = int(pad[2 * i]), int(pad[2 * i + 1])
        n = input.shape[dim]
        crop[dim] = slice(max(-before, 0), n - max(-after, 0))
        kept = crop[dim].stop - crop[dim].start
        if kept < 0:
            raise ShapeError(f"pad: cropping {(before, after)} removes more than dim {dim} "
                               f"of size {n}")
        shape[dim] = kept + max(before, 0) + max(after, 0)
        place[dim] = slice(max(before, 0), max(before, 0) + kept)
    cropped = getitem(input, tuple(crop))
    fill = np.full(shape, 0 if value is None else value, input.dtype)
    return index_put(Tensor(fill), tuple(place), cropped)
