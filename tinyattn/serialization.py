"""``ta.save`` / ``ta.load``: checkpoints in PyTorch's file format, read without running code.

**The format** (PyTorch's since 1.6, what ``torch.save`` writes): a zip archive, its records
stored uncompressed and aligned to 64 bytes, all under one folder ``<archive>/``:

- ``data.pkl``: the object as a protocol-2 pickle in which each tensor is a call of
  ``torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
  backward_hooks)`` and each storage a persistent id ``('storage', torch.FloatStorage-style
  type, key, location, numel)``;
- ``data/<key>``: each storage's raw bytes; ``byteorder`` (``little``); ``version``;
  ``.format_version``, ``.storage_alignment`` and ``.data/serialization_id``.

**ta.load** reads that format, and tinyattn's own earlier ``.npz`` checkpoints (``Module.save``
and the earlier ``ta.save``), told apart by their content. The pickle is executed by
:class:`tinyattn.restricted_pickle.RestrictedUnpickler`, which allows only the globals PyTorch's
``weights_only=True`` unpickler allows (the tensor rebuild functions of ``torch._utils``,
``torch._tensor._rebuild_from_type_v2``, the storage classes, dtypes, ``torch.Size``,
``torch.device``, ``torch.nn.parameter.Parameter``, ``collections.OrderedDict``/``Counter``,
``_codecs.encode``, ``builtins.set``/``bytearray``/``complex``), each replaced by tinyattn's own
implementation; anything else — ``os.system``, any class of the script — is refused before
anything runs. ``weights_only=False`` does not widen that: tinyattn never runs code named by
a checkpoint. What comes back:

- tensors of float32, float64, int64, int32, int16, int8, uint8 and bool, with their sizes and
  strides; tensors that shared a storage share memory (views stay views);
- float16 and bfloat16 tensors as **float32** (tinyattn computes in float32/float64; the
  conversion is exact), still sharing memory with the other views of their storage;
- ``Parameter`` s as ``ta.nn.Parameter``; dicts (``OrderedDict`` kept, with the
  ``_metadata`` attribute of PyTorch state dicts), lists, tuples, sets, numbers, strings,
  bytes and None as themselves; ``torch.Size`` as ``ta.Size``; dtypes as tinyattn's (or numpy's)
  dtypes; ``torch.device('cpu')`` as ``ta.device('cpu')``.

Complex, quantized, sparse, nested and meta tensors, and devices other than the CPU as values,
are clear errors. A truncated or corrupt file is a :class:`CheckpointError` (a ``ValueError``)
saying so; a refused global or opcode is a :class:`RefusedError` (a
``pickle.UnpicklingError``).

**map_location**: tinyattn has only the CPU, so every storage is loaded there. ``None``,
``'cpu'``, ``ta.device('cpu')`` and dicts whose targets are the CPU (``{'cuda:0': 'cpu'}``)
are accepted; a callable is called as in PyTorch, ``map_location(storage, location)``, and may
return the storage or None. A target other than the CPU is an error. Storages saved from a GPU
load on the CPU without a ``map_location`` (PyTorch on a machine without CUDA asks for one).

**ta.save** writes the format above, which ``torch.load(f, weights_only=True)`` reads:
tensors (tensors that share memory share one storage, views keep their offset and strides),
``Parameter`` s, numbers, strings, bytes, None, ``ta.Size``, tinyattn dtypes, the CPU device,
and dicts, ``OrderedDict`` s, lists, tuples and sets of them. numpy arrays are written as
tensors and numpy scalars as Python numbers (``torch.load`` with ``weights_only=True`` reads
no numpy objects); other dict types are written as plain dicts.
"""

from __future__ import annotations

import io
import json
import math
import os
import secrets
import struct
import sys
import tempfile
import zipfile
import zlib
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from typing import IO, Any

import numpy as np

from . import dtypes
from .devices import CPU, check_device, device
from .restricted_pickle import (
    CheckpointError,
    Global,
    GlobalRef,
    PassThrough,
    Persistent,
    PickleWriter,
    Reduce,
    RefusedError,
    RestrictedUnpickler,
)
from .tensor import Size, Tensor, from_numpy

__all__ = ["CheckpointError", "RefusedError", "load", "save"]

# ---- dtypes and storage types ---------------------------------------------------------------

