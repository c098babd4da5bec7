"""Keypoint sets (descbench.keypoints, descbench.keypoints.filters): edge cases that the other
test files leave open, each checked against brute force or a hand-worked example.

Written to kill the mutants that survived a mutation-testing run (benchmarks/README.md,
"Mutation testing"): integer and unsigned inputs (the functions promise float64 arithmetic),
the exact return value at the boundaries of the caps, and the helper that finds each point's
nearest neighbour within a tolerance (its squared distances included).
"""

from __future__ import annotations

import numpy as np
import pytest

from descbench.keypoints import ImageKeypoints, border_mask, filter_keypoints, top_by_response
from descbench.keypoints.filters import (
    _nearest_within,
    global_size_cutoff,
    keep_by_cutoff,
    min_size,
    mutual_nearest_within,
    per_image_top_n_by_size,
)


def brute_nearest_within(src, dst, tol):
    """Per src row: (lowest index among the nearest dst rows within tol, or -1; its squared distance or inf)."""
    best, best_d2 = [], []
    for p in src:
        cands = [(float((p[0] - q[0]) ** 2 + (p[1] - q[1]) ** 2), j) for j, q in enumerate(dst)]
        cands = [c for c in cands if c[0] <= tol * tol]
        d2, j = min(cands) if cands else (np.inf, -1)
        best.append(j)
        best_d2.append(d2)
    return best, best_d2


def brute_mutual(a, b, tol):
    nn_ab, _ = brute_nearest_within(a, b, tol)
    nn_ba, _ = brute_nearest_within(b, a, tol)
    ia = [i for i, j in enumerate(nn_ab) if j >= 0 and nn_ba[j] == i]
    return ia, [nn_ab[i] for i in ia]


# ----------------------------------------------------------------------------- _nearest_within


@pytest.mark.parametrize("tol", [0.0, 0.7, 1.0, 3.0])
def test_nearest_within_index_and_squared_distance_equal_brute_force(tol):
    rng = np.random.default_rng(int(tol * 10) + 1)
    for trial in range(15):
        ns, nd = rng.integers(1, 40, 2)
        # a tall, narrow cloud (y spans many more cells than x) with exact ties on a half-pixel lattice
        src = np.column_stack([rng.integers(0, 6, ns), rng.integers(-40, 80, ns)]) / 2.0
        dst = np.column_stack([rng.integers(0, 6, nd), rng.integers(-40, 80, nd)]) / 2.0
        best, d2 = _nearest_within(src, dst, tol)
        ref_best, ref_d2 = brute_nearest_within(src, dst, tol)
        assert best.tolist() == ref_best, (tol, trial)
        assert best.dtype == np.int64
        np.testing.assert_array_equal(d2, np.array(ref_d2, dtype=np.float64))
        assert d2.dtype == np.float64


def test_nearest_within_without_points_is_minus_one_and_inf():
    src = np.array([[0.0, 0.0], [5.0, 5.0]])
    best, d2 = _nearest_within(src, np.zeros((0, 2)), 2.0)
    assert best.tolist() == [-1, -1] and np.isinf(d2).all()
    # points exist, but none within the tolerance
    best, d2 = _nearest_within(src, np.array([[100.0, 100.0]]), 2.0)
    assert best.tolist() == [-1, -1] and np.isinf(d2).all()
    best, d2 = _nearest_within(np.zeros((0, 2)), src, 2.0)
    assert best.shape == (0,) and d2.shape == (0,)


# ----------------------------------------------------------------------------- integer inputs


def test_mutual_nearest_within_unsigned_integer_coordinates_are_exact():
    # uint16 pixel coordinates: a difference must not wrap around (float64 arithmetic, as documented)
    rng = np.random.default_rng(7)
    a = rng.integers(0, 50, (60, 2)).astype(np.uint16)
    b = np.clip(a[:40].astype(np.int64) + rng.integers(-2, 3, (40, 2)), 0, None).astype(np.uint16)
    for tol in (0.0, 1.5, 3.0):
        ia, ib = mutual_nearest_within(a, b, tol)
        ra, rb = brute_mutual(a.astype(np.float64), b.astype(np.float64), tol)
        assert ia.tolist() == ra and ib.tolist() == rb, tol
    # hand-worked: (3, 0) and (1, 0) are 2 px apart, not 65534 px
    ia, ib = mutual_nearest_within(np.array([[1, 0]], np.uint16), np.array([[3, 0]], np.uint16), 2.0)
    assert ia.tolist() == [0] and ib.tolist() == [0]


def test_mutual_nearest_within_flat_input_is_read_as_xy_pairs():
    a = [0.0, 0.0, 10.0, 0.0]  # two points given as a flat list
    b = [10.0, 1.0]
    ia, ib = mutual_nearest_within(a, b, 2.0)
    assert ia.tolist() == [1] and ib.tolist() == [0]


def test_per_image_top_n_by_size_unsigned_sizes():
    size = np.array([3, 7, 5, 7, 0, 5, 1], dtype=np.uint16)
    want = sorted(sorted(range(size.size), key=lambda i: (-int(size[i]), i))[:3])
    assert want == [1, 2, 3]
    assert per_image_top_n_by_size(size, 3).tolist() == want
    assert per_image_top_n_by_size(size, 1).tolist() == [1]


