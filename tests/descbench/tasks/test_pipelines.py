"""descbench.tasks.pipelines: match accuracy and glue-factory's homography protocol on the matcher
stage's matches. References: the matching task's own pairs table (mnn matches: the same numbers),
exact correspondences (every error 0, every AUC 1), hand-worked shifted correspondences (the corner
error is the shift), and descbench's no-data rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from descbench import io
from descbench.datasets.geometry import Homography, Pair
from descbench.jobs.common import SceneFeatures
from descbench.keypoints import ImageKeypoints
from descbench.matchers import Matches
from descbench.tasks.pipelines import ESTIMATES, dlt_weighted, estimator_runs, pairs_schema, read_pipeline, \
    score_pipelines, summarize_pipeline

SIZE = (320, 240)
H_TRUE = np.array([[1.05, 0.02, 6.0], [-0.01, 0.98, -4.0], [1e-5, -2e-5, 1.0]])


def kps(xy: np.ndarray) -> ImageKeypoints:
    n = len(xy)
    z = np.zeros(n, np.float32)
    return ImageKeypoints(xy[:, 0].astype(np.float32), xy[:, 1].astype(np.float32), z + 4, z - 1, z + 1,
                          np.zeros(n, np.int32), np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


def project(H, xy):
    p = np.c_[xy, np.ones(len(xy))] @ H.T
    return p[:, :2] / p[:, 2:]


def scene(shift=(0.0, 0.0), n=60, empty_b=False):
    """Image 1 and image 2 = image 1 under H_TRUE (+ shift): float32 keypoints, so the
    correspondences are exact up to float32 rounding of the coordinates."""
    rng = np.random.default_rng(0)
    xa = np.c_[rng.uniform(45, 270, n), rng.uniform(45, 190, n)].astype(np.float32).astype(np.float64)
    xb = project(H_TRUE, xa) + np.asarray(shift)
    per_image = {1: kps(xa), 2: kps(xb[:0] if empty_b else xb)}
    desc = {1: np.zeros((n, 4), np.float32), 2: np.zeros((0 if empty_b else n, 4), np.float32)}
    kmeta = {"image_sizes": {"1": list(SIZE), "2": list(SIZE)}}
    f = SceneFeatures("s", per_image, desc, kmeta, {"descriptor": "d"})
    m = Matches.empty() if empty_b else Matches(np.arange(n), np.arange(n), np.linspace(0.5, 1.0, n))
    return f, {(1, 2): m}, [Pair(1, 2, Homography(H_TRUE))]


def sections(**pipelines):
    from descbench.params import schema_default

    sec = {**schema_default("pipelines"), **pipelines}
    return schema_default("scoring"), schema_default("matching"), sec


def run(tmp_path, f, matches, pairs, score_kind="distance", **pipelines):
    scoring, matching, sec = sections(**pipelines)
    outs = [tmp_path / k for k in ("pairs.parquet", "estimates.parquet", "timing.json")]
    score_pipelines(tmp_path, f, matches, score_kind, scoring, matching, sec, *outs, pairs, {})
    p = io.read_table(outs[0], pairs_schema(matching["mma_thresholds"], sec["precision_thresholds"]))[0].to_pandas()
    e = io.read_table(outs[1], ESTIMATES)[0].to_pandas()
    cfg = {"matching": matching, "pipelines": sec}
    return p, e, summarize_pipeline(*read_pipeline([outs[0]], [outs[1]]), cfg)


ROBUST = {"dlt": {}, "ransac": {"ransac_th": [1.0, 3.0]}, "usac_magsac": {"ransac_th": [1.0]}, "lmeds": {}}


def test_exact_correspondences_give_auc_1(tmp_path):
    f, m, pairs = scene()
    p, e, s = run(tmp_path, f, m, pairs, estimators=ROBUST)
    assert p.prec_at_1[0] == p.prec_at_3[0] == 1.0 and p.n_matches[0] == 60
    assert len(e) == 5 and (e.success == 1).all()
    assert (e.corner_error < 1e-4).all(), e
    for est in ROBUST:
        assert (s[f"{est}_auc_at_1"], s[f"{est}_auc_at_3"], s[f"{est}_auc_at_5"]) == (1.0, 1.0, 1.0)
        assert s[f"{est}_failures"] == 0 and s[f"{est}_pairs"] == 1
    assert s["ransac_ransac_th"] == 1.0  # a tie: the first threshold given (glue-factory's max over an ordered dict)
    assert np.isnan(s["dlt_ransac_th"])


def test_shifted_correspondences_give_the_shift_as_corner_error(tmp_path):
    """Every point of image b moved by (1.2, 1.6): the best homography is H_TRUE followed by that
    translation, whose error at each of the four corners is exactly 2 px. Hand-worked AUCs
    (glue-factory's cal_error_auc, one pair with error 2): @1 = 0; @3 = (2 / 2 + 1) / 3 = 0.6667;
    @5 = (2 / 2 + 3) / 5 = 0.8."""
    f, m, pairs = scene(shift=(1.2, 1.6))
    p, e, s = run(tmp_path, f, m, pairs, estimators={"dlt": {}, "ransac": {"ransac_th": [1.0]}})
    np.testing.assert_allclose(e.corner_error, 2.0, atol=1e-4)
    assert p.prec_at_1[0] == 0.0
    for est in ("dlt", "ransac"):
        assert (s[f"{est}_auc_at_1"], s[f"{est}_auc_at_3"], s[f"{est}_auc_at_5"]) == (0.0, 0.6667, 0.8)
        assert s[f"{est}_median_corner_error"] == 2.0


def test_poselib_pipeline_with_the_real_library(tmp_path):
    """glue-factory's HPatches default (``poselib``, ``ransac_th: 1.0``) with the real PoseLib (the
    ``estimators`` extra, installed by README's test command: imported plainly, never skipped): exact
    correspondences give AUC 1, and both tables' provenance records PoseLib's installed version."""
    from importlib import metadata

    import poselib  # noqa: F401  the `estimators` extra: its absence fails here

    f, m, pairs = scene()
    p, e, s = run(tmp_path, f, m, pairs, estimators={"poselib": {"ransac_th": [1.0]}})
    assert len(e) == 1 and e.success[0] == 1 and e.corner_error[0] < 1e-4 and e.n_inliers[0] == 60
    assert (s["poselib_auc_at_1"], s["poselib_auc_at_3"], s["poselib_auc_at_5"]) == (1.0, 1.0, 1.0)
    for name in ("pairs.parquet", "estimates.parquet"):
        meta = io.read_table(tmp_path / name)[1]
        assert meta["libraries"]["poselib"] == metadata.version("poselib"), name
        assert meta["params"]["estimators"]["poselib"]["max_iters"] == 100000, name


def test_failure_is_inf_and_no_keypoints_is_no_data(tmp_path):
    f, m, pairs = scene()
    few = {(1, 2): Matches(np.arange(3), np.arange(3), np.ones(3))}  # fewer than 4 matches: every estimate fails
    p, e, s = run(tmp_path, f, few, pairs, estimators={"dlt": {}, "ransac": {"ransac_th": [1.0]}})
    assert (e.success == 0).all() and np.isinf(e.corner_error).all() and s["ransac_failures"] == 1 and s["ransac_auc_at_5"] == 0
    f, m, pairs = scene(empty_b=True)
    p, e, s_empty = run(tmp_path / "empty", f, m, pairs, estimators={"dlt": {}, "ransac": {"ransac_th": [1.0]}})
    assert np.isnan(e.corner_error).all() and np.isnan(p.prec_at_1[0]) and np.isnan(p.mma_at_3[0])
    assert s_empty["pairs_without_keypoints"] == 1


def test_summary_leaves_no_data_pairs_out(tmp_path):
    """Two scenes, one without keypoints in image 2: the summary equals the other scene's alone."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    f, m, pairs = scene()
    run(tmp_path / "a", f, m, pairs)
    f, m, pairs = scene(empty_b=True)
    run(tmp_path / "b", f, m, pairs)
    scoring, matching, sec = sections()
    cfg = {"matching": matching, "pipelines": sec}
    both = summarize_pipeline(*read_pipeline([tmp_path / "a/pairs.parquet", tmp_path / "b/pairs.parquet"],
                                             [tmp_path / "a/estimates.parquet", tmp_path / "b/estimates.parquet"]), cfg)
    alone = summarize_pipeline(*read_pipeline([tmp_path / "a/pairs.parquet"], [tmp_path / "a/estimates.parquet"]), cfg)
    assert both["ransac_pairs"] == alone["ransac_pairs"] == 1 and both["pairs_without_keypoints"] == 1
    for k in ("ransac_auc_at_1", "dlt_auc_at_3", "mean_prec_at_1", "mma_at_3"):
        assert both[k] == alone[k]


def test_best_threshold_is_glue_factorys_pick(tmp_path):
    """Matches with 30 % gross outliers: the summary's AUCs are those of the threshold with the
    largest mean AUC among the per-threshold summaries (metrics.homography.summarize_thresholds)."""
    from descbench.metrics.homography import summarize_thresholds

    f, m, pairs = scene(n=80)
    rng = np.random.default_rng(1)
    xb = f.per_image[2]
    f.per_image[2] = kps(np.c_[xb.x, xb.y] + rng.normal(scale=0.7, size=(80, 2)))  # inliers with noise
    ib = m[(1, 2)].idx_b.copy()
    bad = rng.choice(80, 24, replace=False)
    ib[bad] = rng.permutation(ib[bad])
    noisy = {(1, 2): Matches(np.arange(80), ib, np.ones(80))}
    ths = [30.0, 0.3, 2.0]
    p, e, s = run(tmp_path, f, noisy, pairs, estimators={"ransac": {"ransac_th": ths}})
    hs = summarize_thresholds({t: e[e.ransac_th == t].corner_error.to_numpy() for t in ths})
    assert hs.best_th != ths[0] and len({round(x, 3) for x in e.corner_error}) == 3  # the thresholds differ
    assert s["ransac_ransac_th"] == hs.best_th and s["ransac_auc_at_1"] == hs.best.auc[0]


def test_dlt_weights():
    assert dlt_weighted({"dlt_weights": "auto"}, "confidence") and not dlt_weighted({"dlt_weights": "auto"}, "distance")
    assert dlt_weighted({"dlt_weights": "scores"}, "distance") is True and not dlt_weighted({"dlt_weights": "uniform"}, "confidence")


def test_weighted_dlt_ignores_zero_weight_outliers(tmp_path):
    """Confidence scores 0 on the outliers: the score-weighted DLT (glue-factory's) recovers the
    homography; with distance scores the DLT is unweighted and the outliers spoil it."""
    f, m, pairs = scene(n=40)
    ib = np.arange(40)
    ib[:6] = ib[:6][::-1]
    w = np.ones(40)
    w[:6] = 0.0
    mm = {(1, 2): Matches(np.arange(40), ib, w)}
    _, e_conf, _ = run(tmp_path / "c", f, mm, pairs, "confidence", estimators={"dlt": {}})
    _, e_dist, _ = run(tmp_path / "d", f, mm, pairs, "distance", estimators={"dlt": {}})
    assert e_conf.corner_error[0] < 1e-3 < 1.0 < e_dist.corner_error[0]


def test_estimator_runs_follow_the_config_order():
    runs = estimator_runs({"estimators": {"ransac": {"ransac_th": [2.0, 1.0]}, "dlt": {}}})
    assert [(n, t) for n, _, t in runs] == [("ransac", 2.0), ("ransac", 1.0), ("dlt", None)]
    assert runs[0][1]["max_iters"] == 3000 and runs[0][1]["confidence"] == 0.995


def test_mnn_pipeline_equals_the_matching_task(tmp_path):
    """The mnn matcher's pipeline: every matching column of its pairs table equals the matching
    task's pairs table of the same scene (one definition each)."""
    from descbench.datasets.layout import load_pairs, scene_files
    from descbench.jobs.common import read_features
    from descbench.jobs.matches import match_scene
    from descbench.matchers import MATCHES_SCHEMA, split_matches
    from descbench.tasks.matching import pairs_schema as matching_schema
    from jobcli import SCENES, scored

    run_ = scored(tmp_path)
    s = SCENES[0]
    kp, desc = run_.paths.keypoints("kp", s), run_.paths.descriptors("kp", "desc", s)
    match_scene(run_.scene_root / s, kp, desc, "mnn", {"matcher": "mnn"}, tmp_path / "m.parquet", kpset="kp")
    f = read_features(kp, desc)
    pairs = load_pairs(scene_files(run_.scene_root / s), "reference")
    mm = split_matches(io.read_table(tmp_path / "m.parquet", MATCHES_SCHEMA)[0], [(p.a, p.b) for p in pairs])
    p, _, _ = run(tmp_path, f, mm, pairs)
    want = io.read_table(run_.paths.task_file("matching", "kp", "desc", s, "pairs.parquet"))[0].to_pandas()
    cols = matching_schema(run_.cfg["matching"]["mma_thresholds"]).names
    pd.testing.assert_frame_equal(p[cols], want[cols])
    assert want.n_matches.min() > 0
