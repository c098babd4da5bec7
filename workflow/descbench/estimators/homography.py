"""Homography estimation from matched points, as glue-factory's HPatches evaluation estimates it.

The reference is cvg/glue-factory at commit ``2d17e3b`` (:data:`descbench.estimators.GLUEFACTORY_COMMIT`); paths below
are relative to its ``gluefactory/`` folder. ``H`` maps ``src`` (image 0, "a") to ``dst`` (image
1): ``dst ~ H @ [x, y, 1]``. Points are [M, 2] arrays of (x, y) pixels; row i of ``src`` and
row i of ``dst`` are one match.

**Estimators** (:data:`ESTIMATORS`, one entry per name; :func:`estimate_homography` runs one):

| name | call | glue-factory | max_iters / confidence | glue-factory's ransac_th |
| --- | --- | --- | --- | --- |
| `dlt` | :func:`find_homography_dlt`, score-weighted, every match | `eval/utils.py:eval_homography_dlt` | - | - (none: fits all matches) |
| `ransac` | `cv2.findHomography(.., cv2.RANSAC, th, maxIters, confidence)` | `robust_estimators/homography/opencv.py:OpenCVHomographyEstimator` (`method: ransac`) | 3000 / 0.995 | 3.0 |
| `lmeds` | same, `cv2.LMEDS` | same (`lmeds`) | 3000 / 0.995 | 3.0 |
| `rho` | same, `cv2.RHO` | same (`rho`) | 3000 / 0.995 | 3.0 |
| `usac_default` | same, `cv2.USAC_DEFAULT` | same (its key is `usac`) | 3000 / 0.995 | 3.0 |
| `usac_fast` | same, `cv2.USAC_FAST` | same (`usac_fast`) | 3000 / 0.995 | 3.0 |
| `usac_accurate` | same, `cv2.USAC_ACCURATE` | same (`usac_accurate`) | 3000 / 0.995 | 3.0 |
| `usac_prosac` | same, `cv2.USAC_PROSAC` | same (`usac_prosac`) | 3000 / 0.995 | 3.0 |
| `usac_magsac` | same, `cv2.USAC_MAGSAC` | same (`usac_magsac`) | 3000 / 0.995 | 3.0 |
| `poselib` | `poselib.estimate_homography(src, dst, {max_reproj_error: th, max_iterations, success_prob, seed})` | `robust_estimators/homography/poselib.py:PoseLibHomographyEstimator` | 100000 / 0.9999 (PoseLib 2.0.5's own defaults, which glue-factory leaves in place) | 2.0 |

glue-factory's HPatches evaluation (``eval/hpatches.py:HPatchesPipeline``) defaults to
``estimator: poselib, ransac_th: 1.0``; ``ransac_th: -1`` sweeps :data:`RANSAC_TH_SWEEP`
and keeps the best threshold (:func:`descbench.metrics.homography.summarize_thresholds`). The
OpenCV defaults are ``opencv.py``'s ``default_conf``; PoseLib is descbench's optional ``estimators``
extra (``pip install -e ".[estimators]"``, or ``pip install poselib``; README's test command
installs it, so CI tests this estimator against the real library), imported only when the
``poselib`` estimator is checked or run.

**The DLT** (:func:`find_homography_dlt`) is kornia's ``geometry/homography.py:find_homography_dlt``,
which ``eval/utils.py:eval_homography_dlt`` calls with the matches' ``matching_scores0`` as
weights (kornia 0.6.8 to 0.8.3 and its main branch ``b4f5a78`` define it alike):

1. each point set is Hartley-normalised on its own, *unweighted*
   (``geometry/epipolar/fundamental.py:normalize_points``): centred on its mean and scaled by
   ``s = sqrt(2) / (mean distance to the mean + 1e-8)``, ``T = [[s, 0, -s mx], [0, s, -s my],
   [0, 0, 1]]``;
2. two rows per match on the normalised points, ``[0, 0, 0, -x1, -y1, -1, y2 x1, y2 y1, y2]``
   and ``[x1, y1, 1, 0, 0, 0, -x2 x1, -x2 y1, -x2]`` (``A``, 2M x 9; ``A vec(H) = 0`` for an exact
   H, row-major);
3. the weighted normal matrix ``N = A^T W A``, ``W`` = each match's weight on both its rows;
4. kornia's default ``solver="lu"``: ``h`` solves ``N h = (1, ..., 1)`` by LU with partial
   pivoting (``utils/helpers.py:safe_solve_with_mask``). This is not the smallest singular vector
   but one step of inverse iteration from the all-ones vector: on exact matches ``N`` is singular
   up to roundoff and ``h`` is its null vector (the homography), on noisy matches it is dominated
   by, but not equal to, the smallest eigenvector. ``solver="svd"`` (kornia's alternative, not
   glue-factory's) takes the right singular vector of ``N``'s smallest singular value;
5. ``H = T_dst^-1 reshape(h, 3, 3) T_src``, scaled as kornia scales it:
   ``H / (H[2, 2] + 1e-8)`` (the 1e-8 is added, not a guard, so ``H[2, 2]`` is 1 only up to
   ``1e-8 / H[2, 2]`` before scaling).

**Failures** give ``H = None`` and no inliers (:class:`HomographyEstimate`); the pair's corner
error is then inf (:func:`descbench.metrics.homography.evaluate_estimate`). They are: fewer than
:data:`MIN_MATCHES` (4) matches, for every estimator; OpenCV returning no model or raising
``cv2.error`` (``opencv.py``: ``success = M is not None``, ``except cv2.error``); PoseLib finding
no inlier; a DLT system of rank below 8 (all weights 0, coincident or collinear points); any
non-finite H.

**Determinism.** ``cv2.setRNGSeed(seed)`` is called before each OpenCV call and PoseLib gets
``seed`` in its RANSAC options (its default is 0), so an estimate is a function of the inputs and
the seed; repeated calls give identical results (tests). OpenCV 5's estimators seed their own
generators from fixed values, so ``seed`` does not change their result today; it is recorded so
that the call is reproducible whatever the version.

**Deviations from glue-factory, chosen** (each changes nothing on real data beyond float32
roundoff unless stated):

- Arithmetic is float64 throughout. glue-factory runs the DLT in the keypoints' float32 and casts
  OpenCV's and PoseLib's H to float32; OpenCV converts the points to float32 itself in both (so
  float32-representable coordinates give OpenCV identical estimates), PoseLib and the DLT do not.
  The DLT agrees to float32 roundoff: kornia in float32 against this, 1e-4 to 3e-4 px of corner
  error on 640 x 480 test scenes (measured when this was written).
- A failed estimate is ``None`` (corner error inf). glue-factory returns the identity with
  ``success: False`` for OpenCV and PoseLib (counted as inf: same), but for a DLT with fewer than
  4 matches a matrix of inf, whose corner error is NaN; ``cal_error_auc`` sorts NaN last, as inf,
  so the AUCs agree, while its median over pairs (``round(np.median(.), 3)``) would be NaN.
- PoseLib with fewer than 4 matches returns an uninitialised matrix that glue-factory counts as a
  success; here it is a failure, as for every estimator. A PoseLib result with no inlier is a
  failure too (glue-factory: ``success = M is not None``, always true).
- kornia 0.7.0 (current when glue-factory was released) scaled the normalised points by
  ``1 / (1 + 1e-8)`` (its ``transform_points`` divides by ``w + 1e-8``); later versions, and this
  one, do not. In glue-factory's float32 the factor rounds to 1; in float64 it moved the corners
  by about 3e-7 px on the test scenes.
- PoseLib returns H at its own scale and sign (``H[2, 2] = -0.027`` is common). glue-factory's
  corner error divides by the homogeneous coordinate whatever its sign, so it does not care;
  descbench's :func:`descbench.metrics.matching.corner_error` reads ``w <= 0`` as a point
  behind the camera (inf), so every robust estimate is scaled to ``H[2, 2] = 1`` here (when
  ``|H[2, 2]| > 1e-8``; OpenCV's already is).
- On an exactly zero LU pivot (exact matches only) the DLT takes the null vector instead of
  torch's inf / NaN (:func:`find_homography_dlt`).
- The estimator name ``usac_default`` is glue-factory's ``usac``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from descbench.errors import ConfigError, DataError
from descbench.estimators import import_library

# eval/hpatches.py:HPatchesPipeline.run_eval, ``ransac_th: -1``: the thresholds tried.
RANSAC_TH_SWEEP = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
# Fewer matches than this is a failure for every estimator (kornia's DLT asserts N >= 4).
MIN_MATCHES = 4
# kornia find_homography_dlt: H / (H[2, 2] + DLT_EPS); normalize_points: sqrt(2) / (radius + DLT_EPS).
DLT_EPS = 1e-8
DLT_SOLVERS = ("lu", "svd")


@dataclass(frozen=True)
class Estimator:
    """One entry of :data:`ESTIMATORS`: ``library`` is ``numpy`` (the DLT), ``opencv`` or
    ``poselib``; ``cv2_method`` the name of OpenCV's flag (``cv2.<cv2_method>``); ``max_iters``,
    ``confidence`` and ``ransac_th`` glue-factory's defaults (None where they do not apply);
    ``source`` where glue-factory defines it."""

    name: str
    library: str
    cv2_method: str | None
    max_iters: int | None
    confidence: float | None
    ransac_th: float | None
    source: str


_OPENCV = "robust_estimators/homography/opencv.py:OpenCVHomographyEstimator"
ESTIMATORS: dict[str, Estimator] = {e.name: e for e in (
    Estimator("dlt", "numpy", None, None, None, None, "eval/utils.py:eval_homography_dlt (kornia find_homography_dlt)"),
    Estimator("ransac", "opencv", "RANSAC", 3000, 0.995, 3.0, _OPENCV + " method ransac"),
    Estimator("lmeds", "opencv", "LMEDS", 3000, 0.995, 3.0, _OPENCV + " method lmeds"),
    Estimator("rho", "opencv", "RHO", 3000, 0.995, 3.0, _OPENCV + " method rho"),
    Estimator("usac_default", "opencv", "USAC_DEFAULT", 3000, 0.995, 3.0, _OPENCV + " method usac"),
    Estimator("usac_fast", "opencv", "USAC_FAST", 3000, 0.995, 3.0, _OPENCV + " method usac_fast"),
    Estimator("usac_accurate", "opencv", "USAC_ACCURATE", 3000, 0.995, 3.0, _OPENCV + " method usac_accurate"),
    Estimator("usac_prosac", "opencv", "USAC_PROSAC", 3000, 0.995, 3.0, _OPENCV + " method usac_prosac"),
    Estimator("usac_magsac", "opencv", "USAC_MAGSAC", 3000, 0.995, 3.0, _OPENCV + " method usac_magsac"),
    Estimator("poselib", "poselib", None, 100000, 0.9999, 2.0,
              "robust_estimators/homography/poselib.py:PoseLibHomographyEstimator"),
)}
# The keys :func:`check_estimator` accepts (the robust estimators' settings; the DLT takes none).
ESTIMATOR_PARAMS = ("ransac_th", "max_iters", "confidence", "seed")


@dataclass(frozen=True, eq=False)
class HomographyEstimate:
    """What glue-factory's estimators return (``success``, ``M_0to1``, ``inliers``).

    ``H``: 3x3 float64 mapping src to dst, None on failure (module docstring). ``inliers``: bool
    [M], the matches the estimator kept (OpenCV's mask, PoseLib's ``inliers``); all False on
    failure; for ``dlt`` every match (all True on success: the DLT fits them all, weighted;
    glue-factory records no inliers for it). ``estimator`` and ``ransac_th`` (None for ``dlt``)
    say how it was made."""

    H: np.ndarray | None
    inliers: np.ndarray
    estimator: str
    ransac_th: float | None

    @property
    def success(self) -> bool:
        return self.H is not None

    @property
    def n_inliers(self) -> int:
        return int(np.count_nonzero(self.inliers))


# --------------------------------------------------------------------------- the DLT


def _points(src, dst) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(src, dtype=np.float64)
    b = np.asarray(dst, dtype=np.float64)
    if a.size == 0:
        a = a.reshape(0, 2)
    if b.size == 0:
        b = b.reshape(0, 2)
    for name, p in (("src", a), ("dst", b)):
        if p.ndim != 2 or p.shape[1] != 2:
            raise DataError(f"homography estimation: {name} must be an [M, 2] array of (x, y), got shape {p.shape}")
        if not np.isfinite(p).all():
            raise DataError(f"homography estimation: {name} contains NaN or inf coordinates")
    if a.shape[0] != b.shape[0]:
        raise DataError(f"homography estimation: {a.shape[0]} src points but {b.shape[0]} dst points (one row per match)")
    return np.ascontiguousarray(a), np.ascontiguousarray(b)


def _weights(weights, m: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.shape != (m,):
        raise DataError(f"homography estimation: weights must be one value per match ({m}), got shape {np.shape(weights)}")
    if not (np.isfinite(w).all() and (w >= 0).all()):
        raise DataError("homography estimation: weights (the matching scores) must be finite and >= 0")
    return w


def hartley_normalization(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(normalised points [M, 2], T 3x3)`` of kornia's ``normalize_points`` (module docstring,
    step 1): ``T p`` centres the points on their mean and scales their mean distance to it to
    ``sqrt(2)`` (``s = sqrt(2) / (mean distance + 1e-8)``).

    >>> p, T = hartley_normalization(np.array([[0.0, 0.0], [2.0, 0.0]]))
    >>> np.round(p, 6).tolist(), np.round(T, 6)[0].tolist()
    ([[-1.414214, 0.0], [1.414214, 0.0]], [1.414214, 0.0, -1.414214])
    """
    p = np.asarray(points, dtype=np.float64)
    mean = p.mean(axis=0)
    centred = p - mean
    s = math.sqrt(2.0) / (np.linalg.norm(centred, axis=1).mean() + DLT_EPS)
    T = np.array([[s, 0.0, -s * mean[0]], [0.0, s, -s * mean[1]], [0.0, 0.0, 1.0]])
    return centred * s, T


