"""(+) Checkpoint files: named arrays in an ``.npz``, written atomically, read without pickle.

``Module.save(path)`` writes a module's state dict with :func:`save_arrays`; :func:`load`
reads it back as a dict of arrays for ``Module.load_state_dict``.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np


def save_arrays(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write named arrays to an ``.npz`` file atomically: a temp file beside it, then rename."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(handle, "wb") as file:
            np.savez(file, **arrays)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)  # mkstemp creates files readable by the owner only
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


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
