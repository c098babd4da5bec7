"""Hamming distances of the metrics (numba kernels on packed uint64 words) against numpy's bit
counts, and tie-aware retrieval scores of binary descriptors against a brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from descbench.io import HIT_KS
from descbench.metrics import kernels
from descbench.metrics.retrieval import RetrievalParams, pack_bits_to_words, policy_rank, score_pair

POLICIES = ("expected", "optimistic", "pessimistic", "half")


def numpy_hamming(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.unpackbits(a ^ b).sum())


def all_pairs_csr(nq: int, nc: int):
    """Every candidate relevant to every query: the kernel then reports every distance."""
    indptr = np.arange(0, (nq + 1) * nc, nc, dtype=np.int64)
    indices = np.tile(np.arange(nc, dtype=np.int64), nq)
    return indptr, indices


@pytest.mark.parametrize("width", [8, 32, 61, 64])
def test_rank_counts_hamming_distances_and_counts(width):
    rng = np.random.default_rng(width)
    q = rng.integers(0, 256, (7, width), dtype=np.uint8)
    c = rng.integers(0, 256, (23, width), dtype=np.uint8)
    c[5] = q[0]  # distance 0
    c[6] = ~q[1]  # every bit differs
    c[7] = c[8]  # a tie for every query
    indptr, indices = all_pairs_csr(len(q), len(c))
    less = np.zeros(len(indices), np.int64)
    equal = np.zeros(len(indices), np.int64)
    dexact = np.zeros(len(indices), np.float64)
    kernels.rank_counts_hamming(pack_bits_to_words(q), pack_bits_to_words(c), indptr, indices, less, equal, dexact)
    ref = np.array([[numpy_hamming(a, b) for b in c] for a in q], dtype=np.float64)
    np.testing.assert_array_equal(dexact.reshape(ref.shape), ref)
    assert ref[0, 5] == 0 and ref[1, 6] == 8 * width
    for i in range(len(q)):
        for j in range(len(c)):
            e = i * len(c) + j
            assert less[e] == (ref[i] < ref[i, j]).sum()
            assert equal[e] == (ref[i] == ref[i, j]).sum()


@pytest.mark.parametrize("width", [8, 61])
def test_segment_stats_hamming_nearest(width):
    """The distractor kernel's per-segment nearest distance uses the same Hamming count."""
    rng = np.random.default_rng(100 + width)
    q = rng.integers(0, 256, (5, width), dtype=np.uint8)
    c = rng.integers(0, 256, (30, width), dtype=np.uint8)
    seg = np.array([0, 12, 30], dtype=np.int64)
    indptr = np.zeros(len(q) + 1, np.int64)
    indices = np.zeros(0, np.int64)
    nn_idx = np.zeros((len(q), 2), np.int64)
    nn_d = np.zeros((len(q), 2))
    z = [np.zeros(0, np.int64) for _ in range(4)]
    kernels.segment_stats_hamming(pack_bits_to_words(q), pack_bits_to_words(c), seg, 12, indptr, indices,
                                  nn_idx, nn_d, *z, np.zeros(0))
    for i in range(len(q)):
        for s in range(2):
            d = [numpy_hamming(q[i], c[j]) for j in range(seg[s], seg[s + 1])]
            assert nn_d[i, s] == min(d) and nn_idx[i, s] == int(np.argmin(d))


def test_pack_bits_to_words_odd_width_pads_with_zeros():
    d = np.full((2, 61), 255, dtype=np.uint8)
    w = pack_bits_to_words(d)
    assert w.shape == (2, 8) and w.dtype == np.uint64
    assert sum(bin(int(x)).count("1") for x in w[0]) == 61 * 8


# ----------------------------------------------------------------------------- ties


def brute_force(q_desc, t_desc):
    """Per query i (relevant item: target i): L, t, and each policy's AP and hit@k by the formulas."""
    out = []
    for i in range(len(q_desc)):
        d = np.array([numpy_hamming(q_desc[i], t) for t in t_desc])
        L = int((d < d[i]).sum())
        t = int((d == d[i]).sum()) - 1
        ap = {
            "optimistic": 1 / (L + 1),
            "pessimistic": 1 / (L + t + 1),
            "half": 1 / (L + 1 + math.ceil(t / 2)),
            "expected": sum(1 / r for r in range(L + 1, L + t + 2)) / (t + 1),
        }
        hit = {
            "optimistic": [float(L + 1 <= k) for k in HIT_KS],
            "pessimistic": [float(L + t + 1 <= k) for k in HIT_KS],
            "half": [float(L + 1 + math.ceil(t / 2) <= k) for k in HIT_KS],
            "expected": [min(1.0, max(0.0, (k - L) / (t + 1))) for k in HIT_KS],
        }
        out.append((L, t, ap, hit))
    return out


@pytest.mark.parametrize("policy", POLICIES)
def test_binary_retrieval_with_heavy_ties(policy):
    """2-byte descriptors with only 3 bits in play: Hamming distances 0..3, so most candidates tie."""
    rng = np.random.default_rng(7)
    n = 40
    q_desc = np.zeros((n, 2), np.uint8)
    t_desc = np.zeros((n, 2), np.uint8)
    q_desc[:, 0] = rng.integers(0, 8, n)
    t_desc[:, 0] = rng.integers(0, 8, n)
    t_desc[:, 1] = rng.integers(0, 2, n) << 7  # one more bit, set in about half of the targets
    xy = np.stack([np.arange(n) * 10.0 + 5, np.full(n, 50.0)], axis=1)  # query i sits on target i
    res = score_pair(xy, q_desc, xy, t_desc, np.eye(3), (1000, 1000), RetrievalParams(gt="closest", tau_px=3.0, tie_policy=policy))
    ref = brute_force(q_desc, t_desc)
    assert (res.n_relevant == 1).all() and (res.gt_index == np.arange(n)).all()
    L = np.array([r[0] for r in ref])
    t = np.array([r[1] for r in ref])
    assert t.mean() > 5  # the case is tie-heavy
    np.testing.assert_array_equal(res.n_closer, L)
    np.testing.assert_array_equal(res.n_tied, t)
    np.testing.assert_allclose(res.ap, [r[2][policy] for r in ref], rtol=1e-12)
    np.testing.assert_allclose(res.hit, [r[3][policy] for r in ref], rtol=1e-12, atol=1e-15)
    expected_rank = {"optimistic": L + 1, "pessimistic": L + t + 1, "half": L + 1 + np.ceil(t / 2), "expected": L + 1 + t / 2}
    np.testing.assert_array_equal(policy_rank(res.n_closer, res.n_tied, policy), expected_rank[policy])
