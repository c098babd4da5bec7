"""Matching metrics of one pair against direct numpy / loop computations."""

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
    image_corners,
    match_pair,
    pair_repeatability,
    reprojection_errors,
    threshold_key,
)

W1, H1 = 640, 480
WK, HK = 600, 500
H_TRUE = np.array([[0.9, 0.05, 20.0], [-0.03, 1.05, -10.0], [1e-4, -5e-5, 1.0]])


# ----------------------------------------------------------------------------- references


def ref_distance_matrix(a, b):
    if a.dtype == np.uint8:
        return np.unpackbits(a[:, None, :] ^ b[None, :, :], axis=2).sum(axis=2).astype(np.float64)
    acc = np.zeros((len(a), len(b)))
    for k in range(a.shape[1]):
        acc += (a[:, None, k].astype(np.float64) - b[None, :, k].astype(np.float64)) ** 2
    return acc


def ref_mutual(a, b):
    if len(a) == 0 or len(b) == 0:
        return np.zeros(0, int), np.zeros(0, int)
    D = ref_distance_matrix(a, b)
    ab = D.argmin(axis=1)
    ba = D.argmin(axis=0)
    ia = np.array([i for i in range(len(a)) if ba[ab[i]] == i], dtype=int)
    return ia, ab[ia]


def ref_project(H, x, y):
    v = H @ np.array([x, y, 1.0])
    if v[2] <= 0:
        return None
    return v[0] / v[2], v[1] / v[2]


def ref_inside(p, w, h):
    return p is not None and 0 <= p[0] < w and 0 <= p[1] < h


def ref_stats(q_xy, q_desc, t_xy, t_desc, H, size1, sizek, params):
    ia, ib = ref_mutual(q_desc, t_desc)
    errs = []
    for i, j in zip(ia, ib):
        p = ref_project(H, *q_xy[i])
        errs.append(math.inf if p is None else math.hypot(p[0] - t_xy[j][0], p[1] - t_xy[j][1]))
    errs = np.array(errs, dtype=np.float64)
    m = len(errs)
    out = {"n_matches": m, "n_correct": int((errs <= params.tau_px).sum())}
    out["precision"] = out["n_correct"] / m if m else 0.0
    for t in params.mma_thresholds:
        out[f"mma_correct_at_{t}"] = int((errs <= t).sum())
        out[f"mma_at_{t}"] = float(np.mean(errs <= t)) if m else 0.0
    # repeatability by plain loops, distances in image-k pixels
    proj = [ref_project(H, *p) for p in q_xy]
    s1 = [p for p in proj if ref_inside(p, *sizek)]
    Hinv = np.linalg.inv(H)
    s2 = [tuple(t) for t in t_xy if ref_inside(ref_project(Hinv, *t), *size1)]
    r = params.repeatability_px
    rep1 = sum(1 for p in s1 if any(math.hypot(p[0] - t[0], p[1] - t[1]) <= r for t in s2))
    rep2 = sum(1 for t in s2 if any(math.hypot(p[0] - t[0], p[1] - t[1]) <= r for p in s1))
    out.update(n_shared_1=len(s1), n_shared_2=len(s2), n_repeated_1=rep1, n_repeated_2=rep2)
    out["repeatability"] = (rep1 + rep2) / (len(s1) + len(s2)) if s1 or s2 else math.nan
    shared_match = [ref_inside(proj[i], *sizek) for i in ia]
    out["ms_correct"] = int(sum(1 for e, s in zip(errs, shared_match) if s and e <= params.tau_px))
    out["matching_score"] = out["ms_correct"] / len(s1) if s1 else 0.0
    return out


