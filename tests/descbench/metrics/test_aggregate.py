"""Every aggregate (retrieval, verification, matching) on hand-worked examples."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from descbench.io import HIT_KS
from descbench.metrics.aggregate import metadata_string, scene_table, summarize


def row(scene, pair, n_queries, ranks, n_outside=0):
    """A pair's sufficient statistics written out from the ranks of its R=1 queries."""
    r = {"scene": scene, "pair": pair, "n_query_keypoints": n_queries, "n_target_keypoints": 10,
         "n_queries": n_queries, "n_outside": n_outside, "n_relevant_queries": len(ranks),
         "n_relevant_items": len(ranks), "sum_ap": sum(1 / x for x in ranks)}
    for k in HIT_KS:
        r[f"sum_hit_at_{k}"] = float(sum(x <= k for x in ranks))
    for k in (1, 5, 10):
        r[f"sum_recall_at_{k}"] = float(sum(x <= k for x in ranks))
    return r


@pytest.fixture
def pairs():
    return pd.DataFrame([
        row("i_a", 2, 4, [1, 2]),       # APs 1, 1/2
        row("i_a", 3, 4, [4], 1),       # AP 1/4
        row("v_b", 2, 2, [3, 3]),       # APs 1/3, 1/3
        row("v_c", 2, 3, []),           # no relevant query at all
    ])


def test_every_aggregate_by_hand(pairs):
    s = summarize(pairs)
    total = 1 + 1 / 2 + 1 / 4 + 2 / 3
    assert s["true_map_micro"] == pytest.approx(total / 5)
    assert s["true_map_micro_including_zeros"] == pytest.approx(total / 13)
    i_a, v_b = (1.75 / 3), (2 / 3) / 2
    assert s["true_map_macro_by_scene"] == pytest.approx((i_a + v_b) / 2)  # v_c has no relevant query
    assert s["true_map_macro_by_scene_including_zeros"] == pytest.approx((1.75 / 8 + (2 / 3) / 2 + 0 / 3) / 3)
    assert s["illumination_map"] == pytest.approx(i_a)
    assert s["viewpoint_map"] == pytest.approx(v_b)
    assert s["illumination_map_micro"] == pytest.approx(1.75 / 3)
    assert s["viewpoint_map_micro"] == pytest.approx((2 / 3) / 2)
    assert s["precision_at_1"] == pytest.approx(1 / 5)
    assert s["precision_at_5"] == pytest.approx(5 / 5)
    assert s["recall_at_1"] == s["precision_at_1"]
    assert (s["total_queries_processed"], s["total_queries_excluded"], s["total_queries"]) == (5, 8, 13)
    assert (s["queries_outside_target"], s["n_scenes"], s["scenes_without_relevant"], s["n_pairs"]) == (1, 3, 1, 4)
    hist = {k: v for k, v in s.items() if k.startswith("rank_hist")}
    assert hist["rank_hist_1"] == 1 and hist["rank_hist_2"] == 1 and hist["rank_hist_3"] == 2 and hist["rank_hist_4"] == 1
    assert sum(hist.values()) == 5


def test_scene_values_and_undefined_is_nan(pairs):
    t = scene_table(pairs).set_index("scene")
    assert t.loc["i_a", "true_map"] == pytest.approx(1.75 / 3)
    assert math.isnan(t.loc["v_c", "true_map"])  # 0/0 is undefined, never 0
    assert t.loc["v_c", "true_map_including_zeros"] == 0.0
    assert t.loc["i_a", "n_query_keypoints"] == 4  # image 1's keypoints, not summed over pairs


def test_merging_scenes_is_exact(pairs):
    """Summaries from per-scene sums equal the ones from all pairs (sufficient statistics)."""
    merged = pairs.groupby("scene", as_index=False).sum(numeric_only=True)
    merged["pair"] = 0
    a, b = summarize(pairs), summarize(merged)
    for k in ("true_map_micro", "true_map_macro_by_scene", "precision_at_5", "viewpoint_map"):
        assert a[k] == pytest.approx(b[k], rel=1e-15)


