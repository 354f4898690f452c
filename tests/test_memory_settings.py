"""The allocator settings applied by ``import tinyattn`` stop a repeated workload from
re-faulting its large temporaries (measured in minor page faults, in fresh processes)."""

import json
import os
import subprocess
import sys

import pytest

WORKLOAD = """
import json, resource
import tinyattn as ta
import numpy as np
x = np.ones((256, 1024), dtype=np.float32)   # 1 MiB: above glibc's default mmap threshold
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    y = x * 2.0                              # a fresh 1 MiB temporary, freed each iteration
    z = y + 1.0
    del y, z
print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before))
"""


def _faults(keep: str) -> int:
    env = {**os.environ, "TINYATTN_KEEP_FREED_MEMORY": keep}
    out = subprocess.run([sys.executable, "-c", WORKLOAD], capture_output=True, text=True,
                         check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc allocator settings")
def test_freed_temporaries_are_reused_instead_of_refaulted():
    untouched = _faults("0")
    kept = _faults("1")
    # 50 iterations x 2 temporaries x 256 pages each would fault ~25,600 times without reuse
    assert untouched > 10_000
    assert kept < untouched / 20