def random_scene(seed, n1=150, n2=170, dim=32, binary=False, H=H_TRUE):
    """Image-k keypoints: noisy projections of a subset of image-1 keypoints plus clutter.

    Descriptors of corresponding keypoints are noisy copies, so MNN yields a mix of correct
    and wrong matches; coarse descriptors (integers / few bytes) add exact ties.
    """
    rng = np.random.default_rng(seed)
    q_xy = np.column_stack([rng.uniform(-20, W1 + 20, n1), rng.uniform(-20, H1 + 20, n1)])
    sub = rng.choice(n1, size=min(n1, n2 * 2 // 3), replace=False)
    h = np.column_stack([q_xy[sub], np.ones(len(sub))]) @ H.T
    proj = h[:, :2] / h[:, 2:]
    noise = rng.normal(scale=rng.choice([0.3, 1.5, 4.0], size=(len(sub), 1)), size=(len(sub), 2))
    t_xy = np.concatenate([proj + noise, np.column_stack([rng.uniform(0, WK, n2 - len(sub)), rng.uniform(0, HK, n2 - len(sub))])])
    if binary:
        q_desc = rng.integers(0, 256, size=(n1, 4), dtype=np.uint8)
        flips = rng.integers(0, 256, size=(len(sub), 4), dtype=np.uint8) & rng.integers(0, 256, size=(len(sub), 4), dtype=np.uint8) & rng.integers(0, 256, size=(len(sub), 4), dtype=np.uint8)
        t_desc = np.concatenate([q_desc[sub] ^ flips, rng.integers(0, 256, size=(n2 - len(sub), 4), dtype=np.uint8)])
    else:
        q_desc = rng.integers(0, 4, size=(n1, dim)).astype(np.float32)
        t_desc = np.concatenate([q_desc[sub] + rng.integers(-1, 2, size=(len(sub), dim)), rng.integers(0, 4, size=(n2 - len(sub), dim))]).astype(np.float32)
    perm = rng.permutation(n2)
    return q_xy, q_desc, t_xy[perm], t_desc[perm]


# ----------------------------------------------------------------------------- per-pair metrics


@pytest.mark.parametrize("seed,binary", [(0, False), (1, False), (2, True), (3, True), (4, False)])
def test_match_pair_equals_direct_computation(seed, binary):
    params = MatchingParams()
    scene = random_scene(seed, binary=binary)
    got = match_pair(*scene, H_TRUE, (W1, H1), (WK, HK), params)
    exp = ref_stats(*scene, H_TRUE, (W1, H1), (WK, HK), params)
    assert got["n_matches"] > 20 and 0 < got["n_correct"] < got["n_matches"]  # a non-trivial scene
    for key, value in exp.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=0), key
    assert got["n_keypoints_1"] == len(scene[0]) and got["n_keypoints_2"] == len(scene[2])
    for v in got.values():
        assert type(v) in (int, float)


def test_keys_for_fractional_thresholds():
    params = MatchingParams(mma_thresholds=(0.5, 1, 2.5))
    scene = random_scene(5)
    got = match_pair(*scene, H_TRUE, (W1, H1), (WK, HK), params)
    exp = ref_stats(*scene, H_TRUE, (W1, H1), (WK, HK), MatchingParams(mma_thresholds=(0.5, 1.0, 2.5)))
    for t, name in ((0.5, "0.5"), (1.0, "1"), (2.5, "2.5")):
        assert threshold_key(t) == name
        assert got[f"mma_correct_at_{name}"] == exp[f"mma_correct_at_{t}"]


def test_points_behind_the_camera_have_infinite_error():
    H = np.array([[1.0, 0, 0], [0, 1.0, 0], [-0.01, 0, 1.0]])  # w <= 0 for x >= 100
    err = reprojection_errors(H, np.array([[10.0, 5.0], [100.0, 5.0], [150.0, 5.0]]), np.zeros((3, 2)))
    assert np.isfinite(err[0]) and np.isinf(err[1]) and np.isinf(err[2])
    # in a pair: matches whose image-1 keypoint lands behind the camera are never correct
    q_xy = np.array([[10.0, 5.0], [20.0, 8.0], [150.0, 5.0]])
    desc = np.eye(3, dtype=np.float32)
    t_xy = np.array([[10.0 / 0.9, 5.0 / 0.9], [20.0 / 0.8, 8.0 / 0.8], [0.0, 0.0]])
    got = match_pair(q_xy, desc, t_xy, desc, H, (W1, H1), (WK, HK))
    assert got["n_matches"] == 3 and got["n_correct"] == 2 and got["mma_correct_at_10"] == 2
    assert got["n_shared_1"] == 2


def test_no_match_and_too_few_matches():
    q_xy, q_desc, t_xy, t_desc = random_scene(6, n1=40, n2=30)
    # image k without keypoints: no data (NaN), not a 0.0 result
    got = match_pair(q_xy, q_desc, t_xy[:0], t_desc[:0], H_TRUE, (W1, H1), (WK, HK))
    assert got["n_matches"] == 0 and got["n_correct"] == 0
    assert math.isnan(got["precision"]) and math.isnan(got["matching_score"])
    assert all(math.isnan(got[f"mma_at_{t}"]) and got[f"mma_correct_at_{t}"] == 0 for t in range(1, 11))
    # keypoints on both sides but no mutual match (disjoint descriptors can still match; force none
    # by giving image k one keypoint far outside): precision and MMA count as 0
    far = match_pair(q_xy[:1], q_desc[:1], np.array([[1e6, 1e6]]), t_desc[:1], H_TRUE, (W1, H1), (WK, HK))
    assert far["n_matches"] == 1 and far["precision"] == 0.0 and far["mma_at_10"] == 0.0
    # no keypoint in image k: no data for the homography and repeatability either (NaN, not inf / 0)
    assert got["homography_found"] == 0 and got["n_inliers"] == 0 and math.isnan(got["corner_error"])
    assert got["n_shared_2"] == 0 and got["n_shared_1"] > 0
    assert got["n_repeated_1"] == 0 and math.isnan(got["repeatability"])
    # nothing at all: every ratio NaN, counts 0
    none = match_pair(q_xy[:0], q_desc[:0], t_xy[:0], t_desc[:0], H_TRUE, (W1, H1), (WK, HK))
    assert math.isnan(none["repeatability"]) and math.isnan(none["precision"]) and math.isnan(none["corner_error"])
    # three exact correspondences: three correct matches, but no homography (needs >= 4)
    src = np.array([[100.0, 100.0], [300.0, 120.0], [200.0, 400.0]])
    dst = np.array([ref_project(H_TRUE, *p) for p in src])
    desc = np.eye(3, dtype=np.float32)
    got = match_pair(src, desc, dst, desc, H_TRUE, (W1, H1), (WK, HK))
    assert got["n_matches"] == 3 and got["precision"] == 1.0 and got["mma_at_1"] == 1.0
    assert got["homography_found"] == 0 and got["corner_error"] == math.inf


# ----------------------------------------------------------------------------- homography


# cv2.findHomography converts the points to float32 internally, so correspondences are built to
# be exactly representable in float32: an integer grid under a homography with dyadic entries
# (projections are dyadic rationals) or, for a projective H, four exact correspondences from
# which H_true is solved in float64. Generic float64 data gives errors ~1e-5 px (checked below).
H_DYADIC = np.array([[0.75, 0.125, 20.0], [-0.0625, 1.25, -8.0], [0.0, 0.0, 1.0]])


def grid_correspondences(H, shift=(0.0, 0.0)):
    xs, ys = np.meshgrid(np.arange(10.0, 631.0, 124.0), np.arange(10.0, 471.0, 115.0))
    src = np.column_stack([xs.ravel(), ys.ravel()])
    dst = np.array([ref_project(H, *p) for p in src]) + np.array(shift)
    return src, dst


def homography_from_4(src, dst):
    """H (h33 = 1) through four correspondences: the 8x8 DLT system solved in float64."""
    A, b = [], []
    for (x, y), (u, v) in zip(src, dst):
        A.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        b.append(u)
        A.append([0, 0, 0, x, y, 1, -v * x, -v * y])
        b.append(v)
    return np.append(np.linalg.solve(np.array(A, float), np.array(b, float)), 1.0).reshape(3, 3)


def test_exact_correspondences_give_zero_corner_error():
    src, dst = grid_correspondences(H_DYADIC)
    assert np.array_equal(dst.astype(np.float32), dst)
    desc = np.eye(len(src), dtype=np.float32)
    got = match_pair(src, desc, dst, desc, H_DYADIC, (W1, H1), (WK, HK))
    assert got["n_matches"] == len(src) and got["homography_found"] == 1 and got["n_inliers"] == len(src)
    assert got["corner_error"] < 1e-6
    # projective H through four float32-exact correspondences
    src4 = np.array([[0.0, 0.0], [600.0, 20.0], [30.0, 470.0], [620.0, 450.0]])
    dst4 = np.array([[12.25, 7.5], [580.0, -3.75], [40.5, 500.25], [610.75, 430.0]])
    H4 = homography_from_4(src4, dst4)
    got = match_pair(src4, np.eye(4, dtype=np.float32), dst4, np.eye(4, dtype=np.float32), H4, (W1, H1), (WK, HK))
    assert got["homography_found"] == 1 and got["corner_error"] < 1e-6
    # generic float64 projections: limited by OpenCV's internal float32 points
    src, dst = grid_correspondences(H_TRUE)
    got = match_pair(src, desc, dst, desc, H_TRUE, (W1, H1), (WK, HK))
    assert got["corner_error"] < 1e-4


def test_translated_correspondences_give_the_translation_as_corner_error():
    """Correspondences moved by (2, 0) px: H_est = T(2, 0) H_true, so every corner is off by 2."""
    src, dst = grid_correspondences(H_DYADIC, shift=(2.0, 0.0))
    desc = np.eye(len(src), dtype=np.float32)
    got = match_pair(src, desc, dst, desc, H_DYADIC, (W1, H1), (WK, HK), MatchingParams(ransac_seed=3))
    assert got["homography_found"] == 1 and got["n_matches"] == len(src) and got["n_correct"] == len(src)
    assert got["mma_correct_at_1"] == 0 and got["mma_correct_at_2"] == len(src)
    assert got["corner_error"] == pytest.approx(2.0, abs=1e-6)
    # the same by hand: T H_true maps each corner exactly 2 px to the right
    T = np.array([[1.0, 0, 2.0], [0, 1.0, 0], [0, 0, 1.0]])
    assert corner_error(T @ H_TRUE, H_TRUE, (W1, H1)) == pytest.approx(2.0, abs=1e-9)
    # a 3-4-5 shift: every corner error is 5
    S = np.array([[1.0, 0, 3.0], [0, 1.0, -4.0], [0, 0, 1.0]])
    assert corner_error(S @ H_TRUE, H_TRUE, (W1, H1)) == pytest.approx(5.0, abs=1e-9)


def test_corner_convention_and_failures():
    np.testing.assert_array_equal(image_corners((640, 480)), [[0, 0], [639, 0], [0, 479], [639, 479]])
    # an estimate differing only at the (w-1, h-1) corner region: hand-computed mean
    H_est = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    H_true = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    H_est2 = H_est.copy()
    H_est2[0, 0] = 1.01  # x' = 1.01 x: corners with x = w-1 move by 0.01 (w-1)
    assert corner_error(H_est2, H_true, (101, 51)) == pytest.approx((0 + 1.0 + 0 + 1.0) / 4)
    assert corner_error(None, H_true, (101, 51)) == math.inf
    behind = np.array([[1.0, 0, 0], [0, 1.0, 0], [-1.0, 0, 1.0]])  # corner x = 100 maps behind
    assert corner_error(behind, H_true, (101, 51)) == math.inf
    assert estimate_homography(np.zeros((3, 2)), np.zeros((3, 2))) == (None, 0)
    assert estimate_homography(np.zeros((6, 2)), np.zeros((6, 2)))[0] is None  # degenerate


def test_ransac_is_deterministic_with_outliers():
    rng = np.random.default_rng(11)
    src, dst = grid_correspondences(H_DYADIC)
    src = np.concatenate([src, rng.uniform(0, 600, (40, 2))])
    dst = np.concatenate([dst, rng.uniform(0, 600, (40, 2))])
    runs = [estimate_homography(src, dst, 3.0, seed) for seed in (0, 0, 1)]
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1] >= 30
    assert corner_error(runs[0][0], H_DYADIC, (W1, H1)) < 1e-6
    assert corner_error(runs[2][0], H_DYADIC, (W1, H1)) < 1e-6