def test_metadata_string_is_key_value(pairs):
    s = metadata_string(summarize(pairs), scene_table(pairs))
    assert s.startswith("true_map_micro=0.4833;") and "i_a_true_map=0.5833;" in s and s.endswith(";")


def _ver_rows():
    # three scenes; v_c has no verification positive (its AP is excluded from the means)
    base = dict(n_target_keypoints=100, n_distractor_scenes=2, n_distractors=40, verification_num_negatives=10,
                retrieval_num_hard_negatives=50, retrieval_num_distractors=400)
    rows = [
        dict(scene="i_a", n_queries=10, verification_num_positives=5, verification_ap_step=0.6, verification_ap_tie_aware=0.61,
             verification_ap_vlfeat=0.62, verification_ap_trapezoid=0.59, verification_ap_quantized=0.5,
             retrieval_n_queries_with_positive=4, retrieval_sum_ap_negative=2.0, retrieval_sum_ap_ignore=3.0,
             retrieval_num_true_positives=9, **base),
        dict(scene="v_b", n_queries=20, verification_num_positives=3, verification_ap_step=0.9, verification_ap_tie_aware=0.9,
             verification_ap_vlfeat=0.9, verification_ap_trapezoid=0.88, verification_ap_quantized=0.8,
             retrieval_n_queries_with_positive=6, retrieval_sum_ap_negative=1.0, retrieval_sum_ap_ignore=5.0,
             retrieval_num_true_positives=7, **base),
        dict(scene="v_c", n_queries=5, verification_num_positives=0, verification_ap_step=float("nan"),
             verification_ap_tie_aware=float("nan"), verification_ap_vlfeat=float("nan"), verification_ap_trapezoid=float("nan"),
             verification_ap_quantized=float("nan"), retrieval_n_queries_with_positive=0, retrieval_sum_ap_negative=0.0,
             retrieval_sum_ap_ignore=0.0, retrieval_num_true_positives=0, **base),
    ]
    from descbench.metrics.ap import verification_ap_columns

    for r in rows:  # an AP convention of the registry not written out above
        for c in verification_ap_columns():
            r.setdefault(c, 0.5 if r["verification_num_positives"] else float("nan"))
    return pd.DataFrame(rows)


def test_verification_summary_hand_worked():
    from descbench.metrics.aggregate import verification_scene_values, verification_summary

    s = verification_summary(_ver_rows(), "step", "negative", pooled_ap=0.7)
    assert s["keypoint_verification_ap"] == pytest.approx((0.6 + 0.9) / 2)
    assert s["verification_viewpoint_ap"] == pytest.approx(0.9)  # v_c has no positive
    assert s["verification_illumination_ap"] == pytest.approx(0.6)
    assert s["keypoint_verification_ap_vlfeat"] == pytest.approx(0.76)
    assert s["keypoint_verification_quantized_gap"] == pytest.approx(0.65 - 0.75)
    assert s["keypoint_verification_ap_pooled"] == 0.7
    assert s["keypoint_retrieval_ap"] == pytest.approx(3.0 / 10)  # micro over queries with R >= 1
    assert s["keypoint_retrieval_ap_hard_ignored"] == pytest.approx(8.0 / 10)
    assert s["keypoint_retrieval_ap_including_zeros"] == pytest.approx(3.0 / 35)
    assert s["retrieval_viewpoint_ap"] == pytest.approx(1.0 / 6)
    assert s["retrieval_illumination_ap"] == pytest.approx(2.0 / 4)
    assert s["verification_scenes_without_positive"] == 1 and s["retrieval_num_positives_descbench"] == 16
    assert s["retrieval_num_hard_negatives_descbench"] == 150 and s["retrieval_num_distractors"] == 1200
    # the workbench's names mean the workbench's counts: absent without verification.convention: workbench
    assert "retrieval_num_true_positives" not in s and "retrieval_num_hard_negatives" not in s
    ign = verification_summary(_ver_rows(), "tie_aware", "ignore", pooled_ap=float("nan"))
    assert ign["keypoint_retrieval_ap"] == pytest.approx(0.8) and ign["keypoint_verification_ap"] == pytest.approx(0.755)
    per_scene = verification_scene_values(_ver_rows(), "step", "negative")
    assert per_scene.keypoint_retrieval_ap.tolist()[:2] == pytest.approx([0.5, 1 / 6])
    assert np.isnan(per_scene.keypoint_verification_ap.iloc[2])
    # the counts: sums over scenes, the fewest distractor scenes of any scene
    assert (s["verification_num_positives"], s["verification_num_negatives"]) == (8, 30)
    assert (s["retrieval_queries_with_positive"], s["n_distractor_scenes_min"]) == (10, 2)
    assert s["keypoint_retrieval_ap_hard_negative"] == pytest.approx(3.0 / 10)  # named after its convention
    assert per_scene.n_distractor_scenes.tolist() == [2, 2, 2] and per_scene.n_distractors.tolist() == [40, 40, 40]
    assert per_scene.n_distractor_scenes.dtype == np.int64 and per_scene.n_distractors.dtype == np.int64
    assert "workbench_verification_ap" not in per_scene  # only with verification.convention: workbench
    # one row per scene sorted by name, whatever the input order
    assert verification_scene_values(_ver_rows().iloc[::-1], "step", "negative").scene.tolist() == ["i_a", "v_b", "v_c"]
    # a scene with a single positive has an AP: it is in the mean
    one = _ver_rows()
    one.loc[1, "verification_num_positives"] = 1
    assert verification_summary(one, "step", "negative", 0.7)["keypoint_verification_ap"] == pytest.approx((0.6 + 0.9) / 2)
    assert verification_summary(_ver_rows().iloc[:0], "step", "negative", float("nan"))["n_distractor_scenes_min"] == 0


