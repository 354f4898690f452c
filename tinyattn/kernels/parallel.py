"""Parallel kernels: one body compiled serial and parallel, launched thread-safely.

:func:`parallel_kernel` compiles a kernel body that loops with ``prange`` over independent
rows or blocks twice: with ``parallel=True``, and serially, where numba runs ``prange`` as a
plain ``range``. Both run the same loop and give bitwise the same result; the serial one is for
inputs too small to be worth waking the thread pool. A kernel whose loop body is a large
function gives it as its *task function*: compiled once on its own and called by address
(:func:`run_task`), it is not compiled again into each loop (see :class:`ParallelKernel`).

Numba runs ``prange`` loops on one of three threading layers, chosen when the first parallel
kernel launches:

* ``tbb`` (Intel TBB) — safe to launch from several Python threads at once, and fork-safe;
* ``omp`` (OpenMP) — safe to launch from several Python threads at once; the GNU OpenMP
  runtime is not fork-safe (a child forked after a launch must not launch again);
* ``workqueue`` (numba's own pool, always available) — NOT thread-safe: two Python threads
  launching parallel kernels at the same time make numba abort the whole process
  ("Concurrent access has been detected").

Importing :mod:`tinyattn.kernels` runs :func:`select_threading_layer`, which, unless the user
chose a layer with ``NUMBA_THREADING_LAYER``, asks numba for ``'safe'`` (TBB) when the ``tbb``
package is importable and otherwise for ``'omp'`` when numba's OpenMP pool loads. When only
``workqueue`` can run, :data:`kernel_section` becomes a process-wide lock held around every
launch of a parallel kernel (by :class:`ParallelKernel`, so the callers of the kernel wrappers
need nothing), and concurrent calls queue instead of aborting. With a thread-safe layer
:data:`kernel_section` is a no-op context manager.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import os
import threading
import types
from collections.abc import Callable
from typing import Any

import numba
from llvmlite import ir
from numba import njit
from numba import types as nbtypes
from numba._dispatcher import compute_fingerprint
from numba.core import cgutils, config
from numba.extending import NativeValue, intrinsic, models, register_model, unbox
from numba.np.ufunc import parallel as numba_parallel

_THREADSAFE_LAYERS = ("tbb", "omp")
_THREADSAFE_CHOICES = ("tbb", "omp", "safe", "threadsafe")


def _loads(module: str) -> bool:
    """Whether numba's pool extension ``module`` (and the runtime it links to) loads."""
    try:
        importlib.import_module(module)
    except (ImportError, OSError):
        return False
    return True


def select_threading_layer() -> str:
    """Point numba at a thread-safe threading layer, if none was launched or chosen yet.

    Returns the layer that is running (after a parallel kernel has already launched), the
    user's ``NUMBA_THREADING_LAYER`` choice, or the choice made here: ``'safe'`` (TBB),
    ``'omp'``, or ``'workqueue'`` when neither loads.

    Examples
    --------
    >>> select_threading_layer() in ("tbb", "omp", "workqueue", "safe", "threadsafe",
    ...                              "forksafe", "default")
    True
    """
    if numba_parallel._is_initialized:
        return numba_parallel.threading_layer()
    if os.environ.get("NUMBA_THREADING_LAYER"):
        return str(config.THREADING_LAYER)
    if _loads("tbb") and _loads("numba.np.ufunc.tbbpool"):
        config.THREADING_LAYER = "safe"
    elif _loads("numba.np.ufunc.omppool"):
        config.THREADING_LAYER = "omp"
    else:
        config.THREADING_LAYER = "workqueue"
    return str(config.THREADING_LAYER)


def _needs_lock(layer: str) -> bool:
    """Whether launches must be serialised: the layer is, or may resolve to, ``workqueue``."""
    return layer not in _THREADSAFE_LAYERS + _THREADSAFE_CHOICES


class _KernelSection:
    """Context manager held around launches of parallel kernels (a lock only when needed)."""

    def __init__(self, locked: bool):
        self.locked = locked
        self._lock: Any = threading.RLock() if locked else contextlib.nullcontext()

    def __enter__(self) -> None:
        self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)


kernel_section = _KernelSection(_needs_lock(select_threading_layer()))


def kernels_are_serialised() -> bool:
    """Whether launches of parallel kernels are serialised by a lock (``workqueue`` only).

    Examples
    --------
    >>> isinstance(kernels_are_serialised(), bool)
    True
    """
    return kernel_section.locked


