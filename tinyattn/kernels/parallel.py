"""Parallel kernels: independent tasks run by one shared loop, serially or on numba's threads.

A kernel is a *task function*: a jitted function of the kernel's arguments and a task index
(a row, a chunk of elements, a block of the output), where no two tasks write the same output.
:func:`run_tasks` runs ``task(*args, index)`` for every index, on the calling thread or shared
among numba's threads; both give bitwise the same result, and the serial path is for inputs too
small to be worth waking the thread pool.

How it is compiled. The loop over the tasks, a *driver*, is compiled once for every kernel:
:func:`_serial_driver` and :func:`_parallel_driver` (a ``prange`` loop). It calls a small
*adapter* by address with the address of the packed arguments and the task index; the adapter
unpacks them and calls the task function by address. The arguments are packed, on its own
stack frame, by the *launcher* :func:`_launch`, which Python calls; it is compiled once per list
of argument types, and the adapter for those types is a second function in its machine code
(:func:`_define_adapter`), not a function numba compiles on its own (which cost 0.015 s more
per kernel on the first run). A ``prange`` loop of its own per kernel would cost far more:
numba compiles it four times over (the loop, two gufunc wrappers, the function around them),
with the task linked into each — 0.2 to 0.6 s of compiling per kernel, against about 0.08 s for
a launcher.

How it is called. :func:`run_tasks` finds the launch of a kernel by a key of its argument
types (numba's own cheap fingerprints of them), kept from the first call. That first call goes
through numba's dispatcher, which compiles the launcher (or loads it from the cache); later
ones call the launcher's compiled entry point directly, since the key has already told which
one fits: the dispatcher would type the arguments a second time, about 1 µs of the 1.5 µs a
serial launch of a product's 15 arguments costs before its first task.

A task whose loop divides is compiled with numpy's error model (``error_model="numpy"``), as
numba compiles a ``prange`` body: Python's model checks every division for a zero divisor, and
the branch keeps the loop from vectorising (AdamW's update took 3× its time).

Numba runs ``prange`` loops on one of three threading layers, chosen when the first parallel
launch happens:

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
parallel launch (by :func:`run_tasks`, so the callers of the kernel wrappers need nothing), and
concurrent calls queue instead of aborting. With a thread-safe layer
:data:`kernel_section` is a no-op context manager.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import threading
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import prange
from numba import types as nbtypes
from numba._dispatcher import compute_fingerprint
from numba.core import cgutils, config
from numba.extending import NativeValue, intrinsic, models, register_model, unbox
from numba.np.ufunc import parallel as numba_parallel

from .compiled_only import compiled_only
from .jit import jit

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


class TaskLaunch(nbtypes.Type):
    """numba type of a :class:`_Launch` (how to run a task function: the addresses of the task
    and of the driver that loops over the tasks), parameterised by the types ``argtypes`` of
    the task's arguments (those before the task index)."""

    def __init__(self, argtypes: tuple):
        self.argtypes = tuple(argtypes)
        super().__init__(name=f"TaskLaunch{self.argtypes}")


@register_model(TaskLaunch)
class _TaskLaunchModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [(name, nbtypes.int64) for name in ("task", "driver")]
        super().__init__(dmm, fe_type, members)


class _Launch:
    """The two machine-code addresses :func:`run_tasks` needs (a ``TaskLaunch``), and the
    entry point of :func:`_launch` compiled for them once it is (``None`` before)."""

    __slots__ = ("task", "driver", "_numba_type_", "entry")

    def __init__(self, task: int, driver: int, argtypes: tuple):
        self.task, self.driver = task, driver
        self._numba_type_ = TaskLaunch(argtypes)  # read by numba.typeof, its quickest path
        self.entry: Any = None


@unbox(TaskLaunch)
def _unbox_launch(typ, obj, c):
    launch = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    for name in ("task", "driver"):
        address_object = c.pyapi.object_getattr_string(obj, name)
        setattr(launch, name, c.pyapi.long_as_longlong(address_object))
        c.pyapi.decref(address_object)
    return NativeValue(launch._getvalue(), is_error=c.pyapi.c_api_error())


def _call_address(context, builder, address, argtypes, values) -> None:
    """Call the compiled function at ``address`` (an LLVM ``i64``) with ``values`` of numba
    types ``argtypes``; an error it returns (an exception raised in it) is passed on."""
    function = context.call_conv.get_function_type(nbtypes.none, argtypes)
    pointer = builder.inttoptr(address, function.as_pointer())
    status, _ = context.call_conv.call_function(builder, pointer, nbtypes.none, argtypes,
                                                values)
    with cgutils.if_unlikely(builder, status.is_error):
        context.call_conv.return_status_propagate(builder, status)


