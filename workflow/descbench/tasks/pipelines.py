"""Feature pipelines (folder ``pipelines/``, section ``pipelines``): the matches of a (keypoint set,
descriptor, matcher) -- the matcher stage's files (:mod:`descbench.matchers`) -- evaluated on every
pair with geometry, as glue-factory's HPatches benchmark measures them
(``gluefactory/eval/hpatches.py``; :mod:`descbench.metrics.homography`) and with descbench's own
matching definitions:

- per pair (``pairs.parquet``, :func:`pairs_schema`): the matching task's statistics of these
  matches (:func:`descbench.metrics.matching.matched_pair_stats`: legacy precision, MMA, matching
  score, repeatability, D2-Net/SuperPoint's RANSAC corner error) -- with ``mnn`` they equal the
  matching task's pairs table -- and glue-factory's match precision ``prec_at_1`` / ``prec_at_3``
  (symmetric transfer error, :func:`descbench.metrics.homography.match_precision`);
- per pair, estimator and RANSAC threshold (``estimates.parquet``, :data:`ESTIMATES`): the
  homography estimated from the matches (:func:`descbench.estimators.homography.estimate_homography`)
  and its corner error in glue-factory's convention (four image corners ``(0,0), (w,0), (w,h),
  (0,h)``, mean; inf when the estimate failed), inliers;
- the report's pipelines table (:func:`summarize_pipeline`): per estimator, AUC of the corner
  error at 1/3/5 px (glue-factory's ``AUCMetric``, rounded to 4) at the best RANSAC threshold
  (largest mean AUC, glue-factory's ``eval_poses``; the threshold written beside), medians over
  pairs rounded to 3 (glue-factory's summary) and means (descbench's, named ``mean_``), failures
  and pairs without data counted; and the matching task's means over pairs of these matches.

A pair whose image a or b has no keypoint is no data (every value NaN, counted, left out: descbench's
rule); a pair with keypoints whose estimate fails counts with an infinite error (glue-factory's).
The DLT is weighted by the matcher's scores when they are confidences (LightGlue: glue-factory's
score-weighted DLT) and unweighted for distance scores (``dlt_weights: auto``; ``scores`` asks for
the weights and is refused at config time for a distance matcher).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.columns import threshold_key
from descbench.tasks.base import labelled, load_rows, write_timing
from descbench.tasks.matching import matching_params, pairs_schema as matching_pairs_schema

if TYPE_CHECKING:  # the scoring job does not import pandas
    import pandas as pd


def pairs_schema(mma_thresholds, precision_thresholds) -> pa.Schema:
    """The matching task's per-pair statistics (:func:`descbench.tasks.matching.pairs_schema`) of
    the pipeline's matches, then glue-factory's ``prec_at_<t>`` (NaN without keypoints)."""
    return pa.schema([*matching_pairs_schema(mma_thresholds),
                      *[(f"prec_at_{threshold_key(t)}", pa.float64()) for t in precision_thresholds]])


# One row per (pair, estimator, RANSAC threshold): the estimate and its corner error.
ESTIMATES = pa.schema([
    ("scene", pa.string()),
    ("pair", pa.int8()),
    ("estimator", pa.string()),
    ("ransac_th", pa.float64()),  # px; NaN for dlt (it fits every match)
    ("n_matches", pa.int64()),
    ("success", pa.int8()),  # 0: failed (fewer than 4 matches, or the library found none)
    ("n_inliers", pa.int64()),
    ("inlier_ratio", pa.float64()),  # n_inliers / max(n_matches, 1); glue-factory's ransac_inl%
    ("corner_error", pa.float64()),  # px, image_edges corners; inf: failed; NaN: no keypoints (no data)
])


def estimator_settings(section: dict) -> dict[str, dict]:
    """``{estimator: its settings filled with glue-factory's defaults}`` of the section
    (:func:`descbench.estimators.homography.check_estimator`, the config's check); a job computes
    them once and hands them to :func:`score_pipelines` / :func:`summarize_pipeline`."""
    from descbench.estimators.homography import check_estimator

    return {name: check_estimator(name, s, f"pipelines.estimators.{name}") for name, s in section["estimators"].items()}


def estimator_runs(section: dict, settings: dict[str, dict] | None = None) -> list[tuple[str, dict, float | None]]:
    """``(estimator, its filled settings, ransac_th)`` of every estimate a pair gets, in config
    order; ``dlt`` once with ransac_th None. ``settings``: the section's
    :func:`estimator_settings`, when already computed."""
    out = []
    for name, s in (estimator_settings(section) if settings is None else settings).items():
        ths = s["ransac_th"] or (None,)
        out += [(name, s, None if th is None else float(th)) for th in ths]
    return out


def dlt_weighted(section: dict, score_kind: str) -> bool:
    """Whether the DLT is weighted by the matches' scores (module docstring)."""
    mode = section["dlt_weights"]
    return mode == "scores" or (mode == "auto" and score_kind == "confidence")


def score_pipelines(scene_dir: Path, f, matches: dict, score_kind: str, scoring: dict, matching: dict, section: dict,
                    out_pairs: Path, out_estimates: Path, out_timing: Path, pairs: list, provenance: dict,
                    settings: dict[str, dict] | None = None) -> None:
    """One scene of one pipeline: ``f`` its features (:class:`descbench.jobs.common.SceneFeatures`),
    ``matches`` ``{(a, b): Matches}`` of every pair of ``pairs`` (the matcher stage's file),
    ``score_kind`` the matcher's; writes ``pairs.parquet``, ``estimates.parquet`` and ``timing.json``.
    ``settings``: the section's :func:`estimator_settings` (a job's, computed once for all its
    scenes; None: computed here)."""
    from descbench.estimators import library_versions
    from descbench.estimators.homography import estimate_homography
    from descbench.metrics.homography import evaluate_estimate, match_precision
    from descbench.metrics.matching import matched_pair_stats

    t0 = time.perf_counter()
    mparams, _ = matching_params(scoring, matching)
    precision_ths = section["precision_thresholds"]
    settings = estimator_settings(section) if settings is None else settings
    runs = estimator_runs(section, settings)
    weighted = dlt_weighted(section, score_kind)
    with_query_image = labelled(pairs)
    prows, erows = [], []
    nan = float("nan")
    for p in pairs:
        a, b = p.a, p.b
        key = {"scene": f.scene, **({"query_image": a} if with_query_image else {}), "pair": b}
        xa, xb = f.per_image[a].xy, f.per_image[b].xy
        size_a, size_b = tuple(f.kmeta["image_sizes"][str(a)]), tuple(f.kmeta["image_sizes"][str(b)])
        H = p.homography("pipelines")
        m = matches[(a, b)]
        has_data = bool(len(xa) and len(xb))
        stats = matched_pair_stats(xa, xb, H, size_a, size_b, m.idx_a, m.idx_b, mparams)
        src, dst = xa[m.idx_a], xb[m.idx_b]
        prec = match_precision(src, dst, H, precision_ths)
        prows.append({**key, **stats, **{f"prec_at_{threshold_key(t)}": prec[f"prec_at_{threshold_key(t)}"] if has_data else nan
                                         for t in precision_ths}})
        for name, s, th in runs:
            if not has_data:
                ev = {"success": 0, "corner_error": nan, "n_inliers": 0, "inlier_ratio": nan}
            else:
                if name == "dlt":
                    est = estimate_homography(src, dst, "dlt", None, weights=m.score if weighted else np.ones(len(m)))
                else:
                    est = estimate_homography(src, dst, name, th, max_iters=s["max_iters"], confidence=s["confidence"],
                                              seed=s["seed"])
                ev = evaluate_estimate(est.H, H, size_a, est.inliers)
            erows.append({**key, "estimator": name, "ransac_th": nan if th is None else th, "n_matches": len(m), **ev})
    label = io.with_query_image if with_query_image else (lambda schema: schema)
    ptable = io.table_from_rows(prows, label(pairs_schema(mparams.mma_thresholds, precision_ths)),
                                f"scene {f.scene}: pipelines pairs table (tasks.pipelines.pairs_schema)")
    etable = io.table_from_rows(erows, label(ESTIMATES), f"scene {f.scene}: pipelines estimates table (tasks.pipelines.ESTIMATES)")
    prov = io.provenance("pipelines", {"task": "pipelines", "scoring": scoring, "matching": matching, "pipelines": section,
                                       "estimators": {n: {k: list(v) if isinstance(v, tuple) else v for k, v in s.items()}
                                                      for n, s in settings.items()},
                                       "dlt_weighted": weighted}, scene=f.scene, libraries=library_versions(), **provenance)
    io.write_table(ptable, out_pairs, prov)
    io.write_table(etable, out_estimates, prov)
    write_timing(out_timing, f.scene, t0)


# ----------------------------------------------------------------------------- summary


def read_pipeline(pairs_files: list[Path], estimates_files: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One (keypoint set, descriptor, matcher)'s per-scene files, each read once: ``(pairs,
    estimates)``, the rows of every scene (what :func:`summarize_pipeline` and the report's figure
    read)."""
    return load_rows(pairs_files, None), load_rows(estimates_files, None)


def summarize_pipeline(pairs: pd.DataFrame, est: pd.DataFrame, cfg: dict, settings: dict[str, dict] | None = None) -> dict:
    """The pipelines table's row of one (keypoint set, descriptor, matcher) from its per-scene rows
    (:func:`read_pipeline`; module docstring): the matching task's means of these matches
    (:func:`descbench.metrics.aggregate.matching_summary` without the classifier), glue-factory's
    precision (mean and median over pairs), then per estimator ``<estimator>_auc_at_<t>``,
    ``_mean_auc``, ``_ransac_th`` (the best; NaN for dlt), ``_median_corner_error`` (rounded to 3),
    ``_mean_corner_error``, ``_failures``, ``_pairs``. ``settings``: ``cfg``'s
    :func:`estimator_settings`, when already computed (the report's, once for every pipeline)."""
    from descbench.metrics.aggregate import matching_summary, with_data
    from descbench.metrics.homography import median_over_pairs, summarize_errors, summarize_thresholds

    m, sec = cfg["matching"], cfg["pipelines"]
    base = matching_summary(pairs, None, m["mma_thresholds"], m["homography_thresholds"], m["homography_auc_thresholds"])
    keep = ("mean_matches", "mean_precision", *(f"mma_at_{threshold_key(t)}" for t in m["mma_thresholds"]), "matching_score",
            "pairs_without_keypoints", "pairs_without_matches", "matching_pairs")
    out = {k: base[k] for k in keep}
    data = with_data(pairs)
    for t in sec["precision_thresholds"]:
        col = f"prec_at_{threshold_key(t)}"
        out[f"mean_{col}"] = float(data[col].mean()) if len(data) else float("nan")
        out[f"median_{col}"] = median_over_pairs(data[col].to_numpy(np.float64))
    order = [c for c in ("scene", "query_image", "pair") if c in est.columns]
    for name, s in (estimator_settings(sec) if settings is None else settings).items():
        rows = est[est.estimator == name]
        if rows.corner_error.isna().all():
            # no pair with keypoints: recorded as such (every figure NaN, 0 pairs), not an error
            for t in sec["auc_thresholds"]:
                out[f"{name}_auc_at_{threshold_key(t)}"] = float("nan")
            out.update({f"{name}_mean_auc": float("nan"), f"{name}_ransac_th": float("nan"), f"{name}_median_corner_error": float("nan"),
                        f"{name}_mean_corner_error": float("nan"), f"{name}_failures": 0, f"{name}_pairs": 0})
            continue
        if not s["ransac_th"]:
            summary, best_th = summarize_errors(rows.sort_values(order).corner_error.to_numpy(np.float64), sec["auc_thresholds"]), None
        else:
            by_th = {float(th): rows[rows.ransac_th == float(th)].sort_values(order).corner_error.to_numpy(np.float64)
                     for th in s["ransac_th"]}
            hs = summarize_thresholds(by_th, sec["auc_thresholds"])
            summary, best_th = hs.best, hs.best_th
        for t, v in zip(sec["auc_thresholds"], summary.auc):
            out[f"{name}_auc_at_{threshold_key(t)}"] = v
        out[f"{name}_mean_auc"] = summary.mean_auc
        out[f"{name}_ransac_th"] = float("nan") if best_th is None else best_th
        out[f"{name}_median_corner_error"] = summary.median_error
        out[f"{name}_mean_corner_error"] = summary.mean_error
        out[f"{name}_failures"] = summary.n_failed
        out[f"{name}_pairs"] = summary.n_pairs
    return out


KINDS = ("pairs.parquet", "estimates.parquet", "timing.json")
NAME = "pipelines"
