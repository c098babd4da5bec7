"""descbench.metrics.pose: relative pose and epipolar errors against independent references
(OpenCV's Rodrigues angles, quaternion angles, explicit point-line distances in a loop, synthetic
two-camera scenes whose truth is exact) and glue-factory's documented conventions."""

from __future__ import annotations

import doctest

import cv2
import numpy as np
import pytest

from descbench.metrics import pose as P


def rodrigues(rvec) -> np.ndarray:
    return cv2.Rodrigues(np.asarray(rvec, dtype=np.float64))[0]


def test_the_examples_run():
    failed, attempted = doctest.testmod(P)
    assert attempted >= 12 and failed == 0


@pytest.mark.parametrize("seed", range(5))
def test_the_rotation_error_is_the_angle_of_the_relative_rotation(seed):
    """Reference: the relative rotation's axis-angle (OpenCV's Rodrigues) and its quaternion's
    scalar part, 2 acos(|w|)."""
    rng = np.random.default_rng(seed)
    R_gt = rodrigues(rng.normal(size=3))
    delta = rng.uniform(0.0, 3.0)  # (near pi, arccos loses the digits the reference keeps)
    axis = rng.normal(size=3)
    R_est = R_gt @ rodrigues(axis / np.linalg.norm(axis) * delta)
    assert P.rotation_error(R_est, R_gt) == pytest.approx(np.rad2deg(delta), abs=1e-6)
    rel = R_est.T @ R_gt
    w = 0.5 * np.sqrt(max(1.0 + np.trace(rel), 0.0))
    assert P.rotation_error(R_est, R_gt) == pytest.approx(np.rad2deg(2 * np.arccos(min(w, 1.0))), abs=1e-6)
    assert P.rotation_error(R_gt, R_gt) == pytest.approx(0.0, abs=1e-5)  # arccos near 1: ~sqrt(eps) rad


def test_the_translation_error_ignores_the_sign_and_the_scale():
    t_gt = np.array([0.3, -0.4, 1.2])
    axis = np.cross(t_gt, [1.0, 0.0, 0.0])
    for deg in (0.0, 10.0, 60.0, 89.0, 91.0, 150.0, 180.0):
        t_est = 3.7 * rodrigues(axis / np.linalg.norm(axis) * np.deg2rad(deg)) @ t_gt
        assert P.translation_error(t_est, t_gt) == pytest.approx(min(deg, 180.0 - deg), abs=1e-5), deg
        assert P.translation_error(-t_est, t_gt) == pytest.approx(min(deg, 180.0 - deg), abs=1e-5), deg
    # glue-factory's ignore_gt_t_thr: a pure rotation's translation error is 0
    assert P.translation_error([1.0, 0.0, 0.0], [0.0, 1e-3, 0.0], ignore_gt_t_thr=0.01) == 0.0
    assert P.translation_error([1.0, 0.0, 0.0], [0.0, 1e-3, 0.0]) == pytest.approx(90.0)
    # a zero estimate: glue-factory's eps keeps the angle defined (arccos 0 = 90)
    assert P.translation_error([0.0, 0.0, 0.0], [0.0, 0.0, 1.0]) == pytest.approx(90.0)


def test_the_pose_error_is_the_larger_of_the_two_and_inf_on_failure():
    R_gt, t_gt = rodrigues([0.0, 0.2, 0.0]), np.array([1.0, 0.0, 0.1])
    R_est = R_gt @ rodrigues([0.0, 0.0, np.deg2rad(3.0)])
    t_est = rodrigues([0.0, 0.0, np.deg2rad(7.0)]) @ t_gt
    assert P.relative_pose_error(R_est, t_est, R_gt, t_gt) == pytest.approx(max(3.0, P.translation_error(t_est, t_gt)))
    assert P.translation_error(t_est, t_gt) > 3.0  # the translation decides here
    assert P.relative_pose_error(R_est, t_gt, R_gt, t_gt) == pytest.approx(3.0, abs=1e-6)
    assert P.relative_pose_error(None, t_est, R_gt, t_gt) == np.inf
    assert P.relative_pose_error(R_est, None, R_gt, t_gt) == np.inf


