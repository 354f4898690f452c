"""``tinyattn run SCRIPT [ARGS...]``: run an unchanged PyTorch script on tinyattn.

The script runs as ``python SCRIPT ARGS`` would run it — ``sys.argv`` is ``[SCRIPT, *ARGS]``,
``__name__`` is ``"__main__"``, ``__file__`` is the script's absolute path and ``sys.path[0]``
its folder — with one difference: while it runs, ``import torch`` and every ``import torch.X``
(``torch.nn.functional``, ``torch.utils.data``, ``torch.backends.cudnn``, …) give tinyattn's
module of the same name, through a finder at the front of ``sys.meta_path``. The script's own
modules (``model.py`` beside ``train.py``) see the same ``torch``. A module tinyattn does not
have is an ``ImportError`` naming it and the line that imports it::

    ModuleNotFoundError: tinyattn has no torch.distributed.fsdp (train.py:12): ...

and so is a missing name (``AttributeError: tinyattn has no torch.einsum (model.py:27): ...``).

The exit status is the script's: 0 when it ends, its ``sys.exit`` code, and 1 with a
traceback (without the frames of this runner and of the import machinery) when it raises. When
the run is over, the finder is gone, ``sys.modules`` holds no ``torch`` of tinyattn's (a real
PyTorch imported before the run is put back), and ``sys.argv``, ``sys.path``, ``__main__``,
the working directory and the modules the script imported from outside the Python installation
are as they were, so :func:`run_script` can be called again in the same process.

A run tunes the allocator for training (:func:`tinyattn.memory.keep_freed_memory_unless_disabled`,
``TINYATTN_KEEP_FREED_MEMORY=0`` turns that off), and the one-line notices of the stand-ins
(``torch.compile``, ``torch.autocast``) are said once per run.

With an :class:`Inspection` (``tinyattn run --inspect-step N --out DIR``) the script runs inside
a :func:`tinyattn.inspect.recording`: its ``backward()`` calls are counted and observed, not
changed, and at the ``N``-th one the graph is captured (values, gradients, ``check_graph``,
``explain``, the memory ledger, the attention maps of every attention call) and written to
``DIR/view.html`` (the explorer, :func:`tinyattn.inspect.view`) and ``DIR/view.json`` (its
numbers), with the attention maps of the calls before it in the page's training view.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import traceback
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import notices
from .memory import keep_freed_memory_unless_disabled
from .missing import message, user_frame

__all__ = ["Inspection", "TorchAliasFinder", "run_script", "torch_is_tinyattn"]

_HERE = os.path.abspath(__file__)
_EXPLANATION = ("under 'tinyattn run', torch is tinyattn (see 'What runs unchanged' in the "
                "README for what it covers)")


def _is_torch(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


class _AliasLoader(importlib.abc.Loader):
    """Loads ``torch.X`` as the already importable ``tinyattn.X``: the module itself, not a
    copy, with its own ``__spec__`` and ``__loader__`` left as they were.

    A module that is not a package (``tinyattn.distributed``) gets an empty ``__path__`` for
    the run (listed in ``stamped``): Python looks for ``torch.distributed.X`` only below a
    package, and without one it would answer with its own "is not a package" before the finder
    could name what is missing."""

    def __init__(self, target: str, stamped: list[types.ModuleType]) -> None:
        self.target = target
        self.stamped = stamped
        self._kept: dict[str, Any] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.target)
        if not hasattr(module, "__path__"):
            module.__path__ = []
            self.stamped.append(module)
        # the import system stamps the new name's spec (and a missing loader) on the module:
        # keep the module's own, to put back in exec_module
        self._kept = {key: getattr(module, key, None) for key in ("__spec__", "__loader__")}
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        for key, value in self._kept.items():
            setattr(module, key, value)


class TorchAliasFinder(importlib.abc.MetaPathFinder):
    """A ``sys.meta_path`` finder that resolves ``torch`` and ``torch.X`` to ``tinyattn`` and
    ``tinyattn.X``; a ``torch.X`` tinyattn does not have is a ``ModuleNotFoundError`` naming it
    and the importing line.

    Examples
    --------
    >>> import sys
    >>> before = sys.modules.get("torch")  # None, or a real PyTorch imported earlier
    >>> with torch_is_tinyattn():
    ...     import torch.nn.functional as F
    >>> F.__name__, sys.modules.get("torch") is before
    ('tinyattn.functional', True)
    """

    def __init__(self) -> None:
        self.stamped: list[types.ModuleType] = []
        """Modules given an empty ``__path__`` for the run (see ``_AliasLoader``)."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not _is_torch(fullname):
            return None
        alias = "tinyattn" + fullname[len("torch"):]
        if alias not in sys.modules:
            try:
                found = importlib.util.find_spec(alias)
            except (ImportError, ValueError):  # a parent that is a plain module, not a package
                found = None
            if found is None:
                raise ModuleNotFoundError(message(fullname, _EXPLANATION, user_frame(0)),
                                          name=fullname)
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(alias, self.stamped))


