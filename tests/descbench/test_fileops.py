"""descbench.fileops: the one atomic-write / sha256 module."""

from __future__ import annotations

import hashlib
import os
import stat

import numpy as np
import pytest

from descbench.fileops import atomic_path, bytes_sha256, file_sha256, write_bytes_atomic, write_text_atomic


def test_atomic_write_replaces_whole_file_with_mode_644(tmp_path):
    p = tmp_path / "sub" / "f.txt"
    write_text_atomic(p, "one")
    write_bytes_atomic(p, b"two")
    assert p.read_bytes() == b"two"
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert os.listdir(p.parent) == ["f.txt"]  # no temporary left


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, exc):
    p = tmp_path / "f.txt"
    p.write_text("old")
    with pytest.raises(exc):
        with atomic_path(p) as tmp:
            assert tmp.parent == p.parent and tmp.name.startswith(".f.txt.") and tmp.name.endswith(".tmp")
            tmp.write_text("half")
            raise exc()
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_two_writers_of_one_path_get_different_temporaries(tmp_path):
    p = tmp_path / "f"
    with atomic_path(p) as a, atomic_path(p) as b:
        assert a != b
        a.write_text("a")
        b.write_text("b")
    assert p.read_text() == "a"  # the outer context ends last and wins


def test_file_sha256_equals_hashlib_across_chunks(tmp_path):
    data = np.random.default_rng(0).bytes(3000)
    p = tmp_path / "d"
    p.write_bytes(data)
    assert file_sha256(p, chunk_bytes=7) == file_sha256(p) == hashlib.sha256(data).hexdigest() == bytes_sha256(data)