_STORAGE_TYPES = {  # PyTorch's storage class -> the dtype of its elements (PyTorch's name)
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
    "BoolStorage": "bool", "ComplexDoubleStorage": "complex128",
    "ComplexFloatStorage": "complex64", "QInt8Storage": "qint8", "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}
_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
             "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex128": 16, "complex64": 8,
             "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1, "quint2x4": 1}
_NATIVE = {"float64": "f8", "float32": "f4", "int64": "i8", "int32": "i4", "int16": "i2",
           "int8": "i1", "uint8": "u1", "bool": "b1"}
"""The dtypes tinyattn has, as numpy type codes (without byte order)."""
_WIDENED = {"float16": "f2", "bfloat16": "u2"}
"""Dtypes loaded as float32: numpy's float16, and bfloat16 read as its 16 bits."""
_STORAGE_OF = {np.dtype(code): name for name, code in _NATIVE.items()}
_STORAGE_CLASS = {dtype: cls for cls, dtype in _STORAGE_TYPES.items()}
_NUMPY_DTYPE_NAMES = {"float16", "complex64", "complex128", "uint16", "uint32", "uint64"}
"""PyTorch dtypes that numpy has but tinyattn tensors do not: loaded as numpy dtypes."""
_TORCH_DTYPE_NAMES = {
    "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
    "bool", "complex32", "complex64", "complex128", "uint16", "uint32", "uint64", "qint8",
    "quint8", "qint32", "quint4x2", "quint2x4", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "bits1x8",
    "bits2x4", "bits4x2", "bits8", "bits16", *(f"int{n}" for n in range(1, 8)),
    *(f"uint{n}" for n in range(1, 8)),
}
_UNSUPPORTED_REBUILDS = {
    "_rebuild_qtensor": "quantized tensors",
    "_rebuild_sparse_tensor": "sparse tensors",
    "_rebuild_meta_tensor_no_storage": "meta tensors (tensors without data)",
    "_rebuild_nested_tensor": "nested tensors",
    "_rebuild_wrapper_subclass": "tensor subclasses",
    "_rebuild_device_tensor_from_numpy": "tensors saved as numpy arrays",
}
_QSCHEMES = {"per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
             "per_channel_symmetric", "per_channel_affine_float_qparams"}
_LEGACY_TENSOR_TYPES = {f"{kind}Tensor" for kind in ("Double", "Float", "Half", "BFloat16",
                                                     "Long", "Int", "Short", "Char", "Byte",
                                                     "Bool")}


# ---- storages as loaded ---------------------------------------------------------------------


class _LoadedStorage:
    """A storage read from a checkpoint: its bytes, the dtype PyTorch saved it as, and where it
    was. A ``map_location`` callable receives one; it lives on the CPU."""

    def __init__(self, raw: np.ndarray, dtype: str, location: str, byteorder: str) -> None:
        self.raw, self.dtype, self.location, self.byteorder = raw, dtype, location, byteorder
        self._typed: dict[str, np.ndarray] = {}

    device = CPU
    is_cuda = False

    def cpu(self) -> _LoadedStorage:
        return self

    def to(self, device_: Any = None, *args: Any, **kwargs: Any) -> _LoadedStorage:
        check_device(device_, "storage.to")
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("storage.cuda: tinyattn runs on the CPU only; a map_location "
                           "callable can return the storage itself, or None")

    def nbytes(self) -> int:
        return int(self.raw.size)

    def size(self) -> int:
        return int(self.raw.size) // _ITEMSIZE[self.dtype]

    __len__ = size

    def __repr__(self) -> str:
        return f"<storage of {self.size()} {self.dtype} from {self.location!r}>"

    def typed(self, dtype: str, where: str) -> np.ndarray:
        """The storage as a 1-D array of ``dtype`` (one array per dtype, shared by every tensor
        on this storage). float16/bfloat16 come back as float32; other dtypes tinyattn lacks
        are an error naming ``where``."""
        if dtype in self._typed:
            return self._typed[dtype]
        if dtype not in _NATIVE and dtype not in _WIDENED:
            raise CheckpointError(f"{where}: a tensor of dtype torch.{dtype}, which tinyattn "
                                  "does not have (it loads float32/float64, float16 and "
                                  "bfloat16 as float32, int64/int32/int16/int8, uint8 and bool)")
        code = _NATIVE.get(dtype) or _WIDENED[dtype]
        order = "<" if self.byteorder == "little" else ">"
        stored = np.dtype(order + code)
        if self.raw.size % stored.itemsize:
            raise CheckpointError(f"{where}: a storage of {self.raw.size} bytes does not hold "
                                  f"whole {dtype} elements")
        array = self.raw.view(stored)
        if not stored.isnative:
            array = array.astype(stored.newbyteorder("="))
        if dtype == "float16":
            array = array.astype(np.float32)
        elif dtype == "bfloat16":  # the top 16 bits of a float32
            array = (array.astype(np.uint32) << np.uint32(16)).view(np.float32)
        self._typed[dtype] = array
        return array


def _view(storage: Any, dtype: str, offset: Any, size: Any, stride: Any,
          where: str) -> np.ndarray:
    """The array of a tensor on ``storage``: ``size`` elements ``stride`` apart from
    ``offset``, sharing the storage's memory; every number checked against the storage."""
    if not isinstance(storage, _LoadedStorage):
        raise CheckpointError(f"{where}: a tensor is rebuilt from {type(storage).__name__}, not "
                              "from a storage record")
    flat = storage.typed(dtype, where)
    size = tuple(size) if isinstance(size, (tuple, list)) else size
    stride = tuple(stride) if isinstance(stride, (tuple, list)) else stride
    ok = (isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride)
          and type(offset) is int and offset >= 0
          and all(type(n) is int and n >= 0 for n in size)
          and all(type(n) is int and n >= 0 for n in stride))
    if not ok:
        raise CheckpointError(f"{where}: a tensor with offset {offset!r}, size {size!r} and "
                              f"stride {stride!r} (expected non-negative ints, as many strides "
                              "as sizes)")
    if 0 in size:
        return np.empty(size, dtype=flat.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= flat.size:
        raise CheckpointError(f"{where}: a tensor of size {size} and stride {stride} at offset "
                              f"{offset} reaches element {last} of a storage of {flat.size}")
    numel = math.prod(size)
    expected, step = [], 1
    for n in reversed(size):
        expected.append(step)
        step *= n
    contiguous = all(n == 1 or s == e for n, s, e in zip(size, stride, reversed(expected)))
    if contiguous:
        return flat[offset:offset + numel].reshape(size)
    itemsize = flat.dtype.itemsize
    return np.lib.stride_tricks.as_strided(flat[offset:], shape=size,
                                           strides=tuple(s * itemsize for s in stride),
                                           writeable=True)


def _tensor(array: np.ndarray, requires_grad: Any, where: str) -> Tensor:
    tensor = from_numpy(array)
    if requires_grad is True:
        if array.dtype.kind != "f":
            raise CheckpointError(f"{where}: an integer tensor that requires grad")
        tensor.requires_grad_(True)
    elif requires_grad is not False:
        raise CheckpointError(f"{where}: requires_grad is {requires_grad!r}, not a bool")
    return tensor


def _no_extras(value: Any, what: str, where: str) -> None:
    if value not in (None, (), {}) and not (isinstance(value, Mapping) and not value):
        raise CheckpointError(f"{where}: a tensor saved with {what} ({value!r}), which tinyattn "
                              "does not restore")


# ---- map_location ---------------------------------------------------------------------------


def _is_cpu(target: Any) -> bool:
    if isinstance(target, device):
        return True
    if isinstance(target, str) or type(target).__name__ == "device":
        return str(target).split(":")[0] == "cpu"
    return False


def _check_map_location(map_location: Any) -> None:
    """Refuse, before reading anything, a ``map_location`` that names a device other than the
    CPU, or that is not a device, a dict or a callable."""
    if map_location is None or (callable(map_location) and not isinstance(
            map_location, (str, device)) and type(map_location).__name__ != "device"):
        return
    if isinstance(map_location, Mapping):
        for source, target in map_location.items():
            if not isinstance(source, str):
                raise TypeError(f"load: map_location keys must be location strings like "
                                f"'cuda:0', got {source!r}")
            if not _is_cpu(target):
                raise RuntimeError(f"load: map_location maps {source!r} to {target!r}: "
                                   "tinyattn runs on the CPU only (map to 'cpu')")
        return
    if isinstance(map_location, (str, device)) or type(map_location).__name__ == "device":
        if not _is_cpu(map_location):
            raise RuntimeError(f"load: map_location={str(map_location)!r}: tinyattn runs on the "
                               "CPU only (use 'cpu', or leave map_location out)")
        return
    raise TypeError(f"load: map_location must be None, a device string, a ta.device, a dict or "
                    f"a callable, got {type(map_location).__name__}")


def _place(map_location: Any, storage: _LoadedStorage, where: str) -> None:
    """Apply a ``map_location`` callable to a storage (other forms were checked up front)."""
    if map_location is None or isinstance(map_location, (str, device, Mapping)) or \
            type(map_location).__name__ == "device":
        return
    result = map_location(storage, storage.location)
    if result is not None and result is not storage:
        raise TypeError(f"{where}: map_location returned {type(result).__name__} for a storage "
                        f"from {storage.location!r}; tinyattn keeps storages on the CPU, so it "
                        "must return the storage it was given, or None")


# ---- reading --------------------------------------------------------------------------------


class _TorchArchive:
    """The records of one PyTorch zip checkpoint, and the objects its pickle may name."""

    def __init__(self, archive: zipfile.ZipFile, name: str, map_location: Any,
                 path: str | None, mmap: bool, encoding: str) -> None:
        self.zip, self.name, self.map_location = archive, name, map_location
        self.path, self.mmap, self.encoding = path, mmap, encoding
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pickles) != 1:
            raise CheckpointError(f"load: {name} is a zip archive with {len(pickles)} data.pkl "
                                  "records; a PyTorch checkpoint has one")
        self.prefix = pickles[0][:-len("data.pkl")]
        order = self._optional("byteorder")
        self.byteorder = "little" if order is None else order.decode("ascii", "replace")
        if self.byteorder not in ("little", "big"):
            raise CheckpointError(f"load: {name} has byteorder {self.byteorder!r}, not 'little' "
                                  "or 'big'")
        self.storages: dict[str, _LoadedStorage] = {}

    def _optional(self, record: str) -> bytes | None:
        try:
            return self.zip.read(self.prefix + record)
        except KeyError:
            return None

    def _record_array(self, record: str, nbytes: int) -> np.ndarray:
        full = self.prefix + record
        try:
            info = self.zip.getinfo(full)
        except KeyError:
            raise CheckpointError(f"load: {self.name} has no record {full!r} for a storage its "
                                  "pickle names (the file is incomplete)") from None
        if info.file_size != nbytes:
            raise CheckpointError(f"load: {self.name}: record {full!r} holds {info.file_size} "
                                  f"bytes, its storage needs {nbytes}")
        if self.mmap and info.compress_type == zipfile.ZIP_STORED and nbytes:
            return np.memmap(self.path, dtype=np.uint8, mode="c", shape=(nbytes,),
                             offset=_data_offset(self.zip, info))
        array = np.empty(nbytes, dtype=np.uint8)
        with self.zip.open(info) as handle:
            filled = 0
            view = memoryview(array)
            while filled < nbytes:
                count = handle.readinto(view[filled:])
                if not count:
                    raise CheckpointError(f"load: {self.name}: record {full!r} ends early")
                filled += count
            handle.read(1)  # reaching the end checks the record's CRC
        return array

    def load(self) -> Any:
        unpickler = RestrictedUnpickler(self.zip.read(self.prefix + "data.pkl"),
                                        self.find_global, self.persistent_load, self.build,
                                        self.encoding, f"load: {self.name}")
        return unpickler.load()

    # ---- what the pickle may name -----------------------------------------------------------
    def persistent_load(self, pid: Any) -> _LoadedStorage:
        where = f"load: {self.name}"
        if not isinstance(pid, tuple) or len(pid) != 5:
            raise RefusedError(f"{where}: persistent id {pid!r} is not a storage record "
                               "('storage', type, key, location, numel)")
        kind, storage_type, key, location, numel = pid
        if isinstance(kind, bytes):
            kind = kind.decode("ascii", "replace")
        if kind != "storage":
            raise RefusedError(f"{where}: only storages may be persistent ids, got {kind!r}")
        if not (isinstance(storage_type, Global) and isinstance(storage_type.value, tuple)
                and storage_type.value[0] == "storage"):
            raise CheckpointError(f"{where}: storage record with type {storage_type!r}")
        if not isinstance(key, str) or not isinstance(location, str) or type(numel) is not int \
                or numel < 0:
            raise CheckpointError(f"{where}: malformed storage record {pid!r}")
        dtype = storage_type.value[1]
        if key in self.storages:
            storage = self.storages[key]
            if storage.dtype != dtype:
                raise CheckpointError(f"{where}: storage {key!r} is named as {storage.dtype} and "
                                      f"as {dtype}")
            return storage
        raw = self._record_array(f"data/{key}", numel * _ITEMSIZE[dtype])
        storage = _LoadedStorage(raw, dtype, location, self.byteorder)
        try:
            _place(self.map_location, storage, where)
        except Exception as err:  # the caller's map_location: its errors reach the caller
            raise PassThrough(err) from None
        self.storages[key] = storage
        return storage

    def build(self, obj: Any, state: Any) -> None:
        if type(obj) in (OrderedDict, Counter) and isinstance(state, dict) and all(
                isinstance(key, str) and not key.startswith("__") for key in state):
            obj.__dict__.update(state)  # PyTorch's state dicts carry ``_metadata`` this way
            return
        raise RefusedError(f"load: {self.name}: the pickle sets the state of a "
                           f"{type(obj).__name__} to {type(state).__name__}; only plain "
                           "attributes of an OrderedDict may be set")

    def find_global(self, module: str, name: str) -> Any:
        path = f"{module}.{name}"
        where = f"load: {self.name}"
        found = _find_global(module, name, where)
        if found is None:
            raise RefusedError(
                f"{where}: refused the global {path}: it is not one of the globals "
                "torch.load(weights_only=True) allows, and tinyattn never runs code named by a "
                "checkpoint, whatever weights_only says (nothing was executed)")
        return found


