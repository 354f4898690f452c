"""The allocator settings that the training entry points turn on (``ta.memory``) stop a
repeated workload from re-faulting its large temporaries (measured in minor page faults, in
fresh processes); ``import tinyattn`` alone leaves the allocator alone."""

import json
import os
import subprocess
import sys

import pytest

WORKLOAD = """
import json, resource, sys
import tinyattn as ta
import numpy as np
if sys.argv[1] == "keep":
    ta.memory.keep_freed_memory_unless_disabled()
x = np.ones((256, 1024), dtype=np.float32)   # 1 MiB: above glibc's default mmap threshold
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    y = x * 2.0                              # a fresh 1 MiB temporary, freed each iteration
    z = y + 1.0
    del y, z
print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before))
"""


def _faults(call: str, keep: str = "1") -> int:
    env = {**os.environ, "TINYATTN_KEEP_FREED_MEMORY": keep}
    out = subprocess.run([sys.executable, "-c", WORKLOAD, call], capture_output=True,
                         text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc allocator settings")
def test_freed_temporaries_are_reused_instead_of_refaulted():
    untouched = _faults("import only")
    kept = _faults("keep")
    # 50 iterations x 2 temporaries x 256 pages each would fault ~25,600 times without reuse
    assert untouched > 10_000
    assert kept < untouched / 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc allocator settings")
def test_the_environment_variable_keeps_the_entry_points_from_tuning_the_allocator():
    assert _faults("keep", keep="0") > 10_000