def test_pooled_verification_ap_concatenates_lists_in_order():
    from sklearn.metrics import average_precision_score

    from descbench.metrics.aggregate import pooled_verification_ap

    a = (np.array([1.0, 2.0, 3.0]), np.array([1, -1, 1], np.int8))
    b = (np.array([2.0, 0.5]), np.array([1, -1], np.int8))
    d = np.array([1.0, 2.0, 3.0, 2.0, 0.5])
    y = np.array([1, 0, 1, 1, 0])
    assert pooled_verification_ap([a, b], "step") == pytest.approx(average_precision_score(y, -d))
    # vlfeat breaks the tie at 2.0 by list order: the -1 of scene a comes before the +1 of scene b
    # ranking: 0.5(-) 1(+) 2(-) 2(+) 3(+): precision at positives 1/2, 2/4, 3/5
    assert pooled_verification_ap([a, b], "vlfeat") == pytest.approx((1 / 2 + 2 / 4 + 3 / 5) / 3)


def test_matching_summary_hand_worked():
    from descbench.metrics.aggregate import matching_summary

    pairs = pd.DataFrame({
        "scene": ["i_a", "i_a", "v_b"],
        "pair": [2, 3, 2],
        "n_keypoints_1": [10, 10, 30], "n_keypoints_2": [20, 10, 10],
        "n_matches": [4, 0, 10],
        "precision": [0.5, 0.0, 0.9],
        "mma_at_1": [0.25, 0.0, 0.5], "mma_at_3": [0.5, 0.0, 0.9],
        "matching_score": [0.2, 0.0, 0.3],
        "repeatability": [0.5, float("nan"), 0.7],
        "corner_error": [0.5, float("inf"), 4.0],
    })
    clf = pd.DataFrame({"matcher": ["nn", "nn", "nn"], "auc": [0.8, 0.6, float("nan")], "best_j": [0.5, 0.3, float("nan")],
                        "best_j_tpr": [0.6, 0.4, float("nan")], "best_j_fpr": [0.1, 0.1, float("nan")]})
    s = matching_summary(pairs, clf, [1, 3], [1, 3, 5], [3, 5])
    assert s["mean_precision"] == pytest.approx(1.4 / 3)  # the pair without matches counts as 0
    assert s["legacy_macro_precision_by_scene"] == pytest.approx((0.25 + 0.9) / 2)
    assert s["mma_at_1"] == pytest.approx(0.75 / 3) and s["mma_i_at_3"] == pytest.approx(0.25) and s["mma_v_at_3"] == pytest.approx(0.9)
    assert s["mean_keypoints_per_pair"] == pytest.approx((15 + 10 + 20) / 3) and s["mean_matches"] == pytest.approx(14 / 3)
    # D2-Net: every image once: i_a's image 1 (10), its images 2 and 3 (20, 10); v_b's image 1 (30), image 2 (10)
    assert s["features_per_image_d2net"] == pytest.approx((10 + 20 + 10 + 30 + 10) / 5)
    assert s["repeatability"] == pytest.approx(0.6)
    assert s["pairs_without_matches"] == 1 and s["pairs_without_keypoints"] == 0
    assert [s["homography_accuracy_at_1"], s["homography_accuracy_at_3"], s["homography_accuracy_at_5"]] == pytest.approx([1 / 3, 1 / 3, 2 / 3])
    # LoFTR AUC at 3 px: errors below 3 = [0.5]; area = 0.5*(1/3)/2 + 2.5*(1/3) = 0.9167/3 px
    assert s["homography_auc_at_3"] == pytest.approx((0.5 * (1 / 3) / 2 + 2.5 * (1 / 3)) / 3)
    assert s["homography_failures"] == 1
    assert s["classifier_nn_auc"] == pytest.approx(0.7) and s["classifier_nn_best_j"] == pytest.approx(0.4)
    # the workbench's mean_average_precision is the true mAP: no matching column carries its name
    assert "mean_average_precision" not in s


