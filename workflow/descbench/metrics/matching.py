"""Matching metrics of one image pair (1, k): pure functions, no file I/O.

Conventions (H maps image-1 pixels to image k; sizes are ``(width, height)``; a point is inside an
image of size W x H iff ``0 <= x < W`` and ``0 <= y < H`` and it does not map behind the camera):

- **Matches**: mutual nearest neighbours of the image-1 and image-k descriptors
  (:func:`descbench.metrics.nn.mutual_nearest`: exact float64 L2 / Hamming, ties to the lowest
  index).
- **Reprojection error** of a match (i, j): ``|H p1_i - p2_j|`` in image-k pixels
  (:func:`descbench.metrics.retrieval.project`); a point mapping behind the camera (w <= 0) has
  error inf.
- **Pairs without keypoints (one rule for every metric below)**: a pair whose image 1 or image k
  has no keypoint has *no data*: its precision, MMA at every threshold, matching score,
  repeatability and corner error are NaN (``homography_found`` = 0, ``n_inliers`` = 0), and every
  mean over pairs leaves it out (:func:`homography_accuracy` and :func:`homography_auc` too); the
  aggregates count it once, as ``pairs_without_keypoints``. So an empty image never shows as a 0.0
  result or as a homography failure. A pair *with* keypoints in both images but no (or too few)
  matches is a result: precision and MMA 0, homography failure (corner error inf), all counted.
- **Legacy precision**: a match is correct iff error <= ``tau_px``; precision = correct / matches;
  a pair without matches has precision 0 (and n_matches = 0), it is *counted*.
- **MMA** (D2-Net ``hpatches_sequences/HPatches-Sequences-Matching-Benchmark.ipynb``; same in
  ALIKE ``hseq/eval.py``): per pair the
  fraction of matches with error <= thr for each thr in ``mma_thresholds`` (1..10 px); a pair
  without matches scores 0 and is counted (D2-Net sets the distance list to ``[inf]``); NaN
  without keypoints (see above).
- **Matching score**: ``ms_correct / n_shared_1`` where ``ms_correct`` = correct matches
  (error <= tau_px) whose image-1 keypoint projects inside image k, and ``n_shared_1`` = image-1
  keypoints whose projection lies inside image k. 0 when ``n_shared_1 = 0`` (NaN without
  keypoints, see above). Alternatives stored
  for re-derivation: SuperPoint (DeTone et al. 2018, appendix; KP2D
  ``kp2d/evaluation/descriptor_evaluation.py``) averages both directions of *one-way* NN matching
  with the shared-region counts of each image as denominators; a symmetric mutual-NN variant is
  ``ms_correct / ((n_shared_1 + n_shared_2) / 2)``; D2-Net reports no matching score. (The one-way
  NN numerators of the SuperPoint variant are not derivable from mutual-NN statistics.)
- **Repeatability** (SuperPoint / KP2D ``detector_evaluation.py``): shared image-1 keypoints
  (projection inside image k) and shared image-k keypoints (back-projection by inv(H) inside image
  1); all distances measured in image-k pixels between ``H p1`` and ``p2``. An image-1 shared
  keypoint is repeated iff its nearest shared image-k keypoint is within ``repeatability_px``
  (inclusive); an image-k shared keypoint is repeated iff its nearest projected shared image-1
  keypoint is. Repeatability = ``(n_repeated_1 + n_repeated_2) / (n_shared_1 + n_shared_2)``,
  NaN when both shared sets are empty (undefined; SuperPoint/KP2D return -1) and, by the rule
  above, when image 1 or image k has no keypoint at all. Nearest neighbours
  are exact (:func:`descbench.metrics.kernels.spatial_nearest`).
- **Homography estimation** (SuperPoint / ALIKE): ``cv2.findHomography(src, dst, cv2.RANSAC,
  ransac_px)`` on the mutual-NN matches; fewer than 4 matches, or no model found, is a failure
  with corner error inf (counted); a pair without keypoints has corner error NaN (no data, left
  out; see above). Corner error = mean over the four image-1 corners
  ``(0,0), (w-1,0), (0,h-1), (w-1,h-1)`` (w, h = image-1 size) of ``|H_est c - H_true c|``; the
  ``-1`` convention is that of ALIKE ``hseq/eval.py`` and of rpautrat/SuperPoint
  ``descriptor_evaluation.py`` (which uses ``shape - 1``; note its x/y order is swapped for
  non-square images, ALIKE's is not). A corner mapped behind the camera by H_est has error inf.
  Determinism: ``cv2.setRNGSeed(ransac_seed)`` is called before each estimation; OpenCV's RANSAC
  (``ptsetreg.cpp``) in any case seeds its own generator with a fixed value, so the result is a
  deterministic function of the inputs (it may differ between OpenCV versions). OpenCV converts
  the points to float32 internally, so an exact homography is recovered to ~1e-5 px for generic
  coordinates of ~1e3 px (exactly for float32-representable correspondences).
  Aggregates over the pairs with data (NaN corner errors left out): accuracy at thr = fraction
  of pairs with corner error <= thr (:func:`homography_accuracy`); AUC at thr = LoFTR
  ``error_auc`` (:func:`homography_auc`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np

from descbench.columns import threshold_key
from descbench.errors import DataError
from descbench.params import ConfigParams, config_field
from descbench.metrics import kernels
from descbench.metrics.nn import _validate, mutual_nearest
from descbench.metrics.retrieval import project

if TYPE_CHECKING:  # annotations only (postponed): no import at run time
    from numpy.typing import ArrayLike

HOMOGRAPHY_ACC_THRESHOLDS = (1.0, 3.0, 5.0)
HOMOGRAPHY_AUC_THRESHOLDS = (3.0, 5.0, 10.0)


@dataclass(frozen=True)
class MatchingParams(ConfigParams):
    """Matching's settings: ``scoring`` and ``matching`` keys of the config (defaults: the
    schema's; ``MatchingParams.from_config(scoring=..., matching=...)``)."""

    tau_px: float = config_field("scoring.tau_px", float)  # legacy precision and matching score
    mma_thresholds: tuple = config_field("matching.mma_thresholds", tuple)  # px
    repeatability_px: float = config_field("matching.repeatability_px", float)
    ransac_px: float = config_field("matching.ransac_px", float)  # cv2.findHomography ransacReprojThreshold
    ransac_seed: int = config_field("matching.ransac_seed", int)
    chunk_mb: float = config_field("scoring.chunk_mb", float)  # bound on the float32 descriptor screen block

    def __post_init__(self):
        ts = tuple(float(t) for t in self.mma_thresholds)
        if not ts or any(not (t >= 0 and np.isfinite(t)) for t in ts):
            raise ValueError(f"mma_thresholds must be non-empty finite values >= 0, got {self.mma_thresholds}")
        for name in ("tau_px", "repeatability_px", "ransac_px", "chunk_mb"):
            v = float(getattr(self, name))
            if not (v > 0 and np.isfinite(v)):
                raise ValueError(f"{name} must be a finite value > 0, got {getattr(self, name)}")