def dlt_rows(src_n: np.ndarray, dst_n: np.ndarray) -> np.ndarray:
    """The DLT matrix ``A`` [2M, 9] of module docstring step 2: rows ``2i`` and ``2i + 1`` are match
    i's ``[0, 0, 0, -x1, -y1, -1, y2 x1, y2 y1, y2]`` and ``[x1, y1, 1, 0, 0, 0, -x2 x1, -x2 y1,
    -x2]`` (kornia's order), so ``A @ H.ravel() = 0`` for an exact H.

    >>> dlt_rows(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]])).tolist()
    [[0.0, 0.0, 0.0, -1.0, -2.0, -1.0, 4.0, 8.0, 4.0], [1.0, 2.0, 1.0, 0.0, 0.0, 0.0, -3.0, -6.0, -3.0]]
    """
    x1, y1 = src_n[:, 0], src_n[:, 1]
    x2, y2 = dst_n[:, 0], dst_n[:, 1]
    one, zero = np.ones_like(x1), np.zeros_like(x1)
    ax = np.stack([zero, zero, zero, -x1, -y1, -one, y2 * x1, y2 * y1, y2], axis=1)
    ay = np.stack([x1, y1, one, zero, zero, zero, -x2 * x1, -x2 * y1, -x2], axis=1)
    return np.stack([ax, ay], axis=1).reshape(-1, 9)