def test_matching_scene_values_and_classifier_rates_by_hand():
    """Per-scene matching values under their column names, sorted by scene; a pair with a single
    keypoint in an image has data, one with none has not; a corner error of exactly 3 px is
    accurate at 3 px; the classifier's rates at the best threshold are means over pairs."""
    from descbench.metrics.aggregate import matching_scene_values, matching_summary

    pairs = pd.DataFrame({
        "scene": ["v_b", "i_a", "i_a", "v_b"],
        "pair": [2, 2, 3, 3],
        "n_keypoints_1": [1, 10, 10, 1], "n_keypoints_2": [5, 1, 0, 5],
        "n_matches": [1, 1, 0, 0],
        "precision": [1.0, 0.0, 0.0, 0.0],
        "mma_at_3": [1.0, 0.0, 0.0, 0.0],
        "matching_score": [0.25, 0.5, 0.0, 0.0],
        "repeatability": [0.5, 0.25, 0.0, 0.25],
        "corner_error": [3.0, 7.0, 1.0, 2.0],
    })
    got = matching_scene_values(pairs)
    assert got.columns.tolist() == ["scene", "mean_precision", "matching_score", "repeatability", "mean_matches", "mma_at_3_sum",
                                    "n_mma_pairs", "homography_accurate_at_3", "n_matching_pairs"]
    assert got.scene.tolist() == ["i_a", "v_b"]
    # i_a's pair 3 has no keypoint in image 3: no data (its 1 px corner error is not counted)
    np.testing.assert_array_equal(got.mean_precision, [0.0, 0.5])
    np.testing.assert_array_equal(got.matching_score, [0.5, 0.125])
    np.testing.assert_array_equal(got.repeatability, [0.25, 0.375])
    np.testing.assert_array_equal(got.mean_matches, [1.0, 0.5])
    np.testing.assert_array_equal(got.mma_at_3_sum, [0.0, 1.0])
    assert got.n_mma_pairs.tolist() == [1, 2] and got.n_matching_pairs.tolist() == [1, 2]
    assert got.homography_accurate_at_3.tolist() == [0, 2]
    clf = pd.DataFrame({"matcher": ["nn", "nn", "ratio"], "auc": [0.8, 0.6, 0.5], "best_j": [0.5, 0.3, 0.1],
                        "best_j_tpr": [0.6, 0.4, 0.7], "best_j_fpr": [0.1, 0.2, 0.05]})
    s = matching_summary(pairs, clf, [3], [3], [3])
    assert s["pairs_without_keypoints"] == 1 and s["pairs_without_matches"] == 1
    assert s["classifier_nn_best_j_tpr"] == pytest.approx(0.5) and s["classifier_nn_best_j_fpr"] == pytest.approx(0.15)
    assert s["classifier_ratio_best_j_tpr"] == pytest.approx(0.7) and s["classifier_ratio_best_j_fpr"] == pytest.approx(0.05)