def _renamed(function: Callable, suffix: str) -> Callable:
    """A copy of ``function`` (same code, globals and defaults) whose qualified name ends in
    ``suffix``."""
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)
    copy.__qualname__ = function.__qualname__ + suffix
    copy.__doc__ = function.__doc__
    return copy


class TaskFunction(nbtypes.Type):
    """numba type of a :class:`CompiledTask`: the address of a task function compiled for
    ``argtypes`` (its parameters, the task index last)."""

    def __init__(self, argtypes: tuple):
        self.argtypes = tuple(argtypes)
        super().__init__(name=f"TaskFunction{self.argtypes}")


@register_model(TaskFunction)
class _TaskFunctionModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.IntType(64))


class CompiledTask:
    """A task function compiled for one list of argument types ``argtypes``: the ``address``
    of its machine code. A kernel body receives it as its first argument and calls it with
    :func:`run_task`; in numba its type is ``TaskFunction(argtypes)``."""

    __slots__ = ("address", "_numba_type_")

    def __init__(self, address: int, argtypes: tuple):
        self.address = address
        self._numba_type_ = TaskFunction(argtypes)  # read by numba.typeof, its quickest path


@unbox(TaskFunction)
def _unbox_task(typ, obj, c):
    address_object = c.pyapi.object_getattr_string(obj, "address")
    address = c.pyapi.long_as_longlong(address_object)
    c.pyapi.decref(address_object)
    return NativeValue(address, is_error=c.pyapi.c_api_error())


@intrinsic
def _run_task(typingctx, task, *args):
    if not isinstance(task, TaskFunction) or tuple(args) != task.argtypes:
        return None  # a typing error at compile time: the call does not fit the task
    signature = nbtypes.none(task, nbtypes.StarArgTuple.from_types(tuple(args)))

    def codegen(context, builder, sig, llargs):
        function = context.call_conv.get_function_type(nbtypes.none, task.argtypes)
        pointer = builder.inttoptr(llargs[0], function.as_pointer())
        values = cgutils.unpack_tuple(builder, llargs[1], len(task.argtypes))
        status, _ = context.call_conv.call_function(builder, pointer, nbtypes.none,
                                                    task.argtypes, values)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return signature, codegen


def _run_task_python(task, *args):
    """:func:`run_task` with ``NUMBA_DISABLE_JIT=1``: ``task`` is then the Python function."""
    task(*args)


#: ``run_task(task, *args)`` calls the task function ``task`` (a kernel body's first argument)
#: with ``args``: the body's other arguments, unchanged and in order, then the task index as an
#: ``int64``. Arguments of other types are a typing error when the body compiles.
run_task = _run_task_python if config.DISABLE_JIT else _run_task


class ParallelKernel:
    """A kernel body compiled twice, ``parallel=True`` and serial, each cached on disk.

    ``kernel(*args)`` launches the parallel compilation while holding :data:`kernel_section`;
    ``kernel(*args, parallel=False)`` runs the serial one (no threads, no lock). The body must
    use ``prange`` only over independent iterations, so both give bitwise the same result.

    numba's on-disk cache files a function's compilations under its qualified name and first
    line, not under its compile flags: two dispatchers of one Python function would load each
    other's cached code (the "parallel" one then runs serially). The parallel compilation is
    therefore made from a copy of the body named ``<qualname>.parallel``. Each variant compiles
    on its first call: a run that only ever takes one compiles only that one.

    Task functions. numba compiles a function together with the machine code of every jitted
    function it calls, and a ``prange`` loop is compiled four times over (the loop body, two
    gufunc wrappers, the function around them): a large per-task function called from a
    ``prange`` loop would be optimised and compiled into machine code five times. With
    ``task=``, a jitted function of the body's arguments and the task index, the task function
    is compiled once, on its own, and the body gets it as its first argument — the address of
    its machine code — and calls it through :func:`run_task`, so the body stays a small loop::

        @njit(cache=True)
        def _one_row(x, out, row):
            out[row] = 2 * x[row]

        @parallel_kernel(task=_one_row)
        def _double_rows(task, x, out):
            for row in prange(x.shape[0]):
                run_task(task, x, out, np.int64(row))

        _double_rows(x, out, parallel=...)  # the caller passes the arguments after ``task``

    A body without a default task gets one per call: ``kernel(*args, task=f, parallel=...)``.
    """

    def __init__(self, body: Callable, task: Any = None, **options: Any):
        self.serial = njit(cache=True, **options)(body)
        self.parallel = njit(cache=True, parallel=True, **options)(_renamed(body, ".parallel"))
        self.task = task
        self._compiled_tasks: dict = {}
        functools.update_wrapper(self, body)

    def __call__(self, *args: Any, parallel: bool = True, task: Any = None) -> Any:
        task = self.task if task is None else task
        if task is not None:
            args = (self._compiled_task(task, args), *args)
        if not parallel:
            return self.serial(*args)
        with kernel_section:
            return self.parallel(*args)

    def _compiled_task(self, task: Any, args: tuple) -> Any:
        """``task`` compiled for ``args`` and an ``int64`` task index (compiled, or loaded from
        numba's cache, on the first call with these argument types).

        The body's compiled code depends only on the argument types, not on which task it
        calls: one body may run different task functions (``kernel(..., task=...)``).
        """
        if config.DISABLE_JIT:
            return task
        key = (task, *map(compute_fingerprint, args))  # numba's cheap key of a value's type
        compiled = self._compiled_tasks.get(key)
        if compiled is None:
            argtypes = (*map(numba.typeof, args), nbtypes.int64)
            task.compile(argtypes)
            result = task.overloads[argtypes]
            address = result.library.get_pointer_to_function(result.fndesc.llvm_func_name)
            compiled = self._compiled_tasks[key] = CompiledTask(address, argtypes)
        return compiled


