"""Aggregates of keypoint retrieval (protocols section 4), computed from per-pair sufficient
statistics (sums and counts, schema ``PAIRS``), so merging scenes gives the exact dataset value.

Let, for a set of pairs, ``S = sum sum_ap``, ``R1 = sum n_relevant_queries`` (queries with R >= 1)
and ``Q = sum n_queries`` (all image-1 keypoints, R = 0 included).

- ``true_map_micro = S / R1``; ``true_map_micro_including_zeros = S / Q`` (R = 0 counts as AP 0).
- scene value ``S_s / R1_s``; ``true_map_macro_by_scene`` = mean of scene values over scenes with
  R1_s > 0 (scenes without any relevant query are counted in ``scenes_without_relevant``);
  ``true_map_macro_by_scene_including_zeros`` = mean of ``S_s / Q_s`` over scenes with Q_s > 0.
- ``viewpoint_map`` / ``illumination_map``: the macro over ``v_`` / ``i_`` scenes; ``*_micro``
  the micro over their pairs.
- ``precision_at_K = sum sum_hit_at_K / R1`` (fraction of R >= 1 queries whose first relevant
  item ranks within K, the seed's definition); ``recall_at_K = sum sum_recall_at_K / R1``.
- ``rank_hist_*``: number of R >= 1 queries whose first relevant item has rank in the bin
  (fractional under the ``expected`` tie policy).
An undefined ratio (0/0) is NaN, never 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from descbench.io import HIT_KS

REPORT_KS = (1, 5, 10)


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den > 0 else float("nan")


def scene_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per-scene sums and values (one row per scene, sorted by name)."""
    sums = pairs.drop(columns=["pair"]).groupby("scene", sort=True).sum(numeric_only=True)
    out = pd.DataFrame(index=sums.index)
    out["true_map"] = [_ratio(s, r) for s, r in zip(sums.sum_ap, sums.n_relevant_queries)]
    out["true_map_including_zeros"] = [_ratio(s, q) for s, q in zip(sums.sum_ap, sums.n_queries)]
    for k in REPORT_KS:
        out[f"precision_at_{k}"] = [_ratio(h, r) for h, r in zip(sums[f"sum_hit_at_{k}"], sums.n_relevant_queries)]
    for c in ("n_queries", "n_relevant_queries", "n_outside", "n_target_keypoints"):
        out[c] = sums[c].astype(np.int64)
    # image 1's keypoints are the same in every pair of the scene: not a sum
    out["n_query_keypoints"] = pairs.groupby("scene", sort=True)["n_query_keypoints"].max().astype(np.int64)
    return out.reset_index()


def _macro(values: pd.Series) -> float:
    v = values.dropna()
    return float(v.mean()) if len(v) else float("nan")


def summarize(pairs: pd.DataFrame) -> dict:
    """Every retrieval aggregate of one (keypoint set, descriptor) from its per-pair rows."""
    t = pairs.sum(numeric_only=True)
    S, R1, Q = t.sum_ap, t.n_relevant_queries, t.n_queries
    scenes = scene_table(pairs)
    is_v = scenes.scene.str.startswith("v_")
    is_i = scenes.scene.str.startswith("i_")
    pv = pairs[pairs.scene.str.startswith("v_")].sum(numeric_only=True)
    pi = pairs[pairs.scene.str.startswith("i_")].sum(numeric_only=True)
    out = {
        "true_map_micro": _ratio(S, R1),
        "true_map_macro_by_scene": _macro(scenes.true_map),
        "true_map_micro_including_zeros": _ratio(S, Q),
        "true_map_macro_by_scene_including_zeros": _macro(scenes.true_map_including_zeros),
        "viewpoint_map": _macro(scenes.true_map[is_v]),
        "illumination_map": _macro(scenes.true_map[is_i]),
        "viewpoint_map_micro": _ratio(pv.get("sum_ap", 0), pv.get("n_relevant_queries", 0)),
        "illumination_map_micro": _ratio(pi.get("sum_ap", 0), pi.get("n_relevant_queries", 0)),
    }
    for k in REPORT_KS:
        out[f"precision_at_{k}"] = _ratio(t[f"sum_hit_at_{k}"], R1)
    for k in REPORT_KS:
        out[f"recall_at_{k}"] = _ratio(t[f"sum_recall_at_{k}"], R1)
    out.update(
        total_queries_processed=int(R1),
        total_queries_excluded=int(Q - R1),
        total_queries=int(Q),
        queries_outside_target=int(t.n_outside),
        n_scenes=int(len(scenes)),
        scenes_without_relevant=int((scenes.n_relevant_queries == 0).sum()),
        n_pairs=int(len(pairs)),
    )
    prev, lo = 0.0, 1
    for k in HIT_KS:
        cum = float(t[f"sum_hit_at_{k}"])
        out[f"rank_hist_{lo}" if lo == k else f"rank_hist_{lo}_{k}"] = cum - prev
        prev, lo = cum, k + 1
    out[f"rank_hist_gt_{HIT_KS[-1]}"] = float(R1) - prev
    return out


def metadata_string(summary: dict, scenes: pd.DataFrame) -> str:
    """The seed's ``key=value;`` metadata string (4 decimals), scene values as ``<scene>_true_map``."""
    parts = [f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items() if not k.startswith("rank_hist")]
    parts += [f"{s}_true_map={v:.4f}" for s, v in zip(scenes.scene, scenes.true_map)]
    return ";".join(parts) + ";"