# --------------------------------------------------------------------------- building blocks


def reprojection_errors(H: np.ndarray, xy1: np.ndarray, xy2: np.ndarray) -> np.ndarray:
    """``|H p1 - p2|`` per row (float64); inf where p1 maps behind the camera."""
    p, _ = project(H, xy1, 1, 1)  # the image size only affects ``inside``, unused here
    xy2 = np.asarray(xy2, dtype=np.float64).reshape(-1, 2)
    with np.errstate(invalid="ignore"):
        err = np.hypot(p[:, 0] - xy2[:, 0], p[:, 1] - xy2[:, 1])
    return np.where(np.isfinite(p).all(axis=1), err, np.inf)


# The corners a corner error averages over (:func:`image_corners`).
CORNER_CONVENTIONS = ("pixel_centres", "image_edges")


def image_corners(size, convention: str = "pixel_centres") -> np.ndarray:
    """The four corners of a ``(w, h)`` image, [4, 2] float64 (x, y).

    ``pixel_centres`` (SuperPoint / ALIKE, descbench's default): ``(0,0), (w-1,0), (0,h-1),
    (w-1,h-1)``; ``image_edges`` (glue-factory's ``geometry/homography.py``
    ``homography_corner_error``): ``(0,0), (w,0), (w,h), (0,h)``.

    >>> image_corners((4, 3), "image_edges").tolist()
    [[0.0, 0.0], [4.0, 0.0], [4.0, 3.0], [0.0, 3.0]]
    """
    w, h = size
    if convention == "pixel_centres":
        return np.array([[0.0, 0.0], [w - 1.0, 0.0], [0.0, h - 1.0], [w - 1.0, h - 1.0]])
    if convention == "image_edges":
        return np.array([[0.0, 0.0], [float(w), 0.0], [float(w), float(h)], [0.0, float(h)]])
    raise ValueError(f"corner convention {convention!r} is not one of {', '.join(CORNER_CONVENTIONS)}")