def _scene(seed: int, n: int = 50):
    """Two calibrated cameras and n 3D points in front of both: normalised images, pixels, K."""
    rng = np.random.default_rng(seed)
    R, t = rodrigues(rng.normal(scale=0.2, size=3)), rng.normal(size=3)
    X0 = np.column_stack([rng.uniform(-2, 2, n), rng.uniform(-2, 2, n), rng.uniform(4, 8, n)])
    X1 = X0 @ R.T + t
    K = np.array([[500.0, 0.0, 320.5], [0.0, 480.0, 240.5], [0.0, 0.0, 1.0]])
    return R, t, X0[:, :2] / X0[:, 2:], X1[:, :2] / X1[:, 2:], K


@pytest.mark.parametrize("seed", range(3))
def test_true_matches_have_no_epipolar_error_and_moved_ones_their_line_distance(seed):
    R, t, p0, p1, _ = _scene(seed)
    E = P.essential_matrix(R, t)
    assert np.abs(P.epipolar_errors(p0, p1, E)).max() < 1e-12
    # each image-1 point moved: the reference is the explicit distance of each point to its
    # epipolar line in both images, one match at a time
    moved = p1 + np.random.default_rng(seed + 10).normal(scale=1e-3, size=p1.shape)
    got = P.epipolar_errors(p0, moved, E)
    for i in range(len(p0)):
        a, b = np.append(p0[i], 1.0), np.append(moved[i], 1.0)
        line1, line0 = E @ a, E.T @ b
        dist1 = abs(line1 @ b) / np.hypot(line1[0], line1[1])
        dist0 = abs(line0 @ a) / np.hypot(line0[0], line0[1])
        assert got[i] == pytest.approx((dist0 + dist1) / 2, rel=1e-9)


def test_a_point_at_an_epipole_is_clamped_as_glue_factory_clamps():
    """For a forward motion the epipole of image 0 is (0, 0): E p0 has no x, y part there, and the
    squared norm 0 becomes 1e-6."""
    E = P.essential_matrix(np.eye(3), [0.0, 0.0, 1.0])
    p0, p1 = np.array([[0.0, 0.0]]), np.array([[0.0, 0.0]])
    assert P.epipolar_errors(p0, p1, E).tolist() == [0.0]  # |p1^T E p0| = 0
    E2 = P.essential_matrix(rodrigues([0.0, 0.0, 0.1]), [0.0, 0.0, 1.0])
    p1 = np.array([[0.3, 0.2]])
    l1, l0 = E2 @ [0.0, 0.0, 1.0], E2.T @ [0.3, 0.2, 1.0]
    num = abs(np.array([0.3, 0.2, 1.0]) @ l1)
    expect = num * (1 / np.sqrt(max(l1[0] ** 2 + l1[1] ** 2, 1e-6)) + 1 / np.sqrt(max(l0[0] ** 2 + l0[1] ** 2, 1e-6))) / 2
    assert l1[0] ** 2 + l1[1] ** 2 < 1e-6  # the clamp is what decides
    assert P.epipolar_errors(p0, p1, E2)[0] == pytest.approx(expect, rel=1e-12)


def test_pixels_are_normalised_with_the_cameras_convention():
    R, t, p0, p1, K = _scene(4)
    pix0 = p0 * [K[0, 0], K[1, 1]] + K[:2, 2]  # pixels in K's convention
    assert np.abs(P.normalized_points(pix0, K)[:, :2] - p0).max() < 1e-12
    # descbench keypoints (pixel centre at 0) with a COLMAP K (centre at 0.5): offset 0.5
    assert np.abs(P.normalized_points(pix0 - 0.5, K, offset=0.5)[:, :2] - p0).max() < 1e-12
    E = P.essential_matrix(R, t)
    pix1 = p1 * [K[0, 0], K[1, 1]] + K[:2, 2]
    assert P.epipolar_errors(P.normalized_points(pix0, K), P.normalized_points(pix1, K), E).max() < 1e-12