# ----------------------------------------------------------------------------- aggregates


def loftr_style_auc(errors, thr):
    """Independent transcription of the LoFTR recipe: prepend 0, recall = linspace, trapezoid."""
    e = [0.0] + sorted(errors)
    recall = list(np.linspace(0, 1, len(e)))
    last = int(np.searchsorted(e, thr))
    y = recall[:last] + [recall[last - 1]]
    x = e[:last] + [thr]
    return float(np.trapezoid(y, x) / thr)


def test_auc_and_accuracy_hand_worked():
    errors = [4.0, 1.0, math.inf, 2.0]
    # curve through (0,0), (1,.25), (2,.5), (4,.75); flat at the last recall up to thr
    # thr 3: 0.125 + 0.375 + 0.5 = 1.0 -> 1/3; thr 5: 0.125 + 0.375 + 1.25 + 0.75 = 2.5 -> 0.5;
    # thr 10: 0.125 + 0.375 + 1.25 + 4.5 = 6.25 -> 0.625
    np.testing.assert_allclose(homography_auc(errors, (3, 5, 10)), [1 / 3, 0.5, 0.625], rtol=1e-15)
    np.testing.assert_allclose(homography_accuracy(errors, (1, 3, 5)), [0.25, 0.5, 0.75])
    # an error equal to the threshold counts for accuracy (<=) but not for the AUC (LoFTR: <)
    assert homography_auc([3.0], (3,))[0] == 0.0 and homography_accuracy([3.0], (3,))[0] == 1.0
    assert homography_auc([0.0, 0.0], (5,))[0] == 1.0
    assert homography_auc([math.inf], (5,))[0] == 0.0
    assert np.isnan(homography_auc([], (3, 5))).all() and np.isnan(homography_accuracy([], (1,))).all()