def _find_global(module: str, name: str, where: str) -> Any:
    """What an allowed global stands for, or None for a global that is not allowed."""
    from .nn import Parameter

    def unsupported(what: str) -> Any:
        raise CheckpointError(f"{where}: the checkpoint holds {what} ({module}.{name}), which "
                              "tinyattn does not support")

    if module == "torch._utils":
        if name in _UNSUPPORTED_REBUILDS:
            return Global(f"{module}.{name}",
                          call=lambda *args: unsupported(_UNSUPPORTED_REBUILDS[name]))
        rebuilds = _rebuild_functions(where)
        return rebuilds.get(name)
    if module == "torch._tensor" and name == "_rebuild_from_type_v2":
        return Global(f"{module}.{name}", call=lambda *args: _rebuild_from_type(where, *args))
    if module in ("torch", "torch.cuda") and name in _STORAGE_TYPES:
        return Global(f"{module}.{name}", value=("storage", _STORAGE_TYPES[name]))
    if module in ("torch", "torch.storage") and name == "UntypedStorage":
        return Global(f"{module}.{name}", value=("storage", "uint8"))
    if module == "torch" and name in _TORCH_DTYPE_NAMES:
        if name in _NATIVE:
            return np.dtype(_NATIVE[name])
        if name in _NUMPY_DTYPE_NAMES:
            return np.dtype(name)
        return unsupported(f"the dtype torch.{name}")
    if module == "torch" and name in _QSCHEMES:
        return unsupported("a quantization scheme")
    if module in ("torch", "torch.cuda", "torch.sparse", "torch.cuda.sparse") and (
            name in _LEGACY_TENSOR_TYPES):
        return unsupported("a legacy tensor type")
    if module == "torch.storage" and name == "TypedStorage":
        return unsupported("a TypedStorage object")
    if (module, name) == ("torch", "Tensor"):
        return Global("torch.Tensor", value="Tensor")
    if (module, name) == ("torch.nn.parameter", "Parameter"):
        return Global("torch.nn.parameter.Parameter", value="Parameter",
                      call=lambda data, requires_grad=True: Parameter(data, requires_grad),
                      new=lambda data=None, requires_grad=True: Parameter(data, requires_grad))
    if (module, name) == ("torch", "Size"):
        return Global("torch.Size", call=lambda sizes=(): Size(_ints(sizes, where, "Size")))
    if (module, name) == ("torch", "device"):
        return Global("torch.device", call=lambda *args: _device(where, *args))
    if (module, name) == ("torch.serialization", "_get_layout"):
        return Global(f"{module}.{name}", call=lambda layout: str(layout))
    if (module, name) in (("collections", "OrderedDict"), ("collections", "Counter")):
        cls = OrderedDict if name == "OrderedDict" else Counter

        def make(*args: Any) -> Any:
            if len(args) > 1 or (args and not isinstance(args[0], (list, tuple, dict))):
                raise CheckpointError(f"{where}: {module}.{name} called with {args!r}")
            return cls(*args)

        return Global(f"{module}.{name}", call=make, new=make)
    if module == "_codecs" and name == "encode":
        return Global("_codecs.encode", call=lambda *args: _encode(where, *args))
    if module == "builtins" and name in ("set", "bytearray", "complex"):
        return Global(f"builtins.{name}", call=lambda *args: _builtin(where, name, *args))
    return None


