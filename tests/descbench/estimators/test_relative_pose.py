"""descbench.estimators.relative_pose: exact two-camera scenes (the true pose back), glue-factory's
documented OpenCV procedure written out here step by step on a five-point case with several
essential matrices, PoseLib called directly, failures and bad input."""

from __future__ import annotations

import doctest

import cv2
import numpy as np
import poselib  # the `estimators` extra (README's test command installs it)
import pycolmap  # the same extra
import pytest

from descbench.errors import ConfigError
from descbench.estimators import relative_pose as RP
from descbench.metrics.pose import normalized_points, relative_pose_error

K0 = np.array([[520.0, 0.0, 320.0], [0.0, 500.0, 240.0], [0.0, 0.0, 1.0]])
K1 = np.array([[480.0, 0.0, 300.0], [0.0, 470.0, 250.0], [0.0, 0.0, 1.0]])


def scene(seed: int, n: int = 120, noise_px: float = 0.0, outliers: int = 0):
    """n matches of a random scene seen by two cameras: (xy0, xy1, R, t) with x1 = R x0 + t."""
    rng = np.random.default_rng(seed)
    R = cv2.Rodrigues(rng.normal(scale=0.15, size=3))[0]
    t = rng.normal(size=3)
    X0 = np.column_stack([rng.uniform(-2, 2, n), rng.uniform(-2, 2, n), rng.uniform(4, 9, n)])
    X1 = X0 @ R.T + t
    xy0 = X0[:, :2] / X0[:, 2:] * [K0[0, 0], K0[1, 1]] + K0[:2, 2] + rng.normal(scale=noise_px, size=(n, 2))
    xy1 = X1[:, :2] / X1[:, 2:] * [K1[0, 0], K1[1, 1]] + K1[:2, 2] + rng.normal(scale=noise_px, size=(n, 2))
    xy1[:outliers] = rng.uniform(0, 640, size=(outliers, 2))
    return xy0, xy1, R, t


def test_the_examples_run():
    failed, attempted = doctest.testmod(RP)
    assert attempted >= 5 and failed == 0


@pytest.mark.parametrize("estimator", RP.ESTIMATORS)
@pytest.mark.parametrize("seed", range(3))
def test_an_exact_scene_gives_the_true_pose_and_every_match_as_inlier(estimator, seed):
    xy0, xy1, R, t = scene(seed)
    est = RP.estimate_relative_pose(xy0, xy1, K0, K1, estimator)
    assert est.success and est.inliers.all()
    assert relative_pose_error(est.R, est.t, R, t) < 1e-3
    assert abs(np.linalg.norm(est.t) - 1.0) < 1e-9 and abs(np.linalg.det(est.R) - 1.0) < 1e-9