def test_auc_matches_loftr_recipe_on_random_errors():
    rng = np.random.default_rng(12)
    errors = list(np.concatenate([rng.exponential(4.0, 200), [np.inf] * 7, np.round(rng.uniform(0, 12, 30))]))
    for thr in (3.0, 5.0, 10.0):
        assert homography_auc(errors, (thr,))[0] == pytest.approx(loftr_style_auc(errors, thr), rel=1e-12)


# ----------------------------------------------------------------------------- validation


@pytest.mark.bad_input
def test_validation():
    q_xy, q_desc, t_xy, t_desc = random_scene(13, n1=20, n2=20)
    with pytest.raises(DataError, match="keypoints but descriptor"):
        match_pair(q_xy[:-1], q_desc, t_xy, t_desc, H_TRUE, (W1, H1), (WK, HK))
    with pytest.raises(DataError, match=r"\[N, 2\]"):
        match_pair(q_xy[:, :1], q_desc, t_xy, t_desc, H_TRUE, (W1, H1), (WK, HK))
    with pytest.raises(DataError, match="3x3"):
        match_pair(q_xy, q_desc, t_xy, t_desc, np.eye(2), (W1, H1), (WK, HK))
    with pytest.raises(DataError, match="singular"):
        match_pair(q_xy, q_desc, t_xy, t_desc, np.zeros((3, 3)), (W1, H1), (WK, HK))
    with pytest.raises(DataError, match="mismatch"):
        match_pair(q_xy, q_desc, t_xy, t_desc.astype(np.uint8), H_TRUE, (W1, H1), (WK, HK))
    with pytest.raises(DataError, match="target_size"):
        match_pair(q_xy, q_desc, t_xy, t_desc, H_TRUE, (W1, H1), (0, HK))
    with pytest.raises(ValueError):
        MatchingParams(tau_px=0)


