"""(+) Checkpoint files: named arrays in an ``.npz``, written atomically, read without pickle.

``Module.save(path)`` writes a module's state dict with :func:`save_arrays`; :func:`load`
reads it back as a dict of arrays for ``Module.load_state_dict``.
"""

from __future__ import annotations

import os
import zipfile
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from ..serialization import write_atomically


def save_arrays(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write named arrays to an ``.npz`` file atomically: a temp file beside it, then rename."""
    write_atomically(os.fspath(path), lambda file: np.savez(file, **arrays))


def load(path: str | os.PathLike) -> OrderedDict[str, np.ndarray]:
    """Read a checkpoint written by ``Module.save`` as a dict of arrays, never unpickling.

    Examples
    --------
    >>> import tinyattn as ta, tempfile, os
    >>> layer = ta.nn.Linear(2, 3)
    >>> path = os.path.join(tempfile.mkdtemp(), "linear.npz")
    >>> layer.save(path)
    >>> sorted(ta.nn.load(path))
    ['bias', 'weight']
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load: no checkpoint file at {path!r}")
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise ValueError("it holds a single .npy array, not an .npz archive of named arrays")
        with archive:
            return OrderedDict((key, archive[key]) for key in archive.files)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, KeyError) as err:
        raise ValueError(
            f"load: {path!r} is not a readable tinyattn checkpoint (.npz of numeric arrays): {err}"
        ) from None
