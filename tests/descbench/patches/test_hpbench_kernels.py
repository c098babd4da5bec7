"""descbench.patches.hpbench_kernels: the legacy MT19937 stream against np.random.RandomState
draw for draw, and the row-wise distance keys against float64 / bit-count references."""

from __future__ import annotations

import numpy as np
import pytest

from descbench.patches import hpbench_kernels as K


def state(seed):
    rs = np.random.RandomState(seed)
    _, key, pos, *_ = rs.get_state()
    return rs, key.astype(np.uint32), np.array([pos], dtype=np.int64)


def test_raw_stream_equals_randomstate():
    rs, key, pos = state(42)
    np.testing.assert_array_equal(K.mt_raw32(key, pos, 1500), rs.randint(0, 2 ** 32, 1500, dtype=np.uint32).astype(np.int64))
    assert pos[0] == rs.get_state()[2]


def test_bounded_draws_equal_randint_including_its_no_draw_case():
    rs, key, pos = state(7)
    highs = np.array([1, 2, 3, 5, 17, 1, 1000, 2 ** 31, 65, 1, 6], dtype=np.int64)
    np.testing.assert_array_equal(K.mt_bounded_draws(key, pos, highs), [rs.randint(h) for h in highs])
    np.testing.assert_array_equal(K.mt_raw32(key, pos, 5), rs.randint(0, 2 ** 32, 5, dtype=np.uint32))  # the streams stay in step


def test_permutation_heads_equal_choice_without_replacement():
    rs, key, pos = state(3)
    sizes = np.array([2, 3, 10, 100, 7, 2, 65], dtype=np.int64)
    want = [rs.choice(np.arange(k), 2, replace=False) for k in sizes]
    np.testing.assert_array_equal(K.mt_permutation_heads(key, pos, sizes), want)
    assert pos[0] == rs.get_state()[2]


def test_rowwise_keys():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(9, 16)).astype(np.float32)
    b = rng.normal(size=(9, 16)).astype(np.float32)
    want = [sum((float(x) - float(y)) ** 2 for x, y in zip(r, s)) for r, s in zip(a, b)]
    np.testing.assert_array_equal(K.rowwise_keys_l2(a, b), want)
    wa = rng.integers(0, 2 ** 63, size=(9, 3), dtype=np.int64).astype(np.uint64)
    wb = rng.integers(0, 2 ** 63, size=(9, 3), dtype=np.int64).astype(np.uint64)
    want = [sum(bin(int(x) ^ int(y)).count("1") for x, y in zip(r, s)) for r, s in zip(wa, wb)]
    np.testing.assert_array_equal(K.rowwise_keys_hamming(wa, wb), want)
    assert K.rowwise_keys_hamming(wa, wa).tolist() == [0.0] * 9


@pytest.mark.parametrize("seed", [0, 1])
def test_a_fresh_state_regenerates_before_its_first_word(seed):
    rs, key, pos = state(seed)
    assert pos[0] == 624
    assert int(K.mt_raw32(key, pos, 1)[0]) == int(rs.randint(0, 2 ** 32, dtype=np.uint64))