def _ints(values: Any, where: str, what: str) -> tuple[int, ...]:
    if not isinstance(values, (tuple, list)) or not all(type(v) is int for v in values):
        raise CheckpointError(f"{where}: {what} of {values!r}, not of ints")
    return tuple(values)


def _device(where: str, *args: Any) -> device:
    name = ":".join(str(arg) for arg in args if arg is not None)
    if not args or not isinstance(args[0], str):
        raise CheckpointError(f"{where}: torch.device{args!r}")
    if name.split(":")[0] != "cpu":
        raise RuntimeError(f"{where}: the checkpoint holds the device object "
                           f"torch.device({name!r}); tinyattn runs on the CPU only")
    return CPU


def _encode(where: str, text: Any = None, encoding: Any = "utf-8") -> bytes:
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8",
                                                     "ascii"):
        raise CheckpointError(f"{where}: _codecs.encode({text!r}, {encoding!r})")
    return text.encode(encoding)


def _builtin(where: str, name: str, *args: Any) -> Any:
    if name == "set" and len(args) <= 1 and all(isinstance(a, (list, tuple, set)) for a in args):
        return set(*args)
    if name == "bytearray" and len(args) <= 1 and all(isinstance(a, (bytes, bytearray, list))
                                                      for a in args):
        return bytearray(*args)
    if name == "complex" and len(args) <= 2 and all(type(a) in (int, float) for a in args):
        return complex(*args)
    raise CheckpointError(f"{where}: builtins.{name} called with {args!r}")


