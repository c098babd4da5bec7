"""Numbers a user can trust: one rule for pairs without keypoints in every matching and homography
metric (per pair, per scene, dataset, bootstrap, terminal summary), and Parquet writers that refuse
rows whose columns differ from the schema.

The rule (README "Metrics (matching)", metrics/matching.py): a pair whose image 1 or image k has no
keypoint has no data for every matching / homography metric (NaN, left out of every mean,
numerator and denominator alike), counted once as ``pairs_without_keypoints``; a pair with
keypoints but no match still counts (0 / homography failure).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from descbench import io
from descbench.jobs.common import read_features
from descbench.jobs.descriptors import describe_scene
from descbench.jobs.keypoints import detect_scene
from descbench.jobs.score import score_matching_scene, score_scene, score_verification_scene
from descbench.metrics.aggregate import matching_scene_values, matching_summary
from descbench.metrics.bootstrap import BootstrapParams, paired_comparison
from descbench.metrics.matching import MatchingParams, homography_accuracy, homography_auc, match_pair
from descbench.metrics.retrieval import project
from descbench.report import table as report_table
from descbench.report.summary import SUMMARY_COLUMNS, run_summary
from descbench.tasks import matching as matching_task

W, H = 640, 480
H_TRUE = np.array([[1.02, 0.01, 5.0], [-0.01, 0.98, -3.0], [1e-5, 0.0, 1.0]])
MMA = tuple(range(1, 11))
HOM, AUC = (1, 3, 5), (3, 5, 10)
PARAMS = MatchingParams(mma_thresholds=MMA)


def _pair(kind: str, seed: int) -> dict:
    """One pair's match_pair statistics (the real per-pair code): ``good`` (exact correspondences,
    corner error ~0), ``shift4`` (every image-k point 4 px to the right: corner error ~4 px),
    ``fail`` (3 correspondences: no homography, corner error inf), ``empty_k`` / ``empty_1``
    (no keypoint in image k / image 1)."""
    rng = np.random.default_rng(seed)
    q_xy = rng.uniform([60, 60], [W - 60, H - 60], size=(60, 2))
    desc = rng.normal(size=(60, 32)).astype(np.float32)
    t_xy, _ = project(H_TRUE, q_xy, W, H)
    if kind == "shift4":
        t_xy = t_xy + [4.0, 0.0]
    if kind == "fail":
        q_xy, desc, t_xy = q_xy[:3], desc[:3], t_xy[:3]
    t_desc = desc
    if kind == "empty_k":
        t_xy, t_desc = t_xy[:0], desc[:0]
    if kind == "empty_1":
        q_xy, desc = q_xy[:0], desc[:0]
    return match_pair(q_xy, desc, t_xy, t_desc, H_TRUE, (W, H), (W, H), PARAMS)


# scene -> pair kinds (images 2, 3, ...); v_c's image 1 is empty, so none of its pairs has data
LAYOUT = {"i_a": ["good", "empty_k", "shift4", "fail"], "v_b": ["good"], "v_c": ["empty_1", "empty_1"]}


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    rows = [{"scene": s, "pair": k + 2, **_pair(kind, 10 * i + k)}
            for i, (s, kinds) in enumerate(LAYOUT.items()) for k, kind in enumerate(kinds)]
    return pd.DataFrame(rows)


def _kinds():
    return [kind for kinds in LAYOUT.values() for kind in kinds]


def test_per_pair_values_follow_the_rule(pairs):
    kinds = _kinds()
    err = dict(zip(kinds, pairs.corner_error))
    assert err["good"] < 0.01 and 3.5 < err["shift4"] < 4.5 and err["fail"] == math.inf
    ratios = ["precision", "matching_score", "repeatability", "corner_error"] + [f"mma_at_{t}" for t in MMA]
    for kind, (_, r) in zip(kinds, pairs.iterrows()):
        if kind.startswith("empty"):  # no data: every ratio NaN, every count 0
            assert all(math.isnan(r[c]) for c in ratios), kind
            assert r.n_matches == 0 and r.homography_found == 0 and r.n_inliers == 0
        else:  # data: finite (or inf for the failed homography), never NaN
            assert not any(math.isnan(r[c]) for c in ratios), kind
    # the failed pair has keypoints and matches: a result (precision 1, homography failed), not "no data"
    fail = pairs.iloc[kinds.index("fail")]
    assert fail.n_matches == 3 and fail.precision == 1.0 and fail.homography_found == 0


def test_every_matching_mean_leaves_out_pairs_without_keypoints(pairs):
    s = matching_summary(pairs, None, MMA, HOM, AUC)
    data = pairs[[not k.startswith("empty") for k in _kinds()]]  # good, shift4, fail (i_a), good (v_b)
    assert len(data) == 4
    # homography accuracy = the mean over the non-empty pairs: good, good <= 1; shift4 <= 5; fail never
    assert [s[f"homography_accuracy_at_{t}"] for t in HOM] == pytest.approx([2 / 4, 2 / 4, 3 / 4])
    e = data.corner_error.to_numpy()
    assert [s[f"homography_auc_at_{t}"] for t in AUC] == pytest.approx(list(homography_auc(e, AUC)), rel=1e-12)
    for t in MMA:
        assert s[f"mma_at_{t}"] == pytest.approx(data[f"mma_at_{t}"].mean(), rel=1e-12)
    assert s["mma_v_at_3"] == pytest.approx(data[data.scene == "v_b"].mma_at_3.mean())
    assert s["mean_precision"] == pytest.approx(data.precision.mean())
    assert s["matching_score"] == pytest.approx(data.matching_score.mean())
    assert s["repeatability"] == pytest.approx(data.repeatability.mean())
    assert s["mean_matches"] == pytest.approx(data.n_matches.mean())  # the empty pairs' 0 matches are no data
    assert s["legacy_macro_precision_by_scene"] == pytest.approx((data.precision[:3].mean() + data.precision.iloc[3]) / 2)
    # counted once, in their own column; failures only among pairs with keypoints
    assert s["pairs_without_keypoints"] == 3 and s["homography_failures"] == 1 and s["pairs_without_matches"] == 0
    assert s["matching_pairs"] == 7
    # keypoint counts are the detector's: an empty image counts with 0 keypoints
    assert s["mean_keypoints_per_pair"] == pytest.approx(((pairs.n_keypoints_1 + pairs.n_keypoints_2) / 2).mean())


def test_rule_holds_for_rows_that_say_otherwise(pairs):
    """Rows written before the rule (empty pairs: corner error inf, repeatability / MMA 0): the
    aggregates still leave them out, from the keypoint counts alone."""
    old = pairs.copy()
    empty = (old.n_keypoints_1 == 0) | (old.n_keypoints_2 == 0)
    old.loc[empty, "corner_error"] = math.inf
    for c in ["repeatability", "precision", "matching_score"] + [f"mma_at_{t}" for t in MMA]:
        old.loc[empty, c] = 0.0
    new, legacy = matching_summary(pairs, None, MMA, HOM, AUC), matching_summary(old, None, MMA, HOM, AUC)
    assert new.keys() == legacy.keys()
    for k in new:
        assert new[k] == pytest.approx(legacy[k], nan_ok=True), k
    pd.testing.assert_frame_equal(matching_scene_values(pairs), matching_scene_values(old))


def test_per_scene_sums_and_bootstrap_use_the_same_denominators(pairs):
    s = matching_summary(pairs, None, MMA, HOM, AUC)
    scenes = matching_scene_values(pairs).set_index("scene")
    assert scenes.n_matching_pairs.to_dict() == {"i_a": 3, "v_b": 1, "v_c": 0}
    assert scenes.n_mma_pairs.to_dict() == {"i_a": 3, "v_b": 1, "v_c": 0}
    assert scenes.homography_accurate_at_3.to_dict() == {"i_a": 1, "v_b": 1, "v_c": 0}
    assert math.isnan(scenes.loc["v_c", "mean_matches"]) and math.isnan(scenes.loc["v_c", "mean_precision"])
    assert scenes.loc["i_a", "mean_matches"] == pytest.approx(pairs.n_matches[[0, 2, 3]].mean())
    # the report's per-scene (numerator, denominator) recompute the table's value exactly, and so
    # do the bootstrap's paired comparison and interval
    sc = scenes.reset_index()
    params = BootstrapParams(resamples=64, seed=0)
    for metric in ("mma_at_3", "homography_accuracy_at_3"):
        num, den = report_table.scene_num_den(sc, metric)
        assert num.sum() / den.sum() == pytest.approx(s[metric], rel=1e-12), metric
        cmp = paired_comparison(num, den, num, den, params)
        assert cmp["value_a"] == pytest.approx(s[metric], rel=1e-12) and cmp["difference"] == 0.0
        table = pd.DataFrame({"descriptor": ["d"], "keypoint_set": ["k"], metric: [s[metric]]})
        lo, hi = report_table.add_intervals(table, [sc], params)[[f"{metric}_ci_low", f"{metric}_ci_high"]].iloc[0]
        assert 0.0 <= lo <= s[metric] <= hi <= 1.0


def test_homography_aggregates_leave_out_nan_and_count_inf():
    e = [0.5, math.nan, 4.0, math.inf]
    assert list(homography_accuracy(e, (1, 5))) == pytest.approx([1 / 3, 2 / 3])
    assert list(homography_auc(e, (5,))) == pytest.approx(list(homography_auc([0.5, 4.0, math.inf], (5,))))
    assert np.isnan(homography_accuracy([math.nan, math.nan], (3,))).all()
    assert np.isnan(homography_auc([math.nan], (3,))).all()


# ----------------------------------------------------------------------------- real code path

SCORING = {"tau_px": 3.0, "gt": "closest", "tie_policy": "expected", "chunk_mb": 64}
VERIFICATION = {"enabled": True, "seed": 0, "distractor_scenes": 10, "distractors_per_scene": 20, "candidates": "nearest",
                "hard_negatives": "negative", "ap_convention": "step", "quantized_bins": 25, "convention": "descbench"}
MATCHING = {"enabled": True, "mma_thresholds": list(MMA), "repeatability_px": 3.0, "ransac_px": 3.0, "ransac_seed": 0,
            "homography_thresholds": list(HOM), "homography_auc_thresholds": list(AUC), "classifier_epsilon_px": 2.0,
            "classifier_matchers": ["threshold", "nn", "ratio", "mutual_nn"]}
KP_SPEC = {"detector": "sift", "border_px": 40, "max_keypoints": None, "params": {}}
DESC_SPEC = {"family": "sift", "params": {}}


def _features(scene: Path, out: Path, border_px: int) -> tuple[Path, Path]:
    spec = {**KP_SPEC, "border_px": border_px}
    kp, desc = out / "kp.parquet", out / "desc.parquet"
    detect_scene(scene, "kp", spec, kp)
    describe_scene(scene, kp, "desc", DESC_SPEC, spec, desc)
    return kp, desc


def _matching_files(scene: Path, kp: Path, desc: Path, out: Path) -> list[Path]:
    outs = [out / f for f in ("m.pairs.parquet", "m.classifier.parquet", "m.roc.parquet", "m.timing.json")]
    score_matching_scene(scene, kp, desc, SCORING, MATCHING, *outs)
    return outs


def test_border_beyond_the_image_gives_no_data_everywhere_and_says_why(scene: Path, tmp_path: Path):
    """border_px larger than half the image: no keypoint anywhere; every metric of the table is
    NaN (n/a on the terminal, never 0.0000), and the summary names the cause."""
    out = tmp_path / "out"
    kp, desc = _features(scene, out, border_px=10000)
    s = scene.name
    ret = [out / f for f in ("queries.parquet", "pairs.parquet", "timing.json")]
    score_scene(scene, kp, desc, SCORING, *ret)
    ver = [out / f for f in ("v.list.parquet", "v.queries.parquet", "v.scene.parquet", "v.timing.json")]
    score_verification_scene(scene, kp, desc, {}, [s], SCORING, VERIFICATION, *ver)
    mat = _matching_files(scene, kp, desc, out)
    files = {"scores": {"queries.parquet": [ret[0]], "pairs.parquet": [ret[1]], "timing.json": [ret[2]]},
             "verification": {"list.parquet": [ver[0]], "queries.parquet": [ver[1]], "scene.parquet": [ver[2]],
                              "timing.json": [ver[3]]},
             "matching": {"pairs.parquet": [mat[0]], "classifier.parquet": [mat[1]], "roc.parquet": [mat[2]],
                          "timing.json": [mat[3]]}}
    entry = report_table.Entry("kp", "desc", files, scenes=[s])
    cfg = {"verification": VERIFICATION, "matching": MATCHING}
    table, scenes = report_table.build([entry], cfg)
    row = table.iloc[0]
    metrics = [c for c in table.columns if c.startswith(("mma_", "homography_accuracy_", "homography_auc_"))]
    metrics += ["true_map_micro", "keypoint_verification_ap", "mean_precision", "matching_score", "repeatability",
                "mean_matches", "classifier_threshold_auc"]
    assert len(metrics) > 20
    for c in metrics:
        assert math.isnan(row[c]), f"{c} = {row[c]}: a number without any keypoint"
    assert row.pairs_without_keypoints == 5 and row.matching_pairs == 5 and row.homography_failures == 0
    assert scenes.n_matching_pairs.tolist() == [0] and scenes.n_mma_pairs.tolist() == [0]
    report = tmp_path / "report"
    report.mkdir()
    table.to_csv(report / "comparison.csv", index=False)
    text = run_summary(report)
    shown = text.split("Not plain results:")[0]
    assert "0.0000" not in shown and shown.count("n/a (no data)") == len(SUMMARY_COLUMNS) - 2
    assert (f"desc on kp: no data for {', '.join(SUMMARY_COLUMNS[2:])} (shown as n/a: nothing to average, not 0): "
            "every one of the 5 pair(s) has an image without keypoints") in text
    assert "desc on kp: 6 image(s) had no keypoint after the filters" in text
    assert "desc on kp: 5 pair(s) with an image without keypoints (no data" in text


# ----------------------------------------------------------------------------- Parquet writers


@pytest.mark.bad_input
def test_table_from_rows_names_missing_and_unknown_columns():
    schema = pa.schema([("scene", pa.string()), ("n", pa.int64())])
    assert io.table_from_rows([{"scene": "a", "n": 1}], schema, "t").to_pylist() == [{"scene": "a", "n": 1}]
    assert io.table_from_rows([], schema, "t").num_rows == 0
    with pytest.raises(ValueError, match=r"my table: row 1 .*missing columns: \['n'\]; columns not in the schema: none"):
        io.table_from_rows([{"scene": "a", "n": 1}, {"scene": "b"}], schema, "my table")
    with pytest.raises(ValueError, match=r"my table: row 0 .*missing columns: none; columns not in the schema: \['n_inliers'\]"):
        io.table_from_rows([{"scene": "a", "n": 1, "n_inliers": 3}], schema, "my table")


def test_matching_pairs_file_has_every_computed_column(scene: Path, tmp_path: Path):
    """The matching pairs table through the real code path (detect, describe, match, write): the file
    holds exactly scene, pair and every statistic match_pair computes, each column of
    descbench.tasks.matching.pairs_schema in order, n_inliers included. Deleting any column from the schema (or
    adding one the code does not compute) fails the write, and so this test."""
    out = tmp_path / "out"
    kp, desc = _features(scene, out, border_px=40)
    pairs_file = _matching_files(scene, kp, desc, out)[0]
    t, _ = io.read_table(pairs_file, matching_task.pairs_schema(MMA))
    f = read_features(kp, desc)
    stats = match_pair(f.per_image[1].xy, f.by_image[1], f.per_image[2].xy, f.by_image[2],
                       np.loadtxt(scene / "H_1_2"), tuple(f.kmeta["image_sizes"]["1"]), tuple(f.kmeta["image_sizes"]["2"]),
                       matching_task.matching_params(SCORING, MATCHING)[0])
    assert sorted(t.column_names) == sorted(["scene", "pair", *stats]) and "n_inliers" in t.column_names
    assert t.schema.remove_metadata() == matching_task.pairs_schema(MMA)  # the schema's order and types
    rows = t.to_pylist()
    assert [r["pair"] for r in rows] == [2, 3, 4, 5, 6] and rows[0]["n_inliers"] == stats["n_inliers"] > 0
    assert all(v is not None for r in rows for v in r.values())  # no column filled with nulls


@pytest.mark.bad_input
def test_matching_writer_refuses_a_schema_without_a_computed_column(scene: Path, tmp_path: Path, monkeypatch):
    out = tmp_path / "out"
    kp, desc = _features(scene, out, border_px=40)
    full = matching_task.pairs_schema
    monkeypatch.setattr(matching_task, "pairs_schema", lambda ts: full(ts).remove(full(ts).get_field_index("n_inliers")))
    with pytest.raises(ValueError, match=r"matching pairs table .*columns not in the schema: \['n_inliers'\]"):
        _matching_files(scene, kp, desc, out)
    assert not (out / "m.pairs.parquet").exists()
    assert pq.ParquetFile(kp).metadata.num_rows > 0  # the inputs were fine: the guard, not the data, stopped it


def test_homography_plot_is_the_table_value(pairs):
    """The homography-accuracy figure draws the table's definition: at 3 px its curve equals
    homography_accuracy_at_3 (pairs without keypoints left out), not a fraction of all pairs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from descbench.tasks.matching import draw_homography_accuracy

    class Run:  # what the figure reads: rows() and styles
        styles = {("d", "k"): {"label": "d on k"}}

        def rows(self, task, kind):
            assert task.name == "matching" and kind == "pairs.parquet"
            yield "k", "d", pairs

    fig = draw_homography_accuracy(Run(), plt)
    x, y = fig.axes[0].lines[0].get_data()
    s = matching_summary(pairs, None, MMA, HOM, AUC)
    for t in HOM:
        assert y[np.flatnonzero(np.isclose(x, t))[0]] == pytest.approx(s[f"homography_accuracy_at_{t}"])
    plt.close(fig)