def _packed_struct(context, argtypes: tuple) -> ir.LiteralStructType:
    """LLVM type of packed arguments: the task's address, then each argument's value."""
    return ir.LiteralStructType([ir.IntType(64)]
                                + [context.get_value_type(t) for t in argtypes])


@intrinsic
def _call_adapter(typingctx, adapter, packed, index):
    signature = nbtypes.none(nbtypes.int64, nbtypes.int64, nbtypes.int64)

    def codegen(context, builder, sig, llargs):
        _call_address(context, builder, llargs[0], (nbtypes.int64, nbtypes.int64), llargs[1:])
        return context.get_dummy_value()

    return signature, codegen


@compiled_only(parallel=True)
def _parallel_driver(adapter, packed, n_tasks):
    """Every task ``0 <= index < n_tasks`` of ``packed``, shared among numba's threads."""
    for index in prange(n_tasks):
        _call_adapter(adapter, packed, np.int64(index))


@compiled_only
def _serial_driver(adapter, packed, n_tasks):
    """Every task ``0 <= index < n_tasks`` of ``packed``, in order, on the calling thread."""
    for index in range(n_tasks):
        _call_adapter(adapter, packed, index)


def _define_adapter(context, module: ir.Module, argtypes: tuple) -> ir.Function:
    """The adapter for ``argtypes``, defined in ``module``: a function of numba's calling
    convention, ``(packed, index)`` as two ``int64``, that calls the task function whose
    address heads the packed arguments (:func:`_packed_struct`) with them and ``index``."""
    int64s = (nbtypes.int64, nbtypes.int64)
    adapter = ir.Function(module, context.call_conv.get_function_type(nbtypes.none, int64s),
                          module.get_unique_name("task_adapter"))
    adapter.linkage = "internal"
    builder = ir.IRBuilder(adapter.append_basic_block())
    packed, index = context.call_conv.decode_arguments(builder, int64s, adapter)
    struct = _packed_struct(context, argtypes)
    pointer = builder.inttoptr(packed, struct.as_pointer())
    fields = [builder.load(cgutils.gep_inbounds(builder, pointer, 0, i))
              for i in range(len(struct.elements))]
    _call_address(context, builder, fields[0], (*argtypes, nbtypes.int64), [*fields[1:], index])
    none = context.get_return_value(builder, nbtypes.none, context.get_dummy_value())
    context.call_conv.return_value(builder, none)
    return adapter


@intrinsic
def _pack_and_drive(typingctx, launch, n_tasks, *args):
    if not isinstance(launch, TaskLaunch) or tuple(args) != launch.argtypes:
        return None  # a typing error at compile time: the arguments do not fit the task
    signature = nbtypes.none(launch, nbtypes.int64, nbtypes.StarArgTuple.from_types(args))

    def codegen(context, builder, sig, llargs):
        addresses = cgutils.create_struct_proxy(launch)(context, builder, value=llargs[0])
        struct = _packed_struct(context, launch.argtypes)
        slot = cgutils.alloca_once(builder, struct)
        values = [addresses.task, *cgutils.unpack_tuple(builder, llargs[2], len(args))]
        for i, value in enumerate(values):
            builder.store(value, cgutils.gep_inbounds(builder, slot, 0, i))
        packed = builder.ptrtoint(slot, ir.IntType(64))
        adapter = _define_adapter(context, builder.module, launch.argtypes)
        _call_address(context, builder, addresses.driver, (nbtypes.int64,) * 3,
                      [builder.ptrtoint(adapter, ir.IntType(64)), packed, llargs[1]])
        return context.get_dummy_value()

    return signature, codegen


@jit(no_cfunc_wrapper=True)  # called from Python
def _launch(launch, n_tasks, *args):
    """Pack ``args`` on this stack frame and run the driver over them (see :func:`run_tasks`)."""
    _pack_and_drive(launch, n_tasks, *args)


def _address(dispatcher: Any, argtypes: tuple) -> int:
    """Address of ``dispatcher``'s machine code for ``argtypes`` (compiled, or loaded from
    numba's cache, on the first call)."""
    dispatcher.compile(argtypes)
    result = dispatcher.overloads[argtypes]
    return result.library.get_pointer_to_function(result.fndesc.llvm_func_name)


_DRIVER_TYPES = (nbtypes.int64,) * 3
_launches: dict = {}


def _launch_for(task: Any, args: tuple, parallel: bool) -> _Launch:
    """The :class:`_Launch` of ``task`` for the types of ``args`` (made on the first call)."""
    key = (task, parallel, *map(compute_fingerprint, args))  # numba's cheap key of a type
    launch = _launches.get(key)
    if launch is None:
        argtypes = tuple(map(numba.typeof, args))
        task_address = _address(task, (*argtypes, nbtypes.int64))
        driver = _address(_parallel_driver if parallel else _serial_driver, _DRIVER_TYPES)
        launch = _launches[key] = _Launch(task_address, driver, argtypes)
    return launch