def _rebuild_functions(where: str) -> dict[str, Global]:
    """tinyattn's versions of PyTorch's tensor rebuild functions (``torch._utils``)."""
    from .nn import Parameter

    def v2(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any = False,
           backward_hooks: Any = None, metadata: Any = None) -> Tensor:
        _no_extras(backward_hooks, "backward hooks", where)
        _no_extras(metadata, "metadata", where)
        dtype = storage.dtype if isinstance(storage, _LoadedStorage) else None
        return _tensor(_view(storage, dtype, offset, size, stride, where), requires_grad, where)

    def v1(storage: Any, offset: Any, size: Any, stride: Any) -> Tensor:
        return v2(storage, offset, size, stride)

    def v3(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any,
           backward_hooks: Any, dtype: Any, metadata: Any = None) -> Tensor:
        _no_extras(backward_hooks, "backward hooks", where)
        _no_extras(metadata, "metadata", where)
        name = _STORAGE_OF.get(dtype) if isinstance(dtype, np.dtype) else None
        if name is None:
            raise CheckpointError(f"{where}: a tensor of dtype {dtype}, which tinyattn does not "
                                  "have")
        if isinstance(storage, _LoadedStorage) and storage.dtype != "uint8":
            raise CheckpointError(f"{where}: _rebuild_tensor_v3 on a {storage.dtype} storage")
        return _tensor(_view(storage, name, offset, size, stride, where), requires_grad, where)

    def parameter(data: Any, requires_grad: Any, backward_hooks: Any = None,
                  state: Any = None) -> Parameter:
        _no_extras(backward_hooks, "backward hooks", where)
        _no_extras(state, "Python attributes", where)
        if not isinstance(data, Tensor) or not isinstance(requires_grad, bool):
            raise CheckpointError(f"{where}: _rebuild_parameter of {type(data).__name__}")
        return Parameter(data, requires_grad=requires_grad)

    def from_cpu_tensor(data: Any, dtype: Any, device_: Any, requires_grad: Any) -> Tensor:
        if not isinstance(data, Tensor) or not isinstance(dtype, np.dtype):
            raise CheckpointError(f"{where}: _rebuild_device_tensor_from_cpu_tensor of "
                                  f"{type(data).__name__}")
        if data.dtype != dtype:
            data = from_numpy(data.numpy().astype(dtypes.as_dtype(dtype, "load")))
        return _tensor(data.numpy(), requires_grad, where)

    functions = {"_rebuild_tensor": v1, "_rebuild_tensor_v2": v2, "_rebuild_tensor_v3": v3,
                 "_rebuild_parameter": parameter, "_rebuild_parameter_with_state": parameter,
                 "_rebuild_device_tensor_from_cpu_tensor": from_cpu_tensor}
    return {name: Global(f"torch._utils.{name}", call=function)
            for name, function in functions.items()}


