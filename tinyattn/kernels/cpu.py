"""The vector unit numba compiles for: how wide a SIMD register is and how many there are.

Kernels that block their loops for registers (the matmul micro-tile, the attention block
products) size their tiles from :func:`vector_unit`, never from one machine's constants. The
answer follows numba's own target: the host CPU that LLVM reports, unless ``NUMBA_CPU_NAME``
/ ``NUMBA_CPU_FEATURES`` name another one (as they do for portable caches).

=================  =============  =========
features           vector bytes   registers
=================  =============  =========
avx512f            64             32
avx / avx2         32             16
(otherwise)        16             16
=================  =============  =========
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import llvmlite.binding as llvm
from numba.core import config


@dataclass(frozen=True)
class VectorUnit:
    """What numba targets on this machine.

    Attributes
    ----------
    cpu_name : str
        LLVM's name for the target CPU (``znver4``, ``skylake-avx512``, ``generic``, ...).
    features : frozenset of str
        The enabled vector extensions among sse*, avx*, fma.
    vector_bytes : int
        Width of one SIMD register (16, 32 or 64).
    registers : int
        Number of SIMD registers (16, or 32 with AVX-512).
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
        return (f"{self.cpu_name}: {8 * self.vector_bytes}-bit vectors, {self.registers} "
                f"registers ({extensions or 'sse only'})")


def _features(cpu_name: str) -> frozenset[str]:
    """The enabled features of numba's target: ``NUMBA_CPU_FEATURES`` when set, else the host's."""
    if config.CPU_FEATURES:
        enabled = (f[1:] for f in config.CPU_FEATURES.split(",") if f.startswith("+"))
    elif config.CPU_NAME and config.CPU_NAME != "host":
        enabled = iter(())  # a named CPU without features: assume only its baseline
    else:
        enabled = (name for name, on in llvm.get_host_cpu_features().items() if on)
    wanted = ("sse", "avx", "fma")
    return frozenset(f for f in enabled if f.startswith(wanted))


@functools.cache
def vector_unit() -> VectorUnit:
    """The SIMD width and register count of numba's target CPU (computed once).

    Examples
    --------
    >>> unit = vector_unit()
    >>> unit.vector_bytes in (16, 32, 64) and unit.registers in (16, 32)
    True
    """
    name = config.CPU_NAME if config.CPU_NAME and config.CPU_NAME != "host" else \
        llvm.get_host_cpu_name()
    features = _features(name)
    if "avx512f" in features:
        return VectorUnit(name, features, 64, 32)
    if "avx" in features or "avx2" in features:
        return VectorUnit(name, features, 32, 16)
    return VectorUnit(name, features, 16, 16)