# ------------------------------------------------------------------------------------------------
# Merged from test_core_matching.py:
# Matching metrics of one pair (descbench.metrics.matching): validation messages, inclusive
# thresholds, pairs whose keypoints all leave the other image, RANSAC settings, corner errors and
# the keypoint-only repeatability, each against a hand-worked example or a brute force.
#
# Written to kill the mutants that survived a mutation-testing run (benchmarks/README.md,
# "Mutation testing").
# ------------------------------------------------------------------------------------------------


I3 = np.eye(3)


def one_hot(n, d=None):
    """Descriptors whose mutual nearest neighbours are exactly i <-> i."""
    return np.eye(n, d or n, dtype=np.float32) * 10


# ----------------------------------------------------------------------------- validation


@pytest.mark.bad_input
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


@pytest.mark.bad_input
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


@pytest.mark.bad_input
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


@pytest.mark.bad_input
def test_homography_auc_thresholds_must_be_positive():
    with pytest.raises(ValueError, match=r"^AUC thresholds must be > 0, got 0\.0$"):
        homography_auc([1.0, 2.0], thresholds=(0,))
    # thresholds below one pixel are fine: errors 0.25 and inf -> area (0.5 * 0.25 * 0.5 + 0.25 * 0.5) / 0.5
    got = homography_auc([0.25, math.inf], thresholds=(0.5,))
    assert got.tolist() == [pytest.approx((0.5 * 0.25 * 0.5 + 0.25 * 0.5) / 0.5, rel=1e-15)]