def test_min_size_boundary_is_inclusive_for_integer_sizes():
    assert min_size(np.array([2, 3, 4], dtype=np.uint8), 3).tolist() == [1, 2]
    assert min_size([2.5, 3.0], 2.5).tolist() == [0, 1]


# ----------------------------------------------------------------------------- global cutoff


def test_global_size_cutoff_is_empty_exactly_when_nothing_is_dropped():
    entries = [("a", 1, np.array([4.0, 9.0])), ("b", 1, np.array([9.0]))]
    assert global_size_cutoff(entries, 3) == ()  # total == n: everything is kept
    assert global_size_cutoff(entries, 4) == ()
    # order: 9 (a,1,1), 9 (b,1,0), 4 (a,1,0)
    assert global_size_cutoff(entries, 2) == (9.0, "b", 1, 0)
    assert global_size_cutoff(entries, 1) == (9.0, "a", 1, 1)


def test_global_size_cutoff_unsigned_sizes():
    entries = [("a", 1, np.array([4, 9], np.uint16)), ("b", 2, np.array([9, 0, 7], np.uint16))]
    # order: 9 (a,1,1), 9 (b,2,0), 7 (b,2,2), 4 (a,1,0), 0 (b,2,1)
    cut = global_size_cutoff(entries, 3)
    assert cut == (7.0, "b", 2, 2)
    assert keep_by_cutoff(np.array([4, 9], np.uint16), "a", 1, cut).tolist() == [1]
    assert keep_by_cutoff(np.array([9, 0, 7], np.uint16), "b", 2, cut).tolist() == [0, 2]


def test_keep_by_cutoff_images_after_the_cutoff_keep_only_larger_sizes():
    cut = (5.0, "b", 2, 1)
    size = np.array([5.0, 6.0, 5.0, 4.0])
    assert keep_by_cutoff(size, "b", 3, cut).tolist() == [1]  # later image: ties dropped
    assert keep_by_cutoff(size, "c", 1, cut).tolist() == [1]  # later scene
    assert keep_by_cutoff(size, "b", 2, cut).tolist() == [0, 1]  # same image: ties up to index 1
    assert keep_by_cutoff(size, "a", 9, cut).tolist() == [0, 1, 2]  # earlier scene: every tie
    assert keep_by_cutoff(size, "b", 1, cut).tolist() == [0, 1, 2]  # earlier image


# ----------------------------------------------------------------------------- ImageKeypoints


def _kps(n):
    f = np.arange(n, dtype=np.float32)
    i = np.arange(n, dtype=np.int32)
    return ImageKeypoints(f, f + 100, f + 1, f * 10, f / 10, i + 5, i - 1, i * 2)


def test_image_keypoints_take_len_and_xy():
    k = _kps(5)
    assert len(k) == 5
    t = k.take(np.array([3, 1]))
    assert len(t) == 2
    assert t.x.tolist() == [3, 1] and t.y.tolist() == [103, 101] and t.size.tolist() == [4, 2]
    assert t.angle.tolist() == [30, 10] and t.octave.tolist() == [8, 6] and t.class_id.tolist() == [2, 0]
    assert t.source_index.tolist() == [6, 2]
    np.testing.assert_allclose(t.response, [0.3, 0.1], rtol=1e-6)
    xy = t.xy
    assert xy.dtype == np.float64 and xy.tolist() == [[3.0, 103.0], [1.0, 101.0]]
    assert len(k.take(np.zeros(0, dtype=np.int64))) == 0


def test_filter_keypoints_keeps_every_field_aligned():
    k = _kps(8)  # x = 0..7, y = 100..107, response = x / 10
    kept = filter_keypoints(k, 7, 200, 1, 3)  # border keeps x in [1, 6) -> 1..5; cap keeps 3..5
    assert kept.source_index.tolist() == [6, 8, 10]
    assert kept.x.tolist() == [3, 4, 5] and kept.y.tolist() == [103, 104, 105]
    assert border_mask(k.x, k.y, 7, 200, 1).tolist() == [False, True, True, True, True, True, False, False]
    assert top_by_response(k.response[1:6], 3).tolist() == [2, 3, 4]


def test_float32_coordinates_and_sizes_are_compared_in_float64():
    # float32(0.7) < 0.7 and float32(99.7) < 99.7: compared in float32 both would equal the bound
    f32 = np.float32
    assert float(f32(0.7)) < 0.7 and float(f32(99.7)) < 99.7
    x_mid = np.array([50.0], f32)
    assert border_mask(x_mid, np.array([0.7], f32), 100, 100, 0.7).tolist() == [False]  # y < b
    assert border_mask(np.array([0.7], f32), x_mid, 100, 100, 0.7).tolist() == [False]  # x < b
    assert border_mask(x_mid, np.array([99.7], f32), 100, 100, 0.3).tolist() == [True]  # y < H - b
    assert border_mask(np.array([99.7], f32), x_mid, 100, 100, 0.3).tolist() == [True]  # x < W - b
    assert border_mask(x_mid, np.array([0.8], f32), 100, 100, 0.7).tolist() == [True]
    assert min_size(np.array([0.7, 0.8], f32), 0.7).tolist() == [1]


# ------------------------------------------------------------------------------------------------
# Merged from test_filters.py:
# Keypoint-set filters and intersection (descbench.keypoints.filters) against brute force and hand-worked cases.
# ------------------------------------------------------------------------------------------------


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
