"""descbench.patches.workbench_kernels: GCC's std::sort replay (sorted output, a hand-traced tie
case, the heap-sort fallback), the OpenCV-order distances and the first-minimum scan."""

from __future__ import annotations

import math

import numpy as np
import pytest

from descbench.patches import workbench_kernels as K


@pytest.mark.parametrize("n", [0, 1, 2, 16, 17, 40, 300])
def test_libstdcxx_sort_sorts_and_permutes(n):
    rng = np.random.default_rng(n)
    keys = rng.integers(0, 4, n).astype(np.float32)
    k, v = keys.copy(), np.arange(n)
    K.libstdcxx_sort(k, v)
    assert list(k) == sorted(keys.tolist())
    assert sorted(v.tolist()) == list(range(n))
    np.testing.assert_array_equal(keys[v], k)  # the indices travel with their keys


def test_libstdcxx_sort_of_distinct_keys_is_argsort():
    keys = np.random.default_rng(1).permutation(200).astype(np.float32)
    k, v = keys.copy(), np.arange(200)
    K.libstdcxx_sort(k, v)
    np.testing.assert_array_equal(v, np.argsort(keys))


def test_libstdcxx_sort_of_17_equal_keys_hand_traced():
    # n = 17 > 16: one partition step. __move_median_to_first(0, 1, 8, 16) with all keys equal
    # swaps positions 0 and 8 (every comparison false: the last branch). __unguarded_partition
    # from 1 to 17 with pivot at 0 stops on every equal element, so it swaps (1,16), (2,15), ...,
    # (8,9) and returns 9; both parts are <= 16 long. The final insertion sort moves nothing on
    # equal keys. Order: 8, then the old positions 16..9, i.e. 16, 15, .., 10, 9, then position 9
    # holds old position 8 = index 0, then 7, 6, .., 1.
    k, v = np.zeros(17, np.float32), np.arange(17)
    K.libstdcxx_sort(k, v)
    assert v.tolist() == [8, 16, 15, 14, 13, 12, 11, 10, 9, 0, 7, 6, 5, 4, 3, 2, 1]
    # Broken on purpose (seen failing): swapping `a` instead of `b` in _median_to_first's last
    # branch gives [1, 16, 15, ...].


def test_libstdcxx_sort_of_16_equal_keys_is_stable():
    k, v = np.zeros(16, np.float32), np.arange(16)
    K.libstdcxx_sort(k, v)
    assert v.tolist() == list(range(16))  # insertion sort only


@pytest.mark.parametrize("n", [2, 3, 10, 31])
def test_heap_sort_fallback_sorts(n):
    keys = np.random.default_rng(n).integers(0, 5, n).astype(np.float32)
    k, v = keys.copy(), np.arange(n)
    K._heap_sort(k, v, 0, n)
    assert list(k) == sorted(keys.tolist())
    np.testing.assert_array_equal(keys[v], k)


def test_distances_match_a_plain_loop():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(5, 11)).astype(np.float32)
    b = rng.normal(size=(4, 11)).astype(np.float32)
    d32, d64 = K.l2_matrix_f32(a, b), K.l2_matrix_f64(a, b)
    for i in range(5):
        for j in range(4):
            s = sum(float(np.float32(a[i, k] - b[j, k])) ** 2 for k in range(11))
            assert d32[i, j] == np.float32(math.sqrt(s))
            assert d64[i, j] == pytest.approx(math.sqrt(sum((float(a[i, k]) - float(b[j, k])) ** 2 for k in range(11))), rel=1e-15)
    np.testing.assert_array_equal(K.l2_pairs_f32(a[:4], b), np.diag(d32))


def test_first_nearest_takes_the_first_minimum_and_none_above_start():
    d = np.array([[3, 1, 1], [2, 2, 5], [np.inf, np.inf, np.inf]], np.float32)
    assert K.first_nearest(d, K.FLT_MAX).tolist() == [1, 0, -1]


def test_correct_ranks_sorts_only_on_ties():
    d = np.array([[1, 0, 2], [1, 1, 1], [0, 0, 0]], np.float32)
    # row 0: one smaller distance -> 1; row 1: all tied, 3 <= 16 -> stable -> 1; row 2: stable -> 2
    assert K.correct_ranks(d).tolist() == [1, 1, 2]