def test_homography_aggregates_accept_integer_lists():
    assert homography_accuracy([0, 2, 7], thresholds=(1, 5)).tolist() == [1 / 3, 2 / 3]
    assert homography_auc([0, 0], thresholds=(2,)).tolist() == [1.0]


# --------------------------------------------------------------------------- glue-factory's conventions


def test_image_corners_in_both_conventions():
    from descbench.metrics.matching import CORNER_CONVENTIONS, image_corners

    assert CORNER_CONVENTIONS == ("pixel_centres", "image_edges")
    assert image_corners((4, 3)).tolist() == [[0, 0], [3, 0], [0, 2], [3, 2]]
    assert image_corners((4, 3), "image_edges").tolist() == [[0, 0], [4, 0], [4, 3], [0, 3]]
    with pytest.raises(ValueError, match="'edges' is not one of pixel_centres, image_edges"):
        image_corners((4, 3), "edges")


def test_corner_error_image_edges_by_hand():
    """H_est = 2x scaling, H_true = identity, a 4 x 3 image: the corners move by their own distance
    from the origin. glue-factory's corners (0,0),(4,0),(4,3),(0,3): 0, 4, 5, 3 -> mean 3;
    the pixel centres (0,0),(3,0),(0,2),(3,2): 0, 3, 2, sqrt(13)."""
    from descbench.metrics.matching import corner_error

    S = np.diag([2.0, 2.0, 1.0])
    assert corner_error(S, np.eye(3), (4, 3), corners="image_edges") == 3.0
    assert corner_error(S, np.eye(3), (4, 3)) == pytest.approx((0 + 3 + 2 + np.sqrt(13)) / 4, abs=1e-15)
    assert corner_error(None, np.eye(3), (4, 3), corners="image_edges") == np.inf  # a failed estimate


