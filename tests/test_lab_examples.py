"""The lab's example scripts run to the end and print their checks."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser_env import require_browser
from printed import printed_row

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "examples" / "lab"

# the memory ledger example's layer: B=2, H=4, T=64, float32 and causal; the composed path saves
# the (B, H, T, T) weights once and the (T, T) boolean causal mask, the fused path nothing T²
B, H, T = 2, 4, 64
COMPOSED_T2_BYTES = B * H * T * T * 4 + T * T

# script -> (arguments, lines that must appear in its output, the numbers printed after a label
# (every number on the line that starts with it))
EXPECTED = {
    "memory_ledger_side_by_side.py": ([], [
        "the composed path keeps the (B, H, T, T) weights; the fused path keeps out and lse"],
        {"bytes growing with T²": [COMPOSED_T2_BYTES, 0]}),
    "gradient_lab.py": (["--steps", "3"], [
        "every backward agrees with finite differences",
        "layer 0's fused attention sends dQ₀ = s · dS · K₀", "== saturation per head"],
        {"largest |dS| or |P| above the diagonal:": [0.0]}),
    # the README's screenshot of the explorer, here written to the test's folder
    "view_screenshot.py": (["--out", "shot.png"], ["wrote shot.png", "selected #3 Softmax"], {}),
}
NEEDS_BROWSER = {"view_screenshot.py"}


def test_every_lab_example_is_covered():
    assert sorted(p.name for p in LAB.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_lab_example_runs_and_prints_its_checks(script, tmp_path):
    arguments, expected, numbers = EXPECTED[script]
    if script in NEEDS_BROWSER:
        require_browser()
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(LAB / script), *arguments], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    for line in expected:
        assert line in result.stdout, f"{script} did not print {line!r}"
    for label, values in numbers.items():
        # parsed and compared exactly: a printed 0.535 (or 0.0123) is not 0
        assert printed_row(result.stdout, label) == values, f"{script}: {label}"
