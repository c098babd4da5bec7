"""Matching (folder ``matching/``, section ``matching``): mutual nearest-neighbour matches of every
pair (a, b) of a scene -- legacy precision, mean matching accuracy at several thresholds, matching
score, repeatability and the homography estimated from the matches (corner error, as
D2-Net/SuperPoint measure them; :mod:`descbench.metrics.matching`) -- and matching as a binary
classifier over every keypoint pair, per matcher (ROC, AUC, Youden's J;
:mod:`descbench.metrics.classifier`).

Per scene it writes ``pairs.parquet`` (:func:`pairs_schema`), ``classifier.parquet``
(:data:`CLASSIFIER`, one row per pair and matcher), ``roc.parquet`` (:data:`ROC_POINTS`, the ROC
points for the figures) and ``timing.json``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.columns import threshold_key
from descbench.datasets.layout import scene_files
from descbench.tasks.base import ScoringTask, TaskSummary, labelled, load_rows, scene_pairs, write_timing


def pairs_schema(mma_thresholds) -> pa.Schema:
    """Per-pair matching statistics (``descbench.metrics.matching.match_pair``), one row per pair."""
    ts = [threshold_key(t) for t in mma_thresholds]
    return pa.schema(
        [
            ("scene", pa.string()),
            ("pair", pa.int8()),
            ("n_keypoints_1", pa.int64()),
            ("n_keypoints_2", pa.int64()),
            ("n_matches", pa.int64()),  # mutual nearest neighbours
            ("n_correct", pa.int64()),  # reprojection error <= tau_px
            ("precision", pa.float64()),  # legacy precision (0 without matches; NaN = no keypoints, every ratio below too)
            *[(f"mma_correct_at_{t}", pa.int64()) for t in ts],
            *[(f"mma_at_{t}", pa.float64()) for t in ts],
            ("n_shared_1", pa.int64()),
            ("n_shared_2", pa.int64()),
            ("ms_correct", pa.int64()),
            ("matching_score", pa.float64()),
            ("n_repeated_1", pa.int64()),
            ("n_repeated_2", pa.int64()),
            ("repeatability", pa.float64()),
            ("homography_found", pa.int64()),
            ("n_inliers", pa.int64()),
            ("corner_error", pa.float64()),  # px; inf when estimation failed; NaN without keypoints (no data)
        ]
    )


# Matching as a binary classifier: one row per (pair, matcher) (metrics.classifier.RocCurve.summary).
CLASSIFIER = pa.schema(
    [
        ("scene", pa.string()),
        ("pair", pa.int8()),
        ("n1", pa.int64()),
        ("n2", pa.int64()),
        ("matcher", pa.string()),
        ("n_pairs", pa.int64()),
        ("n_pos", pa.int64()),
        ("n_neg", pa.int64()),
        ("n_candidates", pa.int64()),
        ("n_roc_points", pa.int64()),
        ("corner_curve", pa.bool_()),
        ("auc", pa.float64()),
        ("best_j", pa.float64()),
        ("best_j_threshold", pa.float64()),
        ("best_j_tp", pa.int64()),
        ("best_j_fp", pa.int64()),
        ("best_j_tpr", pa.float64()),
        ("best_j_fpr", pa.float64()),
    ]
)

# ROC points for plotting (long format), per (pair, matcher): increasing threshold, Yes iff score <= t.
ROC_POINTS = pa.schema(
    [
        ("scene", pa.string()),
        ("pair", pa.int8()),
        ("matcher", pa.string()),
        ("point", pa.int32()),
        ("threshold", pa.float64()),
        ("tp", pa.int64()),
        ("fp", pa.int64()),
        ("tpr", pa.float64()),
        ("fpr", pa.float64()),
    ]
)


def matching_params(scoring: dict, matching: dict):
    """``(MatchingParams, ClassifierParams)`` from the validated scoring and matching sections."""
    from descbench.metrics.classifier import ClassifierParams
    from descbench.metrics.matching import MatchingParams

    sections = {"scoring": scoring, "matching": matching}
    return MatchingParams.from_config(**sections), ClassifierParams.from_config(**sections)


def score_matching(scene_dir: Path, f, scoring: dict, matching: dict,
                   out_pairs: Path, out_classifier: Path, out_roc: Path, out_timing: Path,
                   results: dict | None = None, t0: float | None = None, pairs: list | None = None) -> None:
    """Matching metrics (mutual NN: legacy precision, MMA, matching score, homography accuracy,
    repeatability) and matching as a binary classifier, for every pair (a, b) of one scene
    (``pairs``; None: its default pairs).

    ``results``: ``{(a, b): (stats, ClassifierResult)}`` already computed by the fused pass
    (:func:`descbench.jobs.score.scene_pass`; None: computed here); ``t0``: start of the timing.
    """
    from descbench.metrics.matching import evaluate_pair

    t0 = time.perf_counter() if t0 is None else t0
    files = scene_files(scene_dir)
    pairs = scene_pairs(files, pairs)
    with_query_image = labelled(pairs)
    per_image, by_image, kmeta, dmeta = f.per_image, f.by_image, f.kmeta, f.dmeta
    mparams, cparams = matching_params(scoring, matching)
    prows, crows, roc_cols = [], [], []
    for p in pairs:
        a, k = p.a, p.b
        key = {"scene": files.scene, **({"query_image": a} if with_query_image else {}), "pair": k}
        if results is not None:
            stats, res = results[(a, k)]
        else:
            stats, res = evaluate_pair(per_image[a].xy, by_image[a], per_image[k].xy, by_image[k], p.homography("matching"),
                                       tuple(kmeta["image_sizes"][str(a)]), tuple(kmeta["image_sizes"][str(k)]), mparams,
                                       cparams, tuple(matching["classifier_matchers"]))
        prows.append({**key, **stats})
        crows += [{**key, **r} for r in res.summary_rows()]
        rr = res.roc_rows()
        n = rr["tp"].shape[0]
        roc_cols.append({"scene": np.full(n, files.scene, dtype=object),
                         **({"query_image": np.full(n, a, dtype=np.int8)} if with_query_image else {}),
                         "pair": np.full(n, k, dtype=np.int8), **rr})
    label = io.with_query_image if with_query_image else (lambda schema: schema)
    pairs_table = io.table_from_rows(prows, label(pairs_schema(mparams.mma_thresholds)),
                                     f"scene {files.scene}: matching pairs table (tasks.matching.pairs_schema)")
    classifier = io.table_from_rows(crows, label(CLASSIFIER), f"scene {files.scene}: classifier table (tasks.matching.CLASSIFIER)")
    roc_schema = label(ROC_POINTS)
    roc = pa.table({c.name: pa.array(np.concatenate([r[c.name] for r in roc_cols]), type=c.type) for c in roc_schema}, schema=roc_schema)
    prov = io.provenance(
        "matching", {"task": "matching+binary_classifier", "scoring": scoring, "matching": matching}, scene=files.scene,
        descriptor=dmeta["descriptor"], keypoint_set=kmeta["params"]["keypoint_set"], distance=dmeta["distance"],
        empty_images=kmeta["empty_images"], image_sizes=kmeta["image_sizes"],
    )
    io.write_table(pairs_table, out_pairs, prov)
    io.write_table(classifier, out_classifier, prov)
    io.write_table(roc, out_roc, prov)
    write_timing(out_timing, files.scene, t0)


# ----------------------------------------------------------------------------- figures


def mean_roc(roc, fpr_grid: np.ndarray) -> np.ndarray | None:
    """Vertical average of the pairs' ROC curves: per (scene, pair), the TPR at FPR x is the best
    TPR among its operating points with FPR <= x (its points in ``point`` order); then the mean
    over pairs at every x of ``fpr_grid``. None without pairs."""
    curves = []
    for _, g in roc.groupby([c for c in ("scene", "query_image", "pair") if c in roc.columns], sort=True):
        g = g.sort_values("point")
        idx = np.searchsorted(g.fpr.to_numpy(), fpr_grid, side="right") - 1
        best = np.maximum.accumulate(g.tpr.to_numpy())
        curves.append(np.where(idx >= 0, best[np.clip(idx, 0, None)], 0.0))
    return np.mean(curves, axis=0) if curves else None


MMA_PANELS = (("mma_at_", "all scenes"), ("mma_i_at_", "illumination scenes (i_)"), ("mma_v_at_", "viewpoint scenes (v_)"))


def plot_mma(table, styles, mma_thresholds, ax_row):
    """The comparison table's MMA columns against the thresholds: all, ``i_`` and ``v_`` scenes."""
    for ax, (prefix, title) in zip(ax_row, MMA_PANELS):
        for _, r in table.iterrows():
            cols = [f"{prefix}{threshold_key(t)}" for t in mma_thresholds]
            if all(c in table.columns for c in cols):
                ax.plot(mma_thresholds, r[cols].to_numpy(float), marker="o", ms=3, **styles[(r.descriptor, r.keypoint_set)])
        ax.set(title=title, xlabel="reprojection error threshold (px)", ylim=(0, 1))
    ax_row[0].set_ylabel("fraction of matches within the threshold\n(mean over image pairs)")