def corner_error(H_est: ArrayLike | None, H_true: ArrayLike, image1_size: tuple[int, int], corners: str = "pixel_centres") -> float:
    """Mean corner distance ``|H_est c - H_true c|`` over :func:`image_corners` of image 1 in
    convention ``corners`` (inf if H_est is None, a failed estimate, as glue-factory counts it;
    inf too when a corner maps behind the camera, where glue-factory's ``from_homogeneous``
    divides by the negative depth and reports a finite distance).

    An estimate shifted by (3, 4) px is 5 px off at every corner:

    >>> H_est = np.array([[1.0, 0, 3], [0, 1, 4], [0, 0, 1]])
    >>> corner_error(H_est, np.eye(3), (640, 480))
    5.0
    >>> corner_error(None, np.eye(3), (640, 480))
    inf
    """
    if H_est is None:
        return float("inf")
    c = image_corners(image1_size, corners)
    pe, _ = project(np.asarray(H_est, dtype=np.float64), c, 1, 1)
    pt, _ = project(np.asarray(H_true, dtype=np.float64), c, 1, 1)
    if not (np.isfinite(pe).all() and np.isfinite(pt).all()):
        return float("inf")
    return float(np.mean(np.hypot(pe[:, 0] - pt[:, 0], pe[:, 1] - pt[:, 1])))


def estimate_homography(src: np.ndarray, dst: np.ndarray, ransac_px: float = 3.0, seed: int = 0):
    """``(H, n_inliers)`` from ``cv2.findHomography(src, dst, cv2.RANSAC, ransac_px)``.

    ``(None, 0)`` with fewer than 4 correspondences or when OpenCV finds no model.
    ``cv2.setRNGSeed(seed)`` is called first (see the module docstring on determinism).
    """
    src = np.ascontiguousarray(src, dtype=np.float64).reshape(-1, 2)
    dst = np.ascontiguousarray(dst, dtype=np.float64).reshape(-1, 2)
    if src.shape[0] < 4:
        return None, 0
    cv2.setRNGSeed(int(seed))
    try:
        H, mask = cv2.findHomography(src, dst, cv2.RANSAC, float(ransac_px))
    except cv2.error:
        return None, 0
    if H is None or H.shape != (3, 3) or not np.isfinite(H).all():
        return None, 0
    return H.astype(np.float64), int(mask.sum()) if mask is not None else 0


