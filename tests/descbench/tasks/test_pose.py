"""The pose task (descbench.tasks.pose): per-pair rows against independent computations on a
synthetic two-camera scene (exact correspondences: pose error 0, AUC 1; outliers: the epipolar
precision by brute force), failures and pairs without data, the summary against hand-worked AUCs,
and the estimator settings' checks."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from descbench.datasets.geometry import Homography, Pair, RelativePose
from descbench.errors import ConfigError, DataError
from descbench.matchers import Matches
from descbench.tasks.pose import ESTIMATES, epipolar_key, estimator_settings, pairs_schema, score_pose, summarize_pose

SECTION = {"estimators": {"opencv": {"ransac_th": [0.5, 1.0]}}, "auc_thresholds": [5, 10, 20],
           "epipolar_thresholds": [1e-4, 5e-4, 1e-3]}
K_COLMAP = np.array([[500.0, 0.0, 320.5], [0.0, 510.0, 240.5], [0.0, 0.0, 1.0]])  # centre of pixel (0, 0) at (0.5, 0.5)


def _rotation(axis, deg):
    import cv2

    return cv2.Rodrigues(np.asarray(axis, float) / np.linalg.norm(axis) * np.deg2rad(deg))[0]


def _scene(n=300, seed=0, outliers=0):
    """Points in front of camera 0, seen by camera 1 = (R, t); descbench keypoints (COLMAP pixel - 0.5)."""
    rng = np.random.default_rng(seed)
    X0 = np.column_stack([rng.uniform(-2, 2, n), rng.uniform(-1.5, 1.5, n), rng.uniform(4, 9, n)])
    R, t = _rotation([0.2, 1.0, 0.1], 12.0), np.array([0.8, 0.05, 0.2])
    X1 = X0 @ R.T + t

    def pixels(X):
        p = X @ K_COLMAP.T
        return p[:, :2] / p[:, 2:] - 0.5

    x0, x1 = pixels(X0), pixels(X1)
    if outliers:
        x1[:outliers] = rng.uniform([0, 0], [640, 480], (outliers, 2))
    return x0, x1, R, t


def _features(per_image, descriptors=None):
    rng = np.random.default_rng(0)
    desc = descriptors or {k: rng.normal(size=(len(v), 8)).astype(np.float32) for k, v in per_image.items()}
    return SimpleNamespace(scene="s", per_image={k: SimpleNamespace(xy=v) for k, v in per_image.items()}, by_image=desc,
                           kmeta={"image_sizes": {str(k): [640, 480] for k in per_image}})


EXTENSION = {"mma_thresholds": [1.0, 2.0, 3.0, 5.0], "tau_px": 3.0, "tie_policy": "expected", "chunk_mb": 64.0}


def _run(tmp_path, per_image, matches, pairs, section=SECTION):
    out = [tmp_path / f"s.{k}" for k in ("pairs.parquet", "estimates.parquet", "timing.json")]
    names = [(f"{p.a}.png", f"{p.b}.png") for p in pairs]
    score_pose(_features(per_image), matches, pairs, names, section, *out, {"descriptor": "d"})
    return pq.read_table(out[0]).to_pandas(), pq.read_table(out[1]).to_pandas(), json.loads(out[2].read_text())


def _pair(a, b, R, t):
    return Pair(a, b, RelativePose(K_COLMAP, K_COLMAP, R, t, pixel_offset=0.5))


def _brute_force_epipolar(x0, x1, R, t):
    """The symmetric epipolar distance in normalised coordinates, point by point (glue-factory's
    generalized_epi_dist, essential form, with its 1e-6 clamps on the squared line norms)."""
    tx = np.array([[0, -t[2], t[1]], [t[2], 0, -t[0]], [-t[1], t[0], 0]])
    E = tx @ R
    Kinv = np.linalg.inv(K_COLMAP)
    out = []
    for p, q in zip(x0, x1):
        u = Kinv @ np.array([p[0] + 0.5, p[1] + 0.5, 1.0])
        v = Kinv @ np.array([q[0] + 0.5, q[1] + 0.5, 1.0])
        l1, l0 = E @ u, E.T @ v
        num = abs(v @ E @ u)
        out.append(num * (1 / np.sqrt(max(l1[0] ** 2 + l1[1] ** 2, 1e-6)) + 1 / np.sqrt(max(l0[0] ** 2 + l0[1] ** 2, 1e-6))) / 2)
    return np.array(out)


def test_exact_correspondences_give_pose_error_zero_and_epipolar_precision_one(tmp_path):
    x0, x1, R, t = _scene()
    idx = np.arange(len(x0))
    pairs_df, est, timing = _run(tmp_path, {1: x0, 2: x1}, {(1, 2): Matches(idx, idx, np.zeros(len(idx)))}, [_pair(1, 2, R, t)])
    assert pairs_df[[epipolar_key(t) for t in SECTION["epipolar_thresholds"]]].to_numpy().tolist() == [[1.0, 1.0, 1.0]]
    assert list(est.ransac_th) == [0.5, 1.0] and est.success.tolist() == [1, 1]
    assert est.pose_error.max() < 1e-3 and (est.n_inliers == len(x0)).all()
    assert est.pose_error.equals(est[["rotation_error", "translation_error"]].max(axis=1))
    s = summarize_pose(pairs_df, est, SECTION)
    assert [s[f"opencv_auc_at_{t}"] for t in (5, 10, 20)] == [1.0, 1.0, 1.0] and s["opencv_mAA"] == 1.0
    assert s["opencv_failures"] == 0 and s["opencv_pairs"] == 1 and s["opencv_median_inliers"] == len(x0)
    assert set(timing["estimator_seconds"]) == {"opencv"}


def test_epipolar_precision_equals_a_brute_force_count_with_outliers(tmp_path):
    x0, x1, R, t = _scene(n=200, seed=3, outliers=60)
    x1 = x1 + np.random.default_rng(1).normal(0, 0.3, x1.shape)  # sub-pixel noise: errors spread over the thresholds
    idx = np.arange(len(x0))
    pairs_df, est, _ = _run(tmp_path, {1: x0, 2: x1}, {(1, 2): Matches(idx, idx, np.zeros(len(idx)))}, [_pair(1, 2, R, t)])
    err = _brute_force_epipolar(x0, x1, R, t)
    want = [float(np.mean(err < th)) for th in SECTION["epipolar_thresholds"]]
    got = pairs_df[[epipolar_key(th) for th in SECTION["epipolar_thresholds"]]].iloc[0].tolist()
    assert got == pytest.approx(want, abs=1e-12) and 0 < want[0] < want[1] <= want[2] < 1
    assert est.success.all() and est.pose_error.max() < 3.0  # RANSAC rejects the 30 % outliers (0.3 px noise: ~1 degree)


def test_a_matched_subset_uses_the_matched_keypoints(tmp_path):
    """idx_a / idx_b select rows: matching keypoint i of image 1 with keypoint n-1-i of a reversed image 2."""
    x0, x1, R, t = _scene(n=120, seed=5)
    rev = x1[::-1].copy()
    idx = np.arange(0, 120, 2)
    pairs_df, est, _ = _run(tmp_path, {1: x0, 2: rev}, {(1, 2): Matches(idx, 119 - idx, np.zeros(len(idx)))}, [_pair(1, 2, R, t)])
    assert pairs_df.n_matches.tolist() == [60] and pairs_df.n_keypoints1.tolist() == [120]
    assert pairs_df[epipolar_key(1e-4)].tolist() == [1.0] and est.pose_error.max() < 1e-3


def test_too_few_matches_fail_with_inf_and_an_image_without_keypoints_is_no_data(tmp_path):
    x0, x1, R, t = _scene(n=50)
    few = np.arange(4)  # under the 5 of the five-point solver
    pairs = [_pair(1, 2, R, t), _pair(1, 3, R, t)]
    pairs_df, est, _ = _run(tmp_path, {1: x0, 2: x1, 3: np.zeros((0, 2))},
                            {(1, 2): Matches(few, few, np.zeros(4)), (1, 3): Matches(np.zeros(0, int), np.zeros(0, int), np.zeros(0))},
                            pairs)
    first, second = est[est.pair == 0], est[est.pair == 1]
    assert (first.success == 0).all() and np.isinf(first.pose_error).all() and (first.inlier_ratio == 0).all()
    assert second.pose_error.isna().all() and pairs_df[epipolar_key(1e-4)].isna().tolist() == [False, True]
    s = summarize_pose(pairs_df, est, SECTION)
    assert s["opencv_failures"] == 1 and s["opencv_pairs"] == 1 and s["pairs_without_keypoints"] == 1 and s["pairs"] == 2
    assert s["opencv_auc_at_5"] == 0.0 and np.isinf(s["opencv_median_pose_error"])


def test_the_summary_equals_hand_worked_aucs_and_picks_the_best_threshold():
    """Two pairs. ransac_th 0.5: errors 1 and inf (a failure); 1.0: errors 2 and 3; 2.0: errors 90
    (a known 90-degree error) and 1. Hand-worked AUCs of the recall polyline at 5/10/20 degrees:
    0.5: 0.45, 0.475, 0.4875 (mAA 0.4708); 1.0: (0,0) (2,.5) (3,1) encloses 3.25 by 5 degrees, so
    0.65, 0.825, 0.9125 (mAA 0.7958), the best; 2.0: the 90 never counts: 0.45, 0.475, 0.4875."""
    pairs = pd.DataFrame({"scene": ["s", "s"], "pair": [0, 1], "image0": ["a", "a"], "image1": ["b", "c"],
                          "n_keypoints0": [10, 20], "n_keypoints1": [30, 40], "n_matches": [7, 9],
                          **{epipolar_key(t): [0.5, 1.0] for t in SECTION["epipolar_thresholds"]}})
    errors = {0.5: [1.0, np.inf], 1.0: [2.0, 3.0], 2.0: [90.0, 1.0]}
    est = pd.DataFrame([{"scene": "s", "pair": i, "estimator": "opencv", "ransac_th": th, "pose_error": e,
                         "n_inliers": 5 + i + int(10 * th), "inlier_ratio": 0.25 * i + th / 4} for th, es in errors.items()
                        for i, e in enumerate(es)])
    section = {**SECTION, "estimators": {"opencv": {"ransac_th": [0.5, 1.0, 2.0]}}}
    s = summarize_pose(pairs, est, section)
    assert (s["opencv_auc_at_5"], s["opencv_auc_at_10"], s["opencv_auc_at_20"]) == (0.65, 0.825, 0.9125)
    assert s["opencv_mAA"] == pytest.approx((0.65 + 0.825 + 0.9125) / 3) and s["opencv_ransac_th"] == 1.0
    # the medians of the best threshold's rows (1.0: inliers 15 and 16, ratios 0.25 and 0.5)
    assert s["opencv_median_pose_error"] == 2.5 and s["opencv_median_inliers"] == 15.5 and s["opencv_median_inlier_ratio"] == 0.375
    assert s["keypoints"] == 25.0 and s["matches"] == 8.0 and s[epipolar_key(1e-4)] == 0.75
    only_90 = summarize_pose(pairs, est[est.ransac_th == 2.0], {**SECTION, "estimators": {"opencv": {"ransac_th": [2.0]}}})
    assert (only_90["opencv_auc_at_5"], only_90["opencv_auc_at_20"]) == (0.45, 0.4875)


def test_score_pose_refuses_a_pair_with_a_homography(tmp_path):
    x0, x1, _, _ = _scene(n=20)
    idx = np.arange(20)
    with pytest.raises(DataError, match="needs a calibrated relative pose"):
        _run(tmp_path, {1: x0, 2: x1}, {(1, 2): Matches(idx, idx, np.zeros(20))}, [Pair(1, 2, Homography(np.eye(3)))])


def test_the_tables_match_their_schemas(tmp_path):
    x0, x1, R, t = _scene(n=40)
    idx = np.arange(40)
    _run(tmp_path, {1: x0, 2: x1}, {(1, 2): Matches(idx, idx, np.zeros(40))}, [_pair(1, 2, R, t)])
    assert pq.read_schema(tmp_path / "s.pairs.parquet").remove_metadata() == pairs_schema(SECTION["epipolar_thresholds"])
    assert pq.read_schema(tmp_path / "s.estimates.parquet").remove_metadata() == ESTIMATES


def test_the_same_input_gives_bit_identical_parquet(tmp_path):
    x0, x1, R, t = _scene(n=150, seed=7, outliers=40)
    idx = np.arange(150)
    # every estimator (PoseLib and pycolmap: the estimators extra, which README's test command installs)
    section = {**SECTION, "estimators": {"opencv": {"ransac_th": [1.0]}, "usac_magsac": {"ransac_th": [1.0]},
                                         "poselib": {"ransac_th": [1.0]}, "pycolmap": {"ransac_th": [1.0]}}}
    digests = []
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        _run(tmp_path / run, {1: x0, 2: x1}, {(1, 2): Matches(idx, idx, np.zeros(150))}, [_pair(1, 2, R, t)], section)
        digests.append([(tmp_path / run / f"s.{k}").read_bytes() for k in ("pairs.parquet", "estimates.parquet")])
    assert digests[0] == digests[1]
    est = pq.read_table(tmp_path / "a" / "s.estimates.parquet").to_pandas()
    assert est.estimator.tolist() == ["opencv", "usac_magsac", "poselib", "pycolmap"] and est.success.all()


@pytest.mark.parametrize("estimators, message", [
    ({"opencvv": {}}, "unknown relative pose estimator 'opencvv'"),
    ({"opencv": {"ransac_th": 0}}, r"pose.estimators.opencv.ransac_th: 0"),
    ({"opencv": {"ransac_th": []}}, r"ransac_th: \[\]"),
    ({"opencv": {"ransac_th": [1.0, 1]}}, "repeats a threshold"),
    ({"opencv": {"confidence": 1.0}}, "confidence: 1.0"),
    ({"opencv": {"seed": -1}}, "seed: -1"),
    ({"opencv": {"max_iters": 10}}, "unknown setting"),
])
def test_estimator_settings_refuse_bad_values_naming_the_key(estimators, message):
    with pytest.raises(ConfigError, match=message):
        estimator_settings({"estimators": estimators})


def test_estimator_settings_fill_the_defaults():
    s = estimator_settings({"estimators": {"opencv": {}, "usac_magsac": {"ransac_th": 2}, "poselib": None, "pycolmap": {}}})
    assert s == {"opencv": {"ransac_th": [0.5], "confidence": 0.99999, "seed": 0},
                 "usac_magsac": {"ransac_th": [2.0], "confidence": 0.99999, "seed": 0},
                 "poselib": {"ransac_th": [2.0], "confidence": 0.99999, "seed": 0},
                 "pycolmap": {"ransac_th": [4.0], "confidence": 0.99999, "seed": 0}}


def test_a_known_90_degree_translation_error_and_a_known_rotation_error_are_recorded(tmp_path, monkeypatch):
    """An estimator stand-in returning the true rotation with the translation turned by 90 degrees
    (pair 0), and the true translation with the rotation turned by 7 degrees about an axis (pair 1):
    rotation, translation and pose errors 0/90/90 and 7/0/7, AUC 0 for the first pair."""
    from descbench.estimators import relative_pose as rp

    x0, x1, R, t = _scene(n=40)
    t_side = np.cross(t, [0.0, 0.0, 1.0])  # a direction orthogonal to t
    estimates = iter([(R, t_side), (_rotation([1.0, 2.0, 0.5], 7.0) @ R, 3 * t)])

    def stand_in(xy0, xy1, K0, K1, estimator="opencv", ransac_th=None, **kw):
        R_est, t_est = next(estimates)
        return rp.PoseEstimate(R_est, t_est, np.ones(len(xy0), dtype=bool))

    monkeypatch.setattr(rp, "estimate_relative_pose", stand_in)
    idx = np.arange(40)
    section = {**SECTION, "estimators": {"opencv": {"ransac_th": [1.0]}}}
    pairs_df, est, _ = _run(tmp_path, {1: x0, 2: x1}, {(1, 2): Matches(idx, idx, np.zeros(40))},
                            [_pair(1, 2, R, t), _pair(1, 2, R, t)], section)
    # (arccos near 1 loses digits: the equal directions come out about 1e-6 degrees apart)
    assert est.rotation_error.tolist() == pytest.approx([0.0, 7.0], abs=1e-5)
    assert est.translation_error.tolist() == pytest.approx([90.0, 0.0], abs=1e-5)
    assert est.pose_error.tolist() == pytest.approx([90.0, 7.0], abs=1e-5)
    s = summarize_pose(pairs_df, est, section)
    # errors 90 and 7: nothing within 5 degrees; to 10, the recall polyline (0, 0) (7, 0.5) (10, 0.5)
    # encloses 1.75 + 1.5 = 3.25, / 10
    assert (s["opencv_auc_at_5"], s["opencv_auc_at_10"]) == (0.0, 0.325)


def test_depth_metrics_of_exact_correspondences_on_the_rendered_demo(tmp_path):
    """Pixels of one rendered view carried into another through the exact depth and the cameras'
    relative pose (each kept where the other view sees the same surface point): reprojection
    precision 1 at every threshold, every match covisible, and the ground-truth matches at 3 px are
    exactly these matches (recall and precision 1)."""
    from descbench.datasets.posed_demo import make_scene, render
    from descbench.metrics.depth import project, sample_depth

    planes, cams = make_scene(0, seed=0)
    ca, cb = cams[0], cams[1]
    _, depth_a = render(planes, ca)
    _, depth_b = render(planes, cb)
    depth_a, depth_b = np.where(np.isfinite(depth_a), depth_a, 0.0), np.where(np.isfinite(depth_b), depth_b, 0.0)
    R, t = cb.R @ ca.R.T, cb.t - cb.R @ ca.R.T @ ca.t
    K = lambda c: c.K + np.array([[0, 0, 0.5], [0, 0, 0.5], [0, 0, 0]])  # COLMAP's convention, as views.txt
    gx, gy = np.meshgrid(np.arange(40.0, 600.0, 23.0), np.arange(40.0, 440.0, 23.0))
    xa = np.column_stack([gx.ravel(), gy.ravel()])
    d, ok = sample_depth(xa, depth_a)
    xb, vis = project(xa, d, K(ca), K(cb), R, t, (640, 480), offset=0.5)
    back, ok_b = sample_depth(xb, depth_b)
    z_b = (np.column_stack([xa + 0.5, np.ones(len(xa))]) @ np.linalg.inv(K(ca)).T * d[:, None]) @ R.T + t
    keep = ok & vis & ok_b & (np.abs(back - z_b[:, 2]) < 1e-3) & (xb[:, 0] > 2) & (xb[:, 0] < 637) & (xb[:, 1] > 2) & (xb[:, 1] < 477)
    xa, xb = xa[keep], xb[keep]
    assert len(xa) > 100
    g = RelativePose(K(ca), K(cb), R, t, pixel_offset=0.5)
    idx = np.arange(len(xa))
    section = {**SECTION, "depth": True, "extension": EXTENSION}
    out = [tmp_path / f"s.{k}" for k in ("pairs.parquet", "estimates.parquet", "timing.json")]
    score_pose(_features({1: xa, 2: xb}), {(1, 2): Matches(idx, idx, np.zeros(len(idx)))}, [Pair(1, 2, g)], [("0.png", "1.png")],
               section, *out, {}, depth_of={1: depth_a, 2: depth_b}.get)
    row = pq.read_table(out[0]).to_pandas().iloc[0]
    assert (row.reproj_prec_at_1, row.reproj_prec_at_3, row.reproj_prec_at_5) == (1.0, 1.0, 1.0)
    assert row.covisible == len(xa) and row.covisible_percent == 100.0
    assert row.gt_match_recall_at_3 == pytest.approx(1.0) and row.gt_match_precision_at_3 == pytest.approx(1.0)
    assert row.mma_at_1 == 1.0 and row.depth_matches == len(xa)  # descbench's extension: every match exact
    shuffled = np.roll(idx, 1)  # every match wrong by one grid step (23 px): precision 0, recall 0
    score_pose(_features({1: xa, 2: xb}), {(1, 2): Matches(idx, shuffled, np.zeros(len(idx)))}, [Pair(1, 2, g)],
               [("0.png", "1.png")], section, *out, {}, depth_of={1: depth_a, 2: depth_b}.get)
    row = pq.read_table(out[0]).to_pandas().iloc[0]
    assert row.reproj_prec_at_5 == 0.0 and row.gt_match_recall_at_3 == 0.0 and row.gt_match_precision_at_3 == 0.0
    s = summarize_pose(pq.read_table(out[0]).to_pandas(), pq.read_table(out[1]).to_pandas(), section)
    assert s["reproj_prec_at_5"] == 0.0 and s["covisible_percent"] == 100.0 and s["mma_at_5"] == 0.0


def _brute_force_ap(q, t, relevant):
    """AP of one query by brute force: every candidate ranked by its float64 squared distance (no
    ties here), the mean over the relevant ones of the precision at their ranks."""
    d = [float(np.sum((q.astype(np.float64) - c.astype(np.float64)) ** 2)) for c in t]
    order = sorted(range(len(t)), key=lambda j: d[j])
    rank = {j: r for r, j in enumerate(order, 1)}
    ranks = sorted(rank[j] for j in relevant)
    return sum((k + 1) / r for k, r in enumerate(ranks)) / len(ranks)


def test_descbenchs_depth_extension_equals_a_brute_force(tmp_path):
    """A depth map growing from left to right (3 + 0.02 x m at pixel column x), unknown left of
    x = 100 px: each keypoint of image a is lifted and projected by hand (pinhole arithmetic in
    COLMAP's convention); MMA counts the matches landing within each threshold (``<=``; a match of
    a keypoint without depth excluded), and the true mAP ranks every descriptor of image b per
    query, with every keypoint within 3 px of the projection relevant (some queries have two)."""
    rng = np.random.default_rng(5)
    R, t = _rotation([0.1, 1.0, 0.0], 4.0), np.array([-2.0, 0.05, 0.1])  # far left: some leave image b
    depth_a = np.tile(3.0 + 0.02 * np.arange(640.0), (480, 1))
    depth_a[:, :100] = 0.0
    xa = np.vstack([rng.uniform([110, 20], [620, 460], (50, 2)), rng.uniform([5, 20], [90, 460], (10, 2))])
    Kinv = np.linalg.inv(K_COLMAP)
    proj, seen = [], []
    for x in xa:
        X = (3.0 + 0.02 * x[0]) * (Kinv @ [x[0] + 0.5, x[1] + 0.5, 1.0])
        p = K_COLMAP @ (R @ X + t)
        u = p[:2] / p[2]
        seen.append(x[0] > 100 and 0 <= u[0] <= 639 and 0 <= u[1] <= 479)
        proj.append(u - 0.5)
    proj, seen = np.array(proj), np.array(seen)
    # image b: the projections moved by 0.5 / 1.5 / 2.5 / 4 / 8 px in turn (the third query's target
    # 2 px right exactly, a match at the threshold), 20 unrelated keypoints, and a second keypoint
    # 2.4 px below every fifth projection (two relevant items)
    shift = np.array([0.5, 1.5, 2.5, 4.0, 8.0])[np.arange(len(xa)) % 5]
    angle = rng.uniform(0, 2 * np.pi, len(xa))
    moved = proj + shift[:, None] * np.column_stack([np.cos(angle), np.sin(angle)])
    moved[2] = proj[2] + [2.0, 0.0]
    xb = np.vstack([moved, rng.uniform([0, 0], [640, 480], (20, 2)), proj[::5] + [0.0, 2.4]])
    xb[~np.isfinite(xb)] = 0.0
    desc = {1: rng.normal(size=(len(xa), 8)).astype(np.float32), 2: rng.normal(size=(len(xb), 8)).astype(np.float32)}
    ia = np.arange(len(xa))
    ib = np.where(np.arange(len(xa)) % 7 == 0, len(xa) + ia % 20, ia)  # every 7th matched to an unrelated keypoint
    g = RelativePose(K_COLMAP, K_COLMAP, R, t, pixel_offset=0.5)
    section = {**SECTION, "depth": True, "extension": EXTENSION}
    out = [tmp_path / f"s.{k}" for k in ("pairs.parquet", "estimates.parquet", "timing.json")]
    score_pose(_features({1: xa, 2: xb}, desc), {(1, 2): Matches(ia, ib, np.zeros(len(ia)))}, [Pair(1, 2, g)],
               [("a.png", "b.png")], section, *out, {}, depth_of={1: depth_a, 2: np.full((480, 640), 5.0)}.get)
    row = pq.read_table(out[0]).to_pandas().iloc[0]
    assert 20 <= seen.sum() < 50 and row.depth_queries == seen.sum() and row.depth_matches == seen.sum() and seen[2]
    err = np.array([np.hypot(*(proj[i] - xb[j])) for i, j in zip(ia, ib) if seen[i]])
    assert np.sum(err == 2.0) == 1  # a match at exactly 2 px counts within 2 px
    for th in EXTENSION["mma_thresholds"]:
        assert row[f"mma_at_{th:g}"] == pytest.approx(np.mean(err <= th), abs=1e-15)
    aps = []
    for i in np.flatnonzero(seen):
        relevant = [j for j in range(len(xb)) if np.hypot(*(xb[j] - proj[i])) <= 3.0]
        if relevant:
            aps.append(_brute_force_ap(desc[1][i], desc[2], relevant))
    assert row.relevant_queries == len(aps) and row.sum_ap == pytest.approx(sum(aps), rel=1e-12)
    assert sum(1 for i in np.flatnonzero(seen) if np.sum(np.hypot(*(xb - proj[i]).T) <= 3.0) > 1) >= 5
    s = summarize_pose(pq.read_table(out[0]).to_pandas(), pq.read_table(out[1]).to_pandas(), section)
    assert s["true_map"] == pytest.approx(np.mean(aps), rel=1e-12) and s["mma_at_3"] == round(np.mean(err <= 3.0), 3)
    assert s["queries_without_depth_percent"] == round(100 * (1 - seen.sum() / len(xa)), 3)


@pytest.mark.parametrize("setting, missing, on", [(None, [], True), (None, ["s/a.png"], False), (False, [], False), (True, [], True)])
def test_resolve_depth(setting, missing, on):
    from descbench.tasks.pose import resolve_depth

    assert resolve_depth(setting, missing)[0] is on


def test_depth_required_without_depth_maps_names_the_views():
    from descbench.tasks.pose import resolve_depth

    with pytest.raises(ConfigError, match=r"pose.depth: true, but 2 view\(s\) have no depth map .*: s/a.png, s/b.png"):
        resolve_depth(True, ["s/a.png", "s/b.png"])


def test_a_pure_translation_with_exact_correspondences_is_recovered_exactly(tmp_path):
    """R = I, a sideways step: the estimate's rotation and translation-direction errors are ~0, AUC 1."""
    rng = np.random.default_rng(11)
    X0 = np.column_stack([rng.uniform(-2, 2, 200), rng.uniform(-1.5, 1.5, 200), rng.uniform(4, 9, 200)])
    t = np.array([1.0, 0.0, 0.0])

    def pixels(X):
        p = X @ K_COLMAP.T
        return p[:, :2] / p[:, 2:] - 0.5

    idx = np.arange(200)
    section = {**SECTION, "estimators": {"opencv": {"ransac_th": [0.5]}}}
    pairs_df, est, _ = _run(tmp_path, {1: pixels(X0), 2: pixels(X0 + t)}, {(1, 2): Matches(idx, idx, np.zeros(200))},
                            [_pair(1, 2, np.eye(3), t)], section)
    assert est.rotation_error.iloc[0] < 1e-4 and est.translation_error.iloc[0] < 1e-4
    assert summarize_pose(pairs_df, est, section)["opencv_auc_at_5"] == 1.0


