"""Relative pose estimation from matched points of two calibrated views, as glue-factory's
MegaDepth-1500 and ScanNet-1500 evaluations estimate it.

The reference is cvg/glue-factory at commit ``2d17e3b``
(:data:`descbench.estimators.GLUEFACTORY_COMMIT`); paths below are relative to its
``gluefactory/`` folder. Points are [M, 2] arrays of (x, y) pixels, row i of ``xy0`` and row i of
``xy1`` one match; ``K0``, ``K1`` are pinhole intrinsics [3, 3] (no skew, no distortion), in the
pixel convention ``offset`` converts descbench's keypoints into
(:func:`descbench.metrics.pose.normalized_points`: 0.5 for COLMAP's cameras, as glue-factory's).
The estimate ``(R, t)`` maps camera 0's coordinates to camera 1's, ``x1 = R x0 + t``, with
``|t| = 1`` (its scale is not observable).

**Estimators** (:data:`ESTIMATORS`; :func:`estimate_relative_pose` runs one):

| name | call | glue-factory | ransac_th (px) default |
| --- | --- | --- | --- |
| `opencv` | ``cv2.findEssentialMat`` on normalised points, ``cv2.RANSAC``, threshold ``ransac_th / f_mean``, ``prob = confidence`` (0.99999); then ``cv2.recoverPose`` on each returned E | ``robust_estimators/relative_pose/opencv.py:OpenCVRelativePoseEstimator`` (``method: ransac``) | 0.5 |
| `usac_magsac` | the same with ``cv2.USAC_MAGSAC`` | the same (``method: usac_magsac``) | 0.5 |
| `poselib` | ``poselib.estimate_relative_pose(xy0 + offset, xy1 + offset, PINHOLE cameras, {max_epipolar_error: ransac_th})`` (PoseLib's LO-RANSAC and refinement, its own defaults) | ``robust_estimators/relative_pose/poselib.py:PoseLibRelativePoseEstimator`` | 2.0 (``eval/megadepth1500.py`` runs it at 1.0) |
| `pycolmap` | ``pycolmap.estimate_calibrated_two_view_geometry`` on ``xy + offset`` with PINHOLE cameras, ``TwoViewGeometryOptions`` at pycolmap's defaults but ``ransac.max_error = ransac_th``, ``compute_relative_pose = True`` (:data:`PYCOLMAP_SUCCESS`) | ``robust_estimators/relative_pose/pycolmap.py:PycolmapTwoViewEstimator`` | 4.0 |

The OpenCV estimators follow ``opencv.py`` step for step, which is what makes their numbers
reproducible (the issue trackers of LightGlue, DeDoDe and XFeat show what follows when it is not):

- ``f_mean`` is the mean of the four focal lengths ``(fx0, fy0, fx1, fy1)``;
- ``findEssentialMat`` may return several essential matrices stacked (``[3k, 3]``); each goes to
  ``recoverPose(E_i, p0, p1, I, 1e9, mask=mask)`` with *the same* ``mask`` array, which OpenCV
  overwrites in place with the matches that pass its cheirality test for ``E_i``: the next
  ``E_i`` starts from that narrowed mask. The estimate is the first ``E_i`` with the largest
  count of points in front of both cameras; its inliers are the mask right after its
  ``recoverPose``;
- fewer than :data:`MIN_MATCHES` (5) matches, no E, or no ``E_i`` with a point in front of both
  cameras is a failure (``R = t = None``, no inlier; its pose error is inf).

**pycolmap.** glue-factory calls pycolmap 0.4's ``two_view_geometry_estimation``, which no
longer exists; descbench calls its successor (pycolmap >= 3.11), which takes the same cameras,
points and ``TwoViewGeometryOptions``, with ``compute_relative_pose`` switched on (what the old
function did after estimating). The estimate is ``cam2_from_cam1`` (camera 0 to camera 1) and its
inliers the matches of ``inlier_matches``; a success is a geometry of a configuration in
:data:`PYCOLMAP_SUCCESS` (calibrated, planar or panoramic: those pycolmap computes a relative
pose for) with at least one inlier; anything else (degenerate, undefined, too few inliers for
``min_num_inliers`` 15) is a failure. pycolmap's defaults (``ransac.confidence`` 0.999,
``min_num_trials`` 100, ``max_num_trials`` 10000) are its version's, which the pose table's header
records: ``confidence`` applies to the OpenCV estimators only, as in glue-factory, where PoseLib
and pycolmap run on their own defaults.

**Determinism.** ``cv2.setRNGSeed(seed)`` precedes the OpenCV calls, PoseLib gets ``seed`` in its
RANSAC options and pycolmap in ``ransac.random_seed`` (one thread), so an estimate is a function
of the inputs and the seed.

**Deviations, chosen** (none changes a result beyond float32 roundoff unless stated): float64
throughout (glue-factory normalises its float32 keypoints in float32); a ``cv2.error`` raised by
OpenCV on degenerate input is a failure (glue-factory would stop); PoseLib's result is a failure
when it has no inlier (glue-factory counts any returned pose as a success).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from descbench.errors import ConfigError
from descbench.estimators import import_library
from descbench.metrics.pose import normalized_points, pinhole_intrinsics

#: The fewest matches an essential matrix is estimated from (the five-point solver).
MIN_MATCHES = 5
#: Each estimator's default ``ransac_th`` in pixels: its glue-factory ``default_conf``.
DEFAULT_RANSAC_TH = {"opencv": 0.5, "usac_magsac": 0.5, "poselib": 2.0, "pycolmap": 4.0}
ESTIMATORS = tuple(DEFAULT_RANSAC_TH)
OPENCV_ESTIMATORS = ("opencv", "usac_magsac")
#: ``opencv.py``'s ``options.confidence``.
OPENCV_CONFIDENCE = 0.99999
#: The libraries whose versions a pose table records (:func:`descbench.estimators.library_versions`).
LIBRARIES = ("opencv", "poselib", "pycolmap")
#: pycolmap's two-view configurations that carry a relative pose (``TwoViewGeometry.config``).
PYCOLMAP_SUCCESS = ("CALIBRATED", "PLANAR", "PANORAMIC", "PLANAR_OR_PANORAMIC")
# recoverPose's distanceThresh in opencv.py: points farther than this count as at infinity
RECOVER_POSE_DISTANCE = 1e9


@dataclass(frozen=True)
class PoseEstimate:
    """A relative pose estimate: ``R`` [3, 3] and ``t`` [3] (unit length), or both None for a
    failure; ``inliers`` bool [M] (all False for a failure)."""

    R: np.ndarray | None
    t: np.ndarray | None
    inliers: np.ndarray

    @property
    def success(self) -> bool:
        return self.R is not None


def check_estimator(name: str, where: str = "estimator") -> str:
    """``name`` if it is an estimator of :data:`ESTIMATORS`; ConfigError naming ``where`` else
    (``poselib``: the optional extra must import)."""
    if name not in ESTIMATORS:
        raise ConfigError(f"{where}: unknown relative pose estimator {name!r}; use one of {', '.join(ESTIMATORS)}")
    if name in ("poselib", "pycolmap"):
        import_library(name, where, "relative pose estimator", OPENCV_ESTIMATORS)
    return name


def _failure(m: int) -> PoseEstimate:
    return PoseEstimate(None, None, np.zeros(m, dtype=bool))


def estimate_relative_pose(xy0, xy1, K0, K1, estimator: str = "opencv", ransac_th: float | None = None, *,
                           confidence: float = OPENCV_CONFIDENCE, offset: float = 0.0, seed: int = 0,
                           sizes: tuple[tuple[int, int], tuple[int, int]] | None = None,
                           options: Mapping | None = None) -> PoseEstimate:
    """The relative pose of camera 1 to camera 0 from matches ``xy0[i] <-> xy1[i]`` (module
    docstring). ``ransac_th`` in pixels (None: the estimator's default); ``confidence``: the
    OpenCV estimators' ``prob``; ``sizes``: the images' (width, height), which PoseLib's and
    pycolmap's cameras record (default: twice the principal point); ``options``: more PoseLib
    RANSAC options (PoseLib only).

    Forty points of an exact two-camera scene (a 10 degree turn and a sideways step):

    >>> import cv2
    >>> rng = np.random.default_rng(0)
    >>> X0 = np.column_stack([rng.uniform(-2, 2, 40), rng.uniform(-2, 2, 40), rng.uniform(4, 8, 40)])
    >>> R = cv2.Rodrigues(np.array([0.0, np.deg2rad(10.0), 0.0]))[0]
    >>> t = np.array([1.0, 0.0, 0.1])
    >>> K = np.array([[500.0, 0.0, 320.0], [0.0, 500.0, 240.0], [0.0, 0.0, 1.0]])
    >>> def pixels(X):
    ...     return X[:, :2] / X[:, 2:] * 500.0 + [320.0, 240.0]
    >>> est = estimate_relative_pose(pixels(X0), pixels(X0 @ R.T + t), K, K)
    >>> from descbench.metrics.pose import relative_pose_error
    >>> bool(est.success), int(est.inliers.sum()), relative_pose_error(est.R, est.t, R, t) < 1e-4
    (True, 40, True)
    """
    xy0 = np.asarray(xy0, dtype=np.float64).reshape(-1, 2)
    xy1 = np.asarray(xy1, dtype=np.float64).reshape(-1, 2)
    if xy0.shape != xy1.shape:
        raise ValueError(f"xy0 and xy1: one point each per match, got {len(xy0)} and {len(xy1)}")
    K0, K1 = pinhole_intrinsics(K0, "K0"), pinhole_intrinsics(K1, "K1")
    check_estimator(estimator)
    th = DEFAULT_RANSAC_TH[estimator] if ransac_th is None else float(ransac_th)
    if not th > 0:
        raise ValueError(f"ransac_th: expected a threshold in pixels > 0, got {ransac_th}")
    m = len(xy0)
    if m < MIN_MATCHES:
        return _failure(m)
    if estimator == "poselib":
        return _poselib(xy0 + offset, xy1 + offset, K0, K1, th, seed, sizes, options)
    if estimator == "pycolmap":
        return _pycolmap(xy0 + offset, xy1 + offset, K0, K1, th, seed, sizes)
    return _opencv(xy0, xy1, K0, K1, th, estimator, confidence, offset, seed)


def _opencv(xy0, xy1, K0, K1, th, estimator, confidence, offset, seed) -> PoseEstimate:
    import cv2

    m = len(xy0)
    f_mean = float(np.mean([K0[0, 0], K0[1, 1], K1[0, 0], K1[1, 1]]))
    p0 = normalized_points(xy0, K0, offset)[:, :2]
    p1 = normalized_points(xy1, K1, offset)[:, :2]
    method = {"opencv": cv2.RANSAC, "usac_magsac": cv2.USAC_MAGSAC}[estimator]
    cv2.setRNGSeed(int(seed))
    try:
        E, mask = cv2.findEssentialMat(p0, p1, np.eye(3), threshold=th / f_mean, prob=confidence, method=method)
    except cv2.error:
        return _failure(m)
    if E is None or mask is None:
        return _failure(m)
    best, R_best, t_best, inliers = 0, None, None, np.zeros(m, dtype=bool)
    for E_i in np.split(E, len(E) // 3):
        try:
            out = cv2.recoverPose(E_i, p0, p1, np.eye(3), RECOVER_POSE_DISTANCE, mask=mask)  # mask: overwritten in place
        except cv2.error:
            return _failure(m)
        n, R, t = out[0], out[1], out[2]
        if n > best:
            best, R_best, t_best = n, R.copy(), t[:, 0].copy()
            inliers = mask.ravel() > 0
    if R_best is None or not (np.isfinite(R_best).all() and np.isfinite(t_best).all()):
        return _failure(m)
    return PoseEstimate(R_best, t_best, inliers)


def _pinhole_camera(K, size) -> dict:
    """A COLMAP PINHOLE camera dict of ``K``, ``size`` (width, height) or twice the principal point."""
    w, h = size if size is not None else (int(round(2 * K[0, 2])), int(round(2 * K[1, 2])))
    return {"model": "PINHOLE", "width": int(w), "height": int(h), "params": [K[0, 0], K[1, 1], K[0, 2], K[1, 2]]}


def _poselib(xy0, xy1, K0, K1, th, seed, sizes, options) -> PoseEstimate:
    poselib = import_library("poselib", "estimator 'poselib'", "relative pose estimator", OPENCV_ESTIMATORS)
    s0, s1 = sizes if sizes is not None else (None, None)
    ransac = {"max_epipolar_error": th, "seed": int(seed), **dict(options or {})}
    pose, info = poselib.estimate_relative_pose(xy0, xy1, _pinhole_camera(K0, s0), _pinhole_camera(K1, s1), ransac)
    inliers = np.asarray(info.get("inliers", []), dtype=bool).reshape(-1)
    if pose is None or inliers.size != len(xy0) or not inliers.any():
        return _failure(len(xy0))
    R, t = np.asarray(pose.R, dtype=np.float64), np.asarray(pose.t, dtype=np.float64).reshape(3)
    if not (np.isfinite(R).all() and np.isfinite(t).all()):
        return _failure(len(xy0))
    return PoseEstimate(R, t, inliers)


def _pycolmap(xy0, xy1, K0, K1, th, seed, sizes) -> PoseEstimate:
    pycolmap = import_library("pycolmap", "estimator 'pycolmap'", "relative pose estimator", OPENCV_ESTIMATORS)
    s0, s1 = sizes if sizes is not None else (None, None)
    options = pycolmap.TwoViewGeometryOptions()
    options.compute_relative_pose = True
    options.ransac.max_error = th
    options.ransac.random_seed = int(seed)
    options.ransac.num_threads = 1
    m = len(xy0)
    index = np.arange(m, dtype=np.uint32)
    geometry = pycolmap.estimate_calibrated_two_view_geometry(
        pycolmap.Camera(**_pinhole_camera(K0, s0)), xy0, pycolmap.Camera(**_pinhole_camera(K1, s1)), xy1,
        np.column_stack([index, index]), options)
    pairs = np.asarray(geometry.inlier_matches, dtype=np.int64).reshape(-1, 2)
    configs = pycolmap.TwoViewGeometryConfiguration
    if int(geometry.config) not in {int(getattr(configs, c)) for c in PYCOLMAP_SUCCESS} or not len(pairs):
        return _failure(m)
    inliers = np.zeros(m, dtype=bool)
    inliers[pairs[:, 0]] = True
    pose = geometry.cam2_from_cam1
    R, t = np.asarray(pose.rotation.matrix(), dtype=np.float64), np.asarray(pose.translation, dtype=np.float64).reshape(3)
    if not (np.isfinite(R).all() and np.isfinite(t).all()):
        return _failure(m)
    return PoseEstimate(R, t, inliers)
