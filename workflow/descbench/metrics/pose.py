"""Two-view relative pose: the pose error, the normalised epipolar error and their summaries over
pairs, as cvg/glue-factory defines them: pure functions on arrays.

The reference is cvg/glue-factory at commit ``2d17e3b``
(:data:`descbench.estimators.GLUEFACTORY_COMMIT`), paths relative to its ``gluefactory/``. A
relative pose ``(R, t)`` maps camera 0's coordinates to camera 1's: ``x1 = R x0 + t``
(glue-factory's ``T_0to1``). Points are *normalised* image coordinates, ``K^-1 [u, v, 1]`` with
the pixel coordinates in the camera's own convention (:func:`normalized_points`); glue-factory's
``Camera.image2cam`` does not undistort, so neither does descbench.

**Pose error of one pair** (``geometry/epipolar.py``: ``relative_pose_error``,
``angle_error_mat``, ``angle_error_vec``; ``eval/utils.py``: ``eval_relative_pose_robust``):

- :func:`rotation_error`: the angle of ``R_est^T R_gt`` in degrees,
  ``arccos(clip((trace - 1) / 2, -1, 1))``;
- :func:`translation_error`: the angle between ``t_est`` and ``t_gt`` in degrees,
  ``arccos(clip(t_est . t_gt / max(|t_est| |t_gt|, 1e-10), -1, 1))``, then ``min(e, 180 - e)``:
  an essential matrix fixes the translation only up to its sign, so ``-t_gt`` is no error; 0 when
  ``|t_gt|`` is below ``ignore_gt_t_thr`` (glue-factory's default 0: never);
- :func:`relative_pose_error`: ``max(rotation error, translation error)``; ``inf`` for a failed
  estimate (no pose), which stays in every count (glue-factory's ``rel_pose_error``).

**Normalised epipolar error of one match** (``geometry/epipolar.py``: ``T_to_E``,
``sym_epipolar_distance(squared=False)``, called by ``generalized_epi_dist(..., all=False,
essential=True)`` in ``eval/utils.py: eval_matches_epipolar``):
:func:`essential_matrix` ``E = [t]x R``; :func:`epipolar_errors` the mean of the two point-line
distances in normalised coordinates, ``|p1^T E p0| (1 / sqrt(d0) + 1 / sqrt(d1)) / 2`` with
``d0 = (E p0)_x^2 + (E p0)_y^2`` and ``d1 = (E^T p1)_x^2 + (E^T p1)_y^2``, each clamped below at
1e-6 as glue-factory clamps them (a point at an epipole gets a large, finite error);
:func:`epipolar_precision`: the fraction of a pair's matches with error *strictly* below 1e-4,
5e-4 and 1e-3 (:data:`EPIPOLAR_THRESHOLDS`), 0 for a pair without a match (their
``mean().nan_to_num()``).

**Over pairs** (``eval/utils.py: eval_poses``, ``utils/tools.py: AUCMetric``): :func:`pose_auc`
is the AUC of the pose errors at 5, 10 and 20 degrees (:data:`POSE_AUC_THRESHOLDS`), the same
area as :func:`descbench.metrics.matching.homography_auc` rounded to 4 decimals, failures
counted; choosing the best of several RANSAC thresholds by mAA and the medians are
:func:`descbench.metrics.homography.summarize_thresholds`, shared with the homography benchmark.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from descbench.metrics.matching import homography_auc

# eval/megadepth1500.py, eval/scannet1500.py: eval_poses(..., auc_ths=[5, 10, 20], ...)
POSE_AUC_THRESHOLDS = (5.0, 10.0, 20.0)
# eval/utils.py eval_matches_epipolar: epi_prec@1e-4, @5e-4, @1e-3
EPIPOLAR_THRESHOLDS = (1e-4, 5e-4, 1e-3)
# utils/tools.py cal_error_auc: np.round(auc, 4)
AUC_DECIMALS = 4
# geometry/epipolar.py: angle_error_vec's eps; sym_epipolar_distance's clamp of d0 and d1
ANGLE_EPS = 1e-10
EPIPOLAR_CLAMP = 1e-6


def _rotation(R, name: str, what: str = "rotation matrix") -> np.ndarray:
    R = np.asarray(R, dtype=np.float64)
    if R.shape != (3, 3):
        raise ValueError(f"{name}: expected a finite 3x3 {what}, got shape {R.shape}")
    if not np.isfinite(R).all():
        raise ValueError(f"{name}: expected a finite 3x3 {what}, got NaN or inf")
    return R


def _vector(t, name: str) -> np.ndarray:
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    if t.shape != (3,):
        raise ValueError(f"{name}: expected a finite 3-vector, got {t.size} values")
    if not np.isfinite(t).all():
        raise ValueError(f"{name}: expected a finite 3-vector, got NaN or inf")
    return t


def rotation_error(R_est: ArrayLike, R_gt: ArrayLike) -> float:
    """The angle in degrees of the rotation between ``R_est`` and ``R_gt`` [3, 3] (module docstring).

    >>> import cv2
    >>> R_gt = cv2.Rodrigues(np.array([0.1, -0.2, 0.3]))[0]
    >>> R_est = R_gt @ cv2.Rodrigues(np.array([0.0, 0.0, np.deg2rad(4.0)]))[0]
    >>> round(rotation_error(R_est, R_gt), 9)
    4.0
    """
    R_est, R_gt = _rotation(R_est, "R_est"), _rotation(R_gt, "R_gt")
    cos = (np.trace(R_est.T @ R_gt) - 1.0) / 2.0
    return float(np.rad2deg(np.abs(np.arccos(np.clip(cos, -1.0, 1.0)))))


def translation_error(t_est: ArrayLike, t_gt: ArrayLike, ignore_gt_t_thr: float = 0.0) -> float:
    """The angle in degrees between the translation directions ``t_est`` and ``t_gt`` [3], up to
    sign (``min(e, 180 - e)``); 0 when ``|t_gt| < ignore_gt_t_thr`` (module docstring).

    >>> round(translation_error([1.0, 0.0, 0.0], [1.0, 1.0, 0.0]), 9)  # 45 degrees
    45.0
    >>> round(translation_error([-1.0, 0.0, 0.0], [1.0, 1.0, 0.0]), 9)  # 135 degrees: the sign is free
    45.0
    """
    t_est, t_gt = _vector(t_est, "t_est"), _vector(t_gt, "t_gt")
    n = max(float(np.linalg.norm(t_est) * np.linalg.norm(t_gt)), ANGLE_EPS)
    e = float(np.rad2deg(np.arccos(np.clip(float(t_est @ t_gt) / n, -1.0, 1.0))))
    e = min(e, 180.0 - e)
    return 0.0 if np.linalg.norm(t_gt) < ignore_gt_t_thr else e


def relative_pose_error(R_est: ArrayLike | None, t_est: ArrayLike | None, R_gt: ArrayLike, t_gt: ArrayLike,
                        ignore_gt_t_thr: float = 0.0) -> float:
    """``max(rotation_error, translation_error)`` in degrees; ``inf`` when there is no estimate
    (``R_est`` or ``t_est`` None: the estimator failed).

    >>> R = np.eye(3)
    >>> round(relative_pose_error(R, [0.0, 0.0, 2.0], R, [0.0, 0.1, 1.0]), 9), round(float(np.rad2deg(np.arctan(0.1))), 9)
    (5.710593137, 5.710593137)
    >>> relative_pose_error(None, None, R, [0.0, 0.0, 1.0])
    inf
    """
    if R_est is None or t_est is None:
        return float("inf")
    return max(rotation_error(R_est, R_gt), translation_error(t_est, t_gt, ignore_gt_t_thr))


def skew(v: ArrayLike) -> np.ndarray:
    """The matrix ``[v]x`` [3, 3] with ``[v]x w = v x w``.

    >>> skew([1.0, 2.0, 3.0]) @ np.array([4.0, 5.0, 6.0]), np.cross([1, 2, 3], [4, 5, 6])
    (array([-3.,  6., -3.]), array([-3,  6, -3]))
    """
    x, y, z = _vector(v, "v")
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def essential_matrix(R: ArrayLike, t: ArrayLike) -> np.ndarray:
    """``E = [t]x R`` [3, 3] of the relative pose ``x1 = R x0 + t``: ``p1^T E p0 = 0`` for the
    normalised images ``p0``, ``p1`` of one 3D point.

    >>> X0 = np.array([0.3, -0.2, 4.0])  # a point in camera 0
    >>> R, t = np.eye(3), np.array([1.0, 0.0, 0.0])
    >>> X1 = R @ X0 + t
    >>> float(abs((X1 / X1[2]) @ essential_matrix(R, t) @ (X0 / X0[2]))) < 1e-15
    True
    """
    return skew(_vector(t, "t")) @ _rotation(R, "R")


def pinhole_intrinsics(K: ArrayLike, name: str = "K") -> np.ndarray:
    """``K`` as float64 [3, 3] if it is pinhole intrinsics ``[[fx, 0, cx], [0, fy, cy], [0, 0, 1]]``
    with finite values and ``fx, fy > 0``; ValueError naming ``name`` otherwise (glue-factory's
    cameras have no skew)."""
    K = np.asarray(K, dtype=np.float64)
    if K.shape != (3, 3):
        raise ValueError(f"{name}: expected finite 3x3 intrinsics, got shape {K.shape}")
    if not np.isfinite(K).all():
        raise ValueError(f"{name}: expected finite 3x3 intrinsics, got NaN or inf")
    if K[0, 1] != 0 or K[1, 0] != 0 or K[2, 0] != 0 or K[2, 1] != 0 or K[2, 2] != 1 or not (K[0, 0] > 0 and K[1, 1] > 0):
        raise ValueError(f"{name}: expected pinhole intrinsics [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] with fx, fy > 0")
    return K


def normalized_points(xy: ArrayLike, K: ArrayLike, offset: float = 0.0) -> np.ndarray:
    """Pixel coordinates ``xy`` [N, 2] as normalised image coordinates [N, 3] (``z = 1``):
    ``((x + offset - cx) / fx, (y + offset - cy) / fy, 1)``, the arithmetic of glue-factory's
    ``Camera.normalize`` (pinhole ``K``: :func:`pinhole_intrinsics`). ``offset`` converts
    descbench's keypoints (the centre of the top-left pixel at (0, 0)) into the convention ``K``
    was given in: 0.5 for COLMAP's (centre at (0.5, 0.5), glue-factory's cameras), 0 for a ``K``
    in descbench's.

    >>> K = np.array([[100.0, 0.0, 50.0], [0.0, 100.0, 40.0], [0.0, 0.0, 1.0]])
    >>> normalized_points([[150.0, 40.0]], K).tolist()
    [[1.0, 0.0, 1.0]]
    """
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    K = pinhole_intrinsics(K)
    return np.column_stack([(xy[:, 0] + offset - K[0, 2]) / K[0, 0], (xy[:, 1] + offset - K[1, 2]) / K[1, 1], np.ones(len(xy))])


def epipolar_errors(p0: ArrayLike, p1: ArrayLike, E: ArrayLike) -> np.ndarray:
    """The symmetric epipolar error [N] of matches ``p0[i] <-> p1[i]`` (normalised coordinates,
    [N, 2] or [N, 3] with ``z = 1``) under ``E`` (module docstring; glue-factory's clamps).

    A match 0.01 off its epipolar line in image 1 (and so in image 0) for a sideways motion:

    >>> E = essential_matrix(np.eye(3), [1.0, 0.0, 0.0])  # epipolar lines: y1 = y0
    >>> epipolar_errors([[0.2, 0.1]], [[0.5, 0.11]], E).round(12).tolist()
    [0.01]
    """
    p0, p1 = _homogeneous(p0, "p0"), _homogeneous(p1, "p1")
    if p0.shape != p1.shape:
        raise ValueError(f"p0 and p1: one point each per match, got {len(p0)} and {len(p1)}")
    E = _rotation(E, "E", "matrix")
    if len(p0) == 0:
        return np.zeros(0)
    l1 = p0 @ E.T  # E p0: the epipolar lines in image 1
    l0 = p1 @ E  # E^T p1: the lines in image 0
    num = np.abs(np.sum(p1 * l1, axis=1))
    d0 = np.maximum(l1[:, 0] ** 2 + l1[:, 1] ** 2, EPIPOLAR_CLAMP)
    d1 = np.maximum(l0[:, 0] ** 2 + l0[:, 1] ** 2, EPIPOLAR_CLAMP)
    return num * (1.0 / np.sqrt(d0) + 1.0 / np.sqrt(d1)) / 2.0


def _homogeneous(p, name: str) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] not in (2, 3):
        raise ValueError(f"{name}: expected points [N, 2] or [N, 3], got shape {p.shape}")
    return np.column_stack([p, np.ones(len(p))]) if p.shape[1] == 2 else p


def epipolar_precision(errors: ArrayLike, thresholds: Sequence[float] = EPIPOLAR_THRESHOLDS) -> np.ndarray:
    """The fraction of one pair's matches whose epipolar error is strictly below each threshold;
    0 for a pair without a match.

    >>> epipolar_precision([5e-5, 1e-4, 7e-4, 1.0]).tolist()  # 1e-4 itself is not below 1e-4
    [0.25, 0.5, 0.75]
    >>> epipolar_precision([]).tolist()
    [0.0, 0.0, 0.0]
    """
    e = np.asarray(errors, dtype=np.float64).ravel()
    if e.size == 0:
        return np.zeros(len(thresholds))
    return np.array([float(np.mean(e < t)) for t in thresholds])


def pose_auc(errors: ArrayLike, thresholds: Sequence[float] = POSE_AUC_THRESHOLDS) -> np.ndarray:
    """AUC of the pose errors (degrees, inf = failure) at each threshold, rounded to 4 decimals:
    glue-factory's ``AUCMetric`` (:func:`descbench.metrics.matching.homography_auc` with
    ``decimals=4``).

    Errors 2.5 and 7.5 degrees and one failure, at 5 and 10 degrees: the recall polyline (0, 0),
    (2.5, 1/3), (5, 1/3) encloses 1.25 (/ 5 = 0.25); (0, 0), (2.5, 1/3), (7.5, 2/3), (10, 2/3)
    encloses 5/12 + 5/2 + 5/3 = 55/12 (/ 10 = 0.4583):

    >>> pose_auc([2.5, 7.5, float("inf")], thresholds=[5, 10]).tolist()
    [0.25, 0.4583]

    At the default 5, 10 and 20 degrees, one pair at 1 degree and one failure:

    >>> pose_auc([1.0, float("inf")]).tolist()
    [0.45, 0.475, 0.4875]
    """
    return homography_auc(errors, thresholds, decimals=AUC_DECIMALS)