def test_a_pure_rotation_pairs_translation_error_is_90_degrees_as_glue_factorys(tmp_path, monkeypatch):
    """Ground truth t = 0 (a pure rotation) has no direction: glue-factory's angle_error_vec clamps
    the norm product at 1e-10, the cosine is 0 and the translation error 90 degrees (its
    ignore_gt_t_thr, 0 by default, would set it to 0): a stand-in estimate with the true rotation
    gets rotation error 0 and pose error 90."""
    from descbench.estimators import relative_pose as rp

    x0, x1, _, _ = _scene(n=40)
    R = _rotation([0.0, 1.0, 0.0], 10.0)
    monkeypatch.setattr(rp, "estimate_relative_pose",
                        lambda xy0, *a, **k: rp.PoseEstimate(R, np.array([0.0, 0.0, 1.0]), np.ones(len(xy0), dtype=bool)))
    idx = np.arange(40)
    section = {**SECTION, "estimators": {"opencv": {"ransac_th": [1.0]}}}
    _, est, _ = _run(tmp_path, {1: x0, 2: x1}, {(1, 2): Matches(idx, idx, np.zeros(40))}, [_pair(1, 2, R, np.zeros(3))], section)
    assert est.rotation_error.iloc[0] < 1e-5 and est.translation_error.iloc[0] == 90.0 and est.pose_error.iloc[0] == 90.0


