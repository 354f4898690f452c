"""What tinyattn.kernels.cpu reports: vector width, registers and cache sizes of numba's target."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import llvmlite.binding as llvm
import pytest
from printed import number

from tinyattn.kernels import cpu

ROOT = Path(__file__).resolve().parents[2]
X86 = platform.machine().lower() in ("x86_64", "amd64")
x86_only = pytest.mark.skipif(not X86, reason="LLVM x86 CPU names")


def _child_vector_unit(env: dict[str, str]) -> dict:
    """``vector_unit()`` in a fresh interpreter whose numba reads ``env``."""
    script = (
        "import json; from tinyattn.kernels.cpu import vector_unit; u = vector_unit(); "
        "print(json.dumps({'name': u.cpu_name, 'bytes': u.vector_bytes, "
        "'registers': u.registers, 'features': sorted(u.features)}))"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU")}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**clean, **env, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@x86_only
@pytest.mark.parametrize("cpu_name, vector_bytes", [
    ("generic", 16),  # x86-64 baseline: SSE2, 128-bit xmm
    ("nehalem", 16),  # SSE4.2, no AVX
    ("haswell", 32),  # AVX2: 256-bit ymm
    ("skylake-avx512", 64),  # AVX-512: 512-bit zmm
])
def test_llvm_is_asked_how_wide_a_register_each_cpu_has(cpu_name, vector_bytes):
    """Widths from the vendors' ISA documentation for each CPU generation."""
    triple = llvm.get_default_triple()
    assert cpu._emitted_vector_bytes(triple, cpu_name, "") == vector_bytes


@x86_only
def test_disabling_avx512_in_the_features_narrows_the_vectors():
    triple = llvm.get_default_triple()
    assert cpu._emitted_vector_bytes(triple, "skylake-avx512", "-avx512f") == 32


def test_a_non_x86_target_gets_the_narrow_default():
    assert cpu._emitted_vector_bytes("aarch64-unknown-linux-gnu", "generic", "") == 16


@pytest.mark.skipif(not (X86 and Path("/proc/cpuinfo").exists()), reason="Linux x86 cpuinfo")
def test_host_unit_matches_the_kernel_cpu_flags():
    """Without NUMBA_CPU_* overrides numba targets the host: width from /proc/cpuinfo's flags."""
    if os.environ.get("NUMBA_CPU_NAME") or os.environ.get("NUMBA_CPU_FEATURES"):
        pytest.skip("numba is told to target another CPU")
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    expected = 64 if "avx512f" in flags else 32 if "avx" in flags else 16
    unit = cpu.vector_unit()
    assert unit.vector_bytes == expected
    assert unit.registers == (32 if expected == 64 else 16)
    assert unit.lanes(4) == expected // 4 and unit.lanes(8) == expected // 8
    assert ("avx512f" in unit.features) == ("avx512f" in flags)
    assert unit.cpu_name in unit.describe()
    assert number(re.search(r"(\S+)-bit vectors", unit.describe()).group(1)) == 8 * expected


@x86_only
def test_numba_cpu_name_generic_gives_sse_vectors():
    unit = _child_vector_unit({"NUMBA_CPU_NAME": "generic"})
    assert unit == {"name": "generic", "bytes": 16, "registers": 16, "features": []}


@x86_only
def test_numba_cpu_features_are_what_the_unit_reports():
    features = "+sse,+sse2,+sse3,+ssse3,+sse4.1,+sse4.2,+avx,+avx2,+fma"
    unit = _child_vector_unit({"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": features})
    assert (unit["bytes"], unit["registers"]) == (32, 16)
    assert {"avx", "avx2", "fma"} <= set(unit["features"])
    assert not any(f.startswith("avx512") for f in unit["features"])


@x86_only
def test_a_named_cpu_without_features_keeps_the_host_features_as_numba_does():
    """numba passes the host's feature string along with NUMBA_CPU_NAME unless it is
    ``generic``: the vector unit must follow, not guess from the name."""
    if os.environ.get("NUMBA_CPU_NAME") or os.environ.get("NUMBA_CPU_FEATURES"):
        pytest.skip("numba is told to target another CPU")
    unit = _child_vector_unit({"NUMBA_CPU_NAME": "haswell"})
    host = cpu.vector_unit()
    assert unit["name"] == "haswell"
    assert (unit["bytes"], unit["registers"]) == (host.vector_bytes, host.registers)


@pytest.mark.parametrize("text, size", [("32K", 32768), ("1024K\n", 1 << 20), ("2M", 2 << 20),
                                        ("512", 512)])
def test_sysfs_sizes_are_parsed(text, size):
    assert cpu._size_in_bytes(text) == size


def _fake_cache(root: Path, index: int, level: int, kind: str, size: str) -> None:
    entry = root / f"index{index}"
    entry.mkdir(parents=True)
    (entry / "level").write_text(f"{level}\n")
    (entry / "type").write_text(f"{kind}\n")
    (entry / "size").write_text(f"{size}\n")


def test_data_caches_read_level_1_data_and_level_2(tmp_path, monkeypatch):
    _fake_cache(tmp_path, 0, 1, "Data", "48K")
    _fake_cache(tmp_path, 1, 1, "Instruction", "32K")
    _fake_cache(tmp_path, 2, 2, "Unified", "2048K")
    _fake_cache(tmp_path, 3, 3, "Unified", "32768K")
    monkeypatch.setattr(cpu, "_SYSFS_CACHES", tmp_path)
    cpu.data_caches.cache_clear()
    try:
        assert cpu.data_caches() == cpu.DataCaches(l1=48 * 1024, l2=2048 * 1024)
    finally:
        cpu.data_caches.cache_clear()


def test_data_caches_fall_back_when_the_os_does_not_say(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu, "_SYSFS_CACHES", tmp_path / "missing")
    cpu.data_caches.cache_clear()
    try:
        assert cpu.data_caches() == cpu._DEFAULT_CACHES
    finally:
        cpu.data_caches.cache_clear()


@pytest.mark.skipif(shutil.which("getconf") is None, reason="needs getconf")
def test_data_caches_agree_with_getconf():
    """glibc's getconf reads the sizes from CPUID; sysfs from the kernel. Either may be 0."""
    def getconf(name: str) -> int:
        result = subprocess.run(["getconf", name], capture_output=True, text=True, check=False)
        try:
            return int(result.stdout.strip())
        except ValueError:
            return 0

    caches = cpu.data_caches()
    l1, l2 = getconf("LEVEL1_DCACHE_SIZE"), getconf("LEVEL2_CACHE_SIZE")
    if l1 <= 0 or l2 <= 0 or not cpu._SYSFS_CACHES.exists():
        pytest.skip("the OS does not report cache sizes here")
    assert (caches.l1, caches.l2) == (l1, l2)