def draw_mma(run, plt):
    from descbench.report.drawing import legend, no_data

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    fig.suptitle("Matching accuracy: mutual nearest-neighbour matches of image 1 in images 2-6", y=1.0, va="bottom")
    if run.cfg["matching"]["enabled"]:
        plot_mma(run.table, run.styles, run.cfg["matching"]["mma_thresholds"], axes)
    else:
        no_data(axes[1], "matching is disabled (matching.enabled: false)")
    legend(axes[-1], run.styles)
    return fig


def draw_homography_accuracy(run, plt):
    from descbench.metrics.aggregate import with_data
    from descbench.metrics.matching import homography_accuracy
    from descbench.report.drawing import legend, no_data

    fig, ax = plt.subplots(figsize=(5.5, 4))
    grid = np.linspace(0, 10, 101)
    for ks, d, pairs in run.rows(TASK, "pairs.parquet"):
        # the table's definition: pairs without keypoints (NaN, no data) left out, failures (inf) counted
        err = with_data(pairs).corner_error.to_numpy(float)
        ax.plot(grid, homography_accuracy(err, grid), **run.styles[(d, ks)])
    ax.set(title="Homography estimated by RANSAC from mutual nearest-neighbour matches",
           xlabel="corner error threshold (px)", ylabel="fraction of image pairs within the threshold", ylim=(0, 1.02))
    ax.title.set_fontsize(9)
    if not ax.lines:
        no_data(ax, "matching is disabled (matching.enabled: false)")
    legend(ax, run.styles)
    return fig


