"""glue-factory's per-pair homography evaluation and its summary over pairs: pure functions.

The reference is cvg/glue-factory at commit ``2d17e3b``
(:data:`descbench.estimators.GLUEFACTORY_COMMIT`), paths relative to its
``gluefactory/``. ``H`` maps image a (glue-factory's ``view0``) to image b; sizes are
``(width, height)`` of image a as evaluated (glue-factory resizes HPatches to a short side of
480 before matching, ``eval/hpatches.py:HPatchesPipeline.default_conf``).

**Per pair** (``eval/utils.py``):

- :func:`match_precision`, ``eval_matches_homography``: each match's symmetric transfer error
  under the true H (:func:`descbench.metrics.matching.sym_homography_error`, their
  ``geometry/homography.py:sym_homography_error``); ``prec@1px`` / ``prec@3px`` = the fraction
  of matches with error *strictly* below 1 / 3 px; with no match the fraction is 0.0 (their
  ``mean().nan_to_num()`` turns the empty mean's NaN into 0); ``num_matches``.
- :func:`evaluate_estimate`, ``eval_homography_robust`` / ``eval_homography_dlt``: the corner
  error ``homography_corner_error`` = mean over the four corners ``(0, 0), (w, 0), (w, h), (0,
  h)`` of image a (``image_edges``, :func:`descbench.metrics.matching.image_corners`) of
  ``|H_est c - H_true c|``, inf for a failed estimate; ``ransac_inl`` = the inlier count;
  ``ransac_inl%`` = inliers / max(matches, 1), a *fraction* in [0, 1] despite its name (0 on
  failure: glue-factory's estimators return no inlier then). One deviation, descbench's
  :func:`~descbench.metrics.matching.corner_error` rule: a corner that H_est maps behind the
  camera (``w <= 0``) makes the error inf, where glue-factory's plain division by ``w`` reports a
  finite distance.

  This corner convention differs from descbench's matching task (SuperPoint / ALIKE / D2-Net,
  ``pixel_centres``: ``(0,0), (w-1,0), (0,h-1), (w-1,h-1)``,
  :func:`descbench.metrics.matching.corner_error`'s default); both stay, named.

**Summary over pairs** (``eval/hpatches.py:HPatchesPipeline.run_eval`` and
``eval/utils.py:eval_poses``), :func:`summarize_errors` and :func:`summarize_thresholds`:

- AUC of the corner errors at 1, 3 and 5 px (:data:`AUC_THRESHOLDS`): ``utils/tools.py:AUCMetric``,
  which is ``cal_error_auc`` = :func:`descbench.metrics.matching.homography_auc` with
  ``decimals=4`` (each AUC rounded to 4 decimals; failures (inf) stay in the pair count);
- per RANSAC threshold, ``mAA`` = the mean of those rounded AUCs; the best threshold is the one
  with the largest mAA, the *first* in the order the thresholds were given on a tie (their
  ``max(mAAs, key=mAAs.get)`` over a dict filled in the configured order); the summary reports the
  AUCs and mAA at the best threshold (``H_error_ransac@{1,3,5}px``, ``H_error_ransac_mAA``);
- medians over pairs: every per-pair number as ``round(np.median(values), 3)``
  (:func:`median_over_pairs`; ``mH_error_ransac``, ``mransac_inl``, ``mprec@1px``, ...);
- the DLT's AUCs (``H_error_dlt@{1,3,5}px``) are the same rounded AUCs of its corner errors,
  with no threshold (``summarize_errors(dlt_errors)``).

Beyond glue-factory, and named so: the mean corner error (inf as soon as one pair failed) and the
counts of pairs and failures. A NaN error is a pair without data (descbench's rule for pairs
without keypoints, :mod:`descbench.metrics.matching`): it is left out of every figure and counted
as ``n_no_data``; glue-factory has no such pairs (its DLT failures are NaN, which its
``cal_error_auc`` counts as failures; here a failure is inf).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from descbench.columns import threshold_key
from descbench.errors import DataError
from descbench.metrics.matching import corner_error, homography_auc, sym_homography_error

# eval/hpatches.py run_eval: auc_ths = [1, 3, 5]
AUC_THRESHOLDS = (1.0, 3.0, 5.0)
# eval/utils.py eval_matches_homography: prec@1px, prec@3px
PRECISION_THRESHOLDS = (1.0, 3.0)
# utils/tools.py cal_error_auc: np.round(auc, 4); eval/hpatches.py: round(np.median(arr), 3)
AUC_DECIMALS = 4
MEDIAN_DECIMALS = 3
# homography_corner_error's corners (descbench.metrics.matching.image_corners)
CORNERS = "image_edges"


def match_precision(xy0_matched, xy1_matched, H, thresholds=PRECISION_THRESHOLDS) -> dict:
    """Precision of one pair's matches under the true H (glue-factory
    ``eval/utils.py:eval_matches_homography``).

    ``xy0_matched``, ``xy1_matched``: [M, 2] (x, y), row i of each = match i; ``H``: 3x3 true
    homography a -> b. Returns ``{"num_matches": M, "prec_at_<t>": fraction of matches whose
    symmetric transfer error is < t}`` for each t in ``thresholds`` (keys by
    :func:`descbench.columns.threshold_key`: ``prec_at_1``, ``prec_at_3`` = glue-factory's
    ``prec@1px``, ``prec@3px``). With no match every precision is 0.0, as glue-factory's
    ``nan_to_num`` makes it. A match whose transfer is not finite counts as wrong.

    >>> match_precision([[0, 0], [1, 1]], [[0.5, 0], [4, 1]], np.eye(3))
    {'num_matches': 2, 'prec_at_1': 0.5, 'prec_at_3': 0.5}
    >>> match_precision(np.zeros((0, 2)), np.zeros((0, 2)), np.eye(3))
    {'num_matches': 0, 'prec_at_1': 0.0, 'prec_at_3': 0.0}
    """
    err = sym_homography_error(xy0_matched, xy1_matched, H)
    m = int(err.shape[0])
    out: dict = {"num_matches": m}
    for t in thresholds:
        out[f"prec_at_{threshold_key(t)}"] = float(np.mean(err < float(t))) if m else 0.0
    return out


def evaluate_estimate(H_est, H_true, image_a_size, inliers) -> dict:
    """One pair's estimate against the truth (glue-factory ``eval/utils.py:eval_homography_robust``;
    ``eval_homography_dlt`` for the corner error of a DLT).

    ``H_est``: 3x3 a -> b, or None for a failed estimate (:class:`~descbench.estimators.homography.HomographyEstimate`'s
    ``H``); ``H_true``: 3x3; ``image_a_size``: (w, h) of image a; ``inliers``: bool [M], one per
    match. Returns ``{"success": 0/1, "corner_error": px (image_edges corners, mean of 4; inf on
    failure), "n_inliers": int (ransac_inl; 0 on failure), "inlier_ratio": n_inliers / max(M, 1)
    (ransac_inl%, a fraction; 0 on failure)}``.

    >>> evaluate_estimate(np.array([[1, 0, 1], [0, 1, 0], [0, 0, 1.0]]), np.eye(3), (4, 3), [True, False])
    {'success': 1, 'corner_error': 1.0, 'n_inliers': 1, 'inlier_ratio': 0.5}
    """
    inl = np.asarray(inliers, dtype=bool).reshape(-1)
    ok = H_est is not None
    n_inl = int(np.count_nonzero(inl)) if ok else 0
    return {"success": int(ok), "corner_error": corner_error(H_est, H_true, image_a_size, corners=CORNERS),
            "n_inliers": n_inl, "inlier_ratio": n_inl / max(inl.shape[0], 1)}


def median_over_pairs(values, decimals: int | None = MEDIAN_DECIMALS) -> float:
    """glue-factory's summary of a per-pair number: ``round(np.median(values), 3)``
    (``eval/hpatches.py:run_eval`` and ``eval/utils.py:eval_poses``, the ``m<key>`` entries).
    NaN values (pairs without data) are left out; NaN when none is left; ``decimals=None``: not
    rounded.

    >>> median_over_pairs([0.12345, 1.0, np.inf])
    1.0
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return float("nan")
    med = float(np.median(v))
    return med if decimals is None else float(round(med, decimals))


