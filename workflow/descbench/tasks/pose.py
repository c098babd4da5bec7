"""Relative pose (folder ``pose/``, section ``pose``): the matches of a (keypoint set, descriptor,
matcher) -- the matcher stage's files (:mod:`descbench.matchers`) -- on every pair of a posed
dataset (:mod:`descbench.datasets.posed`), measured as cvg/glue-factory's MegaDepth-1500 and
ScanNet-1500 benchmarks measure them (``gluefactory/eval/megadepth1500.py`` and ``eval/utils.py``
at commit ``2d17e3b``; the definitions are :mod:`descbench.metrics.pose`):

- per pair (``pairs.parquet``, :func:`pairs_schema`): keypoints and matches, and the epipolar
  precision of the matches: the fraction whose symmetric epipolar error under the ground-truth
  essential matrix (normalised coordinates) is strictly below each of ``epipolar_thresholds``
  (glue-factory's ``eval_matches_epipolar``; 0 for a pair without a match, as its
  ``nan_to_num``);
- per pair, estimator and RANSAC threshold (``estimates.parquet``, :data:`ESTIMATES`): the relative
  pose estimated from the matches (:func:`descbench.estimators.relative_pose.estimate_relative_pose`),
  its rotation and translation-direction errors and the pose error ``max`` of the two in degrees
  (glue-factory's ``relative_pose_error``; inf when the estimate failed), inliers;
- with depth maps (section ``depth``, :func:`resolve_depth`), per pair the depth metrics of
  :mod:`descbench.metrics.depth` (glue-factory's ``eval_matches_depth``): the matches' symmetric
  reprojection precision at 1/3/5 px, how many are covisible (both depths valid) and their
  percentage, and the recall and precision of the matches against the ground-truth matches at
  3 px (positive within 3 px, negative beyond 5 px);
- with depth maps, **descbench's extension** (not a peer's metric; :func:`extension_settings`):
  each keypoint of image a is lifted with its depth and reprojected into image b
  (:func:`descbench.metrics.depth.sample_depth` and ``project``; a keypoint without valid depth,
  or landing behind camera b or outside image b, has no projection: excluded, and counted as
  ``n_keypoints0 - depth_queries``). Then (1) **MMA**: the fraction of the matches whose keypoint
  a has a projection (``depth_matches``) that land within each of ``matching.mma_thresholds`` px
  (``<=``, D2-Net's convention) of their keypoint b (one-way, a to b, as on HPatches); (2) the
  **true mAP** of keypoint retrieval (:func:`descbench.metrics.retrieval.score_projected`): each
  query with a projection ranks every descriptor of image b, and its relevant items are every
  keypoint of b within ``scoring.tau_px`` of the projection (``all_within_tau``: the depth
  analogue of DescriptorWorkbench's ``isCorrectMatch``; ``scoring.gt``'s other modes are defined
  on homographies), ties by ``scoring.tie_policy``; per pair ``relevant_queries`` and ``sum_ap``,
  in the table the micro mean ``true_map = sum sum_ap / sum relevant_queries``, as the retrieval
  task aggregates it;
- the report's pose table (:func:`summarize_pose`): per estimator, the AUC of the pose error at
  ``auc_thresholds`` degrees (default 5/10/20, rounded to 4) and their mean (glue-factory's mAA) at
  the best RANSAC threshold (largest mAA, glue-factory's ``eval_poses``; the threshold written
  beside), the median pose error and median inliers over pairs rounded to 3 (its ``m<key>``
  entries), failures and pairs; and the means over pairs of keypoints, matches and epipolar
  precision rounded to 3 (its ``m<key>`` summaries are means rounded to 3).

A pair whose image a or b has no keypoint is no data (every value NaN, counted, left out:
descbench's rule; glue-factory has no such case); a pair with keypoints whose estimate fails counts
with an infinite error (glue-factory's). Keypoints are descbench's (the centre of the top-left
pixel at (0, 0)) and a posed dataset's intrinsics COLMAP's (centre at (0.5, 0.5)): every
computation adds the pair's ``pixel_offset`` (0.5) to the keypoints before ``K`` applies, which is
glue-factory's arithmetic on its own keypoints.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.columns import threshold_key
from descbench.errors import ConfigError
from descbench.tasks.base import load_rows, write_timing

if TYPE_CHECKING:  # the job does not import pandas
    import pandas as pd

NAME = "pose"
KINDS = ("pairs.parquet", "estimates.parquet", "timing.json")
#: An estimator's settings and their defaults (``ransac_th`` None: the estimator's own default,
#: :data:`descbench.estimators.relative_pose.DEFAULT_RANSAC_TH`).
ESTIMATOR_DEFAULTS = {"ransac_th": None, "confidence": 0.99999, "seed": 0}
#: Decimals of glue-factory's summaries of per-pair numbers (``round(np.mean / np.median, 3)``).
SUMMARY_DECIMALS = 3

# The pair columns every pose table starts with: the pair's position (from 0) in its scene's pair
# list (a part's, for a folder evaluated in parts: the scene is then <folder>@<k>) and the two views' names.
PAIR_KEY = [("scene", pa.string()), ("pair", pa.int32()), ("image0", pa.string()), ("image1", pa.string())]

# One row per (pair, estimator, RANSAC threshold): the estimate and its errors.
ESTIMATES = pa.schema([
    *PAIR_KEY,
    ("estimator", pa.string()),
    ("ransac_th", pa.float64()),  # px
    ("n_matches", pa.int64()),
    ("success", pa.int8()),  # 0: failed (fewer than 5 matches, or the library found no pose)
    ("n_inliers", pa.int64()),
    ("inlier_ratio", pa.float64()),  # n_inliers / max(n_matches, 1); glue-factory's ransac_inl% (0 when failed)
    ("rotation_error", pa.float64()),  # degrees; inf: failed; NaN: no keypoints (no data)
    ("translation_error", pa.float64()),  # degrees between the directions, sign-free
    ("pose_error", pa.float64()),  # max of the two: glue-factory's rel_pose_error
])


def epipolar_key(t: float) -> str:
    """The column of the epipolar precision at threshold ``t`` (glue-factory's ``epi_prec@1e-4``).

    >>> epipolar_key(1e-4), epipolar_key(0.0005)
    ('epi_prec_at_0.0001', 'epi_prec_at_0.0005')
    """
    return f"epi_prec_at_{threshold_key(t)}"


def extension_settings(cfg: dict) -> dict:
    """The settings of descbench's depth extension (module docstring), read from the config once:
    ``{"mma_thresholds": matching.mma_thresholds, "tau_px", "tie_policy", "chunk_mb": scoring's}``.

    >>> extension_settings({"matching": {"mma_thresholds": [1, 3]}, "scoring": {"tau_px": 3.0, "tie_policy": "expected",
    ...                                                                        "chunk_mb": 64}})
    {'mma_thresholds': [1.0, 3.0], 'tau_px': 3.0, 'tie_policy': 'expected', 'chunk_mb': 64.0}
    """
    return {"mma_thresholds": [float(t) for t in cfg["matching"]["mma_thresholds"]],
            "tau_px": float(cfg["scoring"]["tau_px"]), "tie_policy": cfg["scoring"]["tie_policy"],
            "chunk_mb": float(cfg["scoring"]["chunk_mb"])}


def extension_columns(mma_thresholds) -> list[str]:
    """The per-pair columns of descbench's depth extension (module docstring).

    >>> extension_columns([1, 3])
    ['depth_matches', 'mma_at_1', 'mma_at_3', 'depth_queries', 'relevant_queries', 'sum_ap']
    """
    return ["depth_matches", *(f"mma_at_{threshold_key(t)}" for t in mma_thresholds), "depth_queries",
            "relevant_queries", "sum_ap"]


def depth_columns() -> list[str]:
    """The per-pair depth metrics' columns (glue-factory's ``reproj_prec@1px`` ... ``gt_match_precision@3px``)."""
    from descbench.metrics.depth import GT_POSITIVE_PX, REPROJECTION_THRESHOLDS_PX

    gt = threshold_key(GT_POSITIVE_PX)
    return [*(f"reproj_prec_at_{threshold_key(t)}" for t in REPROJECTION_THRESHOLDS_PX), "covisible", "covisible_percent",
            f"gt_match_recall_at_{gt}", f"gt_match_precision_at_{gt}"]


def pairs_schema(epipolar_thresholds, depth: bool = False, mma_thresholds=()) -> pa.Schema:
    """The per-pair table: :data:`PAIR_KEY`, keypoints of both images, matches, the epipolar
    precision at each threshold, and with ``depth`` the depth metrics (:func:`depth_columns`;
    ``covisible`` a count) and descbench's extension (:func:`extension_columns` of
    ``mma_thresholds``; counts as numbers); NaN without keypoints."""
    extra = [*depth_columns(), *extension_columns(mma_thresholds)] if depth else []
    return pa.schema([*PAIR_KEY, ("n_keypoints0", pa.int64()), ("n_keypoints1", pa.int64()), ("n_matches", pa.int64()),
                      *[(epipolar_key(t), pa.float64()) for t in epipolar_thresholds],
                      *[(c, pa.float64()) for c in extra]])


def resolve_depth(setting: bool | None, missing: list[str]) -> tuple[bool, str]:
    """Whether the depth metrics run, and a sentence saying why: ``setting`` is the section's
    ``depth`` (null: when every scene has depth maps; true: required; false: off), ``missing`` the
    views without a depth map (``"<scene>/<view>"``). ``true`` with a view missing is a ConfigError
    naming it.
    """
    if setting is False:
        return False, "depth metrics off (pose.depth: false)"
    if missing:
        listed = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        if setting is True:
            raise ConfigError(f"pose.depth: true, but {len(missing)} view(s) have no depth map (depths/<name>.h5 or .png): "
                              f"{listed}; add them, or set pose.depth: null (off without them) or false")
        return False, f"depth metrics off: {len(missing)} view(s) have no depth map ({listed})"
    return True, "depth metrics on (every view has a depth map)"


def estimator_settings(section: dict, where: str = "pose.estimators") -> dict[str, dict]:
    """``{estimator: settings}`` of the section, each filled with :data:`ESTIMATOR_DEFAULTS` and
    checked: a known estimator (PoseLib importable for ``poselib``), ``ransac_th`` a threshold in
    pixels > 0 or a non-empty list of distinct ones (None: the estimator's default), ``confidence``
    in (0, 1), ``seed`` an integer >= 0. ConfigError naming the key otherwise."""
    from descbench.estimators.relative_pose import DEFAULT_RANSAC_TH, check_estimator

    out = {}
    for name, given in section["estimators"].items():
        key = f"{where}.{name}"
        check_estimator(name, key)
        given = dict(given or {})
        unknown = sorted(set(given) - set(ESTIMATOR_DEFAULTS))
        if unknown:
            raise ConfigError(f"{key}: unknown setting(s) {', '.join(unknown)}; an estimator takes "
                              f"{', '.join(ESTIMATOR_DEFAULTS)}")
        s = {**ESTIMATOR_DEFAULTS, **given}
        ths = s["ransac_th"]
        ths = [DEFAULT_RANSAC_TH[name]] if ths is None else ths if isinstance(ths, list) else [ths]
        if not ths or any(isinstance(t, bool) or not isinstance(t, (int, float)) or not np.isfinite(t) or t <= 0 for t in ths):
            raise ConfigError(f"{key}.ransac_th: {s['ransac_th']!r}; give a threshold in pixels > 0 or a list of them "
                              "(the best mean AUC is reported)")
        if len(set(map(float, ths))) != len(ths):
            raise ConfigError(f"{key}.ransac_th: {ths} repeats a threshold; list each once")
        c = s["confidence"]
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < 1:
            raise ConfigError(f"{key}.confidence: {c!r}; give a probability strictly between 0 and 1 (OpenCV's prob)")
        if isinstance(s["seed"], bool) or not isinstance(s["seed"], int) or s["seed"] < 0:
            raise ConfigError(f"{key}.seed: {s['seed']!r}; give an integer >= 0")
        out[name] = {"ransac_th": [float(t) for t in ths], "confidence": float(c), "seed": int(s["seed"])}
    return out


def score_pose(f, matches: dict, pairs: list, names: list[tuple[str, str]], section: dict, out_pairs: Path,
               out_estimates: Path, out_timing: Path, provenance: dict, settings: dict[str, dict] | None = None,
               depth_of=None) -> dict:
    """One scene: ``f`` its features (:class:`descbench.jobs.common.SceneFeatures`), ``matches``
    ``{(a, b): Matches}`` of every pair of ``pairs`` (posed pairs,
    :class:`~descbench.datasets.geometry.Pair` with a relative pose), ``names`` the two view names
    of each pair; ``depth_of``: image number -> its depth map [H, W] (the depth metrics and
    descbench's extension, whose settings are ``section["extension"]``,
    :func:`extension_settings`), or None (none). Writes ``pairs.parquet``, ``estimates.parquet`` and ``timing.json`` (with the seconds
    each estimator took). Returns ``{estimator: seconds}``."""
    from descbench.estimators import library_versions
    from descbench.estimators.relative_pose import LIBRARIES
    from descbench.estimators.relative_pose import estimate_relative_pose
    from descbench.metrics.pose import epipolar_errors, epipolar_precision, essential_matrix, normalized_points, \
        rotation_error, translation_error

    t0 = time.perf_counter()
    settings = estimator_settings(section) if settings is None else settings
    epi_ths = [float(t) for t in section["epipolar_thresholds"]]
    extension = section["extension"] if depth_of is not None else None
    seconds = {name: 0.0 for name in settings}
    prows, erows = [], []
    nan = float("nan")
    for i, (p, (name0, name1)) in enumerate(zip(pairs, names)):
        g = p.relative_pose("the pose task")
        key = {"scene": f.scene, "pair": i, "image0": name0, "image1": name1}
        xa, xb = f.per_image[p.a].xy, f.per_image[p.b].xy
        m = matches[(p.a, p.b)]
        has_data = bool(len(xa) and len(xb))
        src, dst = xa[m.idx_a], xb[m.idx_b]
        if has_data:
            err = epipolar_errors(normalized_points(src, g.K_a, g.pixel_offset), normalized_points(dst, g.K_b, g.pixel_offset),
                                  essential_matrix(g.R, g.t))
            prec = epipolar_precision(err, epi_ths)
        else:
            prec = [nan] * len(epi_ths)
        prows.append({**key, "n_keypoints0": len(xa), "n_keypoints1": len(xb), "n_matches": len(m),
                      **{epipolar_key(t): float(v) for t, v in zip(epi_ths, prec)},
                      **(_depth_metrics(g, xa, xb, m, *((depth_of(p.a), depth_of(p.b)) if has_data else (None, None)), has_data)
                         if depth_of is not None else {})})
        sizes = (tuple(f.kmeta["image_sizes"][str(p.a)]), tuple(f.kmeta["image_sizes"][str(p.b)]))
        if extension is not None:
            prows[-1].update(_extension(g, f, p, m, depth_of(p.a) if has_data else None, sizes[1], extension))
        for name, s in settings.items():
            for th in s["ransac_th"]:
                row = {**key, "estimator": name, "ransac_th": th, "n_matches": len(m)}
                if not has_data:
                    erows.append({**row, "success": 0, "n_inliers": 0, "inlier_ratio": nan, "rotation_error": nan,
                                  "translation_error": nan, "pose_error": nan})
                    continue
                t1 = time.perf_counter()
                est = estimate_relative_pose(src, dst, g.K_a, g.K_b, name, th, confidence=s["confidence"],
                                             offset=g.pixel_offset, seed=s["seed"], sizes=sizes)
                seconds[name] += time.perf_counter() - t1
                n_in = int(np.count_nonzero(est.inliers))
                if est.success:
                    r_err, t_err = rotation_error(est.R, g.R), translation_error(est.t, g.t)
                else:
                    r_err = t_err = float("inf")
                erows.append({**row, "success": int(est.success), "n_inliers": n_in,
                              "inlier_ratio": n_in / max(len(m), 1) if est.success else 0.0,
                              "rotation_error": r_err, "translation_error": t_err, "pose_error": max(r_err, t_err)})
    ptable = io.table_from_rows(prows, pairs_schema(epi_ths, depth_of is not None,
                                                    extension["mma_thresholds"] if extension else ()),
                                f"scene {f.scene}: pose pairs table (tasks.pose.pairs_schema)")
    etable = io.table_from_rows(erows, ESTIMATES, f"scene {f.scene}: pose estimates table (tasks.pose.ESTIMATES)")
    prov = io.provenance("pose", {"task": NAME, "pose": section, "estimators": settings, "depth": depth_of is not None},
                         scene=f.scene,
                         libraries=library_versions(LIBRARIES), **provenance)
    io.write_table(ptable, out_pairs, prov)
    io.write_table(etable, out_estimates, prov)
    write_timing(out_timing, f.scene, t0, estimator_seconds=seconds)
    return seconds


def _extension(g, f, p, m, depth_a, size_b, extension: dict) -> dict:
    """One pair's figures of descbench's depth extension (module docstring); NaN without keypoints
    (``depth_a`` None)."""
    from descbench.metrics.depth import project, sample_depth
    from descbench.metrics.retrieval import RetrievalParams, score_projected

    cols = extension_columns(extension["mma_thresholds"])
    if depth_a is None:
        return dict.fromkeys(cols, float("nan"))
    xa, xb = f.per_image[p.a].xy, f.per_image[p.b].xy
    d, valid = sample_depth(xa, depth_a, offset=g.pixel_offset)
    proj, visible = project(xa, d, g.K_a, g.K_b, g.R, g.t, size_b, valid, offset=g.pixel_offset)
    seen = visible[m.idx_a]
    err = np.hypot(*(proj[m.idx_a][seen] - xb[m.idx_b][seen]).T)
    mma = [float(np.mean(err <= t)) if len(err) else float("nan") for t in extension["mma_thresholds"]]
    params = RetrievalParams(tau_px=extension["tau_px"], gt="all_within_tau", tie_policy=extension["tie_policy"],
                             chunk_mb=extension["chunk_mb"])
    res = score_projected(proj, visible, f.by_image[p.a], xb, f.by_image[p.b], params)
    relevant = res.n_relevant > 0
    return dict(zip(cols, [float(seen.sum()), *mma, float(visible.sum()), float(relevant.sum()),
                           float(res.ap[relevant].sum()) if relevant.any() else 0.0]))


def _depth_metrics(g, xa, xb, m, depth_a, depth_b, has_data: bool) -> dict:
    """One pair's depth metrics (:func:`depth_columns`; module docstring): NaN without keypoints."""
    from descbench.metrics.depth import (REPROJECTION_THRESHOLDS_PX, covisibility, gt_match_precision, gt_match_recall,
                                         gt_matches_from_pose_depth, reprojection_precision, symmetric_reprojection_error)

    cols = depth_columns()
    if not has_data:
        return dict.fromkeys(cols, float("nan"))
    err, valid = symmetric_reprojection_error(xa[m.idx_a], xb[m.idx_b], g.K_a, g.K_b, g.R, g.t, depth_a, depth_b,
                                              offset=g.pixel_offset)
    prec = reprojection_precision(err, valid, REPROJECTION_THRESHOLDS_PX)
    n_cov, pct = covisibility(valid)
    gt = gt_matches_from_pose_depth(xa, xb, g.K_a, g.K_b, g.R, g.t, depth_a, depth_b, offset=g.pixel_offset)
    m0 = np.full(len(xa), -1, dtype=np.int64)
    m0[m.idx_a] = m.idx_b
    return dict(zip(cols, [*(float(v) for v in prec), float(n_cov), float(pct), gt_match_recall(m0, gt),
                           gt_match_precision(m0, gt)]))


# ----------------------------------------------------------------------------- summary


def read_pose(pairs_files: list[Path], estimates_files: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One (keypoint set, descriptor, matcher)'s per-scene files, each read once: ``(pairs, estimates)``."""
    return load_rows(pairs_files, None), load_rows(estimates_files, None)


def _rounded(x: float) -> float:
    return float(round(x, SUMMARY_DECIMALS)) if np.isfinite(x) else float(x)


def summarize_pose(pairs: pd.DataFrame, est: pd.DataFrame, section: dict, settings: dict[str, dict] | None = None) -> dict:
    """The pose table's row of one (keypoint set, descriptor, matcher) from its per-scene rows
    (:func:`read_pose`; module docstring): ``pairs``, ``pairs_without_keypoints``, the means over
    pairs with data (rounded to 3) of ``keypoints`` (mean of both images), ``matches``, each
    ``epi_prec_at_<t>`` and, with depth, each depth metric (a pair without a match has no
    ``covisible_percent`` and is left out of its mean), then per estimator ``<estimator>_auc_at_<t>``, ``_mAA``, ``_ransac_th``
    (the best), ``_median_pose_error``, ``_median_inliers``, ``_median_inlier_ratio`` (rounded to
    3), ``_failures``, ``_pairs``."""
    from descbench.metrics.homography import summarize_thresholds

    settings = estimator_settings(section) if settings is None else settings
    auc_ths = [float(t) for t in section["auc_thresholds"]]
    data = pairs[(pairs.n_keypoints0 > 0) & (pairs.n_keypoints1 > 0)]
    out: dict = {"pairs": len(pairs), "pairs_without_keypoints": int(len(pairs) - len(data))}
    mean = (lambda v: _rounded(float(np.mean(v))) if len(v) else float("nan"))
    out["keypoints"] = mean((data.n_keypoints0.to_numpy(np.float64) + data.n_keypoints1.to_numpy(np.float64)) / 2)
    out["matches"] = mean(data.n_matches.to_numpy(np.float64))
    for t in section["epipolar_thresholds"]:
        out[epipolar_key(t)] = mean(data[epipolar_key(t)].to_numpy(np.float64))
    if depth_columns()[0] in pairs.columns:
        for c in depth_columns():  # glue-factory's means; NaN percentages left out
            v = data[c].to_numpy(np.float64)
            out[c] = mean(v[~np.isnan(v)])
        # descbench's extension: MMA as D2-Net averages it (over pairs; a pair without a match with
        # a projection left out), the true mAP as the retrieval task does (micro over queries)
        for c in [c for c in pairs.columns if c.startswith("mma_at_")]:
            v = data[c].to_numpy(np.float64)
            out[c] = mean(v[~np.isnan(v)])
        relevant = float(data.relevant_queries.sum())
        out["true_map"] = float(data.sum_ap.sum()) / relevant if relevant > 0 else float("nan")
        n0 = float(data.n_keypoints0.sum())
        out["queries_without_depth_percent"] = _rounded(100.0 * (n0 - float(data.depth_queries.sum())) / n0) if n0 else float("nan")
    order = ["scene", "pair"]
    for name, s in settings.items():
        rows = est[est.estimator == name]
        if rows.pose_error.isna().all():  # no pair with keypoints: every figure NaN, 0 pairs
            out.update({f"{name}_auc_at_{threshold_key(t)}": float("nan") for t in auc_ths})
            out.update({f"{name}_mAA": float("nan"), f"{name}_ransac_th": float("nan"), f"{name}_median_pose_error": float("nan"),
                        f"{name}_median_inliers": float("nan"), f"{name}_median_inlier_ratio": float("nan"),
                        f"{name}_failures": 0, f"{name}_pairs": 0})
            continue
        by_th = {th: rows[rows.ransac_th == th].sort_values(order) for th in s["ransac_th"]}
        hs = summarize_thresholds({th: r.pose_error.to_numpy(np.float64) for th, r in by_th.items()}, auc_ths,
                                  what=f"pose errors of estimator {name}")
        best = by_th[hs.best_th]
        best = best[best.pose_error.notna()]
        for t, v in zip(auc_ths, hs.best.auc):
            out[f"{name}_auc_at_{threshold_key(t)}"] = v
        out[f"{name}_mAA"] = hs.best.mean_auc
        out[f"{name}_ransac_th"] = hs.best_th
        out[f"{name}_median_pose_error"] = hs.best.median_error
        out[f"{name}_median_inliers"] = _rounded(float(np.median(best.n_inliers.to_numpy(np.float64))))
        out[f"{name}_median_inlier_ratio"] = _rounded(float(np.median(best.inlier_ratio.to_numpy(np.float64))))
        out[f"{name}_failures"] = hs.best.n_failed
        out[f"{name}_pairs"] = hs.best.n_pairs
    return out