def pair_repeatability(xy1: np.ndarray, xyk: np.ndarray, H: np.ndarray, image1_size, target_size, radius_px: float) -> tuple[int, int, int, int]:
    """``(n_shared_1, n_shared_k, n_repeated_1, n_repeated_k)`` of one pair's keypoints alone (no
    descriptors): the repeatability of the module docstring, ``(n_repeated_1 + n_repeated_k) /
    (n_shared_1 + n_shared_k)``, as :func:`match_pair` computes it. These are counts, returned
    whatever the pair: for a pair whose image 1 or image k has no keypoint, :func:`match_pair`'s
    repeatability is NaN (no data), and a caller pooling these counts must leave such a pair out
    to follow the same rule."""
    H = np.asarray(H, dtype=np.float64)
    (w1, h1), (wk, hk) = image1_size, target_size
    proj1, shared1 = project(H, xy1, wk, hk)
    _, shared2 = project(np.linalg.inv(H), xyk, w1, h1)
    r1, r2 = repeatability_counts(proj1, shared1, np.asarray(xyk, np.float64).reshape(-1, 2), shared2, radius_px)
    return int(shared1.sum()), int(shared2.sum()), r1, r2


def repeatability_counts(proj1: np.ndarray, shared1: np.ndarray, xy2: np.ndarray, shared2: np.ndarray, radius_px: float):
    """``(n_repeated_1, n_repeated_2)`` of the shared keypoints (distances in image-k pixels)."""
    a = np.ascontiguousarray(proj1[shared1], dtype=np.float64).reshape(-1, 2)
    b = np.ascontiguousarray(xy2[shared2], dtype=np.float64).reshape(-1, 2)
    _, d_ab = kernels.spatial_nearest(a, b)
    _, d_ba = kernels.spatial_nearest(b, a)
    return int((d_ab <= radius_px).sum()), int((d_ba <= radius_px).sum())


# --------------------------------------------------------------------------- aggregates


def homography_accuracy(errors: ArrayLike, thresholds: Sequence[float] = HOMOGRAPHY_ACC_THRESHOLDS) -> np.ndarray:
    """Fraction of pairs with corner error <= thr, per threshold (NaN when no pair has data).

    Failures (inf) count as pairs that never reach any threshold; NaN errors (pairs without
    keypoints: no data) are left out of the numerator and the denominator.

    >>> homography_accuracy([1.0, 2.0, float("inf"), float("nan")], thresholds=[1, 3]).tolist()
    [0.3333333333333333, 0.6666666666666666]
    >>> homography_accuracy([float("nan")], thresholds=[1, 3]).tolist()  # no pair has data
    [nan, nan]
    """
    e = np.asarray(errors, dtype=np.float64).ravel()
    e = e[~np.isnan(e)]
    if e.size == 0:
        return np.full(len(thresholds), np.nan)
    return np.array([float((e <= t).mean()) for t in thresholds])