@contextlib.contextmanager
def torch_is_tinyattn() -> Iterator[TorchAliasFinder]:
    """While inside, ``import torch`` (and ``torch.X``) gives tinyattn's modules; afterwards the
    finder is removed and ``sys.modules``'s ``torch`` entries are what they were before."""
    saved = {name: sys.modules.pop(name) for name in list(sys.modules) if _is_torch(name)}
    finder = TorchAliasFinder()
    sys.meta_path.insert(0, finder)
    try:
        yield finder
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if _is_torch(name)]:
            del sys.modules[name]
        sys.modules.update(saved)
        for module in finder.stamped:
            with contextlib.suppress(AttributeError):
                del module.__path__


_INSTALLED = tuple(os.path.abspath(p) + os.sep for p in {
    sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")})


def _script_module(module: Any) -> bool:
    """Whether ``module`` was loaded from outside the Python installation and tinyattn: the
    script's own modules (``model.py``), which saw tinyattn as ``torch``."""
    filename = getattr(module, "__file__", None)
    name = getattr(module, "__name__", "") or ""
    if not isinstance(filename, str) or name == "tinyattn" or name.startswith("tinyattn."):
        return False
    return not os.path.abspath(filename).startswith(_INSTALLED)


@contextlib.contextmanager
def _as_main(script: str, path: str, args: Sequence[str]) -> Iterator[dict[str, Any]]:
    """The state ``python SCRIPT ARGS`` starts in, restored on the way out."""
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__package__ = None
    main.__spec__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    main.__builtins__ = builtins
    saved_main = sys.modules.get("__main__")
    saved_argv, saved_path, saved_cwd = sys.argv, sys.path[:], os.getcwd()
    before = set(sys.modules)
    sys.modules["__main__"] = main
    sys.argv = [script, *args]
    folder = os.path.dirname(os.path.realpath(path))
    if sys.path and not sys.flags.safe_path:  # [0]: the runner's own folder (or -m's cwd)
        sys.path[0] = folder
    else:  # python -P put nothing of its own first: [0] may be a PYTHONPATH entry
        sys.path.insert(0, folder)
    try:
        yield main.__dict__
    finally:
        for name in set(sys.modules) - before:
            if _script_module(sys.modules.get(name)):
                del sys.modules[name]
        if saved_main is None:
            sys.modules.pop("__main__", None)
        else:
            sys.modules["__main__"] = saved_main
        sys.argv = saved_argv
        sys.path[:] = saved_path
        with contextlib.suppress(OSError):
            os.chdir(saved_cwd)


_PACKAGE = os.path.dirname(_HERE) + os.sep


def _shown(filename: str) -> bool:
    return os.path.abspath(filename) != _HERE and not filename.startswith(
        "<frozen importlib")


def _trim(error: BaseException, seen: set[int] | None = None) -> None:
    """Drop this runner's frames and the import machinery's from the tracebacks of ``error``
    and of the exceptions chained to it; a missing name's traceback ends at the line that
    asked for it (without tinyattn's ``__getattr__`` that said so)."""
    seen = set() if seen is None else seen
    if id(error) in seen:
        return
    seen.add(id(error))
    kept = []
    tb = error.__traceback__
    while tb is not None:
        if _shown(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    if str(error).startswith("tinyattn has no "):
        while len(kept) > 1 and kept[-1].tb_frame.f_code.co_filename.startswith(_PACKAGE):
            kept.pop()
    trimmed = None
    for tb in reversed(kept):
        trimmed = types.TracebackType(trimmed, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
    error.__traceback__ = trimmed
    for chained in (error.__cause__, error.__context__):
        if chained is not None:
            _trim(chained, seen)


def _tensor_method_missing(error: BaseException) -> BaseException:
    """A script's ``x.einsum(...)`` on a tinyattn tensor: Python's own ``'Tensor' object has no
    attribute 'einsum'`` becomes the message a missing module attribute gets, with the script's
    line. (Tensor itself has no ``__getattr__``: with one, every attribute read of every tensor
    would go through it, three to four times slower.)"""
    from .tensor import Tensor

    if not isinstance(error, AttributeError) or not isinstance(getattr(error, "obj", None),
                                                               Tensor):
        return error
    name = getattr(error, "name", None)
    if not name or name.startswith("_"):
        return error
    tb, frame = error.__traceback__, None
    while tb is not None:  # the innermost frame of the script's own code
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
            frame = tb.tb_frame
        tb = tb.tb_next
    explained = AttributeError(message(f"torch.Tensor.{name}", _EXPLANATION, frame))
    explained.__traceback__ = error.__traceback__
    explained.__cause__, explained.__context__ = error.__cause__, error.__context__
    return explained


def _report(error: BaseException) -> None:
    error = _tensor_method_missing(error)
    _trim(error)
    sys.stdout.flush()
    traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    sys.stderr.flush()


def exit_status(code: Any) -> int:
    """The exit status of ``sys.exit(code)``, as Python computes it: 0 for None, the code for
    an int, else 1 (after printing the code to stderr, as Python does).

    Examples
    --------
    >>> exit_status(None), exit_status(3)
    (0, 3)
    """
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


@dataclass(frozen=True)
class Inspection:
    """What ``tinyattn run --inspect-step N --out DIR`` asks of a run.

    Attributes
    ----------
    step : int
        Which ``backward()`` call to inspect (1 for the first).
    out : Path
        Where ``view.html`` and ``view.json`` go (created).
    every : int, optional
        Record the attention maps of every ``every``-th call before it, for the training
        view (default: about 16 of them, ``max(1, step // 16)``).
    stop : bool
        End the run (exit status 0) once the page is written.
    check : bool
        Run ``check_graph`` on the inspected graph.
    """

    step: int
    out: Path
    every: int | None = None
    stop: bool = False
    check: bool = True


class _InspectionDone(BaseException):
    """Ends a run after its inspection (``Inspection.stop``); not the script's to catch."""


@contextlib.contextmanager
def _inspecting(inspection: Inspection | None, script: str) -> Iterator[None]:
    """Run the block inside a recording that writes the explorer at ``inspection.step``."""
    if inspection is None:
        yield
        return
    from .inspect.recording import recording

    out = Path(inspection.out).resolve()  # before the script changes directory
    every = inspection.every or max(1, inspection.step // 16)

    def write(view: Any) -> None:
        page, numbers = view.save(out / "view.html"), view.save_json(out / "view.json")
        check = view.data["summary"]["check"]
        verdict = "" if check is None else f"; check_graph: {check['text']}"
        print(f"tinyattn run: backward call {inspection.step} inspected "
              f"({len(view.nodes)} nodes, {len(view.data['attention']['steps'])} steps of "
              f"attention maps{verdict}): wrote {page} ({page.stat().st_size:,} bytes) and "
              f"{numbers}", file=sys.stderr)
        sys.stderr.flush()
        if inspection.stop:
            raise _InspectionDone

    title = f"{os.path.basename(script)}: backward call {inspection.step}"
    with recording(graph_step=inspection.step, every=every, check=inspection.check,
                   title=title, on_graph=write) as rec:
        yield
    if rec.graph is None:
        print(f"tinyattn run: the script called backward() {rec.backward_calls} time"
              f"{'' if rec.backward_calls == 1 else 's'}, so backward call {inspection.step} "
              f"was never reached: nothing was written to {out}", file=sys.stderr)


def run_script(script: str | os.PathLike[str], args: Sequence[str] = (),
               inspection: Inspection | None = None) -> int:
    """Run the PyTorch script ``script`` with ``sys.argv[1:] = args`` on tinyattn; return its
    exit status (see the module's docstring).

    Parameters
    ----------
    script : str or path
        The script, as it would be given to ``python``.
    args : sequence of str
        Its command-line arguments.
    inspection : Inspection, optional
        Inspect one of its ``backward()`` calls (``tinyattn run --inspect-step``).

    Returns
    -------
    int
        0 when the script ends, its ``sys.exit`` code, 1 (130 for Ctrl-C) when it raises; the
        traceback is printed on stderr.

    Raises
    ------
    FileNotFoundError
        When ``script`` is not a file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "hello.py").write_text("import torch\\nprint(torch.ones(2).sum().item())")
    >>> run_script(folder / "hello.py")  # doctest: +SKIP
    2.0
    0
    """
    script = os.fspath(script)
    path = os.path.abspath(script)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"can't open file {path!r}: no such file")
    for arg in args:
        if not isinstance(arg, str):
            raise TypeError(f"run_script: arguments must be strings, got {arg!r}")
    with open(path, "rb") as file:
        source = file.read()
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as error:
        error.__traceback__ = None
        _report(error)
        return 1
    keep_freed_memory_unless_disabled()
    notices.forget()
    with torch_is_tinyattn(), _as_main(script, path, list(args)) as namespace, \
            _inspecting(inspection, script):
        try:
            exec(code, namespace)
        except _InspectionDone:
            return 0
        except SystemExit as exit_:
            return exit_status(exit_.code)
        except KeyboardInterrupt as error:
            _report(error)
            return 130
        except BaseException as error:  # noqa: BLE001  (the script's error is reported)
            _report(error)
            return 1
    return 0