ROC_MATCHER = "threshold"  # the matcher the ROC figure shows (descbench.metrics.classifier.MATCHERS)


def draw_roc(run, plt):
    """The threshold matcher's ROC (every keypoint pair of an image pair is accepted when its
    descriptor distance is within the threshold), vertically averaged over image pairs."""
    from descbench.report.drawing import legend, no_data, px, setting

    fig, ax = plt.subplots(figsize=(5, 5))
    fpr_grid = np.linspace(0, 1, 201)
    for ks, d, roc in run.rows(TASK, "roc.parquet", columns=["scene", "query_image", "pair", "point", "tpr", "fpr"],
                               where=("matcher", ROC_MATCHER)):
        mean = mean_roc(roc, fpr_grid)
        if mean is not None:
            ax.plot(fpr_grid, mean, **run.styles[(d, ks)])
    drawn = bool(ax.lines)
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=0.8, label="chance")
    eps = px(setting(run, "matching", "classifier_epsilon_px"))
    ax.set(title=f"ROC of the threshold matcher over all keypoint pairs\n(a pair is correct when image 1's keypoint "
                 f"projects within {eps} of image k's)",
           xlabel="false positive rate (fraction of wrong pairs accepted)",
           ylabel="true positive rate (fraction of correct pairs accepted)", xlim=(0, 1), ylim=(0, 1))
    ax.title.set_fontsize(9)
    if not drawn:
        no_data(ax, "matching.classifier_matchers leaves out\nthe threshold matcher"
                if run.cfg["matching"]["enabled"] else "matching is disabled (matching.enabled: false)")
    legend(ax, run.styles)
    return fig


# ----------------------------------------------------------------------------- the task


class MatchingTask(ScoringTask):
    name = "matching"
    section = "matching"
    kinds = ("pairs.parquet", "classifier.parquet", "roc.parquet", "timing.json")
    headline = ("mean_precision", "mma_at_3", "homography_accuracy_at_3")
    intervals = (("mma_at_3", "mma_at_3_sum", "n_mma_pairs"),
                 ("homography_accuracy_at_3", "homography_accurate_at_3", "n_matching_pairs"))
    figures = {"mma": draw_mma, "homography_accuracy": draw_homography_accuracy, "roc": draw_roc}

    def schemas(self, cfg: dict) -> dict[str, pa.Schema]:
        return {"pairs.parquet": pairs_schema(cfg["matching"]["mma_thresholds"]), "classifier.parquet": CLASSIFIER,
                "roc.parquet": ROC_POINTS}

    def write(self, job, outs: list[Path]) -> None:
        score_matching(job.scene_dir, job.features, job.sections["scoring"], job.sections["matching"], *outs,
                       results=job.fused.matching, t0=job.t0_of("matching"), pairs=job.pairs)

    def summarize(self, files: dict[str, list[Path]], cfg: dict) -> TaskSummary:
        """Mean precision, MMA, matching score, repeatability, homography accuracy and AUC, and the
        classifier's AUC per matcher (descbench.metrics.aggregate.matching_summary)."""
        from descbench.metrics.aggregate import matching_scene_values, matching_summary

        m = cfg["matching"]
        schemas = self.schemas(cfg)
        pairs = load_rows(files["pairs.parquet"], schemas["pairs.parquet"])
        classifier = load_rows(files["classifier.parquet"], schemas["classifier.parquet"])
        summary = matching_summary(pairs, classifier, m["mma_thresholds"], m["homography_thresholds"], m["homography_auc_thresholds"])
        return TaskSummary(summary, matching_scene_values(pairs))


TASK = MatchingTask()
