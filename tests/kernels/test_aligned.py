"""Arrays on a cache line, and the addresses of arrays (tinyattn.kernels.aligned), against
numpy's own account of an array's memory (``__array_interface__``)."""

from __future__ import annotations

import numpy as np
import pytest

from tinyattn.kernels.aligned import ALIGNMENT, aligned_empty, aligned_empty_like, data_address


def _numpy_address(x: np.ndarray) -> int:
    return x.__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape", [(1,), (3, 16), (1, 64, 128), (2, 3, 5, 7), (0, 4), ()])
def test_aligned_arrays_start_on_a_cache_line(shape, dtype):
    """(An empty array has no first element to place: only its shape and dtype count.)"""
    for x in aligned_empty(shape, dtype), aligned_empty_like(np.ones(shape, dtype)):
        assert x.shape == shape and x.dtype == dtype
        assert x.flags.c_contiguous and x.flags.writeable
        assert x.size == 0 or _numpy_address(x) % ALIGNMENT == 0


def _views() -> dict[str, np.ndarray]:
    packed = np.arange(2 * 9 * 36, dtype=np.float32).reshape(2, 9, 36)
    readonly = np.arange(12.0)
    readonly.flags.writeable = False
    return {
        "C-contiguous": packed,
        "transposed": packed.T,
        "a slice of columns": packed[:, :, 12:24],
        "heads of a slice": packed[:, :, 12:24].reshape(2, 9, 3, 4).transpose(0, 2, 1, 3),
        "every other row, from the third": packed[:, 2::2],
        "reversed": packed[::-1, :, ::-1],
        "a row": packed[1, 4],
        "0-d": np.array(3.0),
        "read-only": readonly,
        "read-only, strided": readonly[1::3],
        "broadcast": np.broadcast_to(np.arange(3.0), (4, 3)),
        "empty": packed[:, :0],
    }


@pytest.mark.parametrize("case", list(_views()))
def test_data_address_is_numpys_address_of_the_first_element(case):
    x = _views()[case]
    assert data_address(x) == _numpy_address(x)
