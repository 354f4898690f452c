"""A pickle reader that runs no code it was not told to, and a writer of plain pickles.

:class:`RestrictedUnpickler` executes a pickle's opcodes itself (decoded by the standard
library's :func:`pickletools.genops`, which only parses). Data opcodes build numbers, strings,
bytes, tuples, lists, dicts and sets. Every opcode that could reach code — a global name, a
call (``REDUCE``, ``NEWOBJ``), a persistent id, setting an object's state (``BUILD``) — is
handed to the caller's callbacks, which decide what each name means; a name they do not know is
refused before anything runs. Opcodes that import by other routes (``INST``, ``OBJ``, the
extension registry) and out-of-band buffers are refused outright.

:class:`PickleWriter` writes protocol-2 pickles of the same plain values, plus references to
globals (:class:`GlobalRef`), calls of them (:class:`Reduce`) and persistent ids
(:class:`Persistent`), without importing what they name.
"""

from __future__ import annotations

import io
import pickle
import pickletools
import struct
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["CheckpointError", "Global", "GlobalRef", "PassThrough", "Persistent", "PickleWriter",
           "Reduce", "RefusedError", "RestrictedUnpickler"]


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: truncated, corrupt or malformed."""


class RefusedError(pickle.UnpicklingError):
    """A pickle asked for something the restricted unpickler does not allow; nothing ran."""


class PassThrough(Exception):  # noqa: N818  (a carrier, not an error of its own)
    """Raised by a callback to have ``original`` leave :meth:`RestrictedUnpickler.load` as it
    is, instead of being reported as a corrupt pickle (errors of a user's ``map_location``)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class Global:
    """An allowed global as it sits on the unpickler's stack.

    ``call`` is what ``REDUCE`` may call with the pickled arguments, ``new`` what ``NEWOBJ`` may;
    None means the pickle may not call it that way. ``value`` is an optional payload the
    callbacks use to recognise it (a dtype, a class marker).
    """

    __slots__ = ("call", "new", "path", "value")

    def __init__(self, path: str, call: Callable[..., Any] | None = None,
                 new: Callable[..., Any] | None = None, value: Any = None) -> None:
        self.path, self.call, self.new, self.value = path, call, new, value

    def __repr__(self) -> str:
        return f"<global {self.path}>"


_REFUSED_OPCODES = {
    "INST": "INST imports and calls a class",
    "OBJ": "OBJ calls a class",
    "EXT1": "EXT1 looks up the copyreg extension registry",
    "EXT2": "EXT2 looks up the copyreg extension registry",
    "EXT4": "EXT4 looks up the copyreg extension registry",
    "PERSID": "only binary persistent ids (BINPERSID) are allowed",
    "NEXT_BUFFER": "out-of-band buffers are not allowed",
    "READONLY_BUFFER": "out-of-band buffers are not allowed",
}

_MARK = object()


class RestrictedUnpickler:
    """Read one pickle, calling only what the callbacks hand out.

    Parameters
    ----------
    data : bytes
        The pickle.
    find_global : callable ``(module, name) -> object``
        What a global name stands for: a :class:`Global` (callable as it allows) or a plain
        value; it raises :class:`RefusedError` for a name it does not allow. Python 2 module
        names of builtins (``__builtin__``) arrive as ``builtins``.
    persistent_load : callable ``(pid) -> object``
        The object of a ``BINPERSID`` record.
    build : callable ``(obj, state) -> None``
        Applies a ``BUILD`` (setting an object's state); raises :class:`RefusedError` for an
        object whose state may not be set.
    encoding : str
        How Python 2 byte strings (``STRING`` opcodes) are decoded; ``'bytes'`` keeps them.
    where : str
        What errors start with (``"load: 'ckpt.pt'"``).
    """

    def __init__(self, data: bytes, find_global: Callable[[str, str], Any],
                 persistent_load: Callable[[Any], Any], build: Callable[[Any, Any], None],
                 encoding: str = "ASCII", where: str = "load") -> None:
        self.data = data
        self.where = where
        self.find_global = find_global
        self.persistent_load = persistent_load
        self.build = build
        self.encoding = encoding

    def load(self) -> Any:
        """The unpickled object; :class:`RefusedError` or :class:`CheckpointError` else."""
        try:
            return self._run()
        except (CheckpointError, RefusedError):
            raise
        except PassThrough as carrier:
            raise carrier.original from None
        except (IndexError, KeyError, TypeError, ValueError, AttributeError, OverflowError,
                RecursionError, struct.error, UnicodeError, EOFError) as err:
            raise CheckpointError(f"{self.where}: the pickle is corrupt ({type(err).__name__}: "
                                  f"{err})") from None

    # ---- the machine ------------------------------------------------------------------------
    def _pop_mark(self) -> list[Any]:
        items = []
        while True:
            item = self.stack.pop()
            if item is _MARK:
                break
            items.append(item)
        items.reverse()
        return items

    def _string(self, raw: Any) -> Any:
        """A Python 2 byte string, decoded as the caller asked."""
        if isinstance(raw, str):
            raw = raw.encode("latin-1")
        return raw if self.encoding == "bytes" else raw.decode(self.encoding)

    def _run(self) -> Any:
        self.stack: list[Any] = []
        memo: dict[int, Any] = {}
        stack = self.stack
        for opcode, arg, position in pickletools.genops(io.BytesIO(self.data)):
            name = opcode.name
            if name in _REFUSED_OPCODES:
                raise RefusedError(f"{self.where}: opcode {name} at byte {position} is not "
                                   f"allowed: {_REFUSED_OPCODES[name]}")
            if name in ("PROTO", "FRAME"):
                continue
            if name == "STOP":
                if len(stack) != 1:
                    raise CheckpointError(f"{self.where}: the pickle ends with {len(stack)} "
                                          "objects on its stack instead of one")
                return stack.pop()
            # globals and calls: only through the callbacks
            if name == "GLOBAL":
                module, _, attribute = arg.partition(" ")
                stack.append(self._global(module, attribute))
            elif name == "STACK_GLOBAL":
                attribute, module = stack.pop(), stack.pop()
                if not isinstance(module, str) or not isinstance(attribute, str):
                    raise CheckpointError("STACK_GLOBAL needs two strings")
                stack.append(self._global(module, attribute))
            elif name == "REDUCE":
                args = stack.pop()
                function = stack.pop()
                if not isinstance(function, Global) or function.call is None:
                    raise RefusedError(f"{self.where}: the pickle calls {function!r}, which is "
                                       "not a function it may call")
                if not isinstance(args, tuple):
                    raise CheckpointError("REDUCE needs a tuple of arguments")
                stack.append(function.call(*args))
            elif name in ("NEWOBJ", "NEWOBJ_EX"):
                kwargs = stack.pop() if name == "NEWOBJ_EX" else {}
                args = stack.pop()
                cls = stack.pop()
                if not isinstance(cls, Global) or cls.new is None:
                    raise RefusedError(f"{self.where}: the pickle creates an object of "
                                       f"{cls!r}, which it may not create")
                if kwargs:
                    raise RefusedError(f"{self.where}: the pickle creates {cls!r} with keyword "
                                       "arguments")
                stack.append(cls.new(*args))
            elif name == "BUILD":
                state = stack.pop()
                self.build(stack[-1], state)
            elif name == "BINPERSID":
                stack.append(self.persistent_load(stack.pop()))
            # the stack and the memo
            elif name == "MARK":
                stack.append(_MARK)
            elif name == "POP":
                stack.pop()
            elif name == "POP_MARK":
                self._pop_mark()
            elif name == "DUP":
                stack.append(stack[-1])
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[arg] = stack[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo[arg])
            # plain values
            elif name in ("NONE", "NEWTRUE", "NEWFALSE"):
                stack.append({"NONE": None, "NEWTRUE": True, "NEWFALSE": False}[name])
            elif name in ("INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4",
                          "FLOAT", "BINFLOAT", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE",
                          "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8"):
                stack.append(arg)
            elif name == "BYTEARRAY8":
                stack.append(bytearray(arg))
            elif name in ("STRING", "BINSTRING", "SHORT_BINSTRING"):
                stack.append(self._string(arg))
            # containers
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                count = int(name[-1])
                items = tuple(stack[-count:])
                if len(items) != count or any(item is _MARK for item in items):
                    raise CheckpointError(f"{name} needs {count} objects on the stack")
                del stack[-count:]
                stack.append(items)
            elif name == "TUPLE":
                stack.append(tuple(self._pop_mark()))
            elif name == "EMPTY_LIST":
                stack.append([])
            elif name == "LIST":
                stack.append(self._pop_mark())
            elif name in ("APPEND", "APPENDS"):
                items = [stack.pop()] if name == "APPEND" else self._pop_mark()
                if type(stack[-1]) is not list:
                    raise RefusedError(f"{name} may only extend a list, not a "
                                       f"{type(stack[-1]).__name__}")
                stack[-1].extend(items)
            elif name == "EMPTY_DICT":
                stack.append({})
            elif name in ("DICT", "SETITEM", "SETITEMS"):
                if name == "SETITEM":
                    value = stack.pop()
                    items = [stack.pop(), value]
                else:
                    items = self._pop_mark()
                if len(items) % 2:
                    raise CheckpointError(f"{name} needs key/value pairs")
                if name == "DICT":
                    stack.append({})
                target = stack[-1]
                if type(target) not in (dict, OrderedDict, Counter):
                    raise RefusedError(f"{name} may only fill a dict, not a "
                                       f"{type(target).__name__}")
                for index in range(0, len(items), 2):
                    target[items[index]] = items[index + 1]
            elif name == "EMPTY_SET":
                stack.append(set())
            elif name == "ADDITEMS":
                items = self._pop_mark()
                if type(stack[-1]) is not set:
                    raise RefusedError(f"ADDITEMS may only fill a set, not a "
                                       f"{type(stack[-1]).__name__}")
                stack[-1].update(items)
            elif name == "FROZENSET":
                stack.append(frozenset(self._pop_mark()))
            else:
                raise RefusedError(f"{self.where}: opcode {name} at byte {position} is not "
                                   "supported")
        raise CheckpointError(f"{self.where}: the pickle ends without a STOP opcode "
                              "(truncated?)")

    def _global(self, module: str, name: str) -> Any:
        if module == "__builtin__":
            module = "builtins"
        return self.find_global(module, name)


# ---- writing --------------------------------------------------------------------------------


class GlobalRef:
    """A reference to the global ``module.name``, written as a ``GLOBAL`` opcode."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name


class Reduce:
    """A call ``module.name(*args)`` to be made by whoever unpickles it."""

    __slots__ = ("args", "function")

    def __init__(self, function: GlobalRef, args: tuple[Any, ...]) -> None:
        self.function, self.args = function, args


class Persistent:
    """A persistent id (``BINPERSID``): the unpickler's ``persistent_load(pid)`` supplies it."""

    __slots__ = ("pid",)

    def __init__(self, pid: tuple[Any, ...]) -> None:
        self.pid = pid


class PickleWriter:
    """Write a protocol-2 pickle of plain values and :class:`Reduce`/:class:`Persistent`
    nodes.

    ``convert(obj)`` is asked about every object that is not a plain value; it returns a
    replacement made of plain values and nodes, or raises TypeError naming what cannot be
    written. ``where`` strings in errors locate the object (``obj['model']['w']``).

    Examples
    --------
    >>> import pickle
    >>> pickle.loads(PickleWriter(lambda obj, where: obj).dumps({"a": (1, 2.5, "x")}))
    {'a': (1, 2.5, 'x')}
    """

    def __init__(self, convert: Callable[[Any, str], Any]) -> None:
        self.convert = convert

    def dumps(self, obj: Any) -> bytes:
        """The pickle of ``obj``."""
        self.out = io.BytesIO()
        self._active: set[int] = set()
        self.out.write(b"\x80\x02")
        self._write(obj, "obj")
        self.out.write(b".")
        return self.out.getvalue()

    def _op(self, code: bytes, payload: bytes = b"") -> None:
        self.out.write(code + payload)

    def _int(self, value: int) -> None:
        if 0 <= value < 0x100:
            self._op(b"K", bytes([value]))
        elif 0 <= value < 0x10000:
            self._op(b"M", struct.pack("<H", value))
        elif -0x80000000 <= value < 0x80000000:
            self._op(b"J", struct.pack("<i", value))
        else:
            size = (value.bit_length() + 8) // 8  # always enough for the sign bit
            raw = value.to_bytes(size, "little", signed=True)
            if size > 255:
                self._op(b"\x8b", struct.pack("<i", size) + raw)
            else:
                self._op(b"\x8a", bytes([size]) + raw)

    def _str(self, value: str) -> None:
        raw = value.encode("utf-8", "surrogatepass")
        self._op(b"X", struct.pack("<I", len(raw)) + raw)

    def _global(self, ref: GlobalRef) -> None:
        self._op(b"c", f"{ref.module}\n{ref.name}\n".encode())

    def _items(self, values: Any, where: str, name: Callable[[int], str]) -> None:
        for index, value in enumerate(values):
            self._write(value, name(index))

    def _write(self, obj: Any, where: str) -> None:
        if obj is None:
            self._op(b"N")
        elif obj is True or obj is False:
            self._op(b"\x88" if obj else b"\x89")
        elif type(obj) is int:
            self._int(obj)
        elif type(obj) is float:
            self._op(b"G", struct.pack(">d", obj))
        elif type(obj) is str:
            self._str(obj)
        elif type(obj) in (bytes, bytearray):
            # Protocol 2 spells bytes as _codecs.encode(text, 'latin1'), as Python's pickler does
            name = "bytearray" if type(obj) is bytearray else None
            call = Reduce(GlobalRef("_codecs", "encode"), (bytes(obj).decode("latin-1"),
                                                           "latin1"))
            self._write(Reduce(GlobalRef("__builtin__", name), (call,)) if name else call,
                        where)
        elif isinstance(obj, GlobalRef):
            self._global(obj)
        elif isinstance(obj, (Reduce, Persistent, dict)) or type(obj) in (tuple, list, set):
            if id(obj) in self._active:
                raise ValueError(f"save: {where} contains itself; a self-referencing "
                                 "structure cannot be saved")
            self._active.add(id(obj))
            try:
                self._write_container(obj, where)
            finally:
                self._active.discard(id(obj))
        else:
            self._write(self.convert(obj, where), where)

    def _write_container(self, obj: Any, where: str) -> None:
        if isinstance(obj, Reduce):
            self._global(obj.function)
            self._write(obj.args, where)
            self._op(b"R")
        elif isinstance(obj, Persistent):
            self._write(obj.pid, where)
            self._op(b"Q")
        elif isinstance(obj, tuple):
            if not obj:
                self._op(b")")
                return
            if len(obj) > 3:
                self._op(b"(")
            self._items(obj, where, lambda i: f"{where}[{i}]")
            self._op(b"t" if len(obj) > 3 else bytes([0x84 + len(obj)]))  # TUPLE or TUPLE1-3
        elif isinstance(obj, list):
            self._op(b"]")
            if obj:
                self._op(b"(")
                self._items(obj, where, lambda i: f"{where}[{i}]")
                self._op(b"e")
        elif isinstance(obj, set):
            items = list(obj)
            self._write(Reduce(GlobalRef("__builtin__", "set"), (items,)), where)
        else:
            self._dict(obj, where)

    def _dict(self, obj: dict, where: str) -> None:
        ordered = isinstance(obj, OrderedDict)
        if ordered:
            self._global(GlobalRef("collections", "OrderedDict"))
            self._op(b")R")
        else:
            self._op(b"}")
        if obj:
            self._op(b"(")
            for key, value in obj.items():
                if type(key) not in (str, int, float, bool, tuple) and key is not None:
                    raise TypeError(f"save: {where} has a key of type {type(key).__name__}; "
                                    "keys must be strings, numbers, None or tuples")
                self._write(key, f"{where} key")
                self._write(value, f"{where}[{key!r}]")
            self._op(b"u")
        attributes = getattr(obj, "__dict__", None) if ordered else None
        if attributes:  # PyTorch's state dicts carry ``_metadata`` as an attribute
            self._write(dict(attributes), f"{where}.__dict__")
            self._op(b"b")
