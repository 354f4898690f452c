"""The CPU numba compiles for: vector width, vector register count and data cache sizes.

Kernels that block their loops for registers (the matmul micro-tile, the attention block
products) size their tiles from :func:`vector_unit`, never from one machine's constants, and
kernels that block for caches size their blocks from :func:`data_caches`.

:func:`vector_unit` answers for numba's own target: the CPU name and feature string numba
hands LLVM (the host, unless ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` name another; note
that numba keeps the host's features for a named CPU unless ``NUMBA_CPU_FEATURES`` is set,
and uses none but the CPU's own for ``generic``). Those are also what numba keys its on-disk
cache with, so a kernel whose code depends only on :func:`vector_unit` is never loaded from a
cache compiled for another vector unit. The width is not read off a feature list: LLVM is asked
to compile a 64-byte vector multiply-add for that target, and the registers its assembly uses
tell how wide a vector it keeps in one register (``zmm`` 64 bytes, ``ymm`` 32, ``xmm`` 16; a
target that splits 512-bit vectors into two 256-bit halves answers 32). The answer is saved per
target in numba's cache directory (:mod:`.machine_cache`) and read back by later processes.

=====================  =============  =========
LLVM emits             vector bytes   registers
=====================  =============  =========
zmm (AVX-512)          64             32
ymm (AVX, AVX2)        32             16
xmm (SSE), other ISA   16             16
=====================  =============  =========
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm

from . import machine_cache

# A multiply-add of two 64-byte vectors, stored: LLVM keeps it whole only if the target has
# 64-byte registers (and does not prefer to split them).
_PROBE_IR = """
define void @probe(<16 x float>* %a, <16 x float>* %b, <16 x float>* %c) {
  %x = load <16 x float>, <16 x float>* %a
  %y = load <16 x float>, <16 x float>* %b
  %z = load <16 x float>, <16 x float>* %c
  %p = fmul contract <16 x float> %x, %y
  %s = fadd contract <16 x float> %p, %z
  store <16 x float> %s, <16 x float>* %c
  ret void
}
"""
_X86_VECTOR_BYTES = {"zmm": 64, "ymm": 32, "xmm": 16}


@dataclass(frozen=True)
class VectorUnit:
    """What numba targets on this machine.

    Attributes
    ----------
    cpu_name : str
        LLVM's name for the target CPU (``znver4``, ``skylake-avx512``, ``generic``, ...).
    features : frozenset of str
        The vector extensions (sse*, avx*, fma) enabled in numba's feature string; empty when
        numba passes none and LLVM uses the CPU's defaults (``generic``).
    vector_bytes : int
        Width of the widest vector LLVM keeps in one register (16, 32 or 64).
    registers : int
        Number of vector registers (16, or 32 with AVX-512).
    """

    cpu_name: str
    features: frozenset[str]
    vector_bytes: int
    registers: int

    def lanes(self, itemsize: int) -> int:
        """How many values of ``itemsize`` bytes fit in one register."""
        return self.vector_bytes // itemsize

    def describe(self) -> str:
        """One line for benchmark tables: name, width, registers and extensions."""
        extensions = ", ".join(sorted(f for f in self.features if f.startswith(("avx", "fma"))))
        if not self.features:
            extensions = "the CPU's default extensions"
        return (f"{self.cpu_name}: {8 * self.vector_bytes}-bit vectors, {self.registers} "
                f"registers ({extensions or 'no AVX'})")


def _numba_target() -> tuple[str, str, str]:
    """``(triple, cpu name, feature string)`` exactly as numba's CPU codegen uses them."""
    from numba.core.registry import cpu_target

    return cpu_target.target_context.codegen().magic_tuple()


def _emitted_vector_bytes(triple: str, cpu_name: str, features: str) -> int:
    """Width of the registers LLVM uses for a 64-byte vector FMA on this target (16 if unknown)."""
    if not triple.startswith(("x86_64", "i386", "i686")):
        return 16
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(triple)
    machine = target.create_target_machine(cpu=cpu_name, features=features, opt=2)
    module = llvm.parse_assembly(_PROBE_IR)
    module.triple = triple
    assembly = machine.emit_assembly(module)
    used = set(re.findall(r"%([xyz]mm)\d+", assembly))
    return max((_X86_VECTOR_BYTES[name] for name in used), default=16)


def _saved_vector_bytes(target: tuple[str, str, str]) -> int:
    """:func:`_emitted_vector_bytes` for numba's ``target``, asked of LLVM once per target and
    machine and kept in numba's cache directory (:mod:`.machine_cache`): running LLVM's code
    generator maps in tens of MB of its library that a process loading cached kernels never
    needs otherwise."""
    saved = machine_cache.read("vector-bytes", target)
    if saved in (b"16", b"32", b"64"):
        return int(saved)
    vector_bytes = _emitted_vector_bytes(*target)
    machine_cache.write("vector-bytes", target, str(vector_bytes).encode())
    return vector_bytes


def _vector_extensions(features: str) -> frozenset[str]:
    enabled = (name[1:] for name in features.split(",") if name.startswith("+"))
    return frozenset(name for name in enabled if name.startswith(("sse", "avx", "fma")))


@functools.cache
def vector_unit() -> VectorUnit:
    """The SIMD width and register count of numba's target CPU (computed once).

    Examples
    --------
    >>> unit = vector_unit()
    >>> unit.vector_bytes in (16, 32, 64) and unit.registers in (16, 32)
    True
    """
    target = _numba_target()
    vector_bytes = _saved_vector_bytes(target)
    registers = 32 if vector_bytes == 64 else 16
    return VectorUnit(target[1], _vector_extensions(target[2]), vector_bytes, registers)


@dataclass(frozen=True)
class DataCaches:
    """Data cache sizes of one core, in bytes.

    Attributes
    ----------
    l1 : int
        Level-1 data cache.
    l2 : int
        Level-2 cache (unified).
    """

    l1: int
    l2: int


_DEFAULT_CACHES = DataCaches(l1=32 * 1024, l2=512 * 1024)  # used where the OS does not say
_SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def _size_in_bytes(text: str) -> int:
    """``'32K'`` → 32768 (sysfs cache size notation)."""
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


@functools.cache
def data_caches() -> DataCaches:
    """L1d and L2 size of one core, from Linux sysfs (32 KiB / 512 KiB where unavailable).

    Examples
    --------
    >>> caches = data_caches()
    >>> 4096 <= caches.l1 <= caches.l2
    True
    """
    sizes = {}
    try:
        for index in _SYSFS_CACHES.glob("index*"):
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            if kind in ("Data", "Unified") and level in (1, 2):
                sizes[level] = _size_in_bytes((index / "size").read_text())
    except (OSError, ValueError):
        return _DEFAULT_CACHES
    l1 = sizes.get(1, _DEFAULT_CACHES.l1)
    return DataCaches(l1=l1, l2=max(sizes.get(2, _DEFAULT_CACHES.l2), l1))
