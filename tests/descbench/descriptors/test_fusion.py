"""descbench.descriptors.fusion: the workbench's fusion arithmetic (its bit-for-bit check against
the compiled C++ is tests/descbench/patches/test_workbench.py, through the re-export
descbench.patches.workbench.fuse); here the kernel's summation order and the L2 step's rules."""

from __future__ import annotations

import numpy as np
import pytest

from descbench.descriptors import fusion as FU
from descbench.descriptors.sift_kernel import cv_normalize_rows
from descbench.errors import DataError
from tests.conftest import raises_naming

F = np.float32


def test_the_sum_of_squares_follows_opencv_s_blocks_of_four():
    rng = np.random.default_rng(3)
    for d in (1, 3, 4, 7, 128):
        a, b = (rng.normal(size=(2, d)) * 10.0 ** rng.uniform(-6, 6, size=(2, d))).astype(F)  # orders change sums
        s = 0.0
        k = 0
        while k + 4 <= d:
            v = [float(F(a[k + j] - b[k + j])) for j in range(4)]
            s += ((v[0] * v[0] + v[1] * v[1]) + v[2] * v[2]) + v[3] * v[3]
            k += 4
        for j in range(k, d):
            v = float(F(a[j] - b[j]))
            s += v * v
        assert FU.opencv_sq_diff(a, b) == s
    # a block where the order shows: 1 + 3 x 2^-54 is 1 summed left to right, 1 + 2^-52 right to left
    tiny = np.array([1.0, 2.0 ** -27, 2.0 ** -27, 2.0 ** -27], F)
    assert FU.opencv_sq_diff(tiny, np.zeros(4, F)) == 1.0
    assert FU.opencv_sq_diff(tiny[::-1].copy(), np.zeros(4, F)) == 1.0 + 2.0 ** -52


def test_the_l2_step_is_cv_normalize():
    rng = np.random.default_rng(4)
    x = (rng.normal(size=(200, 128)) * 300).astype(F)
    x[3] = 0.0
    got = FU.normalize_rows_l2(x)
    # the same definition with numpy's pairwise sum: at most one float32 ulp apart
    other = cv_normalize_rows(x)
    assert np.abs(got.view(np.int32).astype(np.int64) - other.view(np.int32).astype(np.int64)).max() <= 1
    assert not got[3].any() and np.allclose(np.linalg.norm(got[6:], axis=1), 1, atol=1e-6)
    unit = np.array([[0.6, 0.8]], F)
    assert FU.normalize_rows_l2(unit).tolist() == unit.tolist()


def test_fuse_is_the_rows_then_the_l2_step():
    rng = np.random.default_rng(5)
    a, b = (rng.normal(size=(6, 8)).astype(F) for _ in range(2))
    for method in ("concatenate", "average", "weighted_avg", "max", "min", "channel_wise"):
        np.testing.assert_array_equal(FU.fuse([a, b], method), FU.normalize_rows_l2(FU.fuse_rows([a, b], method)))


@pytest.mark.bad_input
def test_rows_that_are_not_finite_float32_are_named():
    raises_naming(lambda: FU.fuse_rows([np.zeros((2, 4))], "average"), "component 0", "float32", ".astype(np.float32)")
    bad = np.zeros((2, 4), F)
    bad[1, 2] = np.nan
    raises_naming(lambda: FU.fuse_rows([bad], "average"), "component 0", "row 1", "NaN")
    raises_naming(lambda: FU.fuse_rows([np.zeros(4, F)], "max"), "component 0", "2-D")
    with pytest.raises(DataError, match="component 1 has 3 rows, component 0 has 2"):
        FU.fuse_rows([np.zeros((2, 4), F), np.zeros((3, 4), F)], "max")
