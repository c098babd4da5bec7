"""descbench.keypoints.sidefile: a keypoint job's rows next to its keypoint file, read back by
source index and checked in x, y; a derived set's subset."""

from __future__ import annotations

import numpy as np
import pytest

from descbench.errors import DataError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sidefile import (lookup_rows, read_side_file, side_file_path, subset_side_file,
                                          write_side_file)


def kps(n: int, offset: float = 0.0) -> ImageKeypoints:
    f = np.arange(n, dtype=np.float32)
    return ImageKeypoints(f * 3 + offset, f * 2, np.ones(n, np.float32), np.zeros(n, np.float32), np.ones(n, np.float32),
                          np.zeros(n, np.int32), np.full(n, -1, np.int32), np.arange(n, dtype=np.int32) * 2)


def test_rows_read_back_in_their_dtype_by_source_index(tmp_path):
    a = kps(5)
    u8 = np.arange(5 * 4, dtype=np.uint8).reshape(5, 4)
    f64 = np.linspace(0, 1, 10).reshape(5, 2)
    path = side_file_path(tmp_path / "s.parquet", "x.npz")
    assert path.name == "s.x.npz"
    write_side_file(path, {1: (a, u8), 2: (a, f64)}, {"what": "test"})
    meta, arrays = read_side_file(path)
    assert meta == {"version": 1, "what": "test"}
    got = lookup_rows(arrays, 1, a.take(np.array([3, 0])), path)
    assert got.dtype == np.uint8 and np.array_equal(got, u8[[3, 0]])
    got = lookup_rows(arrays, 2, a, path)
    assert got.dtype == np.float32 and np.array_equal(got, f64.astype(np.float32))
    assert lookup_rows(arrays, 1, a.take(np.zeros(0, np.int64)), path).shape == (0, 4)


def test_other_keypoints_or_a_missing_file_name_the_file_and_the_fix(tmp_path):
    a = kps(4)
    path = tmp_path / "s.x.npz"
    write_side_file(path, {1: (a, np.zeros((4, 2), np.float32))}, {})
    _, arrays = read_side_file(path)
    for bad in (kps(4, offset=0.5), kps(6)):  # moved positions; source indices it does not hold
        with pytest.raises(DataError, match=r"s\.x\.npz: image 1's rows do not match the keypoint file .*--forcerun keypoints"):
            lookup_rows(arrays, 1, bad, path)
    with pytest.raises(DataError, match=r"no rows for image 2"):
        lookup_rows(arrays, 2, a, path)
    with pytest.raises(DataError, match=r"missing\.npz: the keypoint job's side file is missing or unreadable"):
        read_side_file(tmp_path / "missing.npz")


def test_a_derived_set_keeps_the_rows_of_the_keypoints_it_keeps(tmp_path):
    a = kps(6)
    rows = np.arange(12, dtype=np.uint8).reshape(6, 2)
    write_side_file(side_file_path(tmp_path / "src.parquet", "k.npz"), {1: (a, rows)}, {"what": "src"})
    kept = a.take(np.array([4, 1]))
    subset_side_file(tmp_path / "src.parquet", tmp_path / "out.parquet", {1: kept}, "k.npz")
    meta, arrays = read_side_file(tmp_path / "out.k.npz")
    assert meta["what"] == "src" and np.array_equal(lookup_rows(arrays, 1, kept, tmp_path / "out.k.npz"), rows[[4, 1]])
    subset_side_file(tmp_path / "src.parquet", tmp_path / "other.parquet", {1: kept}, "absent.npz")
    assert not (tmp_path / "other.absent.npz").exists()