def _rebuild_from_type(where: str, function: Any, new_type: Any, args: Any,
                       state: Any = None) -> Tensor:
    """``torch._tensor._rebuild_from_type_v2``: a tensor rebuilt by ``function(*args)``, then
    made a ``Parameter`` if ``new_type`` says so; Python attributes are not restored."""
    from .nn import Parameter

    if not isinstance(function, Global) or function.call is None or not isinstance(args, tuple):
        raise RefusedError(f"{where}: _rebuild_from_type_v2 with {function!r}")
    if not isinstance(new_type, Global) or new_type.value not in ("Tensor", "Parameter"):
        raise CheckpointError(f"{where}: a tensor of type {new_type!r}, which tinyattn does "
                              "not have")
    _no_extras(state, "Python attributes", where)
    result = function.call(*args)
    if new_type.value == "Parameter" and not isinstance(result, Parameter):
        result = Parameter(result, requires_grad=result.requires_grad)
    return result


def _data_offset(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """Where a stored record's bytes start in the file (after its local header)."""
    archive.fp.seek(info.header_offset)
    header = archive.fp.read(30)
    if header[:4] != b"PK\x03\x04":
        raise CheckpointError(f"load: the local header of {info.filename!r} is corrupt")
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_length + extra_length


# ---- tinyattn's earlier .npz checkpoints ------------------------------------------------------

_STRUCTURE = "__structure__"


def _decode(node: Any, arrays: dict[str, np.ndarray]) -> Any:
    ((kind, value),) = node.items()
    if kind == "tensor":
        return Tensor(arrays[value], dtype=arrays[value].dtype)
    if kind == "ndarray":
        return arrays[value]
    if kind == "dict":
        return {k: _decode(v, arrays) for k, v in value}
    if kind in ("list", "tuple"):
        items = [_decode(v, arrays) for v in value]
        return items if kind == "list" else tuple(items)
    return value


def _load_npz(handle: IO[bytes], name: str) -> Any:
    try:
        with np.load(handle, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
        if _STRUCTURE not in arrays:  # a Module.save checkpoint: a flat state dict
            return {k: Tensor(v, dtype=v.dtype) for k, v in arrays.items()}
        structure = json.loads(arrays.pop(_STRUCTURE).tobytes().decode())
        return _decode(structure, arrays)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, KeyError, TypeError) as err:
        raise CheckpointError(f"load: {name} is a corrupt tinyattn .npz checkpoint: {err}") \
            from None


# ---- load -----------------------------------------------------------------------------------


def _open(f: Any) -> tuple[IO[bytes], str, str | None, bool]:
    """``(binary handle, name for messages, path or None, whether we opened it)``."""
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"load: no checkpoint file at {path!r}")
        return open(path, "rb"), repr(path), path, True  # noqa: SIM115  (closed by load)
    if hasattr(f, "read"):
        name = repr(getattr(f, "name", "<file object>"))
        seekable = getattr(f, "seekable", lambda: False)()
        return (f if seekable else io.BytesIO(f.read())), name, None, False
    raise TypeError(f"load: f must be a path or a binary file object, got {type(f).__name__}")