def test_the_epipolar_precision_counts_strictly_below_and_is_0_without_matches():
    e = np.array([0.0, 1e-4, 2e-4, 5e-4, 9.99e-4, 1e-3, 0.5])
    assert P.epipolar_precision(e).tolist() == [1 / 7, 3 / 7, 5 / 7]
    assert P.epipolar_precision([], thresholds=(1.0,)).tolist() == [0.0]


def test_the_pose_auc_is_glue_factorys_rounded_area_with_failures_counted():
    """Reference: the area under the recall curve by fine numerical integration (1e6 steps)."""
    errors = np.array([0.5, 3.0, 4.0, 12.0, 30.0, np.inf])
    for thr in P.POSE_AUC_THRESHOLDS:
        x = np.linspace(0.0, thr, 1_000_001)
        # LoFTR's recall curve: the polyline through (0, 0) and (e_k, k / N) for the errors below
        # thr, then flat at k / N up to thr (np.interp holds the last value)
        e = np.sort(errors[errors < thr])
        xs, ys = np.concatenate([[0.0], e]), np.arange(len(e) + 1) / len(errors)
        area = np.trapezoid(np.interp(x, xs, ys), x) / thr
        assert P.pose_auc(errors, [thr])[0] == pytest.approx(round(area, 4), abs=1e-4)
    assert P.pose_auc(errors).tolist() == np.round(P.pose_auc(errors), 4).tolist()