def test_the_extension_summary_is_micro_over_queries_and_a_mean_over_pairs():
    """Hand-worked: two pairs with sum_ap 1.5 and 0.5 over 2 and 3 relevant queries give true_map
    2 / 5 = 0.4 (not the mean of 0.75 and 0.167); MMA is the mean over pairs, a pair without a
    match with a projection (NaN) left out; 10 of 40 queries without depth are 25 %."""
    base = {"scene": "s", "image0": "a", "image1": "b", "n_keypoints0": 20, "n_keypoints1": 20, "n_matches": 4,
            **{epipolar_key(t): 0.0 for t in SECTION["epipolar_thresholds"]},
            **dict.fromkeys(["reproj_prec_at_1", "reproj_prec_at_3", "reproj_prec_at_5", "covisible", "covisible_percent",
                             "gt_match_recall_at_3", "gt_match_precision_at_3"], 0.0)}
    pairs = pd.DataFrame([{**base, "pair": 0, "depth_matches": 4, "mma_at_3": 0.5, "depth_queries": 15, "relevant_queries": 2,
                           "sum_ap": 1.5},
                          {**base, "pair": 1, "depth_matches": 0, "mma_at_3": np.nan, "depth_queries": 15, "relevant_queries": 3,
                           "sum_ap": 0.5},
                          {**base, "pair": 2, "depth_matches": 2, "mma_at_3": 1.0, "depth_queries": 0, "relevant_queries": 0,
                           "sum_ap": 0.0, "n_keypoints0": 0}])
    est = pd.DataFrame(columns=[f.name for f in ESTIMATES])
    s = summarize_pose(pairs, est, {**SECTION, "estimators": {}})
    assert s["true_map"] == 0.4 and s["mma_at_3"] == 0.5 and s["queries_without_depth_percent"] == 25.0


