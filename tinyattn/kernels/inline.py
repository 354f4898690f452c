"""``always_inline()``: have LLVM, not numba, inline a small jitted helper into its callers.

numba's own ``@njit(inline="always")`` inlines at the level of numba's IR: the helper's body is
typed and lowered again at every call site, and a helper that calls such helpers multiplies
that work. GELU's exact forms, whose erfc polynomial sits three helpers deep, took 2.9 s of
compiling (CPU, float32 forward and backward) that way, almost all of it in numba's front end.

A helper that calls :func:`always_inline` first thing is an ordinary ``@njit`` function,
typed and compiled once per signature, that carries LLVM's ``alwaysinline`` attribute. When a
caller is compiled, numba links the helper's code into the caller's module and LLVM's
optimiser inlines it there, before it vectorises the caller's loops. For GELU: 1.3 s of
compiling instead of 2.9 s, the same time per call and the same bits. (Without the attribute,
LLVM's cost model keeps these helpers as calls: GELU's loops then stay scalar, 14 times
slower.)

One difference with numba's inlining: the inlined code keeps the helper's own ``fastmath``
flags, where numba's takes the caller's. A helper must therefore declare the flags its callers
compile with (GELU's helpers, like its loops, ``fastmath={"contract"}``), or its multiply-adds
are no longer fused and the results change in the last bit.

With ``NUMBA_DISABLE_JIT=1`` it does nothing.
"""

from __future__ import annotations

from numba import config, types
from numba.extending import intrinsic


@intrinsic
def _always_inline_compiled(typingctx):
    """Give the calling jitted function LLVM's ``alwaysinline`` attribute."""

    def codegen(context, builder, signature, args):
        builder.function.attributes.add("alwaysinline")
        return context.get_dummy_value()

    return types.none(), codegen


def _always_inline_python() -> None:
    """Nothing to inline when nothing is compiled (``NUMBA_DISABLE_JIT=1``)."""


# the intrinsic only exists in compiled code
always_inline = _always_inline_python if config.DISABLE_JIT else _always_inline_compiled