@pytest.mark.bad_input
@pytest.mark.parametrize("call, message", [
    (lambda: P.rotation_error(np.eye(2), np.eye(3)), "R_est: expected a finite 3x3 rotation matrix"),
    (lambda: P.rotation_error(np.eye(3), np.full((3, 3), np.nan)), "R_gt: expected a finite 3x3"),
    (lambda: P.translation_error([1.0, 0.0], [0.0, 0.0, 1.0]), "t_est: expected a finite 3-vector, got 2 values"),
    (lambda: P.epipolar_errors(np.zeros((3, 2)), np.zeros((2, 2)), np.eye(3)), "one point each per match, got 3 and 2"),
    (lambda: P.epipolar_errors(np.zeros((3, 4)), np.zeros((3, 2)), np.eye(3)), r"p0: expected points \[N, 2\] or \[N, 3\]"),
    (lambda: P.normalized_points([[1.0, 2.0]], np.zeros((3, 3))), "K: expected pinhole intrinsics"),
    (lambda: P.normalized_points([[1.0, 2.0]], np.eye(2)), "K: expected finite 3x3 intrinsics"),
    (lambda: P.pinhole_intrinsics([[1.0, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "K1"), "K1: expected pinhole"),
])
def test_bad_input_is_an_error_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- every bad argument is named; each clause of a compound check on its own ---------------------

GOOD_E = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # [t]x for t = (1, 0, 0)


@pytest.mark.bad_input
@pytest.mark.parametrize("call, name", [
    (lambda: P.epipolar_errors(np.zeros((3, 2)), np.zeros((3, 4)), GOOD_E), "p1"),
    (lambda: P.epipolar_errors(np.zeros((3, 2)), np.zeros(3), GOOD_E), "p1"),
    (lambda: P.epipolar_errors(np.zeros((3, 2)), np.zeros((3, 2)), np.eye(2)), "E"),
    (lambda: P.epipolar_errors(np.zeros((3, 2)), np.zeros((3, 2)), np.full((3, 3), np.nan)), "E"),
    (lambda: P.essential_matrix(np.eye(2), [1.0, 0.0, 0.0]), "R"),
    (lambda: P.essential_matrix(np.diag([1.0, 1.0, np.inf]), [1.0, 0.0, 0.0]), "R"),
    (lambda: P.skew([1.0, 2.0]), "v"),
    (lambda: P.skew([1.0, np.nan, 3.0]), "v"),
    (lambda: P.translation_error([1.0, 0.0, 0.0], [0.0, 1.0]), "t_gt"),
    (lambda: P.translation_error([1.0, 0.0, 0.0], [0.0, np.nan, 1.0]), "t_gt"),
])
def test_each_bad_argument_is_named_in_the_error(call, name):
    """The message starts with the name of the one bad argument (the others are valid)."""
    with pytest.raises(ValueError, match=rf"^{name}: expected"):
        call()


K_OK = [[500.0, 0.0, 320.0], [0.0, 480.0, 240.0], [0.0, 0.0, 1.0]]


def _with(row, col, value):
    K = np.array(K_OK)
    K[row, col] = value
    return K


@pytest.mark.bad_input
@pytest.mark.parametrize("K, why", [
    (_with(0, 1, 0.5), "skew K[0, 1]"),
    (_with(1, 0, 0.5), "K[1, 0]"),
    (_with(2, 0, 1e-3), "K[2, 0]"),
    (_with(2, 1, 1e-3), "K[2, 1]"),
    (_with(2, 2, 2.0), "K[2, 2] != 1"),
    (_with(0, 0, 0.0), "fx = 0"),
    (_with(1, 1, 0.0), "fy = 0"),
    (_with(0, 0, -500.0), "fx < 0"),
    (_with(1, 1, -480.0), "fy < 0"),
])
def test_each_clause_of_the_pinhole_check_rejects_on_its_own(K, why):
    """One element of an otherwise valid pinhole K wrong at a time: each is rejected, naming K."""
    with pytest.raises(ValueError, match=r"^K_test: expected pinhole intrinsics"):
        P.pinhole_intrinsics(K, "K_test")


def test_valid_intrinsics_come_back_as_float64():
    """The docstring's contract: K as float64, also from integer input (a K written in pixels)."""
    K = P.pinhole_intrinsics(np.array([[500, 0, 320], [0, 480, 240], [0, 0, 1]]))
    assert K.dtype == np.float64 and K.tolist() == K_OK


# --- boundaries: the clip of arccos, ignore_gt_t_thr, empty input -----------------------------------

def test_a_180_degree_rotation_whose_cosine_rounds_below_minus_1_is_180():
    """R = 2 n n^T - I is the rotation by 180 degrees about n; for n = (1, 3, 3) / sqrt(19) its
    trace rounds below -1 in float64, so (trace - 1) / 2 < -1: the clip keeps arccos defined."""
    n = np.array([1.0, 3.0, 3.0]) / np.sqrt(19.0)
    R = 2.0 * np.outer(n, n) - np.eye(3)
    assert (np.trace(R) - 1.0) / 2.0 < -1.0  # the case the clip exists for
    assert P.rotation_error(np.eye(3), R) == 180.0
    assert P.rotation_error(R, np.eye(3)) == 180.0


def test_parallel_and_antiparallel_translations_whose_cosine_rounds_past_1_are_0():
    """t . t / |t|^2 rounds to 1 + 2^-52 for t = (0.1, 0.1, 0.3) (and -t . t to -1 - 2^-52): the
    angle is 0 (180 for -t, folded to 0 by the sign freedom), never NaN."""
    t = np.array([0.1, 0.1, 0.3])
    n = float(np.linalg.norm(t) * np.linalg.norm(t))
    assert float(t @ t) / n > 1.0 and float(-t @ t) / n < -1.0  # the cases the clip exists for
    assert P.translation_error(t, t) == 0.0
    assert P.translation_error(-t, t) == 0.0


def test_relative_pose_error_passes_ignore_gt_t_thr_and_its_default_is_0():
    """No rotation error; t_est orthogonal to t_gt (90 degrees). glue-factory's default 0 never
    ignores t_gt, even a short one (|t_gt| = 0.5); a threshold above |t_gt| makes the error 0."""
    R = np.eye(3)
    assert P.relative_pose_error(R, [1.0, 0.0, 0.0], R, [0.0, 0.0, 0.5]) == pytest.approx(90.0)
    assert P.relative_pose_error(R, [1.0, 0.0, 0.0], R, [0.0, 1e-3, 0.0], ignore_gt_t_thr=0.01) == 0.0
    assert P.relative_pose_error(R, [1.0, 0.0, 0.0], R, [0.0, 1e-3, 0.0]) == pytest.approx(90.0)


def test_epipolar_errors_of_no_match_are_an_empty_array():
    assert P.epipolar_errors(np.zeros((0, 2)), np.zeros((0, 2)), GOOD_E).shape == (0,)
    assert P.epipolar_errors(np.zeros((0, 3)), np.zeros((0, 3)), GOOD_E).shape == (0,)


# --- realistic input types: OpenCV's (3, 1) translations, float32 arrays ---------------------------

def test_a_column_translation_as_opencv_returns_it_is_a_3_vector():
    """cv2.recoverPose returns t as [3, 1]: the same angles as the flat vector."""
    assert P.translation_error(np.array([[1.0], [0.0], [0.0]]), np.array([[0.0], [2.0], [0.0]])) == pytest.approx(90.0)
    assert P.skew(np.array([[1.0], [2.0], [3.0]])).tolist() == P.skew([1.0, 2.0, 3.0]).tolist()


def _float32_rotations():
    R_gt = rodrigues([0.1, -0.2, 0.3]).astype(np.float32)
    R_est = (R_gt @ rodrigues([0.0, 0.0, np.deg2rad(4.0)])).astype(np.float32)
    return R_est, R_gt


def test_float32_rotations_and_translations_are_computed_in_float64():
    """glue-factory's poses are float32 tensors; descbench computes in float64. Reference: the
    module docstring's formulas evaluated in float64 on the float32 values (float32 arithmetic
    would move both angles by ~1e-4 degrees here)."""
    R_est, R_gt = _float32_rotations()
    A, B = R_est.astype(np.float64), R_gt.astype(np.float64)
    want = np.rad2deg(np.arccos(np.clip((np.trace(A.T @ B) - 1.0) / 2.0, -1.0, 1.0)))
    assert P.rotation_error(R_est, R_gt) == pytest.approx(want, rel=1e-12, abs=0)
    t_est, t_gt = np.float32([0.31, -0.38, 1.25]), np.float32([0.3, -0.4, 1.2])
    a, b = t_est.astype(np.float64), t_gt.astype(np.float64)
    e = np.rad2deg(np.arccos(np.clip(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)), -1.0, 1.0)))
    assert P.translation_error(t_est, t_gt) == pytest.approx(min(e, 180.0 - e), rel=1e-12, abs=0)