@dataclass(frozen=True)
class ErrorSummary:
    """The summary of one set of corner errors over pairs (one RANSAC threshold, or the DLT:
    ``ransac_th`` None). ``auc``: per ``auc_thresholds``, rounded to 4 (``cal_error_auc``);
    ``mean_auc``: their mean (glue-factory's mAA, of the rounded values); ``median_error``:
    ``round(median, 3)``; ``mean_error``: the plain mean (descbench's; inf if a pair failed);
    ``n_pairs``: pairs with data; ``n_failed``: of them, failures (inf); ``n_no_data``: NaN
    errors left out."""

    ransac_th: float | None
    auc_thresholds: tuple
    auc: tuple
    mean_auc: float
    median_error: float
    mean_error: float
    n_pairs: int
    n_failed: int
    n_no_data: int


@dataclass(frozen=True)
class HomographySummary:
    """:func:`summarize_thresholds`' result: ``by_threshold`` (ransac_th -> :class:`ErrorSummary`,
    in the order given) and ``best_th`` (glue-factory's choice); ``best`` is its summary."""

    by_threshold: dict
    best_th: float

    @property
    def best(self) -> ErrorSummary:
        return self.by_threshold[self.best_th]


def summarize_errors(errors, auc_thresholds=AUC_THRESHOLDS, ransac_th: float | None = None,
                     what: str = "corner errors") -> ErrorSummary:
    """Summarise one pair-indexed array of errors (corner errors in px, or pose errors in degrees;
    inf = failure, NaN = no data) as glue-factory does (module docstring). At least one pair with
    data is needed (DataError, naming the errors as ``what``).

    >>> s = summarize_errors([0.5, 2.0, np.inf, np.nan])
    >>> s.auc, round(s.mean_auc, 4), s.median_error, (s.n_pairs, s.n_failed, s.n_no_data)
    ((0.25, 0.5, 0.5667), 0.4389, 2.0, (3, 1, 1))
    """
    e = np.asarray(errors, dtype=np.float64).reshape(-1)
    if np.any(e < 0):
        raise DataError(f"{what} must be >= 0 (inf = failure, NaN = no data); got {float(e[e < 0][0])}")
    nan = np.isnan(e)
    valid = e[~nan]
    what = what if ransac_th is None else f"{what} at ransac_th {ransac_th:g}"
    if valid.size == 0:
        raise DataError(f"{what}: no pair with data ({e.size} given, all NaN); nothing to summarise")
    ths = tuple(float(t) for t in auc_thresholds)
    auc = tuple(float(a) for a in homography_auc(valid, ths, decimals=AUC_DECIMALS))
    return ErrorSummary(ransac_th=None if ransac_th is None else float(ransac_th), auc_thresholds=ths, auc=auc,
                        mean_auc=float(np.mean(auc)), median_error=median_over_pairs(valid),
                        mean_error=float(np.mean(valid)), n_pairs=int(valid.size),
                        n_failed=int(np.count_nonzero(np.isinf(valid))), n_no_data=int(np.count_nonzero(nan)))


