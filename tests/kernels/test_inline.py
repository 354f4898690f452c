"""always_inline: LLVM inlines the helper into its callers, whose loops then vectorise."""

import numpy as np
import pytest
from numba import config, njit

from tinyattn.kernels.inline import always_inline

pytestmark = pytest.mark.skipif(config.DISABLE_JIT, reason="inlining needs compiled code")

# A helper too long for LLVM's inlining cost model: 150 dependent multiply-adds.
_STEPS = 150
_SOURCE = "def {name}(x):\n{first}    y = x\n" + "".join(
    f"    y = y * {1.0 + k / 1000.0!r} + x * {k / 997.0!r}\n" for k in range(_STEPS)
) + "    return y\n"


def _helper(name: str, inline: bool):
    scope = {"always_inline": always_inline}
    exec(_SOURCE.format(name=name, first="    always_inline()\n" if inline else ""), scope)
    return njit(fastmath={"contract"})(scope[name])


_inlined_helper = _helper("inlined_helper", True)
_plain_helper = _helper("plain_helper", False)


@njit(fastmath={"contract"})
def _apply_inlined(x, out):
    for i in range(x.size):
        out[i] = _inlined_helper(x[i])


@njit(fastmath={"contract"})
def _apply_plain(x, out):
    for i in range(x.size):
        out[i] = _plain_helper(x[i])


def _body(dispatcher) -> str:
    """The optimised LLVM IR of the jitted function itself (not its wrappers)."""
    signature = dispatcher.signatures[0]
    ir = dispatcher.inspect_llvm(signature)
    name = dispatcher.overloads[signature].fndesc.llvm_func_name
    start = ir.index("{", ir.index(name + '"(') if name + '"(' in ir else ir.index(name + "("))
    return ir[start:ir.index("\n}\n", start)]


def _name(dispatcher) -> str:
    return dispatcher.overloads[dispatcher.signatures[0]].fndesc.llvm_func_name


def test_the_helper_is_inlined_and_the_loop_vectorised_with_the_same_results():
    x = np.linspace(-1.0, 1.0, 1001)
    inlined, plain = np.empty_like(x), np.empty_like(x)
    _apply_inlined(x, inlined)
    _apply_plain(x, plain)
    np.testing.assert_array_equal(inlined, plain)
    expected = x.copy()
    for k in range(_STEPS):
        expected = expected * (1.0 + k / 1000.0) + x * (k / 997.0)
    np.testing.assert_allclose(inlined, expected, rtol=1e-12)
    inlined_body, plain_body = _body(_apply_inlined), _body(_apply_plain)
    assert _name(_inlined_helper) not in inlined_body and "x double>" in inlined_body
    # without the attribute LLVM keeps a helper this long as a call per element
    assert _name(_plain_helper) in plain_body and "x double>" not in plain_body
