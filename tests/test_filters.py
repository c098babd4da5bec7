"""Keypoint-set filters and intersection (descbench.keypoints.filters) against brute force and hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest

from descbench.keypoints.filters import (
    global_size_cutoff,
    keep_by_cutoff,
    min_size,
    mutual_nearest_within,
    per_image_top_n_by_size,
)


def test_min_size_hand_worked():
    assert min_size(np.array([1.0, 5.0, 4.999, 5.0, 12.0]), 5.0).tolist() == [1, 3, 4]
    assert min_size(np.array([]), 3.0).tolist() == []


def test_per_image_top_n_hand_worked_ties_keep_the_lower_index():
    size = np.array([3.0, 7.0, 5.0, 7.0, 5.0, 1.0])
    assert per_image_top_n_by_size(size, 1).tolist() == [1]
    assert per_image_top_n_by_size(size, 3).tolist() == [1, 2, 3]  # 7, 7, then the first 5
    assert per_image_top_n_by_size(size, 4).tolist() == [1, 2, 3, 4]
    assert per_image_top_n_by_size(size, 10).tolist() == [0, 1, 2, 3, 4, 5]
    assert per_image_top_n_by_size(np.array([]), 2).tolist() == []


def _brute_global(entries, n):
    items = [(-float(s), sc, im, i) for sc, im, sizes in entries for i, s in enumerate(sizes)]
    kept = set(sorted(items)[:n])
    return {(sc, im): [i for i, s in enumerate(sizes) if (-float(s), sc, im, i) in kept] for sc, im, sizes in entries}


def test_global_top_n_equals_a_brute_force_sort_with_heavy_ties():
    rng = np.random.default_rng(3)
    entries = [(sc, im, rng.integers(1, 6, rng.integers(0, 30)).astype(np.float32))
               for sc in ("v_b", "i_a", "v_a10", "v_a2") for im in range(1, 7)]
    total = sum(len(s) for _, _, s in entries)
    for n in (1, 2, 7, 50, total - 1, total, total + 5):
        cut = global_size_cutoff(entries, n)
        ref = _brute_global(entries, n)
        got = {(sc, im): keep_by_cutoff(s, sc, im, cut).tolist() for sc, im, s in entries}
        assert got == ref, n
        assert sum(map(len, got.values())) == min(n, total)


def test_global_top_n_hand_worked():
    entries = [("b", 1, np.array([4.0, 9.0])), ("a", 2, np.array([9.0, 4.0])), ("a", 1, np.array([4.0]))]
    # order: 9 (a,2,0), 9 (b,1,1), 4 (a,1,0), 4 (a,2,1), 4 (b,1,0)
    cut = global_size_cutoff(entries, 3)
    assert cut == (4.0, "a", 1, 0)
    assert keep_by_cutoff(np.array([4.0, 9.0]), "b", 1, cut).tolist() == [1]
    assert keep_by_cutoff(np.array([9.0, 4.0]), "a", 2, cut).tolist() == [0]
    assert keep_by_cutoff(np.array([4.0]), "a", 1, cut).tolist() == [0]
    with pytest.raises(ValueError, match="n >= 1"):
        global_size_cutoff(entries, 0)


def _brute_mutual(a, b, tol):
    if len(a) == 0 or len(b) == 0:
        return [], []
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2)
    nn_ab = d2.argmin(axis=1)  # argmin: the first (lowest) index among ties
    nn_ba = d2.argmin(axis=0)
    ia = [i for i in range(len(a)) if nn_ba[nn_ab[i]] == i and d2[i, nn_ab[i]] <= tol * tol]
    return ia, [int(nn_ab[i]) for i in ia]


@pytest.mark.parametrize("tol", [0.0, 0.5, 2.0, 7.5])
def test_mutual_nearest_within_equals_brute_force(tol):
    rng = np.random.default_rng(int(tol * 10))
    for trial in range(20):
        na, nb = rng.integers(0, 120, 2)
        a = rng.integers(0, 60, (na, 2)).astype(np.float64) / rng.choice([1.0, 2.0, 4.0])  # many exact ties
        b = np.concatenate([a[: nb // 2] + rng.normal(0, tol / 2 + 1e-9, (min(nb // 2, na), 2)),
                            rng.uniform(-5, 40, (nb - min(nb // 2, na), 2))])
        if trial % 3 == 0 and len(b):
            b[: len(b) // 3] = np.round(b[: len(b) // 3])  # duplicates at identical positions
        ia, ib = mutual_nearest_within(a, b, tol)
        ra, rb = _brute_mutual(a, b, tol)
        assert ia.tolist() == ra and ib.tolist() == rb, (tol, trial)
        assert len(set(ib.tolist())) == len(ib)


def test_mutual_nearest_within_hand_worked():
    a = np.array([[0.0, 0.0], [10.0, 0.0], [10.0, 0.0], [30.0, 30.0]])
    b = np.array([[1.0, 0.0], [10.0, 1.5], [50.0, 50.0]])
    ia, ib = mutual_nearest_within(a, b, 2.0)
    # a0-b0 (1 px); a1 and a2 are duplicates: b1's nearest A is the lower index a1; a3 and b2 too far
    assert ia.tolist() == [0, 1] and ib.tolist() == [0, 1]
    ia, ib = mutual_nearest_within(a, b, 1.2)
    assert ia.tolist() == [0] and ib.tolist() == [0]
    assert [x.tolist() for x in mutual_nearest_within(a[:0], b, 2.0)] == [[], []]
    with pytest.raises(ValueError, match="tol_px"):
        mutual_nearest_within(a, b, -1.0)