def summarize_thresholds(errors_by_th: Mapping, auc_thresholds=AUC_THRESHOLDS, what: str = "corner errors") -> HomographySummary:
    """glue-factory's summary of a RANSAC-threshold sweep (``eval/utils.py:eval_poses``):
    ``errors_by_th`` maps each ransac_th to its [P] errors (``what``: corner errors, pose errors),
    the same P pairs in the same order at every threshold (DataError otherwise). Each threshold gets :func:`summarize_errors`;
    the best is the largest ``mean_auc``, ties to the first in ``errors_by_th``'s order.

    Thresholds 2 and 1 tie (the same errors in another pair order); 2 comes first:

    >>> s = summarize_thresholds({2.0: [4.0, 0.5], 1.0: [0.5, 4.0], 3.0: [0.2, np.inf]})
    >>> s.best_th, s.best.auc, s.by_threshold[3.0].auc
    (2.0, (0.375, 0.4583, 0.75), (0.45, 0.4833, 0.49))
    """
    if not errors_by_th:
        raise DataError("summarize_thresholds: no RANSAC threshold given")
    by_th = {}
    n = None
    for th, errors in errors_by_th.items():
        e = np.asarray(errors, dtype=np.float64).reshape(-1)
        if n is not None and e.size != n:
            raise DataError(f"summarize_thresholds: ransac_th {float(th):g} has {e.size} pairs but "
                            f"ransac_th {float(next(iter(errors_by_th))):g} has {n}; every threshold must cover the same pairs")
        n = e.size
        by_th[float(th)] = summarize_errors(e, auc_thresholds, ransac_th=float(th), what=what)
    if len(by_th) != len(errors_by_th):
        raise DataError(f"summarize_thresholds: the thresholds {list(errors_by_th)} repeat a value")
    best = max(by_th, key=lambda t: by_th[t].mean_auc)
    return HomographySummary(by_threshold=by_th, best_th=best)