def homography_auc(errors: ArrayLike, thresholds: Sequence[float] = HOMOGRAPHY_AUC_THRESHOLDS, decimals: int | None = None) -> np.ndarray:
    """Area under the cumulative error curve up to thr, divided by thr (LoFTR ``error_auc``).

    ``decimals``: round each AUC to that many decimals (``np.round``); glue-factory's
    ``utils/tools.py`` ``cal_error_auc`` is this same area rounded to 4 (``decimals=4``). None:
    unrounded (LoFTR).

    LoFTR (zju3dv/LoFTR ``src/utils/metrics.py``): with the N errors sorted, e_1 <= ... <= e_N,
    the recall curve is the polyline through ``(0, 0), (e_1, 1/N), ..., (e_k, k/N)`` extended
    flat to ``(thr, k/N)``, where ``k = #{e_i < thr}`` (``np.searchsorted`` left: an error equal to
    thr is *not* included); AUC = trapezoidal area / thr. Failures (inf) stay in N. The
    thresholds passed are used (LoFTR's copy overwrites them with [5, 10, 20]). NaN errors
    (pairs without keypoints: no data) are left out, as in :func:`homography_accuracy`; NaN when
    no pair has data (LoFTR would return 0).

    Errors 1, 2 and a failure, up to 3 px: the polyline (0, 0), (1, 1/3), (2, 2/3), (3, 2/3)
    encloses 1/6 + 1/2 + 2/3 = 4/3, divided by 3:

    >>> homography_auc([1.0, 2.0, float("inf")], thresholds=[3]).tolist()
    [0.4444444444444444]
    >>> homography_auc([1.0, 2.0, float("inf")], thresholds=[3], decimals=4).tolist()  # glue-factory
    [0.4444]
    """
    e = np.asarray(errors, dtype=np.float64).ravel()
    e = np.sort(e[~np.isnan(e)])
    n = e.size
    out = np.full(len(thresholds), np.nan)
    if n == 0:
        return out
    for t_i, thr in enumerate(thresholds):
        thr = float(thr)
        if not thr > 0:
            raise ValueError(f"AUC thresholds must be > 0, got {thr}")
        k = int(np.searchsorted(e, thr, side="left"))
        x = np.concatenate([[0.0], e[:k], [thr]])
        y = np.concatenate([[0.0], np.arange(1, k + 1) / n, [k / n]])
        out[t_i] = float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0) / thr)
    return out if decimals is None else np.round(out, decimals)


def sym_homography_error(xy0, xy1, H) -> np.ndarray:
    """Symmetric transfer error of matches ``xy0[i] <-> xy1[i]`` ([N, 2] each) under ``H`` (image 0
    -> image 1): ``(|H p0 - p1| + |H^+ p1 - p0|) / 2`` per match, float64, with ``H^+`` the
    pseudo-inverse (glue-factory's ``geometry/homography.py`` ``sym_homography_error``, whose
    per-match precision at 1 and 3 px is the fraction of errors ``< thr``). Plain division by the
    homogeneous coordinate, as glue-factory's.

    >>> sym_homography_error([[0, 0]], [[3, 4]], np.eye(3)).tolist()
    [5.0]
    """
    H = np.asarray(H, dtype=np.float64)
    if H.shape != (3, 3) or not np.isfinite(H).all():
        raise DataError(f"sym_homography_error: H must be a finite 3 x 3 matrix, got shape {H.shape}")
    a = np.asarray(xy0, dtype=np.float64).reshape(-1, 2)
    b = np.asarray(xy1, dtype=np.float64).reshape(-1, 2)
    if a.shape != b.shape:
        raise DataError(f"sym_homography_error: {a.shape[0]} points in image 0 but {b.shape[0]} in image 1")

    def transfer(M, p):
        q = np.c_[p, np.ones(len(p))] @ M.T
        return q[:, :2] / q[:, 2:]

    with np.errstate(divide="ignore", invalid="ignore"):
        fwd = np.linalg.norm(transfer(H, a) - b, axis=1)
        bwd = np.linalg.norm(transfer(np.linalg.pinv(H), b) - a, axis=1)
    return (fwd + bwd) / 2.0


# --------------------------------------------------------------------------- entry point


def _check_xy(xy, desc, name):
    xy = np.asarray(xy, dtype=np.float64)
    if xy.ndim != 2 or xy.shape[1] != 2:
        raise DataError(f"{name} keypoints must be an [N, 2] array of (x, y), got shape {xy.shape}")
    if desc.ndim != 2 or xy.shape[0] != desc.shape[0]:
        raise DataError(f"{name}: {xy.shape[0]} keypoints but descriptor array of shape {desc.shape}")
    if not np.isfinite(xy).all():
        raise DataError(f"{name} keypoint coordinates contain NaN or inf")
    return xy


def _check_size(size, name):
    try:
        w, h = (int(v) for v in size)
    except (TypeError, ValueError):
        raise DataError(f"{name} must be (width, height), got {size!r}") from None
    if w <= 0 or h <= 0:
        raise DataError(f"{name} must be positive (width, height), got {size!r}")
    return w, h