def test_float32_keypoints_are_normalised_in_float64():
    """x = 1024 - 2^-14 is a float32; x + 0.5 is not (float32 rounds it to 1024.5). With fx = 1,
    cx = 0 the normalised x is exactly x + 0.5 = 1024.49993896484375."""
    x = np.float32(1024.0 - 2.0**-14)
    K = np.eye(3)
    got = P.normalized_points(np.array([[x, 0.0]], dtype=np.float32), K, offset=0.5)
    assert got[0, 0] == 1024.49993896484375 and got[0, 1] == 0.5


def test_float32_epipolar_errors_are_compared_with_the_thresholds_in_float64():
    """float32(1e-4) = 9.99999974...e-05 is strictly below 1e-4 (a float32 comparison would round
    the threshold to the same float32 and count it as not below)."""
    e = np.array([1e-4], dtype=np.float32)
    assert float(e[0]) < 1e-4
    assert P.epipolar_precision(e).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.bad_input
@pytest.mark.parametrize("call, message", [
    (lambda: P.essential_matrix(np.eye(3), [1.0, 0.0]), r"^t: expected a finite 3-vector, got 2 values$"),
    (lambda: P.epipolar_errors(np.zeros((3, 2)), np.zeros((3, 2)), np.full((3, 3), np.nan)),
     r"^E: expected a finite 3x3 matrix, got NaN or inf$"),
    (lambda: P.rotation_error(np.eye(3), np.diag([1.0, np.inf, 1.0])), r"^R_gt: expected a finite 3x3 rotation matrix, got NaN or inf$"),
    (lambda: P.pinhole_intrinsics(np.diag([1.0, np.nan, 1.0]), "K1"), r"^K1: expected finite 3x3 intrinsics, got NaN or inf$"),
])
def test_a_bad_translation_or_a_non_finite_value_is_said_as_such(call, message):
    """essential_matrix names its own t (not skew's v); E is a matrix, not a rotation; NaN or inf is
    said as such, not as the (right) shape."""
    with pytest.raises(ValueError, match=message):
        call()
