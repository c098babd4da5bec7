"""Every retrieval aggregate on a hand-worked example (integer ranks, no ties)."""

from __future__ import annotations

import math

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
