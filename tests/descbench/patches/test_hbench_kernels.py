"""descbench.patches.hbench_kernels: the exact top-m searches of HBench retrieval against a
float64 brute force with stable (distance, index) order, ties included."""

from __future__ import annotations

import numpy as np
import pytest

from descbench.metrics.nn import l2_band_tolerance
from descbench.patches import hbench_kernels as hk


def brute_topm(d, self_idx, m):
    """(indices, keys) of the m nearest others by (key, pool index); -1 / inf past the end."""
    idx = np.full((len(self_idx), m), -1, np.int64)
    key = np.full((len(self_idx), m), np.inf)
    for qi, s in enumerate(self_idx):
        others = [j for j in range(len(d)) if j != s]
        keys = [float(np.sum((d[s].astype(np.float64) - d[j].astype(np.float64)) ** 2)) if d.dtype != np.uint64
                else float(sum(bin(int(a) ^ int(b)).count("1") for a, b in zip(d[s], d[j]))) for j in others]
        order = sorted(range(len(others)), key=lambda t: (keys[t], others[t]))[:m]
        idx[qi, :len(order)] = [others[t] for t in order]
        key[qi, :len(order)] = [keys[t] for t in order]
    return idx, key


def l2_search(cdesc, self_idx, m):
    cnorm2 = hk.row_sqnorms64(cdesc)
    caug = np.concatenate([cdesc, (-0.5 * cnorm2)[:, None].astype(np.float32)], axis=1)
    qdesc = np.ascontiguousarray(cdesc[self_idx])
    qaug = np.concatenate([qdesc, np.ones((len(self_idx), 1), np.float32)], axis=1)
    out_idx = np.full((len(self_idx), m), -1, np.int64)
    out_key = np.full((len(self_idx), m), np.inf)
    tol = l2_band_tolerance(qdesc, cnorm2)
    for r0 in range(0, len(self_idx), 3):  # blocks of 3 query rows
        hk.topk_l2_block(qaug[r0:r0 + 3] @ caug.T, r0, self_idx, cdesc, tol, m, out_idx, out_key)
    return out_idx, out_key


def test_row_sqnorms64_is_a_float64_sum_in_index_order():
    x = np.random.default_rng(0).normal(size=(7, 5)).astype(np.float32)
    np.testing.assert_array_equal(hk.row_sqnorms64(x), [sum(float(v) * float(v) for v in row) for row in x])
    np.testing.assert_array_equal(hk.row_sqnorms64(x[:, ::2]), [sum(float(v) ** 2 for v in row) for row in x[:, ::2]])


@pytest.mark.parametrize("m", [1, 4, 11, 14])
def test_topk_l2_equals_brute_force_with_ties(m):
    rng = np.random.default_rng(m)
    cdesc = rng.integers(-3, 4, size=(12, 6)).astype(np.float32)  # small integers: many exact ties
    cdesc[5] = cdesc[2]
    self_idx = np.array([0, 2, 5, 7, 11, 3, 9], dtype=np.int64)
    got_idx, got_key = l2_search(cdesc, self_idx, m)
    ref_idx, ref_key = brute_topm(cdesc, self_idx, m)
    np.testing.assert_array_equal(got_idx, ref_idx)
    np.testing.assert_array_equal(got_key, ref_key)


@pytest.mark.parametrize("m", [1, 3, 9, 12])
def test_topk_hamming_equals_brute_force_with_ties(m):
    rng = np.random.default_rng(10 + m)
    words = rng.integers(0, 2 ** 63, size=(10, 2), dtype=np.int64).astype(np.uint64)
    words[4] = words[1]
    words[6] = words[1] ^ np.uint64(1)
    self_idx = np.arange(10, dtype=np.int64)
    out_idx = np.full((10, m), -1, np.int64)
    out_key = np.full((10, m), np.inf)
    hk.topk_hamming(np.arange(10, dtype=np.int64), self_idx, words, 128, m, out_idx, out_key)
    ref_idx, ref_key = brute_topm(words, self_idx, m)
    np.testing.assert_array_equal(out_idx, ref_idx)
    np.testing.assert_array_equal(out_key, ref_key)
