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