def load(f: str | os.PathLike | IO[bytes], map_location: Any = None,
         pickle_module: Any = None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args: Any) -> Any:
    """Read a checkpoint written by ``torch.save`` or :func:`save` (or an earlier tinyattn
    ``.npz``), never running code named by the file. See the module docstring for what comes
    back and what is refused.

    Parameters
    ----------
    f : path or binary file object
    map_location : None, 'cpu', ta.device('cpu'), dict or callable
        Where storages go: always the CPU. A dict's targets must be the CPU; a callable is
        called as ``map_location(storage, location)`` and must return the storage or None.
    pickle_module : None
        PyTorch's pickle module option; only the default (None) is accepted.
    weights_only : bool or None
        The file is always read as ``weights_only=True`` would read it; False does not allow
        any more globals in tinyattn (the error for one says so).
    mmap : bool or None
        Map the storages of a file given by path instead of reading them (copy-on-write, as
        PyTorch's ``mmap=True``); not for file objects.
    encoding : str, optional
        How Python 2 byte strings in the pickle are decoded (``'bytes'`` keeps them); the only
        other keyword accepted.

    Examples
    --------
    >>> import tinyattn as ta, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    >>> ta.save({"model": ta.nn.Linear(2, 1).state_dict(), "step": 3}, path)
    >>> state = ta.load(path, map_location="cpu", weights_only=True)
    >>> list(state["model"]), state["step"]
    (['weight', 'bias'], 3)
    """
    if pickle_module is not None:
        raise TypeError("load: pickle_module is not supported: tinyattn reads checkpoints with "
                        "its own restricted unpickler")
    if weights_only not in (None, True, False):
        raise TypeError(f"load: weights_only must be a bool or None, got {weights_only!r}")
    if mmap not in (None, True, False):
        raise TypeError(f"load: mmap must be a bool or None, got {mmap!r}")
    encoding = pickle_load_args.pop("encoding", "ASCII")
    if pickle_load_args:
        raise TypeError(f"load: unsupported keyword arguments {sorted(pickle_load_args)} (only "
                        "'encoding' is passed on to the unpickler)")
    if not isinstance(encoding, str):
        raise TypeError(f"load: encoding must be a str, got {type(encoding).__name__}")
    _check_map_location(map_location)
    handle, name, path, owned = _open(f)
    if mmap and path is None:
        raise ValueError("load: mmap=True needs f to be a file path")
    try:
        start = handle.tell()
        head = handle.read(512)
        handle.seek(start)
        if not head:
            raise CheckpointError(f"load: {name} is empty")
        if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):
            if head[:1] == b"\x80" or head[257:262] == b"ustar":
                raise CheckpointError(
                    f"load: {name} is in PyTorch's legacy (pre-1.6, non-zip) format, which "
                    "tinyattn does not read; re-save it with a current torch.save")
            raise CheckpointError(f"load: {name} is not a checkpoint (neither PyTorch's zip "
                                  "format nor a tinyattn .npz)")
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
            raise CheckpointError(f"load: {name} is truncated or corrupt: it starts as a zip "
                                  f"archive but cannot be read as one ({err}); was it written "
                                  "completely?") from None
        with archive:
            names = archive.namelist()
            if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
                reader = _TorchArchive(archive, name, map_location, path, bool(mmap), encoding)
                try:
                    return reader.load()
                except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as err:
                    raise CheckpointError(f"load: {name} is corrupt: {err}") from None
            if names and all(n.endswith(".npy") for n in names):
                handle.seek(start)
                return _load_npz(handle, name)
            raise CheckpointError(f"load: {name} is a zip archive but not a checkpoint: no "
                                  "data.pkl record (PyTorch) and not only .npy arrays (tinyattn)")
    finally:
        if owned:
            handle.close()


# ---- save -----------------------------------------------------------------------------------