def test_pooled_verification_ap_without_a_positive_or_an_item_is_nan():
    from descbench.metrics.aggregate import pooled_verification_ap

    neg = (np.array([1.0, 2.0]), np.array([-1, -1], np.int8))
    assert np.isnan(pooled_verification_ap([neg], "step"))
    assert np.isnan(pooled_verification_ap([(np.zeros(0), np.zeros(0, np.int8))], "step"))
    # one positive among negatives (and an item labelled 0, which is not a positive)
    one = (np.array([1.0, 2.0, 0.5]), np.array([-1, 1, 0], np.int8))
    assert pooled_verification_ap([one], "step") == pytest.approx(1 / 3)
    # positives only, and a single item: AP 1
    assert pooled_verification_ap([(np.array([0.5]), np.array([1], np.int8))], "step") == 1.0
    assert pooled_verification_ap([(np.array([0.5, 0.7]), np.array([1, 1], np.int8))], "vlfeat") == 1.0


# ----------------------------------------------------------------------------- the workbench's "with zeros" maps


def test_viewpoint_and_illumination_maps_with_zeros_by_hand(pairs):
    s = summarize(pairs)
    # i_a: S = 1 + 1/2 + 1/4 over Q = 4 + 4 queries; v_b: S = 2/3 over Q = 2; v_c: S = 0 over Q = 3
    assert s["illumination_map_including_zeros"] == pytest.approx(1.75 / 8)
    # v_c has no R >= 1 query: viewpoint_map leaves it out, the with-zeros map counts it as 0
    assert s["viewpoint_map"] == pytest.approx(1 / 3)
    assert s["viewpoint_map_including_zeros"] == pytest.approx((1 / 3 + 0) / 2)
    # a scene without any query (image 1 empty: Q = 0) is in neither
    more = pd.concat([pairs, pd.DataFrame([row("v_d", 2, 0, [])])], ignore_index=True)
    assert summarize(more)["viewpoint_map_including_zeros"] == pytest.approx(1 / 6)
    # no i_ scene: no data (NaN), never 0
    assert math.isnan(summarize(pairs[pairs.scene != "i_a"])["illumination_map_including_zeros"])


def workbench_category_including_zeros(ap: dict[str, list[float]], excluded: dict[str, int], first: str) -> float:
    """The C++ workbench's ExperimentMetrics computeCategoryIncludingZeros, written out: over the
    scenes of the category (name starting with ``first``) that have a query, the mean of
    sum(AP) / (queries with R >= 1 + queries with R = 0)."""
    values = []
    for scene in sorted(set(ap) | set(excluded)):
        if not scene.startswith(first):
            continue
        total = len(ap.get(scene, [])) + excluded.get(scene, 0)
        if total:
            values.append(sum(ap.get(scene, [])) / total)
    return sum(values) / len(values) if values else float("nan")


def test_maps_with_zeros_equal_the_workbench_formula_on_random_queries():
    rng = np.random.default_rng(3)
    for _ in range(20):
        rows, ap, excluded = [], {}, {}
        for scene in [f"{c}_{i}" for c in "iv" for i in range(int(rng.integers(1, 4)))]:
            for pair in range(2, 7):
                ranks = rng.integers(1, 20, size=int(rng.integers(0, 6))).tolist()
                n_zero = int(rng.integers(0, 4))
                rows.append(row(scene, pair, len(ranks) + n_zero, ranks))
                ap.setdefault(scene, []).extend(1 / r for r in ranks)
                excluded[scene] = excluded.get(scene, 0) + n_zero
        s = summarize(pd.DataFrame(rows))
        assert s["viewpoint_map_including_zeros"] == pytest.approx(workbench_category_including_zeros(ap, excluded, "v"))
        assert s["illumination_map_including_zeros"] == pytest.approx(workbench_category_including_zeros(ap, excluded, "i"))


# ----------------------------------------------------------------------------- retrieval counts under each name