def compile_drivers() -> None:
    """Compile (or load from numba's cache) both drivers of :func:`run_tasks`: each serves
    every kernel, and which one a kernel takes depends on the size of its input."""
    for driver in (_serial_driver, _parallel_driver):
        _address(driver, _DRIVER_TYPES)


def run_tasks(task: Any, n_tasks: int, *args: Any, parallel: bool) -> None:
    """Call the jitted *task function* ``task(*args, index)`` for every ``index`` in
    ``range(n_tasks)``: shared among numba's threads when ``parallel``, else in order on the
    calling thread. Tasks must be independent (write disjoint outputs), so both give bitwise
    the same result.

    ``task`` is compiled once for the types of ``args`` (and an ``int64`` index) and called by
    address from the driver shared by every kernel (see the module docstring)::

        @compiled_only  # a task function: only compiled code calls it
        def _double_row(x, out, row):
            out[row] = 2 * x[row]

        run_tasks(_double_row, x.shape[0], x, out, parallel=x.size >= 32768)

    A parallel launch holds :data:`kernel_section` when it is a lock. Arguments that do not
    fit the task are a typing error when it compiles; an error raised in a task reaches the
    caller (numba reports one raised on a worker thread as a ``SystemError``).
    """
    if config.DISABLE_JIT:
        for index in range(n_tasks):
            task(*args, index)
        return
    launch = _launch_for(task, args, parallel)
    entry = launch.entry
    if entry is None:  # the first launch: through numba's dispatcher, which compiles it
        with kernel_section if parallel else _NO_SECTION:
            _launch(launch, n_tasks, *args)
        launch.entry = _entry_point(launch)
    elif not (parallel and kernel_section.locked):
        entry(launch, n_tasks, args)
    else:
        with kernel_section:
            entry(launch, n_tasks, args)


_NO_SECTION = contextlib.nullcontext()


def _entry_point(launch: _Launch) -> Any:
    """The Python entry point of :func:`_launch`'s machine code for ``launch``: called with
    ``(launch, n_tasks, args)``, it skips the dispatcher's typing of the arguments (about 1 µs
    of the 1.5 µs a serial launch of a product's 15 arguments costs before its first task),
    which :func:`_launch_for` has already done in the key it found ``launch`` by."""
    for signature, compiled in _launch.overloads.items():
        if signature[0] == launch._numba_type_:  # its type names the argument types
            return compiled.entry_point
    raise AssertionError(f"no machine code of _launch for {launch._numba_type_}")


#: Elements per chunk when an elementwise kernel runs in parallel (64 KiB of float32).
ELEMENTS_PER_CHUNK = 16384


def element_chunks(size: int, parallel: bool) -> int:
    """How many chunks an elementwise kernel splits ``size`` elements into: one when it runs
    serially (one pass, no per-chunk overhead), else the same number for each of numba's
    threads (:func:`available_threads`: :func:`set_num_threads` may run fewer, which only
    shares the chunks less evenly), each of at most :data:`ELEMENTS_PER_CHUNK` elements (and at
    most one chunk per element).

    Examples
    --------
    >>> element_chunks(100_000, parallel=False)
    1
    >>> element_chunks(100_000, parallel=True) % available_threads()
    0
    """
    if not parallel:
        return 1
    threads = available_threads()
    per_thread = -(-size // (threads * ELEMENTS_PER_CHUNK))
    return max(1, min(size, threads * per_thread))


def row_chunks(n_rows: int, parallel: bool) -> int:
    """How many chunks of whole rows a kernel over independent rows splits ``n_rows`` into:
    one per thread of numba's (:func:`available_threads`; at most one per row) when it runs in
    parallel, else one.

    Examples
    --------
    >>> row_chunks(1000, parallel=False), row_chunks(1, parallel=True)
    (1, 1)
    >>> row_chunks(1000, parallel=True) == available_threads()
    True
    """
    return max(1, min(n_rows, available_threads())) if parallel else 1


@jit(inline="always")
def chunk_bounds(chunk, n_chunks, size):
    """``(start, stop)`` of chunk ``chunk`` when ``range(size)`` is cut into ``n_chunks``
    near-equal chunks."""
    return chunk * size // n_chunks, (chunk + 1) * size // n_chunks


@jit(inline="always")
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
    """The number of threads the parallel kernels run on (numba's ``get_num_threads``, which
    takes two locks on every call, 0.7 µs; once its threads run, their count is one C call,
    0.1 µs)."""
    if numba_parallel._is_initialized:
        return numba_parallel._get_num_threads()
    return numba.get_num_threads()