def match_pair(q_xy: ArrayLike, q_desc: np.ndarray, t_xy: ArrayLike, t_desc: np.ndarray, H: ArrayLike, image1_size: tuple[int, int],
               target_size: tuple[int, int], params: MatchingParams = MatchingParams()) -> dict:
    """Per-pair sufficient statistics of the matching metrics (see the module docstring).

    Arguments: image-1 keypoints ``q_xy`` [N1, 2] (x, y) and descriptors ``q_desc`` [N1, D];
    image-k ``t_xy`` [N2, 2] and ``t_desc`` [N2, D] (same dtype and width); ``H`` 3x3 maps image 1
    to image k; ``image1_size``, ``target_size`` = (width, height).

    Returned keys (plain int / float):

    - ``n_keypoints_1``, ``n_keypoints_2``: N1, N2
    - ``n_matches``: mutual-NN matches
    - ``n_correct``: matches with reprojection error <= tau_px; ``precision`` = n_correct /
      n_matches (0.0 without matches; NaN when image 1 or image k has no keypoint)
    - ``mma_correct_at_{t}`` / ``mma_at_{t}`` for t in mma_thresholds (keys via
      :func:`threshold_key`, e.g. ``mma_at_3``): correct count at t / its fraction (0.0 without
      matches, NaN without keypoints)
    - ``n_shared_1``: image-1 keypoints projecting inside image k; ``n_shared_2``: image-k
      keypoints back-projecting inside image 1
    - ``ms_correct``: correct matches whose image-1 keypoint is shared; ``matching_score`` =
      ms_correct / n_shared_1 (0.0 when n_shared_1 = 0, NaN without keypoints)
    - ``n_repeated_1``, ``n_repeated_2``, ``repeatability`` (NaN when n_shared_1 + n_shared_2 = 0
      or without keypoints)
    - ``homography_found`` (0/1), ``n_inliers`` (RANSAC inliers, 0 on failure),
      ``corner_error`` (px, inf on failure, NaN without keypoints)

    Without a keypoint in image 1 or image k every ratio above is NaN (no data; module docstring).

    Four keypoints seen again 2 px to the right (H shifts x by 2); image k's fourth descriptor
    belongs to its third keypoint and vice versa, so those two matches land 20 px off:

    >>> xy = np.array([[10.0, 10.0], [30.0, 10.0], [10.0, 30.0], [30.0, 30.0]])
    >>> H = np.array([[1.0, 0, 2], [0, 1, 0], [0, 0, 1]])
    >>> d = np.eye(4, dtype=np.float32)
    >>> s = match_pair(xy, d, xy + [2, 0], d[[0, 1, 3, 2]], H, (64, 48), (64, 48))
    >>> s["n_matches"], s["n_correct"], s["mma_at_3"], s["matching_score"]
    (4, 2, 0.5, 0.5)
    """
    q_xy, q_desc, t_xy, t_desc, H, H_inv, size1, sizek = _check_pair(q_xy, q_desc, t_xy, t_desc, H, image1_size, target_size)
    ia, ib, _ = mutual_nearest(q_desc, t_desc, chunk_mb=params.chunk_mb)
    return _match_stats(q_xy, t_xy, H, H_inv, size1, sizek, ia, ib, params)