def _null_vector(N: np.ndarray) -> np.ndarray | None:
    """The right singular vector of ``N``'s smallest singular value when ``N`` has rank 8 (its
    eighth singular value above ``sqrt(eps)`` times the largest), else None (no unique solution:
    all weights 0, coincident or collinear points)."""
    _, s, vt = np.linalg.svd(N)
    if not (s[0] > 0 and s[7] > s[0] * np.sqrt(np.finfo(np.float64).eps)):
        return None
    return vt[-1]


def find_homography_dlt(src, dst, weights=None, solver: str = "lu") -> np.ndarray | None:
    """glue-factory's DLT homography (kornia ``geometry/homography.py:find_homography_dlt``, as
    ``eval/utils.py:eval_homography_dlt`` calls it; the steps are in the module docstring).

    ``src``, ``dst``: [M, 2] (x, y) matches; ``weights``: [M] finite values >= 0 (glue-factory
    passes the matching scores; None: all 1, kornia's unweighted system). ``solver``: ``"lu"``
    (kornia's default, glue-factory's) or ``"svd"``. Returns the 3x3 float64 H (src -> dst) scaled
    by ``1 / (H[2, 2] + 1e-8)``, or None with fewer than 4 matches (kornia raises, glue-factory
    then reports a failure), when the system has no unique solution (rank below 8: all weights 0,
    coincident or collinear points) or the result is not finite. A weight of 0 removes the match
    from the equations but not from the normalisation (kornia's normalisation is unweighted).

    On exact (noise-free) matches the LU can meet an exactly zero pivot, depending on roundoff
    (numpy's and torch's differ: the same matches can hit it here and not in kornia, or the
    reverse); torch then returns inf / NaN. Here the solution is then the null vector of ``N``,
    which is the limit of the LU solution ``N^-1 (1, ..., 1)`` (up to scale) as ``N`` tends to
    that singular matrix, and the exact homography, scaled by ``1 / H[2, 2]`` (the limit of the
    ``+ 1e-8`` scaling for an infinitely large solution).

    >>> src = np.array([[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [0.0, 10.0], [5.0, 3.0]])
    >>> np.round(find_homography_dlt(src, src + [3.0, -2.0]), 9).tolist()
    [[1.0, 0.0, 3.0], [0.0, 1.0, -2.0], [0.0, 0.0, 1.0]]
    """
    if solver not in DLT_SOLVERS:
        raise ValueError(f"find_homography_dlt: solver {solver!r} is not one of {', '.join(DLT_SOLVERS)}")
    src, dst = _points(src, dst)
    m = src.shape[0]
    w = np.ones(m) if weights is None else _weights(weights, m)
    if m < MIN_MATCHES:
        return None
    src_n, T_src = hartley_normalization(src)
    dst_n, T_dst = hartley_normalization(dst)
    A = dlt_rows(src_n, dst_n)
    N = (A.T * np.repeat(w, 2)) @ A
    with np.errstate(all="ignore"):
        if solver == "lu":
            eps = DLT_EPS
            try:
                h = np.linalg.solve(N, np.ones(9))
            except np.linalg.LinAlgError:  # an exactly zero pivot: the LU solution's limit (docstring)
                h, eps = _null_vector(N), 0.0  # that limit is infinitely large: the 1e-8 vanishes
                if h is None:
                    return None
        else:
            h, eps = np.linalg.svd(N)[2][-1], DLT_EPS
        H = np.linalg.inv(T_dst) @ (h.reshape(3, 3) @ T_src)
        H = H / (H[2, 2] + eps)
    return H if np.isfinite(H).all() else None


