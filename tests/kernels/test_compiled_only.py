"""``@compiled_only``: callable from jitted code, a clear error (not a crash) from Python."""

import numpy as np
import pytest
from numba import config, njit

from tinyattn.kernels.compiled_only import compiled_only

pytestmark = pytest.mark.skipif(config.DISABLE_JIT, reason="nothing is compiled")


@compiled_only(fastmath={"contract"})
def _scaled(x, factor):
    return x * factor


@njit(cache=True)
def _call_scaled(x):
    return _scaled(x, 3.0)


def test_jitted_code_calls_it_and_python_gets_a_type_error_naming_it():
    np.testing.assert_array_equal(_call_scaled(np.arange(4.0)), [0.0, 3.0, 6.0, 9.0])
    with pytest.raises(TypeError, match="test_compiled_only._scaled is compiled without a "
                                        "Python entry point"):
        _scaled(np.arange(4.0), 3.0)