def matched_pair_stats(q_xy, t_xy, H, image1_size, target_size, ia, ib, params: MatchingParams = MatchingParams()) -> dict:
    """:func:`match_pair`'s statistics of the given matches (image-1 keypoint ``ia[m]`` with
    image-k keypoint ``ib[m]``, int arrays [M]) instead of its mutual nearest neighbours: the same
    keys, definitions and no-data rule, for the matches of any matcher (the matcher stage,
    :mod:`descbench.matchers`). With the mutual nearest neighbours it returns exactly
    :func:`match_pair`'s dictionary."""
    q_xy = np.asarray(q_xy, dtype=np.float64).reshape(-1, 2)
    t_xy = np.asarray(t_xy, dtype=np.float64).reshape(-1, 2)
    ia = np.asarray(ia, dtype=np.int64).reshape(-1)
    ib = np.asarray(ib, dtype=np.int64).reshape(-1)
    if ia.shape != ib.shape or (ia.size and (ia.min() < 0 or ia.max() >= len(q_xy) or ib.min() < 0 or ib.max() >= len(t_xy))):
        raise DataError(f"matches out of range or of unequal length: {ia.size} / {ib.size} indices for {len(q_xy)} and "
                        f"{len(t_xy)} keypoints; rerun the matcher stage")
    _, _, _, _, H, H_inv, size1, sizek = _check_pair(q_xy, np.zeros((len(q_xy), 1), np.float32), t_xy,
                                                     np.zeros((len(t_xy), 1), np.float32), H, image1_size, target_size)
    return _match_stats(q_xy, t_xy, H, H_inv, size1, sizek, ia, ib, params)


def _check_pair(q_xy, q_desc, t_xy, t_desc, H, image1_size, target_size):
    """Validated ``(q_xy, q_desc, t_xy, t_desc, H, H_inv, (w1, h1), (wk, hk))`` (DataError otherwise)."""
    q_desc = np.asarray(q_desc)
    t_desc = np.asarray(t_desc)
    q_xy = _check_xy(q_xy, q_desc, "image-1")
    t_xy = _check_xy(t_xy, t_desc, "image-k")
    H = np.asarray(H, dtype=np.float64)
    if H.shape != (3, 3) or not np.isfinite(H).all():
        raise DataError(f"homography must be a finite 3x3 matrix, got shape {H.shape}")
    try:
        H_inv = np.linalg.inv(H)
    except np.linalg.LinAlgError:
        raise DataError("homography is singular (cannot map image k back to image 1)") from None
    size1 = _check_size(image1_size, "image1_size")
    sizek = _check_size(target_size, "target_size")
    return q_xy, q_desc, t_xy, t_desc, H, H_inv, size1, sizek


def _match_stats(q_xy, t_xy, H, H_inv, size1, sizek, ia, ib, params: MatchingParams) -> dict:
    """The dictionary of :func:`match_pair` from the mutual-NN matches ``(ia, ib)``."""
    w1, h1 = size1
    wk, hk = sizek
    proj1, shared1 = project(H, q_xy, wk, hk)
    _, shared2 = project(H_inv, t_xy, w1, h1)
    m = int(ia.shape[0])
    err = reprojection_errors(H, q_xy[ia], t_xy[ib])

    out: dict = {"n_keypoints_1": int(q_xy.shape[0]), "n_keypoints_2": int(t_xy.shape[0]), "n_matches": m}
    # Without a keypoint in one of the images the pair has no data: every ratio and the corner
    # error are NaN, left out of every mean (module docstring). With keypoints but no match,
    # precision and MMA are 0 and the homography a failure (protocols section 4: counted).
    has_data = bool(q_xy.shape[0] and t_xy.shape[0])
    nan = float("nan")
    no_match = 0.0 if has_data else nan
    correct = err <= params.tau_px
    out["n_correct"] = int(correct.sum())
    out["precision"] = out["n_correct"] / m if m else no_match
    for t in params.mma_thresholds:
        c = int((err <= float(t)).sum())
        out[f"mma_correct_at_{threshold_key(t)}"] = c
        out[f"mma_at_{threshold_key(t)}"] = c / m if m else no_match

    n_s1 = int(shared1.sum())
    n_s2 = int(shared2.sum())
    out["n_shared_1"] = n_s1
    out["n_shared_2"] = n_s2
    out["ms_correct"] = int((correct & shared1[ia]).sum())
    out["matching_score"] = (out["ms_correct"] / n_s1 if n_s1 else 0.0) if has_data else nan

    r1, r2 = repeatability_counts(proj1, shared1, t_xy, shared2, params.repeatability_px)
    out["n_repeated_1"] = r1
    out["n_repeated_2"] = r2
    out["repeatability"] = (r1 + r2) / (n_s1 + n_s2) if has_data and n_s1 + n_s2 else nan

    H_est, n_in = estimate_homography(q_xy[ia], t_xy[ib], params.ransac_px, params.ransac_seed)
    out["homography_found"] = int(H_est is not None)
    out["n_inliers"] = n_in
    out["corner_error"] = corner_error(H_est, H, (w1, h1)) if has_data else nan
    return out