def test_homography_auc_rounded_as_gluefactory():
    """errors 0.5, 2, inf (a failure): at 5 px the recall polyline (0,0), (0.5,1/3), (2,2/3), (5,2/3)
    has area 1/12 + 3/4 + 2 = 17/6, AUC 17/30 = 0.5666..; glue-factory prints it rounded to 4."""
    from descbench.metrics.matching import homography_auc

    assert homography_auc([0.5, 2.0, np.inf], [5.0])[0] == pytest.approx(17 / 30, abs=1e-15)
    assert homography_auc([0.5, 2.0, np.inf], [5.0], decimals=4).tolist() == [0.5667]
    assert homography_auc([0.5, 2.0, np.inf], [3.0], decimals=4).tolist() == [0.5]


def test_sym_homography_error_by_hand():
    from descbench.metrics.matching import sym_homography_error

    T = np.array([[1.0, 0, 3], [0, 1, 4], [0, 0, 1]])
    # (the pseudo-inverse, as glue-factory's torch.pinverse, is the inverse to ~1e-16)
    np.testing.assert_allclose(sym_homography_error([[1, 1], [1, 1]], [[4, 5], [4, 6]], T), [0.0, 1.0], rtol=0, atol=1e-12)
    # scaling by 2: forward |2 - 3| = 1, backward |1.5 - 1| = 0.5
    np.testing.assert_allclose(sym_homography_error([[1, 0]], [[3, 0]], np.diag([2.0, 2.0, 1.0])), [0.75], rtol=0, atol=1e-12)


@pytest.mark.bad_input
def test_sym_homography_error_refuses_mismatched_points_and_a_bad_matrix():
    from descbench.metrics.matching import sym_homography_error

    with pytest.raises(DataError, match="2 points in image 0 but 1 in image 1"):
        sym_homography_error([[0, 0], [1, 1]], [[0, 0]], np.eye(3))
    with pytest.raises(DataError, match=r"finite 3 x 3 matrix, got shape \(2, 3\)"):
        sym_homography_error([[0, 0]], [[0, 0]], np.eye(3)[:2])


# ----------------------------------------------------------------------------- given matches, the symmetric error


@pytest.mark.bad_input
@pytest.mark.parametrize("ia, ib", [([0, 1], [0]), ([-1], [0]), ([3], [0]), ([0], [-1]), ([0], [2])])
def test_given_matches_out_of_range_are_refused(ia, ib):
    """Each clause of matched_pair_stats' check alone (3 image-1 and 2 image-k keypoints): unequal
    lengths, a negative index or one equal to the number of keypoints, on either side."""
    from descbench.metrics.matching import matched_pair_stats

    q_xy, t_xy = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]), np.array([[1.0, 1.0], [2.0, 2.0]])
    with pytest.raises(DataError, match=f"^matches out of range or of unequal length: {len(ia)} / {len(ib)} indices "
                                        "for 3 and 2 keypoints; rerun the matcher stage$"):
        matched_pair_stats(q_xy, t_xy, np.eye(3), (10, 10), (10, 10), ia, ib)
    # the largest valid indices are accepted
    matched_pair_stats(q_xy, t_xy, np.eye(3), (10, 10), (10, 10), [2], [1])


def test_sym_homography_error_counts_points_and_is_quiet_at_infinity():
    """Unequal point counts are named as N0 / N1; a point H maps to infinity (w = 0) gives no
    finite error, and no NumPy warning."""
    import warnings

    from descbench.metrics.matching import sym_homography_error

    with pytest.raises(DataError, match="^sym_homography_error: 3 points in image 0 but 2 in image 1$"):
        sym_homography_error(np.zeros((3, 2)), np.zeros((2, 2)), np.eye(3))
    H = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 1.0]])  # w = x + 1: x = -1 goes to infinity
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = sym_homography_error([[-1.0, 0.0], [0.0, 0.0]], [[5.0, 5.0], [0.0, 0.0]], H)
    assert not np.isfinite(e[0]) and e[1] == pytest.approx(0.0, abs=1e-12)  # (-inf, NaN) there: NaN, as glue-factory's