def test_retrieval_counts_workbench_names_hold_the_workbench_counts():
    """One query at (10, 10); image 2 (H = identity) has three SIFT-like duplicates at (10, 10) and
    one keypoint at (30, 30); one distractor scene with 2 drawn keypoints.

    descbench (gt: closest): +1 = the duplicate of lowest index (1), 0 = the other 3, -1 = 2.
    The workbench (isCorrectMatch): +1 = every keypoint at the nearest distance (the 3
    duplicates), 0 = the far one (1), -1 = 2."""
    from descbench.metrics.aggregate import verification_summary
    from descbench.metrics.bojanic import BojanicParams, Distractors, Target, score_scene_tasks

    q_xy, q_desc = np.array([[10.0, 10.0]]), np.array([[0.0, 1.0]], np.float32)
    t = Target(np.array([[10.0, 10.0], [10.0, 10.0], [10.0, 10.0], [30.0, 30.0]]),
               np.array([[0.0, 1.0], [1.0, 0.0], [0.6, 0.8], [0.8, 0.6]], np.float32), np.eye(3), (50, 50))
    dis = [Distractors("i_o", 1, np.array([0, 1]), np.array([[1.0, 1.0], [-1.0, 0.0]], np.float32))]
    counts = {}
    for convention in ("descbench", "workbench"):
        st = score_scene_tasks(q_xy, q_desc, [t], dis, BojanicParams(gt="closest", convention=convention)).stats
        counts[convention] = verification_summary(pd.DataFrame([{"scene": "v_x", **st}]), "step", "negative", float("nan"))
    d, w = counts["descbench"], counts["workbench"]
    assert (d["retrieval_num_positives_descbench"], d["retrieval_num_hard_negatives_descbench"],
            d["retrieval_num_distractors"]) == (1, 3, 2)
    assert "retrieval_num_true_positives" not in d
    assert (w["retrieval_num_true_positives"], w["retrieval_num_hard_negatives"], w["retrieval_num_distractors"]) == (3, 1, 2)
    assert w["retrieval_num_true_positives"] == w["workbench_num_positives"]
    # descbench's own counts are the same under both conventions
    assert (w["retrieval_num_positives_descbench"], w["retrieval_num_hard_negatives_descbench"]) == (1, 3)


# ----------------------------------------------------------------------------- pairs between any two images


def test_pairs_between_any_images_count_each_query_images_keypoints_once():
    """Pairs (a, b) with a != 1 (a scene's pair list; the column ``query_image``): a scene's query
    keypoints are summed over its query images, each once (not over pairs, not the largest); the
    scene's sums and ratios are as for (1, k) pairs; scenes come out sorted by name."""
    rows = [dict(row("v_b", 2, 5, [3]), query_image=1),       # one relevant query: AP 1/3 over R = 1
            dict(row("i_a", 2, 4, [1, 2]), query_image=1),    # image 1: 4 keypoints in both of its pairs
            dict(row("i_a", 3, 4, [4]), query_image=1),
            dict(row("i_a", 3, 6, [1]), query_image=2)]       # image 2 as the query: 6 keypoints
    t = scene_table(pd.DataFrame(rows))
    assert t.scene.tolist() == ["i_a", "v_b"]
    t = t.set_index("scene")
    assert t.loc["i_a", "n_query_keypoints"] == 4 + 6 and t.loc["v_b", "n_query_keypoints"] == 5
    assert t["n_query_keypoints"].dtype == np.int64 and t["n_queries"].dtype == np.int64
    assert t.loc["i_a", "sum_ap"] == pytest.approx(1 + 1 / 2 + 1 / 4 + 1)
    assert t.loc["i_a", "true_map"] == pytest.approx((1 + 1 / 2 + 1 / 4 + 1) / 4)
    assert t.loc["v_b", "true_map"] == pytest.approx(1 / 3) and t.loc["v_b", "precision_at_5"] == 1.0  # R = 1
    assert t.loc["v_b", "precision_at_1"] == 0.0


