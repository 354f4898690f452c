"""The files of :mod:`tinyattn.kernels.machine_cache`: one per purpose and target, read back only
when whole, and never left half-written."""

from __future__ import annotations

import hashlib
import os

import pytest

from tinyattn.kernels import machine_cache

TARGET = ("x86_64-unknown-linux-gnu", "znver4", "+avx512f,+fma")


class _Directory:
    """A stand-in for numba's cache locator, pointing at one directory."""

    def __init__(self, path):
        self.path = path

    def get_cache_path(self):
        return str(self.path)

    def ensure_cache_path(self):
        os.makedirs(self.path, exist_ok=True)


@pytest.fixture
def directory(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setattr(machine_cache, "_locator", lambda: _Directory(path))
    return path


def test_what_is_written_is_read_back_for_its_name_and_target_only(directory):
    machine_cache.write("runtime", TARGET, b"\x00machine code\xff")
    assert machine_cache.read("runtime", TARGET) == b"\x00machine code\xff"
    assert machine_cache.read("vector-bytes", TARGET) is None  # another purpose
    for other in (("x86_64-unknown-linux-gnu", "skylake-avx512", "+avx512f,+fma"),  # CPU
                  ("x86_64-unknown-linux-gnu", "znver4", "+avx2,+fma")):  # features
        assert machine_cache.read("runtime", other) is None
    assert [p.name for p in directory.iterdir()] == [machine_cache.path("runtime", TARGET).name]


def test_the_file_starts_with_the_sha256_of_its_data(directory):
    machine_cache.write("runtime", TARGET, b"abc")
    blob = machine_cache.path("runtime", TARGET).read_bytes()
    assert blob == hashlib.sha256(b"abc").digest() + b"abc"


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "empty"])
def test_a_damaged_file_reads_as_missing(directory, damage):
    machine_cache.write("runtime", TARGET, b"0123456789" * 10)
    file = machine_cache.path("runtime", TARGET)
    blob = bytearray(file.read_bytes())
    if damage == "flipped byte":
        blob[40] ^= 1
    elif damage == "truncated":
        del blob[-5:]
    else:
        blob.clear()
    file.write_bytes(bytes(blob))
    assert machine_cache.read("runtime", TARGET) is None


def test_an_unwritable_directory_is_not_an_error(tmp_path, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(machine_cache, "_locator", lambda: _Directory(blocker / "cache"))
    machine_cache.write("runtime", TARGET, b"data")  # must not raise
    assert machine_cache.read("runtime", TARGET) is None


def test_rewriting_replaces_the_file_and_leaves_no_temporary(directory):
    machine_cache.write("vector-bytes", TARGET, b"32")
    machine_cache.write("vector-bytes", TARGET, b"64")
    assert machine_cache.read("vector-bytes", TARGET) == b"64"
    assert len(list(directory.iterdir())) == 1


def test_the_directory_is_the_one_numba_caches_the_kernels_in(tmp_path):
    """With ``NUMBA_CACHE_DIR`` set, the files go under it, as numba's own cache files do."""
    import subprocess
    import sys

    code = ("from tinyattn.kernels import machine_cache; "
            "print(machine_cache.path('runtime', ('t', 'c', 'f')))")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    printed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
    assert printed.startswith(str(tmp_path) + os.sep)


def test_without_a_cache_directory_nothing_is_read_or_written(monkeypatch):
    monkeypatch.setattr(machine_cache, "_locator", lambda: None)
    machine_cache.write("runtime", TARGET, b"data")  # must not raise
    assert machine_cache.path("runtime", TARGET) is None
    assert machine_cache.read("runtime", TARGET) is None
