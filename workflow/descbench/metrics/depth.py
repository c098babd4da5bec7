"""Depth-based metrics of posed image pairs: a keypoint's depth read off a depth map, its
reprojection into the other view, the symmetric reprojection error of matches and its precision,
and ground-truth matches from pose and depth with their recall and precision, as cvg/glue-factory
defines them: pure functions on float64 arrays.

The reference is cvg/glue-factory at commit ``2d17e3b``, paths relative to its ``gluefactory/``:
``geometry/depth.py`` (``sample_fmap``, ``sample_depth``, ``project``,
``symmetric_reprojection_error``), ``geometry/wrappers.py`` (``Camera.image2cam``,
``Camera.cam2image``, ``Camera.project``, ``Camera.in_image``), ``geometry/gt_generation.py``
(``gt_matches_from_pose_depth``) and ``eval/utils.py`` (``eval_matches_depth``).

**Conventions.** A relative pose ``(R, t)`` maps camera 0's coordinates to camera 1's,
``x1 = R x0 + t`` (glue-factory's ``T_0to1``). A depth map is camera z (not the distance along the
ray) per pixel, [H, W]; a value ``<= 0`` (or NaN) is unknown. Keypoints are pixel coordinates
``(x, y)`` in descbench's convention (the centre of the top-left pixel at (0, 0)); ``offset`` is
what to add to reach the convention of the intrinsics ``K`` and of glue-factory's sampling, in
which that centre is (0.5, 0.5) (COLMAP's): 0.5 for the ``K`` of a posed scene's ``views.txt``
(:meth:`descbench.datasets.posed.View.K`), 0 for keypoints already in COLMAP's convention. The
image size used by the in-image test is the depth map's ``(W, H)`` (glue-factory's loader asserts
the depth map and the image have one size, and its camera's size is the image's). Distortion is
not modelled: like glue-factory's ``image2cam``, the back-projection uses ``K`` only.

**Depth of a keypoint** (:func:`sample_depth`): bilinear interpolation of the depth map at the
keypoint, unknown depths set to NaN first, as ``torch.nn.functional.grid_sample`` with
``align_corners=False`` and zero padding computes it: the pixel with index ``(i, j)`` (row ``j``)
has its centre at ``(i + 0.5, j + 0.5)`` in COLMAP's convention, so the keypoint's fractional
index is ``u = x + offset - 0.5`` (and ``v`` likewise); the four pixels around it, ``floor(u)``
and ``floor(u) + 1``, are weighted by the usual bilinear weights; a pixel outside the map counts
as depth 0 (zero padding), a NaN one inside makes the sum NaN even at weight 0. Where the bilinear
value is NaN, the nearest pixel's value is taken instead (``rint``, halves to even as
``grid_sample``'s ``nearest`` mode; 0 outside the map). The depth is valid where it is a number
``> 0``. At the border this means, as in glue-factory: within the outer half pixel (``u`` in
``[-0.5, 0)`` or ``(W - 1, W - 0.5]``, inside the image) and up to one pixel beyond the image
(``u`` in ``(-1, -0.5)``), the depth is the border pixel's scaled down by its weight (``d[0] (1 + u)``
on the left), not NaN: finite, positive and therefore valid, but too small; at ``u <= -1`` or
``u >= W`` it is 0 (invalid).

**Reprojection** (:func:`project`): ``X_i = d K_i^-1 [x + offset, y + offset, 1]``,
``X_j = R X_i + t``, ``z = X_j[2]``, the pixel ``K_j`` applied to ``X_j / max(z, 1e-4)``
(glue-factory's ``Camera.eps`` clamp: a point behind camera j still gets a finite pixel), minus
``offset``. Its validity is glue-factory's ``project(..., ccth=None)``: the depth valid, ``z > 1e-4``
and the pixel in image j by glue-factory's ``in_image``, ``0 <= p <= size - 1`` in COLMAP's
coordinates, i.e. ``-offset <= x <= W - 1 - offset`` (and ``y`` likewise) in the keypoints'
(half a pixel off centre on both sides with ``offset = 0.5``: glue-factory's test, kept).
Its cycle-consistency check (``ccth``) is not implemented: ``eval_matches_depth`` leaves it off.

**Symmetric reprojection error of a match** (:func:`symmetric_reprojection_error`):
``0.5 (|p0->1 - p1| + |p1->0 - p0|)`` in pixels, each keypoint projected with its own sampled
depth. A match is *valid* (covisible) where *both* keypoints have a valid depth: glue-factory's
``valid0 & valid1``, without the in-image and ``z`` tests of :func:`project` (a valid match whose
point projects outside the other image or behind its camera keeps its large, finite error); an
invalid match's error may be NaN. :func:`reprojection_precision` is ``eval_matches_depth``'s
``reproj_prec@1px``, ``@3px``, ``@5px`` (:data:`REPROJECTION_THRESHOLDS_PX`): over the valid
matches, NaN counted as inf, the fraction *strictly* below each threshold, 0 when no match is
valid; :func:`covisibility` is its ``covisible`` (the number of valid matches) and
``covisible_percent`` (100 x their fraction; NaN for a pair without a match, as
``mean()`` of an empty tensor is in glue-factory).

**Ground-truth matches** (:func:`gt_matches_from_pose_depth`, glue-factory's function with
``pos_th=3``, ``neg_th=5`` (:data:`GT_POSITIVE_PX`, :data:`GT_NEGATIVE_PX`), ``epi_th=None``,
``cc_th=None``, as ``eval_matches_depth`` calls it): with ``e0[i, j] = |p0_i->1 - p1_j|^2`` and
``e1[i, j] = |p0_i - p1_j->0|^2``, ``D[i, j] = max(e0, e1)`` where both keypoints are visible
(:func:`project`'s validity), inf elsewhere. Keypoint ``i`` of image 0 is matched to
``j = argmin_j D[i, j]`` (first index on ties) when ``i`` is also the argmin of column ``j`` and
``D[i, j] < pos_th^2``; otherwise it is ignored (-2), unless its depth is valid and
``min_j e0[i, j] > neg_th^2`` (over *all* keypoints of image 1, visible or not: a point projecting
outside image 1 is far from all of them), which makes it unmatched (-1). A keypoint of image 0
without a valid depth is therefore always ignored. With no keypoint in image 1 every keypoint of
image 0 is unmatched (-1) (glue-factory's early return for empty inputs, whose tuple
``eval_matches_depth`` could not index). :func:`gt_match_recall` and :func:`gt_match_precision`
are ``eval_matches_depth``'s ``gt_match_recall@3px`` (the fraction of the ground-truth matches
``gt >= 0`` that the prediction reproduces) and ``gt_match_precision@3px`` (the fraction of the
predicted matches ``m >= 0`` whose keypoint is not ignored, ``gt >= -1``, that equal the ground
truth), both ``k / (n + 1e-8)``.

**Deviations from glue-factory.** descbench computes in float64 (glue-factory in float32, on the
GPU when there is one), and the fractional pixel index directly as ``x + offset - 0.5`` instead of
through ``grid_sample``'s normalised grid (the same value up to its rounding, ~1e-5 px in float32).
That rounding decides two cases that descbench decides exactly: a keypoint exactly one pixel
outside the map (``u = -1`` or ``u = W``) has depth 0 here, and in glue-factory 0 or a
vanishing positive number (then valid); a keypoint exactly halfway between two pixel centres
whose bilinear depth is NaN takes the nearest pixel by ``rint`` (halves to even) here, and in
glue-factory the one its rounded index is nearer to. In float32 the ``1e-8`` of recall and
precision vanishes for ``n >= 1``; in float64 it changes the ratio by less than 1e-8. Only pinhole ``K`` (no distortion), one pair at a time (no batch).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from descbench.metrics.pose import _rotation, _vector, normalized_points, pinhole_intrinsics

#: eval/utils.py eval_matches_depth: reproj_prec@1px, @3px, @5px
REPROJECTION_THRESHOLDS_PX = (1.0, 3.0, 5.0)
#: eval/utils.py eval_matches_depth: gt_matches_from_pose_depth(..., pos_th=3.0, neg_th=5.0)
GT_POSITIVE_PX = 3.0
GT_NEGATIVE_PX = 5.0
#: geometry/wrappers.py Camera.eps: the smallest camera z of a visible point, and the clamp of z
CAMERA_Z_EPS = 1e-4
#: eval/utils.py eval_matches_depth: recall and precision's ``1e-8 + mask.sum(1)``
RATIO_EPS = 1e-8
#: geometry/gt_generation.py IGNORE_FEATURE, UNMATCHED_FEATURE
IGNORE, UNMATCHED = -2, -1


def _points(xy, name: str) -> np.ndarray:
    xy = np.asarray(xy, dtype=np.float64)
    if xy.size == 0:
        return xy.reshape(0, 2)
    if xy.ndim != 2 or xy.shape[1] != 2:
        raise ValueError(f"{name}: expected finite pixel coordinates [N, 2], got shape {xy.shape}")
    if not np.isfinite(xy).all():
        raise ValueError(f"{name}: expected finite pixel coordinates [N, 2], got NaN or inf")
    return xy


def _depth_map(depth, name: str) -> np.ndarray:
    depth = np.asarray(depth, dtype=np.float64)
    if depth.ndim != 2 or depth.size == 0:
        raise ValueError(f"{name}: expected a depth map [H, W], got shape {depth.shape}")
    if np.isinf(depth).any():
        raise ValueError(f"{name}: the depth map holds inf; write unknown depths as 0 (or NaN)")
    return depth


def _pose(R, t) -> tuple[np.ndarray, np.ndarray]:
    return _rotation(R, "R"), _vector(t, "t")


def sample_depth(xy: ArrayLike, depth: ArrayLike, offset: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """The depth map ``depth`` [H, W] at keypoints ``xy`` [N, 2] (descbench's pixel convention
    plus ``offset``, module docstring): ``(depths [N], valid [N] bool)``; glue-factory's
    ``geometry/depth.py: sample_depth`` (bilinear ``grid_sample``, ``align_corners=False``, zero
    padding, NaN where the depth is ``<= 0``, the nearest pixel where bilinear is NaN; valid = a
    number ``> 0``). Depths of invalid keypoints are NaN or 0 (0 outside the map).

    Halfway between two pixels of depth 2 and 4; on the left border's outer half pixel (zero
    padding: 4 x 0.75); one pixel beyond it; next to an unknown pixel (bilinear NaN, the nearest
    pixel's depth instead):

    >>> depth = np.array([[4.0, 2.0, 0.0]])
    >>> d, valid = sample_depth([[0.5, 0.0], [-0.25, 0.0], [-1.0, 0.0], [1.25, 0.0]], depth)
    >>> d.tolist(), valid.tolist()
    ([3.0, 3.0, 0.0, 2.0], [True, True, False, True])
    """
    xy = _points(xy, "xy")
    depth = _depth_map(depth, "depth")
    h, w = depth.shape
    known = np.where(depth > 0, depth, np.nan)  # grid_sample sees NaN for unknown depths
    u, v = xy[:, 0] + offset - 0.5, xy[:, 1] + offset - 0.5

    def pixel(col: np.ndarray, row: np.ndarray) -> np.ndarray:
        # zero padding: a pixel outside the map is 0; inside, its value (NaN included)
        inside = (col >= 0) & (col <= w - 1) & (row >= 0) & (row <= h - 1)
        ci = np.clip(col, 0, w - 1).astype(np.int64)
        ri = np.clip(row, 0, h - 1).astype(np.int64)
        return np.where(inside, known[ri, ci], 0.0)

    u0, v0 = np.floor(u), np.floor(v)
    wu1, wv1 = u - u0, v - v0
    wu0, wv0 = 1.0 - wu1, 1.0 - wv1
    bilinear = (pixel(u0, v0) * (wu0 * wv0) + pixel(u0 + 1, v0) * (wu1 * wv0)
                + pixel(u0, v0 + 1) * (wu0 * wv1) + pixel(u0 + 1, v0 + 1) * (wu1 * wv1))
    nearest = pixel(np.rint(u), np.rint(v))
    d = np.where(np.isnan(bilinear), nearest, bilinear)
    return d, ~np.isnan(d) & (d > 0)


def project(xy: ArrayLike, depth_values: ArrayLike, K_i: ArrayLike, K_j: ArrayLike, R: ArrayLike, t: ArrayLike,
            image_size_j: tuple[int, int], valid_i: ArrayLike | None = None,
            offset: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Keypoints ``xy`` [N, 2] of image i with camera depths ``depth_values`` [N] reprojected into
    image j: ``(xy_j [N, 2], visible [N] bool)``, ``xy_j`` in the keypoints' convention; glue-factory's
    ``geometry/depth.py: project(..., ccth=None)`` (module docstring). ``(R, t)`` maps camera i to
    camera j; ``image_size_j`` is image j's ``(width, height)``; ``valid_i`` [N] the depths'
    validity (default: every depth a number ``> 0``). ``visible`` = ``valid_i``, ``z_j > 1e-4``
    and the pixel in image j (``-offset <= x <= W - 1 - offset``, ``y`` likewise).

    A point 5 m in front of camera i, camera j 1 m to its right (``t = [-1, 0, 0]``): it moves
    ``f / z = 100 / 5 = 20`` pixels left, and stays in image j:

    >>> K = np.array([[100.0, 0.0, 50.0], [0.0, 100.0, 40.0], [0.0, 0.0, 1.0]])
    >>> xy_j, visible = project([[49.5, 39.5]], [5.0], K, K, np.eye(3), [-1.0, 0.0, 0.0], (100, 80))
    >>> xy_j.tolist(), visible.tolist()
    ([[29.5, 39.5]], [True])
    """
    xy = _points(xy, "xy")
    d = np.asarray(depth_values, dtype=np.float64).reshape(-1)
    if d.shape != (len(xy),):
        raise ValueError(f"depth_values: one depth per keypoint, got {d.size} for {len(xy)} keypoints")
    K_i, K_j = pinhole_intrinsics(K_i, "K_i"), pinhole_intrinsics(K_j, "K_j")
    R, t = _pose(R, t)
    valid_i = ~np.isnan(d) & (d > 0) if valid_i is None else np.asarray(valid_i, dtype=bool).reshape(-1)
    if len(xy) == 0:
        return np.zeros((0, 2)), np.zeros(0, dtype=bool)
    X_i = normalized_points(xy, K_i, offset) * d[:, None]  # image2cam, then times the depth
    X_j = X_i @ R.T + t
    z = X_j[:, 2]
    in_front = z > CAMERA_Z_EPS
    z = np.maximum(z, CAMERA_Z_EPS)  # NaN stays NaN, as torch.clamp keeps it
    pix = np.column_stack([X_j[:, 0] / z * K_j[0, 0] + K_j[0, 2], X_j[:, 1] / z * K_j[1, 1] + K_j[1, 2]])
    w, h = image_size_j
    in_image = (pix[:, 0] >= 0) & (pix[:, 0] <= w - 1) & (pix[:, 1] >= 0) & (pix[:, 1] <= h - 1)
    return pix - offset, valid_i & in_front & in_image


def _image_size(depth: np.ndarray) -> tuple[int, int]:
    return depth.shape[1], depth.shape[0]


def symmetric_reprojection_error(xy0: ArrayLike, xy1: ArrayLike, K0: ArrayLike, K1: ArrayLike, R: ArrayLike,
                                 t: ArrayLike, depth0: ArrayLike, depth1: ArrayLike,
                                 offset: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """The symmetric reprojection error [N] (pixels) of matches ``xy0[k] <-> xy1[k]`` ([N, 2]
    each), and their validity [N] (both depths valid): glue-factory's
    ``geometry/depth.py: symmetric_reprojection_error`` (module docstring). ``(R, t)`` maps camera 0
    to camera 1; ``depth0``, ``depth1`` [H, W] are the views' depth maps.

    A fronto-parallel wall 5 m away, camera 1 moved 1 m right: a true match is 20 px apart; one
    2 px off has error 2 (2 px each way):

    >>> K = np.array([[100.0, 0.0, 50.0], [0.0, 100.0, 40.0], [0.0, 0.0, 1.0]])
    >>> wall = np.full((80, 100), 5.0)
    >>> e, valid = symmetric_reprojection_error([[49.5, 39.5], [60.0, 10.0]], [[29.5, 39.5], [38.0, 10.0]],
    ...                                         K, K, np.eye(3), [-1.0, 0.0, 0.0], wall, wall)
    >>> e.tolist(), valid.tolist()
    ([0.0, 2.0], [True, True])
    """
    xy0, xy1 = _points(xy0, "xy0"), _points(xy1, "xy1")
    if xy0.shape != xy1.shape:
        raise ValueError(f"xy0 and xy1: one keypoint each per match, got {len(xy0)} and {len(xy1)}")
    depth0, depth1 = _depth_map(depth0, "depth0"), _depth_map(depth1, "depth1")
    K0, K1 = pinhole_intrinsics(K0, "K0"), pinhole_intrinsics(K1, "K1")
    R, t = _pose(R, t)
    d0, valid0 = sample_depth(xy0, depth0, offset)
    d1, valid1 = sample_depth(xy1, depth1, offset)
    R_inv, t_inv = R.T, -R.T @ t
    xy0_1, _ = project(xy0, d0, K0, K1, R, t, _image_size(depth1), valid0, offset)
    xy1_0, _ = project(xy1, d1, K1, K0, R_inv, t_inv, _image_size(depth0), valid1, offset)
    errors = 0.5 * (np.linalg.norm(xy0_1 - xy1, axis=1) + np.linalg.norm(xy1_0 - xy0, axis=1))
    return errors, valid0 & valid1


def reprojection_precision(errors: ArrayLike, valid: ArrayLike,
                           thresholds: Sequence[float] = REPROJECTION_THRESHOLDS_PX) -> np.ndarray:
    """The fraction of the valid matches whose reprojection error (NaN counted as inf) is strictly
    below each threshold; 0 when no match is valid (``eval_matches_depth``'s ``reproj_prec``).

    >>> reprojection_precision([0.5, 3.0, float("nan"), 0.1], [True, True, True, False]).tolist()
    [0.3333333333333333, 0.3333333333333333, 0.6666666666666666]
    >>> reprojection_precision([], []).tolist()
    [0.0, 0.0, 0.0]
    """
    e = np.asarray(errors, dtype=np.float64).reshape(-1)
    valid = np.asarray(valid, dtype=bool).reshape(-1)
    if e.shape != valid.shape:
        raise ValueError(f"errors and valid: one value each per match, got {e.size} and {valid.size}")
    e = np.nan_to_num(e[valid], nan=np.inf)
    if e.size == 0:
        return np.zeros(len(thresholds))
    return np.array([float(np.mean(e < th)) for th in thresholds])


def covisibility(valid: ArrayLike) -> tuple[int, float]:
    """``(count, percent)`` of the valid matches: ``eval_matches_depth``'s ``covisible`` and
    ``covisible_percent``; the percent is NaN for a pair without a match (glue-factory's mean of
    an empty tensor).

    >>> covisibility([True, False, True, True])
    (3, 75.0)
    >>> covisibility([])  # no match: no percentage
    (0, nan)
    """
    valid = np.asarray(valid, dtype=bool).reshape(-1)
    percent = float(valid.mean()) * 100.0 if valid.size else float("nan")
    return int(valid.sum()), percent


def gt_matches_from_pose_depth(xy0: ArrayLike, xy1: ArrayLike, K0: ArrayLike, K1: ArrayLike, R: ArrayLike,
                               t: ArrayLike, depth0: ArrayLike, depth1: ArrayLike, pos_th: float = GT_POSITIVE_PX,
                               neg_th: float = GT_NEGATIVE_PX, offset: float = 0.5) -> np.ndarray:
    """Ground-truth matches [N0] (int64) of keypoints ``xy0`` [N0, 2] of image 0 among ``xy1``
    [N1, 2] of image 1: the index in ``xy1``, -1 unmatched, -2 ignored; glue-factory's
    ``geometry/gt_generation.py: gt_matches_from_pose_depth`` with ``epi_th=None`` and
    ``cc_th=None`` (module docstring). Memory: a few [N0, N1] float64 matrices.

    A wall 5 m away, camera 1 moved 1 m right (keypoints move 20 px left): keypoint 0 has its
    match; keypoint 1's nearest is 4 px off (neither within 3 px nor beyond 5 px: ignored);
    keypoint 2 projects 40 px from any keypoint (unmatched):

    >>> K = np.array([[100.0, 0.0, 50.0], [0.0, 100.0, 40.0], [0.0, 0.0, 1.0]])
    >>> wall = np.full((80, 100), 5.0)
    >>> xy0 = [[49.5, 39.5], [70.0, 10.0], [90.0, 70.0]]
    >>> xy1 = [[29.5, 39.5], [54.0, 10.0]]
    >>> gt_matches_from_pose_depth(xy0, xy1, K, K, np.eye(3), [-1.0, 0.0, 0.0], wall, wall).tolist()
    [0, -2, -1]
    """
    xy0, xy1 = _points(xy0, "xy0"), _points(xy1, "xy1")
    depth0, depth1 = _depth_map(depth0, "depth0"), _depth_map(depth1, "depth1")
    K0, K1 = pinhole_intrinsics(K0, "K0"), pinhole_intrinsics(K1, "K1")
    R, t = _pose(R, t)
    n0, n1 = len(xy0), len(xy1)
    if n0 == 0 or n1 == 0:
        return np.full(n0, UNMATCHED, dtype=np.int64)
    d0, valid0 = sample_depth(xy0, depth0, offset)
    d1, valid1 = sample_depth(xy1, depth1, offset)
    xy0_1, visible0 = project(xy0, d0, K0, K1, R, t, _image_size(depth1), valid0, offset)
    xy1_0, visible1 = project(xy1, d1, K1, K0, R.T, -R.T @ t, _image_size(depth0), valid1, offset)
    e0 = ((xy0_1[:, None, :] - xy1[None, :, :]) ** 2).sum(-1)  # [N0, N1]
    e1 = ((xy0[:, None, :] - xy1_0[None, :, :]) ** 2).sum(-1)
    dist = np.where(visible0[:, None] & visible1[None, :], np.maximum(e0, e1), np.inf)
    nearest0 = np.argmin(dist, axis=1)  # per keypoint of image 0, its nearest in image 1
    nearest1 = np.argmin(dist, axis=0)
    rows = np.arange(n0)
    positive = (nearest1[nearest0] == rows) & (dist[rows, nearest0] < pos_th**2)
    negative = (e0.min(axis=1) > neg_th**2) & valid0  # NaN rows (no depth) are never negative
    matches = np.where(positive, nearest0, IGNORE)
    return np.where(negative, UNMATCHED, matches).astype(np.int64)


def _matches(m, gt) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(m).reshape(-1)
    gt = np.asarray(gt).reshape(-1)
    if m.shape != gt.shape:
        raise ValueError(f"matches0 and gt_matches0: one entry each per keypoint of image 0, got {m.size} and {gt.size}")
    return m, gt


def gt_match_recall(matches0: ArrayLike, gt_matches0: ArrayLike) -> float:
    """The fraction of ground-truth matches (``gt >= 0``) that ``matches0`` [N0] reproduces,
    ``k / (n + 1e-8)``: ``eval_matches_depth``'s ``gt_match_recall@3px``; 0 without one.

    >>> round(gt_match_recall([0, 1, -1, 3], [0, 2, 5, -2]), 6)  # 1 of 3
    0.333333
    >>> gt_match_recall([0, 1], [-1, -2])  # no ground-truth match
    0.0
    """
    m, gt = _matches(matches0, gt_matches0)
    mask = gt > -1
    return float(np.sum((m == gt) & mask) / (RATIO_EPS + np.sum(mask)))


def gt_match_precision(matches0: ArrayLike, gt_matches0: ArrayLike) -> float:
    """The fraction of predicted matches (``m >= 0``) on keypoints not ignored (``gt >= -1``) that
    equal the ground truth, ``k / (n + 1e-8)``: ``eval_matches_depth``'s
    ``gt_match_precision@3px``; 0 without one.

    >>> round(gt_match_precision([0, 1, 4, 3], [0, 2, -1, -2]), 6)  # 1 of 3 (keypoint 3 ignored)
    0.333333
    >>> gt_match_precision([-1, -1], [0, 1])  # no predicted match
    0.0
    """
    m, gt = _matches(matches0, gt_matches0)
    mask = (m > -1) & (gt >= -1)
    return float(np.sum((m == gt) & mask) / (RATIO_EPS + np.sum(mask)))