# --------------------------------------------------------------------------- the registry


def estimator_spec(name: str, where: str = "estimator") -> Estimator:
    """The :data:`ESTIMATORS` entry of ``name``; ConfigError naming ``where`` and the choices."""
    try:
        return ESTIMATORS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"{where}: unknown homography estimator {name!r}; choose one of: "
                          f"{', '.join(ESTIMATORS)}") from None


def _import_poselib(where: str):
    return import_library("poselib", where, "homography estimator",
                          [n for n, e in ESTIMATORS.items() if e.library == "opencv"])


def _number(value, key: str, *, integer: bool = False):
    ok = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.integer, np.floating))
    if isinstance(value, bool) or not ok or not math.isfinite(float(value)):
        kind = "an integer" if integer else "a finite number"
        raise ConfigError(f"{key}: must be {kind}, got {value!r}")
    return int(value) if integer else float(value)


def check_ransac_th(value, key: str) -> tuple[float, ...]:
    """``ransac_th`` as a tuple of floats > 0 (one value or a non-empty list, kept in order:
    :func:`descbench.metrics.homography.summarize_thresholds` breaks ties by it); ConfigError
    naming ``key`` otherwise."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ConfigError(f"{key}: an empty list of RANSAC thresholds; fix: give one or more pixel thresholds > 0, "
                          f"e.g. [1.0] (glue-factory's HPatches default) or {list(RANSAC_TH_SWEEP)} (its sweep)")
    out = []
    for v in values:
        t = _number(v, key)
        if not t > 0:
            raise ConfigError(f"{key}: RANSAC threshold {v!r} must be > 0 (pixels); fix: a positive value, e.g. 1.0")
        out.append(t)
    if len(set(out)) != len(out):
        raise ConfigError(f"{key}: RANSAC thresholds {values} repeat a value; fix: list each once")
    return tuple(out)


def check_estimator(name, params: Mapping | None = None, where: str = "estimator") -> dict:
    """Validate an estimator name and its settings; return them filled with glue-factory's defaults.

    ``params`` may hold :data:`ESTIMATOR_PARAMS`: ``ransac_th`` (pixels > 0, one value or a
    non-empty list; default: the estimator's glue-factory default), ``max_iters`` (integer >= 1),
    ``confidence`` (in (0, 1)), ``seed`` (integer >= 0; default 0). ``dlt`` takes none of them (it
    fits every match): giving one is an error. A ``poselib`` estimator needs the package
    installed. Any problem is a :class:`ConfigError` naming ``where`` (or ``where.<key>``) and the
    fix.

    Returns ``{"estimator", "ransac_th" (tuple; () for dlt), "max_iters", "confidence" (None for
    dlt), "seed"}``.

    >>> check_estimator("ransac", {"ransac_th": [1, 2]})["ransac_th"]
    (1.0, 2.0)
    """
    spec = estimator_spec(name, where)
    params = {} if params is None else params
    if not isinstance(params, Mapping):
        raise ConfigError(f"{where}: estimator settings must be a mapping of {', '.join(ESTIMATOR_PARAMS)}, got {params!r}")
    for key in params:
        if key not in ESTIMATOR_PARAMS:
            raise ConfigError(f"{where}.{key}: unknown estimator setting; allowed: {', '.join(ESTIMATOR_PARAMS)}")
    if spec.name == "dlt":
        given = [k for k in ESTIMATOR_PARAMS if k in params]
        if given:
            raise ConfigError(f"{where}.{given[0]}: estimator 'dlt' fits every match (glue-factory's score-weighted "
                              f"DLT) and takes no {given[0]}; fix: remove it or choose a robust estimator")
        return {"estimator": "dlt", "ransac_th": (), "max_iters": None, "confidence": None, "seed": 0}
    th = check_ransac_th(params.get("ransac_th", spec.ransac_th), f"{where}.ransac_th")
    max_iters = _number(params.get("max_iters", spec.max_iters), f"{where}.max_iters", integer=True)
    if max_iters < 1:
        raise ConfigError(f"{where}.max_iters: must be >= 1, got {max_iters}")
    confidence = _number(params.get("confidence", spec.confidence), f"{where}.confidence")
    if not 0 < confidence < 1:
        raise ConfigError(f"{where}.confidence: must lie in (0, 1), got {confidence}")
    seed = _number(params.get("seed", 0), f"{where}.seed", integer=True)
    if seed < 0:
        raise ConfigError(f"{where}.seed: must be >= 0, got {seed}")
    if spec.library == "poselib":
        _import_poselib(where)
    return {"estimator": spec.name, "ransac_th": th, "max_iters": max_iters, "confidence": confidence, "seed": seed}


# --------------------------------------------------------------------------- estimation


def _failure(m: int, name: str, th) -> HomographyEstimate:
    return HomographyEstimate(None, np.zeros(m, dtype=bool), name, th)


def estimate_homography(src, dst, estimator: str, ransac_th: float | None, *, max_iters: int | None = None,
                        confidence: float | None = None, seed: int = 0, weights=None) -> HomographyEstimate:
    """Estimate the homography src -> dst with ``estimator`` (a name of :data:`ESTIMATORS`).

    ``src``, ``dst``: [M, 2] (x, y) matches. ``ransac_th``: the inlier threshold in pixels
    (OpenCV's ``ransacReprojThreshold``, PoseLib's ``max_reproj_error``); ``dlt`` ignores it (pass
    None). ``max_iters``, ``confidence``: None takes the estimator's glue-factory default
    (:data:`ESTIMATORS`); ignored by ``dlt``. ``seed``: ``cv2.setRNGSeed(seed)`` before the OpenCV
    call, PoseLib's ``seed`` option. ``weights``: [M] matching scores, required by ``dlt``
    (glue-factory's DLT is score-weighted; pass ``np.ones(M)`` for an unweighted one) and refused
    by the others (glue-factory's robust estimators take no scores).

    Fewer than 4 matches, or a failure of the library (module docstring), gives ``H = None``,
    all-False inliers. A ``poselib`` estimator without the package is a ConfigError naming it and
    ``pip install poselib`` (the ``estimators`` extra).
    """
    spec = estimator_spec(estimator)
    src, dst = _points(src, dst)
    m = src.shape[0]
    if spec.name == "dlt":
        if weights is None:
            raise ValueError("estimator 'dlt' is glue-factory's score-weighted DLT: pass weights= the matching scores "
                             "(np.ones(M) for an unweighted DLT)")
        H = find_homography_dlt(src, dst, weights)
        return HomographyEstimate(H, np.full(m, H is not None), "dlt", None)
    if weights is not None:
        raise ValueError(f"estimator {spec.name!r} takes no weights (glue-factory passes the scores to 'dlt' only)")
    th = _number(ransac_th, "ransac_th")
    if not th > 0:
        raise ValueError(f"ransac_th must be > 0 pixels, got {ransac_th!r}")
    max_iters = spec.max_iters if max_iters is None else int(max_iters)
    confidence = spec.confidence if confidence is None else float(confidence)
    poselib = _import_poselib(f"estimator {spec.name!r}") if spec.library == "poselib" else None
    if m < MIN_MATCHES:
        return _failure(m, spec.name, th)
    if poselib is not None:
        H, info = poselib.estimate_homography(src, dst, {"max_reproj_error": th, "max_iterations": max_iters,
                                                         "success_prob": confidence, "seed": int(seed)})
        inliers = np.asarray(info.get("inliers", []), dtype=bool).reshape(-1)
        ok = int(info.get("num_inliers", 0)) > 0 and inliers.shape == (m,)
    else:
        import cv2  # here, not at import: config validation imports this module and must not load OpenCV

        cv2.setRNGSeed(int(seed))
        try:
            H, mask = cv2.findHomography(src, dst, getattr(cv2, spec.cv2_method), th, maxIters=max_iters,
                                         confidence=confidence)
        except cv2.error:
            H, mask = None, None
        ok = H is not None and mask is not None
        inliers = np.asarray(mask, dtype=bool).reshape(-1) if ok else None
    if not ok:
        return _failure(m, spec.name, th)
    H = np.asarray(H, dtype=np.float64)
    if H.shape != (3, 3) or not np.isfinite(H).all():
        return _failure(m, spec.name, th)
    if abs(H[2, 2]) > DLT_EPS:  # PoseLib's H has its own scale and sign (module docstring)
        H = H / H[2, 2]
    return HomographyEstimate(H, inliers, spec.name, th)
