"""The lab's example scripts run to the end and print their checks."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "examples" / "lab"

# script -> (arguments, lines that must appear in its output)
EXPECTED = {
    "memory_ledger_side_by_side.py": ([], [
        "bytes growing with T²                  135,168                     0",
        "the composed path keeps the (B, H, T, T) weights; the fused path keeps out and lse"]),
    "gradient_lab.py": (["--steps", "3"], [
        "every backward agrees with finite differences",
        "layer 0's fused attention sends dQ₀ = s · dS · K₀",
        "largest |dS| or |P| above the diagonal: 0", "== saturation per head"]),
}


def test_every_lab_example_is_covered():
    assert sorted(p.name for p in LAB.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_lab_example_runs_and_prints_its_checks(script, tmp_path):
    arguments, expected = EXPECTED[script]
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(LAB / script), *arguments], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    for line in expected:
        assert line in result.stdout, f"{script} did not print {line!r}"