def test_features_per_image_counts_every_image_once_with_any_pairs():
    """D2-Net's features per image with pairs between any two images: each (scene, image) once,
    whichever side of which pairs it is on."""
    from descbench.metrics.aggregate import features_per_image

    # scene s: images 1, 2, 3 with 10, 20, 30 keypoints in pairs (1, 2), (1, 3), (2, 3); scene t: (1, 2) with 5, 7
    pairs = pd.DataFrame({"scene": ["s", "s", "s", "t"], "query_image": [1, 1, 2, 1], "pair": [2, 3, 3, 2],
                          "n_keypoints_1": [10, 10, 20, 5], "n_keypoints_2": [20, 30, 30, 7]})
    assert features_per_image(pairs) == pytest.approx((10 + 20 + 30 + 5 + 7) / 5)
    assert features_per_image(pairs.iloc[3:]) == pytest.approx((5 + 7) / 2)  # a single pair
    assert math.isnan(features_per_image(pairs.iloc[:0]))
    # (1, k) pairs without the column: image 1 once per scene, every image k
    ref = pairs.drop(columns="query_image").iloc[[0, 1, 3]]
    assert features_per_image(ref) == pytest.approx((10 + 20 + 30 + 5 + 7) / 5)


def test_rank_histogram_bins_are_named_by_their_ranks():
    """One bin per HIT_KS step: a single rank where the step is 1 (rank_hist_3), a range where it is
    wider (rank_hist_6_10), and the ranks beyond the last k; the bins count every relevant query once."""
    s = summarize(pd.DataFrame([row("i_a", 2, 6, [1, 4, 7, 30, 2000])]))
    hist = {k: v for k, v in s.items() if k.startswith("rank_hist")}
    assert HIT_KS == (1, 2, 3, 4, 5, 10, 20, 50, 100, 1000)
    assert list(hist) == ["rank_hist_1", "rank_hist_2", "rank_hist_3", "rank_hist_4", "rank_hist_5", "rank_hist_6_10",
                          "rank_hist_11_20", "rank_hist_21_50", "rank_hist_51_100", "rank_hist_101_1000", "rank_hist_gt_1000"]
    assert (hist["rank_hist_1"], hist["rank_hist_4"], hist["rank_hist_6_10"], hist["rank_hist_21_50"]) == (1, 1, 1, 1)
    assert hist["rank_hist_gt_1000"] == 1 and sum(hist.values()) == 5


def test_features_per_image_counts_every_query_image_of_a_scene():
    """Each query image of a scene counts once under its own number: pairs (1, 2) and (3, 4)
    are four images, although no query image is also a target (so the query side cannot be
    merged into one image per scene)."""
    from descbench.metrics.aggregate import features_per_image

    pairs = pd.DataFrame({"scene": ["s", "s"], "query_image": [1, 3], "pair": [2, 4],
                          "n_keypoints_1": [10, 30], "n_keypoints_2": [20, 40]})
    assert features_per_image(pairs) == pytest.approx((10 + 20 + 30 + 40) / 4)


def test_count_columns_stay_int64_without_query_image_and_with_empty_images():
    """Counts are integers in the per-scene tables: n_query_keypoints for (1, k) pairs (no
    ``query_image`` column) and n_matching_pairs (pairs with keypoints in both images)."""
    from descbench.metrics.aggregate import matching_scene_values

    t = scene_table(pd.DataFrame([row("v_b", 2, 5, [3]), row("i_a", 2, 4, [1])]))
    assert t.n_query_keypoints.dtype == np.int64 and t.n_query_keypoints.tolist() == [4, 5]
    pairs = pd.DataFrame({"scene": ["i_a", "i_a"], "pair": [2, 3], "n_keypoints_1": [3, 3], "n_keypoints_2": [2, 0],
                          "n_matches": [1, 0], "precision": [1.0, 0.0], "matching_score": [0.5, 0.0],
                          "repeatability": [0.5, 0.0], "corner_error": [1.0, 2.0]})
    got = matching_scene_values(pairs)
    assert got.n_matching_pairs.dtype == np.int64 and got.n_matching_pairs.tolist() == [1]