def test_the_extensions_mma_counts_a_match_at_exactly_the_threshold(tmp_path):
    """Dyadic numbers throughout (focal 512, depth 2, a 0.5 m step sideways): every projection is
    exact, x + 128 px, so matches 1 and 2 px away are exactly at MMA's thresholds and count
    (``<=``), one 3 px away does not count at 2 px."""
    K = np.array([[512.0, 0.0, 320.5], [0.0, 512.0, 240.5], [0.0, 0.0, 1.0]])
    xa = np.array([[200.0, 100.0], [210.0, 300.0], [300.0, 200.0]])
    xb = xa + [[129.0, 0.0], [128.0, 2.0], [131.0, 0.0]]
    g = RelativePose(K, K, np.eye(3), np.array([0.5, 0.0, 0.0]), pixel_offset=0.5)
    section = {**SECTION, "depth": True, "extension": {**EXTENSION, "mma_thresholds": [1.0, 2.0]}}
    out = [tmp_path / f"s.{k}" for k in ("pairs.parquet", "estimates.parquet", "timing.json")]
    idx = np.arange(3)
    depth = np.full((480, 640), 2.0)
    score_pose(_features({1: xa, 2: xb}), {(1, 2): Matches(idx, idx, np.zeros(3))}, [Pair(1, 2, g)], [("a", "b")], section,
               *out, {}, depth_of={1: depth, 2: depth}.get)
    row = pq.read_table(out[0]).to_pandas().iloc[0]
    assert (row.depth_matches, row.mma_at_1, row.mma_at_2) == (3, 1 / 3, 2 / 3)