class _StorageTable:
    """The storages a save writes: one per block of memory its tensors view."""

    def __init__(self) -> None:
        self.keys: dict[int, str] = {}
        self.roots: list[np.ndarray] = []  # kept alive, so that ids stay unique

    def place(self, array: np.ndarray) -> tuple[str, np.ndarray, int, tuple[int, ...]]:
        """``(key, storage array, offset, strides)`` of ``array``, in elements: the storage is
        the outermost contiguous array of the same dtype that ``array`` views."""
        root = None
        if array.size and array.dtype.isnative:
            candidate: Any = array
            while isinstance(candidate, np.ndarray):
                if candidate.dtype == array.dtype and candidate.flags.c_contiguous:
                    root = candidate
                candidate = candidate.base
        offset, strides = 0, ()
        if root is not None:
            itemsize = array.dtype.itemsize
            start = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
            offset, remainder = divmod(start, itemsize)
            strides = tuple(s // itemsize for s in array.strides)
            last = offset + sum((n - 1) * s for n, s in zip(array.shape, strides))
            if remainder or offset < 0 or any(s < 0 or s % itemsize for s in array.strides) \
                    or last >= root.size:
                root = None
        if root is None:  # a copy of its own
            root = np.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=True)
            offset, strides = 0, tuple(s // root.itemsize for s in root.strides)
        if id(root) not in self.keys:
            self.keys[id(root)] = str(len(self.roots))
            self.roots.append(root)
        return self.keys[id(root)], root, offset, strides


def _save_converter(table: _StorageTable) -> Callable[[Any, str], Any]:
    """The PickleWriter hook: tinyattn objects as the calls PyTorch's unpickler makes."""
    from .nn import Parameter

    def tensor_call(array: np.ndarray, requires_grad: bool, where: str) -> Reduce:
        name = _STORAGE_OF.get(array.dtype.newbyteorder("="))
        if name is None:
            raise TypeError(f"save: cannot save an array of dtype {array.dtype} at {where}")
        key, root, offset, strides = table.place(array)
        pid = ("storage", GlobalRef("torch", _STORAGE_CLASS[name]), key, "cpu", int(root.size))
        hooks = Reduce(GlobalRef("collections", "OrderedDict"), ())
        return Reduce(GlobalRef("torch._utils", "_rebuild_tensor_v2"),
                      (Persistent(pid), offset, tuple(array.shape), strides, requires_grad,
                       hooks))

    def convert(obj: Any, where: str) -> Any:
        if isinstance(obj, Parameter):
            return Reduce(GlobalRef("torch._utils", "_rebuild_parameter"),
                          (tensor_call(obj.numpy(), False, where), obj.requires_grad,
                           Reduce(GlobalRef("collections", "OrderedDict"), ())))
        if isinstance(obj, Tensor):
            return tensor_call(obj.numpy(), obj.requires_grad, where)
        if isinstance(obj, np.ndarray):
            return tensor_call(obj, False, where)
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return obj.item()
        if isinstance(obj, np.dtype) and obj in _STORAGE_OF:
            return GlobalRef("torch", _STORAGE_OF[obj])
        if isinstance(obj, device):
            return Reduce(GlobalRef("torch", "device"), ("cpu",))
        if isinstance(obj, Size):
            return Reduce(GlobalRef("torch", "Size"), (tuple(int(n) for n in obj),))
        if type(obj) is complex:
            return Reduce(GlobalRef("__builtin__", "complex"), (obj.real, obj.imag))
        raise TypeError(
            f"save: cannot save a {type(obj).__module__}.{type(obj).__name__} at {where}: "
            "tinyattn writes what torch.load(weights_only=True) reads — tensors, numbers, "
            "strings, bytes, None and dicts/lists/tuples/sets of them; save "
            "module.state_dict() rather than the module")

    return convert


def _zip_records(handle: IO[bytes], records: list[tuple[str, Any]]) -> None:
    """Write ``records`` as a zip archive PyTorch reads: stored, each record's bytes aligned to
    64 bytes by padding its local header's extra field (ID ``FB``, as PyTorch's writer does)."""
    with zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, payload in records:
            data = memoryview(payload).cast("B") if not isinstance(payload, bytes) else payload
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            info.file_size = len(data)
            zip64 = len(data) * 1.05 > zipfile.ZIP64_LIMIT
            header = 30 + len(name.encode("utf-8")) + 4 + (20 if zip64 else 0)
            padding = -(handle.tell() + header) % 64
            info.extra = b"FB" + struct.pack("<H", padding) + b"Z" * padding
            with archive.open(info, "w", force_zip64=zip64) as dest:
                dest.write(data)


def write_atomically(path: str, write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it to ``path``: a
    reader never sees half a file, and a failed write leaves no temporary behind."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=directory)
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)  # mkstemp creates files readable by the owner only
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def save(obj: Any, f: str | os.PathLike | IO[bytes], pickle_module: Any = None,
         pickle_protocol: int = 2, _use_new_zipfile_serialization: bool = True) -> None:
    """Write ``obj`` in PyTorch's checkpoint format, which ``torch.load(f, weights_only=True)``
    and :func:`load` read. See the module docstring for what can be saved.

    A path is written atomically (a temporary file beside it, then a rename), so an
    interrupted save never leaves half a checkpoint in place of a good one.

    Parameters
    ----------
    obj : tensors, state dicts, numbers, strings and containers of them
    f : path or writable binary file object
    pickle_module : None or the ``pickle`` module
        The pickle is always written by tinyattn (protocol 2, as PyTorch writes it).
    pickle_protocol : 2
        The only protocol ``torch.load(weights_only=True)`` reads.
    _use_new_zipfile_serialization : True
        PyTorch's legacy format (False) is not written.

    Examples
    --------
    >>> import tinyattn as ta, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.pth")
    >>> w = ta.arange(6.0)
    >>> ta.save({"w": w, "half": w[:3], "step": 3}, path)
    >>> back = ta.load(path)
    >>> back["half"][0] = 100.0   # the two tensors still share memory
    >>> back["w"].tolist(), back["step"]
    ([100.0, 1.0, 2.0, 3.0, 4.0, 5.0], 3)
    """
    import pickle

    if pickle_module not in (None, pickle):
        raise TypeError("save: pickle_module is not supported: tinyattn writes the pickle "
                        "itself (protocol 2, as PyTorch)")
    if pickle_protocol != 2:
        raise ValueError(f"save: pickle_protocol={pickle_protocol!r} is not supported: "
                         "tinyattn writes protocol 2, the one torch.load(weights_only=True) "
                         "reads")
    if _use_new_zipfile_serialization is not True:
        raise ValueError("save: PyTorch's legacy (non-zip) format is not written by tinyattn")
    table = _StorageTable()
    data = PickleWriter(_save_converter(table)).dumps(obj)
    archive = "archive"
    if isinstance(f, (str, os.PathLike)):
        stem = os.path.splitext(os.path.basename(os.fspath(f)))[0]
        archive = stem if stem and stem.isascii() and "/" not in stem else archive
    records: list[tuple[str, Any]] = [
        (f"{archive}/data.pkl", data), (f"{archive}/.format_version", b"1"),
        (f"{archive}/.storage_alignment", b"64"),
        (f"{archive}/byteorder", sys.byteorder.encode()),
    ]
    records += [(f"{archive}/data/{key}", root.reshape(-1).view(np.uint8))
                for key, root in zip(table.keys.values(), table.roots)]
    records += [(f"{archive}/version", b"3\n"),
                (f"{archive}/.data/serialization_id",
                 str(secrets.randbits(128)).zfill(40).encode())]
    if isinstance(f, (str, os.PathLike)):
        write_atomically(os.fspath(f), lambda handle: _zip_records(handle, records))
    elif hasattr(f, "write"):
        buffer = io.BytesIO()
        _zip_records(buffer, records)
        f.write(buffer.getvalue())
    else:
        raise TypeError(f"save: f must be a path or a writable binary file object, got "
                        f"{type(f).__name__}")