def test_matching_summary_reports_the_thresholds_it_is_given():
    """Homography accuracy and AUC at the configured thresholds, not the functions' defaults
    ((1, 3, 5) and (3, 5, 10)): errors 0.5, failure, 4.0 px. Accuracy at 2 px: 1/3, at 7 px:
    2/3. LoFTR's AUC at 4 px (errors strictly below 4 count): the recall curve is 0 up to 0.5 px,
    1/3 from there, so its area is 0.5 * (1/3) / 2 + 3.5 * (1/3) = 1.25, over 4 px: 0.3125."""
    from descbench.metrics.aggregate import matching_summary

    pairs = pd.DataFrame({"scene": ["i_a", "i_a", "v_b"], "pair": [2, 3, 2],
                          "n_keypoints_1": [10, 10, 30], "n_keypoints_2": [20, 10, 10], "n_matches": [4, 1, 10],
                          "precision": [0.5, 0.0, 0.9], "mma_at_3": [0.5, 0.0, 0.9], "matching_score": [0.2, 0.0, 0.3],
                          "repeatability": [0.5, 0.5, 0.7], "corner_error": [0.5, float("inf"), 4.0]})
    s = matching_summary(pairs, None, [3], [2.0, 7.0], [4.0])
    assert [k for k in s if k.startswith("homography_a")] == ["homography_accuracy_at_2", "homography_accuracy_at_7",
                                                               "homography_auc_at_4"]
    assert s["homography_accuracy_at_2"] == pytest.approx(1 / 3) and s["homography_accuracy_at_7"] == pytest.approx(2 / 3)
    assert s["homography_auc_at_4"] == pytest.approx(0.3125)


def test_classifier_columns_follow_the_matchers_order():
    """The classifier's columns come per matcher in the order of its rows (the config's
    ``classifier_matchers`` order), not sorted by name."""
    from descbench.metrics.aggregate import matching_summary

    pairs = pd.DataFrame({"scene": ["i_a"], "pair": [2], "n_keypoints_1": [3], "n_keypoints_2": [2], "n_matches": [1],
                          "precision": [1.0], "mma_at_3": [1.0], "matching_score": [0.5], "repeatability": [0.5],
                          "corner_error": [1.0]})
    clf = pd.DataFrame({"matcher": ["threshold", "mnn", "threshold", "mnn"], "auc": [0.8, 0.6, 0.7, 0.5],
                        "best_j": [0.5, 0.3, 0.4, 0.2], "best_j_tpr": [0.6, 0.4, 0.5, 0.3], "best_j_fpr": [0.1, 0.2, 0.1, 0.2]})
    s = matching_summary(pairs, clf, [3], [3], [3])
    assert [k for k in s if k.startswith("classifier_")] == [
        f"classifier_{m}_{v}" for m in ("threshold", "mnn") for v in ("auc", "best_j", "best_j_tpr", "best_j_fpr")]
    assert s["classifier_threshold_auc"] == pytest.approx(0.75) and s["classifier_mnn_best_j_fpr"] == pytest.approx(0.2)


def test_metadata_string_formats_floats_only_and_leaves_out_the_histogram(pairs):
    """The seed's metadata string: floats with 4 decimals, counts as integers, no rank histogram."""
    s = metadata_string(summarize(pairs), scene_table(pairs))
    assert ";total_queries=13;" in s and ";n_pairs=4;" in s
    assert "rank_hist" not in s


def test_pooled_verification_ap_of_no_scene_is_nan():
    from descbench.metrics.aggregate import pooled_verification_ap

    assert math.isnan(pooled_verification_ap([], "step"))


def test_verification_scene_ap_needs_a_positive_whatever_the_file_holds():
    """A scene's verification AP is NaN without a positive even where its file holds a number
    (0 here), and a scene with exactly one positive keeps its AP."""
    from descbench.metrics.aggregate import verification_scene_values

    rows = _ver_rows()
    rows.loc[2, "verification_ap_step"] = 0.0  # v_c: no positive
    rows.loc[1, "verification_num_positives"] = 1  # v_b: one positive
    got = verification_scene_values(rows, "step", "negative").set_index("scene").keypoint_verification_ap
    assert got["v_b"] == 0.9 and math.isnan(got["v_c"]) and got["i_a"] == 0.6