def glue_factory_opencv(xy0, xy1, K0, K1, th, method, confidence=0.99999):
    """glue-factory's OpenCVRelativePoseEstimator as its documentation of the procedure says, with
    every step written out: f_mean of the four focals, the threshold divided by it, every E of
    findEssentialMat through recoverPose with the one mask OpenCV overwrites, the first E with
    the most points in front."""
    f_mean = (K0[0, 0] + K0[1, 1] + K1[0, 0] + K1[1, 1]) / 4
    p0 = (xy0 - K0[:2, 2]) / [K0[0, 0], K0[1, 1]]
    p1 = (xy1 - K1[:2, 2]) / [K1[0, 0], K1[1, 1]]
    cv2.setRNGSeed(0)
    E, mask = cv2.findEssentialMat(p0, p1, np.eye(3), threshold=th / f_mean, prob=confidence, method=method)
    best, out = 0, (None, None, None)
    for i in range(len(E) // 3):
        n, R, t, _ = cv2.recoverPose(E[3 * i:3 * i + 3], p0, p1, np.eye(3), 1e9, mask=mask)
        if n > best:
            best, out = n, (R, t[:, 0], mask.ravel() > 0)
    return out


@pytest.mark.parametrize("estimator, method", [("opencv", cv2.RANSAC), ("usac_magsac", cv2.USAC_MAGSAC)], ids=["opencv", "usac_magsac"])
def test_the_opencv_estimators_follow_glue_factorys_procedure(estimator, method):
    xy0, xy1, _, _ = scene(5, noise_px=0.4, outliers=30)
    R, t, inl = glue_factory_opencv(xy0, xy1, K0, K1, 0.5, method)
    est = RP.estimate_relative_pose(xy0, xy1, K0, K1, estimator)
    assert np.array_equal(est.R, R) and np.array_equal(est.t, t) and np.array_equal(est.inliers, inl)


def test_every_essential_matrix_is_tried_with_the_mask_opencv_narrows():
    """Five matches in normalised coordinates (K = I): RANSAC returns four essential matrices.
    Through one shared mask (glue-factory) the first wins with three inliers; had each E its own
    copy of the mask, the second would win with all five."""
    rng = np.random.default_rng(1)
    p0 = rng.uniform(-0.5, 0.5, (5, 2))
    p1 = p0 + rng.normal(0.0, 0.05, (5, 2))
    I = np.eye(3)
    R, t, inl = glue_factory_opencv(p0, p1, I, I, 1e-3, cv2.RANSAC)
    est = RP.estimate_relative_pose(p0, p1, I, I, "opencv", 1e-3)
    assert np.array_equal(est.R, R) and np.array_equal(est.t, t)
    assert est.inliers.tolist() == inl.tolist() == [False, False, True, True, True]


def test_poselib_is_called_as_glue_factory_calls_it():
    xy0, xy1, _, _ = scene(7, noise_px=0.5, outliers=25)
    cams = [{"model": "PINHOLE", "width": 640, "height": 480, "params": [K[0, 0], K[1, 1], K[0, 2], K[1, 2]]} for K in (K0, K1)]
    pose, info = poselib.estimate_relative_pose(xy0 + 0.5, xy1 + 0.5, cams[0], cams[1], {"max_epipolar_error": 1.0, "seed": 0})
    # descbench keypoints with COLMAP cameras: offset 0.5 (the cameras' principal points as given)
    est = RP.estimate_relative_pose(xy0, xy1, K0, K1, "poselib", 1.0, offset=0.5, sizes=((640, 480), (640, 480)))
    assert np.array_equal(est.R, pose.R) and np.array_equal(est.t, pose.t)
    assert np.array_equal(est.inliers, np.asarray(info["inliers"], dtype=bool))


def test_pycolmap_is_called_as_glue_factory_calls_it():
    """pycolmap's calibrated two-view geometry at its default options but the threshold, with the
    relative pose computed (what glue-factory's pycolmap 0.4 call did), called here directly."""
    xy0, xy1, _, _ = scene(7, noise_px=0.5, outliers=25)
    options = pycolmap.TwoViewGeometryOptions()
    options.compute_relative_pose = True
    options.ransac.max_error = 2.0
    options.ransac.random_seed = 3
    cams = [pycolmap.Camera(model="PINHOLE", width=640, height=480, params=[K[0, 0], K[1, 1], K[0, 2], K[1, 2]])
            for K in (K0, K1)]
    idx = np.arange(len(xy0), dtype=np.uint32)
    g = pycolmap.estimate_calibrated_two_view_geometry(cams[0], xy0 + 0.5, cams[1], xy1 + 0.5,
                                                       np.column_stack([idx, idx]), options)
    assert g.config == pycolmap.TwoViewGeometryConfiguration.CALIBRATED
    est = RP.estimate_relative_pose(xy0, xy1, K0, K1, "pycolmap", 2.0, offset=0.5, seed=3, sizes=((640, 480), (640, 480)))
    assert np.array_equal(est.R, g.cam2_from_cam1.rotation.matrix()) and np.array_equal(est.t, g.cam2_from_cam1.translation)
    assert est.inliers.tolist() == np.isin(np.arange(len(xy0)), g.inlier_matches[:, 0]).tolist()
    assert 85 <= est.inliers.sum() < len(xy0)  # the 25 outliers, less a few that fall near their epipolar lines


def test_pycolmap_without_a_geometry_is_a_failure():
    """Random points (no two-view geometry) leave pycolmap below its 15 inliers: a failure, inf error."""
    rng = np.random.default_rng(3)
    xy0, xy1 = rng.uniform(0, 640, (40, 2)), rng.uniform(0, 640, (40, 2))
    est = RP.estimate_relative_pose(xy0, xy1, K0, K1, "pycolmap", 0.5)
    assert not est.success and not est.inliers.any()


def test_the_offset_moves_the_keypoints_into_the_cameras_convention():
    xy0, xy1, R, t = scene(8, noise_px=0.3)
    K0c, K1c = K0.copy(), K1.copy()
    K0c[:2, 2] += 0.5
    K1c[:2, 2] += 0.5  # the same cameras in COLMAP's convention
    a = RP.estimate_relative_pose(xy0, xy1, K0, K1, "opencv")
    b = RP.estimate_relative_pose(xy0, xy1, K0c, K1c, "opencv", offset=0.5)
    assert np.abs(normalized_points(xy0, K0) - normalized_points(xy0, K0c, offset=0.5)).max() < 1e-15
    assert np.abs(a.R - b.R).max() < 1e-9 and np.abs(a.t - b.t).max() < 1e-9 and np.array_equal(a.inliers, b.inliers)


@pytest.mark.parametrize("estimator", RP.ESTIMATORS)
def test_too_few_matches_are_a_failure_not_an_error(estimator):
    xy0, xy1, R, t = scene(9, n=4)
    est = RP.estimate_relative_pose(xy0, xy1, K0, K1, estimator)
    assert not est.success and est.R is None and est.t is None and est.inliers.tolist() == [False] * 4
    assert relative_pose_error(est.R, est.t, R, t) == np.inf


@pytest.mark.parametrize("estimator", RP.ESTIMATORS)
def test_an_estimate_is_a_function_of_its_inputs_and_seed(estimator):
    xy0, xy1, _, _ = scene(10, noise_px=0.5, outliers=30)
    a = RP.estimate_relative_pose(xy0, xy1, K0, K1, estimator)
    b = RP.estimate_relative_pose(xy0, xy1, K0, K1, estimator)
    assert np.array_equal(a.R, b.R) and np.array_equal(a.t, b.t) and np.array_equal(a.inliers, b.inliers)


@pytest.mark.bad_input
@pytest.mark.parametrize("call, error, message", [
    (lambda: RP.estimate_relative_pose(np.zeros((6, 2)), np.zeros((5, 2)), K0, K1), ValueError, "one point each per match, got 6 and 5"),
    (lambda: RP.estimate_relative_pose(np.zeros((6, 2)), np.zeros((6, 2)), np.eye(2), K1), ValueError, "K0: expected finite 3x3"),
    (lambda: RP.estimate_relative_pose(np.zeros((6, 2)), np.zeros((6, 2)), K0, K1 + [[0, 1, 0], [0, 0, 0], [0, 0, 0]]),
     ValueError, r"K1: expected pinhole intrinsics"),
    (lambda: RP.estimate_relative_pose(np.zeros((6, 2)), np.zeros((6, 2)), K0, K1, "magsac"), ConfigError,
     "unknown relative pose estimator 'magsac'; use one of opencv, usac_magsac, poselib, pycolmap$"),
    (lambda: RP.estimate_relative_pose(np.zeros((6, 2)), np.zeros((6, 2)), K0, K1, "opencv", 0.0), ValueError,
     "ransac_th: expected a threshold in pixels > 0, got 0.0"),
])
def test_bad_input_is_an_error_naming_it(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.bad_input
def test_poselib_missing_is_an_error_naming_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "poselib", None)  # `import poselib` raises ImportError
    with pytest.raises(ConfigError, match=r"relative pose estimator 'poselib' needs the PoseLib package.*\[estimators\].*"
                                          r"choose an OpenCV estimator: opencv, usac_magsac"):
        RP.estimate_relative_pose(np.zeros((6, 2)), np.zeros((6, 2)), K0, K1, "poselib")


@pytest.mark.bad_input
def test_pycolmap_missing_is_an_error_naming_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pycolmap", None)
    with pytest.raises(ConfigError, match=r"pose.estimators.pycolmap: relative pose estimator 'pycolmap' needs the pycolmap "
                                          r"package.*pip install pycolmap.*\[estimators\].*opencv, usac_magsac"):
        RP.check_estimator("pycolmap", "pose.estimators.pycolmap")