def evaluate_pair(q_xy, q_desc, t_xy, t_desc, H, image1_size, target_size, mparams: MatchingParams = MatchingParams(),
                  cparams=None, matchers=None):
    """Everything of one image pair's matching task, each pass over the pair table made once.

    Returns ``(match_pair(...), classify_pair(...))`` with identical values: the matching
    dictionary of :func:`match_pair` (with ``mparams``) and the
    :class:`descbench.metrics.classifier.ClassifierResult` of
    :func:`descbench.metrics.classifier.classify_pair` (with ``cparams``, default
    ``ClassifierParams()``, and ``matchers``, default all). One
    :func:`descbench.metrics.pairpass.pair_pass` gives the mutual-NN matches, the nearest /
    second-nearest neighbours of the nn / ratio matchers and the threshold-ROC histogram (float32:
    one BLAS product per block of image-1 rows; the block bound is the smaller chunk_mb).
    """
    from descbench.metrics.classifier import prepare

    ev = PairEvaluation(q_xy, q_desc, t_xy, t_desc, H, image1_size, target_size, mparams, cparams, matchers, begin=False)
    prepare(ev.pop, ev.matchers, mutual=True, chunk_mb=min(float(mparams.chunk_mb), float(ev.cparams.chunk_mb)))
    return ev.finish()


class PairEvaluation:
    """:func:`evaluate_pair` in steps: validation and the classifier population at construction,
    the pair pass to feed in ``pass_`` (a :class:`descbench.metrics.pairpass.PairPass`, or None
    when there is nothing to feed; ``begin=True``), then :meth:`finish` -> ``(stats, result)``."""

    def __init__(self, q_xy, q_desc, t_xy, t_desc, H, image1_size, target_size, mparams: MatchingParams = MatchingParams(),
                 cparams=None, matchers=None, begin: bool = True):
        from descbench.metrics.classifier import MATCHERS, ClassifierParams, PairPopulation, begin_prepare

        cparams = ClassifierParams() if cparams is None else cparams
        matchers = MATCHERS if matchers is None else tuple(matchers)
        for m in matchers:
            if m not in MATCHERS:
                raise ValueError(f"unknown matcher {m!r}; expected one of {MATCHERS}")
        q_xy, q_desc, t_xy, t_desc, H, H_inv, size1, sizek = _check_pair(q_xy, q_desc, t_xy, t_desc, H, image1_size, target_size)
        _validate(q_desc, t_desc, names=("image-a", "image-b"))  # the errors match_pair would raise
        self.mparams, self.cparams, self.matchers = mparams, cparams, matchers
        self.geometry = (q_xy, t_xy, H, H_inv, size1, sizek)
        self.pop = PairPopulation(q_xy, q_desc, t_xy, t_desc, H, cparams)
        self.pass_ = begin_prepare(self.pop, matchers, mutual=True) if begin else None

    def finish(self):
        from descbench.metrics.classifier import ClassifierResult, roc

        if self.pass_ is not None:
            self.pop.end_pass(self.pass_)
        pop = self.pop
        ia, ib = pop.mutual_pairs()
        stats = _match_stats(*self.geometry, ia, ib, self.mparams)
        return stats, ClassifierResult(pop.n1, pop.n2, {m: roc(pop, m) for m in self.matchers})