def parallel_kernel(body: Callable | None = None, /, **options: Any) -> Any:
    """Decorator making a :class:`ParallelKernel`; ``task`` is its task function (if any), the
    other ``options`` go to both ``njit`` calls.

    A kernel in a module (numba caches only functions defined in a file)::

        @parallel_kernel
        def _double_rows(x, out):
            for i in prange(x.shape[0]):
                out[i] = 2 * x[i]

        _double_rows(x, out, parallel=x.size >= _PARALLEL_MIN_ELEMENTS)
    """
    if body is None:
        return functools.partial(ParallelKernel, **options)
    return ParallelKernel(body, **options)


#: Elements per chunk when an elementwise kernel runs in parallel (64 KiB of float32).
ELEMENTS_PER_CHUNK = 16384


def element_chunks(size: int, parallel: bool) -> int:
    """How many chunks an elementwise kernel splits ``size`` elements into: one when it runs
    serially (one pass, no per-chunk overhead), else chunks of about :data:`ELEMENTS_PER_CHUNK`
    for the threads to share.

    Examples
    --------
    >>> element_chunks(100_000, parallel=False), element_chunks(100_000, parallel=True)
    (1, 7)
    """
    return max(1, -(-size // ELEMENTS_PER_CHUNK)) if parallel else 1


@njit(cache=True, inline="always")
def chunk_bounds(chunk, n_chunks, size):
    """``(start, stop)`` of chunk ``chunk`` when ``range(size)`` is cut into ``n_chunks``
    near-equal chunks."""
    return chunk * size // n_chunks, (chunk + 1) * size // n_chunks


@njit(cache=True, inline="always")
def chunk_of(x, n_chunks, chunk):
    """Chunk ``chunk`` of the 1-D array ``x`` cut into ``n_chunks`` near-equal chunks, as a view
    starting at index 0 (a loop over it needs no check for negative indices, so it vectorises).
    """
    start, stop = chunk_bounds(chunk, n_chunks, x.size)
    return x[start:stop]


def set_num_threads(threads: int) -> None:
    """Run the parallel kernels on ``threads`` threads (PyTorch's ``torch.set_num_threads``).

    Results are bitwise the same for any thread count.

    Examples
    --------
    >>> previous = get_num_threads()
    >>> set_num_threads(1); get_num_threads()
    1
    >>> set_num_threads(previous)
    """
    available = available_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= available:
        raise ValueError(f"set_num_threads: threads must be an int in [1, {available}], got "
                         f"{threads!r}")
    numba.set_num_threads(threads)


def available_threads() -> int:
    """How many threads numba may use (its ``NUMBA_NUM_THREADS``)."""
    return config.NUMBA_NUM_THREADS


def get_num_threads() -> int:
    """The number of threads the parallel kernels run on."""
    return numba.get_num_threads()
