"""Matching metrics of one pair (descbench.metrics.matching): validation messages, inclusive
thresholds, pairs whose keypoints all leave the other image, RANSAC settings, corner errors and
the keypoint-only repeatability, each against a hand-worked example or a brute force.

Written to kill the mutants that survived a mutation-testing run (benchmarks/README.md,
"Mutation testing").
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from descbench.errors import DataError
from descbench.metrics.matching import (
    MatchingParams,
    corner_error,
    estimate_homography,
    evaluate_pair,
    homography_accuracy,
    homography_auc,
    match_pair,
    pair_repeatability,
)

I3 = np.eye(3)


def one_hot(n, d=None):
    """Descriptors whose mutual nearest neighbours are exactly i <-> i."""
    return np.eye(n, d or n, dtype=np.float32) * 10


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(q_xy=np.zeros((2, 3))), r"^image-1 keypoints must be an \[N, 2\] array of \(x, y\), got shape \(2, 3\)$"),
        (dict(t_xy=np.zeros(4)), r"^image-k keypoints must be an \[N, 2\] array of \(x, y\), got shape \(4,\)$"),
        (dict(q_xy=np.zeros((3, 2))), r"^image-1: 3 keypoints but descriptor array of shape \(2, 2\)$"),
        (dict(t_xy=np.zeros((1, 2))), r"^image-k: 1 keypoints but descriptor array of shape \(2, 2\)$"),
        (dict(q_xy=np.array([[0.0, np.nan], [1.0, 1.0]])), r"^image-1 keypoint coordinates contain NaN or inf$"),
        (dict(t_xy=np.array([[0.0, np.inf], [1.0, 1.0]])), r"^image-k keypoint coordinates contain NaN or inf$"),
        (dict(H=np.zeros((3, 3))), r"^homography is singular \(cannot map image k back to image 1\)$"),
        (dict(H=np.eye(2)), r"^homography must be a finite 3x3 matrix, got shape \(2, 2\)$"),
        (dict(image1_size=(10,)), r"^image1_size must be \(width, height\), got \(10,\)$"),
        (dict(image1_size="ab"), r"^image1_size must be \(width, height\), got 'ab'$"),
        (dict(target_size=(10, 0)), r"^target_size must be positive \(width, height\), got \(10, 0\)$"),
        (dict(target_size=(0, 10)), r"^target_size must be positive \(width, height\), got \(0, 10\)$"),
        (dict(image1_size=(5, -1)), r"^image1_size must be positive \(width, height\), got \(5, -1\)$"),
    ],
)
def test_match_pair_validation_messages(kwargs, message):
    args = dict(q_xy=np.zeros((2, 2)), q_desc=one_hot(2), t_xy=np.zeros((2, 2)), t_desc=one_hot(2), H=I3,
                image1_size=(10, 10), target_size=(10, 10))
    args.update(kwargs)
    with pytest.raises(DataError, match=message):
        match_pair(**args)


def test_one_pixel_images_are_valid():
    st = match_pair(np.zeros((1, 2)), one_hot(1), np.zeros((1, 2)), one_hot(1), I3, (1, 1), (1, 1))
    assert st["n_matches"] == 1 and st["n_shared_1"] == 1 and st["n_shared_2"] == 1
    assert st["precision"] == 1.0 and st["repeatability"] == 1.0


def test_evaluate_pair_descriptor_errors_name_the_images():
    q = np.zeros((2, 2))
    with pytest.raises(DataError, match=r"^image-a descriptors have dtype float64; expected float32"):
        evaluate_pair(q, np.zeros((2, 2)), q, one_hot(2), I3, (10, 10), (10, 10))
    with pytest.raises(DataError, match=r"^image-b descriptors have dtype float64; expected float32"):
        evaluate_pair(q, one_hot(2), q, np.zeros((2, 2)), I3, (10, 10), (10, 10))
    with pytest.raises(DataError, match=r"^descriptor mismatch: image-a descriptors are float32 x 2, image-b descriptors are float32 x 3;"):
        evaluate_pair(q, one_hot(2), q, one_hot(2, 3), I3, (10, 10), (10, 10))


def test_evaluate_pair_with_default_classifier_params_equals_match_pair():
    rng = np.random.default_rng(6)
    q_xy = rng.uniform(0, 50, (12, 2))
    t_xy = q_xy + rng.normal(0, 1.0, (12, 2))
    qd = rng.integers(0, 4, (12, 8)).astype(np.float32)
    td = qd + rng.integers(0, 2, (12, 8)).astype(np.float32)
    stats, res = evaluate_pair(q_xy, qd, t_xy, td, I3, (50, 50), (50, 50))
    ref = match_pair(q_xy, qd, t_xy, td, I3, (50, 50), (50, 50))
    assert stats.keys() == ref.keys()
    for k in ref:
        assert stats[k] == ref[k] or (math.isnan(stats[k]) and math.isnan(ref[k])), k
    assert res.n1 == 12 and res.n2 == 12


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(mma_thresholds=()), r"^mma_thresholds must be non-empty finite values >= 0, got \(\)$"),
        (dict(mma_thresholds=(1, -1)), r"^mma_thresholds must be non-empty finite values >= 0, got \(1, -1\)$"),
        (dict(mma_thresholds=(1, math.inf)), r"^mma_thresholds must be non-empty finite values >= 0, got \(1, inf\)$"),
        (dict(tau_px=0.0), r"^tau_px must be a finite value > 0, got 0\.0$"),
        (dict(ransac_px=math.nan), r"^ransac_px must be a finite value > 0, got nan$"),
        (dict(repeatability_px=-1.0), r"^repeatability_px must be a finite value > 0, got -1\.0$"),
        (dict(chunk_mb=math.inf), r"^chunk_mb must be a finite value > 0, got inf$"),
    ],
)
def test_matching_params_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MatchingParams(**kwargs)


def test_matching_params_zero_threshold_is_valid():
    assert MatchingParams(mma_thresholds=(0, 2.5)).mma_thresholds == (0, 2.5)


# ----------------------------------------------------------------------------- per-pair values


def test_errors_at_exactly_the_thresholds_count_as_correct():
    # match i <-> i with reprojection errors 0, 1, 2, 3, 4 px (x offsets); tau 3 px, MMA at 1..5 px
    n = 5
    q_xy = np.array([[10.0 + 10 * i, 20.0] for i in range(n)])
    t_xy = q_xy + np.array([[float(i), 0.0] for i in range(n)])
    params = MatchingParams(tau_px=3.0, mma_thresholds=(1, 2, 3, 4, 5), repeatability_px=1.0)
    st = match_pair(q_xy, one_hot(n), t_xy, one_hot(n), I3, (100, 100), (100, 100), params)
    assert st["n_matches"] == 5
    assert st["n_correct"] == 4 and st["precision"] == 0.8  # errors 0..3
    assert [st[f"mma_correct_at_{t}"] for t in (1, 2, 3, 4, 5)] == [2, 3, 4, 5, 5]
    assert [st[f"mma_at_{t}"] for t in (1, 2, 3, 4, 5)] == [0.4, 0.6, 0.8, 1.0, 1.0]
    assert st["ms_correct"] == 4 and st["matching_score"] == 0.8
    # repeatability 1 px (inclusive): nearest image-k keypoint of each projected image-1 keypoint
    # is its own match at 0, 1, 2, ... px -> 2 of 5 each way
    assert st["n_repeated_1"] == 2 and st["n_repeated_2"] == 2 and st["repeatability"] == 0.4


def test_pair_whose_image_1_keypoints_all_leave_image_k():
    # H shifts everything 100 px right: no image-1 keypoint lands inside the 50 x 50 image k
    H = np.array([[1.0, 0.0, 100.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    q_xy = np.array([[5.0, 5.0], [20.0, 30.0]])
    t_xy = np.array([[10.0, 10.0], [40.0, 40.0]])
    st = match_pair(q_xy, one_hot(2), t_xy, one_hot(2), H, (50, 50), (50, 50))
    assert st["n_shared_1"] == 0 and st["n_shared_2"] == 0  # image-k points map to x < 0 in image 1
    assert st["matching_score"] == 0.0  # defined: 0 when n_shared_1 = 0
    assert math.isnan(st["repeatability"])  # both shared sets empty: undefined
    assert st["precision"] == 0.0 and st["n_matches"] == 2


def test_ransac_threshold_reaches_the_estimator():
    rng = np.random.default_rng(2)
    n = 30
    q_xy = rng.uniform(0, 200, (n, 2))
    t_xy = q_xy + [5.0, -3.0]
    t_xy[:6] += [3.5, 0.0]  # six correspondences 3.5 px off the translation
    for ransac_px, inliers in ((1.0, 24), (5.0, 30)):
        H, n_in = estimate_homography(q_xy, t_xy, ransac_px)
        assert n_in == inliers, ransac_px
        params = MatchingParams(ransac_px=ransac_px)
        st = match_pair(q_xy, one_hot(n), t_xy, one_hot(n), I3, (300, 300), (300, 300), params)
        assert st["n_inliers"] == inliers and st["homography_found"] == 1
    # the default threshold is 3 px (at 3 px some of the six are outliers, at 4 px none is)
    at3 = estimate_homography(q_xy, t_xy, 3.0)[1]
    assert at3 < estimate_homography(q_xy, t_xy, 4.0)[1] == 30
    assert estimate_homography(q_xy, t_xy)[1] == at3


def test_estimate_homography_failures_have_no_inliers():
    sq = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    assert estimate_homography(sq, sq) == (None, 0)  # fewer than 4 correspondences
    line = np.array([[float(i), 2.0 * i] for i in range(8)])
    H, n_in = estimate_homography(line, line)  # collinear: no model
    assert H is None and n_in == 0
    st = match_pair(sq, one_hot(3), sq, one_hot(3), I3, (20, 20), (20, 20))
    assert st["homography_found"] == 0 and st["n_inliers"] == 0 and st["corner_error"] == math.inf
    # non-finite correspondences: OpenCV returns a NaN matrix, which is no model
    # OpenCV refuses correspondences of different lengths (cv2.error): no model either
    pts = np.random.default_rng(0).uniform(0, 10, (5, 2))
    assert estimate_homography(pts[:4], pts) == (None, 0)
    square = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    for bad in (np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [np.nan, 1.0]]), np.full((4, 2), np.inf)):
        H, n_in = estimate_homography(bad, square)
        assert H is None and n_in == 0


def test_corner_error_by_hand():
    # image 1 of 11 x 21 px: corners (0,0), (10,0), (0,20), (10,20)
    shift = np.array([[1.0, 0.0, 3.0], [0.0, 1.0, 4.0], [0.0, 0.0, 1.0]])
    assert corner_error(shift, I3, (11, 21)) == 5.0
    scale = np.diag([2.0, 2.0, 1.0])  # corner c moves by |c|: 0, 10, 20, sqrt(500)
    assert corner_error(scale, I3, (11, 21)) == pytest.approx((0 + 10 + 20 + math.sqrt(500)) / 4, rel=1e-15)
    assert corner_error(None, I3, (11, 21)) == math.inf
    # H_est sends the corner (10, 0) behind the camera (w = 1 - x / 10 = 0): error inf
    behind = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-0.1, 0.0, 1.0]])
    assert corner_error(behind, I3, (11, 21)) == math.inf
    assert corner_error(I3, behind, (11, 21)) == math.inf


# ----------------------------------------------------------------------------- repeatability alone


def brute_repeatability(xy1, xyk, H, size1, sizek, r):
    def proj(M, xy):
        h = np.column_stack([xy, np.ones(len(xy))]) @ M.T
        return h[:, :2] / h[:, 2:], h[:, 2] > 0

    p1, f1 = proj(H, xy1)
    pk_back, fk = proj(np.linalg.inv(H), xyk)
    s1 = [f1[i] and 0 <= p1[i, 0] < sizek[0] and 0 <= p1[i, 1] < sizek[1] for i in range(len(xy1))]
    s2 = [fk[j] and 0 <= pk_back[j, 0] < size1[0] and 0 <= pk_back[j, 1] < size1[1] for j in range(len(xyk))]
    a = [p1[i] for i in range(len(xy1)) if s1[i]]
    b = [xyk[j] for j in range(len(xyk)) if s2[j]]
    r1 = sum(1 for p in a if b and min(np.hypot(*(p - q)) for q in b) <= r)
    r2 = sum(1 for q in b if a and min(np.hypot(*(q - p)) for p in a) <= r)
    return sum(s1), sum(s2), r1, r2


def test_pair_repeatability_equals_brute_force_and_match_pair():
    rng = np.random.default_rng(4)
    H = np.array([[0.9, 0.05, 12.0], [-0.03, 1.1, -6.0], [2e-4, 1e-4, 1.0]])
    for trial in range(5):
        xy1 = rng.uniform(0, 120, (40, 3 - 1))
        xyk = np.concatenate([rng.uniform(0, 100, (25, 2)), rng.uniform(-20, 130, (15, 2))])
        for r in (1.0, 3.0, 8.0):
            got = pair_repeatability(xy1, xyk, H, (120, 110), (100, 105), r)
            assert got == brute_repeatability(xy1, xyk, H, (120, 110), (100, 105), r), (trial, r)
            assert all(isinstance(v, int) for v in got)
        st = match_pair(xy1, one_hot(40), xyk, one_hot(40, 40)[:40], H, (120, 110), (100, 105),
                        MatchingParams(repeatability_px=3.0))
        assert (st["n_shared_1"], st["n_shared_2"], st["n_repeated_1"], st["n_repeated_2"]) == \
            pair_repeatability(xy1, xyk, H, (120, 110), (100, 105), 3.0)


# ----------------------------------------------------------------------------- aggregates


def test_homography_auc_thresholds_must_be_positive():
    with pytest.raises(ValueError, match=r"^AUC thresholds must be > 0, got 0\.0$"):
        homography_auc([1.0, 2.0], thresholds=(0,))
    # thresholds below one pixel are fine: errors 0.25 and inf -> area (0.5 * 0.25 * 0.5 + 0.25 * 0.5) / 0.5
    got = homography_auc([0.25, math.inf], thresholds=(0.5,))
    assert got.tolist() == [pytest.approx((0.5 * 0.25 * 0.5 + 0.25 * 0.5) / 0.5, rel=1e-15)]


def test_homography_aggregates_accept_integer_lists():
    assert homography_accuracy([0, 2, 7], thresholds=(1, 5)).tolist() == [1 / 3, 2 / 3]
    assert homography_auc([0, 0], thresholds=(2,)).tolist() == [1.0]
